//! Counts for `GET /api/stats`.

use sqlx::PgPool;
use swarm_domain::{
    agent::AgentStatus,
    stats::{AgentCounts, Stats, TaskCounts},
    task::TaskStatus,
};
use swarm_store::StoreResult;

use crate::error::db;

/// Rows with a status this version does not know still count towards the totals.
pub(crate) async fn stats(pool: &PgPool) -> StoreResult<Stats> {
    let mut stats = Stats::default();
    let agent_counts: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, count(*) FROM agents GROUP BY status")
            .fetch_all(pool)
            .await
            .map_err(db)?;
    for (status, n_agents) in agent_counts {
        stats.agents.total += n_agents;
        if let Ok(status) = AgentStatus::parse(&status) {
            *agent_slot(&mut stats.agents, status) += n_agents;
        }
    }
    // Kept by triggers (migration 0023): agents are few, tasks may be millions.
    let task_counts = crate::counts::by_status(pool).await?;
    for (status, n_tasks) in task_counts {
        stats.tasks.total += n_tasks;
        if let Ok(status) = TaskStatus::parse(&status) {
            *task_slot(&mut stats.tasks, status) += n_tasks;
        }
    }
    Ok(stats)
}

fn agent_slot(counts: &mut AgentCounts, status: AgentStatus) -> &mut i64 {
    match status {
        AgentStatus::Idle => &mut counts.idle,
        AgentStatus::Busy => &mut counts.busy,
        AgentStatus::Offline => &mut counts.offline,
    }
}

fn task_slot(counts: &mut TaskCounts, status: TaskStatus) -> &mut i64 {
    match status {
        TaskStatus::Backlog => &mut counts.backlog,
        TaskStatus::Unassigned => &mut counts.unassigned,
        TaskStatus::Offered => &mut counts.offered,
        TaskStatus::Reviewing => &mut counts.reviewing,
        TaskStatus::Pending => &mut counts.pending,
        TaskStatus::InProgress => &mut counts.in_progress,
        TaskStatus::Paused => &mut counts.paused,
        TaskStatus::Completed => &mut counts.completed,
        TaskStatus::Failed => &mut counts.failed,
        TaskStatus::Cancelled => &mut counts.cancelled,
    }
}
