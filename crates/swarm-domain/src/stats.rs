//! Counts for `GET /api/stats` and the inbox summary of `GET /me?include=inbox`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AgentCounts {
    pub total: i64,
    pub idle: i64,
    pub busy: i64,
    pub offline: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TaskCounts {
    pub total: i64,
    pub backlog: i64,
    pub unassigned: i64,
    pub offered: i64,
    pub reviewing: i64,
    pub pending: i64,
    pub in_progress: i64,
    pub paused: i64,
    pub completed: i64,
    pub failed: i64,
    pub cancelled: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Stats {
    pub agents: AgentCounts,
    pub tasks: TaskCounts,
}

/// The work waiting for one agent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkCounts {
    pub offered_to_me: i64,
    pub pool: i64,
    pub in_progress: i64,
}

/// One minute of the hub, for the dashboard's charts (`GET /api/stats/history`).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatsPoint {
    /// When the minute ended.
    pub at: crate::time::Timestamp,
    /// Tasks waiting to be taken up: in the pool, offered, or assigned and not started.
    pub queue_depth: i64,
    /// 95 % of the triggers handed out in the minute waited at most this long after their
    /// creation (a histogram bucket's bound, in milliseconds); null when none was.
    pub trigger_wait_p95_ms: Option<f64>,
    /// Tasks finished by their agents in the minute (completed or failed).
    pub runs_finished: u64,
}
