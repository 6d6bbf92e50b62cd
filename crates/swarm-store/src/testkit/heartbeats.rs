//! Heartbeats written in batches (`agent_heartbeats`): what a batch extends, what it
//! leaves alone, that nothing moves back, and that a batch racing the rescuer (or
//! another hub's batch) leaves one consistent outcome.

use std::{sync::Arc, time::Duration};

use crate::{Heartbeat, Store};
use swarm_domain::{
    agent::AgentStatus,
    chat::NewChatMessage,
    id::{AgentId, ChannelId, ChatMessageId, RunnerId},
    lease::LeasePolicy,
    poll::{PoolMode, TriggerKind},
    task::TaskStatus,
    time::Timestamp,
};

use super::Fixture;

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_heartbeats {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            heartbeats,
            [
                a_batch_renews_what_present_agents_hold,
                a_batch_leaves_offline_and_unknown_agents_alone,
                a_batch_never_moves_a_lease_or_a_sign_of_life_back,
                a_batch_extends_lead_side_claims_only_by_their_runner,
            ],
            multi_thread: [a_batch_racing_the_rescuer_and_another_batch_has_one_outcome]
        );
    };
}

const LEASE: i64 = 45_000;

fn beat(agent: AgentId, at: Timestamp) -> Heartbeat {
    Heartbeat { agent, runner: None, at, lease_until: at.plus_millis(LEASE) }
}

/// Claim everything `agent` may take now.
async fn claim_all(fx: &Fixture, agent: AgentId, now: Timestamp) {
    let kinds: Vec<TriggerKind> = PoolMode::Claim.kinds().collect();
    while fx.store.poll_claim(agent, &kinds, now, now.plus_millis(LEASE)).await.unwrap().is_some() {}
}

pub async fn a_batch_renews_what_present_agents_hold(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let (a, b, other) =
        (fx.register("a", false, 5).await.id, fx.register("b", false, 5).await.id, fx.worker("other").await);
    let offered = fx.offered_task("offer", a).await;
    let assigned = fx.assigned_task("work", b).await;
    let others = fx.assigned_task("someone else's", other).await;
    let claimed_at = fx.now();
    for agent in [a, b, other] {
        claim_all(&fx, agent, claimed_at).await;
    }
    assert_eq!(fx.task(offered.id).await.status, TaskStatus::Reviewing);
    assert_eq!(fx.task(assigned.id).await.status, TaskStatus::InProgress);

    let (beat_a, beat_b) = (fx.now(), fx.now());
    let not_applied = fx.store.agent_heartbeats(&[beat(b, beat_b), beat(a, beat_a)]).await.unwrap();
    assert!(not_applied.is_empty(), "{not_applied:?}");
    assert_eq!(
        fx.task(offered.id).await.lease_expires_at,
        Some(beat_a.plus_millis(LEASE)),
        "reviewing offer"
    );
    assert_eq!(
        fx.task(assigned.id).await.lease_expires_at,
        Some(beat_b.plus_millis(LEASE)),
        "in_progress task"
    );
    assert_eq!(
        fx.task(others.id).await.lease_expires_at,
        Some(claimed_at.plus_millis(LEASE)),
        "not in the batch"
    );
    assert_eq!(fx.store.poll_view(a).await.unwrap().unwrap().last_seen_at, beat_a);
    assert_eq!(fx.store.poll_view(b).await.unwrap().unwrap().last_seen_at, beat_b);
    assert!(fx.store.agent_heartbeats(&[]).await.unwrap().is_empty(), "an empty batch is nothing");

    // The rescuer a lease after the claim takes only what the batch did not renew.
    let report = fx.store.rescue(&LeasePolicy::default(), claimed_at.plus_millis(LEASE + 1)).await.unwrap();
    let expired: Vec<_> = report.expired.iter().map(|claim| claim.task_id).collect();
    assert_eq!(expired, vec![others.id], "{report:?}");
}

