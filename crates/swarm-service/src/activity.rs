//! What the hub is doing now, counted without a lock: how many polls are parked, how
//! many polls were answered (and with which trigger), how many scheduler, Slack and
//! rescuer passes ran and what the rescuer took back.
//!
//! These are the few facts that an observer cannot read from the database. Tests use
//! them to know that something did *not* happen (a poll stayed parked, the scheduler
//! passed and fired nothing) by waiting for an event instead of sleeping; an operator's
//! metrics read the same numbers.

use std::{
    sync::atomic::{AtomicI64, AtomicU64, Ordering},
    time::Duration,
};

use swarm_domain::{lease::RescueReport, poll::Trigger, retention::Expiring, time::Timestamp};

use crate::timings::{Histogram, HistogramSnapshot, STORE_CALLS};

/// Every trigger type a poll can hand out, as `Trigger::type_name` spells it: a fixed
/// list, so that metrics show a zero for a kind never handed out instead of no series.
pub const TRIGGER_TYPES: [&str; 9] = [
    "task_offered",
    "task_assigned",
    "urgent_mail",
    "slack_inbox_message",
    "unread_mentions",
    "tasks_finished",
    "task_result",
    "pool_tasks_available",
    // Not work handed over but a poll refused by a daily budget: how often runners hear it.
    "budget_refused",
];

/// Where work comes in from outside, and what became of each delivery (`ignored`: from a
/// Slack user who is not allowed).
pub const INBOUND_SOURCES: [&str; 2] = ["slack", "webhook"];
pub const INBOUND_OUTCOMES: [&str; 4] = ["received", "rejected", "duplicate", "ignored"];

/// What agents and runners report at the end of a run: a task finished (`completed`,
/// `failed`) or a session's cost (a run of the agent CLI ended, with or without an error).
pub const RUN_REPORTS: [&str; 4] = ["completed", "failed", "session_ok", "session_error"];

/// Which agent CLI a runner started, as a metric label: the two harnesses swarm knows by
/// name, and `other` for any command (`--harness cmd`), so a label never grows unbounded.
pub const RUNNER_CLIS: [&str; 3] = ["claude", "codex", "other"];
/// Whether the runner's attempt to start the agent CLI succeeded.
pub const SPAWN_OUTCOMES: [&str; 2] = ["started", "not_started"];

#[derive(Debug, Default)]
pub(crate) struct Activity {
    parked_polls: AtomicI64,
    polls_answered: AtomicU64,
    triggers_handed: [AtomicU64; TRIGGER_TYPES.len()],
    scheduler_passes: AtomicU64,
    slack_sweeps: AtomicU64,
    rescue_passes: AtomicU64,
    leases_expired: AtomicU64,
    agents_silenced: AtomicU64,
    lead_claims_returned: AtomicU64,
    retention_passes: AtomicU64,
    retention_removed: [AtomicU64; Expiring::ALL.len()],
    pages_reclaimed: AtomicU64,
    trigger_age: [Histogram; TRIGGER_TYPES.len()],
    store_calls: [Histogram; STORE_CALLS.len()],
    inbound: [[AtomicU64; INBOUND_OUTCOMES.len()]; INBOUND_SOURCES.len()],
    run_reports: [AtomicU64; RUN_REPORTS.len()],
    runner_spawns: [[AtomicU64; SPAWN_OUTCOMES.len()]; RUNNER_CLIS.len()],
}

