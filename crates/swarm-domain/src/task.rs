//! Tasks and their state machine: the one place that says which transition may
//! happen from which status, under which guard. The stores apply a [`TaskChange`]
//! as a single guarded `UPDATE`; see `docs/state_machine.md` for the diagram.

use serde::{Deserialize, Serialize};

use crate::{
    Invalid,
    event::{EventType, NewEvent},
    id::AgentId,
    id::EpicId,
    id::TaskId,
    reject_nul,
    time::Timestamp,
};

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

/// A task to create, validated: build it with [`NewTask::parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTask {
    pub id: TaskId,
    pub task: String,
    pub status: TaskStatus,
    pub agent_id: Option<AgentId>,
    pub creator_agent_id: Option<AgentId>,
    pub offered_to: Option<AgentId>,
    pub source: String,
    pub task_type: Option<String>,
    pub tags: Vec<String>,
    pub priority: i32,
    pub depends_on: Vec<TaskId>,
    pub epic_id: Option<EpicId>,
    pub origin: TaskOrigin,
}

/// What a caller asks for when creating a task, before validation.
#[derive(Debug, Clone, Default)]
pub struct TaskDraft {
    pub task: String,
    pub agent_id: Option<AgentId>,
    pub offered_to: Option<AgentId>,
    pub backlog: bool,
    pub source: Option<String>,
    pub task_type: Option<String>,
    pub tags: Vec<String>,
    pub priority: Option<i64>,
    pub depends_on: Vec<TaskId>,
    pub epic_id: Option<EpicId>,
    pub origin: TaskOrigin,
}

impl NewTask {
    /// The first status follows CONTRACT.md: offered, else assigned (pending), else
    /// backlog when asked for, else the pool (unassigned).
    pub fn parse(draft: TaskDraft, creator: Option<AgentId>) -> Result<Self, Invalid> {
        let text = parse_task_text(&draft.task)?;
        if draft.agent_id.is_some() && draft.offered_to.is_some() {
            return Err(Invalid::new("give agentId (assign) or offeredTo (offer), not both"));
        }
        if draft.backlog && (draft.agent_id.is_some() || draft.offered_to.is_some()) {
            return Err(Invalid::new("a backlog task cannot be assigned or offered yet"));
        }
        let status = match (&draft.offered_to, &draft.agent_id, draft.backlog) {
            (Some(_), _, _) => TaskStatus::Offered,
            (None, Some(_), _) => TaskStatus::Pending,
            (None, None, true) => TaskStatus::Backlog,
            (None, None, false) => TaskStatus::Unassigned,
        };
        let priority = match draft.priority {
            None => PRIORITY_DEFAULT,
            Some(p) if (0..=100).contains(&p) => p as i32,
            Some(p) => return Err(Invalid(format!("priority must be between 0 and 100, got {p}"))),
        };
        let source = parse_word("source", draft.source.as_deref().unwrap_or("api"))?;
        let task_type = draft.task_type.as_deref().map(|t| parse_word("taskType", t)).transpose()?;
        Ok(NewTask {
            id: TaskId::new_v7(),
            task: text,
            status,
            agent_id: draft.agent_id,
            creator_agent_id: creator,
            offered_to: draft.offered_to,
            source,
            task_type,
            tags: parse_tags(draft.tags)?,
            priority,
            depends_on: parse_dependencies(draft.depends_on)?,
            epic_id: draft.epic_id,
            origin: draft.origin,
        })
    }
}

