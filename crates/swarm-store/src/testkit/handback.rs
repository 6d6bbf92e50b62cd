//! Work of gone agents handed on (issue 25): what `rescue` does with the tasks of an
//! agent offline for `reassign_after`, and the lead's `tasks_handed_back` claim.

use std::{sync::Arc, time::Duration};

use crate::{Applied, Store};
use swarm_domain::{
    event::EventType,
    handback::{self, HandBackBy, HandBackTo},
    lease::LeasePolicy,
    poll::{Trigger, TriggerKind},
    task::{TaskAction, TaskStatus},
    time::Timestamp,
};

use super::{Fixture, of_type};

type Move = (swarm_domain::id::TaskId, TaskStatus, TaskStatus);

fn by_task(mut moves: Vec<Move>) -> Vec<Move> {
    moves.sort_by_key(|(id, _, _)| *id);
    moves
}

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_handback {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            handback,
            [
                rescue_hands_on_the_work_of_gone_agents,
                an_agent_back_in_time_keeps_its_work,
                the_operators_hand_back_is_guarded,
                an_agent_giving_back_its_task_tells_the_lead,
            ],
            multi_thread: []
        );
    };
}

const PERIOD: i64 = 60_000;
const AFTER: i64 = 120_000;

fn policy() -> LeasePolicy {
    LeasePolicy {
        period: Duration::from_millis(PERIOD as u64),
        reassign_after: Duration::from_millis(AFTER as u64),
        ..LeasePolicy::default()
    }
}

async fn lead_claims(fx: &Fixture, lead: swarm_domain::id::AgentId, now: Timestamp) -> Option<Trigger> {
    let kinds = [TriggerKind::TasksHandedBack];
    fx.store.poll_claim(lead, &kinds, now, now.plus_millis(PERIOD)).await.expect("poll_claim").map(|(_, t)| t)
}

pub async fn rescue_hands_on_the_work_of_gone_agents(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let gone = fx.register("gone", false, 5).await.id;
    let lead = fx.register("lead", true, 1).await.id;
    let from_pool = fx.pool_task("taken from the pool").await;
    fx.must_change(from_pool.id, TaskAction::Claim { agent: gone }).await;
    let assigned = fx.assigned_task("asked of gone by name", gone).await;
    let offered = fx.offered_task("offered to gone", gone).await;
    let paused = fx.started_task("paused by gone", gone).await;
    fx.must_change(paused.id, TaskAction::Pause { agent: gone }).await;
    let last_seen = fx.store.poll_view(gone).await.unwrap().unwrap().last_seen_at;

    // Offline, but not for long enough: nothing moves.
    let early = last_seen.plus_millis(PERIOD + AFTER - 1_000);
    let report = fx.store.rescue(&policy(), early).await.unwrap();
    assert!(report.silenced.contains(&gone), "{report:?}");
    assert!(report.handed_back.is_empty(), "{report:?}");
    assert_eq!(fx.task(assigned.id).await.status, TaskStatus::Pending);
    assert_eq!(lead_claims(&fx, lead, early).await, None, "nothing to tell the lead yet");

    let late = last_seen.plus_millis(PERIOD + AFTER + 1_000);
    let report = fx.store.rescue(&policy(), late).await.unwrap();
    let moved =
        by_task(report.handed_back.iter().map(|moved| (moved.task_id, moved.from, moved.to)).collect());
    let expected = by_task(vec![
        (from_pool.id, TaskStatus::Pending, TaskStatus::Unassigned),
        (assigned.id, TaskStatus::Pending, TaskStatus::Backlog),
        (offered.id, TaskStatus::Offered, TaskStatus::Backlog),
    ]);
    assert_eq!(moved, expected, "pool work to the pool, work asked of the agent to the backlog");
    assert!(report.handed_back.iter().all(|moved| moved.holder == gone));
    for id in [from_pool.id, assigned.id, offered.id] {
        let task = fx.task(id).await;
        assert_eq!((task.agent_id, task.offered_to, task.lease_expires_at), (None, None, None), "{task:?}");
        let events = fx.task_events(id).await;
        let handed = of_type(&events, EventType::TaskHandedBack);
        assert_eq!(handed.len(), 1, "one event per move");
        let metadata = handed[0].metadata.as_ref().expect("the event says why");
        assert_eq!(metadata["fromAgentId"], gone.to_string());
        assert!(metadata["reason"].as_str().unwrap().contains("offline"), "{metadata}");
    }
    assert_eq!(fx.task(paused.id).await.status, TaskStatus::Paused, "the rescuer leaves paused work");
    assert!(
        fx.store.rescue(&policy(), late.plus_millis(1)).await.unwrap().handed_back.is_empty(),
        "each task moves once"
    );

    // The lead is told once, oldest first, with each task as it is now.
    let Some(Trigger::TasksHandedBack { count, handoffs }) = lead_claims(&fx, lead, late).await else {
        panic!("the lead gets tasks_handed_back");
    };
    assert_eq!(count, 3);
    let told = by_task(handoffs.iter().map(|h| (h.task.id, h.from_status, h.to_status)).collect());
    assert_eq!(told, expected);
    assert!(handoffs.iter().all(|h| h.from_agent_id == gone && h.task.status == h.to_status));
    assert_eq!(lead_claims(&fx, lead, late).await, None, "told once");
    let view = fx.store.poll_view(lead).await.unwrap().unwrap();
    assert!(!view.waiting.contains(&TriggerKind::TasksHandedBack));

    // The pool task is anyone's now.
    let other = fx.worker("other").await;
    fx.must_change(from_pool.id, TaskAction::Claim { agent: other }).await;
}

