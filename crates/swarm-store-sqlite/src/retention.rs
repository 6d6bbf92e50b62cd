//! Retention: removing the record of finished work in small batches, and giving the
//! freed pages back.
//!
//! Every batch is one write transaction on the writer thread, at most `limit` rows, found
//! through an index on the row's age (`0016_retention.sql`), so that a batch costs about
//! the same whether the table holds a thousand rows or a million and no request waits
//! long behind it. A row is old enough when both it and, if it belongs to a task, that
//! task's end are older than the cutoff: a running task's rows stay, whatever their age.

use rusqlite::{Connection, params};
use swarm_domain::{retention::Expiring, time::Timestamp};
use swarm_store::StoreResult;

use crate::{error::db, sql};

/// The task of a row is over, and was over before the cutoff (`?1`).
const TASK_ENDED_BEFORE_CUTOFF: &str =
    "t.status IN ('completed', 'failed', 'cancelled') AND t.finished_at IS NOT NULL AND t.finished_at < ?1";

/// Free pages kept for reuse: SQLite fills them before it grows the file, so a hub in
/// steady state never needs to give them back and take them again.
const FREE_PAGES_KEPT: i64 = 1024;
/// Pages given back per step, so that one step holds the writer for milliseconds.
const PAGES_PER_STEP: i64 = 1024;

pub(crate) fn remove(tx: &Connection, kind: Expiring, older_than: Timestamp, limit: u32) -> StoreResult<u64> {
    let cutoff = older_than.unix_millis();
    let limit = i64::from(limit);
    let removed = match kind {
        Expiring::SessionLogs => sql::execute(
            tx,
            &format!(
                "DELETE FROM session_logs WHERE id IN (
                     SELECT l.id FROM session_logs l LEFT JOIN tasks t ON t.id = l.task_id
                     WHERE l.created_at < ?1 AND (l.task_id IS NULL OR ({TASK_ENDED_BEFORE_CUTOFF}))
                     ORDER BY l.created_at LIMIT ?2)"
            ),
            params![cutoff, limit],
        )?,
        Expiring::Events => remove_events(tx, cutoff, limit)?,
        Expiring::DeliveredTriggers => {
            // Three small tables: each gets the whole limit, the batch stays short.
            let results = sql::execute(
                tx,
                "DELETE FROM task_awaits WHERE task_id IN (
                     SELECT task_id FROM task_awaits WHERE delivered_at < ?1 LIMIT ?2)",
                params![cutoff, limit],
            )?;
            let handoffs = sql::execute(
                tx,
                "DELETE FROM task_handoffs WHERE id IN (
                     SELECT id FROM task_handoffs WHERE notified_at < ?1 ORDER BY id LIMIT ?2)",
                params![cutoff, limit],
            )?;
            let marks = sql::execute(
                tx,
                "DELETE FROM webhook_deliveries WHERE rowid IN (
                     SELECT rowid FROM webhook_deliveries WHERE expires_at < ?1 LIMIT ?2)",
                params![cutoff, limit],
            )?;
            // Slack's once-only marks: its retries come within hours, and the bridge
            // announces outcomes of tasks finished within a day.
            let slack = sql::execute(
                tx,
                "DELETE FROM slack_marks WHERE rowid IN (
                     SELECT rowid FROM slack_marks WHERE created_at < ?1 ORDER BY created_at LIMIT ?2)",
                params![cutoff, limit],
            )?;
            // The polls daily budgets refused (kept once per agent, task and day).
            let refusals = sql::execute(
                tx,
                "DELETE FROM budget_refusals WHERE rowid IN (
                     SELECT rowid FROM budget_refusals WHERE created_at < ?1 ORDER BY created_at LIMIT ?2)",
                params![cutoff, limit],
            )?;
            results + handoffs + marks + slack + refusals
        }
        Expiring::ReadMail => {
            // A read message that a kept reply points at stays until the reply goes.
            let mail = sql::execute(
                tx,
                "DELETE FROM mail WHERE id IN (
                     SELECT m.id FROM mail m
                     WHERE m.status = 'read' AND m.read_at < ?1
                       AND (m.awaiting_response = 0 OR m.answered_at IS NOT NULL)
                       AND NOT EXISTS (SELECT 1 FROM mail r WHERE r.in_reply_to = m.id)
                     ORDER BY m.read_at LIMIT ?2)",
                params![cutoff, limit],
            )?;
            let inbox = sql::execute(
                tx,
                "DELETE FROM inbox_messages WHERE id IN (
                     SELECT id FROM inbox_messages
                     WHERE status IN ('read', 'responded', 'delegated') AND last_updated_at < ?1
                     ORDER BY last_updated_at LIMIT ?2)",
                params![cutoff, limit],
            )?;
            mail + inbox
        }
        Expiring::FinishedTasks => remove_finished_tasks(tx, cutoff, limit)?,
        // Its own expiry, not its age: `mcp_task_get` stops seeing a task at `expires_at`.
        Expiring::McpTasks => sql::execute(
            tx,
            "DELETE FROM mcp_tasks WHERE id IN (
                 SELECT id FROM mcp_tasks WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)",
            params![cutoff, limit],
        )?,
    };
    Ok(u64::try_from(removed).unwrap_or(0))
}

