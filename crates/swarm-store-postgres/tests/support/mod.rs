//! A new database per test on the cluster named by `SWARM_TEST_POSTGRES_URL`.

use sqlx::{AssertSqlSafe, Connection, PgConnection};

const POSTGRES_URL_VAR: &str = "SWARM_TEST_POSTGRES_URL";

/// The URL of a new, empty database `swarm_test_<uuid>`.
pub async fn fresh_database_url() -> String {
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

    url_with_database(&url, &name)
}

/// `url` with its database path replaced by `database`, query parameters kept.
fn url_with_database(url: &str, database: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(base, query)| (base, Some(query)));
    let authority_start = base.find("://").map_or(0, |at| at + 3);
    let base = base[authority_start..].find('/').map_or(base, |slash| &base[..authority_start + slash]);
    match query {
        Some(query) => format!("{base}/{database}?{query}"),
        None => format!("{base}/{database}"),
    }
}
