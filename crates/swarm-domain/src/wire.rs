//! The REST API's request bodies, defined once for the hub (`swarm-api` reads them, with
//! their OpenAPI schema) and for its client (`swarm-client` sends them). Two copies had
//! drifted apart: the client could ask for any initial status, the hub took only
//! `backlog`. Field names are the reference's (camelCase).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{
    agent::Agent,
    id::{AgentId, TaskId},
    task::Task,
};

/// `POST /api/tasks`. The initial status follows from the fields: `offeredTo` →
/// offered, `agentId` → pending, `status: backlog` → backlog, else unassigned.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateTaskRequest {
    #[schema(min_length = 1, pattern = r"^[^\u0000]*[^\s\u0000][^\u0000]*$")]
    pub task: String,
    /// Assign to this agent (status `pending`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<AgentId>,
    /// Offer to this agent (status `offered`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_to: Option<AgentId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_type: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// 0 to 100, default 50.
    #[schema(minimum = 0, maximum = 100)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<TaskId>,
    /// Default `api`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// `backlog` to park the task; otherwise leave it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<InitialStatus>,
    /// The model the agent CLI runs the task with (its own model flag: `opus`, `gpt-5.5`,
    /// `anthropic/claude-sonnet-4-5`); default the runner's `--model`, else the CLI's own.
    #[schema(min_length = 1, max_length = 200, pattern = r"^[!#-&(-\[\]-_a-~]+$")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// The only status a task may be asked to start in; the others follow from `agentId`
/// and `offeredTo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum InitialStatus {
    Backlog,
}

/// `POST /api/agents`. The new agent's id is the caller's `X-Agent-ID`, else the hub
/// picks one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegisterAgentRequest {
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub name: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_lead: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
    /// 1 to 20, default 1.
    #[schema(minimum = 1, maximum = 20)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tasks: Option<i64>,
}

/// An agent, with its tasks when they were asked for (`?include=tasks`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AgentView {
    #[serde(flatten)]
    pub agent: Agent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Vec<Task>>,
}

/// `GET /api/agents`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AgentList {
    pub agents: Vec<AgentView>,
}

/// `POST /api/session-logs`: lines of one agent run's output, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionLogsRequest {
    #[schema(min_length = 1, max_length = 200, pattern = r"^[^\u0000]*[^\s\u0000][^\u0000]*$")]
    pub session_id: String,
    /// Which run of the session (the runner counts them from 1).
    #[schema(minimum = 0)]
    pub iteration: i64,
    pub lines: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<TaskId>,
    /// The agent CLI that wrote the lines (`claude`, `codex`, a program name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli: Option<String>,
}

/// `POST /api/session-costs`: what one agent run cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionCostRequest {
    #[schema(min_length = 1, max_length = 200, pattern = r"^[^\u0000]*[^\s\u0000][^\u0000]*$")]
    pub session_id: String,
    /// The agent whose run this was: the caller itself, unless the operator records it.
    pub agent_id: AgentId,
    /// US dollars, 0 to 100,000.
    #[schema(minimum = 0, maximum = 100000)]
    pub total_cost_usd: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<TaskId>,
    #[schema(minimum = 0)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<i64>,
    #[schema(minimum = 0)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<i64>,
    #[schema(minimum = 0)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<i64>,
    #[schema(minimum = 0)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<i64>,
    #[schema(minimum = 0)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    #[schema(minimum = 0)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_turns: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default)]
    pub is_error: bool,
}

/// `POST /api/session-starts` (ours): whether the runner could start the agent CLI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SessionStartRequest {
    /// The agent CLI the runner started or tried to start: `claude`, `codex`, or the
    /// command's name (counted as `other`).
    #[schema(min_length = 1, max_length = 200)]
    pub cli: String,
    /// Whether the CLI started; `false` when the runner could not start it (missing
    /// program, no working directory), in which case it gives the work back.
    pub started: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_can_start_only_in_the_backlog() {
        let parked: CreateTaskRequest =
            serde_json::from_str(r#"{"task": "later", "status": "backlog"}"#).unwrap();
        assert_eq!(parked.status, Some(InitialStatus::Backlog));
        assert!(
            serde_json::from_str::<CreateTaskRequest>(r#"{"task": "x", "status": "completed"}"#).is_err()
        );
        let sent =
            serde_json::to_value(CreateTaskRequest { task: "t".into(), ..Default::default() }).unwrap();
        assert_eq!(sent, serde_json::json!({"task": "t"}), "unset fields are left out");
    }
}
