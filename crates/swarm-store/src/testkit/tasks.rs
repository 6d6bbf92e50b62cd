//! Creating tasks and reading them back: initial statuses, every field, the events of
//! creation, missing references, dependencies.

use std::sync::Arc;

use crate::{Applied, Store, StoreError, TaskFilter, TaskWaiters};
use swarm_domain::{
    event::EventType,
    id::{AgentId, TaskId},
    mail::{MailDelivery, MailDraft, MailPriority, MailType, NewMail},
    task::{FinishOutcome, NewTask, PRIORITY_DEFAULT, TaskAction, TaskDraft, TaskOrigin, TaskStatus},
};

use super::{Fixture, cancel, complete, draft, fail, of_type, sorted};

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_tasks {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            tasks,
            [
                create_round_trips_every_field,
                create_picks_the_initial_status,
                odd_text_and_tags_round_trip,
                create_logs_created_and_offered,
                create_refuses_missing_references,
                unknown_task_reads_as_none,
                unfinished_dependencies_are_those_not_completed,
                a_finish_may_bring_its_waiters_along,
                a_finish_tells_whether_its_assignee_left_mail_pending,
                text_changes_only_before_anyone_takes_the_task_up,
                priority_changes_until_the_task_is_finished,
            ],
            multi_thread: []
        );
    };
}

pub async fn create_round_trips_every_field(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let creator = fx.worker("creator").await;
    let assignee = fx.worker("assignee").await;
    let first_dep = fx.pool_task("dependency one").await;
    let second_dep = fx.pool_task("dependency two").await;
    let origin = TaskOrigin {
        slack_channel_id: Some("C123".into()),
        slack_thread_ts: Some("1700000000.000100".into()),
        slack_user_id: Some("U42".into()),
        mention_message_id: Some("m-1".into()),
        mention_channel_id: Some("ch-1".into()),
        github_repo: Some("swarm/swarm".into()),
        github_event_type: Some("issue_comment".into()),
        github_number: Some(17),
        github_comment_id: Some(9_000_000_001),
        github_author: Some("octocat".into()),
        github_url: Some("https://github.com/swarm/swarm/issues/17".into()),
        trigger_name: Some("nightly".into()),
        session_key: Some("pr-17".into()),
        model: Some("claude-opus-4-5".into()),
    };
    let new = NewTask::parse(
        TaskDraft {
            task: "  Write the conformance suite  ".into(),
            agent_id: Some(assignee),
            source: Some("github".into()),
            task_type: Some("testing".into()),
            tags: vec!["zeta".into(), "alpha".into(), "mid".into()],
            priority: Some(77),
            // Deliberately not in creation order: the order given is kept.
            depends_on: vec![second_dep.id, first_dep.id],
            origin: origin.clone(),
            ..TaskDraft::default()
        },
        Some(creator),
    )
    .unwrap();
    let created_at = fx.now();
    let task = fx.store.task_create(&new, created_at).await.unwrap();

    assert_eq!(task.id, new.id);
    assert_eq!(task.task, "Write the conformance suite");
    assert_eq!(task.status, TaskStatus::Pending);
    assert_eq!(task.agent_id, Some(assignee));
    assert_eq!(task.creator_agent_id, Some(creator));
    assert_eq!(task.source, "github");
    assert_eq!(task.task_type.as_deref(), Some("testing"));
    assert_eq!(task.tags, ["zeta", "alpha", "mid"]);
    assert_eq!(task.priority, 77);
    assert_eq!(task.depends_on, [second_dep.id, first_dep.id]);
    assert_eq!(task.offered_to, None);
    assert_eq!(task.offered_at, None);
    assert_eq!(task.accepted_at, None);
    assert_eq!(task.rejection_reason, None);
    assert_eq!(task.created_at, created_at, "timestamps keep their milliseconds");
    assert_eq!(task.last_updated_at, created_at);
    assert_eq!(task.finished_at, None);
    assert_eq!(task.failure_reason, None);
    assert_eq!(task.output, None);
    assert_eq!(task.progress, None);
    assert_eq!(task.notified_at, None);
    assert_eq!(task.origin, origin);
    assert_eq!(fx.task(task.id).await, task, "task_get must return what task_create did");

    let plain = fx.pool_task("defaults").await;
    assert_eq!(plain.priority, PRIORITY_DEFAULT);
    assert_eq!(plain.source, "api");
    assert!(plain.tags.is_empty());
    assert!(plain.depends_on.is_empty());
    assert_eq!(plain.origin, TaskOrigin::default());
    assert_eq!(fx.task(plain.id).await, plain);
}