pub async fn a_batch_leaves_offline_and_unknown_agents_alone(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let (present, gone) = (fx.worker("present").await, fx.worker("gone").await);
    let held = fx.assigned_task("held by the one that leaves", gone).await;
    let claimed_at = fx.now();
    claim_all(&fx, gone, claimed_at).await;
    fx.store.agent_close(gone, fx.now()).await.unwrap().unwrap();
    let seen_before = fx.store.poll_view(gone).await.unwrap().unwrap().last_seen_at;
    let events_before = fx.agent_events(gone).await.len();
    let unknown = AgentId::new_v7();

    let now = fx.now();
    let mut not_applied =
        fx.store.agent_heartbeats(&[beat(present, now), beat(gone, now), beat(unknown, now)]).await.unwrap();
    not_applied.sort();
    let mut expected = vec![gone, unknown];
    expected.sort();
    assert_eq!(not_applied, expected, "the offline and the unknown agent come back to the caller");
    assert_eq!(fx.agent(gone).await.status, AgentStatus::Offline, "a batch brings no one back");
    assert_eq!(fx.store.poll_view(gone).await.unwrap().unwrap().last_seen_at, seen_before);
    assert_eq!(fx.task(held.id).await.lease_expires_at, Some(claimed_at.plus_millis(LEASE)));
    assert_eq!(fx.agent_events(gone).await.len(), events_before, "nothing logged for it");
    assert_eq!(fx.store.poll_view(present).await.unwrap().unwrap().last_seen_at, now);
    assert!(fx.store.agent_get(unknown).await.unwrap().is_none());
}

pub async fn a_batch_never_moves_a_lease_or_a_sign_of_life_back(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.worker("worker").await;
    let task = fx.assigned_task("work", worker).await;
    let early = fx.now();
    let claimed_at = fx.now();
    claim_all(&fx, worker, claimed_at).await;
    let late = fx.now();
    fx.store.agent_heartbeat(worker, late, late.plus_millis(LEASE)).await.unwrap().unwrap();

    // A batch kept since before the claim and the last heartbeat arrives late.
    let not_applied = fx.store.agent_heartbeats(&[beat(worker, early)]).await.unwrap();
    assert!(not_applied.is_empty());
    assert_eq!(fx.task(task.id).await.lease_expires_at, Some(late.plus_millis(LEASE)));
    assert_eq!(fx.store.poll_view(worker).await.unwrap().unwrap().last_seen_at, late);

    // Two beats of one agent in a batch: the later one counts.
    let (first, second) = (fx.now(), fx.now());
    fx.store.agent_heartbeats(&[beat(worker, second), beat(worker, first)]).await.unwrap();
    assert_eq!(fx.task(task.id).await.lease_expires_at, Some(second.plus_millis(LEASE)));
    assert_eq!(fx.store.poll_view(worker).await.unwrap().unwrap().last_seen_at, second);
}

