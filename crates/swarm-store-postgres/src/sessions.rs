//! What runners report about agent sessions: output lines and costs.

use sqlx::{PgPool, Postgres, QueryBuilder};
use swarm_domain::{
    id::TaskId,
    session::{NewSessionCost, NewSessionLogs, SessionCost, SessionLog},
    time::Timestamp,
};
use swarm_store::{SessionCostFilter, StoreResult};

use crate::{
    error::db,
    rows::{session_cost_columns, session_cost_from_row, session_log_from_row},
};

/// The first key of the advisory locks that serialize appends to one (session,
/// iteration); the second is a hash of that pair. The two-key lock space never meets the
/// one-key locks of registration and of sqlx's migrator.
const SESSION_LOG_LOCK_CLASS: i32 = 0x736c_6f67; // "slog"

pub(crate) async fn logs_append(pool: &PgPool, logs: &NewSessionLogs, now: Timestamp) -> StoreResult<u64> {
    if logs.lines.is_empty() {
        return Ok(0);
    }
    let mut tx = pool.begin().await.map_err(db)?;
    // Two runners appending to the same (session, iteration) at once would both read the
    // same last line number; taking turns keeps the numbering gapless and unique.
    sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2 || ':' || $3::text))")
        .bind(SESSION_LOG_LOCK_CLASS)
        .bind(&logs.session_id)
        .bind(logs.iteration)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    let inserted = sqlx::query(
        "INSERT INTO session_logs (session_id, iteration, task_id, cli, line_number, content, created_at) \
         SELECT $1, $2, $3, $4, \
                (SELECT coalesce(max(line_number) + 1, 0) FROM session_logs \
                 WHERE session_id = $1 AND iteration = $2) + u.ord - 1, \
                u.content, $6 \
         FROM unnest($5::text[]) WITH ORDINALITY AS u(content, ord) \
         ORDER BY u.ord",
    )
    .bind(&logs.session_id)
    .bind(logs.iteration)
    .bind(logs.task_id.map(|id| id.as_uuid()))
    .bind(logs.cli.as_deref())
    .bind(&logs.lines)
    .bind(now.datetime())
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)?;
    Ok(inserted.rows_affected())
}

pub(crate) async fn logs_for_task(pool: &PgPool, task_id: TaskId) -> StoreResult<Vec<SessionLog>> {
    sqlx::query(
        "SELECT id, session_id, iteration, task_id, cli, line_number, content, created_at \
         FROM session_logs WHERE task_id = $1 ORDER BY id",
    )
    .bind(task_id.as_uuid())
    .try_map(session_log_from_row)
    .fetch_all(pool)
    .await
    .map_err(db)
}

pub(crate) async fn cost_insert(
    pool: &PgPool,
    cost: &NewSessionCost,
    now: Timestamp,
) -> StoreResult<SessionCost> {
    sqlx::query(concat!(
        "INSERT INTO session_costs (session_id, agent_id, task_id, total_cost_usd, input_tokens, \
                                    output_tokens, cache_read_tokens, cache_write_tokens, \
                                    duration_ms, num_turns, model, is_error, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING ",
        session_cost_columns!()
    ))
    .bind(&cost.session_id)
    .bind(cost.agent_id.as_uuid())
    .bind(cost.task_id.map(|id| id.as_uuid()))
    .bind(cost.total_cost_usd)
    .bind(cost.input_tokens)
    .bind(cost.output_tokens)
    .bind(cost.cache_read_tokens)
    .bind(cost.cache_write_tokens)
    .bind(cost.duration_ms)
    .bind(cost.num_turns)
    .bind(cost.model.as_deref())
    .bind(cost.is_error)
    .bind(now.datetime())
    .try_map(session_cost_from_row)
    .fetch_one(pool)
    .await
    .map_err(db)
}

pub(crate) async fn cost_list(pool: &PgPool, filter: &SessionCostFilter) -> StoreResult<Vec<SessionCost>> {
    let mut query = QueryBuilder::<Postgres>::new(concat!(
        "SELECT ",
        session_cost_columns!(),
        " FROM session_costs WHERE TRUE"
    ));
    if let Some(task_id) = filter.task_id {
        query.push(" AND task_id = ").push_bind(task_id.as_uuid());
    }
    if let Some(agent_id) = filter.agent_id {
        query.push(" AND agent_id = ").push_bind(agent_id.as_uuid());
    }
    query.push(" ORDER BY created_at DESC, id DESC LIMIT ").push_bind(filter.limit.max(0));
    query.build().try_map(session_cost_from_row).fetch_all(pool).await.map_err(db)
}