pub async fn odd_text_and_tags_round_trip(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let text = "Fix «ünïcode» 日本語 🚀\n\tline two with 'quotes' and \"doubles\" and \\ and %_";
    let tags: Vec<String> =
        ["a,b", "with space", "quote\"d", "percent%", "ünïcode", "[json]", "{}"].map(String::from).into();
    let task = fx.create(TaskDraft { agent_id: Some(agent), tags: tags.clone(), ..draft(text) }, None).await;
    assert_eq!(task.task, text.trim());
    assert_eq!(task.tags, tags);
    assert_eq!(fx.task(task.id).await, task);
    let plain = fx.create(TaskDraft { tags: vec!["a".into(), "b".into()], ..draft("plain") }, None).await;

    for tag in &tags {
        let filter = TaskFilter { tags: vec![tag.clone()], limit: 100, ..TaskFilter::default() };
        let (found, total) = fx.store.task_list(&filter).await.unwrap();
        assert_eq!((found, total), (vec![task.clone()], 1), "tag {tag:?}");
    }
    let filter = TaskFilter { tags: vec!["a".into()], limit: 100, ..TaskFilter::default() };
    let (found, _) = fx.store.task_list(&filter).await.unwrap();
    assert_eq!(found, [plain], "tag \"a\" is not part of \"a,b\"");

    fx.must_change(task.id, TaskAction::Start { agent }).await;
    let output = "Résumé: ✅ 12 tests\n{\"json\": [1, 2]}".to_string();
    let finish = TaskAction::Finish {
        assignee: Some(agent),
        outcome: FinishOutcome::Completed { output: Some(output.clone()) },
    };
    let done = fx.must_change(task.id, finish).await;
    assert_eq!(done.output, Some(output));
    assert_eq!(fx.task(task.id).await, done);
}

pub async fn create_picks_the_initial_status(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;

    let pool = fx.pool_task("pool").await;
    assert_eq!(pool.status, TaskStatus::Unassigned);
    assert_eq!(pool.agent_id, None);

    let assigned = fx.assigned_task("assigned", agent).await;
    assert_eq!(assigned.status, TaskStatus::Pending);
    assert_eq!(assigned.agent_id, Some(agent));

    let offered_at = fx.now();
    let new = NewTask::parse(TaskDraft { offered_to: Some(agent), ..draft("offered") }, None).unwrap();
    let offered = fx.store.task_create(&new, offered_at).await.unwrap();
    assert_eq!(offered.status, TaskStatus::Offered);
    assert_eq!(offered.offered_to, Some(agent));
    assert_eq!(offered.offered_at, Some(offered_at));
    assert_eq!(offered.agent_id, None);

    let backlog = fx.create(TaskDraft { backlog: true, ..draft("later") }, None).await;
    assert_eq!(backlog.status, TaskStatus::Backlog);

    for task in [pool, assigned, offered, backlog] {
        assert_eq!(fx.task(task.id).await, task);
    }
}

