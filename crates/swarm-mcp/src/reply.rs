//! The result every tool returns: `structuredContent: {yourAgentId, success, message,
//! ...}` (CONTRACT.md). A refusal is a result with `success: false` and `isError`,
//! never a protocol error, so the agent reads why.

use rmcp::model::CallToolResult;
use serde::Serialize;
use serde_json::{Map, Value};
use swarm_domain::id::AgentId;
use swarm_service::ServiceError;

/// The fields of every result; a tool's own fields go beside them.
const RESERVED: [&str; 3] = ["yourAgentId", "success", "message"];

#[derive(Debug, Clone)]
pub struct Reply {
    success: bool,
    message: String,
    data: Map<String, Value>,
    /// `yourAgentId` when it is not the caller's id (after `join-swarm`).
    agent_id: Option<AgentId>,
}

impl Reply {
    pub fn ok(message: impl Into<String>) -> Self {
        Reply { success: true, message: message.into(), data: Map::new(), agent_id: None }
    }

    pub fn refused(message: impl Into<String>) -> Self {
        Reply { success: false, message: message.into(), data: Map::new(), agent_id: None }
    }

    /// Add a field beside `success` and `message`.
    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        debug_assert!(!RESERVED.contains(&key), "{key} is a field every reply has");
        let value = serde_json::to_value(value).unwrap_or_else(|err| {
            tracing::error!(%err, key, "a tool result field did not serialize");
            Value::Null
        });
        self.data.insert(key.to_string(), value);
        self
    }

    pub fn for_agent(mut self, agent_id: AgentId) -> Self {
        self.agent_id = Some(agent_id);
        self
    }

    pub fn is_success(&self) -> bool {
        self.success
    }

    /// The result's `structuredContent`: `{yourAgentId, success, message, ...}`.
    pub fn into_value(self, caller: Option<AgentId>) -> Value {
        let mut content = Map::new();
        let agent_id = self.agent_id.or(caller);
        content
            .insert("yourAgentId".into(), agent_id.map_or(Value::Null, |id| Value::String(id.to_string())));
        content.insert("success".into(), Value::Bool(self.success));
        content.insert("message".into(), Value::String(self.message));
        content.extend(self.data);
        Value::Object(content)
    }

    pub fn into_result(self, caller: Option<AgentId>) -> CallToolResult {
        let success = self.success;
        let content = self.into_value(caller);
        if success { CallToolResult::structured(content) } else { CallToolResult::structured_error(content) }
    }
}

impl From<ServiceError> for Reply {
    fn from(err: ServiceError) -> Self {
        match err {
            ServiceError::Internal(cause) => {
                // The cause may hold database details; it goes to the log, not the agent.
                tracing::error!(error = %cause, cause = ?std::error::Error::source(&cause), "a tool failed");
                Reply::refused("internal error: the hub could not complete this request (see its log)")
            }
            other => Reply::refused(other.to_string()),
        }
    }
}

/// What a handler returns: `Err` is a refusal, so handlers can use `?` on service
/// calls (through `From<ServiceError>`).
pub type Outcome = Result<Reply, Reply>;
