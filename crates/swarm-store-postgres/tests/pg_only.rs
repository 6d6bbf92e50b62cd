//! What only the PostgreSQL store has: tested on a new database of the cluster named by
//! `SWARM_TEST_POSTGRES_URL` (without it every test fails, naming it).

use std::time::Duration;

use sqlx::{Connection, PgConnection};
use swarm_domain::time::Timestamp;
use swarm_store::testkit::counts;
use swarm_store_postgres::PgStore;

mod support;

/// The stats and a listing's total read the counts by status that triggers keep
/// (migration 0023) rather than counting every task: after creates, claims, finishes,
/// cancels, tasks removed by retention and a row written by another connection, they are
/// what counting the rows gives, before the changes are folded into the counts and after.
#[tokio::test]
async fn the_counts_by_status_stay_what_counting_the_rows_gives() {
    let database = support::fresh_database().await;
    let store = PgStore::connect(&database.url).await.unwrap();
    let mut raw = PgConnection::connect(&database.url).await.unwrap();
    counts::counted_history(&store, Timestamp::now()).await;
    sqlx::query(
        "INSERT INTO tasks (id, task, status, source, created_at, last_updated_at)
         VALUES ('00000000-0000-7000-8000-00000000000a', 'written by another process', 'backlog', 'api', now(), now())",
    )
    .execute(&mut raw)
    .await
    .unwrap();
    let counted = counted_rows(&mut raw).await;
    assert_eq!(counted.iter().map(|(_, n)| n).sum::<i64>(), 6, "{counted:?}");
    counts::assert_counts_are(&store, &counted, "just after the writes").await;

    // The store folds the changes into the counts every second.
    let url = database.url.as_str();
    support::eventually(Duration::from_secs(30), "the changes folded into the counts", || async move {
        let mut probe = PgConnection::connect(url).await.unwrap();
        let (changes,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM task_count_changes").fetch_one(&mut probe).await.unwrap();
        probe.close().await.ok();
        (changes == 0).then_some(())
    })
    .await;
    counts::assert_counts_are(&store, &counted, "after the fold").await;
    // Folded, the kept counts alone are the rows' counts.
    let kept: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, n FROM task_counts WHERE n <> 0 ORDER BY status")
            .fetch_all(&mut raw)
            .await
            .unwrap();
    assert_eq!(kept, counted);
    raw.close().await.unwrap();
    store.close().await;
}

async fn counted_rows(raw: &mut PgConnection) -> Vec<(String, i64)> {
    sqlx::query_as("SELECT status, count(*) FROM tasks GROUP BY status ORDER BY status")
        .fetch_all(raw)
        .await
        .unwrap()
}
