//! MCP tasks (the Tasks extension, SEP-2663): a long tool call the client reads back with
//! `tasks/get`. The row in the store is the whole state; nothing runs in the background,
//! so any replica answers for any task (the MCP adapter does the call's work when a
//! `tasks/get` asks, see `swarm_mcp`).

use std::time::Duration;

use serde_json::Value;
use swarm_domain::{
    id::{AgentId, McpTaskId},
    mcp_task::{MCP_TASK_TTL_MS, McpTask, McpTaskStatus},
};
use swarm_store::Applied;

use crate::{Service, ServiceError, ServiceResult};

impl Service {
    /// Keep a `working` task for `agent`'s call of `tool`, whose own wait is `wait`; the
    /// task exists in the store before its id is returned.
    pub async fn mcp_task_start(
        &self,
        agent: AgentId,
        tool: &str,
        arguments: Value,
        wait: Duration,
    ) -> ServiceResult<McpTask> {
        let now = self.clock.now();
        let wait_ms = i64::try_from(wait.as_millis()).unwrap_or(i64::MAX);
        let task = McpTask {
            id: McpTaskId::new_v7(),
            agent_id: agent,
            tool: tool.to_string(),
            arguments,
            status: McpTaskStatus::Working,
            outcome: None,
            created_at: now,
            updated_at: now,
            deadline: now.plus_millis(wait_ms),
            expires_at: now.plus_millis(MCP_TASK_TTL_MS),
        };
        self.store.mcp_task_create(&task).await?;
        Ok(task)
    }

    /// `agent`'s task `id`. Another agent's task is not found, as an unknown one is.
    pub async fn mcp_task_get(&self, agent: AgentId, id: McpTaskId) -> ServiceResult<McpTask> {
        match self.store.mcp_task_get(id, self.clock.now()).await? {
            Some(task) if task.agent_id == agent => Ok(task),
            _ => Err(ServiceError::NotFound(format!("no task {id}"))),
        }
    }

    /// Settle `agent`'s working task `id` as `to` with `outcome`. The task as it stands
    /// after: this settlement's, or the one that came first (a terminal task stays as it
    /// ended, so a late cancel is acknowledged and changes nothing).
    pub async fn mcp_task_settle(
        &self,
        agent: AgentId,
        id: McpTaskId,
        to: McpTaskStatus,
        outcome: Option<Value>,
    ) -> ServiceResult<McpTask> {
        self.mcp_task_get(agent, id).await?;
        match self.store.mcp_task_settle(id, to, outcome, self.clock.now()).await? {
            Applied::Changed { after, .. } => Ok(after),
            Applied::Refused { current } => Ok(current),
            Applied::NotFound => Err(ServiceError::NotFound(format!("no task {id}"))),
        }
    }
}
