//! The store conformance suite (`swarm_store::testkit`) on SQLite.

use std::sync::Arc;

use swarm_store::Store;
use swarm_store_sqlite::SqliteOptions;
use tempfile::TempDir;

/// A store on a new file in a temporary folder: never `sqlite::memory:`, whose pooled
/// connections would each see their own empty database. The folder lives as long as the
/// test.
async fn fresh_store() -> (Arc<dyn Store>, TempDir) {
    store_with(SqliteOptions::default()).await
}

/// The same with the writer's WAL appends batched (`wal_appends.rs`, off by default).
async fn fresh_store_wal_batching() -> (Arc<dyn Store>, TempDir) {
    store_with(SqliteOptions { wal_batching: true }).await
}

async fn store_with(options: SqliteOptions) -> (Arc<dyn Store>, TempDir) {
    let dir = tempfile::tempdir().expect("create a temporary folder");
    let path = dir.path().join("swarm.db");
    let store = swarm_store_sqlite::SqliteStore::open_with(&path, options)
        .await
        .unwrap_or_else(|err| panic!("open the SQLite store at {}: {err}", path.display()));
    (Arc::new(store), dir)
}

swarm_store::store_conformance!(sqlite, fresh_store);
swarm_store::store_conformance!(sqlite_wal_batching, fresh_store_wal_batching);
