//! Heartbeats that scale: a heartbeat of an agent this hub knows to be present is kept
//! in memory and written with every other such heartbeat in one batch
//! ([`Store::agent_heartbeats`](swarm_store::Store::agent_heartbeats)) every
//! [`Heartbeats::flush_every`], instead of a transaction per heartbeat.
//!
//! What keeps the rescuer's guarantees:
//! - a heartbeat that changes something (an `offline` agent coming back, logged, or an
//!   agent this hub has not written a heartbeat for within half a lease) is written at
//!   once, as before;
//! - a batch is written within an eighth of a lease, and runners heartbeat at least every
//!   third of one (a parked poll every quarter), so the leases in the database never
//!   run out while the agent heartbeats, whichever replica it reaches; this hub's
//!   rescuer writes the batch before it looks;
//! - an agent that went `offline` in between (silenced by another replica, closed) is
//!   left alone by the batch and written at once, coming back as any heartbeat brings
//!   it back.
//!
//! Losing the memory (a hub stopped) loses at most one batch: the runner's next
//! heartbeat, a third of a lease later, is written at once by whichever hub it reaches.

use std::{
    collections::HashMap,
    sync::{
        Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use swarm_domain::id::{AgentId, RunnerId};
use swarm_store::Heartbeat;

use crate::{Change, Service, ServiceResult, agents::unknown_agent};

/// The longest a heartbeat waits in memory.
const FLUSH_EVERY_MAX: Duration = Duration::from_secs(2);

#[derive(Debug, Default)]
pub(crate) struct Heartbeats {
    /// On only where something writes the batches (a hub's background work).
    batching: AtomicBool,
    /// Heartbeats heard since the last batch, the latest per agent.
    pending: Mutex<HashMap<AgentId, Heartbeat>>,
    /// When this process last wrote a heartbeat of each agent that was present then
    /// (Unix milliseconds on the service's clock).
    written: Mutex<HashMap<AgentId, i64>>,
    counts: HeartbeatCounts,
}

/// Heartbeats heard and what they cost the database, since the process started.
#[derive(Debug, Default)]
pub(crate) struct HeartbeatCounts {
    heard: AtomicU64,
    written_at_once: AtomicU64,
    batches: AtomicU64,
    batched: AtomicU64,
}

/// [`HeartbeatCounts`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeartbeatSnapshot {
    /// Heartbeats the service heard (pings, parked polls keeping an agent's presence,
    /// MCP sessions' signs of life).
    pub heard: u64,
    /// Heartbeats written in a transaction of their own.
    pub written_at_once: u64,
    /// Batches written (one transaction each).
    pub batches: u64,
    /// Agents' heartbeats written inside those batches.
    pub batched: u64,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Heartbeats {
    pub(crate) fn snapshot(&self) -> HeartbeatSnapshot {
        let counts = &self.counts;
        HeartbeatSnapshot {
            heard: counts.heard.load(Ordering::Relaxed),
            written_at_once: counts.written_at_once.load(Ordering::Relaxed),
            batches: counts.batches.load(Ordering::Relaxed),
            batched: counts.batched.load(Ordering::Relaxed),
        }
    }

    /// The agent is gone as far as this process knows (it closed): its next heartbeat is
    /// written at once.
    pub(crate) fn forget(&self, agent: AgentId) {
        lock(&self.written).remove(&agent);
        lock(&self.pending).remove(&agent);
    }
}

impl Service {
    /// How often the batch is written: well within a lease period.
    pub(crate) fn heartbeat_flush_every(&self) -> Duration {
        (self.lease.period / 8).clamp(Duration::from_millis(10), FLUSH_EVERY_MAX)
    }

    /// Heartbeats and their writes so far, for metrics and tests.
    pub fn heartbeats(&self) -> HeartbeatSnapshot {
        self.heartbeats.snapshot()
    }

    /// A heartbeat of `id`: written at once when it may change the agent's status
    /// (`maybe_offline`: the caller saw it `offline`; or this process has not written one
    /// for it lately), else kept for the next batch.
    pub(crate) async fn heartbeat(
        &self,
        id: AgentId,
        runner: Option<RunnerId>,
        maybe_offline: bool,
    ) -> ServiceResult<()> {
        let now = self.clock.now();
        let beats = &self.heartbeats;
        beats.counts.heard.fetch_add(1, Ordering::Relaxed);
        if !maybe_offline && beats.batching.load(Ordering::Relaxed) {
            let recent = self.lease.period_millis() / 2;
            let present = lock(&beats.written)
                .get(&id)
                .is_some_and(|written| now.unix_millis().saturating_sub(*written) < recent);
            if present {
                let beat = Heartbeat { agent: id, runner, at: now, lease_until: self.lease_until(now) };
                lock(&beats.pending).insert(id, beat);
                return Ok(());
            }
        }
        self.heartbeat_at_once(id, runner, now).await
    }

    async fn heartbeat_at_once(
        &self,
        id: AgentId,
        runner: Option<RunnerId>,
        now: swarm_domain::time::Timestamp,
    ) -> ServiceResult<()> {
        let written = self.store.agent_heartbeat_from_runner(id, now, self.lease_until(now), runner).await;
        self.heartbeats.counts.written_at_once.fetch_add(1, Ordering::Relaxed);
        written?.ok_or_else(|| unknown_agent(id))?;
        lock(&self.heartbeats.written).insert(id, now.unix_millis());
        self.publish(Change::Agent { agent_id: id });
        Ok(())
    }

    /// Write the heartbeats kept since the last batch, in one batch; agents that went
    /// `offline` meanwhile come back at once, each logged. A batch that fails is kept
    /// for the next try (newer heartbeats of the same agents win).
    pub async fn flush_heartbeats(&self) -> ServiceResult<()> {
        let beats = &self.heartbeats;
        let batch: Vec<Heartbeat> = std::mem::take(&mut *lock(&beats.pending)).into_values().collect();
        if batch.is_empty() {
            return Ok(());
        }
        let not_applied = match self.store.agent_heartbeats(&batch).await {
            Ok(not_applied) => not_applied,
            Err(error) => {
                let mut pending = lock(&beats.pending);
                for beat in batch {
                    pending.entry(beat.agent).or_insert(beat);
                }
                return Err(error.into());
            }
        };
        beats.counts.batches.fetch_add(1, Ordering::Relaxed);
        let applied = batch.len().saturating_sub(not_applied.len());
        beats.counts.batched.fetch_add(u64::try_from(applied).unwrap_or(u64::MAX), Ordering::Relaxed);
        {
            let mut written = lock(&beats.written);
            for beat in &batch {
                if !not_applied.contains(&beat.agent) {
                    written.insert(beat.agent, beat.at.unix_millis());
                }
            }
        }
        for beat in batch.iter().filter(|beat| not_applied.contains(&beat.agent)) {
            lock(&beats.written).remove(&beat.agent);
            match self.heartbeat_at_once(beat.agent, beat.runner, self.clock.now()).await {
                // Removed since: nothing to bring back.
                Ok(()) | Err(crate::ServiceError::NotFound(_)) => {}
                Err(error) => tracing::warn!(%error, agent = %beat.agent, "could not write a heartbeat"),
            }
        }
        Ok(())
    }

    /// Write heartbeats in batches from now on, every [`Service::heartbeat_flush_every`]:
    /// a hub's background task.
    pub(crate) fn start_heartbeat_batches(&self) -> tokio::task::JoinHandle<()> {
        self.heartbeats.batching.store(true, Ordering::Relaxed);
        let service = self.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(service.heartbeat_flush_every());
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if let Err(error) = service.flush_heartbeats().await {
                    tracing::warn!(%error, "could not write a batch of heartbeats; retrying at the next tick");
                }
            }
        })
    }
}
