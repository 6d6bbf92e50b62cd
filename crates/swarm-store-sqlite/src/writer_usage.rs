//! The writer thread's work, counted for `/metrics`: with one thread doing every write,
//! its busy share is how close the hub is to its write limit (near 1, writes queue).

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use swarm_store::WriterUsage;

#[derive(Debug, Default)]
pub(crate) struct WriterCounters {
    transactions: AtomicU64,
    writes: AtomicU64,
    busy_nanos: AtomicU64,
}

impl WriterCounters {
    /// A group's transaction began, with its first write.
    pub(crate) fn transaction_began(&self) {
        self.transactions.fetch_add(1, Ordering::Relaxed);
        self.writes.fetch_add(1, Ordering::Relaxed);
    }

    /// Another write joined the group's transaction.
    pub(crate) fn write_joined(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn busy_for(&self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.busy_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub(crate) fn usage(&self) -> WriterUsage {
        WriterUsage {
            transactions: self.transactions.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            busy: Duration::from_nanos(self.busy_nanos.load(Ordering::Relaxed)),
        }
    }
}