impl NewTask {
    /// The task as stored at `now`, for a store that has just inserted it and need not
    /// read it back. A repeated tag or dependency is kept once, at its first position.
    pub fn created(&self, now: Timestamp) -> Task {
        fn first_of_each<T: Clone + PartialEq>(items: &[T]) -> Vec<T> {
            let mut kept: Vec<T> = Vec::with_capacity(items.len());
            for item in items {
                if !kept.contains(item) {
                    kept.push(item.clone());
                }
            }
            kept
        }
        Task {
            id: self.id,
            agent_id: self.agent_id,
            creator_agent_id: self.creator_agent_id,
            task: self.task.clone(),
            status: self.status,
            source: self.source.clone(),
            task_type: self.task_type.clone(),
            tags: first_of_each(&self.tags),
            priority: self.priority,
            depends_on: first_of_each(&self.depends_on),
            offered_to: self.offered_to,
            offered_at: (self.status == TaskStatus::Offered).then_some(now),
            accepted_at: None,
            rejection_reason: None,
            created_at: now,
            last_updated_at: now,
            finished_at: None,
            failure_reason: None,
            output: None,
            progress: None,
            notified_at: None,
            lease_expires_at: None,
            lease_losses: 0,
            epic_id: self.epic_id,
            origin: self.origin.clone(),
        }
    }

    /// What the event log records when this task is created: `task_created` by its
    /// creator, and `task_offered` naming the agent when it is an offer.
    pub fn creation_events(&self) -> Vec<NewEvent> {
        let status = Some(self.status.as_str());
        let mut events = vec![NewEvent::change(
            EventType::TaskCreated,
            self.creator_agent_id,
            Some(self.id),
            None,
            status,
        )];
        if self.status == TaskStatus::Offered {
            events.push(NewEvent::change(
                EventType::TaskOffered,
                self.offered_to,
                Some(self.id),
                None,
                status,
            ));
        }
        events
    }
}

/// A task's text: trimmed, not empty, bounded, no NUL.
pub fn parse_task_text(text: &str) -> Result<String, Invalid> {
    let text = text.trim();
    reject_nul("task", text)?;
    if text.is_empty() {
        return Err(Invalid::new("task must not be empty"));
    }
    if text.chars().count() > TASK_TEXT_MAX_CHARS {
        return Err(Invalid(format!("task must be at most {TASK_TEXT_MAX_CHARS} characters")));
    }
    Ok(text.to_string())
}

fn parse_word(field: &str, text: &str) -> Result<String, Invalid> {
    let text = text.trim();
    let ok = !text.is_empty()
        && text.len() <= 64
        && text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'));
    if ok {
        Ok(text.to_string())
    } else {
        Err(Invalid(format!("{field} must be 1 to 64 letters, digits or _-.: characters, got {text:?}")))
    }
}

pub fn parse_tags(tags: Vec<String>) -> Result<Vec<String>, Invalid> {
    if tags.len() > TAGS_MAX {
        return Err(Invalid(format!("at most {TAGS_MAX} tags")));
    }
    let mut parsed: Vec<String> = Vec::with_capacity(tags.len());
    for tag in tags {
        let tag = tag.trim();
        reject_nul("tags", tag)?;
        if tag.is_empty() || tag.chars().count() > 100 {
            return Err(Invalid::new("each tag must be 1 to 100 characters"));
        }
        if !parsed.iter().any(|t| t == tag) {
            parsed.push(tag.to_string());
        }
    }
    Ok(parsed)
}

fn parse_dependencies(depends_on: Vec<TaskId>) -> Result<Vec<TaskId>, Invalid> {
    if depends_on.len() > DEPENDENCIES_MAX {
        return Err(Invalid(format!("at most {DEPENDENCIES_MAX} dependencies")));
    }
    let mut parsed = Vec::with_capacity(depends_on.len());
    for id in depends_on {
        if !parsed.contains(&id) {
            parsed.push(id);
        }
    }
    Ok(parsed)
}

