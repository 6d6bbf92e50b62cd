//! Epics: their fields round-trip, names are unique, the counts follow their tasks,
//! changes are guarded, deleting keeps the tasks, and the lead's
//! `epic_progress_changed` claim reports each batch of finished tasks once.

use std::sync::Arc;

use crate::{Applied, EpicFilter, Store, StoreError};
use swarm_domain::{
    epic::{Epic, EpicDraft, EpicStatus, TaskStats},
    event::EventType,
    id::{AgentId, EpicId},
    poll::{Trigger, TriggerKind},
    task::{TaskAction, TaskDraft},
    time::Timestamp,
};

use super::{Fixture, complete, draft, fail, of_type};

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_epics {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            epics,
            [
                an_epic_round_trips_and_its_name_is_unique,
                counts_and_progress_follow_the_tasks,
                updates_are_guarded_by_the_last_change,
                tasks_join_and_leave_and_survive_the_epic,
                the_lead_is_told_of_each_batch_of_finished_tasks_once,
            ],
            multi_thread: [two_leads_polls_report_a_batch_once]
        );
    };
}

fn new_epic(name: &str, creator: Option<AgentId>, now: Timestamp) -> Epic {
    let draft = EpicDraft {
        name: Some(name.to_string()),
        goal: Some(format!("the goal of {name}")),
        description: Some("why".into()),
        prd: Some("# PRD".into()),
        plan: Some("1. plan".into()),
        priority: Some(70),
        tags: Some(vec!["b".into(), "a".into()]),
        github_repo: Some("acme/app".into()),
        ..EpicDraft::default()
    };
    draft.create(EpicId::new_v7(), creator, now).expect("a valid epic")
}

async fn activate(fx: &Fixture, epic: &Epic) -> Epic {
    let active = EpicDraft { status: Some(EpicStatus::Active), ..EpicDraft::default() }
        .apply_to(epic, fx.now())
        .expect("valid");
    match fx.store.epic_update(&active, epic.last_updated_at).await.expect("epic_update") {
        Applied::Changed { after, .. } => after,
        other => panic!("activate: {other:?}"),
    }
}

async fn task_in(fx: &Fixture, epic: EpicId, text: &str, agent: Option<AgentId>) -> swarm_domain::task::Task {
    fx.create(TaskDraft { epic_id: Some(epic), agent_id: agent, ..draft(text) }, None).await
}

pub async fn an_epic_round_trips_and_its_name_is_unique(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let lead = fx.register("lead", true, 1).await.id;
    let epic = new_epic("checkout", Some(lead), fx.now());
    assert_eq!(fx.store.epic_create(&epic).await.unwrap(), epic);
    let read = fx.store.epic_get(epic.id).await.unwrap().expect("the epic");
    assert_eq!(read.epic, epic, "every field is kept, milliseconds included");
    assert_eq!((read.task_stats, read.progress), (TaskStats::default(), 0));

    let twin = new_epic("checkout", None, fx.now());
    assert!(matches!(fx.store.epic_create(&twin).await, Err(StoreError::Conflict(_))));
    let mut stranger = new_epic("other", None, fx.now());
    stranger.lead_agent_id = Some(AgentId::new_v7());
    assert!(matches!(fx.store.epic_create(&stranger).await, Err(StoreError::MissingReference(_))));
    assert_eq!(
        fx.store.epic_list(&EpicFilter::default()).await.unwrap().len(),
        1,
        "refusals created nothing"
    );

    let second = new_epic("search me", None, fx.now());
    fx.store.epic_create(&Epic { priority: 90, ..second.clone() }).await.unwrap();
    let all = fx.store.epic_list(&EpicFilter::default()).await.unwrap();
    let names: Vec<&str> = all.iter().map(|epic| epic.epic.name.as_str()).collect();
    assert_eq!(names, ["search me", "checkout"], "highest priority first");
    let found = |filter: EpicFilter| {
        let store = fx.store.clone();
        async move {
            store.epic_list(&filter).await.unwrap().into_iter().map(|epic| epic.epic.name).collect::<Vec<_>>()
        }
    };
    assert_eq!(
        found(EpicFilter { search: Some("SEARCH".into()), ..EpicFilter::default() }).await,
        ["search me"]
    );
    assert_eq!(
        found(EpicFilter { name: Some("checkout".into()), ..EpicFilter::default() }).await,
        ["checkout"]
    );
    assert_eq!(
        found(EpicFilter { created_by_agent_id: Some(lead), ..EpicFilter::default() }).await,
        ["checkout"]
    );
    assert_eq!(
        found(EpicFilter { status: Some(EpicStatus::Active), ..EpicFilter::default() }).await.len(),
        0
    );
    assert_eq!(found(EpicFilter { limit: 1, ..EpicFilter::default() }).await, ["search me"]);
}

