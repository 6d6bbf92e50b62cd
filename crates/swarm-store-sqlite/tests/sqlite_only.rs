//! What is particular to the SQLite backend: several stores (processes) on one file.
//! The behaviour shared with PostgreSQL is covered by the conformance suite in
//! `swarm_store::testkit` (`tests/conformance.rs`).

use std::sync::Arc;

use swarm_domain::agent::Registration;
use swarm_domain::{
    agent::NewAgent,
    id::AgentId,
    task::{NewTask, TaskAction, TaskDraft, TaskStatus},
    time::Timestamp,
};
use swarm_store::{Applied, Store, StoreError};
use swarm_store_sqlite::SqliteStore;
use tokio::task::JoinSet;

fn worker(name: &str, max_tasks: i64) -> NewAgent {
    NewAgent::parse(AgentId::new_v7(), name, false, None, None, None, Some(max_tasks)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_on_one_file_see_each_other_and_never_double_claim() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    // Opened at once, as `swarm serve` and `swarm mcp` may be: both migrate safely.
    let (first, second) = tokio::join!(SqliteStore::open(&path), SqliteStore::open(&path));
    let (first, second) = (Arc::new(first.unwrap()), Arc::new(second.unwrap()));
    assert!(first.describe().ends_with("swarm.db"), "{}", first.describe());

    let now = Timestamp::now();
    let alice = worker("alice", 5);
    let bob = worker("bob", 5);
    first.agent_register(&alice, now).await.unwrap();
    second.agent_register(&bob, now).await.unwrap();
    let taken = worker("alice", 1);
    assert!(matches!(second.agent_register(&taken, now).await, Err(StoreError::Conflict(_))));

    let mut tasks = Vec::new();
    for n in 0..10 {
        let draft = TaskDraft { task: format!("pool task {n}"), ..TaskDraft::default() };
        tasks.push(first.task_create(&NewTask::parse(draft, None).unwrap(), now).await.unwrap());
    }

    // Every task is claimed by both agents through both stores at once.
    let mut claims = JoinSet::new();
    for task in &tasks {
        for (store, agent) in [(&first, alice.id), (&second, bob.id)] {
            let (store, id) = (Arc::clone(store), task.id);
            claims.spawn(async move {
                let change = TaskAction::Claim { agent }.change();
                store.task_apply(id, &change, Some(agent), now).await
            });
        }
    }
    let mut n_changed = 0;
    while let Some(outcome) = claims.join_next().await {
        match outcome.unwrap().unwrap() {
            Applied::Changed { after, .. } => {
                assert_eq!(after.status, TaskStatus::Pending);
                n_changed += 1;
            }
            Applied::Refused { .. } => {}
            Applied::NotFound => panic!("task vanished"),
        }
    }
    assert_eq!(n_changed, tasks.len());

    let stats = second.stats().await.unwrap();
    assert_eq!(stats.tasks.pending, 10);
    assert_eq!(stats.agents.idle, 2);
    first.close().await;
    second.close().await;
}

#[tokio::test]
async fn reopening_keeps_data_and_registration_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    let now = Timestamp::now();
    let alice = worker("alice", 1);
    {
        let store = SqliteStore::open(&path).await.unwrap();
        assert!(matches!(store.agent_register(&alice, now).await, Ok(Registration::Created(_))));
        store.agent_close(alice.id, now).await.unwrap();
        store.close().await;
    }
    let store = SqliteStore::open(&path).await.unwrap();
    let again = NewAgent { max_tasks: 3, ..alice.clone() };
    let Ok(Registration::Existing(agent)) = store.agent_register(&again, now).await else {
        panic!("expected the existing agent");
    };
    assert_eq!(agent.max_tasks, 3);
    assert_eq!(agent.status.as_str(), "idle");
}

