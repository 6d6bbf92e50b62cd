//! What only the PostgreSQL store has: tested on a new database of the cluster named by
//! `SWARM_TEST_POSTGRES_URL` (without it every test fails, naming it).

use std::time::{Duration, Instant};

use sqlx::{Connection, PgConnection};
use swarm_domain::{
    agent::NewAgent,
    id::AgentId,
    retention::Expiring,
    task::{FinishOutcome, NewTask, TaskAction, TaskDraft, TaskStatus},
    time::Timestamp,
};
use swarm_store::{Applied, Store, TaskFilter};
use swarm_store_postgres::PgStore;

mod support;

/// The stats and a listing's total read the counts by status that triggers keep
/// (migration 0023) rather than counting every task: after creates, claims, finishes,
/// cancels, tasks removed by retention and a row written by another connection, they are
/// what counting the rows gives, before the changes are folded into the counts and after.
#[tokio::test]
async fn the_counts_by_status_stay_what_counting_the_rows_gives() {
    let url = support::fresh_database_url().await;
    let store = PgStore::connect(&url).await.unwrap();
    let mut raw = PgConnection::connect(&url).await.unwrap();
    let now = Timestamp::now();
    let agent = NewAgent::parse(AgentId::new_v7(), "counted", false, None, None, None, Some(5)).unwrap();
    store.agent_register(&agent, now).await.unwrap();
    let mut tasks = Vec::new();
    for n in 0..8 {
        let agent_id = (n % 2 == 0).then_some(agent.id);
        let draft = TaskDraft { task: format!("task {n}"), agent_id, ..TaskDraft::default() };
        tasks.push(store.task_create(&NewTask::parse(draft, None).unwrap(), now).await.unwrap().id);
    }
    let apply = |id, action: TaskAction| {
        let store = &store;
        async move {
            let applied = store.task_apply(id, &action.change(), Some(agent.id), now).await.unwrap();
            assert!(matches!(applied, Applied::Changed { .. }), "{applied:?}");
        }
    };
    apply(tasks[0], TaskAction::Start { agent: agent.id }).await;
    let finish =
        TaskAction::Finish { assignee: Some(agent.id), outcome: FinishOutcome::Completed { output: None } };
    apply(tasks[0], finish).await;
    apply(tasks[1], TaskAction::Claim { agent: agent.id }).await;
    apply(tasks[2], TaskAction::Start { agent: agent.id }).await;
    let cancel = TaskAction::Cancel { reason: None, unstarted_only: false };
    for id in [tasks[3], tasks[4], tasks[5]] {
        apply(id, cancel.clone()).await;
    }
    // Cancelled tasks need no telling: retention removes them (here all three).
    let removed = store.retention_remove(Expiring::FinishedTasks, now.plus_millis(1), 500).await.unwrap();
    assert_eq!(removed, 3);
    sqlx::query(
        "INSERT INTO tasks (id, task, status, source, created_at, last_updated_at)
         VALUES ('00000000-0000-7000-8000-00000000000a', 'written by another process', 'backlog', 'api', now(), now())",
    )
    .execute(&mut raw)
    .await
    .unwrap();

    check_counts(&store, &mut raw, "just after the writes").await;

    // The store folds the changes into the counts every second.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (changes,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM task_count_changes").fetch_one(&mut raw).await.unwrap();
        if changes == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{changes} changes still unfolded after 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    check_counts(&store, &mut raw, "after the fold").await;
    // Folded, the kept counts alone are the rows' counts.
    let kept: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, n FROM task_counts WHERE n <> 0 ORDER BY status")
            .fetch_all(&mut raw)
            .await
            .unwrap();
    let counted: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, count(*) FROM tasks GROUP BY status ORDER BY status")
            .fetch_all(&mut raw)
            .await
            .unwrap();
    assert_eq!(kept, counted);
    raw.close().await.unwrap();
    store.close().await;
}

/// The stats and listings' totals against counting the rows.
async fn check_counts(store: &PgStore, raw: &mut PgConnection, when: &str) {
    let counted: Vec<(String, i64)> = sqlx::query_as("SELECT status, count(*) FROM tasks GROUP BY status")
        .fetch_all(&mut *raw)
        .await
        .unwrap();
    let count =
        |status: TaskStatus| counted.iter().find(|(name, _)| name == status.as_str()).map_or(0, |(_, n)| *n);
    let total: i64 = counted.iter().map(|(_, n)| n).sum();
    assert_eq!(total, 6, "{when}: {counted:?}");
    let stats = store.stats().await.unwrap().tasks;
    assert_eq!(
        [stats.total, stats.completed, stats.in_progress, stats.pending, stats.unassigned, stats.backlog],
        [
            total,
            count(TaskStatus::Completed),
            count(TaskStatus::InProgress),
            count(TaskStatus::Pending),
            count(TaskStatus::Unassigned),
            count(TaskStatus::Backlog),
        ],
        "{when}: {stats:?} against {counted:?}"
    );
    assert_eq!(stats.cancelled, 0, "{when}");
    let listed = |statuses: Vec<TaskStatus>| async move {
        let filter = TaskFilter { statuses, limit: 2, ..TaskFilter::default() };
        store.task_list(&filter).await.unwrap().1
    };
    assert_eq!(listed(Vec::new()).await, total, "{when}");
    let working = vec![TaskStatus::InProgress, TaskStatus::Unassigned];
    assert_eq!(
        listed(working).await,
        count(TaskStatus::InProgress) + count(TaskStatus::Unassigned),
        "{when}"
    );
}
