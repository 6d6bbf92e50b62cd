//! Taking work: claim and release (the pool), accept and reject (offers).
//!
//! `reviewing` is not reachable through `TaskAction` yet (the poll will claim offers
//! into it), so accept and reject are tested from `offered` only.

use std::sync::Arc;

use crate::{Applied, Store};
use swarm_domain::{
    agent::AgentStatus,
    event::EventType,
    id::TaskId,
    task::{TaskAction, TaskDraft, TaskStatus},
};

use super::{Fixture, cancel, complete, draft, fail, of_type, pair, status_changes};

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_claims {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            claims,
            [
                claim_takes_a_pool_task,
                claim_needs_an_unassigned_task,
                claim_waits_for_dependencies,
                claim_needs_capacity,
                release_gives_back_own_pending_task,
                accept_takes_an_offer_made_to_me,
                reject_returns_an_offer_to_the_pool,
            ],
            multi_thread: []
        );
    };
}

pub async fn claim_takes_a_pool_task(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let task = fx.pool_task("pool work").await;

    let claimed_at = fx.now();
    let res = fx.apply_at(task.id, TaskAction::Claim { agent }, claimed_at).await;
    let Applied::Changed { before, after } = res else { panic!("claim: {res:?}") };
    assert_eq!(before, task, "before is the row as it was");
    assert_eq!(after.status, TaskStatus::Pending);
    assert_eq!(after.agent_id, Some(agent));
    assert_eq!(after.last_updated_at, claimed_at);
    assert_eq!(after.created_at, task.created_at);
    assert_eq!(fx.task(task.id).await, after);

    let events = fx.task_events(task.id).await;
    let claims = of_type(&events, EventType::TaskClaimed);
    assert_eq!(claims.len(), 1, "{events:?}");
    assert_eq!(claims[0].agent_id, Some(agent));
    assert_eq!(claims[0].created_at, claimed_at);
    assert_eq!(status_changes(&events), [pair("unassigned", "pending")]);
    // A pending task does not make an agent busy.
    assert_eq!(fx.agent(agent).await.status, AgentStatus::Idle);
}

pub async fn claim_needs_an_unassigned_task(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.register("worker-1", false, 5).await.id;
    let other = fx.register("worker-2", false, 5).await.id;

    let pending = fx.pool_task("claimed by another").await;
    fx.must_change(pending.id, TaskAction::Claim { agent: other }).await;
    let offered = fx.offered_task("offered to me", agent).await;
    let backlog = fx.create(TaskDraft { backlog: true, ..draft("later") }, None).await;
    let in_progress = fx.started_task("being worked", other).await;
    let completed = fx.completed_task("done", other).await;
    let cancelled = fx.pool_task("withdrawn").await;
    fx.must_change(cancelled.id, cancel()).await;

    for task in [pending, offered, backlog, in_progress, completed, cancelled] {
        let current = fx.must_refuse(task.id, TaskAction::Claim { agent }).await;
        assert_ne!(current.agent_id, Some(agent));
    }
    // Claiming twice is refused too.
    let pool = fx.pool_task("pool").await;
    fx.must_change(pool.id, TaskAction::Claim { agent }).await;
    fx.must_refuse(pool.id, TaskAction::Claim { agent }).await;

    let res = fx.apply(TaskId::new_v7(), TaskAction::Claim { agent }).await;
    assert_eq!(res, Applied::NotFound);
}

pub async fn claim_waits_for_dependencies(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.register("worker-1", false, 5).await.id;
    let first = fx.pool_task("first").await;
    let second = fx.pool_task("second").await;
    let dependent =
        fx.create(TaskDraft { depends_on: vec![first.id, second.id], ..draft("after both") }, None).await;

    fx.must_refuse(dependent.id, TaskAction::Claim { agent }).await;

    fx.must_change(first.id, TaskAction::Claim { agent }).await;
    fx.must_change(first.id, TaskAction::Start { agent }).await;
    fx.must_change(first.id, complete(agent)).await;
    // One of two dependencies completed is not enough.
    fx.must_refuse(dependent.id, TaskAction::Claim { agent }).await;

    fx.must_change(second.id, TaskAction::Claim { agent }).await;
    fx.must_change(second.id, TaskAction::Start { agent }).await;
    fx.must_change(second.id, complete(agent)).await;
    let after = fx.must_change(dependent.id, TaskAction::Claim { agent }).await;
    assert_eq!(after.status, TaskStatus::Pending);

    // A failed or cancelled dependency is not completed.
    let failed = fx.started_task("failed", agent).await;
    fx.must_change(failed.id, fail(agent)).await;
    let cancelled = fx.pool_task("cancelled").await;
    fx.must_change(cancelled.id, cancel()).await;
    for dependency in [failed, cancelled] {
        let blocked =
            fx.create(TaskDraft { depends_on: vec![dependency.id], ..draft("blocked") }, None).await;
        fx.must_refuse(blocked.id, TaskAction::Claim { agent }).await;
    }
}