pub async fn counts_and_progress_follow_the_tasks(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.register("worker", false, 3).await.id;
    let epic = fx.store.epic_create(&new_epic("e", None, fx.now())).await.unwrap();
    let done = task_in(&fx, epic.id, "done", Some(worker)).await;
    let broken = task_in(&fx, epic.id, "broken", Some(worker)).await;
    let running = task_in(&fx, epic.id, "running", Some(worker)).await;
    task_in(&fx, epic.id, "waiting", None).await;
    fx.create(draft("outside the epic"), None).await;
    for task in [&done, &broken, &running] {
        fx.must_change(task.id, TaskAction::Start { agent: worker }).await;
    }
    fx.must_change(done.id, complete(worker)).await;
    fx.must_change(broken.id, fail(worker)).await;

    let (read, tasks) = fx.store.epic_detail(epic.id).await.unwrap().expect("the epic");
    let expected = TaskStats { total: 4, completed: 1, failed: 1, in_progress: 1, pending: 0 };
    assert_eq!(read.task_stats, expected);
    assert_eq!(read.progress, 25);
    assert_eq!(tasks.len(), 4, "the epic's tasks, not the other one");
    assert!(tasks.iter().all(|task| task.epic_id == Some(epic.id)));
    let listed = fx.store.epic_list(&EpicFilter::default()).await.unwrap();
    assert_eq!(listed[0].task_stats, expected, "a list shows the same counts");
    assert!(fx.store.epic_detail(EpicId::new_v7()).await.unwrap().is_none());
}

