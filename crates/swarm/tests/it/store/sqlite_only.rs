//! What is particular to the SQLite backend: several stores (processes) on one file.
//! The behaviour shared with PostgreSQL is covered by the conformance suite in
//! the rest of `store/`.

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