/// The WAL's checkpoint sequence number (header bytes 12..16), which SQLite bumps each
/// time the WAL starts over from its beginning.
fn wal_restarts(path: &std::path::Path) -> u32 {
    let wal = std::fs::read(path.with_extension("db-wal")).unwrap_or_default();
    wal.get(12..16).map_or(0, |bytes| u32::from_be_bytes(bytes.try_into().unwrap()))
}

/// Under writes that never pause, a checkpoint never catches up with the last commit by
/// itself, and SQLite only starts the WAL over when it has: the WAL file grew for as long
/// as the load lasted (a gigabyte in half a minute of the claim-cycle benchmark).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_starts_over_while_writes_never_pause() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    let store = Arc::new(SqliteStore::open(&path).await.unwrap());
    let agent = worker("writer", 5);
    store.agent_register(&agent, Timestamp::now()).await.unwrap();
    let restarts_before = wal_restarts(&path);

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = JoinSet::new();
    for writer in 0..4 {
        let (store, stop) = (Arc::clone(&store), Arc::clone(&stop));
        writers.spawn(async move {
            let mut written = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let draft =
                    TaskDraft { task: format!("task {written} of writer {writer}"), ..TaskDraft::default() };
                store.task_create(&NewTask::parse(draft, None).unwrap(), Timestamp::now()).await.unwrap();
                written += 1;
            }
            written
        });
    }
    // The checkpointer looks every second; give it many chances.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while wal_restarts(&path) == restarts_before && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let restarted = wal_restarts(&path) != restarts_before;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut written = 0;
    while let Some(count) = writers.join_next().await {
        written += count.unwrap();
    }
    assert!(restarted, "the WAL never started over during {written} writes without a pause");
    assert_eq!(store.stats().await.unwrap().tasks.unassigned, written);
    store.close().await;
}

/// Writes that fail share their group with writes that succeed: each fails or commits
/// alone, whatever else its group held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_write_takes_nothing_else_of_its_group_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("swarm.db")).await.unwrap());
    let agent = worker("assignee", 5);
    store.agent_register(&agent, Timestamp::now()).await.unwrap();

    let mut writes = JoinSet::new();
    for n in 0..400 {
        let store = Arc::clone(&store);
        // Every third task names an agent that does not exist.
        let assignee = if n % 3 == 0 { AgentId::new_v7() } else { agent.id };
        writes.spawn(async move {
            let draft =
                TaskDraft { task: format!("task {n}"), agent_id: Some(assignee), ..TaskDraft::default() };
            let task = NewTask::parse(draft, None).unwrap();
            (n, task.id, store.task_create(&task, Timestamp::now()).await)
        });
    }
    let mut created = Vec::new();
    while let Some(joined) = writes.join_next().await {
        let (n, id, outcome) = joined.unwrap();
        match outcome {
            Ok(task) if n % 3 != 0 => {
                assert_eq!(task.id, id);
                created.push(id);
            }
            Err(StoreError::MissingReference(message)) if n % 3 == 0 => {
                assert!(message.contains("does not exist"), "{message}");
                assert_eq!(store.task_get(id).await.unwrap(), None, "a failed create left its task");
            }
            other => panic!("task {n}: unexpected outcome {other:?}"),
        }
    }
    assert_eq!(created.len(), 266);
    for id in &created {
        assert!(
            store.task_get(*id).await.unwrap().is_some(),
            "task {id} was answered as created but is gone"
        );
    }
    assert_eq!(store.stats().await.unwrap().tasks.pending, 266);
    store.close().await;
}

/// CHECK constraints of the form `x IN (a, b, c)` in the stored schema, with more than
/// two values: SQLite builds a temporary b-tree of the list each time a write checks one.
fn checks_with_lists(schema: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (start, _) in schema.match_indices("CHECK (") {
        let check = &schema[start..];
        let mut depth = 0;
        let end = check
            .char_indices()
            .find_map(|(at, c)| {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 1 => return Some(at + 1),
                    ')' => depth -= 1,
                    _ => {}
                }
                None
            })
            .unwrap_or(check.len());
        let check = &check[..end];
        if check.contains(" IN (") && check.matches(',').count() >= 2 {
            found.push(check.to_string());
        }
    }
    found
}

