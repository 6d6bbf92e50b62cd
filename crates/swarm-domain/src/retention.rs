//! Retention: what a busy hub forgets, and after how long.
//!
//! Only the record of work that is over is ever removed: a finished task's session logs
//! and events, trigger hand-outs that were delivered, mail that was read, inbox messages
//! that were handled, MCP tasks whose time ran out. Tasks themselves, agents, schedules,
//! costs and anything still in play stay, whatever their age.

use std::time::Duration;

use crate::time::Timestamp;

/// One kind of row that retention removes, each with its own window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Expiring {
    /// Session log lines of finished tasks (and lines that belong to no task).
    SessionLogs,
    /// Events of finished tasks (and events about no task, such as an agent's status).
    Events,
    /// Trigger hand-outs that are over: task results delivered to their awaiting
    /// session, handed-back tasks the lead was told about, expired webhook delivery marks,
    /// Slack's once-only marks (events handled, outcomes posted), and the records of polls
    /// a daily budget refused.
    DeliveredTriggers,
    /// Agent mail that was read (and answered, when its sender awaited an answer), and
    /// inbox messages the lead read, answered or delegated.
    ReadMail,
    /// Finished tasks themselves, with everything of theirs (tags, logs, events, costs):
    /// those the lead was told about (`tasks_finished`; cancelled ones and a lead's own
    /// need no telling), that no task depends on, no trigger session awaits and no inbox
    /// message was delegated to. Off unless asked for.
    FinishedTasks,
    /// MCP tasks (the Tasks extension) past their own `expires_at`: nobody can read them
    /// any more, so their window is nil and no policy keeps them.
    McpTasks,
}

impl Expiring {
    pub const ALL: [Expiring; 6] = [
        Expiring::SessionLogs,
        Expiring::Events,
        Expiring::DeliveredTriggers,
        Expiring::ReadMail,
        Expiring::FinishedTasks,
        Expiring::McpTasks,
    ];

    /// The name in metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            Expiring::SessionLogs => "session_logs",
            Expiring::Events => "events",
            Expiring::DeliveredTriggers => "delivered_triggers",
            Expiring::ReadMail => "read_mail",
            Expiring::FinishedTasks => "finished_tasks",
            Expiring::McpTasks => "mcp_tasks",
        }
    }

    /// Position in [`Expiring::ALL`].
    pub fn index(self) -> usize {
        match self {
            Expiring::SessionLogs => 0,
            Expiring::Events => 1,
            Expiring::DeliveredTriggers => 2,
            Expiring::ReadMail => 3,
            Expiring::FinishedTasks => 4,
            Expiring::McpTasks => 5,
        }
    }
}

/// How long each kind is kept; `None` keeps it for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPolicy {
    pub session_logs: Option<Duration>,
    pub events: Option<Duration>,
    pub delivered_triggers: Option<Duration>,
    pub read_mail: Option<Duration>,
    pub finished_tasks: Option<Duration>,
}

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

impl Default for RetentionPolicy {
    /// Bounded for a busy hub: logs are the bulk and the least read after a fortnight.
    /// Finished tasks themselves are kept: they are the swarm's record of its work.
    fn default() -> Self {
        RetentionPolicy::from_days(14, 30, 30, 90).with_finished_tasks_days(0)
    }
}

impl RetentionPolicy {
    /// Windows in days; 0 keeps that kind for good.
    pub fn from_days(session_logs: u32, events: u32, delivered_triggers: u32, read_mail: u32) -> Self {
        let window = |days: u32| (days > 0).then(|| DAY * days);
        RetentionPolicy {
            session_logs: window(session_logs),
            events: window(events),
            delivered_triggers: window(delivered_triggers),
            read_mail: window(read_mail),
            finished_tasks: None,
        }
    }

    /// The same, also removing finished tasks `days` after they ended; 0 keeps them.
    pub fn with_finished_tasks_days(self, days: u32) -> Self {
        RetentionPolicy { finished_tasks: (days > 0).then(|| DAY * days), ..self }
    }

    /// Keeps everything.
    pub fn keep_all() -> Self {
        RetentionPolicy {
            session_logs: None,
            events: None,
            delivered_triggers: None,
            read_mail: None,
            finished_tasks: None,
        }
    }

    /// An MCP task's window is nil: it carries its own expiry (SEP-2663's `ttlMs`), and
    /// past it no client can read it.
    pub fn window(&self, kind: Expiring) -> Option<Duration> {
        match kind {
            Expiring::SessionLogs => self.session_logs,
            Expiring::Events => self.events,
            Expiring::DeliveredTriggers => self.delivered_triggers,
            Expiring::ReadMail => self.read_mail,
            Expiring::FinishedTasks => self.finished_tasks,
            Expiring::McpTasks => Some(Duration::ZERO),
        }
    }

    /// Rows of `kind` older than this instant are removed at `now`; `None`: kept for good.
    pub fn cutoff(&self, kind: Expiring, now: Timestamp) -> Option<Timestamp> {
        let window = self.window(kind)?;
        Some(now.minus_millis(i64::try_from(window.as_millis()).unwrap_or(i64::MAX)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_days_keeps_for_good_and_the_cutoff_is_the_window_before_now() {
        let policy = RetentionPolicy::from_days(14, 0, 30, 90);
        let now = Timestamp::from_unix_millis(100 * 86_400_000).expect("a time");
        assert_eq!(policy.cutoff(Expiring::Events, now), None);
        assert_eq!(policy.cutoff(Expiring::SessionLogs, now), Timestamp::from_unix_millis(86 * 86_400_000));
        assert_eq!(policy.cutoff(Expiring::McpTasks, now), Some(now), "expired MCP tasks go at once");
        for (index, kind) in Expiring::ALL.iter().enumerate() {
            assert_eq!(kind.index(), index);
        }
    }
}
