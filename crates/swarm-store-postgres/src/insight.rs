//! Reads for the dashboard's control room (issue 49): tasks by the end of their id, and
//! the session costs summed per agent and epic.

use async_trait::async_trait;
use swarm_domain::{
    costs::CostTotal,
    id::{AgentId, EpicId, TaskId},
    time::Timestamp,
};
use swarm_store::{InsightStore, StoreResult};
use uuid::Uuid;

use crate::{PgStore, error::db};

#[async_trait]
impl InsightStore for PgStore {
    async fn task_ids_ending_with(&self, suffix: &str, limit: i64) -> StoreResult<Vec<TaskId>> {
        let ids: Vec<Uuid> =
            sqlx::query_scalar("SELECT id FROM tasks WHERE id::TEXT LIKE $1 ORDER BY id LIMIT $2")
                .bind(format!("%{}", suffix.to_ascii_lowercase()))
                .bind(limit)
                .fetch_all(&self.pool)
                .await
                .map_err(db)?;
        Ok(ids.into_iter().map(TaskId::from_uuid).collect())
    }

    async fn cost_totals(&self, start: Timestamp, end: Timestamp) -> StoreResult<Vec<CostTotal>> {
        let rows: Vec<(Uuid, Option<Uuid>, f64, i64)> = sqlx::query_as(
            "SELECT c.agent_id, t.epic_id, SUM(c.total_cost_usd)::DOUBLE PRECISION, COUNT(*)
             FROM session_costs c LEFT JOIN tasks t ON t.id = c.task_id
             WHERE c.created_at >= $1 AND c.created_at < $2
             GROUP BY c.agent_id, t.epic_id",
        )
        .bind(start.datetime())
        .bind(end.datetime())
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        Ok(rows
            .into_iter()
            .map(|(agent, epic, cost_usd, sessions)| CostTotal {
                agent_id: AgentId::from_uuid(agent),
                epic_id: epic.map(EpicId::from_uuid),
                cost_usd,
                sessions,
            })
            .collect())
    }
}
