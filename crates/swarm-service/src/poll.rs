//! The poll: hand an agent its next trigger, claimed, optionally waiting for one.
//!
//! One read (`poll_view`) tells whether anything waits; only then does a write
//! transaction claim it (`poll_claim`), so a poll that finds nothing writes nothing.
//! A long-poll arms its waiters before that read, so a change committed after the read
//! wakes it (see `wake.rs`).

use std::time::Duration;

use swarm_domain::{
    agent::AgentStatus,
    id::{AgentId, RunnerId},
    poll::{PoolMode, Trigger, TriggerKind, Wake},
};
use swarm_store::PollView;
use tokio::time::Instant;

use crate::{Caller, Change, Service, ServiceError, ServiceResult, agents::unknown_agent};

/// The longest a poll may wait for a trigger.
pub const POLL_WAIT_MAX: Duration = Duration::from_secs(60);
/// A claim can lose a race to another poll between the read and the write. One more
/// look finds the next candidate; more would multiply the work of every poll that a
/// pool task woke and another worker beat to it.
const CLAIM_ATTEMPTS: usize = 2;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollRequest {
    /// How long to wait for a trigger when there is none yet (zero: answer at once).
    pub wait: Duration,
    pub pool: PoolMode,
    /// The runner process polling (`X-Runner-ID`): it holds the lead-side claims taken.
    pub runner: Option<RunnerId>,
}

impl Service {
    /// The caller's next trigger, claimed for it, or `None` when nothing came within
    /// `request.wait`. A poll is also a sign of life: it counts as a heartbeat (written at
    /// most every quarter lease period, so idle polling stays read-only).
    pub async fn poll(&self, caller: Caller, request: PollRequest) -> ServiceResult<Option<Trigger>> {
        let answer = self.poll_once_or_wait(caller, request).await;
        self.activity.poll_answered(answer.as_ref().ok().and_then(Option::as_ref), self.clock.now());
        answer
    }

    async fn poll_once_or_wait(
        &self,
        caller: Caller,
        request: PollRequest,
    ) -> ServiceResult<Option<Trigger>> {
        let agent = caller.require_agent()?;
        if request.wait > POLL_WAIT_MAX {
            return Err(ServiceError::Invalid(format!(
                "wait must be at most {} seconds",
                POLL_WAIT_MAX.as_secs()
            )));
        }
        if request.wait.is_zero() {
            let view = self.poll_view(agent).await?;
            self.keep_alive(agent, &view, request.runner).await?;
            return self.claim(agent, view, request.pool, request.runner).await;
        }
        // Boxed: the waiting loop's state (waiters, a timer) would otherwise be part of
        // every immediate poll's future too, which axum's layers copy whole each time they
        // move it (BENCHMARKS.md, "Issue 22's null polls").
        Box::pin(self.poll_waiting(agent, request)).await
    }

