//! The poll (`GET /api/poll`): the kinds of trigger an agent can be handed, who may
//! receive each, and the order in which they are checked.
//!
//! Each kind is claimed by the store in the same transaction that finds it, so a
//! trigger goes to exactly one poll. A later feature adds a kind here (with its place in
//! [`TriggerKind::ORDER`] and its [`Audience`]) and a claim in each store; the service's
//! poll loop and the long-poll machinery need no change.

use serde::Serialize;

use crate::{
    chat::ChatMessage,
    event::{EventType, NewEvent},
    id::{AgentId, TaskId},
    inbox::InboxMessage,
    mail::Mail,
    task::{Task, TaskStatus},
};

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
    /// Up to [`crate::mail::URGENT_TRIGGER_MAX`] of my undelivered urgent mail; claimed
    /// `unread` → `processing` with a lease, delivered when I read it.
    UrgentMail,
    /// Lead only: up to [`crate::inbox::INBOX_TRIGGER_MAX`] of its oldest `unread` inbox
    /// messages; claimed `unread` → `processing` with a lease.
    SlackInboxMessage,
    /// Channels where I was mentioned since I last read them; each claimed with
    /// `processing_since` and a lease, cleared when I read the channel.
    UnreadMentions,
    /// Finished worker tasks the lead has not been told about; claimed by `notifiedAt`.
    TasksFinished,
    /// Lead only (ours): tasks the rescuer took from agents that stayed offline, not yet
    /// reported; claimed by the hand-off's `notified_at`, like `tasks_finished`.
    TasksHandedBack,
    /// Lead only (the reference's): active epics whose tasks finished since the lead was
    /// last told; claimed by moving each epic's notified change count up to its count.
    EpicProgressChanged,
    /// A task created from one of my trigger sessions finished: claimed with
    /// `processing_since` and a lease until the runner has resumed that session with
    /// the result and acknowledged it.
    TaskResult,
    /// The best ready pool task, if I have capacity; claimed `unassigned` →
    /// `in_progress` for me with a lease, and reported as `task_assigned`.
    PoolTask,
    /// Informational (the reference's behaviour, only when asked for): pool tasks
    /// exist. Claims nothing.
    PoolTasksAvailable,
}

impl TriggerKind {
    /// The order in which a poll checks the kinds: the first that yields wins.
    pub const ORDER: [TriggerKind; 11] = [
        TriggerKind::TaskOffered,
        TriggerKind::TaskAssigned,
        TriggerKind::UrgentMail,
        TriggerKind::TaskResult,
        TriggerKind::SlackInboxMessage,
        TriggerKind::UnreadMentions,
        TriggerKind::TasksHandedBack,
        TriggerKind::TasksFinished,
        TriggerKind::EpicProgressChanged,
        TriggerKind::PoolTask,
        TriggerKind::PoolTasksAvailable,
    ];

    pub fn audience(&self) -> Audience {
        match self {
            TriggerKind::TaskOffered
            | TriggerKind::TaskAssigned
            | TriggerKind::UrgentMail
            | TriggerKind::TaskResult
            | TriggerKind::UnreadMentions => Audience::Anyone,
            TriggerKind::SlackInboxMessage
            | TriggerKind::TasksFinished
            | TriggerKind::TasksHandedBack
            | TriggerKind::EpicProgressChanged => Audience::LeadOnly,
            TriggerKind::PoolTask | TriggerKind::PoolTasksAvailable => Audience::WorkerOnly,
        }
    }

    /// Whether the reference's runner (which sends no `X-Runner-ID`) knows what to do with
    /// this kind for an agent of this role: the kinds the reference's poll hands out, mentions for
    /// the lead only. It starts any other kind with its default prompt, which says
    /// nothing of the trigger, so mail, results and hand-backs would be claimed for a run
    /// that never sees them; they wait for a read instead.
    pub fn known_to_reference_runner(&self, is_lead: bool) -> bool {
        match self {
            TriggerKind::TaskOffered
            | TriggerKind::TaskAssigned
            | TriggerKind::SlackInboxMessage
            | TriggerKind::TasksFinished
            | TriggerKind::PoolTask
            | TriggerKind::PoolTasksAvailable => true,
            // The reference's own lead trigger (its runner has a prompt for it).
            TriggerKind::UnreadMentions | TriggerKind::EpicProgressChanged => is_lead,
            TriggerKind::UrgentMail | TriggerKind::TaskResult | TriggerKind::TasksHandedBack => false,
        }
    }

    /// Kinds that start work and so need a free slot (`in_progress` < `maxTasks`).
    pub fn needs_capacity(&self) -> bool {
        matches!(self, TriggerKind::TaskAssigned | TriggerKind::PoolTask)
    }