pub async fn create_logs_created_and_offered(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let creator = fx.worker("creator").await;
    let agent = fx.worker("worker-1").await;

    let pool = fx.create(draft("pool"), Some(creator)).await;
    let events = fx.task_events(pool.id).await;
    assert_eq!(of_type(&events, EventType::TaskCreated).len(), 1, "{events:?}");
    assert!(of_type(&events, EventType::TaskOffered).is_empty(), "{events:?}");
    assert!(events.iter().all(|event| event.task_id == Some(pool.id)));
    assert_eq!(of_type(&events, EventType::TaskCreated)[0].created_at, pool.created_at);

    let offered = fx.create(TaskDraft { offered_to: Some(agent), ..draft("offered") }, Some(creator)).await;
    let events = fx.task_events(offered.id).await;
    assert_eq!(of_type(&events, EventType::TaskCreated).len(), 1, "{events:?}");
    assert_eq!(of_type(&events, EventType::TaskOffered).len(), 1, "{events:?}");
    assert!(events.iter().all(|event| event.task_id == Some(offered.id)));
}

pub async fn create_refuses_missing_references(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let ghost = AgentId::new_v7();
    let drafts = [
        ("agentId", TaskDraft { agent_id: Some(ghost), ..draft("assigned to a ghost") }),
        ("offeredTo", TaskDraft { offered_to: Some(ghost), ..draft("offered to a ghost") }),
        ("dependsOn", TaskDraft { depends_on: vec![TaskId::new_v7()], ..draft("depends on a ghost") }),
    ];
    for (field, draft) in drafts {
        let new = NewTask::parse(draft, None).unwrap();
        let res = fx.store.task_create(&new, fx.now()).await;
        assert!(
            matches!(res, Err(StoreError::MissingReference(_))),
            "{field} naming nothing: expected MissingReference, got {res:?}"
        );
        assert_eq!(fx.store.task_get(new.id).await.unwrap(), None, "{field}: nothing stored");
        assert!(fx.task_events(new.id).await.is_empty(), "{field}: nothing logged");
    }
    let filter = TaskFilter { limit: 100, ..TaskFilter::default() };
    assert_eq!(fx.store.task_list(&filter).await.unwrap().1, 0);
}

pub async fn unknown_task_reads_as_none(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    fx.pool_task("something").await;
    assert_eq!(fx.store.task_get(TaskId::new_v7()).await.unwrap(), None);
}

pub async fn unfinished_dependencies_are_those_not_completed(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.register("worker-1", false, 5).await.id;
    let completed = fx.completed_task("completed", agent).await;
    let failed = fx.started_task("failed", agent).await;
    fx.must_change(failed.id, fail(agent)).await;
    let cancelled = fx.pool_task("cancelled").await;
    fx.must_change(cancelled.id, cancel()).await;
    let waiting = fx.pool_task("still in the pool").await;

    let deps = vec![completed.id, failed.id, cancelled.id, waiting.id];
    let task = fx.create(TaskDraft { depends_on: deps, ..draft("dependent") }, None).await;
    let unfinished = fx.store.task_unfinished_dependencies(task.id).await.unwrap();
    assert_eq!(sorted(unfinished), sorted(vec![failed.id, cancelled.id, waiting.id]));

    let free = fx.pool_task("no dependencies").await;
    assert!(fx.store.task_unfinished_dependencies(free.id).await.unwrap().is_empty());

    // Who waits for a task: the dependent's dependencies have a dependent; the dependent
    // and an unknown task have none, and no session awaits any of them.
    for dependency in [completed.id, waiting.id] {
        let waiters = fx.store.task_waiters(dependency).await.unwrap();
        assert_eq!(
            waiters,
            TaskWaiters { has_dependents: true, awaiting_agent: None, assignee_mail_pending: false }
        );
    }
    for lone in [task.id, free.id, TaskId::new_v7()] {
        assert_eq!(fx.store.task_waiters(lone).await.unwrap(), TaskWaiters::default());
    }
}

