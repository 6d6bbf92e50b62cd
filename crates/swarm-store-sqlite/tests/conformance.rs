//! The store conformance suite (`swarm_store::testkit`) on SQLite.

use std::sync::Arc;

use swarm_store::Store;
use tempfile::TempDir;

/// A store on a new file in a temporary folder: never `sqlite::memory:`, whose pooled
/// connections would each see their own empty database. The folder lives as long as the
/// test.
async fn fresh_store() -> (Arc<dyn Store>, TempDir) {
    let dir = tempfile::tempdir().expect("create a temporary folder");
    let path = dir.path().join("swarm.db");
    let store = swarm_store_sqlite::SqliteStore::open(&path)
        .await
        .unwrap_or_else(|err| panic!("open the SQLite store at {}: {err}", path.display()));
    (Arc::new(store), dir)
}

swarm_store::store_conformance!(sqlite, fresh_store);
