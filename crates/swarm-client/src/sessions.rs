//! What runners report about agent sessions: `POST /api/session-logs` and
//! `POST /api/session-costs`.

use serde::{Deserialize, Serialize};
use swarm_domain::{
    id::{AgentId, TaskId},
    session::SessionCost,
};

use crate::{Client, ClientError};

/// `POST /api/session-logs`: lines of one agent run's output, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionLogsRequest {
    pub session_id: String,
    /// Which run of the session (the runner counts them from 1).
    pub iteration: i64,
    pub lines: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<TaskId>,
    /// The agent CLI that wrote the lines (`claude`, `codex`, a program name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cli: Option<String>,
}

/// `POST /api/session-costs`: what one agent run cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionCostRequest {
    pub session_id: String,
    pub agent_id: AgentId,
    pub total_cost_usd: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<TaskId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_turns: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub is_error: bool,
}

/// `POST /api/session-starts`: whether the runner could start the agent CLI (ours).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionStartRequest<'a> {
    pub cli: &'a str,
    pub started: bool,
}

#[derive(Deserialize)]
struct StartRecorded {}

#[derive(Deserialize)]
struct LogsCreated {
    count: u64,
}

#[derive(Debug, Deserialize)]
struct CostCreated {
    cost: SessionCost,
}

impl Client {
    /// Append output lines of an agent run; answers how many lines the hub stored.
    pub async fn append_session_logs(&self, request: &SessionLogsRequest) -> Result<u64, ClientError> {
        Ok(self.post_json::<_, LogsCreated>("/api/session-logs", request).await?.count)
    }

    /// Tell the hub whether the agent CLI started (counted in its metrics).
    pub async fn report_session_start(&self, request: &SessionStartRequest<'_>) -> Result<(), ClientError> {
        self.post_json::<_, StartRecorded>("/api/session-starts", request).await.map(|_| ())
    }

    /// Record what an agent run cost.
    pub async fn record_session_cost(
        &self,
        request: &SessionCostRequest,
    ) -> Result<SessionCost, ClientError> {
        Ok(self.post_json::<_, CostCreated>("/api/session-costs", request).await?.cost)
    }
}
