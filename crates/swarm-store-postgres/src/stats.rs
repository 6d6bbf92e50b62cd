//! Counts for `GET /api/stats`.

use sqlx::PgPool;
use swarm_domain::stats::{AgentCounts, Stats, TaskCounts};
use swarm_store::StoreResult;

use crate::error::db;

pub(crate) async fn stats(pool: &PgPool) -> StoreResult<Stats> {
    let mut stats = Stats::default();
    let agent_counts: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, count(*) FROM agents GROUP BY status")
            .fetch_all(pool)
            .await
            .map_err(db)?;
    for (status, n_agents) in agent_counts {
        let agents = &mut stats.agents;
        agents.total += n_agents;
        if let Some(slot) = agent_slot(agents, &status) {
            *slot += n_agents;
        }
    }
    let task_counts: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, count(*) FROM tasks GROUP BY status")
            .fetch_all(pool)
            .await
            .map_err(db)?;
    for (status, n_tasks) in task_counts {
        let tasks = &mut stats.tasks;
        tasks.total += n_tasks;
        if let Some(slot) = task_slot(tasks, &status) {
            *slot += n_tasks;
        }
    }
    Ok(stats)
}

fn agent_slot<'a>(counts: &'a mut AgentCounts, status: &str) -> Option<&'a mut i64> {
    match status {
        "idle" => Some(&mut counts.idle),
        "busy" => Some(&mut counts.busy),
        "offline" => Some(&mut counts.offline),
        _ => None,
    }
}

fn task_slot<'a>(counts: &'a mut TaskCounts, status: &str) -> Option<&'a mut i64> {
    match status {
        "backlog" => Some(&mut counts.backlog),
        "unassigned" => Some(&mut counts.unassigned),
        "offered" => Some(&mut counts.offered),
        "reviewing" => Some(&mut counts.reviewing),
        "pending" => Some(&mut counts.pending),
        "in_progress" => Some(&mut counts.in_progress),
        "paused" => Some(&mut counts.paused),
        "completed" => Some(&mut counts.completed),
        "failed" => Some(&mut counts.failed),
        "cancelled" => Some(&mut counts.cancelled),
        _ => None,
    }
}
