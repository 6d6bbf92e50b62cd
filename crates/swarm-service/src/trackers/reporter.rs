//! The tracker reporter: finished tasks linked to a tracker item are reported to it once.
//! Each report is taken with a lease (so of several replicas one posts), posted by the
//! provider, then marked done; a failure is retried later with a growing pause, up to
//! [`REPORT_ATTEMPTS_MAX`] attempts. The reporter also tells a provider with states when
//! a linked task starts (once, through `last_synced_status`).

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use swarm_domain::{
    id::TaskId,
    task::{Task, TaskStatus},
};
use tokio::sync::broadcast::error::RecvError;

use super::{TrackerSync, task_evidence};
use crate::{Background, Change, Service, ServiceResult};

/// How often the reporter looks for due reports without being woken (a report failed
/// earlier, another replica finished a task, a hub restarted).
pub const REPORT_EVERY: Duration = Duration::from_secs(5);
/// How long a taken report is held: longer than a provider's calls may take (their HTTP
/// clients time out sooner), after which another hub may take it.
pub const REPORT_LEASE: Duration = Duration::from_secs(120);
/// Failed attempts after which a report is given up (its last error stays on the row).
pub const REPORT_ATTEMPTS_MAX: i32 = 10;
/// Reports taken per pass and provider.
const REPORT_BATCH: i64 = 50;
/// The `last_synced_status` written once the item was told its task started.
const STARTED: &str = "started";

/// One tracker, as the reporter needs it.
#[async_trait]
pub trait TrackerReporter: Send + Sync + 'static {
    /// The provider's name in `tracker_sync` (`gitlab`, `linear`, `jira`).
    fn provider(&self) -> &'static str;

    /// Report the task's ending on its item: one comment (see
    /// [`super::report_markdown`]), and for a tracker with states the move its ending calls
    /// for. It must look for the task's marker among the item's comments first and post
    /// no second comment when it is there: a hub that died after posting and before the
    /// report was marked calls this again. `Err` with why: retried later.
    async fn report_end(&self, link: &TrackerSync, task: &Task, evidence: &[String]) -> Result<(), String>;

    /// The task started: a tracker with states moves the item (called once per task).
    async fn report_start(&self, _link: &TrackerSync, _task: &Task) -> Result<(), String> {
        Ok(())
    }
}

/// The pause before the next attempt after `attempts` failed ones: 1 s, 2 s, 4 s, ... at
/// most a minute.
fn retry_after(attempts: i32) -> Duration {
    Duration::from_secs(1u64 << attempts.clamp(0, 6)).min(Duration::from_secs(60))
}

pub(super) fn start(
    service: Service,
    reporters: Vec<Arc<dyn TrackerReporter>>,
    every: Duration,
) -> Background {
    let task = tokio::spawn(async move {
        if reporters.is_empty() {
            return;
        }
        let mut changes = service.subscribe();
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                change = changes.recv() => match change {
                    Ok(Change::Task { task_id }) => {
                        if !service.tracker_task_settled(&reporters, task_id).await {
                            continue;
                        }
                    }
                    Ok(Change::External) | Err(RecvError::Lagged(_)) => {}
                    Ok(_) => continue,
                    Err(RecvError::Closed) => return,
                },
            }
            for reporter in &reporters {
                if let Err(error) = pass(&service, reporter.as_ref()).await {
                    tracing::warn!(provider = reporter.provider(), %error, "the tracker reporter's pass failed; retrying at its next tick");
                }
            }
        }
    });
    Background { tasks: vec![task] }
}

impl Service {
    /// A task changed here: tell trackers with states that it started; `true` when it
    /// finished (a pass should run).
    async fn tracker_task_settled(&self, reporters: &[Arc<dyn TrackerReporter>], task_id: TaskId) -> bool {
        let Ok(Some(task)) = self.store.task_get(task_id).await else { return false };
        if task.status.is_finished() {
            return true;
        }
        if task.status != TaskStatus::InProgress {
            return false;
        }
        for reporter in reporters {
            let provider = reporter.provider();
            let Ok(Some(link)) = self.store.tracker_sync_get(provider, task_id).await else { continue };
            if link.last_synced_status.is_some() {
                continue;
            }
            match reporter.report_start(&link, &task).await {
                Ok(()) => {
                    if let Err(error) = self.tracker_status_synced(provider, task_id, None, STARTED).await {
                        tracing::warn!(provider, task = %task_id, %error, "could not record a tracker's start");
                    }
                }
                Err(error) => {
                    tracing::warn!(provider, task = %task_id, %error, "could not tell the tracker a task started")
                }
            }
        }
        false
    }
}

pub(super) async fn pass(service: &Service, reporter: &dyn TrackerReporter) -> ServiceResult<usize> {
    let provider = reporter.provider();
    let store = &service.store;
    let holder = service.tracker_holder();
    let holder = holder.as_str();
    let due = store
        .tracker_report_due(provider, holder, service.clock.now(), REPORT_ATTEMPTS_MAX, REPORT_BATCH)
        .await?;
    let mut reported = 0;
    for item in due {
        let task_id = item.task.id;
        let now = service.clock.now();
        let lease_until = now.plus_millis(REPORT_LEASE.as_millis() as i64);
        if !store.tracker_report_claim(provider, task_id, holder, lease_until, now).await? {
            continue;
        }
        let mut evidence = store.task_pull_requests(task_id).await?;
        for url in task_evidence(&item.task) {
            if !evidence.contains(&url) {
                evidence.push(url);
            }
        }
        match reporter.report_end(&item.sync, &item.task, &evidence).await {
            Ok(()) => {
                if store.tracker_report_done(provider, task_id, service.clock.now()).await? {
                    reported += 1;
                }
            }
            Err(error) => {
                let attempts = item.sync.report_attempts + 1;
                let retry_at = service.clock.now().plus_millis(retry_after(attempts).as_millis() as i64);
                tracing::warn!(
                    provider, task = %task_id, attempts, %error,
                    "could not report a task's ending to its tracker; trying again later"
                );
                store.tracker_report_failed(provider, task_id, holder, &error, retry_at).await?;
            }
        }
    }
    Ok(reported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_pause_longer_up_to_a_minute() {
        let pauses: Vec<u64> = (1..=8).map(|n| retry_after(n).as_secs()).collect();
        assert_eq!(pauses, vec![2, 4, 8, 16, 32, 60, 60, 60]);
    }
}
