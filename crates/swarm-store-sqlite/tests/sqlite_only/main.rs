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
use swarm_store_sqlite::{SqliteOptions, SqliteStore};
use tokio::task::JoinSet;

mod agent_events;
mod schema;

/// Whether `holds` comes true within `within`, asked again every 50 ms: the one way these
/// tests wait for what another thread or the writer does.
pub(crate) async fn comes_true(within: std::time::Duration, mut holds: impl AsyncFnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + within;
    loop {
        if holds().await {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A store on `path`, its writer through the WAL-batching VFS (`wal_appends.rs`) or not.
pub(crate) async fn open(path: &std::path::Path, wal_batching: bool) -> SqliteStore {
    SqliteStore::open_with(path, SqliteOptions { wal_batching }).await.unwrap()
}

/// Runs the test `$name(wal_batching: bool)` twice, as `$name::sqlite_vfs` (the default)
/// and `$name::wal_batching`: the writes whose path to the file the VFS changes.
#[macro_export]
macro_rules! with_and_without_wal_batching {
    ($name:ident $(, $($test_args:tt)+)?) => {
        mod $name {
            #[tokio::test$(($($test_args)+))?]
            async fn sqlite_vfs() {
                super::$name(false).await
            }
            #[tokio::test$(($($test_args)+))?]
            async fn wal_batching() {
                super::$name(true).await
            }
        }
    };
}

pub(crate) fn worker(name: &str, max_tasks: i64) -> NewAgent {
    NewAgent::parse(AgentId::new_v7(), name, false, None, None, None, Some(max_tasks)).unwrap()
}

with_and_without_wal_batching!(
    stores_on_one_file_see_each_other_and_never_double_claim,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn stores_on_one_file_see_each_other_and_never_double_claim(wal_batching: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    // Opened at once, as `swarm serve` and `swarm mcp` may be: both migrate safely.
    let (first, second) = tokio::join!(open(&path, wal_batching), open(&path, wal_batching));
    let (first, second) = (Arc::new(first), Arc::new(second));
    assert!(first.describe().contains("swarm.db"), "{}", first.describe());

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

with_and_without_wal_batching!(reopening_keeps_data_and_registration_comes_back);
async fn reopening_keeps_data_and_registration_comes_back(wal_batching: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    let now = Timestamp::now();
    let alice = worker("alice", 1);
    {
        let store = open(&path, wal_batching).await;
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

with_and_without_wal_batching!(
    the_wal_starts_over_while_writes_never_pause,
    flavor = "multi_thread",
    worker_threads = 2
);
/// Under writes that never pause, a checkpoint never catches up with the last commit by
/// itself, and SQLite only starts the WAL over when it has: the WAL file grew for as long
/// as the load lasted (a gigabyte in half a minute of the claim-cycle benchmark).
async fn the_wal_starts_over_while_writes_never_pause(wal_batching: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    let store = Arc::new(open(&path, wal_batching).await);
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
    // The checkpointer looks every second; the WAL must first pass 64 MiB (16,384 pages),
    // which a debug build on a loaded machine may take a while to write.
    let restarted =
        comes_true(std::time::Duration::from_secs(90), async || wal_restarts(&path) != restarts_before).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut written = 0;
    while let Some(count) = writers.join_next().await {
        written += count.unwrap();
    }
    assert!(restarted, "the WAL never started over during {written} writes without a pause");
    assert_eq!(store.stats().await.unwrap().tasks.unassigned, written);
    store.close().await;
}

with_and_without_wal_batching!(
    a_failing_write_takes_nothing_else_of_its_group_with_it,
    flavor = "multi_thread",
    worker_threads = 2
);
/// Writes that fail share their group with writes that succeed: each fails or commits
/// alone, whatever else its group held.
async fn a_failing_write_takes_nothing_else_of_its_group_with_it(wal_batching: bool) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(&dir.path().join("swarm.db"), wal_batching).await);
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

pub(crate) async fn raw_connection(path: &std::path::Path) -> sqlx::SqliteConnection {
    use sqlx::{Connection, sqlite::SqliteConnectOptions};
    sqlx::SqliteConnection::connect_with(&SqliteConnectOptions::new().filename(path)).await.unwrap()
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
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    let store = SqliteStore::open(&path).await.unwrap();
    swarm_store::testkit::counts::counted_history(&store, Timestamp::now()).await;
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
    assert_eq!(counted.iter().map(|(_, n)| n).sum::<i64>(), 6, "{counted:?}");
    swarm_store::testkit::counts::assert_counts_are(&store, &counted, "counted").await;
    sqlx::Connection::close(raw).await.unwrap();
    store.close().await;
}

with_and_without_wal_batching!(
    grouped_claims_and_finishes_keep_the_counts_exact,
    flavor = "multi_thread",
    worker_threads = 2
);
/// Claims and finishes run as `UPDATE OR FAIL` (no statement journal, `apply::guarded_update`)
/// inside groups of concurrent writes, with the counting triggers firing in each: workers
/// claiming and finishing at once, and finishes of tasks already finished (refused) among
/// them, leave every task completed once and the counts what counting the rows gives.
async fn grouped_claims_and_finishes_keep_the_counts_exact(wal_batching: bool) {
    use swarm_domain::poll::{Trigger, TriggerKind};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    let store = Arc::new(open(&path, wal_batching).await);
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

with_and_without_wal_batching!(a_kept_poll_view_never_hides_new_work);
/// An idle agent's poll view is kept while nothing commits (`view_cache`): it must never
/// hide work, whether this store wrote it or another connection to the file did (a second
/// hub, `swarm mcp`).
async fn a_kept_poll_view_never_hides_new_work(wal_batching: bool) {
    use swarm_domain::poll::TriggerKind;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    let store = open(&path, wal_batching).await;
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
