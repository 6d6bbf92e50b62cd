//! The counts of tasks by status (migration 0023): what a listing's total and
//! `/api/stats` read instead of counting every task. Writers only add rows to
//! `task_count_changes`; a task of each store folds them into `task_counts` every second,
//! so the changes stay a second's worth and a count reads about that many rows.

use std::time::Duration;

use sqlx::{PgExecutor, PgPool};
use swarm_store::StoreResult;
use tokio::task::JoinHandle;

use crate::error::db;

const FOLD_EVERY: Duration = Duration::from_secs(1);

/// The counts by status, `(status, n)`, in the caller's snapshot: the folded counts plus
/// the changes not folded yet. A fold moves rows from one table to the other in one
/// transaction, so every snapshot sees each change once.
pub(crate) async fn by_status<'e>(executor: impl PgExecutor<'e>) -> StoreResult<Vec<(String, i64)>> {
    sqlx::query_as(
        "SELECT status, sum(n)::BIGINT FROM (
             SELECT status, n FROM task_counts UNION ALL SELECT status, n FROM task_count_changes
         ) counted GROUP BY status",
    )
    .fetch_all(executor)
    .await
    .map_err(db)
}

/// Fold the changes into the counts. Several stores may fold at once: each change is
/// deleted, and so added, by exactly one of them.
pub(crate) async fn fold(pool: &PgPool) -> StoreResult<()> {
    sqlx::query(
        "WITH folded AS (DELETE FROM task_count_changes RETURNING status, n)
         INSERT INTO task_counts (status, n)
         SELECT status, sum(n) FROM folded GROUP BY status
         ON CONFLICT (status) DO UPDATE SET n = task_counts.n + EXCLUDED.n",
    )
    .execute(pool)
    .await
    .map_err(db)?;
    Ok(())
}

/// Folds every second while the store lives.
pub(crate) struct Folder(JoinHandle<()>);

impl Folder {
    pub(crate) fn start(pool: PgPool) -> Folder {
        Folder(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(FOLD_EVERY);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if pool.is_closed() {
                    return;
                }
                if let Err(error) = fold(&pool).await {
                    // The changes wait for the next fold; every count still includes them.
                    tracing::warn!(%error, "could not fold the task counts' changes; will retry");
                }
            }
        }))
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        self.0.abort();
    }
}
