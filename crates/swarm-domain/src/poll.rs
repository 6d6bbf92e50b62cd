//! The poll (`GET /api/poll`): the kinds of trigger an agent can be handed, who may
//! receive each, and the order in which they are checked.
//!
//! Each kind is claimed by the store in the same transaction that finds it, so a
//! trigger goes to exactly one poll. A later feature adds a kind here (with its place in
//! [`TriggerKind::ORDER`] and its [`Audience`]) and a claim in each store; the service's
//! poll loop and the long-poll machinery need no change.

use serde::Serialize;

use crate::{id::TaskId, task::Task};

/// At most this many finished tasks are reported in one `tasks_finished` trigger.
pub const TASKS_FINISHED_MAX: i64 = 50;

/// Who may receive a kind of trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    Anyone,
    LeadOnly,
    WorkerOnly,
}

impl Audience {
    pub fn admits(&self, is_lead: bool) -> bool {
        match self {
            Audience::Anyone => true,
            Audience::LeadOnly => is_lead,
            Audience::WorkerOnly => !is_lead,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TriggerKind {
    /// The oldest task offered to me; claimed `offered` → `reviewing` with a lease.
    TaskOffered,
    /// My best ready `pending` task, if I have capacity; claimed `pending` →
    /// `in_progress` with a lease.
    TaskAssigned,
    /// Finished worker tasks the lead has not been told about; claimed by `notifiedAt`.
    TasksFinished,
    /// The best ready pool task, if I have capacity; claimed `unassigned` →
    /// `in_progress` for me with a lease, and reported as `task_assigned`.
    PoolTask,
    /// Informational (the reference's behaviour, only when asked for): pool tasks
    /// exist. Claims nothing.
    PoolTasksAvailable,
}

impl TriggerKind {
    /// The order in which a poll checks the kinds: the first that yields wins.
    pub const ORDER: [TriggerKind; 5] = [
        TriggerKind::TaskOffered,
        TriggerKind::TaskAssigned,
        TriggerKind::TasksFinished,
        TriggerKind::PoolTask,
        TriggerKind::PoolTasksAvailable,
    ];

    pub fn audience(&self) -> Audience {
        match self {
            TriggerKind::TaskOffered | TriggerKind::TaskAssigned => Audience::Anyone,
            TriggerKind::TasksFinished => Audience::LeadOnly,
            TriggerKind::PoolTask | TriggerKind::PoolTasksAvailable => Audience::WorkerOnly,
        }
    }

    /// Kinds that start work and so need a free slot (`in_progress` < `maxTasks`).
    pub fn needs_capacity(&self) -> bool {
        matches!(self, TriggerKind::TaskAssigned | TriggerKind::PoolTask)
    }
}

/// How a worker learns about pool tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PoolMode {
    /// The best ready pool task is claimed for the worker inside the poll (ours).
    #[default]
    Claim,
    /// The reference's informational `pool_tasks_available {count}`; claims nothing.
    Notify,
}

impl PoolMode {
    /// The kinds a poll in this mode checks, in order.
    pub fn kinds(&self) -> impl Iterator<Item = TriggerKind> + use<> {
        let mode = *self;
        TriggerKind::ORDER.into_iter().filter(move |kind| match kind {
            TriggerKind::PoolTask => mode == PoolMode::Claim,
            TriggerKind::PoolTasksAvailable => mode == PoolMode::Notify,
            _ => true,
        })
    }
}

/// What a poll hands an agent: serialized as CONTRACT.md's `{type, ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum Trigger {
    TaskOffered { task_id: TaskId, task: Task },
    TaskAssigned { task_id: TaskId, task: Task },
    TasksFinished { count: usize, tasks: Vec<Task> },
    PoolTasksAvailable { count: i64 },
}

impl Trigger {
    pub fn type_name(&self) -> &'static str {
        match self {
            Trigger::TaskOffered { .. } => "task_offered",
            Trigger::TaskAssigned { .. } => "task_assigned",
            Trigger::TasksFinished { .. } => "tasks_finished",
            Trigger::PoolTasksAvailable { .. } => "pool_tasks_available",
        }
    }
}
