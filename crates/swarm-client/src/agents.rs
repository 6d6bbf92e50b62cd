//! Agents: `POST /api/agents` (register), `GET /api/agents[/:id]`.

use serde::{Deserialize, Serialize};
use swarm_domain::{agent::Agent, id::AgentId, task::Task};

use crate::{Client, ClientError};

/// `POST /api/agents`. The new agent's id is the client's `agent_id`, else the hub picks one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterAgentRequest {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_lead: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tasks: Option<i64>,
}

/// An agent, with its tasks when they were asked for (`?include=tasks`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentView {
    #[serde(flatten)]
    pub agent: Agent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Vec<Task>>,
}

/// `GET /api/agents`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentList {
    pub agents: Vec<AgentView>,
}

impl Client {
    /// `POST /api/agents`: register the client's agent (or re-register: an offline
    /// agent comes back idle).
    pub async fn register_agent(&self, request: &RegisterAgentRequest) -> Result<Agent, ClientError> {
        self.post_json("/api/agents", request).await
    }

    pub async fn list_agents(&self, include_tasks: bool) -> Result<AgentList, ClientError> {
        self.get_json("/api/agents", &include_query(include_tasks)).await
    }

    pub async fn get_agent(&self, id: AgentId, include_tasks: bool) -> Result<AgentView, ClientError> {
        self.get_json(&format!("/api/agents/{id}"), &include_query(include_tasks)).await
    }
}

fn include_query(include_tasks: bool) -> Vec<(&'static str, String)> {
    if include_tasks { vec![("include", "tasks".to_string())] } else { Vec::new() }
}