/// Check a free-text field (output, reasons, progress) for size.
pub fn parse_note(field: &str, text: Option<String>) -> Result<Option<String>, Invalid> {
    match text {
        Some(text) if text.chars().count() > OUTPUT_MAX_CHARS => {
            Err(Invalid(format!("{field} must be at most {OUTPUT_MAX_CHARS} characters")))
        }
        Some(text) => reject_nul(field, &text).map(|()| Some(text)),
        None => Ok(None),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishOutcome {
    Completed { output: Option<String> },
    Failed { failure_reason: Option<String> },
}

impl FinishOutcome {
    pub fn status(&self) -> TaskStatus {
        match self {
            FinishOutcome::Completed { .. } => TaskStatus::Completed,
            FinishOutcome::Failed { .. } => TaskStatus::Failed,
        }
    }
}

/// Every status transition of a task. Each variant carries the agent its guard names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskAction {
    /// A pool task taken by an agent with capacity whose dependencies are done.
    Claim {
        agent: AgentId,
    },
    /// An agent gives a pending or started task back to the pool.
    Release {
        agent: AgentId,
    },
    /// The agent an offer was made to takes it.
    Accept {
        agent: AgentId,
    },
    /// The agent an offer was made to declines it; it returns to the pool.
    Reject {
        agent: AgentId,
        reason: Option<String>,
    },
    /// The assignee begins work (in the poll, or explicitly).
    Start {
        agent: AgentId,
    },
    Pause {
        agent: AgentId,
    },
    Resume {
        agent: AgentId,
    },
    /// `assignee` is the agent the task must belong to; `None` when the caller may
    /// finish any task (the lead, an operator).
    Finish {
        assignee: Option<AgentId>,
        outcome: FinishOutcome,
    },
    /// `unstarted_only`: refused once an agent has started the task (Inbox-MCP's
    /// `task_cancel`, which may only withdraw what nobody works on yet).
    Cancel {
        reason: Option<String>,
        unstarted_only: bool,
    },
    ToBacklog,
    FromBacklog,
}

/// Set a nullable column, clear it, or leave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldUpdate<T> {
    #[default]
    Keep,
    Set(T),
    Clear,
}

/// The guard of a transition, all of which must hold in the `WHERE` clause.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskGuard {
    /// `agent_id` must be this agent.
    pub assignee: Option<AgentId>,
    /// `offered_to` must be this agent.
    pub offered_to: Option<AgentId>,
    /// Every `dependsOn` task must be `completed`.
    pub dependencies_completed: bool,
    /// This agent must have fewer `in_progress` tasks than its `maxTasks`.
    pub capacity_of: Option<AgentId>,
    /// This agent must be `offline` and last heard of before this time (hand-back).
    pub holder_gone: Option<(AgentId, Timestamp)>,
}

/// The columns a transition writes besides `status` and `last_updated_at`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskUpdates {
    pub agent_id: FieldUpdate<AgentId>,
    pub offered_to: FieldUpdate<AgentId>,
    pub set_accepted_at: bool,
    pub set_finished_at: bool,
    pub output: Option<String>,
    pub failure_reason: Option<String>,
    pub rejection_reason: Option<String>,
    /// The lease of the new status; see [`TaskChange::with_lease`].
    pub lease_expires_at: FieldUpdate<Timestamp>,
    /// Whether the assignee took the task from the pool, so that an expired lease
    /// returns it there rather than to an agent that is gone.
    pub from_pool: Option<bool>,
}

/// A transition ready for a store: `UPDATE tasks SET <to, updates> WHERE id = ? AND
/// status IN <from> AND <guard> RETURNING ...`, plus the event log rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskChange {
    pub from: &'static [TaskStatus],
    pub to: TaskStatus,
    pub guard: TaskGuard,
    pub updates: TaskUpdates,
    /// Logged besides `task_status_change`, e.g. `task_claimed`.
    pub event: Option<EventType>,
    /// The metadata of that event (why a task was handed back).
    pub event_metadata: Option<serde_json::Value>,
}