/// Migration 0007 rewrites the status checks and rebuilds the event log: a file written
/// by the previous schema keeps its rows and its constraints, and no check is left that
/// builds a temporary list on every status change.
#[tokio::test]
async fn the_cheaper_schema_keeps_the_rows_and_the_constraints_of_an_older_file() {
    use sqlx::{Connection, Row, sqlite::SqliteConnectOptions};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    let options = SqliteConnectOptions::new().filename(&path).create_if_missing(true).foreign_keys(true);

    // A file as the previous release left it: migrations up to 0006, with events in it.
    let migrations_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut older = sqlx::migrate::Migrator::new(migrations_dir).await.unwrap();
    let all_versions: Vec<i64> = older.migrations.iter().map(|migration| migration.version).collect();
    assert!(all_versions.contains(&7), "migration 0007 is missing: {all_versions:?}");
    older.migrations = older.migrations.iter().filter(|migration| migration.version < 7).cloned().collect();
    let mut connection = sqlx::SqliteConnection::connect_with(&options).await.unwrap();
    older.run(&mut connection).await.unwrap();
    let old_event_ids = ["0190f2c4-0000-7000-8000-000000000001", "0190f2c4-0000-7000-8000-000000000002"];
    for (n, id) in old_event_ids.iter().enumerate() {
        sqlx::query(
            "INSERT INTO events (id, event_type, agent_id, task_id, old_value, new_value, metadata, created_at)
             VALUES (?, 'task_created', NULL, NULL, NULL, 'unassigned', '{\"n\":1}', ?)",
        )
        .bind(id)
        .bind(1_768_903_200_000 + i64::try_from(n).unwrap())
        .execute(&mut connection)
        .await
        .unwrap();
    }
    connection.close().await.unwrap();

    let store = SqliteStore::open(&path).await.unwrap();
    let logged =
        store.event_list(&swarm_store::EventFilter { limit: 10, ..Default::default() }).await.unwrap();
    let mut logged_ids: Vec<String> = logged.iter().map(|event| event.id.to_string()).collect();
    logged_ids.sort();
    assert_eq!(logged_ids, old_event_ids);
    assert_eq!(logged[0].metadata, Some(serde_json::json!({"n": 1})));
    // New events go on being written and read after the old ones.
    let agent = worker("after-migration", 1);
    store.agent_register(&agent, Timestamp::now()).await.unwrap();
    let logged =
        store.event_list(&swarm_store::EventFilter { limit: 10, ..Default::default() }).await.unwrap();
    assert_eq!(logged.len(), 3, "{logged:?}");
    assert_eq!(logged[0].agent_id, Some(agent.id));
    store.close().await;

    let mut connection = sqlx::SqliteConnection::connect_with(&options).await.unwrap();
    let integrity: String =
        sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&mut connection).await.unwrap();
    assert_eq!(integrity, "ok");
    let schema: Vec<String> =
        sqlx::query("SELECT sql FROM sqlite_schema WHERE type = 'table' AND sql IS NOT NULL")
            .fetch_all(&mut connection)
            .await
            .unwrap()
            .iter()
            .map(|row| row.get::<String, _>("sql"))
            .collect();
    let lists: Vec<String> = schema.iter().flat_map(|sql| checks_with_lists(sql)).collect();
    assert!(lists.is_empty(), "checks that build a temporary list on every write: {lists:?}");

    // The rewritten checks still refuse what the lists refused, and admit every status.
    let bad_agent = sqlx::query(
        "INSERT INTO agents (id, name, status, created_at, last_updated_at) VALUES ('x', 'x', 'asleep', 0, 0)",
    )
    .execute(&mut connection)
    .await;
    assert!(bad_agent.unwrap_err().to_string().contains("CHECK constraint failed"));
    for status in ["idle", "busy", "offline"] {
        sqlx::query("UPDATE agents SET status = ? WHERE id = ?")
            .bind(status)
            .bind(agent.id.to_string())
            .execute(&mut connection)
            .await
            .unwrap();
    }
    sqlx::query(
        "INSERT INTO tasks (id, task, status, source, created_at, last_updated_at)
         VALUES ('t', 'text', 'backlog', 'api', 0, 0)",
    )
    .execute(&mut connection)
    .await
    .unwrap();
    for status in TaskStatus::ALL {
        sqlx::query("UPDATE tasks SET status = ? WHERE id = 't'")
            .bind(status.as_str())
            .execute(&mut connection)
            .await
            .unwrap();
    }
    let bad_task =
        sqlx::query("UPDATE tasks SET status = 'done' WHERE id = 't'").execute(&mut connection).await;
    assert!(bad_task.unwrap_err().to_string().contains("CHECK constraint failed"));
    connection.close().await.unwrap();
}