    /// The task transition of a kind that claims one task: from, to.
    pub fn task_transition(&self) -> Option<(TaskStatus, TaskStatus)> {
        match self {
            TriggerKind::TaskOffered => Some((TaskStatus::Offered, TaskStatus::Reviewing)),
            TriggerKind::TaskAssigned => Some((TaskStatus::Pending, TaskStatus::InProgress)),
            TriggerKind::PoolTask => Some((TaskStatus::Unassigned, TaskStatus::InProgress)),
            TriggerKind::UrgentMail
            | TriggerKind::SlackInboxMessage
            | TriggerKind::UnreadMentions
            | TriggerKind::TasksFinished
            | TriggerKind::TasksHandedBack
            | TriggerKind::EpicProgressChanged
            | TriggerKind::TaskResult
            | TriggerKind::PoolTasksAvailable => None,
        }
    }

    /// What the event log records when a poll claims a task for `agent`: the status
    /// change, and `task_claimed` when it came from the pool.
    pub fn claim_events(&self, task_id: TaskId, agent: AgentId) -> Vec<NewEvent> {
        let Some((from, to)) = self.task_transition() else {
            return Vec::new();
        };
        let (old, new) = (Some(from.as_str()), Some(to.as_str()));
        let mut events =
            vec![NewEvent::change(EventType::TaskStatusChange, Some(agent), Some(task_id), old, new)];
        if *self == TriggerKind::PoolTask {
            events.push(NewEvent::change(EventType::TaskClaimed, Some(agent), Some(task_id), old, new));
        }
        events
    }

    /// The trigger that hands over a task claimed by this kind.
    pub fn task_trigger(&self, task: Task) -> Option<Trigger> {
        let task_id = task.id;
        match self {
            TriggerKind::TaskOffered => Some(Trigger::TaskOffered { task_id, task }),
            TriggerKind::TaskAssigned | TriggerKind::PoolTask => {
                Some(Trigger::TaskAssigned { task_id, task })
            }
            TriggerKind::UrgentMail
            | TriggerKind::SlackInboxMessage
            | TriggerKind::UnreadMentions
            | TriggerKind::TasksFinished
            | TriggerKind::TasksHandedBack
            | TriggerKind::EpicProgressChanged
            | TriggerKind::TaskResult
            | TriggerKind::PoolTasksAvailable => None,
        }
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

/// What a poll hands an agent: serialized as the reference's `{type, ...}`. Each variant
/// names its fields in camelCase itself (not `rename_all_fields`, which utoipa does not
/// read), so the schema documented for `GET /api/poll` and `poll-task` is the wire's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Trigger {
    #[serde(rename_all = "camelCase")]
    TaskOffered { task_id: TaskId, task: Task },
    #[serde(rename_all = "camelCase")]
    TaskAssigned { task_id: TaskId, task: Task },
    /// Urgent mail for me, oldest first.
    #[serde(rename_all = "camelCase")]
    UrgentMail { count: usize, mail: Vec<Mail> },
    #[serde(rename_all = "camelCase")]
    SlackInboxMessage { count: usize, messages: Vec<InboxMessage> },
    /// The reference's `{mentionsCount, claimedChannels}`, and (ours) the unread messages
    /// that mention the agent, oldest first, across the channels claimed.
    #[serde(rename_all = "camelCase")]
    UnreadMentions {
        mentions_count: usize,
        claimed_channels: Vec<crate::id::ChannelId>,
        messages: Vec<ChatMessage>,
    },
    #[serde(rename_all = "camelCase")]
    TasksFinished { count: usize, tasks: Vec<Task> },
    /// Tasks taken from agents that stayed offline (ours), oldest move first.
    #[serde(rename_all = "camelCase")]
    TasksHandedBack { count: usize, handoffs: Vec<crate::handback::Handoff> },
    /// Active epics whose tasks finished since the lead was last told (the reference's
    /// shape: each entry is `{epic, finishedTasks}`).
    #[serde(rename_all = "camelCase")]
    EpicProgressChanged { count: usize, epics: Vec<crate::epic::EpicProgress> },
    /// A task my trigger session created has finished (ours): resume that session
    /// (`sessionId`, when one was recorded) with the result.
    #[serde(rename_all = "camelCase")]
    TaskResult {
        task_id: TaskId,
        task: Task,
        parent_task_id: TaskId,
        trigger_name: String,
        session_key: String,
        session_id: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    PoolTasksAvailable { count: i64 },
    /// Work waits but a daily budget is reached (issue 40): nothing was claimed; wait and
    /// poll again. The reference's `budget_refused` envelope.
    BudgetRefused(crate::budget::BudgetRefused),
}

impl Trigger {
    /// Since when what it hands out was there to take: a task's creation, the oldest
    /// message's or mail's, the first finished task's end, the first hand-back. `None`
    /// for the pool's count, which has no one moment.
    pub fn available_since(&self) -> Option<crate::time::Timestamp> {
        match self {
            Trigger::TaskOffered { task, .. } | Trigger::TaskAssigned { task, .. } => Some(task.created_at),
            Trigger::UrgentMail { mail, .. } => mail.iter().map(|piece| piece.created_at).min(),
            Trigger::SlackInboxMessage { messages, .. } => messages.iter().map(|m| m.created_at).min(),
            Trigger::UnreadMentions { messages, .. } => messages.iter().map(|m| m.created_at).min(),
            Trigger::TasksFinished { tasks, .. } => tasks.iter().filter_map(|task| task.finished_at).min(),
            Trigger::TasksHandedBack { handoffs, .. } => handoffs.iter().map(|h| h.handed_back_at).min(),
            Trigger::EpicProgressChanged { epics, .. } => {
                epics.iter().flat_map(|epic| &epic.finished_tasks).filter_map(|task| task.finished_at).min()
            }
            Trigger::TaskResult { task, .. } => task.finished_at,
            Trigger::PoolTasksAvailable { .. } | Trigger::BudgetRefused(_) => None,
        }
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Trigger::TaskOffered { .. } => "task_offered",
            Trigger::TaskAssigned { .. } => "task_assigned",
            Trigger::UrgentMail { .. } => "urgent_mail",
            Trigger::SlackInboxMessage { .. } => "slack_inbox_message",
            Trigger::UnreadMentions { .. } => "unread_mentions",
            Trigger::TasksFinished { .. } => "tasks_finished",
            Trigger::TasksHandedBack { .. } => "tasks_handed_back",
            Trigger::EpicProgressChanged { .. } => "epic_progress_changed",
            Trigger::TaskResult { .. } => "task_result",
            Trigger::PoolTasksAvailable { .. } => "pool_tasks_available",
            Trigger::BudgetRefused(_) => "budget_refused",
        }
    }
}

/// Who a committed change may concern: the parked polls to wake so they re-check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Wake {
    Agent(AgentId),
    Workers,
    Leads,
    Everyone,
}

