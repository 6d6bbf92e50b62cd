//! MCP tasks (the Tasks extension): one row each, settled by a `working` guard.

use async_trait::async_trait;
use rusqlite::{Connection, Row, params};
use serde_json::Value;
use swarm_domain::{
    id::McpTaskId,
    mcp_task::{McpTask, McpTaskStatus},
    time::Timestamp,
};
use swarm_store::{Applied, McpTaskStore, StoreResult};

use crate::{
    SqliteStore,
    error::corrupt,
    rows::{Columns, agent_id},
    sql,
};

const SELECT_TASK: &str = "SELECT id, agent_id, tool, arguments, status, outcome, created_at, updated_at,
    deadline, expires_at FROM mcp_tasks";

fn from_row(row: &Row<'_>) -> StoreResult<McpTask> {
    let mut column = Columns::new(row);
    let id: String = column.take("id")?;
    let id = McpTaskId::parse(&id).map_err(|error| corrupt(error.0))?;
    let bad = |what: &str, error: String| corrupt(format!("MCP task {id}: {what}: {error}"));
    let agent: String = column.take("agent_id")?;
    let tool = column.take("tool")?;
    let arguments: String = column.take("arguments")?;
    let status: String = column.take("status")?;
    let outcome: Option<String> = column.take("outcome")?;
    let json =
        |what: &str, text: &str| serde_json::from_str::<Value>(text).map_err(|e| bad(what, e.to_string()));
    Ok(McpTask {
        id,
        agent_id: agent_id(&agent)?,
        tool,
        arguments: json("arguments", &arguments)?,
        status: McpTaskStatus::parse(&status).map_err(|error| bad("status", error.0))?,
        outcome: outcome.as_deref().map(|text| json("outcome", text)).transpose()?,
        created_at: column.timestamp("created_at")?,
        updated_at: column.timestamp("updated_at")?,
        deadline: column.timestamp("deadline")?,
        expires_at: column.timestamp("expires_at")?,
    })
}

fn get(connection: &Connection, id: McpTaskId, now: Timestamp) -> StoreResult<Option<McpTask>> {
    sql::optional(
        connection,
        &format!("{SELECT_TASK} WHERE id = ?1 AND expires_at > ?2"),
        params![id.to_string(), now.unix_millis()],
        from_row,
    )
}

fn create(tx: &Connection, task: &McpTask) -> StoreResult<()> {
    sql::execute(tx, "DELETE FROM mcp_tasks WHERE expires_at <= ?1", [task.created_at.unix_millis()])?;
    sql::execute(
        tx,
        "INSERT INTO mcp_tasks (id, agent_id, tool, arguments, status, outcome, created_at, updated_at,
             deadline, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            task.id.to_string(),
            task.agent_id.to_string(),
            task.tool,
            task.arguments.to_string(),
            task.status.as_str(),
            task.outcome.as_ref().map(Value::to_string),
            task.created_at.unix_millis(),
            task.updated_at.unix_millis(),
            task.deadline.unix_millis(),
            task.expires_at.unix_millis(),
        ],
    )?;
    Ok(())
}

fn settle(
    tx: &Connection,
    id: McpTaskId,
    to: McpTaskStatus,
    outcome: Option<&Value>,
    now: Timestamp,
) -> StoreResult<Applied<McpTask>> {
    let Some(before) = get(tx, id, now)? else {
        return Ok(Applied::NotFound);
    };
    let changed = sql::execute(
        tx,
        "UPDATE mcp_tasks SET status = ?1, outcome = ?2, updated_at = ?3 WHERE id = ?4 AND status = 'working'",
        params![to.as_str(), outcome.map(Value::to_string), now.unix_millis(), id.to_string()],
    )?;
    if changed == 0 {
        return Ok(Applied::Refused { current: before });
    }
    let after = McpTask { status: to, outcome: outcome.cloned(), updated_at: now, ..before.clone() };
    Ok(Applied::Changed { before, after })
}

#[async_trait]
impl McpTaskStore for SqliteStore {
    async fn mcp_task_create(&self, task: &McpTask) -> StoreResult<()> {
        let task = task.clone();
        self.database.write(move |tx| create(tx, &task)).await
    }

    async fn mcp_task_get(&self, id: McpTaskId, now: Timestamp) -> StoreResult<Option<McpTask>> {
        self.database.read(|connection| get(connection, id, now))
    }

    async fn mcp_task_settle(
        &self,
        id: McpTaskId,
        to: McpTaskStatus,
        outcome: Option<Value>,
        now: Timestamp,
    ) -> StoreResult<Applied<McpTask>> {
        self.database.write(move |tx| settle(tx, id, to, outcome.as_ref(), now)).await
    }
}
