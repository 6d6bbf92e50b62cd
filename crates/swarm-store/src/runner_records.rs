//! The newest reference runner's bookkeeping, beside [`crate::Store`] (issue 48): what a
//! runner reports about an agent or a task and reads back ([`RunnerRecord`], one JSON
//! document per area, owner and name), and the reference's own event log
//! ([`WorkerEvent`]), which its runner writes in batches and queries by event name.

use async_trait::async_trait;
use serde_json::Value;
use swarm_domain::{id::EventId, time::Timestamp};

use crate::StoreResult;

/// What a [`RunnerRecord`] is about; its owner is an agent or a task id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordArea {
    /// An agent's credential readiness (`PUT /api/agents/:id/credential-status`); name `""`.
    CredentialStatus,
    /// An agent's profile file (`claudeMd`, `soulMd`, ...); name: the field.
    ProfileFile,
    /// A task's provider session (`PUT /api/tasks/:id/session`); name `""`.
    TaskSession,
    /// A task's context-usage snapshot (`POST /api/tasks/:id/context`); name: its id.
    TaskContext,
    /// An agent's active session (`POST /api/active-sessions`); name: its task id.
    ActiveSession,
}

impl RecordArea {
    pub fn as_str(self) -> &'static str {
        match self {
            RecordArea::CredentialStatus => "credential_status",
            RecordArea::ProfileFile => "profile_file",
            RecordArea::TaskSession => "task_session",
            RecordArea::TaskContext => "task_context",
            RecordArea::ActiveSession => "active_session",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunnerRecord {
    pub area: RecordArea,
    pub owner_id: String,
    pub name: String,
    pub body: Value,
    pub updated_at: Timestamp,
}

/// An event as the reference's runner sends it (`eventBodySchema`).
#[derive(Debug, Clone, PartialEq)]
pub struct NewWorkerEvent {
    pub category: String,
    pub event: String,
    pub status: String,
    pub source: String,
    pub agent_id: Option<String>,
    pub task_id: Option<String>,
    pub session_id: Option<String>,
    pub parent_event_id: Option<String>,
    pub numeric_value: Option<f64>,
    pub duration_ms: Option<i64>,
    pub data: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WorkerEvent {
    pub id: EventId,
    pub event: NewWorkerEvent,
    pub created_at: Timestamp,
}

/// Every filter set must match; `data_field` matches `data.field` (the reference's
/// `dataField`); `since` and `until` are inclusive.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerEventFilter {
    pub category: Option<String>,
    pub event: Option<String>,
    pub status: Option<String>,
    pub source: Option<String>,
    pub agent_id: Option<String>,
    pub task_id: Option<String>,
    pub session_id: Option<String>,
    pub data_field: Option<String>,
    pub since: Option<Timestamp>,
    pub until: Option<Timestamp>,
    pub limit: i64,
}

#[async_trait]
pub trait RunnerRecords: Send + Sync {
    /// Insert the record, or replace the body and time of the one with its area, owner
    /// and name.
    async fn record_put(&self, record: &RunnerRecord) -> StoreResult<()>;
    /// Newest first, at most `limit`; one owner's, or the area's across owners.
    async fn record_list(
        &self,
        area: RecordArea,
        owner_id: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<RunnerRecord>>;
    /// Removes the owner's record of that name, or all its records of the area; how many.
    async fn record_delete(&self, area: RecordArea, owner_id: &str, name: Option<&str>) -> StoreResult<u64>;
    /// Appends the events in one transaction, stamped `now`; how many.
    async fn worker_events_append(&self, events: &[NewWorkerEvent], now: Timestamp) -> StoreResult<u64>;
    /// Newest first, at most `filter.limit`.
    async fn worker_event_list(&self, filter: &WorkerEventFilter) -> StoreResult<Vec<WorkerEvent>>;
}
