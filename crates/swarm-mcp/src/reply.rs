//! The result every tool returns: `structuredContent: {yourAgentId, success, message,
//! ...}`. A tool answers an [`Answer`] of its output struct, whose utoipa schema is the
//! tool's `outputSchema` and whose serde serialization is the `...`: the schema and the
//! fields sent are one type. A refusal is a result with `success: false` and `isError`,
//! never a protocol error, so the agent reads why.

use rmcp::model::CallToolResult;
use serde::Serialize;
use serde_json::{Map, Value};
use swarm_domain::id::AgentId;
use swarm_service::ServiceError;

/// The fields of every result; a tool's own fields go beside them.
const RESERVED: [&str; 3] = ["yourAgentId", "success", "message"];

/// A tool's result as sent: its own fields already serialized. Handlers build an
/// [`Answer`] (or refuse with [`Reply::refused`]); the registry turns it into this.
#[derive(Debug, Clone)]
pub struct Reply {
    success: bool,
    message: String,
    data: Map<String, Value>,
    /// `yourAgentId` when it is not the caller's id (after `join-swarm`).
    agent_id: Option<AgentId>,
}

impl Reply {
    pub fn refused(message: impl Into<String>) -> Self {
        Reply { success: false, message: message.into(), data: Map::new(), agent_id: None }
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
                Reply::refused(INTERNAL)
            }
            other => Reply::refused(other.to_string()),
        }
    }
}

const INTERNAL: &str = "internal error: the hub could not complete this request (see its log)";

/// A tool's successful answer: the human-readable message and the tool's own fields,
/// `O`, the struct its `outputSchema` is generated from (`ToolSpec::new` reads the schema
/// from the handler's `O`, so the two cannot drift).
#[derive(Debug, Clone)]
pub struct Answer<O> {
    message: String,
    fields: O,
    agent_id: Option<AgentId>,
}

impl<O: Serialize> Answer<O> {
    pub fn new(message: impl Into<String>, fields: O) -> Self {
        Answer { message: message.into(), fields, agent_id: None }
    }

    /// Answer for `agent_id` (`yourAgentId`) rather than the caller (`join-swarm`).
    pub fn for_agent(mut self, agent_id: AgentId) -> Self {
        self.agent_id = Some(agent_id);
        self
    }

    /// The result as sent: `O` serialized beside `success` and `message`.
    pub fn into_reply(self) -> Reply {
        match serde_json::to_value(&self.fields) {
            Ok(Value::Object(data)) => {
                debug_assert!(
                    RESERVED.iter().all(|key| !data.contains_key(*key)),
                    "an output struct names a field every reply has: {data:?}"
                );
                Reply { success: true, message: self.message, data, agent_id: self.agent_id }
            }
            other => {
                // Output structs are ours and serialize to objects; the tests catch one that does not.
                tracing::error!(result = ?other.map(|_| ()), "a tool's output did not serialize to an object");
                debug_assert!(false, "a tool's output did not serialize to an object");
                Reply::refused(INTERNAL)
            }
        }
    }
}

impl Answer<NoFields> {
    /// An answer with no fields beyond `{yourAgentId, success, message}`.
    pub fn done(message: impl Into<String>) -> Self {
        Answer::new(message, NoFields {})
    }
}

/// The output of a tool whose result has no fields beyond `{yourAgentId, success, message}`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct NoFields {}

/// What a handler returns: `Err` is a refusal, so handlers can use `?` on service
/// calls (through `From<ServiceError>`).
pub type Outcome<O> = Result<Answer<O>, Reply>;