    async fn poll_waiting(&self, agent: AgentId, request: PollRequest) -> ServiceResult<Option<Trigger>> {
        let deadline = Instant::now() + request.wait;
        let mut view = self.poll_view(agent).await?;
        // Pool wakes go to one parked worker at a time (no thundering herd): a poll that
        // saw pool work and did not take it hands the wake on to the next worker.
        loop {
            let waiter = self.waiters.agent(agent);
            let mine = waiter.notified();
            // Role-wide wakes (a new pool task, a dependency done) only matter to an agent
            // that could start something; a full worker hears of its freed slot through
            // its own waiter.
            let role_matters = view.is_lead || view.in_progress < i64::from(view.max_tasks);
            let role = self.waiters.role(view.is_lead).notified();
            tokio::pin!(mine, role);
            mine.as_mut().enable();
            if role_matters {
                role.as_mut().enable();
            }

            // Armed: whatever commits from here on wakes us.
            view = self.poll_view(agent).await?;
            // A parked poll is a runner that is alive: keep its presence and leases fresh.
            self.keep_alive(agent, &view, request.runner).await?;
            let trigger = self.claim(agent, view.clone(), request.pool, request.runner).await?;
            if trigger.is_some() {
                return Ok(trigger);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let next_check = deadline.min(now + self.keep_alive_every());
            let _parked = self.activity.parked();
            tokio::select! {
                () = &mut mine => {}
                () = &mut role, if role_matters => {}
                () = tokio::time::sleep_until(next_check) => {}
            }
        }
    }

    /// The caller's next task only (offered, assigned, or from the pool), claimed, at
    /// once: Inbox-MCP's `get_next_task`, which must not swallow mail, mentions or
    /// notices it has no way to show.
    pub async fn poll_next_task(&self, caller: Caller) -> ServiceResult<Option<Trigger>> {
        let agent = caller.require_agent()?;
        let view = self.poll_view(agent).await?;
        self.keep_alive(agent, &view, None).await?;
        let answer = self.claim_kinds(agent, view, PoolMode::Claim, None, Claimable::TasksOnly).await;
        self.activity.poll_answered(answer.as_ref().ok().and_then(Option::as_ref), self.clock.now());
        answer
    }

    async fn poll_view(&self, agent: AgentId) -> ServiceResult<PollView> {
        // A view kept in memory is no store query: not timed as one, and not awaited.
        if let Some(view) = self.store.poll_view_kept(agent)? {
            return Ok(view);
        }
        self.timed("poll_view", self.store.poll_view(agent)).await?.ok_or_else(|| unknown_agent(agent))
    }

    /// How often a poll refreshes the agent's presence: well within a lease period.
    fn keep_alive_every(&self) -> Duration {
        self.lease.period / 4
    }

    async fn keep_alive(
        &self,
        agent: AgentId,
        view: &PollView,
        runner: Option<RunnerId>,
    ) -> ServiceResult<()> {
        let stale_after = i64::try_from(self.keep_alive_every().as_millis()).unwrap_or(i64::MAX);
        let stale = self.clock.unix_millis() - view.last_seen_at.unix_millis() >= stale_after;
        if view.status == AgentStatus::Offline || stale {
            self.heartbeat(agent, runner, view.status == AgentStatus::Offline).await?;
        }
        Ok(())
    }

    /// Claim the first kind that has something for the agent, in the poll's order.
    async fn claim(
        &self,
        agent: AgentId,
        view: PollView,
        pool: PoolMode,
        runner: Option<RunnerId>,
    ) -> ServiceResult<Option<Trigger>> {
        // A poll without `X-Runner-ID` is the reference's runner or `poll-task`.
        let which = if runner.is_some() { Claimable::Everything } else { Claimable::ReferenceKinds };
        self.claim_kinds(agent, view, pool, runner, which).await
    }

    async fn claim_kinds(
        &self,
        agent: AgentId,
        mut view: PollView,
        pool: PoolMode,
        runner: Option<RunnerId>,
        which: Claimable,
    ) -> ServiceResult<Option<Trigger>> {
        for attempt in 1..=CLAIM_ATTEMPTS {
            // The view is read again here rather than after a claim that lost its race,
            // so that no claimed trigger (hundreds of bytes) is alive across an await:
            // this future stays small, and so do the ones of every null poll around it.
            if attempt > 1 {
                view = self.poll_view(agent).await?;
            }
            let kinds = claimable(&view, pool, which);
            // Pool work is there and this poll may not take it (full, a lead, busy with an
            // offer): let another parked worker look.
            let pass_pool_wake_on = view.waiting.contains(&TriggerKind::PoolTask);
            if kinds.is_empty() {
                if pass_pool_wake_on {
                    self.waiters.wake(Wake::Workers);
                }
                return Ok(None);
            }
            let now = self.clock.now();
            let claimed = self
                .timed(
                    "poll_claim",
                    self.store.poll_claim_for_runner(agent, &kinds, now, self.lease_until(now), runner),
                )
                .await?;
            // A worker refused by a budget took nothing: another may take it.
            let took_pool_task =
                matches!(claimed, Some((TriggerKind::PoolTask, Trigger::TaskAssigned { .. })));
            if pass_pool_wake_on && !took_pool_task {
                self.waiters.wake(Wake::Workers);
            }
            if let Some((_, trigger)) = claimed {
                self.trigger_claimed(&trigger);
                return Ok(Some(trigger));
            }
        }
        Ok(None)
    }

    fn trigger_claimed(&self, trigger: &Trigger) {
        match trigger {
            Trigger::TaskOffered { task_id, .. } | Trigger::TaskAssigned { task_id, .. } => {
                self.publish(Change::Task { task_id: *task_id });
            }
            Trigger::TasksFinished { tasks, .. } => {
                for task in tasks {
                    self.publish(Change::Task { task_id: task.id });
                }
            }
            Trigger::SlackInboxMessage { messages, .. } => {
                if let Some(message) = messages.first() {
                    self.inbox_changed(message.agent_id);
                }
            }
            Trigger::UrgentMail { mail, .. } => {
                for piece in mail {
                    self.publish(Change::Mail { mail_id: piece.id });
                }
            }
            Trigger::EpicProgressChanged { epics, .. } => {
                for progress in epics {
                    self.publish(Change::Epic { epic_id: progress.epic.epic.id });
                }
            }
            Trigger::UnreadMentions { .. }
            | Trigger::TasksHandedBack { .. }
            | Trigger::TaskResult { .. }
            | Trigger::PoolTasksAvailable { .. }
            | Trigger::BudgetRefused(_) => {}
        }
    }
}

/// Which kinds a poller can make use of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claimable {
    /// Our runner (it sends `X-Runner-ID`): every kind.
    Everything,
    /// The reference's runner and `poll-task`: the kinds the reference's runner handles.
    ReferenceKinds,
    /// Only kinds that hand over a task.
    TasksOnly,
}

impl Claimable {
    fn admits(self, kind: TriggerKind, is_lead: bool) -> bool {
        match self {
            Claimable::Everything => true,
            Claimable::ReferenceKinds => kind.known_to_reference_runner(is_lead),
            Claimable::TasksOnly => kind.task_transition().is_some(),
        }
    }
}

/// The kinds worth a write transaction: meant for the agent's role, asked for by the
/// pool mode, usable by the poller, with a candidate waiting, and with a free slot when
/// the kind starts work.
fn claimable(view: &PollView, pool: PoolMode, which: Claimable) -> Vec<TriggerKind> {
    let has_capacity = view.in_progress < i64::from(view.max_tasks);
    pool.kinds()
        .filter(|kind| kind.audience().admits(view.is_lead))
        .filter(|kind| which.admits(*kind, view.is_lead))
        .filter(|kind| view.waiting.contains(kind))
        .filter(|kind| has_capacity || !kind.needs_capacity())
        .collect()
}
