//! Steering messages: recorded only for an unfinished task, each delivered by one call
//! only, handled once the agent acted, promoted to one follow-up task at most.

use std::{collections::HashSet, sync::Arc};

use swarm_domain::{
    id::{AgentId, SteeringMessageId, TaskId},
    steering::{FOLLOW_UP_TASK_TYPE, NewSteeringMessage, SteerMode, SteeringStatus},
    task::{NewTask, TaskDraft, TaskStatus},
};

use super::{Fixture, draft};
use crate::{SteeringRecorded, Store};

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_steering {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            steering,
            [
                steering_is_delivered_once_then_handled,
                a_finished_task_takes_no_message_or_promotes_it,
                a_pending_message_is_promoted_once,
            ],
            multi_thread: [racing_deliveries_hand_each_message_out_once]
        );
    };
}

fn message(task_id: TaskId, text: &str, mode: SteerMode) -> NewSteeringMessage {
    NewSteeringMessage {
        id: SteeringMessageId::new_v7(),
        task_id,
        message: text.to_string(),
        mode,
        source: "api".into(),
        created_by_agent_id: None,
    }
}

fn follow_up(text: &str, agent: AgentId) -> NewTask {
    let draft =
        TaskDraft { agent_id: Some(agent), task_type: Some(FOLLOW_UP_TASK_TYPE.into()), ..draft(text) };
    NewTask::parse(draft, None).unwrap()
}

async fn record_pending(fx: &Fixture, message: &NewSteeringMessage) {
    match fx.store.steering_record(message, None, fx.now()).await.unwrap() {
        SteeringRecorded::Pending(recorded) => assert_eq!(recorded.status, SteeringStatus::Pending),
        other => panic!("expected Pending, got {other:?}"),
    }
}

pub async fn steering_is_delivered_once_then_handled(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("w").await;
    let task = fx.started_task("build it", agent).await;
    let steer = message(task.id, "use tabs", SteerMode::Steer);
    let queue = message(task.id, "then write docs", SteerMode::Queue);
    record_pending(&fx, &steer).await;
    record_pending(&fx, &queue).await;
    let listed = fx.store.steering_list(task.id).await.unwrap();
    assert_eq!(listed.iter().map(|m| m.id).collect::<Vec<_>>(), vec![steer.id, queue.id]);
    assert_eq!(listed[0].message, "use tabs");
    assert_eq!(fx.store.steering_get(queue.id).await.unwrap().unwrap().mode, SteerMode::Queue);

    let delivered = fx.store.steering_deliver(task.id, &[SteerMode::Steer], fx.now()).await.unwrap();
    assert_eq!(delivered.iter().map(|m| m.id).collect::<Vec<_>>(), vec![steer.id]);
    assert_eq!(delivered[0].status, SteeringStatus::Delivered);
    assert!(delivered[0].delivered_at.is_some());
    // The next delivery finds nothing new and marks what the agent saw handled.
    assert!(fx.store.steering_deliver(task.id, &[SteerMode::Steer], fx.now()).await.unwrap().is_empty());
    let steer_now = fx.store.steering_get(steer.id).await.unwrap().unwrap();
    assert_eq!(steer_now.status, SteeringStatus::Handled);
    assert!(steer_now.handled_at.is_some());

    let all_modes = [SteerMode::Steer, SteerMode::Queue];
    let delivered = fx.store.steering_deliver(task.id, &all_modes, fx.now()).await.unwrap();
    assert_eq!(delivered.iter().map(|m| m.id).collect::<Vec<_>>(), vec![queue.id]);
    assert_eq!(fx.store.steering_mark_handled(task.id, fx.now()).await.unwrap(), 1);
    assert_eq!(fx.store.steering_mark_handled(task.id, fx.now()).await.unwrap(), 0);
    let statuses: Vec<_> = fx.store.steering_list(task.id).await.unwrap().iter().map(|m| m.status).collect();
    assert_eq!(statuses, vec![SteeringStatus::Handled, SteeringStatus::Handled]);
    assert!(fx.store.steering_get(SteeringMessageId::new_v7()).await.unwrap().is_none());
}

