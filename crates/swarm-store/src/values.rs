//! The store's own values, beside the domain's: its error, the outcomes of guarded
//! changes, the filters of its listings, and what it reads for the service in one query
//! (a poll's view, a finished task's waiters).

use swarm_domain::{
    agent::AgentStatus,
    id::{AgentId, ChannelId, InboxMessageId, MailId, TaskId},
    poll::TriggerKind,
    task::Task,
    time::Timestamp,
};

pub type StoreResult<T> = Result<T, StoreError>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness rule was broken (agent name, one lead). The message is user-facing.
    #[error("{0}")]
    Conflict(String),
    /// A referenced row does not exist (foreign key). The message is user-facing.
    #[error("{0}")]
    MissingReference(String),
    /// The database cannot take writes or answer for now (its disk is full, its server is
    /// unreachable): nothing was changed, and the same request may succeed later. The
    /// message is user-facing and says what to do.
    #[error("{0}")]
    Unavailable(String),
    /// The database failed; the message is for the log, not the user.
    #[error("database error: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The outcome of a guarded change to one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied<T> {
    /// The guard held: the row before and after the change.
    Changed {
        before: T,
        after: T,
    },
    /// The row exists but the guard was false; nothing changed. The row as it stands.
    Refused {
        current: T,
    },
    NotFound,
}

/// What a store that writes on one thread (SQLite) has done there since it opened, for
/// metrics: how close that thread is to being the hub's limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterUsage {
    /// Transactions committed (or rolled back), each a group of writes.
    pub transactions: u64,
    /// Writes run in those transactions.
    pub writes: u64,
    /// Time the writer spent on them and on its own upkeep, not waiting for work.
    pub busy: std::time::Duration,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub agent_id: Option<AgentId>,
    pub task_id: Option<TaskId>,
    pub limit: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionCostFilter {
    pub task_id: Option<TaskId>,
    pub agent_id: Option<AgentId>,
    pub limit: i64,
}

/// How a firing is claimed: a scheduler's firing of a slot, or an event (webhook,
/// manual) that fires whenever it comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FireGuard {
    /// Fires only while `next_run_at` is still `expected` (and the trigger enabled),
    /// moving it to `next`: of several hubs that saw the slot due, one fires it.
    Slot { expected: Timestamp, next: Option<Timestamp> },
    /// Fires whenever the trigger exists (and is enabled, when asked); the schedule is
    /// left alone.
    Event { require_enabled: bool },
}

/// What makes a webhook delivery a repeat: its mark, until `expires_at` (for good when
/// `None`). A mark that expired is as good as absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryMark {
    pub id: String,
    pub expires_at: Option<Timestamp>,
}

impl DeliveryMark {
    pub fn forever(id: impl Into<String>) -> Self {
        DeliveryMark { id: id.into(), expires_at: None }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FireOutcome {
    Fired(Box<Task>),
    /// The slot was taken (another hub fired it) or moved; nothing changed.
    NotDue,
    Disabled,
    /// The delivery id was seen before; nothing changed.
    Duplicate,
    NotFound,
}

/// A task created from a trigger session, and who awaits its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTaskAwait {
    pub agent_id: AgentId,
    pub parent_task_id: TaskId,
    pub trigger_name: String,
    pub session_key: String,
}

/// The items of one trigger that its holder gives back ([`Store::claims_release`](crate::Store::claims_release)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldItems {
    pub inbox: Vec<InboxMessageId>,
    pub channels: Vec<ChannelId>,
    pub mail: Vec<MailId>,
    /// Task results (`task_result`), by the awaited task.
    pub results: Vec<TaskId>,
}

impl HeldItems {
    pub fn is_empty(&self) -> bool {
        self.inbox.is_empty() && self.channels.is_empty() && self.mail.is_empty() && self.results.is_empty()
    }
}

/// What a release did ([`Store::claims_release`](crate::Store::claims_release)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Released {
    /// Items back where a poll finds them.
    pub returned: usize,
    /// Items set aside as dead letters: handed over `max_deliveries` times.
    pub dead_lettered: usize,
}

/// Who waits for a task to finish ([`Store::task_waiters`](crate::Store::task_waiters)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskWaiters {
    /// Some task lists this one among its dependencies.
    pub has_dependents: bool,
    /// The agent whose trigger session awaits this task's result.
    pub awaiting_agent: Option<AgentId>,
    /// Its assignee has mail pending: unread mail to it, or mail it sent that awaits a
    /// response. Whoever delegated its work hears of that when the assignee finishes
    /// (`seeds/agent-mailbox.md`, the waiting pattern); read here, in the finish's own
    /// transaction, it spares every finish a read of its own.
    pub assignee_mail_pending: bool,
}

/// What a poll reads first, in one query, to learn whether there is anything to claim:
/// a poll that finds nothing writes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollView {
    pub is_lead: bool,
    pub status: AgentStatus,
    /// The agent's last registration or heartbeat.
    pub last_seen_at: Timestamp,
    pub in_progress: i64,
    pub max_tasks: i32,
    /// The kinds that have a candidate for this agent right now, capacity aside. A hint:
    /// the claim checks everything again.
    pub waiting: Vec<TriggerKind>,
}

/// One agent's heartbeat kept by a hub and written with others' in one batch
/// ([`crate::Store::agent_heartbeats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    pub agent: swarm_domain::id::AgentId,
    /// The runner that sent it (`X-Runner-ID`): whose lead-side claims it extends.
    pub runner: Option<swarm_domain::id::RunnerId>,
    /// When the hub heard it: the agent's last sign of life.
    pub at: swarm_domain::time::Timestamp,
    /// The end of the leases it extends.
    pub lease_until: swarm_domain::time::Timestamp,
}
