//! Reading many rows: task pages and filters, the event log, session logs and costs,
//! stats and per-agent work counts.

use std::sync::Arc;

use crate::{Applied, EventFilter, SessionCostFilter, Store, TaskFilter};
use swarm_domain::{
    event::EventType,
    id::TaskId,
    session::{NewSessionCost, NewSessionLogs},
    stats::{AgentCounts, Stats, TaskCounts, WorkCounts},
    task::{TaskAction, TaskDraft, TaskStatus},
};

use super::{Fixture, cancel, complete, draft, fail};

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_lists {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            lists,
            [
                task_list_pages_newest_first,
                task_list_filters,
                task_list_search_is_a_literal_substring,
                event_list_newest_first_and_filtered,
                session_logs_in_order,
                session_costs_newest_first_and_filtered,
                stats_count_every_status,
                work_counts_of_an_agent,
            ],
            multi_thread: []
        );
    };
}

/// The ids of a page, in order, and the total.
async fn page(fx: &Fixture, filter: TaskFilter) -> (Vec<TaskId>, i64) {
    let (tasks, total) = fx.store.task_list(&filter).await.expect("task_list");
    (tasks.into_iter().map(|task| task.id).collect(), total)
}

fn all() -> TaskFilter {
    TaskFilter { limit: 100, ..TaskFilter::default() }
}

pub async fn task_list_pages_newest_first(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(fx.pool_task(&format!("task {n}")).await.id);
    }
    ids.reverse(); // newest first

    assert_eq!(page(&fx, all()).await, (ids.clone(), 5));
    let at = |offset: i64| TaskFilter { limit: 2, offset, ..TaskFilter::default() };
    assert_eq!(page(&fx, at(0)).await, (ids[0..2].to_vec(), 5));
    assert_eq!(page(&fx, at(2)).await, (ids[2..4].to_vec(), 5));
    assert_eq!(page(&fx, at(4)).await, (ids[4..5].to_vec(), 5));
    assert_eq!(page(&fx, at(5)).await, (vec![], 5));

    let (tasks, _) = fx.store.task_list(&all()).await.unwrap();
    for task in tasks {
        assert_eq!(fx.task(task.id).await, task, "listed rows are whole tasks");
    }
}

