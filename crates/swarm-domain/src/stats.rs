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
