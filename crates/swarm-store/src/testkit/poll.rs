//! The poll's claims and their leases: what `poll_view`, `poll_claim`, `agent_heartbeat`
//! and `rescue` promise, on both backends.

use std::{collections::HashSet, sync::Arc, time::Duration};

use crate::{Applied, Store};
use swarm_domain::{
    agent::AgentStatus,
    event::EventType,
    id::{AgentId, TaskId},
    lease::LeasePolicy,
    poll::{PoolMode, TASKS_FINISHED_MAX, Trigger, TriggerKind},
    task::{TaskAction, TaskDraft, TaskStatus},
    time::Timestamp,
};

use super::{Fixture, complete, draft, fail, of_type, pair, status_changes};

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_poll {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            poll,
            [
                poll_view_reports_what_waits,
                a_kept_poll_view_never_hides_a_write,
                poll_claims_in_order_each_once,
                poll_respects_capacity_and_dependencies,
                tasks_finished_go_to_the_lead_once,
                pool_notify_counts_without_claiming,
                heartbeat_renews_the_holders_leases,
                rescue_returns_expired_claims_where_they_came_from,
                rescue_fails_a_task_that_keeps_losing_its_lease,
                rescue_marks_silent_agents_offline,
                reviewing_offers_can_be_accepted_and_rejected,
                concurrent_polls_claim_every_task_once,
            ],
            multi_thread: []
        );
    };
}

const LEASE: i64 = 45_000;

fn all_kinds(pool: PoolMode) -> Vec<TriggerKind> {
    pool.kinds().collect()
}

/// Claim for `agent` the way the service does: the kinds its role may receive.
async fn claim(fx: &Fixture, agent: AgentId, now: Timestamp) -> Option<Trigger> {
    claim_in(fx, agent, PoolMode::Claim, now).await
}

async fn claim_in(fx: &Fixture, agent: AgentId, pool: PoolMode, now: Timestamp) -> Option<Trigger> {
    let is_lead = fx.agent(agent).await.is_lead;
    let kinds: Vec<TriggerKind> =
        all_kinds(pool).into_iter().filter(|kind| kind.audience().admits(is_lead)).collect();
    let claimed = fx.store.poll_claim(agent, &kinds, now, now.plus_millis(LEASE)).await.expect("poll_claim");
    claimed.map(|(_, trigger)| trigger)
}

fn task_of(trigger: Option<Trigger>) -> (String, TaskId) {
    match trigger {
        Some(Trigger::TaskOffered { task_id, task }) => {
            assert_eq!(task.id, task_id);
            ("task_offered".into(), task_id)
        }
        Some(Trigger::TaskAssigned { task_id, task }) => {
            assert_eq!(task.id, task_id);
            ("task_assigned".into(), task_id)
        }
        other => panic!("expected a task trigger, got {other:?}"),
    }
}

pub async fn poll_view_reports_what_waits(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    assert_eq!(fx.store.poll_view(AgentId::new_v7()).await.unwrap(), None, "unknown agent");

    let worker = fx.worker("worker").await;
    let lead = fx.register("lead", true, 1).await.id;
    let view = fx.store.poll_view(worker).await.unwrap().expect("the worker exists");
    assert!(view.waiting.is_empty(), "nothing waits yet: {view:?}");
    assert!(!view.is_lead);
    assert_eq!((view.in_progress, view.max_tasks, view.status), (0, 1, AgentStatus::Idle));

    fx.offered_task("offer", worker).await;
    fx.assigned_task("mine", worker).await;
    fx.pool_task("anyone").await;
    let waiting: HashSet<TriggerKind> =
        fx.store.poll_view(worker).await.unwrap().unwrap().waiting.into_iter().collect();
    let expected = HashSet::from([
        TriggerKind::TaskOffered,
        TriggerKind::TaskAssigned,
        TriggerKind::PoolTask,
        TriggerKind::PoolTasksAvailable,
    ]);
    assert_eq!(waiting, expected);

    // The pool is for workers; a finished worker task is for the lead.
    let lead_view = fx.store.poll_view(lead).await.unwrap().unwrap();
    assert!(lead_view.is_lead);
    assert!(lead_view.waiting.is_empty(), "{lead_view:?}");
    let other = fx.worker("other").await;
    fx.completed_task("done", other).await;
    assert_eq!(fx.store.poll_view(lead).await.unwrap().unwrap().waiting, vec![TriggerKind::TasksFinished]);
}

