//! Issue trackers (issue 47), on both backends: a tracker task is created with its link
//! and its delivery mark at once (a replay creates nothing), its report is due once it
//! finished, taken by one claimant of many, failed with a retry time, done once; a
//! tracker state moves once per step.

use std::sync::Arc;

use crate::{Store, TrackerLink, TrackerTaskCreated};
use swarm_domain::task::{NewTask, TaskAction, TaskDraft};

use super::Fixture;

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_trackers {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            trackers,
            [
                tracker_task_is_created_once_per_delivery,
                tracker_report_is_due_once_finished_and_done_once,
                tracker_report_failure_waits_for_its_retry,
                tracker_status_moves_once_per_step,
                task_pull_requests_are_recorded_once_in_order,
            ],
            multi_thread: [
                tracker_concurrent_claimants_take_each_report_once,
                tracker_concurrent_replays_create_one_task,
            ]
        );
    };
}

fn link(item: &str) -> TrackerLink {
    TrackerLink {
        provider: "gitlab".into(),
        provider_entity_type: Some("issue".into()),
        external_id: format!("7/issues/{item}"),
        external_identifier: Some(format!("group/proj#{item}")),
        external_url: Some(format!("https://gitlab.example/group/proj/-/issues/{item}")),
    }
}

fn new_task(text: &str) -> NewTask {
    let draft = TaskDraft { task: text.into(), source: Some("gitlab".into()), ..TaskDraft::default() };
    NewTask::parse(draft, None).expect("a valid task")
}

async fn create(fx: &Fixture, text: &str, item: &str, delivery: &str) -> TrackerTaskCreated {
    fx.store.tracker_task_create(&new_task(text), &link(item), delivery, fx.now()).await.unwrap()
}

async fn finish(fx: &Fixture, task: swarm_domain::id::TaskId, worker: swarm_domain::id::AgentId) {
    fx.must_change(task, TaskAction::Claim { agent: worker }).await;
    fx.must_change(task, TaskAction::Start { agent: worker }).await;
    fx.must_change(task, super::complete(worker)).await;
}

pub async fn tracker_task_is_created_once_per_delivery(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let TrackerTaskCreated::Created(task) = create(&fx, "fix the crash", "12", "uuid-1").await else {
        panic!("the first delivery creates its task");
    };
    assert_eq!(fx.task(task.id).await, *task, "the task is stored as returned");
    let sync = fx.store.tracker_sync_get("gitlab", task.id).await.unwrap().expect("its link");
    assert_eq!(
        (sync.external_id.as_str(), sync.external_identifier.as_deref(), sync.entity_type.as_str()),
        ("7/issues/12", Some("group/proj#12"), "task")
    );
    assert_eq!(sync.last_delivery_id.as_deref(), Some("uuid-1"));
    assert_eq!((sync.reported_at, sync.report_attempts), (None, 0));
    assert_eq!(fx.store.tracker_sync_get("linear", task.id).await.unwrap(), None, "per provider");

    let replay = create(&fx, "fix the crash", "12", "uuid-1").await;
    assert_eq!(replay, TrackerTaskCreated::Duplicate, "a replayed delivery creates nothing");
    let (_, total) =
        fx.store.task_list(&crate::TaskFilter { limit: 10, ..Default::default() }).await.unwrap();
    assert_eq!(total, 1, "one task");

    // Another delivery about the same item is another task, listed newest first.
    let TrackerTaskCreated::Created(second) = create(&fx, "and again", "12", "uuid-2").await else {
        panic!("a new delivery creates its task");
    };
    let linked = fx.store.tracker_sync_by_external("gitlab", "7/issues/12").await.unwrap();
    assert_eq!(linked.iter().map(|s| s.task_id).collect::<Vec<_>>(), vec![second.id, task.id]);

    // A delivery that creates no task is marked once, per provider.
    assert!(fx.store.tracker_delivery_mark("gitlab", "uuid-3", fx.now()).await.unwrap());
    assert!(!fx.store.tracker_delivery_mark("gitlab", "uuid-3", fx.now()).await.unwrap());
    assert!(!fx.store.tracker_delivery_mark("gitlab", "uuid-1", fx.now()).await.unwrap(), "one set of ids");
    assert!(fx.store.tracker_delivery_mark("linear", "uuid-1", fx.now()).await.unwrap());
}

