//! The storage of MCP tasks (the Tasks extension, SEP-2663), beside [`crate::Store`]:
//! a task is one row, created before the client hears its id and settled once, by a
//! `working` guard, by whichever replica answers the `tasks/get` that settles it.

use async_trait::async_trait;
use serde_json::Value;
use swarm_domain::{
    id::McpTaskId,
    mcp_task::{McpTask, McpTaskStatus},
    time::Timestamp,
};

use crate::{Applied, StoreResult};

#[async_trait]
pub trait McpTaskStore: Send + Sync {
    /// Keep `task`; in the same transaction forget the tasks whose time ran out (the
    /// hub's retention pass also does, in batches: [`Expiring::McpTasks`]; this covers a
    /// `swarm mcp` over stdio, which runs no retention).
    ///
    /// [`Expiring::McpTasks`]: swarm_domain::retention::Expiring::McpTasks
    async fn mcp_task_create(&self, task: &McpTask) -> StoreResult<()>;
    /// The task, unless its time ran out by `now`.
    async fn mcp_task_get(&self, id: McpTaskId, now: Timestamp) -> StoreResult<Option<McpTask>>;
    /// Settle a `working` task as `to` with `outcome`, guarded by the status being
    /// `working` (one settlement wins; `Refused` shows the one that did). `NotFound` when
    /// there is no such task or its time ran out.
    async fn mcp_task_settle(
        &self,
        id: McpTaskId,
        to: McpTaskStatus,
        outcome: Option<Value>,
        now: Timestamp,
    ) -> StoreResult<Applied<McpTask>>;
}