pub async fn a_finished_task_takes_no_message_or_promotes_it(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("w").await;
    let done = fx.completed_task("done", agent).await;
    let refused = message(done.id, "also add tests", SteerMode::Queue);
    match fx.store.steering_record(&refused, None, fx.now()).await.unwrap() {
        SteeringRecorded::TaskFinished(Some(task)) => assert_eq!(task.status, TaskStatus::Completed),
        other => panic!("expected TaskFinished, got {other:?}"),
    }
    assert!(fx.store.steering_list(done.id).await.unwrap().is_empty());

    let unknown = message(TaskId::new_v7(), "anyone?", SteerMode::Queue);
    let next = follow_up("anyone?", agent);
    let recorded = fx.store.steering_record(&unknown, Some(&next), fx.now()).await.unwrap();
    assert_eq!(recorded, SteeringRecorded::TaskFinished(None));
    assert!(fx.store.task_get(next.id).await.unwrap().is_none());

    let promoted = message(done.id, "also add tests", SteerMode::Queue);
    let next = follow_up("also add tests", agent);
    match fx.store.steering_record(&promoted, Some(&next), fx.now()).await.unwrap() {
        SteeringRecorded::Promoted(message, task) => {
            assert_eq!(message.status, SteeringStatus::Promoted);
            assert_eq!(message.promoted_task_id, Some(next.id));
            assert_eq!((task.id, task.agent_id, task.status), (next.id, Some(agent), TaskStatus::Pending));
            assert_eq!(task.task_type.as_deref(), Some(FOLLOW_UP_TASK_TYPE));
        }
        other => panic!("expected Promoted, got {other:?}"),
    }
    assert_eq!(fx.store.steering_list(done.id).await.unwrap().len(), 1);

    // A follow-up is only for a finished task: an unfinished one takes the message.
    let running = fx.started_task("running", fx.worker("x").await).await;
    let kept = message(running.id, "go on", SteerMode::Steer);
    let unused = follow_up("go on", agent);
    let recorded = fx.store.steering_record(&kept, Some(&unused), fx.now()).await.unwrap();
    assert!(matches!(recorded, SteeringRecorded::Pending(_)), "{recorded:?}");
    assert!(fx.store.task_get(unused.id).await.unwrap().is_none());
}

pub async fn a_pending_message_is_promoted_once(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("w").await;
    let task = fx.started_task("build it", agent).await;
    let pending = message(task.id, "and deploy", SteerMode::Queue);
    record_pending(&fx, &pending).await;
    let first = follow_up("and deploy", agent);
    let created = fx.store.steering_promote(pending.id, &first, fx.now()).await.unwrap().unwrap();
    assert_eq!((created.id, created.agent_id), (first.id, Some(agent)));
    let second = follow_up("and deploy", agent);
    assert!(fx.store.steering_promote(pending.id, &second, fx.now()).await.unwrap().is_none());
    assert!(fx.store.task_get(second.id).await.unwrap().is_none());
    let stored = fx.store.steering_get(pending.id).await.unwrap().unwrap();
    assert_eq!((stored.status, stored.promoted_task_id), (SteeringStatus::Promoted, Some(first.id)));
    // Nor is a delivered message promoted.
    let delivered = message(task.id, "now", SteerMode::Steer);
    record_pending(&fx, &delivered).await;
    fx.store.steering_deliver(task.id, &[SteerMode::Steer], fx.now()).await.unwrap();
    let third = follow_up("now", agent);
    assert!(fx.store.steering_promote(delivered.id, &third, fx.now()).await.unwrap().is_none());
}

pub async fn racing_deliveries_hand_each_message_out_once(store: Arc<dyn Store>) {
    let fx = Arc::new(Fixture::new(store));
    let agent = fx.worker("w").await;
    let task = fx.started_task("build it", agent).await;
    let mut ids = HashSet::new();
    for n in 0..20 {
        let new = message(task.id, &format!("step {n}"), SteerMode::Queue);
        ids.insert(new.id);
        record_pending(&fx, &new).await;
    }
    let deliveries: Vec<_> = (0..6)
        .map(|_| {
            let fx = fx.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                for _ in 0..4 {
                    let found =
                        fx.store.steering_deliver(task.id, &[SteerMode::Queue], fx.now()).await.unwrap();
                    got.extend(found.into_iter().map(|m| m.id));
                }
                got
            })
        })
        .collect();
    let mut seen = Vec::new();
    for delivery in deliveries {
        seen.extend(delivery.await.unwrap());
    }
    assert_eq!(seen.len(), ids.len(), "each message is handed out exactly once");
    assert_eq!(seen.into_iter().collect::<HashSet<_>>(), ids);
}
