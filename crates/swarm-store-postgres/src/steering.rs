//! Steering messages: recorded, delivered once, handled, or promoted to a follow-up task.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Row, postgres::PgRow};
use swarm_domain::{
    id::{AgentId, SteeringMessageId, TaskId},
    steering::{NewSteeringMessage, SteerMode, SteeringMessage, SteeringStatus},
    task::{NewTask, Task},
    time::Timestamp,
};
use swarm_store::{SteeringRecorded, SteeringStore, StoreError, StoreResult};
use uuid::Uuid;

use crate::{PgStore, error::db, events, tasks};

macro_rules! columns {
    () => {
        "id, task_id, message, mode, status, source, created_by_agent_id, promoted_task_id, created_at, \
         delivered_at, handled_at"
    };
}

fn decode_error(error: swarm_domain::Invalid) -> sqlx::Error {
    sqlx::Error::Decode(error.0.into())
}

fn from_row(row: PgRow) -> sqlx::Result<SteeringMessage> {
    let time = |name: &str| -> sqlx::Result<Option<Timestamp>> {
        Ok(row.try_get::<Option<DateTime<Utc>>, _>(name)?.map(Timestamp::from_datetime))
    };
    let mode: String = row.try_get("mode")?;
    let status: String = row.try_get("status")?;
    Ok(SteeringMessage {
        id: SteeringMessageId::from_uuid(row.try_get("id")?),
        task_id: TaskId::from_uuid(row.try_get("task_id")?),
        message: row.try_get("message")?,
        mode: SteerMode::parse(&mode).map_err(decode_error)?,
        status: SteeringStatus::parse(&status).map_err(decode_error)?,
        source: row.try_get("source")?,
        created_by_agent_id: row.try_get::<Option<Uuid>, _>("created_by_agent_id")?.map(AgentId::from_uuid),
        promoted_task_id: row.try_get::<Option<Uuid>, _>("promoted_task_id")?.map(TaskId::from_uuid),
        created_at: Timestamp::from_datetime(row.try_get("created_at")?),
        delivered_at: time("delivered_at")?,
        handled_at: time("handled_at")?,
    })
}

async fn get(conn: &mut PgConnection, id: SteeringMessageId) -> StoreResult<Option<SteeringMessage>> {
    sqlx::query(concat!("SELECT ", columns!(), " FROM steering_messages WHERE id = $1"))
        .bind(id.as_uuid())
        .try_map(from_row)
        .fetch_optional(conn)
        .await
        .map_err(db)
}

async fn create_task(conn: &mut PgConnection, task: &NewTask, now: Timestamp) -> StoreResult<Task> {
    tasks::insert(&mut *conn, task, now).await.map_err(db)?;
    for event in task.creation_events() {
        events::insert(&mut *conn, &event, now).await?;
    }
    tasks::get_known(&mut *conn, task.id).await
}

async fn mark_handled(conn: &mut PgConnection, task_id: TaskId, now: Timestamp) -> StoreResult<u64> {
    let done = sqlx::query(
        "UPDATE steering_messages SET status = 'handled', handled_at = $1 WHERE task_id = $2 AND status = 'delivered'",
    )
    .bind(now.datetime())
    .bind(task_id.as_uuid())
    .execute(conn)
    .await
    .map_err(db)?;
    Ok(done.rows_affected())
}

