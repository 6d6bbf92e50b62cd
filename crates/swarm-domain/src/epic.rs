//! Epics (the reference's projects): a named goal that groups tasks, with a progress
//! read from its tasks' statuses. An epic's own status is set by people (the lead, the
//! operator); its progress is never stored, it is counted from its tasks in the read
//! that shows it, so it cannot drift from them.
//!
//! The lead hears of progress through the poll's `epic_progress_changed`: every time a
//! task of an epic finishes (`completed` or `failed`), the database bumps the epic's
//! change counter in the transaction that finished the task; a lead's poll claims every
//! active epic whose counter moved past the one it was last told about.

use serde::{Deserialize, Serialize};

use crate::{
    Invalid,
    id::{AgentId, ChannelId, EpicId},
    reject_nul,
    task::{Task, TaskStatus, parse_tags},
    time::Timestamp,
};

pub const NAME_MAX_CHARS: usize = 200;
pub const TEXT_MAX_CHARS: usize = 100_000;
pub const FIELD_MAX_CHARS: usize = 500;
/// At most this many epics are reported in one `epic_progress_changed` trigger.
pub const EPIC_PROGRESS_TRIGGER_MAX: i64 = 20;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EpicStatus {
    #[default]
    Draft,
    Active,
    Paused,
    Completed,
    Cancelled,
}

impl EpicStatus {
    pub const ALL: [EpicStatus; 5] = [
        EpicStatus::Draft,
        EpicStatus::Active,
        EpicStatus::Paused,
        EpicStatus::Completed,
        EpicStatus::Cancelled,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            EpicStatus::Draft => "draft",
            EpicStatus::Active => "active",
            EpicStatus::Paused => "paused",
            EpicStatus::Completed => "completed",
            EpicStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Result<Self, Invalid> {
        Self::ALL.into_iter().find(|status| status.as_str() == text.trim()).ok_or_else(|| {
            Invalid(format!(
                "unknown epic status {text:?} (expected draft, active, paused, completed or cancelled)"
            ))
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Epic {
    pub id: EpicId,
    pub name: String,
    pub goal: String,
    pub description: Option<String>,
    /// Product requirements (markdown).
    pub prd: Option<String>,
    /// Implementation plan (markdown).
    pub plan: Option<String>,
    pub status: EpicStatus,
    pub priority: i32,
    pub tags: Vec<String>,
    pub created_by_agent_id: Option<AgentId>,
    pub lead_agent_id: Option<AgentId>,
    pub channel_id: Option<ChannelId>,
    pub slack_channel_id: Option<String>,
    pub slack_thread_ts: Option<String>,
    pub github_repo: Option<String>,
    pub github_milestone: Option<String>,
    pub created_at: Timestamp,
    pub last_updated_at: Timestamp,
    /// When it first became `active`.
    pub started_at: Option<Timestamp>,
    /// When it first became `completed`.
    pub completed_at: Option<Timestamp>,
}

/// How an epic's tasks stand, counted in the read that shows the epic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskStats {
    pub total: i64,
    pub completed: i64,
    pub failed: i64,
    pub in_progress: i64,
    /// Not started yet: `pending` (assigned) tasks.
    pub pending: i64,
}

impl TaskStats {
    /// completed ÷ total × 100, rounded; 0 without tasks (the reference's rule).
    pub fn progress(&self) -> i64 {
        if self.total <= 0 {
            return 0;
        }
        (self.completed * 100 + self.total / 2) / self.total
    }
}

/// An epic with its task counts and progress, as every read of an epic shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EpicWithProgress {
    #[serde(flatten)]
    pub epic: Epic,
    pub task_stats: TaskStats,
    /// Percent of its tasks completed, rounded.
    pub progress: i64,
}

impl EpicWithProgress {
    pub fn new(epic: Epic, task_stats: TaskStats) -> Self {
        EpicWithProgress { epic, progress: task_stats.progress(), task_stats }
    }
}

/// One entry of `epic_progress_changed`: the epic as it stands and its tasks that
/// finished since the lead was last told about it (newest first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EpicProgress {
    pub epic: EpicWithProgress,
    pub finished_tasks: Vec<Task>,
}

/// The task statuses an epic's progress counts as finished work: a change into one of
/// them is what `epic_progress_changed` reports.
pub const PROGRESS_STATUSES: [TaskStatus; 2] = [TaskStatus::Completed, TaskStatus::Failed];

/// What a caller gives to create or change an epic, before validation. On update, a
/// field left `None` stays as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EpicDraft {
    pub name: Option<String>,
    pub goal: Option<String>,
    pub description: Option<String>,
    pub prd: Option<String>,
    pub plan: Option<String>,
    pub status: Option<EpicStatus>,
    pub priority: Option<i64>,
    pub tags: Option<Vec<String>>,
    /// `Some(None)` clears it.
    pub lead_agent_id: Option<Option<AgentId>>,
    pub slack_channel_id: Option<String>,
    pub slack_thread_ts: Option<String>,
    pub github_repo: Option<String>,
    pub github_milestone: Option<String>,
}

impl EpicDraft {
    /// A new epic (`draft` unless a status is given). `name` and `goal` are required;
    /// a missing one is named, as the reference names them.
    pub fn create(self, id: EpicId, creator: Option<AgentId>, now: Timestamp) -> Result<Epic, Invalid> {
        let missing: Vec<&str> = [("name", &self.name), ("goal", &self.goal)]
            .into_iter()
            .filter(|(_, value)| value.as_deref().is_none_or(|text| text.trim().is_empty()))
            .map(|(field, _)| field)
            .collect();
        if !missing.is_empty() {
            return Err(Invalid(format!("Missing required fields: {}", missing.join(", "))));
        }
        let blank = Epic {
            id,
            name: String::new(),
            goal: String::new(),
            description: None,
            prd: None,
            plan: None,
            status: EpicStatus::Draft,
            priority: crate::task::PRIORITY_DEFAULT,
            tags: Vec::new(),
            created_by_agent_id: creator,
            lead_agent_id: None,
            channel_id: None,
            slack_channel_id: None,
            slack_thread_ts: None,
            github_repo: None,
            github_milestone: None,
            created_at: now,
            last_updated_at: now,
            started_at: None,
            completed_at: None,
        };
        self.apply_to(&blank, now)
    }

