//! The last hour in one-minute points, for the dashboard's small charts: queue depth,
//! trigger wait and runs finished. Kept in memory by a background task that reads the
//! activity counters and one `stats` snapshot a minute; a restarted hub starts over.
//! A point is up to a minute old: the dashboard shows the queue depth of now (the same
//! sum of `GET /api/stats`) beside the line, so a task just created counts at once.

use std::{collections::VecDeque, sync::Mutex, time::Duration};

use swarm_domain::stats::StatsPoint;

use crate::{Service, ServiceResult, rescue::Background, timings::HistogramSnapshot};

/// How often a point is taken.
pub const HISTORY_EVERY: Duration = Duration::from_secs(60);
/// Points kept: an hour.
const POINTS: usize = 60;

#[derive(Debug, Default)]
pub(crate) struct History {
    points: Mutex<VecDeque<StatsPoint>>,
    /// The counters at the previous point: each point shows what happened since.
    previous: Mutex<Option<Totals>>,
}

#[derive(Debug, Clone)]
struct Totals {
    waits: Vec<u64>,
    bounds: Vec<f64>,
    runs_finished: u64,
}

impl Service {
    /// The points of the last hour, oldest first.
    pub fn stats_history(&self) -> Vec<StatsPoint> {
        lock(&self.history.points).iter().cloned().collect()
    }

    async fn take_history_point(&self) -> ServiceResult<()> {
        let stats = self.store.stats().await?;
        let activity = self.activity.snapshot();
        let totals = totals(&activity.trigger_age, &activity.run_reports);
        let previous = lock(&self.history.previous).replace(totals.clone());
        let (waits, runs_finished) = match previous {
            Some(previous) => (
                totals
                    .waits
                    .iter()
                    .zip(&previous.waits)
                    .map(|(now, then)| now.saturating_sub(*then))
                    .collect(),
                totals.runs_finished.saturating_sub(previous.runs_finished),
            ),
            // The first point covers what happened since the hub started.
            None => (totals.waits.clone(), totals.runs_finished),
        };
        let tasks = &stats.tasks;
        let point = StatsPoint {
            at: self.clock.now(),
            queue_depth: tasks.unassigned + tasks.offered + tasks.pending,
            trigger_wait_p95_ms: p95(&waits, &totals.bounds).map(|seconds| seconds * 1000.0),
            runs_finished,
        };
        let mut points = lock(&self.history.points);
        if points.len() == POINTS {
            points.pop_front();
        }
        points.push_back(point);
        Ok(())
    }

    /// Take a point now and then every `every`.
    pub fn start_history(&self, every: Duration) -> Background {
        let service = self.clone();
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if let Err(error) = service.take_history_point().await {
                    tracing::warn!(%error, "could not take the dashboard's history point");
                }
            }
        });
        Background { tasks: vec![task] }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Every trigger kind's wait buckets added up, and the runs finished so far.
fn totals(waits: &[(&'static str, HistogramSnapshot)], runs: &[(&'static str, u64)]) -> Totals {
    let bounds: Vec<f64> = waits
        .first()
        .map(|(_, histogram)| histogram.buckets.iter().map(|(bound, _)| *bound).collect())
        .unwrap_or_default();
    let mut summed = vec![0; bounds.len()];
    for (_, histogram) in waits {
        for (total, (_, count)) in summed.iter_mut().zip(&histogram.buckets) {
            *total += count;
        }
    }
    let runs_finished =
        runs.iter().filter(|(name, _)| *name == "completed" || *name == "failed").map(|(_, n)| n).sum();
    Totals { waits: summed, bounds, runs_finished }
}

/// The bound of the bucket that holds the 95th percentile (the last finite bound for the
/// `+Inf` bucket); `None` without observations.
fn p95(counts: &[u64], bounds: &[f64]) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let wanted = (total * 95).div_ceil(100);
    let mut seen = 0;
    for (index, count) in counts.iter().enumerate() {
        seen += count;
        if seen >= wanted {
            let bound = bounds[index];
            return Some(if bound.is_finite() { bound } else { bounds[index.saturating_sub(1)] });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p95_is_the_bound_of_the_bucket_holding_it() {
        let bounds = [0.001, 0.01, 0.1, f64::INFINITY];
        assert_eq!(p95(&[0, 0, 0, 0], &bounds), None);
        assert_eq!(p95(&[95, 5, 0, 0], &bounds), Some(0.001));
        assert_eq!(p95(&[94, 6, 0, 0], &bounds), Some(0.01));
        assert_eq!(p95(&[0, 0, 0, 3], &bounds), Some(0.1));
    }
}
