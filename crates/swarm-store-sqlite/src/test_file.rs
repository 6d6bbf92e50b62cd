//! For tests that count a statement's work: a database file migrated by the store and then
//! closed, and a plain connection on it (no writer thread, no caches between).

use rusqlite::Connection;
use tempfile::TempDir;

/// The folder (deleted when dropped: keep it) and a connection to its migrated file.
pub(crate) async fn migrated() -> (TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm.db");
    crate::SqliteStore::open(&path).await.unwrap().close().await;
    let connection = Connection::open(&path).unwrap();
    (dir, connection)
}
