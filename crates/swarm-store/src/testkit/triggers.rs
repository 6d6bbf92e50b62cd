//! Triggers on both backends: create, read back every field, unique names, update,
//! delete with sessions; a slot fired once by its guard however many try; delivery ids
//! fire once; sessions upserted; awaited tasks and the `task_result` claim, its lease
//! and its delivery.

use std::sync::Arc;

use crate::{DeliveryMark, FireGuard, FireOutcome, NewTaskAwait, Store, StoreError};
use swarm_domain::{
    id::TriggerId,
    lease::LeasePolicy,
    poll::{Trigger, TriggerKind},
    task::{NewTask, TaskAction, TaskStatus},
    time::Timestamp,
    trigger::{TriggerDef, TriggerDraft},
};

use super::{Fixture, complete, draft};

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_triggers {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            triggers,
            [
                trigger_round_trips_and_names_are_unique,
                trigger_slot_fires_once_under_its_guard,
                trigger_delivery_fires_once,
                trigger_delivery_mark_expires,
                trigger_sessions_are_upserted_and_deleted_with_the_trigger,
                trigger_awaited_task_result_is_claimed_once_and_delivered,
                trigger_keeps_milliseconds_and_channel_and_takes_its_awaits_when_deleted,
            ],
            multi_thread: []
        );
    };
}

fn cron_trigger(name: &str, now: Timestamp) -> TriggerDef {
    TriggerDraft {
        name: name.into(),
        kind: "cron".into(),
        schedule: Some("0 9 * * *".into()),
        timezone: Some("Europe/Paris".into()),
        prompt: Some("Nightly review by {{trigger_name}}".into()),
        tags: Some(vec!["nightly".into()]),
        priority: Some(70),
        session_mode: Some("persistent".into()),
        ..TriggerDraft::default()
    }
    .parse(TriggerId::new_v7(), None, now)
    .expect("a valid trigger")
}

pub async fn trigger_round_trips_and_names_are_unique(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let trigger = cron_trigger("nightly", fx.now());
    let created = fx.store.trigger_create(&trigger).await.unwrap();
    assert_eq!(created, trigger);
    assert_eq!(fx.store.trigger_get("nightly").await.unwrap(), Some(trigger.clone()));
    assert_eq!(fx.store.trigger_get_by_id(trigger.id).await.unwrap(), Some(trigger.clone()));
    let webhook = TriggerDraft {
        name: "alerts".into(),
        kind: "webhook".into(),
        webhook_secret: Some("s3cret".into()),
        ..TriggerDraft::default()
    }
    .parse(TriggerId::new_v7(), None, fx.now())
    .unwrap();
    fx.store.trigger_create(&webhook).await.unwrap();
    let names: Vec<String> = fx.store.trigger_list().await.unwrap().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["alerts", "nightly"]);

    let twin = cron_trigger("nightly", fx.now());
    assert!(matches!(fx.store.trigger_create(&twin).await, Err(StoreError::Conflict(_))));

    let mut changed = trigger.clone();
    changed.enabled = false;
    changed.prompt = "changed".into();
    changed.updated_at = fx.now();
    assert_eq!(fx.store.trigger_update(&changed).await.unwrap(), Some(changed.clone()));
    let due_later = changed.next_run_at.unwrap().plus_millis(1);
    assert!(fx.store.triggers_due(due_later, 10).await.unwrap().is_empty(), "disabled triggers are not due");

    assert!(fx.store.trigger_delete(trigger.id).await.unwrap());
    assert!(!fx.store.trigger_delete(trigger.id).await.unwrap());
    assert_eq!(fx.store.trigger_get("nightly").await.unwrap(), None);
}

pub async fn trigger_slot_fires_once_under_its_guard(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let trigger = fx.store.trigger_create(&cron_trigger("nightly", fx.now())).await.unwrap();
    let slot = trigger.next_run_at.unwrap();
    assert!(fx.store.triggers_due(slot.minus_millis(1), 10).await.unwrap().is_empty());
    let due = fx.store.triggers_due(slot, 10).await.unwrap();
    assert_eq!(due.len(), 1);

    let next = trigger.next_run_after(slot);
    let guard = FireGuard::Slot { expected: slot, next };
    let first = NewTask::parse(draft("first"), None).unwrap();
    let second = NewTask::parse(draft("second"), None).unwrap();
    let fired = fx.store.trigger_fire(trigger.id, guard, None, &first, slot, fx.now()).await.unwrap();
    let FireOutcome::Fired(task) = fired else { panic!("the first firing fires: {fired:?}") };
    assert_eq!(task.id, first.id);
    // A second hub that read the same slot finds it moved.
    let again = fx.store.trigger_fire(trigger.id, guard, None, &second, slot, fx.now()).await.unwrap();
    assert_eq!(again, FireOutcome::NotDue);
    assert_eq!(fx.store.task_get(second.id).await.unwrap(), None, "a refused firing creates nothing");

    let after = fx.store.trigger_get("nightly").await.unwrap().unwrap();
    assert_eq!((after.run_count, after.last_run_at, after.next_run_at), (1, Some(slot), next));
}