/// Finished tasks that nothing refers to any more, with everything of theirs. A task
/// that another depends on waits until that one goes (a later batch).
fn remove_finished_tasks(tx: &Connection, cutoff: i64, limit: i64) -> StoreResult<usize> {
    let ids: Vec<String> = sql::all(
        tx,
        "SELECT t.id FROM tasks t
         WHERE t.finished_at IS NOT NULL AND t.finished_at < ?1
           AND t.status IN ('completed', 'failed', 'cancelled')
           AND (t.notified_at IS NOT NULL OR t.status = 'cancelled'
                OR EXISTS (SELECT 1 FROM agents l WHERE l.id = t.agent_id AND l.is_lead = 1))
           AND NOT EXISTS (SELECT 1 FROM task_dependencies d WHERE d.depends_on_task_id = t.id)
           AND NOT EXISTS (SELECT 1 FROM task_awaits a WHERE a.task_id = t.id)
           AND NOT EXISTS (SELECT 1 FROM task_awaits a WHERE a.parent_task_id = t.id)
           AND NOT EXISTS (SELECT 1 FROM inbox_messages m WHERE m.delegated_to_task_id = t.id)
         ORDER BY t.finished_at LIMIT ?2",
        params![cutoff, limit],
        |row| row.get::<_, String>(0).map_err(db),
    )?;
    for id in &ids {
        for statement in [
            "DELETE FROM task_tags WHERE task_id = ?1",
            "DELETE FROM task_dependencies WHERE task_id = ?1",
            "DELETE FROM task_handoffs WHERE task_id = ?1",
            "DELETE FROM session_logs WHERE task_id = ?1",
            "DELETE FROM session_costs WHERE task_id = ?1",
        ] {
            sql::execute(tx, statement, [id])?;
        }
        let events: Vec<(i64, Option<String>, i64)> = {
            let mut statement = tx
                .prepare_cached("DELETE FROM events WHERE task_id = ?1 RETURNING seq, agent_id, created_at")
                .map_err(db)?;
            let rows =
                statement.query_map([id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?))).map_err(db)?;
            rows.collect::<Result<_, _>>().map_err(db)?
        };
        unindex_events(tx, &events)?;
        sql::execute(tx, "DELETE FROM tasks WHERE id = ?1", [id])?;
    }
    Ok(ids.len())
}

/// Events go with their entries in the index by agent (`agent_events`); events the
/// indexer has not reached yet have none, and it will not find them.
fn remove_events(tx: &Connection, cutoff: i64, limit: i64) -> StoreResult<usize> {
    let removed: Vec<(i64, Option<String>, i64)> = {
        let mut statement = tx
            .prepare_cached(&format!(
                "DELETE FROM events WHERE seq IN (
                     SELECT e.seq FROM events e LEFT JOIN tasks t ON t.id = e.task_id
                     WHERE e.created_at < ?1 AND (e.task_id IS NULL OR ({TASK_ENDED_BEFORE_CUTOFF}))
                     ORDER BY e.created_at LIMIT ?2)
                 RETURNING seq, agent_id, created_at"
            ))
            .map_err(db)?;
        let rows = statement
            .query_map(params![cutoff, limit], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)?
    };
    unindex_events(tx, &removed)?;
    Ok(removed.len())
}

fn unindex_events(tx: &Connection, removed: &[(i64, Option<String>, i64)]) -> StoreResult<()> {
    let mut unindex = tx
        .prepare_cached("DELETE FROM agent_events WHERE agent_id = ?1 AND created_at = ?2 AND event_seq = ?3")
        .map_err(db)?;
    for (seq, agent, created_at) in removed {
        if let Some(agent) = agent {
            unindex.execute(params![agent, created_at, seq]).map_err(db)?;
        }
    }
    Ok(())
}

/// One bounded step of `incremental_vacuum` when more than [`FREE_PAGES_KEPT`] pages are
/// free; nothing on a file made before `auto_vacuum = INCREMENTAL` (its free pages are
/// still reused: the file stops growing, it does not shrink).
pub(crate) fn reclaim(connection: &Connection) -> StoreResult<u64> {
    let mode: i64 = connection.query_row("PRAGMA auto_vacuum", [], |row| row.get(0)).map_err(db)?;
    if mode != 2 {
        return Ok(0);
    }
    let free: i64 = connection.query_row("PRAGMA freelist_count", [], |row| row.get(0)).map_err(db)?;
    let step = (free - FREE_PAGES_KEPT).clamp(0, PAGES_PER_STEP);
    if step == 0 {
        return Ok(0);
    }
    let mut statement = connection.prepare(&format!("PRAGMA incremental_vacuum({step})")).map_err(db)?;
    let mut rows = statement.query([]).map_err(db)?;
    while rows.next().map_err(db)?.is_some() {}
    Ok(u64::try_from(step).unwrap_or(0))
}