impl TaskAction {
    pub fn name(&self) -> &'static str {
        match self {
            TaskAction::Claim { .. } => "claim",
            TaskAction::Release { .. } => "release",
            TaskAction::Accept { .. } => "accept",
            TaskAction::Reject { .. } => "reject",
            TaskAction::Start { .. } => "start",
            TaskAction::Pause { .. } => "pause",
            TaskAction::Resume { .. } => "resume",
            TaskAction::Finish { .. } => "finish",
            TaskAction::Cancel { .. } => "cancel",
            TaskAction::ToBacklog => "to_backlog",
            TaskAction::FromBacklog => "from_backlog",
        }
    }

    /// The transition table. Paused tasks may be cancelled too (the reference
    /// forgot them, which left paused work impossible to withdraw).
    pub fn change(&self) -> TaskChange {
        use TaskStatus::*;
        let mut guard = TaskGuard::default();
        let mut updates = TaskUpdates::default();
        let (from, to, event): (&'static [TaskStatus], TaskStatus, Option<EventType>) = match self {
            TaskAction::Claim { agent } => {
                guard.dependencies_completed = true;
                guard.capacity_of = Some(*agent);
                updates.agent_id = FieldUpdate::Set(*agent);
                updates.from_pool = Some(true);
                (&[Unassigned], Pending, Some(EventType::TaskClaimed))
            }
            // Ours: work already started may be given back too, by a runner whose agent
            // CLI cannot run (bad key, model down) rather than fail a task never worked.
            TaskAction::Release { agent } => {
                guard.assignee = Some(*agent);
                updates.agent_id = FieldUpdate::Clear;
                updates.from_pool = Some(false);
                (&[Pending, InProgress], Unassigned, Some(EventType::TaskReleased))
            }
            TaskAction::Accept { agent } => {
                guard.offered_to = Some(*agent);
                updates.agent_id = FieldUpdate::Set(*agent);
                updates.from_pool = Some(false);
                updates.set_accepted_at = true;
                (&[Offered, Reviewing], Pending, Some(EventType::TaskAccepted))
            }
            TaskAction::Reject { agent, reason } => {
                guard.offered_to = Some(*agent);
                updates.offered_to = FieldUpdate::Clear;
                updates.rejection_reason = reason.clone();
                (&[Offered, Reviewing], Unassigned, Some(EventType::TaskRejected))
            }
            TaskAction::Start { agent } => {
                guard.assignee = Some(*agent);
                guard.dependencies_completed = true;
                guard.capacity_of = Some(*agent);
                (&[Pending], InProgress, None)
            }
            TaskAction::Pause { agent } => {
                guard.assignee = Some(*agent);
                (&[InProgress], Paused, None)
            }
            TaskAction::Resume { agent } => {
                guard.assignee = Some(*agent);
                guard.capacity_of = Some(*agent);
                (&[Paused], InProgress, None)
            }
            TaskAction::Finish { assignee, outcome } => {
                guard.assignee = *assignee;
                updates.set_finished_at = true;
                match outcome {
                    FinishOutcome::Completed { output } => updates.output = output.clone(),
                    FinishOutcome::Failed { failure_reason } => {
                        updates.failure_reason = failure_reason.clone()
                    }
                }
                (&[InProgress], outcome.status(), None)
            }
            TaskAction::Cancel { reason, unstarted_only } => {
                updates.set_finished_at = true;
                updates.failure_reason = reason.clone();
                let from: &'static [TaskStatus] = if *unstarted_only {
                    &[Pending, Offered, Reviewing, Unassigned, Backlog]
                } else {
                    &[Pending, InProgress, Paused, Offered, Reviewing, Unassigned, Backlog]
                };
                (from, Cancelled, None)
            }
            TaskAction::ToBacklog => (&[Unassigned], Backlog, None),
            TaskAction::FromBacklog => (&[Backlog], Unassigned, None),
        };
        TaskChange { from, to, guard, updates, event, event_metadata: None }
    }
}