pub async fn trigger_delivery_fires_once(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let hook = TriggerDraft {
        name: "gh".into(),
        kind: "github".into(),
        webhook_secret: Some("s3cret".into()),
        ..TriggerDraft::default()
    }
    .parse(TriggerId::new_v7(), None, fx.now())
    .unwrap();
    fx.store.trigger_create(&hook).await.unwrap();
    let guard = FireGuard::Event { require_enabled: true };
    let first = NewTask::parse(draft("delivery one"), None).unwrap();
    let replay = NewTask::parse(draft("delivery one again"), None).unwrap();
    let now = fx.now();
    assert!(matches!(
        fx.store
            .trigger_fire(hook.id, guard, Some(&DeliveryMark::forever("d-1")), &first, now, now)
            .await
            .unwrap(),
        FireOutcome::Fired(_)
    ));
    assert_eq!(
        fx.store
            .trigger_fire(hook.id, guard, Some(&DeliveryMark::forever("d-1")), &replay, now, now)
            .await
            .unwrap(),
        FireOutcome::Duplicate
    );
    assert_eq!(fx.store.task_get(replay.id).await.unwrap(), None);
    assert_eq!(fx.store.trigger_get("gh").await.unwrap().unwrap().run_count, 1);

    let mut disabled = hook.clone();
    disabled.enabled = false;
    fx.store.trigger_update(&disabled).await.unwrap();
    let other = NewTask::parse(draft("while disabled"), None).unwrap();
    assert_eq!(
        fx.store
            .trigger_fire(hook.id, guard, Some(&DeliveryMark::forever("d-2")), &other, now, now)
            .await
            .unwrap(),
        FireOutcome::Disabled
    );
    // A manual firing ignores `enabled`; the delivery id refused before is still free.
    let manual = FireGuard::Event { require_enabled: false };
    assert!(matches!(
        fx.store
            .trigger_fire(hook.id, manual, Some(&DeliveryMark::forever("d-2")), &other, now, now)
            .await
            .unwrap(),
        FireOutcome::Fired(_)
    ));
    assert_eq!(
        fx.store.trigger_fire(TriggerId::new_v7(), manual, None, &replay, now, now).await.unwrap(),
        FireOutcome::NotFound
    );
}

/// A mark with an end (a signed body's hash) refuses repeats until then, and only then.
pub async fn trigger_delivery_mark_expires(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let hook = TriggerDraft {
        name: "hook".into(),
        kind: "webhook".into(),
        webhook_secret: Some("s3cret".into()),
        ..TriggerDraft::default()
    }
    .parse(TriggerId::new_v7(), None, fx.now())
    .unwrap();
    fx.store.trigger_create(&hook).await.unwrap();
    let guard = FireGuard::Event { require_enabled: true };
    let now = fx.now();
    // Each firing marks the body until a minute after it arrived.
    let fire = |text: &str, at: Timestamp| {
        let task = NewTask::parse(draft(text), None).unwrap();
        let store = Arc::clone(&fx.store);
        let mark = DeliveryMark { id: "sha256:abc".into(), expires_at: Some(at.plus_millis(60_000)) };
        async move { store.trigger_fire(hook.id, guard, Some(&mark), &task, at, at).await.unwrap() }
    };
    assert!(matches!(fire("first", now).await, FireOutcome::Fired(_)));
    assert_eq!(fire("replay", now.plus_millis(59_999)).await, FireOutcome::Duplicate);
    let later = now.plus_millis(60_000);
    assert!(
        matches!(fire("after the window", later).await, FireOutcome::Fired(_)),
        "an expired mark is free"
    );
    // The new firing marked it again, from its own time.
    assert_eq!(fire("replay of the second", later.plus_millis(1)).await, FireOutcome::Duplicate);
}

pub async fn trigger_sessions_are_upserted_and_deleted_with_the_trigger(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let trigger = fx.store.trigger_create(&cron_trigger("nightly", fx.now())).await.unwrap();
    assert_eq!(fx.store.trigger_session_get("nightly", "o/r#1").await.unwrap(), None);
    let first = fx.store.trigger_session_set("nightly", "o/r#1", "session-a", fx.now()).await.unwrap();
    assert_eq!(first.session_id, "session-a");
    fx.store.trigger_session_set("nightly", "o/r#1", "session-b", fx.now()).await.unwrap();
    fx.store.trigger_session_set("nightly", "o/r#2", "session-c", fx.now()).await.unwrap();
    let read = fx.store.trigger_session_get("nightly", "o/r#1").await.unwrap().unwrap();
    assert_eq!(read.session_id, "session-b");
    fx.store.trigger_delete(trigger.id).await.unwrap();
    assert_eq!(fx.store.trigger_session_get("nightly", "o/r#2").await.unwrap(), None);
}