/// `poll_view_kept` may answer from memory, but only with what `poll_view` would read
/// now: never a view from before a write.
pub async fn a_kept_poll_view_never_hides_a_write(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    assert_eq!(fx.store.poll_view_kept(AgentId::new_v7()).unwrap(), None, "unknown agent");
    let worker = fx.worker("worker").await;
    let idle = fx.store.poll_view(worker).await.unwrap().expect("the worker exists");
    assert!(idle.waiting.is_empty(), "{idle:?}");
    if let Some(kept) = fx.store.poll_view_kept(worker).unwrap() {
        assert_eq!(kept, idle, "a kept view is the one read");
    }

    fx.assigned_task("mine", worker).await;
    if let Some(kept) = fx.store.poll_view_kept(worker).unwrap() {
        assert!(
            kept.waiting.contains(&TriggerKind::TaskAssigned),
            "the idle view outlived the task: {kept:?}"
        );
    }
    let read = fx.store.poll_view(worker).await.unwrap().unwrap();
    assert!(read.waiting.contains(&TriggerKind::TaskAssigned), "{read:?}");
}

pub async fn poll_claims_in_order_each_once(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.register("worker", false, 5).await.id;
    let pool = fx.pool_task("pool").await;
    let assigned = fx.assigned_task("assigned", worker).await;
    let offered = fx.offered_task("offered", worker).await;

    // 1. The offer, claimed offered → reviewing with a lease.
    let now = fx.now();
    assert_eq!(task_of(claim(&fx, worker, now).await), ("task_offered".into(), offered.id));
    let reviewing = fx.task(offered.id).await;
    assert_eq!(reviewing.status, TaskStatus::Reviewing);
    assert_eq!(reviewing.lease_expires_at, Some(now.plus_millis(LEASE)));
    assert_eq!(status_changes(&fx.task_events(offered.id).await).last(), Some(&pair("offered", "reviewing")));

    // 2. My assigned task, started: pending → in_progress, and I am busy.
    let now = fx.now();
    assert_eq!(task_of(claim(&fx, worker, now).await), ("task_assigned".into(), assigned.id));
    let started = fx.task(assigned.id).await;
    assert_eq!(started.status, TaskStatus::InProgress);
    assert_eq!(started.lease_expires_at, Some(now.plus_millis(LEASE)));
    assert_eq!(fx.agent(worker).await.status, AgentStatus::Busy);

    // 3. The pool task, claimed for me and started, reported as task_assigned.
    assert_eq!(task_of(claim(&fx, worker, fx.now()).await), ("task_assigned".into(), pool.id));
    let taken = fx.task(pool.id).await;
    assert_eq!((taken.status, taken.agent_id), (TaskStatus::InProgress, Some(worker)));
    let claimed = of_type(&fx.task_events(pool.id).await, EventType::TaskClaimed).len();
    assert_eq!(claimed, 1, "a pool claim is logged as task_claimed");

    // 4. Nothing is left, and nothing is handed out twice.
    assert_eq!(claim(&fx, worker, fx.now()).await, None);
    assert!(fx.store.poll_view(worker).await.unwrap().unwrap().waiting.is_empty());
}

pub async fn poll_respects_capacity_and_dependencies(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.worker("worker").await; // one slot
    let busy_with = fx.started_task("busy", worker).await;
    let assigned = fx.assigned_task("next", worker).await;
    let pool = fx.pool_task("pool").await;

    // A full agent gets no work, but may still review an offer.
    assert_eq!(claim(&fx, worker, fx.now()).await, None);
    let offered = fx.offered_task("offer", worker).await;
    assert_eq!(task_of(claim(&fx, worker, fx.now()).await).1, offered.id);
    assert_eq!(fx.task(assigned.id).await.status, TaskStatus::Pending);
    assert_eq!(fx.task(pool.id).await.status, TaskStatus::Unassigned);

    // A free slot: work waiting on an unfinished dependency is skipped.
    let blocker = fx.pool_task("blocker").await;
    let blocked = fx
        .create(
            TaskDraft {
                agent_id: Some(worker),
                depends_on: vec![blocker.id],
                priority: Some(100),
                ..draft("b")
            },
            None,
        )
        .await;
    fx.must_change(busy_with.id, complete(worker)).await;
    assert_eq!(task_of(claim(&fx, worker, fx.now()).await).1, assigned.id, "the blocked task is skipped");
    fx.must_change(assigned.id, complete(worker)).await;

    // Pool order: the highest priority, then the oldest; the blocked one is not ready.
    let urgent = fx.create(TaskDraft { priority: Some(90), ..draft("urgent") }, None).await;
    assert_eq!(task_of(claim(&fx, worker, fx.now()).await).1, urgent.id);
    assert_eq!(fx.task(blocked.id).await.status, TaskStatus::Pending);
}