/// Why a transition did not happen, worked out from the task as it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    WrongStatus {
        current: TaskStatus,
        allowed: &'static [TaskStatus],
    },
    NotAssignee,
    NotOfferedToYou,
    DependenciesNotCompleted {
        waiting_on: Vec<TaskId>,
    },
    NoCapacity {
        in_progress: i64,
        max_tasks: i32,
    },
    /// A hand-back whose holder is online again (or not gone long enough).
    HolderNotGone,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::WrongStatus { current, allowed } => {
                let allowed: Vec<&str> = allowed.iter().map(TaskStatus::as_str).collect();
                write!(f, "task is {current}; this action needs it to be {}", allowed.join(" or "))
            }
            Refusal::NotAssignee => f.write_str("task is assigned to another agent"),
            Refusal::NotOfferedToYou => f.write_str("task was not offered to you"),
            Refusal::DependenciesNotCompleted { waiting_on } => {
                let ids: Vec<String> = waiting_on.iter().map(ToString::to_string).collect();
                write!(f, "task depends on tasks that are not completed: {}", ids.join(", "))
            }
            Refusal::NoCapacity { in_progress, max_tasks } => {
                write!(f, "agent is at capacity ({in_progress} of {max_tasks} tasks in progress)")
            }
            Refusal::HolderNotGone => f.write_str(
                "the agent holding the task is online; only a gone (offline) agent's work is handed on",
            ),
        }
    }
}

impl TaskChange {
    /// Give the new status its lease: a leased status ([`TaskStatus::is_leased`]) runs
    /// until `until` unless renewed; any other status holds no lease.
    pub fn with_lease(mut self, until: Timestamp) -> Self {
        self.updates.lease_expires_at =
            if self.to.is_leased() { FieldUpdate::Set(until) } else { FieldUpdate::Clear };
        self
    }

    /// The task as the change leaves it, for a store that has just applied it to
    /// `before` at `now` and need not read it back.
    pub fn applied_to(&self, before: &Task, now: Timestamp) -> Task {
        fn apply<T: Copy>(field: &mut Option<T>, update: FieldUpdate<T>) {
            match update {
                FieldUpdate::Keep => {}
                FieldUpdate::Set(value) => *field = Some(value),
                FieldUpdate::Clear => *field = None,
            }
        }
        let updates = &self.updates;
        let mut after = before.clone();
        after.status = self.to;
        after.last_updated_at = now;
        apply(&mut after.agent_id, updates.agent_id);
        apply(&mut after.offered_to, updates.offered_to);
        apply(&mut after.lease_expires_at, updates.lease_expires_at);
        if updates.set_accepted_at {
            after.accepted_at = Some(now);
        }
        if updates.set_finished_at {
            after.finished_at = Some(now);
        }
        let notes = [
            (&mut after.output, &updates.output),
            (&mut after.failure_reason, &updates.failure_reason),
            (&mut after.rejection_reason, &updates.rejection_reason),
        ];
        for (field, note) in notes {
            if let Some(note) = note {
                *field = Some(note.clone());
            }
        }
        after
    }

    /// What the event log records when this change is applied to a task that was in
    /// `old_status`: `task_status_change`, and the action's own event (with the reason of
    /// a rejection in its metadata).
    pub fn events(&self, task_id: TaskId, actor: Option<AgentId>, old_status: TaskStatus) -> Vec<NewEvent> {
        let (old, new) = (Some(old_status.as_str()), Some(self.to.as_str()));
        let mut events = vec![NewEvent::change(EventType::TaskStatusChange, actor, Some(task_id), old, new)];
        if let Some(event_type) = self.event {
            let mut event = NewEvent::change(event_type, actor, Some(task_id), old, new);
            if let Some(reason) = &self.updates.rejection_reason {
                event.metadata = Some(serde_json::json!({ "reason": reason }));
            }
            if let Some(metadata) = &self.event_metadata {
                event.metadata = Some(metadata.clone());
            }
            events.push(event);
        }
        events
    }

