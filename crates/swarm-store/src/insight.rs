//! Reads for the dashboard's control room (issue 49), beside [`crate::Store`]: tasks
//! found by the end of their id as a person typed it, and the session costs summed per
//! agent and epic.

use async_trait::async_trait;
use swarm_domain::{costs::CostTotal, id::TaskId, time::Timestamp};

use crate::StoreResult;

#[async_trait]
pub trait InsightStore: Send + Sync {
    /// The tasks whose id ends with `suffix` (lower-case hex, 4 to 12 digits), ordered
    /// by id, at most `limit`.
    async fn task_ids_ending_with(&self, suffix: &str, limit: i64) -> StoreResult<Vec<TaskId>>;
    /// The session costs recorded in `[start, end)`, summed per agent and per epic of
    /// their task (`None`: a task in no epic, or no task); in no particular order.
    async fn cost_totals(&self, start: Timestamp, end: Timestamp) -> StoreResult<Vec<CostTotal>>;
}