pub async fn tasks_finished_go_to_the_lead_once(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let lead = fx.register("lead", true, 1).await.id;
    let worker = fx.register("worker", false, 5).await.id;
    let first = fx.completed_task("first", worker).await;
    let second = fx.started_task("second", worker).await;
    let second = fx.must_change(second.id, fail(worker)).await;
    fx.completed_task("the lead's own", lead).await;
    let cancelled = fx.pool_task("withdrawn").await;
    fx.must_change(cancelled.id, super::cancel()).await;

    // A worker never receives it.
    assert_eq!(claim(&fx, worker, fx.now()).await, None);

    let now = fx.now();
    let Some(Trigger::TasksFinished { count, tasks }) = claim(&fx, lead, now).await else {
        panic!("the lead gets tasks_finished");
    };
    let ids: Vec<TaskId> = tasks.iter().map(|task| task.id).collect();
    assert_eq!(
        (count, ids),
        (2, vec![first.id, second.id]),
        "worker tasks, completed and failed, oldest first"
    );
    assert!(tasks.iter().all(|task| task.notified_at == Some(now)));
    assert_eq!(claim(&fx, lead, fx.now()).await, None, "each finished task is reported once");

    // At most TASKS_FINISHED_MAX at a time; the rest come with the next poll.
    for n in 0..TASKS_FINISHED_MAX + 3 {
        fx.completed_task(&format!("batch {n}"), worker).await;
    }
    let Some(Trigger::TasksFinished { count, .. }) = claim(&fx, lead, fx.now()).await else { panic!() };
    assert_eq!(count as i64, TASKS_FINISHED_MAX);
    let Some(Trigger::TasksFinished { count, .. }) = claim(&fx, lead, fx.now()).await else { panic!() };
    assert_eq!(count, 3);
}

pub async fn pool_notify_counts_without_claiming(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.worker("worker").await;
    let a = fx.pool_task("a").await;
    fx.pool_task("b").await;
    let blocked = fx.create(TaskDraft { depends_on: vec![a.id], ..draft("blocked") }, None).await;
    let trigger = claim_in(&fx, worker, PoolMode::Notify, fx.now()).await;
    assert_eq!(trigger, Some(Trigger::PoolTasksAvailable { count: 2 }), "ready pool tasks only");
    assert_eq!(fx.task(a.id).await.status, TaskStatus::Unassigned, "nothing was claimed");
    assert_eq!(fx.task(blocked.id).await.status, TaskStatus::Unassigned);
}

pub async fn heartbeat_renews_the_holders_leases(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.register("worker", false, 5).await.id;
    let other = fx.register("other", false, 5).await.id;
    let offered = fx.offered_task("offer", worker).await;
    let assigned = fx.assigned_task("work", worker).await;
    let others = fx.assigned_task("someone else's", other).await;
    let now = fx.now();
    claim(&fx, worker, now).await.unwrap();
    claim(&fx, worker, now).await.unwrap();
    claim(&fx, other, now).await.unwrap();

    let beat = fx.now();
    let until = beat.plus_millis(LEASE);
    fx.store.agent_heartbeat(worker, beat, until).await.unwrap().unwrap();
    assert_eq!(fx.task(offered.id).await.lease_expires_at, Some(until), "reviewing offer renewed");
    assert_eq!(fx.task(assigned.id).await.lease_expires_at, Some(until), "in_progress task renewed");
    assert_eq!(
        fx.task(others.id).await.lease_expires_at,
        Some(now.plus_millis(LEASE)),
        "another agent's lease is untouched"
    );
    let view = fx.store.poll_view(worker).await.unwrap().unwrap();
    assert_eq!(view.last_seen_at, beat);
}

