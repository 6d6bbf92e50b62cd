//! Shared fixtures of the `it` test binary: a fresh store of each backend per test.
//!
//! SQLite: a new file in a temporary folder (never `sqlite::memory:`, whose pooled
//! connections each see their own empty database). PostgreSQL: a new database
//! `swarm_test_<uuid>` on the cluster named by `SWARM_TEST_POSTGRES_URL`; without that
//! variable the PostgreSQL variants fail, naming it, rather than pass by skipping.

use std::sync::Arc;

use sqlx::Connection;
use swarm_store::Store;
use tempfile::TempDir;

pub mod kill;
mod wait;
pub use wait::{WITHIN, eventually, eventually_within};

pub const POSTGRES_URL_VAR: &str = "SWARM_TEST_POSTGRES_URL";

/// A SQLite store on a new file; keep the folder alive as long as the store.
pub async fn sqlite_store() -> (Arc<dyn Store>, TempDir) {
    let dir = tempfile::tempdir().expect("create a temporary folder");
    let path = dir.path().join("swarm.db");
    let store = swarm_store_sqlite::SqliteStore::open(&path)
        .await
        .unwrap_or_else(|err| panic!("open the SQLite store at {}: {err}", path.display()));
    (Arc::new(store), dir)
}

/// A PostgreSQL store on a new, empty database.
pub async fn postgres_store() -> Arc<dyn Store> {
    let database_url = postgres_fresh_database(&postgres_url()).await;
    let store = swarm_store_postgres::PgStore::connect(&database_url)
        .await
        .unwrap_or_else(|err| panic!("connect the PostgreSQL store to {database_url}: {err}"));
    Arc::new(store)
}

/// The URL of the PostgreSQL test cluster; panics, naming what is missing, without it.
pub fn postgres_url() -> String {
    match std::env::var(POSTGRES_URL_VAR) {
        Ok(url) if !url.trim().is_empty() => url.trim().to_string(),
        _ => panic!(
            "{POSTGRES_URL_VAR} is not set: run `scripts/test`, which starts a throwaway \
             PostgreSQL cluster, or start one with `scripts/pg-cluster start DIR` and export \
             {POSTGRES_URL_VAR}=<the postgres:// URL it prints>"
        ),
    }
}

/// Create `swarm_test_<uuid>` on the cluster at `url` and return a URL naming it.
pub async fn postgres_fresh_database(url: &str) -> String {
    let name = format!("swarm_test_{}", uuid::Uuid::new_v4().simple());
    let mut admin = sqlx::PgConnection::connect(url)
        .await
        .unwrap_or_else(|err| panic!("connect to {POSTGRES_URL_VAR}={url}: {err}"));
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|err| panic!("create database {name}: {err}"));
    admin.close().await.ok();
    url_with_database(url, &name)
}

/// `url` with its database path replaced by `database`, query parameters kept.
pub fn url_with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |at| at + 3);
    let base = match base[authority_start..].find('/') {
        Some(slash) => &base[..authority_start + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{base}/{database}?{query}"),
        None => format!("{base}/{database}"),
    }
}

/// Generate, for each `async fn name(store: Arc<dyn Store>)` in the calling module, a
/// test `sqlite::name` and a test `postgres::name` running it on a fresh store.
/// `store_tests!(multi_thread: name, ...)` runs them on a 4-thread runtime.
macro_rules! store_tests {
    (multi_thread: $($name:ident),* $(,)?) => {
        $crate::support::store_tests!(
            @with [tokio::test(flavor = "multi_thread", worker_threads = 4)] $($name),*
        );
    };
    ($($name:ident),* $(,)?) => {
        $crate::support::store_tests!(@with [tokio::test] $($name),*);
    };
    (@with [$test:meta] $($name:ident),*) => {
        mod sqlite {
            $(
                #[$test]
                async fn $name() {
                    let (store, _dir) = $crate::support::sqlite_store().await;
                    super::$name(store).await;
                }
            )*
        }
        mod postgres {
            $(
                #[$test]
                async fn $name() {
                    let store = $crate::support::postgres_store().await;
                    super::$name(store).await;
                }
            )*
        }
    };
}
pub(crate) use store_tests;

#[test]
fn url_with_database_replaces_only_the_path() {
    let check = |url: &str, expected: &str| assert_eq!(url_with_database(url, "db2"), expected);
    check("postgres://u:p@127.0.0.1:5433/postgres", "postgres://u:p@127.0.0.1:5433/db2");
    check("postgres://u@localhost:5433", "postgres://u@localhost:5433/db2");
    check(
        "postgres://u@/postgres?host=/tmp/pg&sslmode=disable",
        "postgres://u@/db2?host=/tmp/pg&sslmode=disable",
    );
    check("postgresql://localhost/x?sslmode=disable", "postgresql://localhost/db2?sslmode=disable");
}