async fn raw_connection(path: &std::path::Path) -> sqlx::SqliteConnection {
    use sqlx::{Connection, sqlite::SqliteConnectOptions};
    sqlx::SqliteConnection::connect_with(&SqliteConnectOptions::new().filename(path)).await.unwrap()
}

async fn batched_events_of(connection: &mut sqlx::SqliteConnection, agent: AgentId) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM agent_events WHERE agent_id = ?")
        .bind(agent.to_string())
        .fetch_one(connection)
        .await
        .unwrap()
}

/// The log by agent is read from two places: the batches the writer copies into
/// `agent_events`, and, one by one, the events logged after the last batch (here by
/// another process on the file, whose events this writer has not batched). A page that
/// spans both is whole and in order at every limit, and the writer's next batch, which
/// it makes by itself after a write, takes in every event up to then.
#[tokio::test]
async fn the_log_by_agent_is_whole_on_both_sides_of_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    let store = Arc::new(SqliteStore::open(&path).await.unwrap());
    let fx = swarm_store::testkit::Fixture::new(store.clone());
    let (a, b) = (fx.worker("a").await, fx.worker("b").await);
    for n in 0..3 {
        fx.completed_task(&format!("a{n}"), a).await;
    }
    fx.completed_task("b0", b).await;
    store.index_agent_events().await.unwrap();

    // Another process logs events for both agents, with times between and after ours.
    let mut other = raw_connection(&path).await;
    let before_other = batched_events_of(&mut other, a).await;
    assert!(before_other >= 6, "a's events are batched: {before_other}");
    for (n, agent) in [a, b, a, a, b].into_iter().enumerate() {
        sqlx::query(
            "INSERT INTO events (id, event_type, agent_id, task_id, old_value, new_value, metadata, created_at)
             VALUES (?, 'agent_status_change', ?, NULL, 'idle', 'busy', NULL, ?)",
        )
        .bind(swarm_domain::id::EventId::new_v7().to_string())
        .bind(agent.to_string())
        .bind(fx.now().unix_millis() + i64::try_from(n).unwrap())
        .execute(&mut other)
        .await
        .unwrap();
    }
    assert_eq!(batched_events_of(&mut other, a).await, before_other, "the other process's events wait");

    let everything =
        store.event_list(&swarm_store::EventFilter { limit: 1000, ..Default::default() }).await.unwrap();
    for agent in [a, b] {
        let expected: Vec<_> =
            everything.iter().filter(|event| event.agent_id == Some(agent)).cloned().collect();
        for limit in [1, 2, 3, expected.len() / 2, expected.len() - 1, expected.len(), expected.len() + 5] {
            let page = store
                .event_list(&swarm_store::EventFilter {
                    agent_id: Some(agent),
                    limit: limit as i64,
                    task_id: None,
                })
                .await
                .unwrap();
            assert_eq!(page, expected[..limit.min(expected.len())], "agent {agent}, limit {limit}");
        }
    }

    // One more write: within a moment the writer batches everything logged until then.
    fx.completed_task("a3", a).await;
    let logged_for_a = store
        .event_list(&swarm_store::EventFilter { agent_id: Some(a), limit: 1000, task_id: None })
        .await
        .unwrap()
        .len();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while batched_events_of(&mut other, a).await < i64::try_from(logged_for_a).unwrap() {
        assert!(std::time::Instant::now() < deadline, "the writer never batched a's {logged_for_a} events");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    store.close().await;
}

