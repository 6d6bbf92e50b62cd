//! A tool call run as a task of the MCP Tasks extension (SEP-2663): the client gets a
//! task id at once and reads the outcome with `tasks/get`. Kept in the store, not in the
//! process that answered the call, so any replica answers `tasks/get` and `tasks/cancel`
//! (MCP keeps no state in a process: the next request may reach another replica).

use serde_json::Value;

use crate::{
    id::{AgentId, McpTaskId},
    time::Timestamp,
};

/// How long a task is kept after it was created (SEP-2663's `ttlMs`).
pub const MCP_TASK_TTL_MS: i64 = 60 * 60 * 1000;
/// How often a client should ask `tasks/get` (SEP-2663's `pollIntervalMs`).
pub const MCP_TASK_POLL_INTERVAL_MS: u64 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum McpTaskStatus {
    Working,
    Completed,
    /// A protocol-level failure (a tool's refusal is `Completed` with `isError`).
    Failed,
    Cancelled,
}

impl McpTaskStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            McpTaskStatus::Working => "working",
            McpTaskStatus::Completed => "completed",
            McpTaskStatus::Failed => "failed",
            McpTaskStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Result<Self, crate::Invalid> {
        Ok(match text {
            "working" => McpTaskStatus::Working,
            "completed" => McpTaskStatus::Completed,
            "failed" => McpTaskStatus::Failed,
            "cancelled" => McpTaskStatus::Cancelled,
            other => return Err(crate::Invalid::new(format!("unknown MCP task status {other:?}"))),
        })
    }

    pub fn is_terminal(&self) -> bool {
        *self != McpTaskStatus::Working
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct McpTask {
    pub id: McpTaskId,
    /// The caller that made the call: only it reads or cancels the task.
    pub agent_id: AgentId,
    pub tool: String,
    pub arguments: Value,
    pub status: McpTaskStatus,
    /// Once terminal: the `CallToolResult` (completed) or the JSON-RPC error (failed).
    pub outcome: Option<Value>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// When the call's own wait ends: a `tasks/get` after it settles the task with what
    /// there is, as the synchronous call would have answered then.
    pub deadline: Timestamp,
    /// When the task is forgotten (`created_at` plus [`MCP_TASK_TTL_MS`]).
    pub expires_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip() {
        for status in [
            McpTaskStatus::Working,
            McpTaskStatus::Completed,
            McpTaskStatus::Failed,
            McpTaskStatus::Cancelled,
        ] {
            assert_eq!(McpTaskStatus::parse(status.as_str()).unwrap(), status);
            assert_eq!(status.is_terminal(), status != McpTaskStatus::Working);
        }
        assert!(McpTaskStatus::parse("done").is_err());
    }
}
