//! Reads for the dashboard's control room (issue 49): tasks by the end of their id, and
//! the session costs summed per agent and epic.

use async_trait::async_trait;
use rusqlite::params;
use swarm_domain::{
    costs::CostTotal,
    id::{EpicId, TaskId},
    time::Timestamp,
};
use swarm_store::{InsightStore, StoreResult};

use crate::{
    SqliteStore,
    error::corrupt,
    rows::{agent_id, task_id},
    sql,
};

#[async_trait]
impl InsightStore for SqliteStore {
    async fn task_ids_ending_with(&self, suffix: &str, limit: i64) -> StoreResult<Vec<TaskId>> {
        let pattern = format!("%{}", suffix.to_ascii_lowercase());
        self.database.read(|connection| {
            sql::all(
                connection,
                "SELECT id FROM tasks WHERE id LIKE ?1 ORDER BY id LIMIT ?2",
                params![pattern, limit],
                |row| task_id(&row.get::<_, String>(0).map_err(crate::error::db)?),
            )
        })
    }

    async fn cost_totals(&self, start: Timestamp, end: Timestamp) -> StoreResult<Vec<CostTotal>> {
        self.database.read(|connection| {
            sql::all(
                connection,
                "SELECT c.agent_id, t.epic_id, SUM(c.total_cost_usd), COUNT(*)
                 FROM session_costs c LEFT JOIN tasks t ON t.id = c.task_id
                 WHERE c.created_at >= ?1 AND c.created_at < ?2
                 GROUP BY c.agent_id, t.epic_id",
                params![start.unix_millis(), end.unix_millis()],
                |row| {
                    let epic: Option<String> = row.get(1).map_err(crate::error::db)?;
                    Ok(CostTotal {
                        agent_id: agent_id(&row.get::<_, String>(0).map_err(crate::error::db)?)?,
                        epic_id: epic
                            .map(|text| EpicId::parse(&text).map_err(|error| corrupt(error.0)))
                            .transpose()?,
                        cost_usd: row.get(2).map_err(crate::error::db)?,
                        sessions: row.get(3).map_err(crate::error::db)?,
                    })
                },
            )
        })
    }
}
