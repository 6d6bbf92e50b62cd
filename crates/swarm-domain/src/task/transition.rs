//! The transition table: every [`TaskAction`], the from-statuses, guard and updates
//! of its [`TaskChange`], and the [`Refusal`] a caller gets when the guard is false.

use crate::{
    event::{EventType, NewEvent},
    id::{AgentId, TaskId},
    time::Timestamp,
};

use super::{Task, TaskStatus};

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
