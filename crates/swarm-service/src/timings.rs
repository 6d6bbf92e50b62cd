//! Histograms counted without a lock: fixed buckets of atomics, read whole at scrape
//! time. Two of them: how long a trigger waited between being created and being handed
//! out (by trigger type), and how long the service's main store calls take (by call).

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

/// Upper bounds in seconds, from a sub-millisecond store call to a trigger that waited
/// an hour for a free agent.
pub const BUCKETS: [f64; 16] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0, 60.0, 600.0, 3600.0];

/// The store calls timed, as named in metrics: the poll's two, the writes every task
/// makes, and the background passes.
pub const STORE_CALLS: [&str; 7] = [
    "poll_view",
    "poll_claim",
    "task_create",
    "task_apply",
    "session_logs_append",
    "rescue",
    "retention_remove",
];

#[derive(Debug, Default)]
pub(crate) struct Histogram {
    /// One more than the bounds: the last counts what is above them all (`+Inf`).
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_micros: AtomicU64,
}

/// A histogram at one moment: per-bucket counts (not cumulative) with their upper
/// bounds, the last `+Inf`, as Prometheus encoders take them.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    pub buckets: Vec<(f64, u64)>,
    pub sum_seconds: f64,
    pub count: u64,
}

impl Histogram {
    pub(crate) fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let index = BUCKETS.iter().position(|bound| seconds <= *bound).unwrap_or(BUCKETS.len());
        self.counts[index].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> HistogramSnapshot {
        let buckets: Vec<(f64, u64)> = BUCKETS
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(self.counts.iter().map(|count| count.load(Ordering::Relaxed)))
            .collect();
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum_seconds = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        HistogramSnapshot { buckets, sum_seconds, count }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them() {
        let histogram = Histogram::default();
        histogram.observe(Duration::from_micros(300));
        histogram.observe(Duration::from_millis(1));
        histogram.observe(Duration::from_secs(7200));
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.count, 3);
        assert_eq!(snapshot.buckets[0], (0.0005, 1));
        assert_eq!(snapshot.buckets[1], (0.001, 1));
        assert_eq!(snapshot.buckets.last(), Some(&(f64::INFINITY, 1)));
        assert!((snapshot.sum_seconds - 7200.0013).abs() < 1e-6);
    }
}
