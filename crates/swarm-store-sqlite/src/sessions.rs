//! What runners report (session output lines and costs), and the counts of `/api/stats`.

use sqlx::{QueryBuilder, Sqlite, SqlitePool, sqlite::SqliteRow};
use swarm_domain::{
    agent::AgentStatus,
    id::TaskId,
    session::{NewSessionCost, NewSessionLogs, SessionCost, SessionLog},
    stats::{AgentCounts, Stats, TaskCounts},
    task::TaskStatus,
    time::Timestamp,
};
use swarm_store::{SessionCostFilter, StoreResult};

use crate::{
    SqliteStore,
    decode::{column, corrupt, db, get_agent_id, get_bool, get_opt_task_id, get_timestamp},
};

/// Rows per `INSERT`: 7 values each stays far below SQLite's limit on bound parameters.
const LINES_PER_INSERT: usize = 500;

pub(crate) async fn logs_append(
    store: &SqliteStore,
    logs: &NewSessionLogs,
    now: Timestamp,
) -> StoreResult<u64> {
    if logs.lines.is_empty() {
        return Ok(0);
    }
    let mut tx = store.begin_write().await?;
    // Line numbers continue across requests of the same (session, iteration), so a runner
    // may send its output in batches.
    let first: i64 = sqlx::query_scalar(
        "SELECT coalesce(max(line_number) + 1, 0) FROM session_logs
         WHERE session_id = ? AND iteration = ?",
    )
    .bind(&logs.session_id)
    .bind(logs.iteration)
    .fetch_one(&mut *tx)
    .await
    .map_err(db)?;
    let task_id = logs.task_id.map(|id| id.to_string());
    for (chunk_index, chunk) in logs.lines.chunks(LINES_PER_INSERT).enumerate() {
        let chunk_start = first + (chunk_index * LINES_PER_INSERT) as i64;
        let mut insert = QueryBuilder::<Sqlite>::new(
            "INSERT INTO session_logs (session_id, iteration, task_id, cli, line_number, content, created_at) ",
        );
        insert.push_values(chunk.iter().enumerate(), |mut row, (offset, line)| {
            row.push_bind(logs.session_id.clone())
                .push_bind(logs.iteration)
                .push_bind(task_id.clone())
                .push_bind(logs.cli.clone())
                .push_bind(chunk_start + offset as i64)
                .push_bind(line.clone())
                .push_bind(now.unix_millis());
        });
        insert.build().execute(&mut *tx).await.map_err(db)?;
    }
    tx.commit().await.map_err(db)?;
    Ok(logs.lines.len() as u64)
}

pub(crate) async fn logs_for_task(pool: &SqlitePool, task_id: TaskId) -> StoreResult<Vec<SessionLog>> {
    let rows = sqlx::query(
        "SELECT id, session_id, iteration, task_id, cli, line_number, content, created_at
         FROM session_logs WHERE task_id = ? ORDER BY id",
    )
    .bind(task_id.to_string())
    .fetch_all(pool)
    .await
    .map_err(db)?;
    rows.iter().map(log_from_row).collect()
}

fn log_from_row(row: &SqliteRow) -> StoreResult<SessionLog> {
    Ok(SessionLog {
        id: column(row, "id")?,
        session_id: column(row, "session_id")?,
        iteration: column(row, "iteration")?,
        task_id: get_opt_task_id(row, "task_id")?,
        cli: column(row, "cli")?,
        line_number: column(row, "line_number")?,
        content: column(row, "content")?,
        created_at: get_timestamp(row, "created_at")?,
    })
}

pub(crate) async fn cost_insert(
    store: &SqliteStore,
    cost: &NewSessionCost,
    now: Timestamp,
) -> StoreResult<SessionCost> {
    let mut tx = store.begin_write().await?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO session_costs (session_id, agent_id, task_id, total_cost_usd, input_tokens,
                                    output_tokens, cache_read_tokens, cache_write_tokens,
                                    duration_ms, num_turns, model, is_error, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         RETURNING id",
    )
    .bind(&cost.session_id)
    .bind(cost.agent_id.to_string())
    .bind(cost.task_id.map(|id| id.to_string()))
    .bind(cost.total_cost_usd)
    .bind(cost.input_tokens)
    .bind(cost.output_tokens)
    .bind(cost.cache_read_tokens)
    .bind(cost.cache_write_tokens)
    .bind(cost.duration_ms)
    .bind(cost.num_turns)
    .bind(cost.model.as_deref())
    .bind(cost.is_error)
    .bind(now.unix_millis())
    .fetch_one(&mut *tx)
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)?;
    Ok(SessionCost {
        id,
        session_id: cost.session_id.clone(),
        agent_id: cost.agent_id,
        task_id: cost.task_id,
        total_cost_usd: cost.total_cost_usd,
        input_tokens: cost.input_tokens,
        output_tokens: cost.output_tokens,
        cache_read_tokens: cost.cache_read_tokens,
        cache_write_tokens: cost.cache_write_tokens,
        duration_ms: cost.duration_ms,
        num_turns: cost.num_turns,
        model: cost.model.clone(),
        is_error: cost.is_error,
        created_at: now,
    })
}

