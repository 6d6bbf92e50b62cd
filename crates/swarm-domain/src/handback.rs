//! Work of an agent that is gone, handed on (issue 25).
//!
//! A lease only protects work from a runner that stops heartbeating: when it runs out,
//! an assigned task goes back to `pending` *for the same agent*, which may never come
//! back. So the rescuer also takes work from agents that stayed offline for
//! [`LeasePolicy::reassign_after`](crate::lease::LeasePolicy), and an operator may take
//! it at once. Each move is an ordinary guarded transition ([`TaskChange`]) whose guard
//! names the holder, its statuses, and the holder being offline (since before a time).
//!
//! Where the work goes:
//! - taken from the pool (`from_pool`): back to the pool, for any worker;
//! - asked of that agent (assigned at creation, offered, accepted): to the `backlog`,
//!   which no worker claims, and the lead is told (`tasks_handed_back`), because the
//!   creator chose that agent and another one is a decision, not a default;
//! - `paused` work is left with the rescuer alone: a pause is the agent's own "I will
//!   come back to this" (a runner shutting down pauses what it ran, and resumes it at its
//!   next start, in the same worktree); only an operator hands it on.

use serde::Serialize;

use crate::{
    event::EventType,
    id::{AgentId, TaskId},
    task::{FieldUpdate, Task, TaskChange, TaskGuard, TaskStatus, TaskUpdates},
    time::Timestamp,
};

/// At most this many moves are reported in one `tasks_handed_back` trigger.
pub const HANDOFFS_TRIGGER_MAX: i64 = 50;

/// Where a handed-back task goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandBackTo {
    /// `unassigned`: any worker may claim it.
    Pool,
    /// `backlog`: parked for the lead or an operator to decide.
    Backlog,
    /// `pending` for this agent (an operator's `reassign`).
    Agent(AgentId),
}

impl HandBackTo {
    pub fn status(&self) -> TaskStatus {
        match self {
            HandBackTo::Pool => TaskStatus::Unassigned,
            HandBackTo::Backlog => TaskStatus::Backlog,
            HandBackTo::Agent(_) => TaskStatus::Pending,
        }
    }

    /// The rescuer's choice: the pool for what the agent took from it, else the lead's
    /// attention (see the module's documentation).
    pub fn for_rescue(from_pool: bool, status: TaskStatus) -> Self {
        let held = matches!(status, TaskStatus::Pending | TaskStatus::InProgress);
        if from_pool && held { HandBackTo::Pool } else { HandBackTo::Backlog }
    }
}

/// Who takes the work, which decides the statuses it may be taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandBackBy {
    /// The rescuer: the holder must have been last heard of before `seen_before`.
    Rescuer { seen_before: Timestamp },
    /// An operator (or the lead): the holder must be offline now; paused work too.
    Operator { now: Timestamp },
}

/// The task `holder` holds (it is `agent_id`, or `offered_to` of an offer: `offer`),
/// handed back. A task that changed in the meantime, or a holder that came back, makes
/// the guard false and nothing moves.
pub fn change(holder: AgentId, offer: bool, to: HandBackTo, by: HandBackBy, reason: &str) -> TaskChange {
    use TaskStatus::*;
    let (from, seen_before): (&'static [TaskStatus], Timestamp) = match (by, offer) {
        (_, true) => (&[Offered, Reviewing], by.seen_before()),
        (HandBackBy::Rescuer { seen_before }, false) => (&[Pending, InProgress], seen_before),
        (HandBackBy::Operator { now }, false) => (&[Pending, InProgress, Paused], now),
    };
    let guard = TaskGuard {
        assignee: (!offer).then_some(holder),
        offered_to: offer.then_some(holder),
        holder_gone: Some((holder, seen_before)),
        ..TaskGuard::default()
    };
    let updates = TaskUpdates {
        agent_id: match to {
            HandBackTo::Agent(agent) => FieldUpdate::Set(agent),
            HandBackTo::Pool | HandBackTo::Backlog => FieldUpdate::Clear,
        },
        offered_to: FieldUpdate::Clear,
        lease_expires_at: FieldUpdate::Clear,
        from_pool: Some(false),
        ..TaskUpdates::default()
    };
    TaskChange {
        from,
        to: to.status(),
        guard,
        updates,
        event: Some(EventType::TaskHandedBack),
        event_metadata: Some(serde_json::json!({ "fromAgentId": holder, "reason": reason })),
    }
}

