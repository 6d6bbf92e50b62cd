//! The event log by agent (`agent_events`): filled in batches by the writer, read whole
//! across a batch's edge, and built for an older file's events.

use std::sync::Arc;

use swarm_domain::id::AgentId;
use swarm_store::Store;
use swarm_store_sqlite::SqliteStore;

use crate::raw_connection;

async fn batched_events_of(connection: &mut sqlx::SqliteConnection, agent: AgentId) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM agent_events WHERE agent_id = ?")
        .bind(agent.to_string())
        .fetch_one(connection)
        .await
        .unwrap()
}

crate::with_and_without_wal_batching!(the_log_by_agent_is_whole_on_both_sides_of_a_batch);
/// The log by agent is read from two places: the batches the writer copies into
/// `agent_events`, and, one by one, the events logged after the last batch (here by
/// another process on the file, whose events this writer has not batched). A page that
/// spans both is whole and in order at every limit, and the writer's next batch, which
/// it makes by itself after a write, takes in every event up to then.
async fn the_log_by_agent_is_whole_on_both_sides_of_a_batch(wal_batching: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    let store = Arc::new(crate::open(&path, wal_batching).await);
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
    let all_of_a = i64::try_from(logged_for_a).unwrap();
    let batched = crate::comes_true(std::time::Duration::from_secs(10), async || {
        batched_events_of(&mut other, a).await >= all_of_a
    });
    assert!(batched.await, "the writer never batched a's {logged_for_a} events");
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
    let indexed = crate::comes_true(std::time::Duration::from_secs(30), async || {
        batched_events_of(&mut other, agent).await > backlog
    });
    assert!(indexed.await, "the backlog never got into the index");
    let page = store
        .event_list(&swarm_store::EventFilter { agent_id: Some(agent), limit: 3, task_id: None })
        .await
        .unwrap();
    assert_eq!(page[0].id, newest[0].id);
    store.close().await;
}