pub async fn rescue_returns_expired_claims_where_they_came_from(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.register("worker", false, 5).await.id;
    let offered = fx.offered_task("offer", worker).await;
    let assigned = fx.assigned_task("assigned", worker).await;
    let pooled = fx.pool_task("pool").await;
    let now = fx.now();
    for _ in 0..3 {
        claim(&fx, worker, now).await.expect("a claim");
    }
    let policy = LeasePolicy { period: Duration::from_secs(3600), ..LeasePolicy::default() };

    // Not yet expired: nothing happens.
    let report = fx.store.rescue(&policy, now.plus_millis(LEASE - 1)).await.unwrap();
    assert!(report.expired.is_empty(), "{report:?}");
    assert_eq!(fx.task(assigned.id).await.status, TaskStatus::InProgress);

    let report = fx.store.rescue(&policy, now.plus_millis(LEASE + 1)).await.unwrap();
    let mut moved: Vec<(TaskId, TaskStatus, TaskStatus)> =
        report.expired.iter().map(|claim| (claim.task_id, claim.from, claim.to)).collect();
    moved.sort_by_key(|(id, _, _)| *id);
    let mut expected = vec![
        (offered.id, TaskStatus::Reviewing, TaskStatus::Offered),
        (assigned.id, TaskStatus::InProgress, TaskStatus::Pending),
        (pooled.id, TaskStatus::InProgress, TaskStatus::Unassigned),
    ];
    expected.sort_by_key(|(id, _, _)| *id);
    assert_eq!(moved, expected);

    let back = fx.task(offered.id).await;
    assert_eq!(
        (back.status, back.offered_to, back.lease_expires_at, back.lease_losses),
        (TaskStatus::Offered, Some(worker), None, 1)
    );
    let back = fx.task(assigned.id).await;
    assert_eq!(
        (back.status, back.agent_id),
        (TaskStatus::Pending, Some(worker)),
        "assigned work stays assigned"
    );
    let back = fx.task(pooled.id).await;
    assert_eq!((back.status, back.agent_id), (TaskStatus::Unassigned, None), "pool work returns to the pool");
    assert_eq!(fx.agent(worker).await.status, AgentStatus::Idle, "the holder holds nothing in progress");

    let expired = fx.task_events(pooled.id).await;
    let expired = of_type(&expired, EventType::TaskLeaseExpired);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].agent_id, Some(worker), "the event names the holder that went silent");

    // A second pass finds nothing more; the work can be claimed again.
    assert!(fx.store.rescue(&policy, now.plus_millis(LEASE + 2)).await.unwrap().expired.is_empty());
    let other = fx.register("other", false, 1).await.id;
    assert_eq!(task_of(claim(&fx, other, fx.now()).await).1, pooled.id);
}

pub async fn rescue_fails_a_task_that_keeps_losing_its_lease(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.worker("worker").await;
    let task = fx.pool_task("cursed").await;
    let policy = LeasePolicy { period: Duration::from_secs(3600), max_losses: 2, ..LeasePolicy::default() };

    let now = fx.now();
    claim(&fx, worker, now).await.unwrap();
    fx.store.rescue(&policy, now.plus_millis(LEASE + 1)).await.unwrap();
    assert_eq!(fx.task(task.id).await.status, TaskStatus::Unassigned);

    let now = fx.now();
    claim(&fx, worker, now).await.unwrap();
    let later = now.plus_millis(LEASE + 1);
    let report = fx.store.rescue(&policy, later).await.unwrap();
    assert_eq!(report.expired.len(), 1);
    let failed = fx.task(task.id).await;
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!(failed.lease_losses, 2);
    assert_eq!(failed.finished_at, Some(later));
    let reason = failed.failure_reason.expect("a failure reason");
    assert!(reason.contains("lease lost 2 times"), "{reason}");
    assert_eq!(claim(&fx, worker, fx.now()).await, None, "a failed task is never handed out again");
}

pub async fn rescue_marks_silent_agents_offline(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let silent = fx.worker("silent").await;
    let policy = LeasePolicy { period: Duration::from_secs(60), ..LeasePolicy::default() };
    let alive = fx.worker("alive").await;
    let beat = fx.now().plus_millis(100_000);
    fx.store.agent_heartbeat(alive, beat, beat.plus_millis(LEASE)).await.unwrap();

    let report = fx.store.rescue(&policy, beat.plus_millis(1_000)).await.unwrap();
    assert_eq!(report.silenced, vec![silent]);
    assert_eq!(fx.agent(silent).await.status, AgentStatus::Offline);
    assert_eq!(fx.agent(alive).await.status, AgentStatus::Idle);
    let events = fx.agent_events(silent).await;
    let changes = of_type(&events, EventType::AgentStatusChange);
    assert_eq!(changes[0].new_value.as_deref(), Some("offline"));
    assert!(
        changes[0].metadata.as_ref().is_some_and(|m| m["reason"].as_str().unwrap().contains("no heartbeat"))
    );

    // Already offline: not reported again. A heartbeat brings it back.
    assert!(fx.store.rescue(&policy, beat.plus_millis(2_000)).await.unwrap().silenced.is_empty());
    let back = fx.now().plus_millis(200_000);
    fx.store.agent_heartbeat(silent, back, back).await.unwrap();
    assert_eq!(fx.agent(silent).await.status, AgentStatus::Idle);
}