pub async fn an_agent_back_in_time_keeps_its_work(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("back").await;
    let task = fx.assigned_task("mine", agent).await;
    let last_seen = fx.store.poll_view(agent).await.unwrap().unwrap().last_seen_at;

    let offline = last_seen.plus_millis(PERIOD + 1_000);
    assert!(fx.store.rescue(&policy(), offline).await.unwrap().silenced.contains(&agent));
    // It comes back before `reassign_after` has passed.
    let back = offline.plus_millis(AFTER / 2);
    fx.store.agent_heartbeat(agent, back, back.plus_millis(PERIOD)).await.unwrap();
    let report = fx.store.rescue(&policy(), back.plus_millis(PERIOD / 2)).await.unwrap();
    assert!(report.handed_back.is_empty(), "{report:?}");
    let kept = fx.task(task.id).await;
    assert_eq!((kept.status, kept.agent_id), (TaskStatus::Pending, Some(agent)));

    // Zero keeps work waiting for its agent forever, as before issue 25.
    let never = LeasePolicy { reassign_after: Duration::ZERO, ..policy() };
    let far = back.plus_millis(100 * AFTER);
    let report = fx.store.rescue(&never, far).await.unwrap();
    assert!(report.silenced.contains(&agent) && report.handed_back.is_empty(), "{report:?}");
    assert_eq!(fx.task(task.id).await.agent_id, Some(agent));
    assert!(of_type(&fx.task_events(task.id).await, EventType::TaskHandedBack).is_empty());
}

pub async fn the_operators_hand_back_is_guarded(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let holder = fx.worker("holder").await;
    let other = fx.worker("other").await;
    let task = fx.started_task("paused work", holder).await;
    fx.must_change(task.id, TaskAction::Pause { agent: holder }).await;
    let release =
        |now| handback::change(holder, false, HandBackTo::Pool, HandBackBy::Operator { now }, "test");

    // The holder is online: refused, nothing changes.
    let before = fx.task(task.id).await;
    let now = fx.now();
    let refused = fx.store.task_apply(task.id, &release(now), None, now).await.unwrap();
    assert!(matches!(refused, Applied::Refused { .. }), "{refused:?}");
    assert_eq!(fx.task(task.id).await, before);

    // Gone: the operator hands its paused work to another agent.
    fx.store.agent_close(holder, fx.now()).await.unwrap();
    let now = fx.now();
    let reassign =
        handback::change(holder, false, HandBackTo::Agent(other), HandBackBy::Operator { now }, "test");
    let Applied::Changed { after, .. } = fx.store.task_apply(task.id, &reassign, None, now).await.unwrap()
    else {
        panic!("reassigned");
    };
    assert_eq!((after.status, after.agent_id), (TaskStatus::Pending, Some(other)));
    assert_eq!(fx.task(task.id).await, after);
    // The same hand-back again finds the task moved: refused.
    let now = fx.now();
    assert!(matches!(
        fx.store.task_apply(task.id, &release(now), None, now).await.unwrap(),
        Applied::Refused { .. }
    ));
}

/// A runner that stopped a run going nowhere gives its task back with the reason (issue
/// 40): the task returns to the pool, and the lead hears of it once, reason and all. A
/// give-back the guard refuses (not the agent's task) tells nobody anything.
pub async fn an_agent_giving_back_its_task_tells_the_lead(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let holder = fx.worker("holder").await;
    let other = fx.worker("other").await;
    let lead = fx.register("lead", true, 1).await.id;
    let task = fx.started_task("stalled work", holder).await;
    let give_back = |agent| TaskAction::Release { agent }.change();
    let reason = "the run stalled: no output for 11m";

    let now = fx.now();
    let refused = fx.store.task_give_back(task.id, &give_back(other), other, reason, now).await.unwrap();
    assert!(matches!(refused, Applied::Refused { .. }), "{refused:?}");
    assert_eq!(lead_claims(&fx, lead, now).await, None, "a refused give-back tells nobody");

    let now = fx.now();
    let Applied::Changed { after, .. } =
        fx.store.task_give_back(task.id, &give_back(holder), holder, reason, now).await.unwrap()
    else {
        panic!("given back");
    };
    assert_eq!((after.status, after.agent_id), (TaskStatus::Unassigned, None));
    let Some(Trigger::TasksHandedBack { count: 1, handoffs }) = lead_claims(&fx, lead, now).await else {
        panic!("the lead gets tasks_handed_back");
    };
    let told = &handoffs[0];
    assert_eq!((told.task.id, told.from_agent_id), (task.id, holder));
    assert_eq!((told.from_status, told.to_status), (TaskStatus::InProgress, TaskStatus::Unassigned));
    assert_eq!(told.reason, reason);
    assert_eq!(lead_claims(&fx, lead, now).await, None, "told once");
    fx.must_change(task.id, TaskAction::Claim { agent: other }).await;
}
