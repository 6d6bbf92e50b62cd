//! Retention, the third background task: every so often, each kind of finished record
//! older than its window is removed in small batches, with a pause between batches, so
//! that the hub's requests never queue behind a long delete.

use std::time::Duration;

use swarm_domain::retention::{Expiring, RetentionPolicy};

use crate::{Service, ServiceResult, rescue::Background};

/// Rows per batch: one batch is a transaction of a few milliseconds.
pub const RETENTION_BATCH: u32 = 500;
/// How often retention runs in `swarm serve`; a pass over a hub in steady state finds
/// a few batches' worth.
pub const RETENTION_EVERY: Duration = Duration::from_secs(10 * 60);
/// The pause between two batches, which lets queued writes through.
const BATCH_PAUSE: Duration = Duration::from_millis(20);

/// What one pass removed, by kind (in [`Expiring::ALL`] order), and the database pages
/// it gave back to the file system.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionReport {
    pub removed: [u64; Expiring::ALL.len()],
    pub pages_reclaimed: u64,
}

impl RetentionReport {
    pub fn removed(&self, kind: Expiring) -> u64 {
        self.removed[kind.index()]
    }
}

impl Service {
    /// One pass: every kind with a window, batch after batch until a batch comes back
    /// short, then the freed space given back in bounded steps. Time is the service's
    /// clock, so a test moves it instead of waiting for weeks.
    pub async fn retention_pass(&self, policy: &RetentionPolicy) -> ServiceResult<RetentionReport> {
        let now = self.clock.now();
        let mut report = RetentionReport::default();
        for kind in Expiring::ALL {
            let Some(cutoff) = policy.cutoff(kind, now) else { continue };
            loop {
                let removed = self
                    .timed("retention_remove", self.store.retention_remove(kind, cutoff, RETENTION_BATCH))
                    .await?;
                report.removed[kind.index()] += removed;
                self.activity.retention_removed(kind, removed);
                if removed < u64::from(RETENTION_BATCH) {
                    break;
                }
                report.pages_reclaimed += self.reclaim_step().await?;
                tokio::time::sleep(BATCH_PAUSE).await;
            }
        }
        loop {
            let pages = self.reclaim_step().await?;
            if pages == 0 {
                break;
            }
            report.pages_reclaimed += pages;
            tokio::time::sleep(BATCH_PAUSE).await;
        }
        self.activity.retention_passed();
        let removed: u64 = report.removed.iter().sum();
        if removed > 0 {
            tracing::info!(
                session_logs = report.removed(Expiring::SessionLogs),
                events = report.removed(Expiring::Events),
                delivered_triggers = report.removed(Expiring::DeliveredTriggers),
                read_mail = report.removed(Expiring::ReadMail),
                finished_tasks = report.removed(Expiring::FinishedTasks),
                mcp_tasks = report.removed(Expiring::McpTasks),
                pages_reclaimed = report.pages_reclaimed,
                "retention removed finished work's records older than their windows"
            );
        }
        Ok(report)
    }

    async fn reclaim_step(&self) -> ServiceResult<u64> {
        let pages = self.store.reclaim_space().await?;
        self.activity.pages_reclaimed(pages);
        Ok(pages)
    }

    /// Run [`Service::retention_pass`] now and then every `every`; nothing runs when the
    /// policy keeps everything.
    pub fn start_retention(&self, policy: RetentionPolicy, every: Duration) -> Background {
        if policy == RetentionPolicy::keep_all() {
            return Background { tasks: Vec::new() };
        }
        let service = self.clone();
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if let Err(error) = service.retention_pass(&policy).await {
                    tracing::error!(%error, "a retention pass failed; retrying at the next one");
                }
            }
        });
        Background { tasks: vec![task] }
    }
}
