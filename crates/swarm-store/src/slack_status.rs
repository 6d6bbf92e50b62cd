//! The living Slack message of a task (issue 42), beside [`crate::Store`]: one status
//! message per Slack task, posted once in its thread and edited as the task moves. Its
//! row is the claim to post it (whoever inserts it posts), then holds the message's
//! `ts`; `finalized_at` is the claim to render the task's ending, so the completion is
//! shown once across restarts and replicas.

use async_trait::async_trait;
use swarm_domain::{id::TaskId, task::Task, time::Timestamp};

use crate::StoreResult;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackStatusMessage {
    pub task_id: TaskId,
    pub channel_id: String,
    /// `None` between the claim and Slack's answer to the post (or when that post failed).
    pub message_ts: Option<String>,
    pub finalized_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

#[async_trait]
pub trait SlackStatusStore: Send + Sync {
    /// Claim the posting of `task`'s status message in `channel`: `true` for the one
    /// caller whose row was inserted, `false` when the task has one already.
    async fn slack_status_claim(&self, task: TaskId, channel: &str, now: Timestamp) -> StoreResult<bool>;
    /// Record the posted message's `ts`, only while none is recorded: `false` otherwise.
    async fn slack_status_posted(&self, task: TaskId, message_ts: &str) -> StoreResult<bool>;
    async fn slack_status_get(&self, task: TaskId) -> StoreResult<Option<SlackStatusMessage>>;
    /// Claim the rendering of the task's ending, only while not finalized: `true` for the
    /// one caller that took it. A task without a row gets one (claimed and finalized at
    /// once: its ending is posted as a new message).
    async fn slack_status_finalize(&self, task: TaskId, channel: &str, now: Timestamp) -> StoreResult<bool>;
    /// Finished (`completed`, `failed`, `cancelled`) tasks with a Slack thread, finished at
    /// or after `since`, whose ending is not rendered yet (no finalized status message, and
    /// no outcome mark from the hubs before issue 42); oldest first.
    async fn slack_status_unfinalized(&self, since: Timestamp, limit: i64) -> StoreResult<Vec<Task>>;
}