/// Migration 0008 numbers the events of an older file and indexes them by agent, and the
/// queries that count an agent's tasks at work find the index of those tasks.
#[tokio::test]
async fn an_older_file_gets_its_events_numbered_and_indexed_by_agent() {
    use sqlx::Connection;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    let migrations_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut older = sqlx::migrate::Migrator::new(migrations_dir).await.unwrap();
    assert!(older.migrations.iter().any(|migration| migration.version == 8), "migration 0008 is missing");
    older.migrations = older.migrations.iter().filter(|migration| migration.version < 8).cloned().collect();
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(&path).create_if_missing(true);
    let mut connection = sqlx::SqliteConnection::connect_with(&options).await.unwrap();
    older.run(&mut connection).await.unwrap();
    let agent = AgentId::new_v7();
    let mut old_ids = Vec::new();
    for n in 0..4_i64 {
        let id = swarm_domain::id::EventId::new_v7();
        old_ids.push(id);
        sqlx::query(
            "INSERT INTO events (id, event_type, agent_id, task_id, old_value, new_value, metadata, created_at)
             VALUES (?, 'agent_status_change', ?, NULL, 'idle', 'busy', NULL, ?)",
        )
        .bind(id.to_string())
        // One event in four is about nobody.
        .bind((n != 2).then(|| agent.to_string()))
        .bind(1_768_903_200_000 + n)
        .execute(&mut connection)
        .await
        .unwrap();
    }
    connection.close().await.unwrap();

    let store = SqliteStore::open(&path).await.unwrap();
    let page = store
        .event_list(&swarm_store::EventFilter { agent_id: Some(agent), limit: 10, task_id: None })
        .await
        .unwrap();
    let listed: Vec<_> = page.iter().map(|event| event.id).collect();
    assert_eq!(listed, [old_ids[3], old_ids[1], old_ids[0]]);
    store.close().await;

    let mut connection = raw_connection(&path).await;
    assert_eq!(batched_events_of(&mut connection, agent).await, 3);
    let numbered: Vec<(i64, String)> =
        sqlx::query_as("SELECT seq, id FROM events ORDER BY seq").fetch_all(&mut connection).await.unwrap();
    let in_order: Vec<String> = old_ids.iter().map(ToString::to_string).collect();
    assert_eq!(numbered.iter().map(|(_, id)| id.clone()).collect::<Vec<_>>(), in_order);
    let through: i64 = sqlx::query_scalar("SELECT through_seq FROM agent_events_indexed")
        .fetch_one(&mut connection)
        .await
        .unwrap();
    assert_eq!(through, numbered.last().unwrap().0);
    let integrity: String =
        sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&mut connection).await.unwrap();
    assert_eq!(integrity, "ok");

    for query in [
        "EXPLAIN QUERY PLAN SELECT count(*) FROM tasks WHERE agent_id = ?1 AND status = 'in_progress'",
        "EXPLAIN QUERY PLAN SELECT t.id FROM tasks t WHERE t.agent_id = ?1 AND t.status = 'pending'",
    ] {
        let plan: Vec<(i64, i64, i64, String)> =
            sqlx::query_as(query).bind(agent.to_string()).fetch_all(&mut connection).await.unwrap();
        assert!(
            plan.iter().any(|(_, _, _, detail)| detail.contains("tasks_agent_working")),
            "{query}: {plan:?}"
        );
    }
    connection.close().await.unwrap();
}

