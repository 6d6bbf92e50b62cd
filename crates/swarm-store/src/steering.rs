//! Steering messages (issue 40), beside [`crate::Store`]: recorded while a task's agent
//! works, delivered into its run once, marked handled, or promoted to a follow-up task
//! when no run can take them. Each method is one transaction; each status change is
//! guarded by its from-status in SQL.

use async_trait::async_trait;
use swarm_domain::{
    id::{SteeringMessageId, TaskId},
    steering::{NewSteeringMessage, SteerMode, SteeringMessage},
    task::{NewTask, Task},
    time::Timestamp,
};

use crate::StoreResult;

/// What recording a message did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SteeringRecorded {
    /// Recorded `pending` for the task's run.
    Pending(SteeringMessage),
    /// Recorded `promoted`, with its follow-up task created in the same transaction.
    Promoted(SteeringMessage, Box<Task>),
    /// The task is finished (or gone): nothing was written.
    TaskFinished(Option<Box<Task>>),
}

#[async_trait]
pub trait SteeringStore: Send + Sync {
    /// Records the message `pending` if its task is not finished. With `follow_up`, a
    /// finished task's message is recorded `promoted` instead, and the follow-up task
    /// created; an unfinished task's is still recorded `pending`.
    async fn steering_record(
        &self,
        message: &NewSteeringMessage,
        follow_up: Option<&NewTask>,
        now: Timestamp,
    ) -> StoreResult<SteeringRecorded>;
    async fn steering_get(&self, id: SteeringMessageId) -> StoreResult<Option<SteeringMessage>>;
    /// The task's messages, oldest first.
    async fn steering_list(&self, task_id: TaskId) -> StoreResult<Vec<SteeringMessage>>;
    /// Claims the task's `pending` messages of these modes as `delivered` (oldest
    /// first): a message is returned by one call only. Before that, the task's messages
    /// already `delivered` become `handled`: the agent has acted since it saw them.
    async fn steering_deliver(
        &self,
        task_id: TaskId,
        modes: &[SteerMode],
        now: Timestamp,
    ) -> StoreResult<Vec<SteeringMessage>>;
    /// The task's `delivered` messages become `handled`; how many.
    async fn steering_mark_handled(&self, task_id: TaskId, now: Timestamp) -> StoreResult<u64>;
    /// A `pending` message becomes `promoted`, naming `follow_up`, which is created in
    /// the same transaction. `None` (and nothing written) when it was not pending.
    async fn steering_promote(
        &self,
        id: SteeringMessageId,
        follow_up: &NewTask,
        now: Timestamp,
    ) -> StoreResult<Option<Task>>;
}
