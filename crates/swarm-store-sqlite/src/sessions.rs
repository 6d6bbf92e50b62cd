//! What runners report (session output lines and costs), and the counts of `/api/stats`.

use rusqlite::{Connection, Row, params};
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
    error::{corrupt, db},
    rows::{column, get_agent_id, get_bool, get_opt_task_id, get_timestamp},
    sql::{self, Sql},
};

pub(crate) fn logs_append(tx: &Connection, logs: &NewSessionLogs, now: Timestamp) -> StoreResult<u64> {
    // Line numbers continue across requests of the same (session, iteration), so a runner
    // may send its output in batches.
    let first: i64 = sql::scalar(
        tx,
        "SELECT coalesce(max(line_number) + 1, 0) FROM session_logs
         WHERE session_id = ? AND iteration = ?",
        params![logs.session_id, logs.iteration],
    )?;
    let task_id = logs.task_id.map(|id| id.to_string());
    // One prepared statement run per line: no statement to build, nothing to parse twice.
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO session_logs (session_id, iteration, task_id, cli, line_number, content, created_at)
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .map_err(db)?;
    for (offset, line) in logs.lines.iter().enumerate() {
        insert
            .execute(params![
                logs.session_id,
                logs.iteration,
                task_id,
                logs.cli,
                first + offset as i64,
                line,
                now.unix_millis(),
            ])
            .map_err(db)?;
    }
    Ok(logs.lines.len() as u64)
}

pub(crate) fn logs_for_task(connection: &Connection, task_id: TaskId) -> StoreResult<Vec<SessionLog>> {
    sql::all(
        connection,
        "SELECT id, session_id, iteration, task_id, cli, line_number, content, created_at
         FROM session_logs WHERE task_id = ? ORDER BY id",
        [task_id.to_string()],
        log_from_row,
    )
}

fn log_from_row(row: &Row<'_>) -> StoreResult<SessionLog> {
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

pub(crate) fn cost_insert(
    tx: &Connection,
    cost: &NewSessionCost,
    now: Timestamp,
) -> StoreResult<SessionCost> {
    let id: i64 = sql::scalar(
        tx,
        "INSERT INTO session_costs (session_id, agent_id, task_id, total_cost_usd, input_tokens,
                                    output_tokens, cache_read_tokens, cache_write_tokens,
                                    duration_ms, num_turns, model, is_error, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         RETURNING id",
        params![
            cost.session_id,
            cost.agent_id.to_string(),
            cost.task_id.map(|id| id.to_string()),
            cost.total_cost_usd,
            cost.input_tokens,
            cost.output_tokens,
            cost.cache_read_tokens,
            cost.cache_write_tokens,
            cost.duration_ms,
            cost.num_turns,
            cost.model,
            cost.is_error,
            now.unix_millis(),
        ],
    )?;
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

pub(crate) fn cost_list(
    connection: &Connection,
    filter: &SessionCostFilter,
) -> StoreResult<Vec<SessionCost>> {
    let mut query = Sql::new(
        "SELECT id, session_id, agent_id, task_id, total_cost_usd, input_tokens, output_tokens,
                cache_read_tokens, cache_write_tokens, duration_ms, num_turns, model, is_error,
                created_at
         FROM session_costs WHERE 1 = 1",
    );
    if let Some(task_id) = filter.task_id {
        query.push(" AND task_id = ").bind(task_id.to_string());
    }
    if let Some(agent_id) = filter.agent_id {
        query.push(" AND agent_id = ").bind(agent_id.to_string());
    }
    query.push(" ORDER BY created_at DESC, id DESC LIMIT ").bind(filter.limit.max(0));
    query.all(connection, cost_from_row)
}

fn cost_from_row(row: &Row<'_>) -> StoreResult<SessionCost> {
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

/// The counts; the caller runs both queries in one snapshot.
pub(crate) fn stats(snapshot: &Connection) -> StoreResult<Stats> {
    let count_row = |row: &Row<'_>| Ok((column::<String>(row, "status")?, column::<i64>(row, "n")?));
    let agent_rows =
        sql::all(snapshot, "SELECT status, count(*) AS n FROM agents GROUP BY status", [], count_row)?;
    // Kept by triggers (migration 0017) rather than counted: a million tasks took 200 ms.
    let task_rows = sql::all(snapshot, "SELECT status, n FROM task_counts", [], count_row)?;

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