pub async fn tracker_report_is_due_once_finished_and_done_once(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.worker("worker").await;
    let TrackerTaskCreated::Created(task) = create(&fx, "work", "1", "d-1").await else { panic!("created") };
    let TrackerTaskCreated::Created(running) = create(&fx, "running", "2", "d-2").await else {
        panic!("created")
    };
    assert!(
        fx.store.tracker_report_due("gitlab", "hub-z", fx.now(), 5, 10).await.unwrap().is_empty(),
        "nothing finished"
    );
    finish(&fx, task.id, worker).await;
    fx.must_change(running.id, TaskAction::Claim { agent: worker }).await;

    let due = fx.store.tracker_report_due("gitlab", "hub-z", fx.now(), 5, 10).await.unwrap();
    assert_eq!(due.iter().map(|d| d.task.id).collect::<Vec<_>>(), vec![task.id], "finished tasks only");
    assert_eq!(due[0].sync.external_id, "7/issues/1");
    assert_eq!(due[0].task.status, swarm_domain::task::TaskStatus::Completed);
    assert!(
        fx.store.tracker_report_due("linear", "hub-z", fx.now(), 5, 10).await.unwrap().is_empty(),
        "per provider"
    );

    let now = fx.now();
    let lease = now.plus_millis(60_000);
    assert!(fx.store.tracker_report_claim("gitlab", task.id, "hub-a", lease, now).await.unwrap());
    assert!(
        !fx.store.tracker_report_claim("gitlab", task.id, "hub-b", lease, fx.now()).await.unwrap(),
        "a live lease is not taken again"
    );
    // Its holder restarted under the same name sees it and takes it back at once.
    assert_eq!(fx.store.tracker_report_due("gitlab", "hub-a", fx.now(), 5, 10).await.unwrap().len(), 1);
    assert!(fx.store.tracker_report_claim("gitlab", task.id, "hub-a", lease, fx.now()).await.unwrap());
    assert!(
        fx.store.tracker_report_due("gitlab", "hub-z", fx.now(), 5, 10).await.unwrap().is_empty(),
        "held: not due"
    );
    // A lease that ran out (its holder died before posting) is due again and taken.
    let later = lease.plus_millis(1);
    assert_eq!(fx.store.tracker_report_due("gitlab", "hub-z", later, 5, 10).await.unwrap().len(), 1);
    assert!(
        fx.store
            .tracker_report_claim("gitlab", task.id, "hub-b", later.plus_millis(60_000), later)
            .await
            .unwrap()
    );

    assert!(fx.store.tracker_report_done("gitlab", task.id, later).await.unwrap(), "done once");
    assert!(!fx.store.tracker_report_done("gitlab", task.id, later).await.unwrap(), "not twice");
    let far = later.plus_millis(3_600_000);
    assert!(
        fx.store.tracker_report_due("gitlab", "hub-z", far, 5, 10).await.unwrap().is_empty(),
        "reported: never due again"
    );
    assert!(!fx.store.tracker_report_claim("gitlab", task.id, "hub-c", far, far).await.unwrap());
    let sync = fx.store.tracker_sync_get("gitlab", task.id).await.unwrap().unwrap();
    assert_eq!(sync.reported_at, Some(later));
}

