//! Files written by an older schema: what a migration rewrites keeps the rows and the
//! constraints it had.

use swarm_domain::{task::TaskStatus, time::Timestamp};
use swarm_store::Store;
use swarm_store_sqlite::SqliteStore;

use crate::worker;

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