/// The waiters a store brings along with a change are those `task_waiters` reads after
/// it, and only a change that finishes a task brings any.
pub async fn a_finish_may_bring_its_waiters_along(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.register("worker-1", false, 5).await.id;
    let depended_on = fx.started_task("depended on", agent).await;
    fx.create(TaskDraft { depends_on: vec![depended_on.id], ..draft("dependent") }, None).await;
    let lone = fx.started_task("lone", agent).await;

    for (task, expected) in [
        (
            depended_on.id,
            TaskWaiters { has_dependents: true, awaiting_agent: None, assignee_mail_pending: false },
        ),
        (lone.id, TaskWaiters::default()),
    ] {
        let pause = TaskAction::Pause { agent }.change();
        let (paused, waiters) =
            fx.store.task_apply_with_waiters(task, &pause, Some(agent), fx.now()).await.unwrap();
        assert!(matches!(paused, Applied::Changed { .. }), "pause: {paused:?}");
        assert_eq!(waiters, None, "a change that finishes nothing brings no waiters");
        let resume = TaskAction::Resume { agent }.change();
        fx.store.task_apply(task, &resume, Some(agent), fx.now()).await.unwrap();

        let finish = complete(agent).change();
        let (finished, waiters) =
            fx.store.task_apply_with_waiters(task, &finish, Some(agent), fx.now()).await.unwrap();
        let Applied::Changed { after, .. } = finished else { panic!("finish: {finished:?}") };
        assert_eq!(after.status, TaskStatus::Completed);
        assert_eq!(fx.store.task_waiters(task).await.unwrap(), expected);
        assert_eq!(waiters, Some(expected), "a finish brings its waiters, read in its own transaction");
    }
}

/// `assignee_mail_pending` is the assignee's unread mail or its mail awaiting a
/// response, nobody else's, read as it stands: in the finish's own transaction and by
/// `task_waiters` after it.
pub async fn a_finish_tells_whether_its_assignee_left_mail_pending(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.register("worker", false, 5).await.id;
    let lead = fx.register("lead", true, 1).await.id;
    let bystander = fx.worker("bystander").await;
    let mail = |from, to, subject: &str, awaiting_response| {
        let draft = MailDraft {
            mail_type: MailType::Question,
            subject: subject.into(),
            body: "body".into(),
            priority: MailPriority::Normal,
            awaiting_response,
            in_reply_to: None,
        };
        NewMail::parse(from, to, draft).expect("valid mail")
    };
    let finish = |task: TaskId| {
        let fx = &fx;
        async move {
            let (finished, waiters) = fx
                .store
                .task_apply_with_waiters(task, &complete(worker).change(), Some(worker), fx.now())
                .await
                .unwrap();
            assert!(matches!(finished, Applied::Changed { .. }), "finish: {finished:?}");
            let waiters = waiters.expect("a finish brings its waiters");
            assert_eq!(fx.store.task_waiters(task).await.unwrap(), waiters);
            waiters.assignee_mail_pending
        }
    };

    // Mail of others, and mail it sent that waits for nothing, is not its pending mail.
    fx.store.mail_send(&mail(lead, bystander, "for someone else", true), fx.now()).await.unwrap();
    fx.store.mail_send(&mail(worker, lead, "fyi", false), fx.now()).await.unwrap();
    let task = fx.started_task("nothing pending", worker).await;
    assert!(!finish(task.id).await, "no mail of its own is pending");

    // Unread mail to it is pending until it is read.
    let unread = fx.store.mail_send(&mail(lead, worker, "read me", false), fx.now()).await.unwrap();
    let task = fx.started_task("unread mail", worker).await;
    assert!(finish(task.id).await, "unread mail to the assignee is pending");
    let all = MailDelivery { ids: vec![unread.id], priorities: Vec::new(), include_waking: true, limit: 20 };
    assert_eq!(fx.store.mail_deliver(worker, &all, fx.now()).await.unwrap().len(), 1);
    assert!(!fx.store.task_waiters(task.id).await.unwrap().assignee_mail_pending, "read, it is not");

    // Mail it sent that awaits a response is pending until answered.
    let question = fx.store.mail_send(&mail(worker, lead, "which branch?", true), fx.now()).await.unwrap();
    let task = fx.started_task("waiting for an answer", worker).await;
    assert!(finish(task.id).await, "mail awaiting a response is pending");
    let mut answer = mail(lead, worker, "Re: which branch?", false);
    answer.mail_type = MailType::Response;
    answer.in_reply_to = Some(question.id);
    fx.store.mail_send(&answer, fx.now()).await.unwrap();
    let delivery = MailDelivery { ids: Vec::new(), priorities: Vec::new(), include_waking: true, limit: 20 };
    fx.store.mail_deliver(worker, &delivery, fx.now()).await.unwrap();
    assert!(!fx.store.task_waiters(task.id).await.unwrap().assignee_mail_pending, "answered and read");

    // A pool task nobody holds has no assignee to have mail.
    let pool = fx.pool_task("nobody's").await;
    assert!(!fx.store.task_waiters(pool.id).await.unwrap().assignee_mail_pending);
}