pub async fn a_batch_extends_lead_side_claims_only_by_their_runner(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let (alpha, lead) = (fx.worker("alpha").await, fx.register("lead", true, 1).await.id);
    let (crashed, alive) = (RunnerId::new_v7(), RunnerId::new_v7());
    let mention = |text: &str| NewChatMessage {
        id: ChatMessageId::new_v7(),
        channel_id: ChannelId::general(),
        agent_id: Some(alpha),
        content: text.into(),
        reply_to_id: None,
        mentions: vec![lead],
        tasks: Vec::new(),
    };
    let _ = fx.store.chat_post(&mention("@lead look"), fx.now()).await.unwrap();
    let claimed_at = fx.now();
    let kinds = [TriggerKind::UnreadMentions];
    let until = claimed_at.plus_millis(LEASE);
    assert!(
        fx.store
            .poll_claim_for_runner(lead, &kinds, claimed_at, until, Some(crashed))
            .await
            .unwrap()
            .is_some()
    );

    let at = claimed_at.plus_millis(LEASE / 2);
    let from_alive = Heartbeat { runner: Some(alive), ..beat(lead, at) };
    fx.store.agent_heartbeats(&[from_alive]).await.unwrap();
    let report = fx.store.rescue(&LeasePolicy::default(), claimed_at.plus_millis(LEASE + 1)).await.unwrap();
    assert_eq!(report.mentions_returned_to, vec![lead], "another runner's heartbeat does not hold it");

    let _ = fx.store.chat_post(&mention("@lead again"), fx.now()).await.unwrap();
    let claimed_at = fx.now();
    let until = claimed_at.plus_millis(LEASE);
    assert!(
        fx.store.poll_claim_for_runner(lead, &kinds, claimed_at, until, Some(alive)).await.unwrap().is_some()
    );
    let from_alive = Heartbeat { runner: Some(alive), ..beat(lead, claimed_at.plus_millis(LEASE / 2)) };
    fx.store.agent_heartbeats(&[from_alive]).await.unwrap();
    let report = fx.store.rescue(&LeasePolicy::default(), claimed_at.plus_millis(LEASE + 1)).await.unwrap();
    assert!(report.mentions_returned_to.is_empty(), "its own runner's batch holds it: {report:?}");
}

/// Two hubs' batches and a rescuer's pass at the same moment, a lease after the agents
/// were last seen: no batch fails (no deadlock), a task is either rescued or renewed,
/// an agent is offline exactly when the rescuer silenced it, and a batch hands back
/// only an agent silenced before it ran.
pub async fn a_batch_racing_the_rescuer_and_another_batch_has_one_outcome(store: Arc<dyn Store>) {
    let fx = Fixture::new(store.clone());
    let policy = LeasePolicy {
        period: Duration::from_millis(u64::try_from(LEASE).unwrap()),
        ..LeasePolicy::default()
    };
    for round in 0..4 {
        let mut agents = Vec::new();
        let mut tasks = Vec::new();
        let claimed_at = fx.now();
        for index in 0..6 {
            let agent = fx.worker(&format!("racer-{round}-{index}")).await;
            let task = fx.assigned_task("raced", agent).await;
            fx.store.agent_heartbeat(agent, claimed_at, claimed_at.plus_millis(LEASE)).await.unwrap();
            claim_all(&fx, agent, claimed_at).await;
            agents.push(agent);
            tasks.push(task.id);
        }
        let now = claimed_at.plus_millis(LEASE + 1);
        let forward: Vec<Heartbeat> = agents.iter().map(|agent| beat(*agent, now)).collect();
        let backward: Vec<Heartbeat> = forward.iter().rev().copied().collect();
        let (first, second, rescuer) = {
            let (one, two, three) = (store.clone(), store.clone(), store.clone());
            tokio::join!(
                tokio::spawn(async move { one.agent_heartbeats(&forward).await }),
                tokio::spawn(async move { two.agent_heartbeats(&backward).await }),
                tokio::spawn(async move { three.rescue(&policy, now).await }),
            )
        };
        let (first, second) = (first.unwrap().expect("a batch"), second.unwrap().expect("another batch"));
        let report = rescuer.unwrap().expect("the rescue pass");
        for (agent, task) in agents.iter().zip(&tasks) {
            let silenced = report.silenced.contains(agent);
            let rescued = report.expired.iter().any(|claim| claim.task_id == *task);
            let stored = fx.task(*task).await;
            if rescued {
                assert_ne!(stored.status, TaskStatus::InProgress, "round {round}");
            } else {
                assert_eq!(stored.status, TaskStatus::InProgress, "round {round}");
                assert_eq!(stored.lease_expires_at, Some(now.plus_millis(LEASE)), "round {round}: renewed");
            }
            let status = fx.agent(*agent).await.status;
            assert_eq!(silenced, status == AgentStatus::Offline, "round {round}");
            // A batch hands back only an agent the rescuer silenced before it ran.
            if first.contains(agent) || second.contains(agent) {
                assert!(silenced, "round {round}: handed back but not silenced");
            }
        }
    }
}
