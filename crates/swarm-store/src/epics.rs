//! The storage of epics, beside [`crate::Store`] (every store is also an
//! [`EpicStore`]). The poll's `epic_progress_changed` claim lives with the other claims
//! in each driver's `poll.rs`; its counter is bumped by the database itself (a trigger
//! on `tasks.status`, migration 0013) in the transaction of every task change.

use async_trait::async_trait;
use swarm_domain::{
    epic::{Epic, EpicStatus, EpicWithProgress},
    id::{AgentId, EpicId, TaskId},
    task::Task,
    time::Timestamp,
};

use crate::{Applied, StoreResult};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EpicFilter {
    pub status: Option<EpicStatus>,
    pub lead_agent_id: Option<AgentId>,
    pub created_by_agent_id: Option<AgentId>,
    /// Exactly this name.
    pub name: Option<String>,
    /// Case-insensitive text in the name, description or goal.
    pub search: Option<String>,
    /// At most this many; 0 or less: all.
    pub limit: i64,
}

#[async_trait]
pub trait EpicStore: Send + Sync {
    /// Insert the epic. A taken name is `Conflict`; a creator or lead agent that does
    /// not exist is `MissingReference`.
    async fn epic_create(&self, epic: &Epic) -> StoreResult<Epic>;
    /// The epic with its task counts, read in one statement.
    async fn epic_get(&self, id: EpicId) -> StoreResult<Option<EpicWithProgress>>;
    /// The epic with its counts and its tasks (highest priority, then oldest first), in
    /// one snapshot: the counts describe exactly the tasks listed.
    async fn epic_detail(&self, id: EpicId) -> StoreResult<Option<(EpicWithProgress, Vec<Task>)>>;
    /// Highest priority first, then newest.
    async fn epic_list(&self, filter: &EpicFilter) -> StoreResult<Vec<EpicWithProgress>>;
    /// Replace the epic's fields with `epic`'s (not its id, creator or creation),
    /// guarded by `last_updated_at` still being `read_at` (no change came in between).
    async fn epic_update(&self, epic: &Epic, read_at: Timestamp) -> StoreResult<Applied<Epic>>;
    /// Delete the epic; its tasks stay, without an epic. One transaction.
    async fn epic_delete(&self, id: EpicId, now: Timestamp) -> StoreResult<bool>;
    /// Put the task in `epic` (`None`: take it out), guarded by the task not being in
    /// it already; logged as `task_epic_changed` by `actor`. An epic that does not
    /// exist is `MissingReference`.
    async fn task_set_epic(
        &self,
        task: TaskId,
        epic: Option<EpicId>,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>>;
}