/// A backlog larger than one batch (another process logged 120,000 events) goes in over
/// several batches without waiting for more writes, and listings are whole meanwhile.
#[tokio::test]
async fn a_backlog_of_events_goes_into_the_index_by_agent_batch_after_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    let store = Arc::new(SqliteStore::open(&path).await.unwrap());
    let fx = swarm_store::testkit::Fixture::new(store.clone());
    let agent = fx.worker("busy").await;
    store.index_agent_events().await.unwrap();

    let mut other = raw_connection(&path).await;
    let backlog: i64 = 120_000;
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
         INSERT INTO events (id, event_type, agent_id, task_id, old_value, new_value, metadata, created_at)
         SELECT printf('0190f2c4-0000-7000-8000-%012d', i), 'agent_status_change', ?2, NULL, 'idle', 'busy',
                NULL, ?3 + i
         FROM n",
    )
    .bind(backlog)
    .bind(agent.to_string())
    .bind(fx.now().unix_millis())
    .execute(&mut other)
    .await
    .unwrap();
    let newest = store
        .event_list(&swarm_store::EventFilter { agent_id: Some(agent), limit: 2, task_id: None })
        .await
        .unwrap();
    assert_eq!(newest[0].id.to_string(), format!("0190f2c4-0000-7000-8000-{backlog:012}"));
    assert_eq!(newest[1].id.to_string(), format!("0190f2c4-0000-7000-8000-{:012}", backlog - 1));

    // One write of this store's own sets its writer going.
    fx.worker("another").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while batched_events_of(&mut other, agent).await < backlog + 1 {
        assert!(std::time::Instant::now() < deadline, "the backlog never got into the index");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let page = store
        .event_list(&swarm_store::EventFilter { agent_id: Some(agent), limit: 3, task_id: None })
        .await
        .unwrap();
    assert_eq!(page[0].id, newest[0].id);
    store.close().await;
}

async fn pragma(connection: &mut sqlx::SqliteConnection, name: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("PRAGMA {name}"))).fetch_one(connection).await.unwrap()
}

/// A new file is made with `auto_vacuum = INCREMENTAL`: what retention removes is given
/// back to the file system in bounded steps, down to a reserve kept for reuse.
#[tokio::test]
async fn the_space_retention_frees_goes_back_to_the_file_system() {
    use swarm_domain::{retention::Expiring, session::NewSessionLogs};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let now = Timestamp::now();
    let agent = worker("chatty", 1);
    store.agent_register(&agent, now).await.unwrap();
    let draft = TaskDraft { task: "log a lot".into(), agent_id: Some(agent.id), ..TaskDraft::default() };
    let task = store.task_create(&NewTask::parse(draft, None).unwrap(), now).await.unwrap();
    for change in [TaskAction::Start { agent: agent.id }, finish_completed(agent.id)] {
        assert!(matches!(
            store.task_apply(task.id, &change.change(), Some(agent.id), now).await,
            Ok(Applied::Changed { .. })
        ));
    }
    let line = "x".repeat(1000);
    for _ in 0..120 {
        let lines = vec![line.clone(); 100];
        let logs = NewSessionLogs::parse("s".into(), 0, Some(task.id), None, lines).unwrap();
        store.session_logs_append(&logs, now).await.unwrap();
    }
    let mut raw = raw_connection(&path).await;
    assert_eq!(pragma(&mut raw, "auto_vacuum").await, 2, "INCREMENTAL");
    let full = pragma(&mut raw, "page_count").await;

    let later = now.plus_millis(1);
    let mut removed = 0;
    loop {
        let batch = store.retention_remove(Expiring::SessionLogs, later, 500).await.unwrap();
        removed += batch;
        if batch < 500 {
            break;
        }
    }
    assert_eq!(removed, 12_000);
    let mut returned = 0;
    loop {
        let step = store.reclaim_space().await.unwrap();
        assert!(step <= 1024, "one step gives back at most 1024 pages, not {step}");
        if step == 0 {
            break;
        }
        returned += step;
    }
    let free = pragma(&mut raw, "freelist_count").await;
    let left = pragma(&mut raw, "page_count").await;
    assert!(free <= 1024, "{free} free pages kept");
    assert!(returned > 1000, "gave back {returned} pages");
    assert!(left < full / 2, "{full} pages before, {left} after");
    sqlx::Connection::close(raw).await.unwrap();
    store.close().await;
}