impl PgStore {
    async fn record(
        &self,
        message: &NewSteeringMessage,
        follow_up: Option<&NewTask>,
        now: Timestamp,
    ) -> StoreResult<SteeringRecorded> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        // Guarded by the task's status: a message for a finished task would never be shown.
        let inserted = sqlx::query(
            "INSERT INTO steering_messages (id, task_id, message, mode, status, source, created_by_agent_id, created_at)
             SELECT $1, id, $2, $3, 'pending', $4, $5, $6 FROM tasks
             WHERE id = $7 AND status NOT IN ('completed', 'failed', 'cancelled')",
        )
        .bind(message.id.as_uuid())
        .bind(&message.message)
        .bind(message.mode.as_str())
        .bind(&message.source)
        .bind(message.created_by_agent_id.map(|id| id.as_uuid()))
        .bind(now.datetime())
        .bind(message.task_id.as_uuid())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        if inserted.rows_affected() == 1 {
            tx.commit().await.map_err(db)?;
            return Ok(SteeringRecorded::Pending(message.created(now)));
        }
        let task = tasks::get(&mut *tx, message.task_id).await?;
        let (Some(follow_up), Some(_)) = (follow_up, &task) else {
            return Ok(SteeringRecorded::TaskFinished(task.map(Box::new)));
        };
        sqlx::query(
            "INSERT INTO steering_messages (id, task_id, message, mode, status, source, created_by_agent_id,
                 promoted_task_id, created_at)
             VALUES ($1, $2, $3, $4, 'promoted', $5, $6, $7, $8)",
        )
        .bind(message.id.as_uuid())
        .bind(message.task_id.as_uuid())
        .bind(&message.message)
        .bind(message.mode.as_str())
        .bind(&message.source)
        .bind(message.created_by_agent_id.map(|id| id.as_uuid()))
        .bind(follow_up.id.as_uuid())
        .bind(now.datetime())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        let created = create_task(&mut tx, follow_up, now).await?;
        let promoted = get(&mut tx, message.id)
            .await?
            .ok_or_else(|| StoreError::Backend("a steering message just written is gone".into()))?;
        tx.commit().await.map_err(db)?;
        self.poll_cache.changed();
        Ok(SteeringRecorded::Promoted(promoted, Box::new(created)))
    }

    async fn deliver(
        &self,
        task_id: TaskId,
        modes: &[SteerMode],
        now: Timestamp,
    ) -> StoreResult<Vec<SteeringMessage>> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        mark_handled(&mut tx, task_id, now).await?;
        let modes: Vec<&str> = modes.iter().map(SteerMode::as_str).collect();
        let mut delivered = sqlx::query(concat!(
            "UPDATE steering_messages SET status = 'delivered', delivered_at = $1
             WHERE task_id = $2 AND status = 'pending' AND mode = ANY($3) RETURNING ",
            columns!()
        ))
        .bind(now.datetime())
        .bind(task_id.as_uuid())
        .bind(&modes)
        .try_map(from_row)
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        delivered.sort_by_key(|message| (message.created_at, message.id));
        Ok(delivered)
    }

    async fn promote(
        &self,
        id: SteeringMessageId,
        follow_up: &NewTask,
        now: Timestamp,
    ) -> StoreResult<Option<Task>> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        let changed = sqlx::query(
            "UPDATE steering_messages SET status = 'promoted', promoted_task_id = $1 WHERE id = $2 AND status = 'pending'",
        )
        .bind(follow_up.id.as_uuid())
        .bind(id.as_uuid())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        if changed.rows_affected() == 0 {
            return Ok(None);
        }
        let created = create_task(&mut tx, follow_up, now).await?;
        tx.commit().await.map_err(db)?;
        self.poll_cache.changed();
        Ok(Some(created))
    }
}

#[async_trait]
impl SteeringStore for PgStore {
    async fn steering_record(
        &self,
        message: &NewSteeringMessage,
        follow_up: Option<&NewTask>,
        now: Timestamp,
    ) -> StoreResult<SteeringRecorded> {
        self.record(message, follow_up, now).await
    }

    async fn steering_get(&self, id: SteeringMessageId) -> StoreResult<Option<SteeringMessage>> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        get(&mut conn, id).await
    }

    async fn steering_list(&self, task_id: TaskId) -> StoreResult<Vec<SteeringMessage>> {
        sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM steering_messages WHERE task_id = $1 ORDER BY created_at, id"
        ))
        .bind(task_id.as_uuid())
        .try_map(from_row)
        .fetch_all(&self.pool)
        .await
        .map_err(db)
    }

    async fn steering_deliver(
        &self,
        task_id: TaskId,
        modes: &[SteerMode],
        now: Timestamp,
    ) -> StoreResult<Vec<SteeringMessage>> {
        self.deliver(task_id, modes, now).await
    }

    async fn steering_mark_handled(&self, task_id: TaskId, now: Timestamp) -> StoreResult<u64> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        mark_handled(&mut conn, task_id, now).await
    }

    async fn steering_promote(
        &self,
        id: SteeringMessageId,
        follow_up: &NewTask,
        now: Timestamp,
    ) -> StoreResult<Option<Task>> {
        self.promote(id, follow_up, now).await
    }
}