pub async fn tracker_report_failure_waits_for_its_retry(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.worker("worker").await;
    let TrackerTaskCreated::Created(task) = create(&fx, "work", "1", "d-1").await else { panic!("created") };
    finish(&fx, task.id, worker).await;
    let now = fx.now();
    assert!(
        fx.store
            .tracker_report_claim("gitlab", task.id, "hub-a", now.plus_millis(60_000), now)
            .await
            .unwrap()
    );
    assert!(
        !fx.store.tracker_report_failed("gitlab", task.id, "hub-b", "not mine", now).await.unwrap(),
        "only the holder records a failure"
    );
    let retry_at = now.plus_millis(5_000);
    assert!(
        fx.store
            .tracker_report_failed("gitlab", task.id, "hub-a", "503 from GitLab", retry_at)
            .await
            .unwrap()
    );
    let sync = fx.store.tracker_sync_get("gitlab", task.id).await.unwrap().unwrap();
    assert_eq!((sync.report_attempts, sync.report_error.as_deref()), (1, Some("503 from GitLab")));
    assert!(
        !fx.store
            .tracker_report_claim("gitlab", task.id, "hub-a", retry_at, now.plus_millis(1))
            .await
            .unwrap(),
        "a failed report waits for its retry, its last holder too"
    );
    assert!(
        fx.store
            .tracker_report_due("gitlab", "hub-z", now.plus_millis(4_999), 5, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        fx.store.tracker_report_due("gitlab", "hub-z", retry_at, 5, 10).await.unwrap().len(),
        1,
        "due at its retry"
    );
    assert!(
        fx.store.tracker_report_due("gitlab", "hub-z", retry_at, 1, 10).await.unwrap().is_empty(),
        "attempts bound it"
    );
}

pub async fn tracker_status_moves_once_per_step(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let TrackerTaskCreated::Created(task) = create(&fx, "work", "1", "d-1").await else { panic!("created") };
    let now = fx.now();
    assert!(fx.store.tracker_status_synced("gitlab", task.id, None, "started", now).await.unwrap());
    assert!(!fx.store.tracker_status_synced("gitlab", task.id, None, "started", now).await.unwrap());
    assert!(fx.store.tracker_status_synced("gitlab", task.id, Some("started"), "done", now).await.unwrap());
    assert!(!fx.store.tracker_status_synced("gitlab", task.id, Some("started"), "done", now).await.unwrap());
    let sync = fx.store.tracker_sync_get("gitlab", task.id).await.unwrap().unwrap();
    assert_eq!(sync.last_synced_status.as_deref(), Some("done"));
}

pub async fn tracker_concurrent_claimants_take_each_report_once(store: Arc<dyn Store>) {
    let fx = Arc::new(Fixture::new(store));
    let worker = fx.worker("worker").await;
    let mut tasks = Vec::new();
    for n in 0..8 {
        let created = create(&fx, &format!("work {n}"), &n.to_string(), &format!("d-{n}")).await;
        let TrackerTaskCreated::Created(task) = created else { panic!("created") };
        finish(&fx, task.id, worker).await;
        tasks.push(task.id);
    }
    let now = fx.now();
    let mut racers = Vec::new();
    for holder in ["hub-a", "hub-b", "hub-c", "hub-d"] {
        let (fx, tasks) = (fx.clone(), tasks.clone());
        racers.push(tokio::spawn(async move {
            let mut taken = Vec::new();
            for id in tasks {
                let lease = now.plus_millis(60_000);
                if fx.store.tracker_report_claim("gitlab", id, holder, lease, now).await.unwrap() {
                    taken.push(id);
                }
            }
            taken
        }));
    }
    let mut taken = Vec::new();
    for racer in racers {
        taken.extend(racer.await.unwrap());
    }
    assert_eq!(super::sorted(taken), super::sorted(tasks), "each report taken by exactly one claimant");
}

pub async fn tracker_concurrent_replays_create_one_task(store: Arc<dyn Store>) {
    let fx = Arc::new(Fixture::new(store));
    let mut racers = Vec::new();
    for _ in 0..4 {
        let fx = fx.clone();
        racers.push(tokio::spawn(async move {
            matches!(create(&fx, "one delivery", "9", "same-uuid").await, TrackerTaskCreated::Created(_))
        }));
    }
    let mut created = 0;
    for racer in racers {
        created += usize::from(racer.await.unwrap());
    }
    assert_eq!(created, 1, "one delivery, one task, however many copies arrive at once");
    let (_, total) =
        fx.store.task_list(&crate::TaskFilter { limit: 10, ..Default::default() }).await.unwrap();
    assert_eq!(total, 1);
}

pub async fn task_pull_requests_are_recorded_once_in_order(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let task = fx.pool_task("ship it").await;
    let other = fx.pool_task("other").await;
    assert!(fx.store.task_pull_requests(task.id).await.unwrap().is_empty());
    let first =
        vec!["https://github.com/o/r/pull/2".to_string(), "https://github.com/o/r/pull/1".to_string()];
    fx.store.task_pull_requests_record(task.id, &first, fx.now()).await.unwrap();
    let again = vec![
        "https://github.com/o/r/pull/1".to_string(),
        "https://gitlab.com/g/p/-/merge_requests/3".to_string(),
    ];
    fx.store.task_pull_requests_record(task.id, &again, fx.now()).await.unwrap();
    fx.store.task_pull_requests_record(task.id, &[], fx.now()).await.unwrap();
    assert_eq!(
        fx.store.task_pull_requests(task.id).await.unwrap(),
        vec![
            "https://github.com/o/r/pull/2",
            "https://github.com/o/r/pull/1",
            "https://gitlab.com/g/p/-/merge_requests/3"
        ],
        "each once, in the order first recorded"
    );
    assert!(fx.store.task_pull_requests(other.id).await.unwrap().is_empty(), "per task");
}