impl Wake {
    /// The polls a task change may have given a trigger: the agent it was offered or
    /// assigned to; workers for a pool task; the lead when it finished, and the
    /// assignee whose slot it freed. `has_dependents`: tasks wait on this one, and a
    /// completion may have made them ready for anyone.
    pub fn after_task_change(
        task: &Task,
        previous_assignee: Option<AgentId>,
        has_dependents: bool,
    ) -> Vec<Wake> {
        let mut wakes = Vec::new();
        match task.status {
            TaskStatus::Offered => wakes.extend(task.offered_to.map(Wake::Agent)),
            TaskStatus::Pending | TaskStatus::Paused => wakes.extend(task.agent_id.map(Wake::Agent)),
            TaskStatus::Unassigned => wakes.push(Wake::Workers),
            TaskStatus::Completed if has_dependents => wakes.push(Wake::Everyone),
            TaskStatus::Completed | TaskStatus::Failed => {
                wakes.push(Wake::Leads);
                wakes.extend(task.agent_id.map(Wake::Agent));
            }
            TaskStatus::Cancelled => {}
            TaskStatus::Backlog | TaskStatus::Reviewing | TaskStatus::InProgress => {}
        }
        // Whoever held it before may have a free slot now.
        if let Some(previous) = previous_assignee
            && task.agent_id != Some(previous)
        {
            wakes.push(Wake::Agent(previous));
        }
        if task.status == TaskStatus::Cancelled {
            wakes.extend(task.agent_id.map(Wake::Agent));
        }
        wakes
    }

    /// The text form carried between processes (PostgreSQL `NOTIFY` payloads).
    pub fn encode(&self) -> String {
        match self {
            Wake::Agent(id) => format!("agent:{id}"),
            Wake::Workers => "workers".into(),
            Wake::Leads => "leads".into(),
            Wake::Everyone => "everyone".into(),
        }
    }

    /// Anything unreadable wakes everyone: a spurious re-check is harmless, a lost
    /// wake-up is not.
    pub fn decode(text: &str) -> Wake {
        match text {
            "workers" => Wake::Workers,
            "leads" => Wake::Leads,
            _ => text
                .strip_prefix("agent:")
                .and_then(|id| AgentId::parse(id).ok())
                .map_or(Wake::Everyone, Wake::Agent),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_mode_chooses_the_pool_kind() {
        let claim: Vec<_> = PoolMode::Claim.kinds().collect();
        assert!(claim.contains(&TriggerKind::PoolTask) && !claim.contains(&TriggerKind::PoolTasksAvailable));
        let notify: Vec<_> = PoolMode::Notify.kinds().collect();
        assert!(
            notify.contains(&TriggerKind::PoolTasksAvailable) && !notify.contains(&TriggerKind::PoolTask)
        );
        assert_eq!(claim[0], TriggerKind::TaskOffered, "offers come first");
    }

    #[test]
    fn wakes_round_trip_and_garbage_wakes_everyone() {
        let agent = AgentId::new_v7();
        for wake in [Wake::Agent(agent), Wake::Workers, Wake::Leads, Wake::Everyone] {
            assert_eq!(Wake::decode(&wake.encode()), wake);
        }
        assert_eq!(Wake::decode("agent:not-a-uuid"), Wake::Everyone);
        assert_eq!(Wake::decode(""), Wake::Everyone);
    }
}