pub(crate) async fn cost_list(
    pool: &SqlitePool,
    filter: &SessionCostFilter,
) -> StoreResult<Vec<SessionCost>> {
    let mut query = QueryBuilder::<Sqlite>::new(
        "SELECT id, session_id, agent_id, task_id, total_cost_usd, input_tokens, output_tokens,
                cache_read_tokens, cache_write_tokens, duration_ms, num_turns, model, is_error,
                created_at
         FROM session_costs WHERE 1 = 1",
    );
    if let Some(task_id) = filter.task_id {
        query.push(" AND task_id = ").push_bind(task_id.to_string());
    }
    if let Some(agent_id) = filter.agent_id {
        query.push(" AND agent_id = ").push_bind(agent_id.to_string());
    }
    query.push(" ORDER BY created_at DESC, id DESC LIMIT ").push_bind(filter.limit.max(0));
    let rows = query.build().fetch_all(pool).await.map_err(db)?;
    rows.iter().map(cost_from_row).collect()
}

fn cost_from_row(row: &SqliteRow) -> StoreResult<SessionCost> {
    Ok(SessionCost {
        id: column(row, "id")?,
        session_id: column(row, "session_id")?,
        agent_id: get_agent_id(row, "agent_id")?,
        task_id: get_opt_task_id(row, "task_id")?,
        total_cost_usd: column(row, "total_cost_usd")?,
        input_tokens: column(row, "input_tokens")?,
        output_tokens: column(row, "output_tokens")?,
        cache_read_tokens: column(row, "cache_read_tokens")?,
        cache_write_tokens: column(row, "cache_write_tokens")?,
        duration_ms: column(row, "duration_ms")?,
        num_turns: column(row, "num_turns")?,
        model: column(row, "model")?,
        is_error: get_bool(row, "is_error")?,
        created_at: get_timestamp(row, "created_at")?,
    })
}

pub(crate) async fn stats(pool: &SqlitePool) -> StoreResult<Stats> {
    // One snapshot for both tables.
    let mut tx = pool.begin().await.map_err(db)?;
    let agent_rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, count(*) FROM agents GROUP BY status")
            .fetch_all(&mut *tx)
            .await
            .map_err(db)?;
    let task_rows: Vec<(String, i64)> = sqlx::query_as("SELECT status, count(*) FROM tasks GROUP BY status")
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
    tx.commit().await.map_err(db)?;

    let mut agents = AgentCounts::default();
    for (status, n_agents) in agent_rows {
        let status = AgentStatus::parse(&status).map_err(|error| corrupt(error.0))?;
        agents.total += n_agents;
        *match status {
            AgentStatus::Idle => &mut agents.idle,
            AgentStatus::Busy => &mut agents.busy,
            AgentStatus::Offline => &mut agents.offline,
        } += n_agents;
    }
    let mut tasks = TaskCounts::default();
    for (status, n_tasks) in task_rows {
        let status = TaskStatus::parse(&status).map_err(|error| corrupt(error.0))?;
        tasks.total += n_tasks;
        *match status {
            TaskStatus::Backlog => &mut tasks.backlog,
            TaskStatus::Unassigned => &mut tasks.unassigned,
            TaskStatus::Offered => &mut tasks.offered,
            TaskStatus::Reviewing => &mut tasks.reviewing,
            TaskStatus::Pending => &mut tasks.pending,
            TaskStatus::InProgress => &mut tasks.in_progress,
            TaskStatus::Paused => &mut tasks.paused,
            TaskStatus::Completed => &mut tasks.completed,
            TaskStatus::Failed => &mut tasks.failed,
            TaskStatus::Cancelled => &mut tasks.cancelled,
        } += n_tasks;
    }
    Ok(Stats { agents, tasks })
}
