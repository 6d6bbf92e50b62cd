//! Leases: how long a claim lasts without a heartbeat, and what happens to a claim
//! whose holder went silent. The stores apply these rules; the service's rescuer runs
//! them on a timer (see docs/flows.md, "Claims, leases and waking").

use std::time::Duration;

use crate::{
    event::{EventType, NewEvent},
    id::{AgentId, TaskId},
    task::TaskStatus,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeasePolicy {
    /// How long a claim lasts after the holder's last heartbeat; also how long an agent
    /// may stay silent before it is marked `offline`.
    pub period: Duration,
    /// A task whose holder lets its lease run out this many times is failed.
    pub max_losses: i32,
    /// A lead-side claim (inbox message, mentions, urgent mail, task result) handed over
    /// this many times without being handled becomes a dead letter when it comes back.
    pub max_deliveries: i32,
    /// A task result whose awaiting agent has been offline this long after the task
    /// finished (or whose delivery was dead-lettered) goes to the lead instead.
    pub result_handoff: Duration,
    /// An agent offline this long loses the work it held (see [`crate::handback`]);
    /// zero keeps it waiting for the agent forever.
    pub reassign_after: Duration,
}

impl LeasePolicy {
    pub const DEFAULT_PERIOD: Duration = Duration::from_secs(45);
    pub const DEFAULT_MAX_LOSSES: i32 = 3;
    pub const DEFAULT_MAX_DELIVERIES: i32 = 5;
    pub const DEFAULT_RESULT_HANDOFF: Duration = Duration::from_secs(15 * 60);
    pub const DEFAULT_REASSIGN_AFTER: Duration = Duration::from_secs(10 * 60);

    pub fn period_millis(&self) -> i64 {
        i64::try_from(self.period.as_millis()).unwrap_or(i64::MAX)
    }

    /// Agents last heard of before this have been offline for `reassign_after` at least
    /// (a silent agent goes offline one lease period after its last heartbeat; one that
    /// closed, at it, so it waits one period more), or `None` when hand-back is off.
    pub fn gone_before(&self, now: crate::time::Timestamp) -> Option<crate::time::Timestamp> {
        if self.reassign_after.is_zero() {
            return None;
        }
        let after = i64::try_from(self.reassign_after.as_millis()).unwrap_or(i64::MAX);
        Some(now.minus_millis(self.period_millis().saturating_add(after)))
    }
}

impl Default for LeasePolicy {
    fn default() -> Self {
        LeasePolicy {
            period: Self::DEFAULT_PERIOD,
            max_losses: Self::DEFAULT_MAX_LOSSES,
            max_deliveries: Self::DEFAULT_MAX_DELIVERIES,
            result_handoff: Self::DEFAULT_RESULT_HANDOFF,
            reassign_after: Self::DEFAULT_REASSIGN_AFTER,
        }
    }
}

/// What becomes of a task whose lease ran out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expiry {
    /// Back where it came from. `clear_assignee` when it returns to the pool.
    Return { to: TaskStatus, clear_assignee: bool },
    /// It kept coming back: give up on it.
    Fail { reason: String },
}

/// A leased task's claim ran out. `losses` counts this loss too. Returns `None` for a
/// status that holds no lease (the row changed: nothing to do).
pub fn on_expiry(status: TaskStatus, from_pool: bool, losses: i32, policy: &LeasePolicy) -> Option<Expiry> {
    if !status.is_leased() {
        return None;
    }
    if losses >= policy.max_losses {
        let what = match status {
            TaskStatus::Reviewing => "was offered",
            _ => "was worked on",
        };
        return Some(Expiry::Fail {
            reason: format!(
                "lease lost {losses} times: each agent that {what} it stopped heartbeating before \
                 finishing (lease period {}s); check those agents' runners, then create the task again",
                policy.period.as_secs()
            ),
        });
    }
    Some(match status {
        TaskStatus::Reviewing => Expiry::Return { to: TaskStatus::Offered, clear_assignee: false },
        _ if from_pool => Expiry::Return { to: TaskStatus::Unassigned, clear_assignee: true },
        _ => Expiry::Return { to: TaskStatus::Pending, clear_assignee: false },
    })
}

