//! Issue trackers (GitLab, Linear, Jira: issue 47), beside [`crate::Store`]: the link
//! between a task and the tracker item it came from (the reference's `tracker_sync`),
//! the deliveries already received, and the task's report back to the tracker, made
//! once across restarts and replicas.
//!
//! A tracker task is created with its link and its delivery mark in one transaction, so
//! a replayed delivery creates nothing. Its report is taken with a lease
//! ([`TrackerStore::tracker_report_claim`]) and marked done once
//! ([`TrackerStore::tracker_report_done`]); a crash between the post and the mark is the
//! provider's to cover (it looks for the task's marker among the item's comments first).

use async_trait::async_trait;
use swarm_domain::{
    id::TaskId,
    task::{NewTask, Task},
    time::Timestamp,
};

use crate::StoreResult;

/// Which tracker item a new task comes from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TrackerLink {
    /// `gitlab`, `linear`, `jira`.
    pub provider: String,
    /// The provider's kind of item: `issue`, `merge_request`, `pipeline`.
    pub provider_entity_type: Option<String>,
    /// What the provider's API needs to reach the item again (GitLab: `<project id>/issues/<iid>`).
    pub external_id: String,
    /// What people call it: `group/project#12`, `ENG-42`.
    pub external_identifier: Option<String>,
    pub external_url: Option<String>,
}

/// A task's link to a tracker item, with the state of its report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackerSync {
    pub provider: String,
    /// Always `task` for now (the reference also has `epic`).
    pub entity_type: String,
    pub provider_entity_type: Option<String>,
    /// The task (the reference's `swarmId`).
    pub task_id: TaskId,
    pub external_id: String,
    pub external_identifier: Option<String>,
    pub external_url: Option<String>,
    pub last_delivery_id: Option<String>,
    /// The last tracker state this link moved the item to (providers with states).
    pub last_synced_status: Option<String>,
    pub last_synced_at: Timestamp,
    pub created_at: Timestamp,
    /// Failed report attempts so far, and the last one's error.
    pub report_attempts: i32,
    pub report_error: Option<String>,
    /// When the task's outcome was reported; `None` until then.
    pub reported_at: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrackerTaskCreated {
    Created(Box<Task>),
    /// The delivery was received before: nothing changed.
    Duplicate,
}

/// A finished task whose outcome its tracker has not heard yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackerReportDue {
    pub sync: TrackerSync,
    pub task: Task,
}

#[async_trait]
pub trait TrackerStore: Send + Sync {
    /// In one transaction: mark `delivery_id` received for `link.provider`, create
    /// `task`, and link it to `link` (its `last_delivery_id`). A delivery seen before
    /// changes nothing ([`TrackerTaskCreated::Duplicate`]).
    async fn tracker_task_create(
        &self,
        task: &NewTask,
        link: &TrackerLink,
        delivery_id: &str,
        now: Timestamp,
    ) -> StoreResult<TrackerTaskCreated>;
    /// Mark a delivery that creates no task (a comment that steers one): `true` the first
    /// time, `false` when it was received before.
    async fn tracker_delivery_mark(
        &self,
        provider: &str,
        delivery_id: &str,
        now: Timestamp,
    ) -> StoreResult<bool>;
    async fn tracker_sync_get(&self, provider: &str, task: TaskId) -> StoreResult<Option<TrackerSync>>;
    /// The tasks linked to one tracker item, newest first.
    async fn tracker_sync_by_external(
        &self,
        provider: &str,
        external_id: &str,
    ) -> StoreResult<Vec<TrackerSync>>;
    /// Finished (`completed`, `failed`, `cancelled`) tasks linked to `provider`, not reported yet, whose
    /// report nobody else holds (no lease, one that ran out by `now`, or `holder`'s own),
    /// with fewer than `max_attempts` failed attempts; the earliest finished first.
    async fn tracker_report_due(
        &self,
        provider: &str,
        holder: &str,
        now: Timestamp,
        max_attempts: i32,
        limit: i64,
    ) -> StoreResult<Vec<TrackerReportDue>>;
    /// Take the report of `task` to `provider` for `holder` until `lease_until`: `true` for
    /// the one caller that took it, only while unreported and not held by another's live
    /// lease. A holder retakes its own lease: a hub restarted under the same name does not
    /// wait out the lease its killed predecessor left.
    async fn tracker_report_claim(
        &self,
        provider: &str,
        task: TaskId,
        holder: &str,
        lease_until: Timestamp,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// The report was posted: `true` once (`WHERE reported_at IS NULL`), `false` after.
    async fn tracker_report_done(&self, provider: &str, task: TaskId, now: Timestamp) -> StoreResult<bool>;
    /// The report failed: while `holder` still holds it, count the attempt, keep `error`,
    /// and let nobody take it before `retry_at` (the next try; the holder lets go of it).
    /// `false` when `holder` lost it.
    async fn tracker_report_failed(
        &self,
        provider: &str,
        task: TaskId,
        holder: &str,
        error: &str,
        retry_at: Timestamp,
    ) -> StoreResult<bool>;
    /// Record that the item was moved to the tracker state `to`, only while the last one
    /// recorded is still `from` (`None`: none yet): `true` for the one caller that moved it.
    /// Record pull or merge request URLs as `task`'s evidence: each once (a URL recorded
    /// before is kept where it was).
    async fn task_pull_requests_record(
        &self,
        task: TaskId,
        urls: &[String],
        now: Timestamp,
    ) -> StoreResult<()>;
    /// `task`'s recorded pull or merge request URLs, in the order first recorded.
    async fn task_pull_requests(&self, task: TaskId) -> StoreResult<Vec<String>>;
    async fn tracker_status_synced(
        &self,
        provider: &str,
        task: TaskId,
        from: Option<&str>,
        to: &str,
        now: Timestamp,
    ) -> StoreResult<bool>;
}