/// The counters at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct ActivitySnapshot {
    /// Polls waiting for a trigger right now.
    pub parked_polls: i64,
    /// Polls answered (with a trigger or with none) since the process started.
    pub polls_answered: u64,
    /// Scheduler passes finished since the process started.
    pub scheduler_passes: u64,
    /// Passes of the Slack bridge over finished and progressing Slack tasks.
    pub slack_sweeps: u64,
    /// Triggers handed out by polls, by type (in [`TRIGGER_TYPES`] order).
    pub triggers_handed: [(&'static str, u64); TRIGGER_TYPES.len()],
    /// Rescuer passes finished since the process started.
    pub rescue_passes: u64,
    /// Task claims (offers under review, tasks in progress) whose lease ran out.
    pub leases_expired: u64,
    /// Agents marked offline for want of a heartbeat.
    pub agents_silenced: u64,
    /// Lead-side claims (inbox messages, mentions, urgent mail, task results) that the
    /// rescuer made available again or handed to the lead.
    pub lead_claims_returned: u64,
    /// Retention passes finished since the process started.
    pub retention_passes: u64,
    /// Rows retention removed, by kind (in [`Expiring::ALL`] order).
    pub retention_removed: [(&'static str, u64); Expiring::ALL.len()],
    /// Database pages retention gave back to the file system (SQLite).
    pub pages_reclaimed: u64,
    /// Time from a trigger's creation to its hand-out, by type ([`TRIGGER_TYPES`] order;
    /// `pool_tasks_available` carries no creation time and stays empty).
    pub trigger_age: Vec<(&'static str, HistogramSnapshot)>,
    /// Duration of the service's main store calls, by call.
    pub store_calls: Vec<(&'static str, HistogramSnapshot)>,
    /// Deliveries from Slack and webhooks: `(source, outcome, count)`.
    pub inbound: Vec<(&'static str, &'static str, u64)>,
    /// Run outcomes reported by runners, by [`RUN_REPORTS`] name.
    pub run_reports: Vec<(&'static str, u64)>,
    /// Agent CLI starts reported by runners: `(cli, outcome, count)`.
    pub runner_spawns: Vec<(&'static str, &'static str, u64)>,
    /// Heartbeats heard and the database writes they took (`heartbeats.rs`).
    pub heartbeats: crate::HeartbeatSnapshot,
}

impl ActivitySnapshot {
    /// How many triggers of this type (`Trigger::type_name`) polls handed out.
    pub fn triggers_handed(&self, type_name: &str) -> u64 {
        self.triggers_handed.iter().find(|(name, _)| *name == type_name).map_or(0, |(_, n)| *n)
    }

    /// How many rows of this kind retention removed.
    pub fn retention_removed(&self, kind: Expiring) -> u64 {
        self.retention_removed[kind.index()].1
    }
}

impl Activity {
    pub(crate) fn snapshot(&self) -> ActivitySnapshot {
        ActivitySnapshot {
            parked_polls: self.parked_polls.load(Ordering::Relaxed),
            polls_answered: self.polls_answered.load(Ordering::Relaxed),
            scheduler_passes: self.scheduler_passes.load(Ordering::Relaxed),
            slack_sweeps: self.slack_sweeps.load(Ordering::Relaxed),
            triggers_handed: std::array::from_fn(|index| {
                (TRIGGER_TYPES[index], self.triggers_handed[index].load(Ordering::Relaxed))
            }),
            rescue_passes: self.rescue_passes.load(Ordering::Relaxed),
            leases_expired: self.leases_expired.load(Ordering::Relaxed),
            agents_silenced: self.agents_silenced.load(Ordering::Relaxed),
            lead_claims_returned: self.lead_claims_returned.load(Ordering::Relaxed),
            retention_passes: self.retention_passes.load(Ordering::Relaxed),
            retention_removed: std::array::from_fn(|index| {
                (Expiring::ALL[index].name(), self.retention_removed[index].load(Ordering::Relaxed))
            }),
            pages_reclaimed: self.pages_reclaimed.load(Ordering::Relaxed),
            trigger_age: TRIGGER_TYPES
                .iter()
                .copied()
                .zip(self.trigger_age.iter().map(Histogram::snapshot))
                .collect(),
            store_calls: STORE_CALLS
                .iter()
                .copied()
                .zip(self.store_calls.iter().map(Histogram::snapshot))
                .collect(),
            inbound: INBOUND_SOURCES
                .iter()
                .zip(&self.inbound)
                .flat_map(|(source, counts)| {
                    INBOUND_OUTCOMES
                        .iter()
                        .zip(counts)
                        .map(move |(outcome, count)| (*source, *outcome, count.load(Ordering::Relaxed)))
                })
                .collect(),
            run_reports: RUN_REPORTS
                .iter()
                .copied()
                .zip(self.run_reports.iter().map(|count| count.load(Ordering::Relaxed)))
                .collect(),
            runner_spawns: RUNNER_CLIS
                .iter()
                .zip(&self.runner_spawns)
                .flat_map(|(cli, counts)| {
                    SPAWN_OUTCOMES
                        .iter()
                        .zip(counts)
                        .map(move |(outcome, count)| (*cli, *outcome, count.load(Ordering::Relaxed)))
                })
                .collect(),
            heartbeats: crate::HeartbeatSnapshot::default(),
        }
    }

    /// Counts a poll as parked until the returned guard drops, which also happens when
    /// the client goes away and the request's future is dropped mid-wait.
    pub(crate) fn parked(&self) -> ParkedPoll<'_> {
        self.parked_polls.fetch_add(1, Ordering::Relaxed);
        ParkedPoll(self)
    }

    pub(crate) fn poll_answered(&self, trigger: Option<&Trigger>, now: Timestamp) {
        self.polls_answered.fetch_add(1, Ordering::Relaxed);
        if let Some(trigger) = trigger {
            let name = trigger.type_name();
            // A type missing from the list is a test failure (below), not a lost count
            // worth a panic in production.
            if let Some(index) = TRIGGER_TYPES.iter().position(|known| *known == name) {
                self.triggers_handed[index].fetch_add(1, Ordering::Relaxed);
                if let Some(since) = trigger.available_since() {
                    let waited = now.unix_millis().saturating_sub(since.unix_millis()).max(0);
                    self.trigger_age[index].observe(Duration::from_millis(waited.unsigned_abs()));
                }
            }
        }
    }

    pub(crate) fn store_call(&self, call: &str, elapsed: Duration) {
        if let Some(index) = STORE_CALLS.iter().position(|known| *known == call) {
            self.store_calls[index].observe(elapsed);
        }
    }

    pub(crate) fn inbound(&self, source: &str, outcome: &str) {
        let source = INBOUND_SOURCES.iter().position(|known| *known == source);
        let outcome = INBOUND_OUTCOMES.iter().position(|known| *known == outcome);
        if let (Some(source), Some(outcome)) = (source, outcome) {
            self.inbound[source][outcome].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn run_reported(&self, report: &str) {
        if let Some(index) = RUN_REPORTS.iter().position(|known| *known == report) {
            self.run_reports[index].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `cli` is whatever the runner named; anything but a known harness counts as `other`.
    pub(crate) fn runner_spawned(&self, cli: &str, started: bool) {
        let cli = RUNNER_CLIS.iter().position(|known| *known == cli).unwrap_or(RUNNER_CLIS.len() - 1);
        self.runner_spawns[cli][usize::from(!started)].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn rescued(&self, report: &RescueReport) {
        let count = |items: usize| u64::try_from(items).unwrap_or(u64::MAX);
        self.rescue_passes.fetch_add(1, Ordering::Relaxed);
        self.leases_expired.fetch_add(count(report.expired.len()), Ordering::Relaxed);
        self.agents_silenced.fetch_add(count(report.silenced.len()), Ordering::Relaxed);
        let returned = report.inbox_returned_to.len()
            + report.mentions_returned_to.len()
            + report.mail_returned_to.len()
            + report.results_returned_to.len()
            + report.results_handed_to.len();
        self.lead_claims_returned.fetch_add(count(returned), Ordering::Relaxed);
    }

    pub(crate) fn retention_removed(&self, kind: Expiring, rows: u64) {
        self.retention_removed[kind.index()].fetch_add(rows, Ordering::Relaxed);
    }

    pub(crate) fn retention_passed(&self) {
        self.retention_passes.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn pages_reclaimed(&self, pages: u64) {
        self.pages_reclaimed.fetch_add(pages, Ordering::Relaxed);
    }

    pub(crate) fn slack_swept(&self) {
        self.slack_sweeps.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn scheduler_passed(&self) {
        self.scheduler_passes.fetch_add(1, Ordering::Relaxed);
    }
}

pub(crate) struct ParkedPoll<'a>(&'a Activity);

impl Drop for ParkedPoll<'_> {
    fn drop(&mut self) {
        self.0.parked_polls.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_trigger_type_is_counted() {
        let activity = Activity::default();
        let triggers = [
            Trigger::UrgentMail { count: 0, mail: Vec::new() },
            Trigger::SlackInboxMessage { count: 0, messages: Vec::new() },
            Trigger::UnreadMentions { mentions_count: 0, claimed_channels: Vec::new(), messages: Vec::new() },
            Trigger::TasksFinished { count: 0, tasks: Vec::new() },
            Trigger::PoolTasksAvailable { count: 1 },
            Trigger::BudgetRefused(swarm_domain::budget::BudgetRefused {
                cause: swarm_domain::budget::RefusalCause::Global,
                agent_spend: None,
                agent_budget: None,
                global_spend: None,
                global_budget: None,
                reset_at: String::new(),
            }),
        ];
        for trigger in &triggers {
            activity.poll_answered(Some(trigger), Timestamp::now());
        }
        activity.poll_answered(None, Timestamp::now());
        let snapshot = activity.snapshot();
        assert_eq!(snapshot.polls_answered, 7);
        for trigger in &triggers {
            assert_eq!(snapshot.triggers_handed(trigger.type_name()), 1, "{}", trigger.type_name());
        }
        assert_eq!(snapshot.triggers_handed("task_offered"), 0);
    }
}
