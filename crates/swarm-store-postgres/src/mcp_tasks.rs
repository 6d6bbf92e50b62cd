//! MCP tasks (the Tasks extension): one row each, settled by a `working` guard.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{Row, postgres::PgRow, types::Json};
use swarm_domain::{
    id::{AgentId, McpTaskId},
    mcp_task::{McpTask, McpTaskStatus},
    time::Timestamp,
};
use swarm_store::{Applied, McpTaskStore, StoreResult};

use crate::{
    PgStore,
    error::{corrupt, db},
};

macro_rules! task_columns {
    () => {
        "id, agent_id, tool, arguments, status, outcome, created_at, updated_at, deadline, expires_at"
    };
}

fn from_row(row: PgRow) -> sqlx::Result<McpTask> {
    let time = |name: &str| -> sqlx::Result<Timestamp> {
        Ok(Timestamp::from_datetime(row.try_get::<DateTime<Utc>, _>(name)?))
    };
    let status: String = row.try_get("status")?;
    let arguments: Json<Value> = row.try_get("arguments")?;
    let outcome: Option<Json<Value>> = row.try_get("outcome")?;
    Ok(McpTask {
        id: McpTaskId::from_uuid(row.try_get("id")?),
        agent_id: AgentId::from_uuid(row.try_get("agent_id")?),
        tool: row.try_get("tool")?,
        arguments: arguments.0,
        status: McpTaskStatus::parse(&status).map_err(|error| corrupt("status", error))?,
        outcome: outcome.map(|outcome| outcome.0),
        created_at: time("created_at")?,
        updated_at: time("updated_at")?,
        deadline: time("deadline")?,
        expires_at: time("expires_at")?,
    })
}

#[async_trait]
impl McpTaskStore for PgStore {
    async fn mcp_task_create(&self, task: &McpTask) -> StoreResult<()> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        sqlx::query("DELETE FROM mcp_tasks WHERE expires_at <= $1")
            .bind(task.created_at.datetime())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        sqlx::query(
            "INSERT INTO mcp_tasks (id, agent_id, tool, arguments, status, outcome, created_at, updated_at,
                 deadline, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(task.id.as_uuid())
        .bind(task.agent_id.as_uuid())
        .bind(&task.tool)
        .bind(Json(&task.arguments))
        .bind(task.status.as_str())
        .bind(task.outcome.as_ref().map(Json))
        .bind(task.created_at.datetime())
        .bind(task.updated_at.datetime())
        .bind(task.deadline.datetime())
        .bind(task.expires_at.datetime())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)
    }

    async fn mcp_task_get(&self, id: McpTaskId, now: Timestamp) -> StoreResult<Option<McpTask>> {
        sqlx::query(concat!("SELECT ", task_columns!(), " FROM mcp_tasks WHERE id = $1 AND expires_at > $2"))
            .bind(id.as_uuid())
            .bind(now.datetime())
            .try_map(from_row)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)
    }

    async fn mcp_task_settle(
        &self,
        id: McpTaskId,
        to: McpTaskStatus,
        outcome: Option<Value>,
        now: Timestamp,
    ) -> StoreResult<Applied<McpTask>> {
        // Guarded by `status = 'working'` and the task's time; when it refuses, the row as
        // it stands says why.
        let settled = sqlx::query(concat!(
            "UPDATE mcp_tasks SET status = $2, outcome = $3, updated_at = $4
             WHERE id = $1 AND status = 'working' AND expires_at > $4
             RETURNING ",
            task_columns!()
        ))
        .bind(id.as_uuid())
        .bind(to.as_str())
        .bind(outcome.as_ref().map(Json))
        .bind(now.datetime())
        .try_map(from_row)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        if let Some(after) = settled {
            let before = McpTask { status: McpTaskStatus::Working, outcome: None, ..after.clone() };
            return Ok(Applied::Changed { before, after });
        }
        Ok(match self.mcp_task_get(id, now).await? {
            Some(current) => Applied::Refused { current },
            None => Applied::NotFound,
        })
    }
}