pub async fn trigger_awaited_task_result_is_claimed_once_and_delivered(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let triage = fx.worker("triage").await;
    let worker = fx.worker("worker").await;
    let parent = fx.started_task("a webhook arrived", triage).await;
    let awaiting = NewTaskAwait {
        agent_id: triage,
        parent_task_id: parent.id,
        trigger_name: "alerts".into(),
        session_key: "thread-1".into(),
    };
    let child = NewTask::parse(
        swarm_domain::task::TaskDraft { agent_id: Some(worker), ..draft("fix it") },
        Some(triage),
    )
    .unwrap();
    let created = fx.store.task_create_awaited(&child, &awaiting, fx.now()).await.unwrap();
    assert_eq!(created.status, TaskStatus::Pending);
    let record = fx.store.task_await_get(child.id).await.unwrap().unwrap();
    assert_eq!((record.agent_id, record.parent_task_id, record.delivered_at), (triage, parent.id, None));
    let waiters = fx.store.task_waiters(child.id).await.unwrap();
    assert_eq!(
        waiters,
        crate::TaskWaiters {
            has_dependents: false,
            awaiting_agent: Some(triage),
            assignee_mail_pending: false
        }
    );

    // Not finished yet: nothing to hand over.
    let kinds = [TriggerKind::TaskResult];
    let now = fx.now();
    assert_eq!(fx.store.poll_claim(triage, &kinds, now, now.plus_millis(60_000)).await.unwrap(), None);
    fx.must_change(child.id, TaskAction::Start { agent: worker }).await;
    fx.must_change(child.id, complete(worker)).await;
    fx.store.trigger_session_set("alerts", "thread-1", "session-1", fx.now()).await.unwrap();
    assert!(fx.store.poll_view(triage).await.unwrap().unwrap().waiting.contains(&TriggerKind::TaskResult));

    let now = fx.now();
    let lease_until = now.plus_millis(60_000);
    let claimed = fx.store.poll_claim(triage, &kinds, now, lease_until).await.unwrap();
    let Some((TriggerKind::TaskResult, Trigger::TaskResult { task_id, parent_task_id, session_id, .. })) =
        claimed
    else {
        panic!("expected a task_result, got {claimed:?}");
    };
    assert_eq!((task_id, parent_task_id, session_id.as_deref()), (child.id, parent.id, Some("session-1")));
    assert_eq!(fx.store.poll_claim(triage, &kinds, now, lease_until).await.unwrap(), None, "claimed once");

    // The lease runs out: the result is offered again.
    let policy = LeasePolicy::default();
    let report = fx.store.rescue(&policy, lease_until.plus_millis(1)).await.unwrap();
    assert_eq!(report.results_returned_to, vec![triage]);
    let later = lease_until.plus_millis(2);
    assert!(fx.store.poll_claim(triage, &kinds, later, later.plus_millis(60_000)).await.unwrap().is_some());

    assert!(
        !fx.store.task_await_deliver(child.id, worker, fx.now()).await.unwrap(),
        "only the awaiting agent"
    );
    assert!(fx.store.task_await_deliver(child.id, triage, fx.now()).await.unwrap());
    assert!(!fx.store.task_await_deliver(child.id, triage, fx.now()).await.unwrap(), "delivered once");
    let far = later.plus_millis(600_000);
    assert_eq!(fx.store.poll_claim(triage, &kinds, far, far.plus_millis(1)).await.unwrap(), None);
}

pub async fn trigger_keeps_milliseconds_and_channel_and_takes_its_awaits_when_deleted(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let now = fx.now();
    let interval = TriggerDraft {
        name: "heartbeat".into(),
        kind: "interval".into(),
        interval_ms: Some(1_500),
        channel: Some("email".into()),
        ..TriggerDraft::default()
    }
    .parse(TriggerId::new_v7(), None, now)
    .unwrap();
    let created = fx.store.trigger_create(&interval).await.unwrap();
    assert_eq!((created.interval_ms, created.channel.as_deref()), (Some(1_500), Some("email")));
    assert_eq!(created.next_run_at, Some(now.plus_millis(1_500)), "not rounded to a second");
    let mut changed = created.clone();
    changed.interval_ms = Some(2_250);
    changed.channel = None;
    assert_eq!(fx.store.trigger_update(&changed).await.unwrap(), Some(changed.clone()));

    // A task the trigger's session awaits: deleting the trigger leaves no await behind.
    let triage = fx.worker("triage").await;
    let parent = fx.started_task("a firing", triage).await;
    let awaiting = NewTaskAwait {
        agent_id: triage,
        parent_task_id: parent.id,
        trigger_name: "heartbeat".into(),
        session_key: "default".into(),
    };
    let child = NewTask::parse(draft("follow up"), Some(triage)).unwrap();
    fx.store.task_create_awaited(&child, &awaiting, fx.now()).await.unwrap();
    assert!(fx.store.task_await_get(child.id).await.unwrap().is_some());
    assert!(fx.store.trigger_delete(created.id).await.unwrap());
    assert_eq!(fx.store.task_await_get(child.id).await.unwrap(), None, "the await went with its trigger");
    assert!(fx.store.task_get(child.id).await.unwrap().is_some(), "the task itself stays");
}
