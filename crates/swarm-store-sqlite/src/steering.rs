//! Steering messages: recorded, delivered once, handled, or promoted to a follow-up task.

use async_trait::async_trait;
use rusqlite::{Connection, Row, params};
use swarm_domain::{
    id::{SteeringMessageId, TaskId},
    steering::{NewSteeringMessage, SteerMode, SteeringMessage, SteeringStatus},
    task::{NewTask, Task},
    time::Timestamp,
};
use swarm_store::{SteeringRecorded, SteeringStore, StoreResult};

use crate::{
    SqliteStore,
    error::corrupt,
    rows::Columns,
    sql::{self, Sql},
    tasks,
};

const COLUMNS: &str = "id, task_id, message, mode, status, source, created_by_agent_id, promoted_task_id, \
                       created_at, delivered_at, handled_at";

fn from_row(row: &Row<'_>) -> StoreResult<SteeringMessage> {
    // In the order of COLUMNS: `Columns` reads them one after the other.
    let mut column = Columns::new(row);
    let id: String = column.take("id")?;
    let task_id = column.task_id("task_id")?;
    let message = column.take("message")?;
    let mode: String = column.take("mode")?;
    let status: String = column.take("status")?;
    Ok(SteeringMessage {
        id: SteeringMessageId::parse(&id).map_err(|error| corrupt(error.0))?,
        task_id,
        message,
        mode: SteerMode::parse(&mode).map_err(|error| corrupt(error.0))?,
        status: SteeringStatus::parse(&status).map_err(|error| corrupt(error.0))?,
        source: column.take("source")?,
        created_by_agent_id: column.opt_agent_id("created_by_agent_id")?,
        promoted_task_id: column.opt_task_id("promoted_task_id")?,
        created_at: column.timestamp("created_at")?,
        delivered_at: column.opt_timestamp("delivered_at")?,
        handled_at: column.opt_timestamp("handled_at")?,
    })
}

fn get(connection: &Connection, id: SteeringMessageId) -> StoreResult<Option<SteeringMessage>> {
    let query = format!("SELECT {COLUMNS} FROM steering_messages WHERE id = ?1");
    sql::optional(connection, &query, params![id.to_string()], from_row)
}

fn list(connection: &Connection, task_id: TaskId) -> StoreResult<Vec<SteeringMessage>> {
    let query = format!("SELECT {COLUMNS} FROM steering_messages WHERE task_id = ?1 ORDER BY created_at, id");
    sql::all(connection, &query, params![task_id.to_string()], from_row)
}

fn record(
    tx: &Connection,
    message: &NewSteeringMessage,
    follow_up: Option<&NewTask>,
    now: Timestamp,
) -> StoreResult<SteeringRecorded> {
    // Guarded by the task's status: a message for a finished task would never be shown.
    let inserted = sql::execute(
        tx,
        "INSERT INTO steering_messages (id, task_id, message, mode, status, source, created_by_agent_id, created_at)
         SELECT ?1, id, ?2, ?3, 'pending', ?4, ?5, ?6 FROM tasks
         WHERE id = ?7 AND status <> 'completed' AND status <> 'failed' AND status <> 'cancelled'",
        params![
            message.id.to_string(),
            message.message,
            message.mode.as_str(),
            message.source,
            message.created_by_agent_id.map(|id| id.to_string()),
            now.unix_millis(),
            message.task_id.to_string(),
        ],
    )?;
    if inserted == 1 {
        return Ok(SteeringRecorded::Pending(message.created(now)));
    }
    let task = tasks::get(tx, message.task_id)?;
    let (Some(follow_up), Some(_)) = (follow_up, &task) else {
        return Ok(SteeringRecorded::TaskFinished(task.map(Box::new)));
    };
    sql::execute(
        tx,
        "INSERT INTO steering_messages (id, task_id, message, mode, status, source, created_by_agent_id,
             promoted_task_id, created_at)
         VALUES (?1, ?2, ?3, ?4, 'promoted', ?5, ?6, ?7, ?8)",
        params![
            message.id.to_string(),
            message.task_id.to_string(),
            message.message,
            message.mode.as_str(),
            message.source,
            message.created_by_agent_id.map(|id| id.to_string()),
            follow_up.id.to_string(),
            now.unix_millis(),
        ],
    )?;
    let created = tasks::create(tx, follow_up, now)?;
    let promoted =
        get(tx, message.id)?.ok_or_else(|| corrupt("a steering message just written is gone".to_string()))?;
    Ok(SteeringRecorded::Promoted(promoted, Box::new(created)))
}