/// An operator assigns a task nobody holds (the pool, or the backlog the rescuer put it
/// in) to `agent`.
pub fn assign_unheld(agent: AgentId, reason: &str) -> TaskChange {
    TaskChange {
        from: &[TaskStatus::Unassigned, TaskStatus::Backlog],
        to: TaskStatus::Pending,
        guard: TaskGuard::default(),
        updates: TaskUpdates {
            agent_id: FieldUpdate::Set(agent),
            from_pool: Some(false),
            ..TaskUpdates::default()
        },
        event: Some(EventType::TaskHandedBack),
        event_metadata: Some(serde_json::json!({ "reason": reason })),
    }
}

impl HandBackBy {
    fn seen_before(&self) -> Timestamp {
        match *self {
            HandBackBy::Rescuer { seen_before } => seen_before,
            HandBackBy::Operator { now } => now,
        }
    }
}

/// The rescuer's reason, logged on the task and told to the lead.
pub fn rescue_reason(reassign_after_secs: u64, to: TaskStatus) -> String {
    let whither = match to {
        TaskStatus::Unassigned => "back to the pool (it was taken from there)",
        _ => "to the backlog for the lead (it was assigned or offered to that agent)",
    };
    format!("its agent has been offline for more than {reassign_after_secs}s; moved {whither}")
}

/// One task the rescuer moved, for waking whoever can take it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandedBack {
    pub task_id: TaskId,
    pub holder: AgentId,
    pub from: TaskStatus,
    pub to: TaskStatus,
}

/// One move, as the lead's `tasks_handed_back` trigger reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Handoff {
    /// The task as it is now.
    pub task: Task,
    /// The agent that was gone.
    pub from_agent_id: AgentId,
    pub from_status: TaskStatus,
    pub to_status: TaskStatus,
    pub reason: String,
    pub handed_back_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_work_returns_to_the_pool_and_chosen_work_to_the_lead() {
        use TaskStatus::*;
        assert_eq!(HandBackTo::for_rescue(true, InProgress), HandBackTo::Pool);
        assert_eq!(HandBackTo::for_rescue(true, Pending), HandBackTo::Pool);
        assert_eq!(HandBackTo::for_rescue(false, Pending), HandBackTo::Backlog);
        assert_eq!(HandBackTo::for_rescue(false, Reviewing), HandBackTo::Backlog);
    }

    #[test]
    fn the_rescuer_leaves_paused_work_and_the_operator_takes_it() {
        let agent = AgentId::new_v7();
        let now = Timestamp::now();
        let rescuer = change(agent, false, HandBackTo::Pool, HandBackBy::Rescuer { seen_before: now }, "r");
        assert!(!rescuer.from.contains(&TaskStatus::Paused));
        let operator = change(agent, false, HandBackTo::Pool, HandBackBy::Operator { now }, "r");
        assert!(operator.from.contains(&TaskStatus::Paused));
        assert_eq!(operator.guard.assignee, Some(agent));
        assert_eq!(operator.guard.holder_gone, Some((agent, now)));
        let offer = change(agent, true, HandBackTo::Backlog, HandBackBy::Operator { now }, "r");
        assert_eq!((offer.guard.offered_to, offer.guard.assignee), (Some(agent), None));
        for change in [rescuer, operator, offer] {
            assert!(change.from.iter().all(|status| !status.is_finished()));
            assert_eq!(change.updates.lease_expires_at, FieldUpdate::Clear, "no lease outlives its holder");
        }
    }
}