pub async fn task_list_filters(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let creator = fx.worker("creator").await;
    let worker_a = fx.register("worker-a", false, 5).await.id;
    let worker_b = fx.worker("worker-b").await;
    let tags = |tags: &[&str]| tags.iter().map(|tag| tag.to_string()).collect::<Vec<_>>();

    let pool = fx
        .create(
            TaskDraft { tags: tags(&["backend", "urgent"]), ..draft("Fix the LOGIN page") },
            Some(creator),
        )
        .await;
    let assigned = fx
        .create(
            TaskDraft {
                agent_id: Some(worker_a),
                source: Some("slack".into()),
                task_type: Some("bug".into()),
                tags: tags(&["backend"]),
                ..draft("Write docs for login")
            },
            None,
        )
        .await;
    let offered = fx
        .create(
            TaskDraft { offered_to: Some(worker_b), tags: tags(&["urgent"]), ..draft("Review") },
            Some(creator),
        )
        .await;
    let backlog = fx.create(TaskDraft { backlog: true, ..draft("Someday") }, None).await;
    let done = fx.started_task("Ship it", worker_a).await;
    let finished_at = fx.now();
    let res = fx.apply_at(done.id, complete(worker_a), finished_at).await;
    assert!(matches!(res, Applied::Changed { .. }), "{res:?}");

    let check = async |filter: TaskFilter, expected: &[TaskId], what: &str| {
        let filter = TaskFilter { limit: 100, ..filter };
        let (ids, total) = page(&fx, filter).await;
        assert_eq!(ids, expected, "{what}");
        assert_eq!(total, expected.len() as i64, "{what}: total");
    };
    check(TaskFilter::default(), &[done.id, backlog.id, offered.id, assigned.id, pool.id], "all").await;
    let statuses = vec![TaskStatus::Pending, TaskStatus::Offered, TaskStatus::Completed];
    check(TaskFilter { statuses, ..TaskFilter::default() }, &[done.id, offered.id, assigned.id], "statuses")
        .await;
    let statuses = vec![TaskStatus::Backlog];
    check(TaskFilter { statuses, ..TaskFilter::default() }, &[backlog.id], "backlog").await;
    check(TaskFilter { agent_id: Some(worker_a), ..TaskFilter::default() }, &[done.id, assigned.id], "agent")
        .await;
    check(
        TaskFilter { creator_agent_id: Some(creator), ..TaskFilter::default() },
        &[offered.id, pool.id],
        "creator",
    )
    .await;
    check(TaskFilter { offered_to: Some(worker_b), ..TaskFilter::default() }, &[offered.id], "offered to")
        .await;
    check(TaskFilter { source: Some("slack".into()), ..TaskFilter::default() }, &[assigned.id], "source")
        .await;
    check(TaskFilter { task_type: Some("bug".into()), ..TaskFilter::default() }, &[assigned.id], "type")
        .await;
    check(
        TaskFilter { tags: tags(&["backend"]), ..TaskFilter::default() },
        &[assigned.id, pool.id],
        "one tag",
    )
    .await;
    check(TaskFilter { tags: tags(&["urgent", "backend"]), ..TaskFilter::default() }, &[pool.id], "all tags")
        .await;
    check(TaskFilter { tags: tags(&["frontend"]), ..TaskFilter::default() }, &[], "unknown tag").await;
    check(
        TaskFilter { search: Some("login".into()), ..TaskFilter::default() },
        &[assigned.id, pool.id],
        "search ignores case",
    )
    .await;
    check(TaskFilter { search: Some("SHIP".into()), ..TaskFilter::default() }, &[done.id], "search upper")
        .await;
    check(
        TaskFilter { finished_since: Some(finished_at), ..TaskFilter::default() },
        &[done.id],
        "finished since (inclusive)",
    )
    .await;
    check(
        TaskFilter { finished_since: Some(finished_at.plus_millis(1)), ..TaskFilter::default() },
        &[],
        "finished since, later",
    )
    .await;
    check(
        TaskFilter {
            statuses: vec![TaskStatus::Unassigned, TaskStatus::Offered],
            tags: tags(&["urgent"]),
            creator_agent_id: Some(creator),
            ..TaskFilter::default()
        },
        &[offered.id, pool.id],
        "combined",
    )
    .await;
    // The total counts every match, not the page.
    let filter = TaskFilter { agent_id: Some(worker_a), limit: 1, ..TaskFilter::default() };
    assert_eq!(page(&fx, filter).await, (vec![done.id], 2));

    // Ready: every dependency completed. `waiting` depends on the unfinished `pool` task.
    let after_done = fx.create(TaskDraft { depends_on: vec![done.id], ..draft("After done") }, None).await;
    let waiting =
        fx.create(TaskDraft { depends_on: vec![done.id, pool.id], ..draft("After both") }, None).await;
    let ready =
        TaskFilter { statuses: vec![TaskStatus::Unassigned], ready_only: true, ..TaskFilter::default() };
    check(ready, &[after_done.id, pool.id], "ready only").await;
    let unready = TaskFilter { statuses: vec![TaskStatus::Unassigned], ..TaskFilter::default() };
    check(unready, &[waiting.id, after_done.id, pool.id], "not only ready").await;
}