fn mark_handled(tx: &Connection, task_id: TaskId, now: Timestamp) -> StoreResult<u64> {
    let changed = sql::execute(
        tx,
        "UPDATE steering_messages SET status = 'handled', handled_at = ?1 WHERE task_id = ?2 AND status = 'delivered'",
        params![now.unix_millis(), task_id.to_string()],
    )?;
    Ok(changed as u64)
}

fn deliver(
    tx: &Connection,
    task_id: TaskId,
    modes: &[SteerMode],
    now: Timestamp,
) -> StoreResult<Vec<SteeringMessage>> {
    mark_handled(tx, task_id, now)?;
    if modes.is_empty() {
        return Ok(Vec::new());
    }
    let mut query = Sql::new("UPDATE steering_messages SET status = 'delivered', delivered_at = ");
    query.bind(now.unix_millis());
    query.push(" WHERE task_id = ").bind(task_id.to_string());
    query.push(" AND status = 'pending' AND mode IN (");
    query.bind_list(modes.iter().map(|mode| mode.as_str().to_string()));
    query.push(&format!(") RETURNING {COLUMNS}"));
    let mut delivered = query.all(tx, from_row)?;
    delivered.sort_by_key(|message| (message.created_at, message.id));
    Ok(delivered)
}

fn promote(
    tx: &Connection,
    id: SteeringMessageId,
    follow_up: &NewTask,
    now: Timestamp,
) -> StoreResult<Option<Task>> {
    let changed = sql::execute(
        tx,
        "UPDATE steering_messages SET status = 'promoted', promoted_task_id = ?1 WHERE id = ?2 AND status = 'pending'",
        params![follow_up.id.to_string(), id.to_string()],
    )?;
    if changed == 0 {
        return Ok(None);
    }
    tasks::create(tx, follow_up, now).map(Some)
}

#[async_trait]
impl SteeringStore for SqliteStore {
    async fn steering_record(
        &self,
        message: &NewSteeringMessage,
        follow_up: Option<&NewTask>,
        now: Timestamp,
    ) -> StoreResult<SteeringRecorded> {
        let (message, follow_up) = (message.clone(), follow_up.cloned());
        self.database.write(move |tx| record(tx, &message, follow_up.as_ref(), now)).await
    }

    async fn steering_get(&self, id: SteeringMessageId) -> StoreResult<Option<SteeringMessage>> {
        self.database.read(|connection| get(connection, id))
    }

    async fn steering_list(&self, task_id: TaskId) -> StoreResult<Vec<SteeringMessage>> {
        self.database.read(|connection| list(connection, task_id))
    }

    async fn steering_deliver(
        &self,
        task_id: TaskId,
        modes: &[SteerMode],
        now: Timestamp,
    ) -> StoreResult<Vec<SteeringMessage>> {
        let modes = modes.to_vec();
        self.database.write(move |tx| deliver(tx, task_id, &modes, now)).await
    }

    async fn steering_mark_handled(&self, task_id: TaskId, now: Timestamp) -> StoreResult<u64> {
        self.database.write(move |tx| mark_handled(tx, task_id, now)).await
    }

    async fn steering_promote(
        &self,
        id: SteeringMessageId,
        follow_up: &NewTask,
        now: Timestamp,
    ) -> StoreResult<Option<Task>> {
        let follow_up = follow_up.clone();
        self.database.write(move |tx| promote(tx, id, &follow_up, now)).await
    }
}