fn finish_completed(agent: AgentId) -> TaskAction {
    TaskAction::Finish {
        assignee: Some(agent),
        outcome: swarm_domain::task::FinishOutcome::Completed { output: None },
    }
}

/// The stats and a listing's total read the counts by status that triggers keep (so that
/// neither walks a million tasks): after creates, claims, finishes, a cancel, tasks
/// removed by retention and a task written by another connection, they are what counting
/// the rows gives.
#[tokio::test]
async fn the_counts_by_status_stay_what_counting_the_rows_gives() {
    use swarm_domain::retention::Expiring;
    use swarm_store::TaskFilter;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let now = Timestamp::now();
    let agent = worker("counted", 5);
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
    apply(tasks[0], finish_completed(agent.id)).await;
    apply(tasks[1], TaskAction::Claim { agent: agent.id }).await;
    apply(tasks[2], TaskAction::Start { agent: agent.id }).await;
    let cancel = TaskAction::Cancel { reason: None, unstarted_only: false };
    for id in [tasks[3], tasks[4], tasks[5]] {
        apply(id, cancel.clone()).await;
    }
    // Cancelled tasks need no telling: retention removes them (here all three).
    let removed = store.retention_remove(Expiring::FinishedTasks, now.plus_millis(1), 500).await.unwrap();
    assert_eq!(removed, 3);
    let mut raw = raw_connection(&path).await;
    sqlx::query(
        "INSERT INTO tasks (id, task, status, source, created_at, last_updated_at)
         VALUES ('00000000-0000-7000-8000-00000000000a', 'written by another process', 'backlog', 'api', 0, 0)",
    )
    .execute(&mut raw)
    .await
    .unwrap();

    let counted: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, count(*) FROM tasks GROUP BY status ORDER BY status")
            .fetch_all(&mut raw)
            .await
            .unwrap();
    let count =
        |status: TaskStatus| counted.iter().find(|(name, _)| name == status.as_str()).map_or(0, |(_, n)| *n);
    let stats = store.stats().await.unwrap().tasks;
    let total: i64 = counted.iter().map(|(_, n)| n).sum();
    assert_eq!(total, 6, "{counted:?}");
    assert_eq!(
        [stats.total, stats.completed, stats.in_progress, stats.pending, stats.unassigned, stats.backlog],
        [
            total,
            count(TaskStatus::Completed),
            count(TaskStatus::InProgress),
            count(TaskStatus::Pending),
            count(TaskStatus::Unassigned),
            count(TaskStatus::Backlog)
        ],
        "{stats:?} against {counted:?}"
    );
    assert_eq!(stats.cancelled, 0);
    let listed = |statuses: Vec<TaskStatus>| {
        let filter = TaskFilter { statuses, limit: 2, ..TaskFilter::default() };
        let store = &store;
        async move { store.task_list(&filter).await.unwrap().1 }
    };
    assert_eq!(listed(Vec::new()).await, total);
    let working = vec![TaskStatus::InProgress, TaskStatus::Unassigned];
    assert_eq!(listed(working).await, count(TaskStatus::InProgress) + count(TaskStatus::Unassigned));
    sqlx::Connection::close(raw).await.unwrap();
    store.close().await;
}

