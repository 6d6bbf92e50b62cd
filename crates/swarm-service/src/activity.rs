//! What the hub is doing now, counted without a lock: how many polls are parked, how
//! many polls were answered, how many scheduler and Slack passes ran.
//!
//! These are the few facts that an observer cannot read from the database. Tests use
//! them to know that something did *not* happen (a poll stayed parked, the scheduler
//! passed and fired nothing) by waiting for an event instead of sleeping; an operator's
//! metrics read the same numbers.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

#[derive(Debug, Default)]
pub(crate) struct Activity {
    parked_polls: AtomicI64,
    polls_answered: AtomicU64,
    scheduler_passes: AtomicU64,
    slack_sweeps: AtomicU64,
}

/// The counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActivitySnapshot {
    /// Polls waiting for a trigger right now.
    pub parked_polls: i64,
    /// Polls answered (with a trigger or with none) since the process started.
    pub polls_answered: u64,
    /// Scheduler passes finished since the process started.
    pub scheduler_passes: u64,
    /// Passes of the Slack bridge over finished and progressing Slack tasks.
    pub slack_sweeps: u64,
}

impl Activity {
    pub(crate) fn snapshot(&self) -> ActivitySnapshot {
        ActivitySnapshot {
            parked_polls: self.parked_polls.load(Ordering::Relaxed),
            polls_answered: self.polls_answered.load(Ordering::Relaxed),
            scheduler_passes: self.scheduler_passes.load(Ordering::Relaxed),
            slack_sweeps: self.slack_sweeps.load(Ordering::Relaxed),
        }
    }

    /// Counts a poll as parked until the returned guard drops, which also happens when
    /// the client goes away and the request's future is dropped mid-wait.
    pub(crate) fn parked(&self) -> ParkedPoll<'_> {
        self.parked_polls.fetch_add(1, Ordering::Relaxed);
        ParkedPoll(self)
    }

    pub(crate) fn poll_answered(&self) {
        self.polls_answered.fetch_add(1, Ordering::Relaxed);
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