pub async fn text_changes_only_before_anyone_takes_the_task_up(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.register("worker", false, 5).await.id;
    let editable = [
        fx.create(TaskDraft { backlog: true, ..draft("later") }, None).await,
        fx.pool_task("pool").await,
        fx.offered_task("offer", worker).await,
        fx.assigned_task("assigned", worker).await,
    ];
    for task in &editable {
        let at = fx.now();
        let applied = fx.store.task_edit_text(task.id, "new words", Some(worker), at).await.unwrap();
        let crate::Applied::Changed { before, after } = applied else {
            panic!("{} tasks can be edited: {applied:?}", task.status);
        };
        assert_eq!((before.task.as_str(), after.task.as_str()), (task.task.as_str(), "new words"));
        assert_eq!((after.status, after.last_updated_at), (task.status, at), "only the text changes");
        let events = fx.task_events(task.id).await;
        assert_eq!(of_type(&events, EventType::TaskEdited).len(), 1);
    }

    let started = fx.started_task("started", worker).await;
    let done = fx.completed_task("done", worker).await;
    for task in [started, done] {
        let applied = fx.store.task_edit_text(task.id, "rewritten", None, fx.now()).await.unwrap();
        assert_eq!(applied, crate::Applied::Refused { current: task.clone() }, "{}", task.status);
        assert_eq!(fx.task(task.id).await, task, "a refused edit changes nothing");
    }
    let missing = fx.store.task_edit_text(TaskId::new_v7(), "x", None, fx.now()).await.unwrap();
    assert_eq!(missing, crate::Applied::NotFound);
}

pub async fn priority_changes_until_the_task_is_finished(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.register("worker", false, 5).await.id;
    let open = [
        fx.create(TaskDraft { backlog: true, ..draft("later") }, None).await,
        fx.pool_task("pool").await,
        fx.offered_task("offer", worker).await,
        fx.started_task("started", worker).await,
    ];
    for task in &open {
        let at = fx.now();
        let applied = fx.store.task_set_priority(task.id, 90, None, at).await.unwrap();
        let crate::Applied::Changed { before, after } = applied else {
            panic!("a {} task's priority can change: {applied:?}", task.status);
        };
        assert_eq!((before.priority, after.priority), (task.priority, 90));
        assert_eq!(
            (after.status, after.task.as_str()),
            (task.status, task.task.as_str()),
            "only the priority"
        );
        let events = fx.task_events(task.id).await;
        let edited = of_type(&events, EventType::TaskEdited);
        assert_eq!(edited.len(), 1);
        assert_eq!(edited[0].new_value.as_deref(), Some("90"));
    }

    let done = fx.completed_task("done", worker).await;
    let applied = fx.store.task_set_priority(done.id, 10, None, fx.now()).await.unwrap();
    assert_eq!(applied, crate::Applied::Refused { current: done.clone() });
    assert_eq!(fx.task(done.id).await, done, "a refused change changes nothing");
    let missing = fx.store.task_set_priority(TaskId::new_v7(), 10, None, fx.now()).await.unwrap();
    assert_eq!(missing, crate::Applied::NotFound);
}
