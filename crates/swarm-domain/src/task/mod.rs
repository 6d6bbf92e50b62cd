//! Tasks and their state machine: the statuses and the task as stored (here), what a
//! new task may be (`draft.rs`: [`TaskDraft`] validated into a [`NewTask`]), and the one
//! place that says which transition may happen from which status, under which guard
//! (`transition.rs`: [`TaskAction::change`]). The stores apply a [`TaskChange`] as a
//! single guarded `UPDATE`; see `docs/state_machine.md` for the diagram.

use serde::{Deserialize, Serialize};

use crate::{
    Invalid,
    id::{AgentId, EpicId, TaskId},
    time::Timestamp,
};

mod draft;
mod transition;

pub use draft::{NewTask, TaskDraft, parse_note, parse_tags, parse_task_text};
pub use transition::{FieldUpdate, FinishOutcome, Refusal, TaskAction, TaskChange, TaskGuard, TaskUpdates};

pub const PRIORITY_DEFAULT: i32 = 50;
pub const TASK_TEXT_MAX_CHARS: usize = 100_000;
pub const OUTPUT_MAX_CHARS: usize = 1_000_000;
pub const TAGS_MAX: usize = 50;
pub const DEPENDENCIES_MAX: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Backlog,
    Unassigned,
    Offered,
    Reviewing,
    Pending,
    InProgress,
    Paused,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    pub const ALL: [TaskStatus; 10] = [
        TaskStatus::Backlog,
        TaskStatus::Unassigned,
        TaskStatus::Offered,
        TaskStatus::Reviewing,
        TaskStatus::Pending,
        TaskStatus::InProgress,
        TaskStatus::Paused,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
    ];
    pub const FINISHED: [TaskStatus; 3] = [TaskStatus::Completed, TaskStatus::Failed, TaskStatus::Cancelled];

    pub fn as_str(&self) -> &'static str {
        match self {
            TaskStatus::Backlog => "backlog",
            TaskStatus::Unassigned => "unassigned",
            TaskStatus::Offered => "offered",
            TaskStatus::Reviewing => "reviewing",
            TaskStatus::Pending => "pending",
            TaskStatus::InProgress => "in_progress",
            TaskStatus::Paused => "paused",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Result<Self, Invalid> {
        Self::ALL.into_iter().find(|status| status.as_str() == text).ok_or_else(|| {
            let known: Vec<&str> = Self::ALL.iter().map(TaskStatus::as_str).collect();
            Invalid(format!("unknown task status {text:?} (expected one of {})", known.join(", ")))
        })
    }

    /// Finished statuses are final: nothing moves a task out of them.
    pub fn is_finished(&self) -> bool {
        Self::FINISHED.contains(self)
    }

    /// Statuses in which nobody has taken the task up yet, so its text may still change.
    pub const EDITABLE: [TaskStatus; 4] =
        [TaskStatus::Backlog, TaskStatus::Unassigned, TaskStatus::Offered, TaskStatus::Pending];

    /// Statuses that wait on an agent doing something: their holder keeps a lease by
    /// heartbeating, and the rescuer takes the task back when the lease runs out.
    pub fn is_leased(&self) -> bool {
        matches!(self, TaskStatus::Reviewing | TaskStatus::InProgress)
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a task came from, set once at creation (Slack thread, GitHub event, channel mention).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskOrigin {
    pub slack_channel_id: Option<String>,
    pub slack_thread_ts: Option<String>,
    pub slack_user_id: Option<String>,
    pub mention_message_id: Option<String>,
    pub mention_channel_id: Option<String>,
    pub github_repo: Option<String>,
    pub github_event_type: Option<String>,
    pub github_number: Option<i64>,
    pub github_comment_id: Option<i64>,
    pub github_author: Option<String>,
    pub github_url: Option<String>,
    /// The trigger whose firing created the task (ours).
    pub trigger_name: Option<String>,
    /// The conversation of that trigger the task belongs to: its agent session is
    /// resumed for the task (ours).
    pub session_key: Option<String>,
    /// The model the task asks its agent CLI for (the reference's `model`), passed to the
    /// CLI's own model flag by the runner; set once at creation like the rest of the origin.
    pub model: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: TaskId,
    pub agent_id: Option<AgentId>,
    pub creator_agent_id: Option<AgentId>,
    pub task: String,
    pub status: TaskStatus,
    pub source: String,
    pub task_type: Option<String>,
    pub tags: Vec<String>,
    pub priority: i32,
    pub depends_on: Vec<TaskId>,
    pub offered_to: Option<AgentId>,
    pub offered_at: Option<Timestamp>,
    pub accepted_at: Option<Timestamp>,
    pub rejection_reason: Option<String>,
    pub created_at: Timestamp,
    pub last_updated_at: Timestamp,
    pub finished_at: Option<Timestamp>,
    pub failure_reason: Option<String>,
    pub output: Option<String>,
    pub progress: Option<String>,
    pub notified_at: Option<Timestamp>,
    /// While `reviewing` or `in_progress`: when the holder's claim runs out unless it
    /// heartbeats (ours).
    pub lease_expires_at: Option<Timestamp>,
    /// How many times a holder lost this task by letting its lease run out (ours).
    pub lease_losses: i32,
    /// The epic the task belongs to, if any.
    pub epic_id: Option<EpicId>,
    #[serde(flatten)]
    pub origin: TaskOrigin,
}

#[cfg(test)]
mod tests;