pub async fn claim_needs_capacity(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await; // maxTasks 1
    let busy_with = fx.started_task("current work", agent).await;
    let pool = fx.pool_task("more work").await;

    fx.must_refuse(pool.id, TaskAction::Claim { agent }).await;

    fx.must_change(busy_with.id, complete(agent)).await;
    let after = fx.must_change(pool.id, TaskAction::Claim { agent }).await;
    assert_eq!(after.agent_id, Some(agent));

    // With room for two, one task in progress still leaves room.
    let roomy = fx.register("worker-2", false, 2).await.id;
    fx.started_task("one of two", roomy).await;
    let pool = fx.pool_task("second slot").await;
    fx.must_change(pool.id, TaskAction::Claim { agent: roomy }).await;
}

pub async fn release_gives_back_own_pending_task(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let other = fx.worker("worker-2").await;
    let task = fx.pool_task("pool work").await;
    fx.must_change(task.id, TaskAction::Claim { agent }).await;

    fx.must_refuse(task.id, TaskAction::Release { agent: other }).await;

    let after = fx.must_change(task.id, TaskAction::Release { agent }).await;
    assert_eq!(after.status, TaskStatus::Unassigned);
    assert_eq!(after.agent_id, None);
    let events = fx.task_events(task.id).await;
    let releases = of_type(&events, EventType::TaskReleased);
    assert_eq!(releases.len(), 1, "{events:?}");
    assert_eq!(releases[0].agent_id, Some(agent));
    assert_eq!(status_changes(&events), [pair("unassigned", "pending"), pair("pending", "unassigned")]);

    // Released work can be claimed again, by anyone.
    fx.must_change(task.id, TaskAction::Claim { agent: other }).await;
    // Only the holder releases, pending or started work alike (a runner whose CLI
    // cannot run gives a started task back).
    fx.must_refuse(task.id, TaskAction::Release { agent }).await;
    fx.must_change(task.id, TaskAction::Start { agent: other }).await;
    let started = fx.must_change(task.id, TaskAction::Release { agent: other }).await;
    assert_eq!((started.status, started.agent_id), (TaskStatus::Unassigned, None));
    let pool = fx.pool_task("never claimed").await;
    fx.must_refuse(pool.id, TaskAction::Release { agent }).await;
}

pub async fn accept_takes_an_offer_made_to_me(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let other = fx.worker("worker-2").await;
    let task = fx.offered_task("for worker-1", agent).await;

    fx.must_refuse(task.id, TaskAction::Accept { agent: other }).await;

    let accepted_at = fx.now();
    let res = fx.apply_at(task.id, TaskAction::Accept { agent }, accepted_at).await;
    let Applied::Changed { after, .. } = res else { panic!("accept: {res:?}") };
    assert_eq!(after.status, TaskStatus::Pending);
    assert_eq!(after.agent_id, Some(agent));
    assert_eq!(after.accepted_at, Some(accepted_at));
    assert_eq!(fx.task(task.id).await, after);
    let events = fx.task_events(task.id).await;
    let accepts = of_type(&events, EventType::TaskAccepted);
    assert_eq!(accepts.len(), 1, "{events:?}");
    assert_eq!(accepts[0].agent_id, Some(agent));
    assert_eq!(status_changes(&events), [pair("offered", "pending")]);

    fx.must_refuse(task.id, TaskAction::Accept { agent }).await;
    fx.must_refuse(task.id, TaskAction::Reject { agent, reason: None }).await;
    // Accept is for offers only.
    let pool = fx.pool_task("pool").await;
    fx.must_refuse(pool.id, TaskAction::Accept { agent }).await;
}

pub async fn reject_returns_an_offer_to_the_pool(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let other = fx.worker("worker-2").await;
    let task = fx.offered_task("for worker-1", agent).await;

    let reason = Some("not my area".to_string());
    fx.must_refuse(task.id, TaskAction::Reject { agent: other, reason: reason.clone() }).await;

    let after = fx.must_change(task.id, TaskAction::Reject { agent, reason }).await;
    assert_eq!(after.status, TaskStatus::Unassigned);
    assert_eq!(after.offered_to, None);
    assert_eq!(after.agent_id, None);
    assert_eq!(after.rejection_reason.as_deref(), Some("not my area"));
    let events = fx.task_events(task.id).await;
    let rejects = of_type(&events, EventType::TaskRejected);
    assert_eq!(rejects.len(), 1, "{events:?}");
    assert_eq!(rejects[0].agent_id, Some(agent));
    assert_eq!(status_changes(&events), [pair("offered", "unassigned")]);

    // The offer is gone: neither accept nor reject again.
    fx.must_refuse(task.id, TaskAction::Accept { agent }).await;
    fx.must_refuse(task.id, TaskAction::Reject { agent, reason: None }).await;
    // It is pool work now.
    let claimed = fx.must_change(task.id, TaskAction::Claim { agent: other }).await;
    assert_eq!(claimed.agent_id, Some(other));
}
