//! The living Slack message of a task: its row, claimed, posted and finalized once, each
//! by a guarded statement.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Row, postgres::PgRow};
use swarm_domain::{id::TaskId, task::Task, time::Timestamp};
use swarm_store::{SlackStatusMessage, SlackStatusStore, StoreResult};

use crate::{
    PgStore,
    error::db,
    rows::{task_from_row, task_select},
};

fn from_row(row: PgRow) -> sqlx::Result<SlackStatusMessage> {
    let finalized_at: Option<DateTime<Utc>> = row.try_get("finalized_at")?;
    Ok(SlackStatusMessage {
        task_id: TaskId::from_uuid(row.try_get("task_id")?),
        channel_id: row.try_get("channel_id")?,
        message_ts: row.try_get("message_ts")?,
        finalized_at: finalized_at.map(Timestamp::from_datetime),
        created_at: Timestamp::from_datetime(row.try_get::<DateTime<Utc>, _>("created_at")?),
    })
}

#[async_trait]
impl SlackStatusStore for PgStore {
    async fn slack_status_claim(&self, task: TaskId, channel: &str, now: Timestamp) -> StoreResult<bool> {
        let inserted = sqlx::query(
            "INSERT INTO slack_status_messages (task_id, channel_id, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (task_id) DO NOTHING",
        )
        .bind(task.as_uuid())
        .bind(channel)
        .bind(now.datetime())
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(inserted.rows_affected() == 1)
    }

    async fn slack_status_posted(&self, task: TaskId, message_ts: &str) -> StoreResult<bool> {
        let updated = sqlx::query(
            "UPDATE slack_status_messages SET message_ts = $2 WHERE task_id = $1 AND message_ts IS NULL",
        )
        .bind(task.as_uuid())
        .bind(message_ts)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(updated.rows_affected() == 1)
    }

    async fn slack_status_get(&self, task: TaskId) -> StoreResult<Option<SlackStatusMessage>> {
        sqlx::query(
            "SELECT task_id, channel_id, message_ts, finalized_at, created_at FROM slack_status_messages
             WHERE task_id = $1",
        )
        .bind(task.as_uuid())
        .try_map(from_row)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)
    }

    async fn slack_status_finalize(&self, task: TaskId, channel: &str, now: Timestamp) -> StoreResult<bool> {
        // One statement: the row is inserted finalized, or its guard takes the ending.
        let taken = sqlx::query(
            "INSERT INTO slack_status_messages (task_id, channel_id, finalized_at, created_at)
             VALUES ($1, $2, $3, $3)
             ON CONFLICT (task_id) DO UPDATE SET finalized_at = excluded.finalized_at
             WHERE slack_status_messages.finalized_at IS NULL",
        )
        .bind(task.as_uuid())
        .bind(channel)
        .bind(now.datetime())
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(taken.rows_affected() == 1)
    }

    async fn slack_status_unfinalized(&self, since: Timestamp, limit: i64) -> StoreResult<Vec<Task>> {
        sqlx::query(concat!(
            task_select!(),
            " WHERE t.slack_channel_id IS NOT NULL AND t.slack_thread_ts IS NOT NULL \
                AND t.status IN ('completed', 'failed', 'cancelled') AND t.finished_at >= $1 \
                AND NOT EXISTS (SELECT 1 FROM slack_status_messages s \
                                WHERE s.task_id = t.id AND s.finalized_at IS NOT NULL) \
                AND NOT EXISTS (SELECT 1 FROM slack_marks m WHERE m.kind = 'task_outcome' AND m.key = t.id::text) \
              ORDER BY t.finished_at, t.id LIMIT $2"
        ))
        .bind(since.datetime())
        .bind(limit)
        .try_map(task_from_row)
        .fetch_all(&self.pool)
        .await
        .map_err(db)
    }
}