/// Claims and finishes run as `UPDATE OR FAIL` (no statement journal, `apply::guarded_update`)
/// inside groups of concurrent writes, with the counting triggers firing in each: workers
/// claiming and finishing at once, and finishes of tasks already finished (refused) among
/// them, leave every task completed once and the counts what counting the rows gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_claims_and_finishes_keep_the_counts_exact() {
    use swarm_domain::poll::{Trigger, TriggerKind};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    let store = Arc::new(SqliteStore::open(&path).await.unwrap());
    let now = Timestamp::now();
    let mut workers = JoinSet::new();
    for w in 0..8 {
        let agent = worker(&format!("worker {w}"), 1);
        store.agent_register(&agent, now).await.unwrap();
        for n in 0..25 {
            let draft =
                TaskDraft { task: format!("task {w}.{n}"), agent_id: Some(agent.id), ..TaskDraft::default() };
            store.task_create(&NewTask::parse(draft, None).unwrap(), now).await.unwrap();
        }
        let store = Arc::clone(&store);
        workers.spawn(async move {
            let mut finished = 0;
            let kinds = [TriggerKind::TaskAssigned];
            while let Some((_, trigger)) = store
                .poll_claim_for_runner(agent.id, &kinds, now, now.plus_millis(60_000), None)
                .await
                .unwrap()
            {
                let Trigger::TaskAssigned { task_id, .. } = trigger else { panic!("{trigger:?}") };
                let finish = finish_completed(agent.id).change();
                let first = store.task_apply(task_id, &finish, Some(agent.id), now).await.unwrap();
                assert!(matches!(first, Applied::Changed { .. }), "{first:?}");
                let again = store.task_apply(task_id, &finish, Some(agent.id), now).await.unwrap();
                assert!(matches!(again, Applied::Refused { .. }), "{again:?}");
                finished += 1;
            }
            finished
        });
    }
    let mut finished = 0;
    while let Some(joined) = workers.join_next().await {
        finished += joined.unwrap();
    }
    assert_eq!(finished, 200);
    let mut raw = raw_connection(&path).await;
    let counted: Vec<(String, i64)> = sqlx::query_as("SELECT status, count(*) FROM tasks GROUP BY status")
        .fetch_all(&mut raw)
        .await
        .unwrap();
    assert_eq!(counted, vec![("completed".to_string(), 200)]);
    let stats = store.stats().await.unwrap().tasks;
    assert_eq!(
        [stats.total, stats.completed, stats.pending, stats.in_progress],
        [200, 200, 0, 0],
        "{stats:?}"
    );
    sqlx::Connection::close(raw).await.unwrap();
    store.close().await;
}

/// An idle agent's poll view is kept while nothing commits (`view_cache`): it must never
/// hide work, whether this store wrote it or another connection to the file did (a second
/// hub, `swarm mcp`).
#[tokio::test]
async fn a_kept_poll_view_never_hides_new_work() {
    use swarm_domain::poll::TriggerKind;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let now = Timestamp::now();
    let agent = worker("idle", 1);
    store.agent_register(&agent, now).await.unwrap();
    let waiting =
        async |store: &SqliteStore| store.poll_view(agent.id).await.unwrap().expect("registered").waiting;
    for _ in 0..3 {
        assert!(waiting(&store).await.is_empty());
    }

    let draft = TaskDraft { task: "for the pool".into(), ..TaskDraft::default() };
    let pool_task = store.task_create(&NewTask::parse(draft, None).unwrap(), now).await.unwrap();
    assert!(waiting(&store).await.contains(&TriggerKind::PoolTask), "a task this store wrote");
    let cancel = TaskAction::Cancel { reason: None, unstarted_only: false }.change();
    store.task_apply(pool_task.id, &cancel, None, now).await.unwrap();
    for _ in 0..3 {
        assert!(waiting(&store).await.is_empty(), "the pool task is cancelled");
    }

    let mut other = raw_connection(&path).await;
    sqlx::query(
        "INSERT INTO tasks (id, agent_id, task, status, source, created_at, last_updated_at)
         VALUES ('00000000-0000-7000-8000-00000000000b', ?, 'from another process', 'pending', 'api', 0, 0)",
    )
    .bind(agent.id.to_string())
    .execute(&mut other)
    .await
    .unwrap();
    assert!(waiting(&store).await.contains(&TriggerKind::TaskAssigned), "a task another connection wrote");
    sqlx::Connection::close(other).await.unwrap();
    store.close().await;
}