    /// The part of the guard that can be read off the task row alone; dependency and
    /// capacity guards need other rows and are checked by the caller.
    pub fn refusal_from_row(&self, task: &Task) -> Option<Refusal> {
        if !self.from.contains(&task.status) {
            return Some(Refusal::WrongStatus { current: task.status, allowed: self.from });
        }
        if let Some(assignee) = self.guard.assignee
            && task.agent_id != Some(assignee)
        {
            return Some(Refusal::NotAssignee);
        }
        if let Some(offered_to) = self.guard.offered_to
            && task.offered_to != Some(offered_to)
        {
            return Some(Refusal::NotOfferedToYou);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(task: &str) -> TaskDraft {
        TaskDraft { task: task.to_string(), ..TaskDraft::default() }
    }

    #[test]
    fn initial_status_follows_the_contract() {
        let agent = AgentId::new_v7();
        let check = |draft: TaskDraft, expected: TaskStatus| {
            assert_eq!(NewTask::parse(draft, None).unwrap().status, expected);
        };
        check(draft("pool"), TaskStatus::Unassigned);
        check(TaskDraft { agent_id: Some(agent), ..draft("assigned") }, TaskStatus::Pending);
        check(TaskDraft { offered_to: Some(agent), ..draft("offered") }, TaskStatus::Offered);
        check(TaskDraft { backlog: true, ..draft("later") }, TaskStatus::Backlog);
    }

    #[test]
    fn rejects_bad_drafts() {
        let agent = AgentId::new_v7();
        let check = |draft: TaskDraft| assert!(NewTask::parse(draft, None).is_err());
        check(draft("  "));
        check(draft("nul \0 inside"));
        check(TaskDraft { tags: vec!["a\0".into()], ..draft("x") });
        check(TaskDraft { priority: Some(101), ..draft("x") });
        check(TaskDraft { priority: Some(-1), ..draft("x") });
        check(TaskDraft { agent_id: Some(agent), offered_to: Some(agent), ..draft("x") });
        check(TaskDraft { backlog: true, agent_id: Some(agent), ..draft("x") });
        check(TaskDraft { source: Some("has space".into()), ..draft("x") });
    }

    #[test]
    fn finished_statuses_are_never_a_source() {
        let agent = AgentId::new_v7();
        let actions = [
            TaskAction::Claim { agent },
            TaskAction::Release { agent },
            TaskAction::Accept { agent },
            TaskAction::Reject { agent, reason: None },
            TaskAction::Start { agent },
            TaskAction::Pause { agent },
            TaskAction::Resume { agent },
            TaskAction::Finish { assignee: None, outcome: FinishOutcome::Completed { output: None } },
            TaskAction::Cancel { reason: None, unstarted_only: false },
            TaskAction::Cancel { reason: None, unstarted_only: true },
            TaskAction::ToBacklog,
            TaskAction::FromBacklog,
        ];
        for action in actions {
            let change = action.change();
            assert!(
                change.from.iter().all(|s| !s.is_finished()),
                "{} may leave a finished status",
                action.name()
            );
        }
    }

    #[test]
    fn an_unstarted_only_cancel_leaves_started_work_alone() {
        let cancel = |unstarted_only| TaskAction::Cancel { reason: None, unstarted_only }.change().from;
        for started in [TaskStatus::InProgress, TaskStatus::Paused] {
            assert!(cancel(false).contains(&started), "an operator's cancel stops {started}");
            assert!(!cancel(true).contains(&started), "the inbox's cancel refuses {started}");
        }
        for waiting in TaskStatus::EDITABLE {
            assert!(cancel(true).contains(&waiting), "the inbox may withdraw a {waiting} task");
        }
    }

    #[test]
    fn status_names_round_trip() {
        for status in TaskStatus::ALL {
            assert_eq!(TaskStatus::parse(status.as_str()).unwrap(), status);
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(json, format!("\"{}\"", status.as_str()));
        }
    }
}
