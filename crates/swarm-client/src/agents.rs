//! Agents: `POST /api/agents` (register), `GET /api/agents[/:id]`.

pub use swarm_domain::wire::{AgentList, AgentView, RegisterAgentRequest};
use swarm_domain::{agent::Agent, id::AgentId};

use crate::{Client, ClientError};

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
