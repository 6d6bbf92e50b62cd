//! The rescuer, and the listener for other processes' changes: the service's two
//! background tasks, started by `swarm serve`.

use std::time::Duration;

use swarm_domain::{
    lease::{ExpiredClaim, RescueReport},
    poll::Wake,
    task::TaskStatus,
};
use tokio::{sync::mpsc, task::JoinHandle};

use crate::{Change, Service, ServiceResult};

/// The background tasks; dropping this stops them.
pub struct Background {
    pub(crate) tasks: Vec<JoinHandle<()>>,
}

impl Drop for Background {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Service {
    /// One pass of the rescuer: expired claims go back where they came from (or fail
    /// after too many losses), silent agents go `offline`; each is logged and wakes the
    /// polls that can now take the work.
    pub async fn rescue(&self) -> ServiceResult<RescueReport> {
        // Heartbeats this hub heard count before it judges anyone silent.
        if let Err(error) = self.flush_heartbeats().await {
            tracing::warn!(%error, "could not write the heartbeats kept before a rescue pass");
        }
        let report = self.timed("rescue", self.store.rescue(&self.lease, self.clock.now())).await?;
        let mut wakes = Vec::new();
        for claim in &report.expired {
            tracing::warn!(
                task = %claim.task_id,
                holder = ?claim.holder.map(|agent| agent.to_string()),
                from = %claim.from,
                to = %claim.to,
                "a claim's lease ran out: its holder stopped heartbeating"
            );
            self.publish(Change::Task { task_id: claim.task_id });
            wakes.extend(wakes_after_expiry(claim));
        }
        for lead in &report.inbox_returned_to {
            tracing::warn!(%lead, "an inbox message's lease ran out: it is unread again");
            self.inbox_changed(*lead);
            wakes.push(Wake::Agent(*lead));
        }
        for agent in &report.mentions_returned_to {
            tracing::warn!(%agent, "a claim on mentioning channels ran out: they are unread again");
            wakes.push(Wake::Agent(*agent));
        }
        for agent in &report.mail_returned_to {
            tracing::warn!(%agent, "a claim on urgent mail ran out: it is unread again");
            wakes.push(Wake::Agent(*agent));
        }
        for agent in &report.results_returned_to {
            tracing::warn!(%agent, "a task result's lease ran out: it is offered again");
            wakes.push(Wake::Agent(*agent));
        }
        for lead in &report.results_handed_to {
            tracing::warn!(%lead, "a task result's awaiting agent stayed away: the lead gets it instead");
            wakes.push(Wake::Agent(*lead));
        }
        for moved in &report.handed_back {
            tracing::warn!(
                task = %moved.task_id,
                holder = %moved.holder,
                from = %moved.from,
                to = %moved.to,
                "a task's agent stayed offline: its work is handed on, and the lead told"
            );
            self.publish(Change::Task { task_id: moved.task_id });
            if moved.to == TaskStatus::Unassigned {
                wakes.push(Wake::Workers);
            }
            wakes.push(Wake::Leads);
        }
        for agent in &report.silenced {
            tracing::warn!(%agent, "agent marked offline: no heartbeat for a lease period");
            self.publish(Change::Agent { agent_id: *agent });
        }
        self.wake(&wakes).await;
        self.activity.rescued(&report);
        Ok(report)
    }

    /// Start the rescuer (every `rescue_every`) and the listener that wakes local polls
    /// when another process changes the database: a hub's background work.
    pub fn start_background(&self, rescue_every: Duration) -> Background {
        let mut background = self.start_watching_other_processes();
        let rescuer = {
            let service = self.clone();
            tokio::spawn(async move {
                let mut ticks = tokio::time::interval(rescue_every);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    ticks.tick().await;
                    if let Err(error) = service.rescue().await {
                        tracing::error!(%error, "the rescuer's pass failed; retrying at the next tick");
                    }
                }
            })
        };
        background.tasks.push(rescuer);
        background.tasks.push(self.start_heartbeat_batches());
        background
    }

    /// Only the listener that wakes local polls when another process changes the
    /// database: what `swarm mcp` runs. It rescues nothing, so no claim is returned on
    /// a policy other than the hub's.
    pub fn start_watching_other_processes(&self) -> Background {
        let (sink, mut external) = mpsc::channel::<Wake>(256);
        let watcher = {
            let store = self.store.clone();
            tokio::spawn(async move {
                if let Err(error) = store.watch_external_changes(sink).await {
                    tracing::error!(%error, "stopped watching for other processes' changes");
                }
            })
        };
        let waker = {
            let service = self.clone();
            tokio::spawn(async move {
                while let Some(wake) = external.recv().await {
                    service.waiters.wake(wake);
                    // Live views learn only that something changed: the wake names an
                    // audience, not the rows. A burst of wakes is one refetch for them.
                    while let Ok(wake) = external.try_recv() {
                        service.waiters.wake(wake);
                    }
                    service.publish(Change::External);
                }
            })
        };
        Background { tasks: vec![watcher, waker] }
    }
}

/// Who can take an expired claim's task now, and the holder whose slot it freed.
fn wakes_after_expiry(claim: &ExpiredClaim) -> Vec<Wake> {
    let mut wakes: Vec<Wake> = claim.holder.map(Wake::Agent).into_iter().collect();
    match claim.to {
        TaskStatus::Offered => wakes.extend(claim.offered_to.map(Wake::Agent)),
        TaskStatus::Pending => wakes.extend(claim.agent_id.map(Wake::Agent)),
        TaskStatus::Unassigned => wakes.push(Wake::Workers),
        _ => wakes.push(Wake::Everyone),
    }
    wakes
}