pub async fn reviewing_offers_can_be_accepted_and_rejected(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.worker("worker").await;
    let stranger = fx.worker("stranger").await;
    let to_accept = fx.offered_task("accept me", worker).await;
    let to_reject = fx.offered_task("reject me", worker).await;
    claim(&fx, worker, fx.now()).await.unwrap();
    claim(&fx, worker, fx.now()).await.unwrap();
    assert_eq!(fx.task(to_accept.id).await.status, TaskStatus::Reviewing);
    assert_eq!(fx.task(to_reject.id).await.status, TaskStatus::Reviewing);

    fx.must_refuse(to_accept.id, TaskAction::Accept { agent: stranger }).await;
    let until = fx.now();
    let accept = TaskAction::Accept { agent: worker }.change().with_lease(until);
    let Applied::Changed { after, .. } =
        fx.store.task_apply(to_accept.id, &accept, Some(worker), fx.now()).await.unwrap()
    else {
        panic!("accept from reviewing");
    };
    assert_eq!(
        (after.status, after.agent_id, after.lease_expires_at),
        (TaskStatus::Pending, Some(worker), None)
    );

    let reject = TaskAction::Reject { agent: worker, reason: Some("not mine".into()) };
    let after = fx.must_change(to_reject.id, reject).await;
    assert_eq!((after.status, after.offered_to), (TaskStatus::Unassigned, None));
    assert_eq!(after.rejection_reason.as_deref(), Some("not mine"));
}

pub async fn concurrent_polls_claim_every_task_once(store: Arc<dyn Store>) {
    const AGENTS: usize = 8;
    const TASKS: usize = 60;
    let fx = Arc::new(Fixture::new(store));
    let mut agents = Vec::new();
    for n in 0..AGENTS {
        agents.push(fx.register(&format!("racer-{n}"), false, 20).await.id);
    }
    let lead = fx.register("lead", true, 1).await.id;
    let mut created = HashSet::new();
    for n in 0..TASKS {
        let task = match n % 3 {
            0 => fx.pool_task(&format!("pool {n}")).await,
            1 => fx.offered_task(&format!("offer {n}"), agents[n % AGENTS]).await,
            _ => fx.assigned_task(&format!("assigned {n}"), agents[n % AGENTS]).await,
        };
        created.insert(task.id);
    }

    let mut pollers = Vec::new();
    for agent in agents.iter().copied().chain([lead]) {
        let fx = fx.clone();
        pollers.push(tokio::spawn(async move {
            let mut got = Vec::new();
            // Two polls of the same agent race each other too.
            let twin = {
                let fx = fx.clone();
                tokio::spawn(async move { drain(&fx, agent).await })
            };
            got.extend(drain(&fx, agent).await);
            got.extend(twin.await.unwrap());
            got
        }));
    }
    let mut delivered = Vec::new();
    for poller in pollers {
        delivered.extend(poller.await.unwrap());
    }
    let unique: HashSet<TaskId> = delivered.iter().copied().collect();
    assert_eq!(unique.len(), delivered.len(), "a task was delivered twice");
    assert_eq!(unique, created, "every task was delivered");
}

/// Poll until nothing is left; the ids of the tasks handed out.
async fn drain(fx: &Fixture, agent: AgentId) -> Vec<TaskId> {
    let mut got = Vec::new();
    while let Some(trigger) = claim(fx, agent, Timestamp::now()).await {
        match trigger {
            Trigger::TaskOffered { task_id, .. } | Trigger::TaskAssigned { task_id, .. } => got.push(task_id),
            Trigger::UrgentMail { .. }
            | Trigger::SlackInboxMessage { .. }
            | Trigger::UnreadMentions { .. }
            | Trigger::TasksFinished { .. }
            | Trigger::TasksHandedBack { .. }
            | Trigger::EpicProgressChanged { .. }
            | Trigger::TaskResult { .. }
            | Trigger::PoolTasksAvailable { .. }
            | Trigger::BudgetRefused(_) => {}
        }
    }
    got
}
