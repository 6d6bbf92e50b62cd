//! The living Slack message of a task: its row, claimed, posted and finalized once, each
//! by a guarded statement.

use async_trait::async_trait;
use rusqlite::{Connection, Row, params};
use swarm_domain::{id::TaskId, task::Task, time::Timestamp};
use swarm_store::{SlackStatusMessage, SlackStatusStore, StoreResult};

use crate::{SqliteStore, rows::Columns, sql, tasks};

fn claim(tx: &Connection, task: TaskId, channel: &str, now: Timestamp) -> StoreResult<bool> {
    let inserted = sql::execute(
        tx,
        "INSERT INTO slack_status_messages (task_id, channel_id, created_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (task_id) DO NOTHING",
        params![task.to_string(), channel, now.unix_millis()],
    )?;
    Ok(inserted == 1)
}

fn posted(tx: &Connection, task: TaskId, message_ts: &str) -> StoreResult<bool> {
    let updated = sql::execute(
        tx,
        "UPDATE slack_status_messages SET message_ts = ?2 WHERE task_id = ?1 AND message_ts IS NULL",
        params![task.to_string(), message_ts],
    )?;
    Ok(updated == 1)
}

fn finalize(tx: &Connection, task: TaskId, channel: &str, now: Timestamp) -> StoreResult<bool> {
    let inserted = sql::execute(
        tx,
        "INSERT INTO slack_status_messages (task_id, channel_id, finalized_at, created_at)
         VALUES (?1, ?2, ?3, ?3) ON CONFLICT (task_id) DO NOTHING",
        params![task.to_string(), channel, now.unix_millis()],
    )?;
    if inserted == 1 {
        return Ok(true);
    }
    let updated = sql::execute(
        tx,
        "UPDATE slack_status_messages SET finalized_at = ?2 WHERE task_id = ?1 AND finalized_at IS NULL",
        params![task.to_string(), now.unix_millis()],
    )?;
    Ok(updated == 1)
}

fn get(connection: &Connection, task: TaskId) -> StoreResult<Option<SlackStatusMessage>> {
    sql::optional(
        connection,
        "SELECT task_id, channel_id, message_ts, finalized_at, created_at FROM slack_status_messages
         WHERE task_id = ?1",
        [task.to_string()],
        from_row,
    )
}

fn unfinalized(connection: &Connection, since: Timestamp, limit: i64) -> StoreResult<Vec<Task>> {
    sql::all(
        connection,
        concat!(
            "SELECT ",
            tasks::task_columns!("t"),
            " FROM tasks t
              WHERE t.slack_channel_id IS NOT NULL AND t.slack_thread_ts IS NOT NULL
                AND t.status IN ('completed', 'failed', 'cancelled') AND t.finished_at >= ?1
                AND NOT EXISTS (SELECT 1 FROM slack_status_messages s
                                WHERE s.task_id = t.id AND s.finalized_at IS NOT NULL)
                AND NOT EXISTS (SELECT 1 FROM slack_marks m WHERE m.kind = 'task_outcome' AND m.key = t.id)
              ORDER BY t.finished_at, t.id LIMIT ?2"
        ),
        params![since.unix_millis(), limit],
        tasks::from_row,
    )
}

fn from_row(row: &Row<'_>) -> StoreResult<SlackStatusMessage> {
    let mut column = Columns::new(row);
    Ok(SlackStatusMessage {
        task_id: column.task_id("task_id")?,
        channel_id: column.take("channel_id")?,
        message_ts: column.take("message_ts")?,
        finalized_at: column.opt_timestamp("finalized_at")?,
        created_at: column.timestamp("created_at")?,
    })
}

#[async_trait]
impl SlackStatusStore for SqliteStore {
    async fn slack_status_claim(&self, task: TaskId, channel: &str, now: Timestamp) -> StoreResult<bool> {
        let channel = channel.to_string();
        self.database.write(move |tx| claim(tx, task, &channel, now)).await
    }

    async fn slack_status_posted(&self, task: TaskId, message_ts: &str) -> StoreResult<bool> {
        let message_ts = message_ts.to_string();
        self.database.write(move |tx| posted(tx, task, &message_ts)).await
    }

    async fn slack_status_get(&self, task: TaskId) -> StoreResult<Option<SlackStatusMessage>> {
        self.database.read(|connection| get(connection, task))
    }

    async fn slack_status_finalize(&self, task: TaskId, channel: &str, now: Timestamp) -> StoreResult<bool> {
        let channel = channel.to_string();
        self.database.write(move |tx| finalize(tx, task, &channel, now)).await
    }

    async fn slack_status_unfinalized(&self, since: Timestamp, limit: i64) -> StoreResult<Vec<Task>> {
        self.database.read_snapshot(move |snapshot| unfinalized(snapshot, since, limit)).await
    }
}