pub async fn updates_are_guarded_by_the_last_change(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let epic = fx.store.epic_create(&new_epic("e", None, fx.now())).await.unwrap();
    let active = activate(&fx, &epic).await;
    assert_eq!(active.status, EpicStatus::Active);
    assert!(active.started_at.is_some());
    assert_eq!(fx.store.epic_get(epic.id).await.unwrap().unwrap().epic, active);

    // A change prepared from the first read, after another change: refused, unchanged.
    let stale =
        EpicDraft { name: Some("renamed".into()), ..EpicDraft::default() }.apply_to(&epic, fx.now()).unwrap();
    match fx.store.epic_update(&stale, epic.last_updated_at).await.unwrap() {
        Applied::Refused { current } => assert_eq!(current, active),
        other => panic!("a stale update: {other:?}"),
    }
    let other = fx.store.epic_create(&new_epic("taken", None, fx.now())).await.unwrap();
    let clash = EpicDraft { name: Some(other.name.clone()), ..EpicDraft::default() }
        .apply_to(&active, fx.now())
        .unwrap();
    assert!(matches!(
        fx.store.epic_update(&clash, active.last_updated_at).await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(fx.store.epic_get(epic.id).await.unwrap().unwrap().epic, active);
    let gone = new_epic("gone", None, fx.now());
    assert_eq!(fx.store.epic_update(&gone, gone.last_updated_at).await.unwrap(), Applied::NotFound);
}

pub async fn tasks_join_and_leave_and_survive_the_epic(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let lead = fx.register("lead", true, 1).await.id;
    let epic = fx.store.epic_create(&new_epic("e", None, fx.now())).await.unwrap();
    let task = fx.create(draft("loose"), None).await;

    let Applied::Changed { before, after } =
        fx.store.task_set_epic(task.id, Some(epic.id), Some(lead), fx.now()).await.unwrap()
    else {
        panic!("joined");
    };
    assert_eq!((before.epic_id, after.epic_id), (None, Some(epic.id)));
    assert_eq!(fx.task(task.id).await, after);
    let again = fx.store.task_set_epic(task.id, Some(epic.id), Some(lead), fx.now()).await.unwrap();
    assert_eq!(again, Applied::Refused { current: after.clone() }, "already in it: nothing to do");
    let logged = of_type(&fx.task_events(task.id).await, EventType::TaskEpicChanged).len();
    assert_eq!(logged, 1, "the refusal logged nothing");

    let missing = EpicId::new_v7();
    assert!(matches!(
        fx.store.task_set_epic(task.id, Some(missing), None, fx.now()).await,
        Err(StoreError::MissingReference(_))
    ));
    let unknown_task = swarm_domain::id::TaskId::new_v7();
    assert_eq!(
        fx.store.task_set_epic(unknown_task, Some(epic.id), None, fx.now()).await.unwrap(),
        Applied::NotFound
    );
    let orphan = TaskDraft { epic_id: Some(missing), ..draft("in no real epic") };
    let new = swarm_domain::task::NewTask::parse(orphan, None).unwrap();
    assert!(matches!(fx.store.task_create(&new, fx.now()).await, Err(StoreError::MissingReference(_))));

    let member = task_in(&fx, epic.id, "member", None).await;
    assert!(fx.store.epic_delete(epic.id, fx.now()).await.unwrap());
    assert!(fx.store.epic_get(epic.id).await.unwrap().is_none());
    assert_eq!(fx.task(member.id).await.epic_id, None, "the task stays, without an epic");
    assert_eq!(fx.task(task.id).await.epic_id, None);
    assert!(!fx.store.epic_delete(epic.id, fx.now()).await.unwrap(), "deleted once");
}

async fn lead_claims(fx: &Fixture, lead: AgentId) -> Option<Trigger> {
    let now = fx.now();
    let kinds = [TriggerKind::EpicProgressChanged];
    fx.store.poll_claim(lead, &kinds, now, now.plus_millis(60_000)).await.expect("poll_claim").map(|(_, t)| t)
}

async fn waiting(fx: &Fixture, lead: AgentId) -> bool {
    let view = fx.store.poll_view(lead).await.unwrap().expect("the lead");
    view.waiting.contains(&TriggerKind::EpicProgressChanged)
}

pub async fn the_lead_is_told_of_each_batch_of_finished_tasks_once(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let lead = fx.register("lead", true, 1).await.id;
    let worker = fx.register("worker", false, 3).await.id;
    let epic = fx.store.epic_create(&new_epic("e", None, fx.now())).await.unwrap();
    let first = task_in(&fx, epic.id, "first", Some(worker)).await;
    let second = task_in(&fx, epic.id, "second", Some(worker)).await;
    let third = task_in(&fx, epic.id, "third", Some(worker)).await;
    for task in [&first, &second, &third] {
        fx.must_change(task.id, TaskAction::Start { agent: worker }).await;
    }
    fx.must_change(first.id, complete(worker)).await;

    // A draft epic's progress is not reported (the reference reports active ones).
    assert!(!waiting(&fx, lead).await);
    assert_eq!(lead_claims(&fx, lead).await, None);
    activate(&fx, &epic).await;
    assert!(waiting(&fx, lead).await);
    let Some(Trigger::EpicProgressChanged { count, epics }) = lead_claims(&fx, lead).await else {
        panic!("the finished task is reported");
    };
    assert_eq!(count, 1);
    assert_eq!(epics[0].epic.epic.id, epic.id);
    assert_eq!((epics[0].epic.progress, epics[0].epic.task_stats.completed), (33, 1));
    let reported: Vec<_> = epics[0].finished_tasks.iter().map(|task| task.id).collect();
    assert_eq!(reported, [first.id]);
    // Told once: nothing more until another task finishes.
    assert!(!waiting(&fx, lead).await);
    assert_eq!(lead_claims(&fx, lead).await, None);

    // Two finishes make one batch; a change that finishes nothing is no news.
    fx.must_change(third.id, TaskAction::Pause { agent: worker }).await;
    assert_eq!(lead_claims(&fx, lead).await, None);
    fx.must_change(second.id, fail(worker)).await;
    fx.must_change(third.id, TaskAction::Resume { agent: worker }).await;
    fx.must_change(third.id, complete(worker)).await;
    let Some(Trigger::EpicProgressChanged { epics, .. }) = lead_claims(&fx, lead).await else {
        panic!("the second batch is reported");
    };
    let stats = epics[0].epic.task_stats;
    assert_eq!((stats.completed, stats.failed, epics[0].epic.progress), (2, 1, 67));
    let reported: Vec<_> = epics[0].finished_tasks.iter().map(|task| task.id).collect();
    assert_eq!(reported, [third.id, second.id], "the batch's tasks, newest first");
    assert_eq!(lead_claims(&fx, lead).await, None);
}

pub async fn two_leads_polls_report_a_batch_once(store: Arc<dyn Store>) {
    let fx = Arc::new(Fixture::new(store));
    let lead = fx.register("lead", true, 1).await.id;
    let worker = fx.register("worker", false, 1).await.id;
    let epic = fx.store.epic_create(&new_epic("e", None, fx.now())).await.unwrap();
    activate(&fx, &epic).await;
    let task = task_in(&fx, epic.id, "t", Some(worker)).await;
    fx.must_change(task.id, TaskAction::Start { agent: worker }).await;
    fx.must_change(task.id, complete(worker)).await;
    let polls: Vec<_> = (0..8)
        .map(|_| {
            let fx = Arc::clone(&fx);
            tokio::spawn(async move { lead_claims(&fx, lead).await })
        })
        .collect();
    let mut reported = 0;
    for poll in polls {
        if poll.await.unwrap().is_some() {
            reported += 1;
        }
    }
    assert_eq!(reported, 1, "one of the concurrent polls got the batch");
}
