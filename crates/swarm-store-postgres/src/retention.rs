//! Retention: removing the record of finished work in small batches.
//!
//! Each batch is one statement (its own transaction) of at most `limit` rows found
//! through an index on the row's age (`0016_retention.sql`). A row is old enough when
//! both it and, if it belongs to a task, that task's end are older than the cutoff: a
//! running task's rows stay, whatever their age. The space goes back to PostgreSQL's free
//! space map through autovacuum and is reused; nothing here shrinks the files.

use sqlx::PgPool;
use swarm_domain::{retention::Expiring, time::Timestamp};
use swarm_store::StoreResult;

use crate::error::db;

/// `$table`'s rows (alias `x`, key `$key`) older than the cutoff (`$1`) whose task, if
/// any, was over before the cutoff; at most `$2`. A literal, as sqlx wants its SQL.
macro_rules! old_rows_of_finished_tasks {
    ($table:literal, $key:literal) => {
        concat!(
            "DELETE FROM ",
            $table,
            " WHERE ",
            $key,
            " IN (
                 SELECT x.",
            $key,
            " FROM ",
            $table,
            " x LEFT JOIN tasks t ON t.id = x.task_id
                 WHERE x.created_at < $1
                   AND (x.task_id IS NULL OR (t.status IN ('completed', 'failed', 'cancelled')
                        AND t.finished_at IS NOT NULL AND t.finished_at < $1))
                 ORDER BY x.created_at LIMIT $2)"
        )
    };
}

pub(crate) async fn remove(
    pool: &PgPool,
    kind: Expiring,
    older_than: Timestamp,
    limit: u32,
) -> StoreResult<u64> {
    if kind == Expiring::FinishedTasks {
        return remove_finished_tasks(pool, older_than, limit).await;
    }
    let statements: &[&'static str] = match kind {
        Expiring::SessionLogs => &[old_rows_of_finished_tasks!("session_logs", "id")],
        // The event log has no index on its id (0021): its rows go by `ctid`.
        Expiring::Events => &[old_rows_of_finished_tasks!("events", "ctid")],
        Expiring::DeliveredTriggers => &[
            "DELETE FROM task_awaits WHERE task_id IN (
                 SELECT task_id FROM task_awaits WHERE delivered_at < $1 LIMIT $2)",
            "DELETE FROM task_handoffs WHERE id IN (
                 SELECT id FROM task_handoffs WHERE notified_at < $1 ORDER BY id LIMIT $2)",
            "DELETE FROM webhook_deliveries WHERE ctid IN (
                 SELECT ctid FROM webhook_deliveries WHERE expires_at < $1 LIMIT $2)",
            // Slack's once-only marks: its retries come within hours, and the bridge
            // announces outcomes of tasks finished within a day.
            "DELETE FROM slack_marks WHERE ctid IN (
                 SELECT ctid FROM slack_marks WHERE created_at < $1 ORDER BY created_at LIMIT $2)",
            // The polls daily budgets refused (kept once per agent, task and day).
            "DELETE FROM budget_refusals WHERE ctid IN (
                 SELECT ctid FROM budget_refusals WHERE created_at < $1 ORDER BY created_at LIMIT $2)",
        ],
        Expiring::ReadMail => &[
            // A read message that a kept reply points at stays until the reply goes.
            "DELETE FROM mail WHERE id IN (
                 SELECT m.id FROM mail m
                 WHERE m.status = 'read' AND m.read_at < $1
                   AND (NOT m.awaiting_response OR m.answered_at IS NOT NULL)
                   AND NOT EXISTS (SELECT 1 FROM mail r WHERE r.in_reply_to = m.id)
                 ORDER BY m.read_at LIMIT $2)",
            "DELETE FROM inbox_messages WHERE id IN (
                 SELECT id FROM inbox_messages
                 WHERE status IN ('read', 'responded', 'delegated') AND last_updated_at < $1
                 ORDER BY last_updated_at LIMIT $2)",
        ],
        Expiring::FinishedTasks => &[],
        // Its own expiry, not its age: `mcp_task_get` stops seeing a task at `expires_at`.
        Expiring::McpTasks => &["DELETE FROM mcp_tasks WHERE id IN (
             SELECT id FROM mcp_tasks WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2)"],
    };
    let mut tx = pool.begin().await.map_err(db)?;
    let mut removed = 0;
    for statement in statements {
        let statement: &'static str = statement;
        removed += sqlx::query(statement)
            .bind(older_than.datetime())
            .bind(i64::from(limit))
            .execute(&mut *tx)
            .await
            .map_err(db)?
            .rows_affected();
    }
    tx.commit().await.map_err(db)?;
    Ok(removed)
}

/// Finished tasks that nothing refers to any more, with everything of theirs. A task
/// that another depends on waits until that one goes (a later batch). The rows are
/// locked (`FOR UPDATE SKIP LOCKED`): two replicas' batches take different tasks.
async fn remove_finished_tasks(pool: &PgPool, older_than: Timestamp, limit: u32) -> StoreResult<u64> {
    let mut tx = pool.begin().await.map_err(db)?;
    let ids: Vec<uuid::Uuid> = sqlx::query_scalar(
        "SELECT t.id FROM tasks t
         WHERE t.finished_at IS NOT NULL AND t.finished_at < $1
           AND t.status IN ('completed', 'failed', 'cancelled')
           AND (t.notified_at IS NOT NULL OR t.status = 'cancelled'
                OR EXISTS (SELECT 1 FROM agents l WHERE l.id = t.agent_id AND l.is_lead))
           AND NOT EXISTS (SELECT 1 FROM task_dependencies d WHERE d.depends_on_task_id = t.id)
           AND NOT EXISTS (SELECT 1 FROM task_awaits a WHERE a.task_id = t.id)
           AND NOT EXISTS (SELECT 1 FROM task_awaits a WHERE a.parent_task_id = t.id)
           AND NOT EXISTS (SELECT 1 FROM inbox_messages m WHERE m.delegated_to_task_id = t.id)
         ORDER BY t.finished_at LIMIT $2
         FOR UPDATE OF t SKIP LOCKED",
    )
    .bind(older_than.datetime())
    .bind(i64::from(limit))
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    for statement in [
        "DELETE FROM task_tags WHERE task_id = ANY($1)",
        "DELETE FROM task_dependencies WHERE task_id = ANY($1)",
        "DELETE FROM task_handoffs WHERE task_id = ANY($1)",
        "DELETE FROM session_logs WHERE task_id = ANY($1)",
        "DELETE FROM session_costs WHERE task_id = ANY($1)",
        "DELETE FROM events WHERE task_id = ANY($1)",
    ] {
        sqlx::query(statement).bind(&ids).execute(&mut *tx).await.map_err(db)?;
    }
    let removed =
        sqlx::query("DELETE FROM tasks WHERE id = ANY($1)").bind(&ids).execute(&mut *tx).await.map_err(db)?;
    tx.commit().await.map_err(db)?;
    Ok(removed.rows_affected())
}
