//! Shared fixtures of the `it` test binary: a fresh store of each backend per test.
//!
//! SQLite: a new file in a temporary folder (never `sqlite::memory:`, whose pooled
//! connections each see their own empty database). PostgreSQL: a new database
//! `swarm_test_<uuid>` on the cluster named by `SWARM_TEST_POSTGRES_URL`, dropped when the
//! test ends ([`PgDatabase`]); without that variable the PostgreSQL variants fail, naming
//! it, rather than pass by skipping.

use std::sync::Arc;

use sqlx::Connection;
use swarm_store::Store;
use tempfile::TempDir;

pub mod clock;
pub mod kill;
mod wait;
pub use wait::{WITHIN, child_exit_within, eventually, eventually_showing, eventually_within};

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

/// A PostgreSQL store on a new, empty database; keep the database guard as long as the
/// store.
pub async fn postgres_store() -> (Arc<dyn Store>, PgDatabase) {
    let database = postgres_fresh_database(&postgres_url()).await;
    let store = swarm_store_postgres::PgStore::connect(&database.url)
        .await
        .unwrap_or_else(|err| panic!("connect the PostgreSQL store to {}: {err}", database.url));
    (Arc::new(store), database)
}

/// A new, empty database on the PostgreSQL test cluster, dropped with its guard.
pub async fn postgres_database() -> PgDatabase {
    postgres_fresh_database(&postgres_url()).await
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

/// A database of one test's own on the PostgreSQL test cluster, dropped (its
/// connections closed first) when the guard goes at the end of the test, passed or
/// failed. Declare it before the hubs and stores using it.
pub struct PgDatabase {
    /// The URL naming this database.
    pub url: String,
    admin_url: String,
    name: String,
}

impl PgDatabase {
    /// The database for a hub.
    pub fn database(&self) -> crate::hub::Database {
        crate::hub::Database::Postgres(self.url.clone())
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        // Drop cannot await, and the test's runtime may be shutting down or blocked by this
        // very call: a thread with a small runtime of its own, waited for.
        let (admin_url, name) = (self.admin_url.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(async {
                let mut admin = sqlx::PgConnection::connect(&admin_url).await?;
                let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
                sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut admin).await?;
                admin.close().await.ok();
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
            })
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(err)) => eprintln!("warning: the test database {} was not dropped: {err}", self.name),
            Err(_) => eprintln!("warning: dropping the test database {} panicked", self.name),
        }
    }
}

/// Create `swarm_test_<uuid>` on the cluster at `url`; the guard names it and drops it.
pub async fn postgres_fresh_database(url: &str) -> PgDatabase {
    let name = format!("swarm_test_{}", uuid::Uuid::new_v4().simple());
    let mut admin = sqlx::PgConnection::connect(url)
        .await
        .unwrap_or_else(|err| panic!("connect to {POSTGRES_URL_VAR}={url}: {err}"));
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|err| panic!("create database {name}: {err}"));
    admin.close().await.ok();
    PgDatabase { url: url_with_database(url, &name), admin_url: url.to_string(), name }
}

/// `url` naming `database` instead of its own, everything else kept. A URL with a user
/// and no host (`postgres://u@/db?host=/run/postgresql`) is not one `url` parses: name
/// the user in the query instead (`postgres:///db?host=/run/postgresql&user=u`).
pub fn url_with_database(url: &str, database: &str) -> String {
    let mut parsed = url::Url::parse(url)
        .unwrap_or_else(|err| panic!("{POSTGRES_URL_VAR}={url} is not a URL this test can read: {err}"));
    parsed.set_path(database);
    parsed.into()
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
                    let (store, _database) = $crate::support::postgres_store().await;
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
        "postgres:///postgres?host=/tmp/pg&user=u&sslmode=disable",
        "postgres:///db2?host=/tmp/pg&user=u&sslmode=disable",
    );
    check("postgresql://localhost/x?sslmode=disable", "postgresql://localhost/db2?sslmode=disable");
}
