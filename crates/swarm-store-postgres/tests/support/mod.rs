//! A new database per test on the cluster named by `SWARM_TEST_POSTGRES_URL`, dropped
//! when the test ends.

use std::time::{Duration, Instant};

use sqlx::{AssertSqlSafe, Connection, PgConnection};

const POSTGRES_URL_VAR: &str = "SWARM_TEST_POSTGRES_URL";

/// A database `swarm_test_<uuid>` of one test's own, dropped (its connections closed
/// first) when the guard goes at the end of the test, passed or failed. Keep it longer
/// than every store and connection using it.
pub struct FreshDatabase {
    /// The URL naming this database.
    pub url: String,
    admin_url: String,
    name: String,
}

impl Drop for FreshDatabase {
    fn drop(&mut self) {
        // Drop cannot await, and the test's runtime may be shutting down or blocked by this
        // very call: a thread with a small runtime of its own, waited for.
        let (admin_url, name) = (self.admin_url.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(async {
                let mut admin = PgConnection::connect(&admin_url).await?;
                let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
                sqlx::query(AssertSqlSafe(sql)).execute(&mut admin).await?;
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

/// A new, empty database `swarm_test_<uuid>`.
pub async fn fresh_database() -> FreshDatabase {
    let url = match std::env::var(POSTGRES_URL_VAR) {
        Ok(url) if !url.trim().is_empty() => url.trim().to_string(),
        _ => panic!(
            "{POSTGRES_URL_VAR} is not set: run `scripts/test`, which starts a throwaway \
             PostgreSQL cluster, or start one with `scripts/pg-cluster start DIR` and export \
             {POSTGRES_URL_VAR}=<the postgres:// URL it prints>"
        ),
    };
    let name = format!("swarm_test_{}", uuid::Uuid::new_v4().simple());
    let mut admin = PgConnection::connect(&url)
        .await
        .unwrap_or_else(|err| panic!("connect to {POSTGRES_URL_VAR}={url}: {err}"));
    sqlx::query(AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|err| panic!("create database {name}: {err}"));
    admin.close().await.ok();

    FreshDatabase { url: url_with_database(&url, &name), admin_url: url, name }
}

/// Polls `probe` every 50 ms until it answers `Some`, for at most `within`; fails the
/// test with `what` when it never does.
#[allow(dead_code, reason = "each test binary uses what it needs of this module")]
pub async fn eventually<T, F, Fut>(within: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out after {within:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `url` naming `database` instead of its own, everything else kept (a Unix socket's
/// user goes in the query: `postgres:///db?host=/run/postgresql&user=u`).
fn url_with_database(url: &str, database: &str) -> String {
    let mut parsed = url::Url::parse(url)
        .unwrap_or_else(|err| panic!("{POSTGRES_URL_VAR}={url} is not a URL this test can read: {err}"));
    parsed.set_path(database);
    parsed.into()
}