pub async fn task_list_search_is_a_literal_substring(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let percent = fx.pool_task("Reach 100% coverage").await.id;
    let thousand = fx.pool_task("Count 1000 items").await.id;
    let underscore = fx.pool_task("Rename user_id").await.id;
    let letter = fx.pool_task("Rename userXid").await.id;
    let quote = fx.pool_task("Handle O'Brien's name").await.id;
    let backslash = fx.pool_task(r"Clean C:\Temp\new folder").await.id;
    let search = async |text: &str| {
        let filter = TaskFilter { search: Some(text.into()), ..all() };
        page(&fx, filter).await.0
    };
    assert_eq!(search("100%").await, [percent], "% is not a wildcard");
    assert_eq!(search("user_id").await, [underscore], "_ is not a wildcard");
    assert_eq!(search("o'brien").await, [quote]);
    assert_eq!(search("1000").await, [thousand]);
    assert_eq!(search(r"c:\temp\").await, [backslash], "a backslash is literal");
    assert_eq!(search(r"\").await, [backslash]);
    assert_eq!(search("rename user").await, [letter, underscore]);
    assert_eq!(search("nothing like this").await, []);
}

pub async fn event_list_newest_first_and_filtered(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let other = fx.worker("worker-2").await;
    let task = fx.pool_task("first").await;
    fx.must_change(task.id, TaskAction::Claim { agent }).await;
    fx.must_change(task.id, TaskAction::Start { agent }).await;
    let other_task = fx.assigned_task("second", other).await;
    fx.must_change(other_task.id, TaskAction::Start { agent: other }).await;
    let finished = fx.must_change(task.id, complete(agent)).await;

    let everything = EventFilter { limit: 1000, ..EventFilter::default() };
    let events = fx.store.event_list(&everything).await.unwrap();
    assert!(events.len() >= 10, "{events:?}");
    assert!(
        events.windows(2).all(|pair| pair[0].created_at >= pair[1].created_at),
        "newest first: {events:?}"
    );
    assert_eq!(events[0].created_at, finished.last_updated_at, "the finish is the newest");
    let kinds: Vec<EventType> = events.iter().map(|event| event.event_type).collect();
    for kind in [EventType::AgentJoined, EventType::TaskCreated, EventType::TaskClaimed] {
        assert!(kinds.contains(&kind), "{kind:?} missing from {kinds:?}");
    }

    let limited = fx.store.event_list(&EventFilter { limit: 3, ..everything.clone() }).await.unwrap();
    assert_eq!(limited, events[..3].to_vec());

    let mine = fx.agent_events(agent).await;
    assert!(!mine.is_empty());
    assert!(mine.iter().all(|event| event.agent_id == Some(agent)), "{mine:?}");
    let expected: Vec<_> = events.iter().filter(|event| event.agent_id == Some(agent)).cloned().collect();
    assert_eq!(mine, expected);

    let of_task = fx.task_events(task.id).await;
    let expected: Vec<_> = events.iter().filter(|event| event.task_id == Some(task.id)).cloned().collect();
    assert_eq!(of_task, expected);
    assert!(of_task.iter().all(|event| event.task_id == Some(task.id)));

    let both = EventFilter { agent_id: Some(other), task_id: Some(other_task.id), limit: 1000 };
    let both = fx.store.event_list(&both).await.unwrap();
    assert!(!both.is_empty());
    assert!(both.iter().all(|e| e.agent_id == Some(other) && e.task_id == Some(other_task.id)));
    let none = EventFilter { agent_id: Some(other), task_id: Some(task.id), limit: 1000 };
    assert!(fx.store.event_list(&none).await.unwrap().is_empty());
}

pub async fn session_logs_in_order(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let task = fx.pool_task("logged").await;
    let other = fx.pool_task("elsewhere").await;
    let lines = |lines: &[&str]| lines.iter().map(|line| line.to_string()).collect::<Vec<_>>();
    let batch = |iteration: i64, task_id: Option<TaskId>, text: &[&str]| {
        NewSessionLogs::parse("session-1".into(), iteration, task_id, Some("claude".into()), lines(text))
            .unwrap()
    };

    let first_at = fx.now();
    let logs = batch(0, Some(task.id), &["a", "b", "c"]);
    assert_eq!(fx.store.session_logs_append(&logs, first_at).await.unwrap(), 3);
    let logs = batch(0, Some(other.id), &["x"]);
    assert_eq!(fx.store.session_logs_append(&logs, fx.now()).await.unwrap(), 1);
    let logs = batch(0, None, &["no task"]);
    assert_eq!(fx.store.session_logs_append(&logs, fx.now()).await.unwrap(), 1);
    let logs = batch(1, Some(task.id), &["d", "{\"type\":\"e\"}"]);
    assert_eq!(fx.store.session_logs_append(&logs, fx.now()).await.unwrap(), 2);
    let logs = batch(2, Some(task.id), &[]);
    assert_eq!(fx.store.session_logs_append(&logs, fx.now()).await.unwrap(), 0);
    let many: Vec<String> = (0..300).map(|n| format!("line {n}")).collect();
    let logs = NewSessionLogs::parse("session-1".into(), 3, Some(other.id), None, many.clone());
    assert_eq!(fx.store.session_logs_append(&logs.unwrap(), fx.now()).await.unwrap(), 300);

    let logs = fx.store.session_logs_for_task(task.id).await.unwrap();
    let contents: Vec<&str> = logs.iter().map(|log| log.content.as_str()).collect();
    assert_eq!(contents, ["a", "b", "c", "d", "{\"type\":\"e\"}"]);
    let positions: Vec<(i64, i64)> = logs.iter().map(|log| (log.iteration, log.line_number)).collect();
    assert_eq!(positions, [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]);
    assert!(logs.iter().all(|log| log.session_id == "session-1"
        && log.task_id == Some(task.id)
        && log.cli.as_deref() == Some("claude")));
    assert_eq!(logs[0].created_at, first_at);

    let logs = fx.store.session_logs_for_task(other.id).await.unwrap();
    let contents: Vec<String> = logs.iter().map(|log| log.content.clone()).collect();
    assert_eq!(contents, [vec!["x".to_string()], many].concat(), "a long batch keeps its order");
    assert_eq!(logs.last().map(|log| (log.iteration, log.line_number)), Some((3, 299)));
    assert!(fx.store.session_logs_for_task(TaskId::new_v7()).await.unwrap().is_empty());
}

pub async fn session_costs_newest_first_and_filtered(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let other = fx.worker("worker-2").await;
    let task = fx.pool_task("costly").await;

    let full = NewSessionCost {
        session_id: "session-1".into(),
        agent_id: agent,
        task_id: Some(task.id),
        total_cost_usd: 0.5,
        input_tokens: Some(1200),
        output_tokens: Some(340),
        cache_read_tokens: Some(5_000_000_000),
        cache_write_tokens: Some(7),
        duration_ms: Some(61_000),
        num_turns: Some(12),
        model: Some("claude-sonnet".into()),
        is_error: true,
    };
    let first_at = fx.now();
    let first = fx.store.session_cost_insert(&full, first_at).await.unwrap();
    assert_eq!(first.session_id, "session-1");
    assert_eq!(first.agent_id, agent);
    assert_eq!(first.task_id, Some(task.id));
    assert_eq!(first.total_cost_usd, 0.5);
    assert_eq!(first.input_tokens, Some(1200));
    assert_eq!(first.output_tokens, Some(340));
    assert_eq!(first.cache_read_tokens, Some(5_000_000_000));
    assert_eq!(first.cache_write_tokens, Some(7));
    assert_eq!(first.duration_ms, Some(61_000));
    assert_eq!(first.num_turns, Some(12));
    assert_eq!(first.model.as_deref(), Some("claude-sonnet"));
    assert!(first.is_error);
    assert_eq!(first.created_at, first_at);

    let bare = NewSessionCost {
        session_id: "session-2".into(),
        agent_id: agent,
        task_id: None,
        total_cost_usd: 1.25,
        input_tokens: None,
        output_tokens: None,
        cache_read_tokens: None,
        cache_write_tokens: None,
        duration_ms: None,
        num_turns: None,
        model: None,
        is_error: false,
    };
    let second = fx.store.session_cost_insert(&bare, fx.now()).await.unwrap();
    assert_eq!(second.task_id, None);
    assert_eq!(second.input_tokens, None);
    assert_eq!(second.model, None);
    assert!(!second.is_error);
    let third_cost = NewSessionCost { agent_id: other, task_id: Some(task.id), total_cost_usd: 0.25, ..bare };
    let third = fx.store.session_cost_insert(&third_cost, fx.now()).await.unwrap();

    let list = async |filter: SessionCostFilter| fx.store.session_cost_list(&filter).await.unwrap();
    let everything = SessionCostFilter { limit: 100, ..SessionCostFilter::default() };
    assert_eq!(list(everything.clone()).await, [third.clone(), second.clone(), first.clone()]);
    let of_task = SessionCostFilter { task_id: Some(task.id), ..everything.clone() };
    assert_eq!(list(of_task).await, [third.clone(), first.clone()]);
    let of_agent = SessionCostFilter { agent_id: Some(agent), ..everything.clone() };
    assert_eq!(list(of_agent).await, [second.clone(), first.clone()]);
    let both = SessionCostFilter { agent_id: Some(other), task_id: Some(task.id), limit: 100 };
    assert_eq!(list(both).await, std::slice::from_ref(&third));
    assert_eq!(list(SessionCostFilter { limit: 2, ..everything }).await, [third, second]);
}

pub async fn stats_count_every_status(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    assert_eq!(fx.store.stats().await.unwrap(), Stats::default());

    let busy = fx.register("busy", false, 5).await.id;
    let offline = fx.worker("offline").await;
    fx.worker("idle").await;
    fx.store.agent_close(offline, fx.now()).await.unwrap().unwrap();

    fx.create(TaskDraft { backlog: true, ..draft("backlog") }, None).await;
    fx.pool_task("unassigned 1").await;
    fx.pool_task("unassigned 2").await;
    fx.offered_task("offered", busy).await;
    fx.assigned_task("pending", busy).await;
    fx.started_task("in progress", busy).await;
    let paused = fx.started_task("paused", busy).await;
    fx.must_change(paused.id, TaskAction::Pause { agent: busy }).await;
    fx.completed_task("completed", busy).await;
    let failed = fx.started_task("failed", busy).await;
    fx.must_change(failed.id, fail(busy)).await;
    let cancelled = fx.pool_task("cancelled").await;
    fx.must_change(cancelled.id, cancel()).await;

    let expected = Stats {
        agents: AgentCounts { total: 3, idle: 1, busy: 1, offline: 1 },
        tasks: TaskCounts {
            total: 10,
            backlog: 1,
            unassigned: 2,
            offered: 1,
            reviewing: 0,
            pending: 1,
            in_progress: 1,
            paused: 1,
            completed: 1,
            failed: 1,
            cancelled: 1,
        },
    };
    assert_eq!(fx.store.stats().await.unwrap(), expected);
}

pub async fn work_counts_of_an_agent(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.register("worker-1", false, 5).await.id;
    let other = fx.register("worker-2", false, 5).await.id;
    assert_eq!(fx.store.agent_work_counts(agent).await.unwrap(), WorkCounts::default());

    fx.offered_task("offer 1", agent).await;
    fx.offered_task("offer 2", agent).await;
    let declined = fx.offered_task("offer 3", agent).await;
    fx.must_change(declined.id, TaskAction::Reject { agent, reason: None }).await; // now pool work
    fx.offered_task("offer to another", other).await;
    fx.pool_task("pool 1").await;
    fx.pool_task("pool 2").await;
    fx.create(TaskDraft { backlog: true, ..draft("not pool work") }, None).await;
    fx.started_task("mine 1", agent).await;
    fx.started_task("mine 2", agent).await;
    let paused = fx.started_task("mine, paused", agent).await;
    fx.must_change(paused.id, TaskAction::Pause { agent }).await;
    fx.assigned_task("mine, pending", agent).await;
    fx.started_task("theirs", other).await;

    let counts = fx.store.agent_work_counts(agent).await.unwrap();
    assert_eq!(counts, WorkCounts { offered_to_me: 2, pool: 3, in_progress: 2 });
    let counts = fx.store.agent_work_counts(other).await.unwrap();
    assert_eq!(counts, WorkCounts { offered_to_me: 1, pool: 3, in_progress: 1 });
}