    /// `current` with the fields this draft sets, validated; `startedAt` and
    /// `completedAt` are set the first time the epic becomes `active` or `completed`.
    pub fn apply_to(self, current: &Epic, now: Timestamp) -> Result<Epic, Invalid> {
        let mut epic = current.clone();
        if let Some(name) = self.name {
            epic.name = required_text("name", &name, NAME_MAX_CHARS)?;
        }
        if let Some(goal) = self.goal {
            epic.goal = required_text("goal", &goal, TEXT_MAX_CHARS)?;
        }
        set_optional(&mut epic.description, "description", self.description, TEXT_MAX_CHARS)?;
        set_optional(&mut epic.prd, "prd", self.prd, TEXT_MAX_CHARS)?;
        set_optional(&mut epic.plan, "plan", self.plan, TEXT_MAX_CHARS)?;
        set_optional(&mut epic.slack_channel_id, "slackChannelId", self.slack_channel_id, FIELD_MAX_CHARS)?;
        set_optional(&mut epic.slack_thread_ts, "slackThreadTs", self.slack_thread_ts, FIELD_MAX_CHARS)?;
        set_optional(&mut epic.github_repo, "githubRepo", self.github_repo, FIELD_MAX_CHARS)?;
        set_optional(&mut epic.github_milestone, "githubMilestone", self.github_milestone, FIELD_MAX_CHARS)?;
        if let Some(priority) = self.priority {
            if !(0..=100).contains(&priority) {
                return Err(Invalid(format!("priority must be between 0 and 100, got {priority}")));
            }
            epic.priority = priority as i32;
        }
        if let Some(tags) = self.tags {
            epic.tags = parse_tags(tags)?;
        }
        if let Some(lead) = self.lead_agent_id {
            epic.lead_agent_id = lead;
        }
        if let Some(status) = self.status {
            epic.status = status;
            if status == EpicStatus::Active && epic.started_at.is_none() {
                epic.started_at = Some(now);
            }
            if status == EpicStatus::Completed && epic.completed_at.is_none() {
                epic.completed_at = Some(now);
            }
        }
        epic.last_updated_at = now;
        Ok(epic)
    }
}

fn required_text(field: &str, text: &str, max: usize) -> Result<String, Invalid> {
    let text = text.trim();
    reject_nul(field, text)?;
    if text.is_empty() {
        return Err(Invalid(format!("{field} must not be empty")));
    }
    if text.chars().count() > max {
        return Err(Invalid(format!("{field} must be at most {max} characters")));
    }
    Ok(text.to_string())
}

/// An empty text clears the field.
fn set_optional(
    slot: &mut Option<String>,
    field: &str,
    text: Option<String>,
    max: usize,
) -> Result<(), Invalid> {
    let Some(text) = text else { return Ok(()) };
    reject_nul(field, &text)?;
    if text.chars().count() > max {
        return Err(Invalid(format!("{field} must be at most {max} characters")));
    }
    *slot = (!text.trim().is_empty()).then_some(text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        Timestamp::from_unix_millis(1_768_903_200_123).unwrap()
    }

    #[test]
    fn progress_is_completed_over_total_rounded() {
        let stats = |completed, total| TaskStats { total, completed, ..TaskStats::default() };
        assert_eq!(stats(0, 0).progress(), 0);
        assert_eq!(stats(1, 3).progress(), 33);
        assert_eq!(stats(2, 3).progress(), 67);
        assert_eq!(stats(1, 2).progress(), 50);
        assert_eq!(stats(4, 4).progress(), 100);
    }

    #[test]
    fn creation_names_every_missing_field() {
        let error = EpicDraft::default().create(EpicId::new_v7(), None, now()).unwrap_err();
        assert_eq!(error.0, "Missing required fields: name, goal");
        let only_name = EpicDraft { name: Some("x".into()), goal: Some("  ".into()), ..EpicDraft::default() };
        assert_eq!(
            only_name.create(EpicId::new_v7(), None, now()).unwrap_err().0,
            "Missing required fields: goal"
        );
    }

    #[test]
    fn status_changes_stamp_the_first_start_and_completion() {
        let draft = EpicDraft { name: Some("a".into()), goal: Some("b".into()), ..EpicDraft::default() };
        let epic = draft.create(EpicId::new_v7(), None, now()).unwrap();
        assert_eq!((epic.status, epic.started_at), (EpicStatus::Draft, None));
        let later = now().plus_millis(5);
        let active = EpicDraft { status: Some(EpicStatus::Active), ..EpicDraft::default() }
            .apply_to(&epic, later)
            .unwrap();
        assert_eq!(active.started_at, Some(later));
        let again = EpicDraft { status: Some(EpicStatus::Active), ..EpicDraft::default() }
            .apply_to(&active, later.plus_millis(5))
            .unwrap();
        assert_eq!(again.started_at, Some(later), "the first start is kept");
        let bad = EpicDraft { priority: Some(101), ..EpicDraft::default() }.apply_to(&epic, later);
        assert!(bad.is_err());
    }
}