impl Expiry {
    pub fn status(&self) -> TaskStatus {
        match self {
            Expiry::Return { to, .. } => *to,
            Expiry::Fail { .. } => TaskStatus::Failed,
        }
    }

    /// The event log rows of an expiry: `task_lease_expired` naming the holder that went
    /// silent, and the status change (by nobody: the hub did it).
    pub fn events(
        &self,
        task_id: TaskId,
        holder: Option<AgentId>,
        from: TaskStatus,
        losses: i32,
    ) -> Vec<NewEvent> {
        let (old, new) = (Some(from.as_str()), Some(self.status().as_str()));
        let mut expired = NewEvent::change(EventType::TaskLeaseExpired, holder, Some(task_id), old, new);
        let reason = match self {
            Expiry::Return { .. } => "the holder stopped heartbeating".to_string(),
            Expiry::Fail { reason } => reason.clone(),
        };
        expired.metadata = Some(serde_json::json!({ "reason": reason, "leaseLosses": losses }));
        vec![expired, NewEvent::change(EventType::TaskStatusChange, None, Some(task_id), old, new)]
    }
}

/// An agent marked `offline` because its heartbeats stopped: the event's metadata says so.
pub fn silent_agent_event(agent: AgentId, old_status: &str, policy: &LeasePolicy) -> NewEvent {
    let mut event =
        NewEvent::change(EventType::AgentStatusChange, Some(agent), None, Some(old_status), Some("offline"));
    event.metadata = Some(serde_json::json!({
        "reason": format!("no heartbeat for {}s", policy.period.as_secs())
    }));
    event
}

/// What one pass of the rescuer did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RescueReport {
    pub expired: Vec<ExpiredClaim>,
    /// Agents marked `offline` because they stopped heartbeating.
    pub silenced: Vec<AgentId>,
    /// Leads whose `processing` inbox messages went back to `unread`, once per message.
    pub inbox_returned_to: Vec<AgentId>,
    /// Agents whose claimed channels (`unread_mentions`) came back after their lease ran out.
    pub mentions_returned_to: Vec<AgentId>,
    /// Agents whose claimed urgent mail went back to `unread`, once per piece.
    pub mail_returned_to: Vec<AgentId>,
    /// Agents whose claimed task results (`task_result`) came back after their lease ran out.
    pub results_returned_to: Vec<AgentId>,
    /// Leads that were handed task results whose awaiting agent stayed away, once per result.
    pub results_handed_to: Vec<AgentId>,
    /// Tasks taken from agents offline for `reassign_after`.
    pub handed_back: Vec<crate::handback::HandedBack>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredClaim {
    pub task_id: TaskId,
    pub holder: Option<AgentId>,
    pub from: TaskStatus,
    pub to: TaskStatus,
    /// Who is now expected to act on the task, for waking them.
    pub offered_to: Option<AgentId>,
    pub agent_id: Option<AgentId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expired_claims_go_back_where_they_came_from() {
        let policy = LeasePolicy::default();
        let back = |status, from_pool| on_expiry(status, from_pool, 1, &policy);
        assert_eq!(
            back(TaskStatus::Reviewing, false),
            Some(Expiry::Return { to: TaskStatus::Offered, clear_assignee: false })
        );
        assert_eq!(
            back(TaskStatus::InProgress, false),
            Some(Expiry::Return { to: TaskStatus::Pending, clear_assignee: false })
        );
        assert_eq!(
            back(TaskStatus::InProgress, true),
            Some(Expiry::Return { to: TaskStatus::Unassigned, clear_assignee: true })
        );
        assert_eq!(back(TaskStatus::Pending, false), None, "no lease, nothing to return");
    }

    #[test]
    fn a_task_that_keeps_losing_its_lease_fails() {
        let policy = LeasePolicy { max_losses: 2, ..LeasePolicy::default() };
        assert!(matches!(on_expiry(TaskStatus::InProgress, true, 1, &policy), Some(Expiry::Return { .. })));
        let Some(Expiry::Fail { reason }) = on_expiry(TaskStatus::InProgress, true, 2, &policy) else {
            panic!("the second loss fails the task");
        };
        assert!(reason.contains("lease lost 2 times"), "{reason}");
    }
}
