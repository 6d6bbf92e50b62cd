//! The Tasks extension (SEP-2663): a client that declares it gets the tools that wait
//! (`poll-task`) as tasks: the call answers at once with a task id, and `tasks/get` reads
//! the outcome.
//!
//! Stateless like the rest of `/mcp`: the task is a row in the store (created before its
//! id is returned), and nothing runs in the background. Each `tasks/get` of a working task
//! takes one step of the call itself (for `poll-task`, a poll that answers at once), and
//! settles the task when the step found work or the call's own wait is over. So any
//! replica answers any `tasks/get`, a replica that stops loses nothing, and work is
//! claimed only while a client is still asking for it.

use rmcp::model::{
    CallToolResponse, CreateTaskResult, DetailedTask, ErrorData, GetTaskResult, JsonObject, Task,
    TaskPayload, TaskStatus,
};
use serde_json::{Value, json};
use swarm_domain::{
    id::{AgentId, McpTaskId},
    mcp_task::{MCP_TASK_POLL_INTERVAL_MS, MCP_TASK_TTL_MS, McpTask, McpTaskStatus},
    time::Timestamp,
};
use swarm_service::ServiceError;

use crate::{context::CallerInfo, server::McpServer, tools::poll};

/// The tools a client that declared the extension gets as tasks: the ones that wait.
const TASK_TOOLS: [&str; 1] = ["poll-task"];

impl McpServer {
    /// The task for a call of `name`, when the client declared the extension, the tool
    /// waits, and the call would run (the caller may use it, its arguments are valid, it
    /// asks for a wait). `None`: the call runs as usual.
    pub(crate) async fn start_task(
        &self,
        name: &str,
        caller: &CallerInfo,
        arguments: &Value,
        declared: bool,
    ) -> Result<Option<CallToolResponse>, ErrorData> {
        if !declared || !TASK_TOOLS.contains(&name) {
            return Ok(None);
        }
        let admitted = self.registry().find(name).is_some_and(|spec| spec.audience.admits(caller.role()));
        let (Some(agent), true) = (caller.agent.as_ref().map(|agent| agent.id), admitted) else {
            return Ok(None);
        };
        // A call that does not wait is answered at once (SEP-2663's immediate result).
        let Some(wait) = poll::requested_wait(arguments).filter(|wait| !wait.is_zero()) else {
            return Ok(None);
        };
        let task = self
            .service()
            .mcp_task_start(agent, name, arguments.clone(), wait)
            .await
            .map_err(service_error)?;
        Ok(Some(CallToolResponse::Task(CreateTaskResult::new(wire(&task)))))
    }

    /// `tasks/get`: the caller's task, a step further when it is still working.
    pub(crate) async fn task_state(
        &self,
        caller: CallerInfo,
        task_id: &str,
    ) -> Result<GetTaskResult, ErrorData> {
        let (agent, id) = task_ref(&caller, task_id)?;
        let task = self.service().mcp_task_get(agent, id).await.map_err(service_error)?;
        let task =
            if task.status == McpTaskStatus::Working { self.step(caller, agent, task).await? } else { task };
        Ok(GetTaskResult::new(detailed(&task)))
    }

    /// `tasks/cancel`: settles a working task as cancelled; a finished one stays as it
    /// ended, and the acknowledgement is the same.
    pub(crate) async fn task_cancel(&self, caller: CallerInfo, task_id: &str) -> Result<(), ErrorData> {
        let (agent, id) = task_ref(&caller, task_id)?;
        self.service()
            .mcp_task_settle(agent, id, McpTaskStatus::Cancelled, None)
            .await
            .map_err(service_error)?;
        Ok(())
    }

    /// `tasks/update`: swarm's tasks never ask the client for input, so there is nothing
    /// to resume; the task must exist, and the responses are ignored.
    pub(crate) async fn task_update(&self, caller: CallerInfo, task_id: &str) -> Result<(), ErrorData> {
        let (agent, id) = task_ref(&caller, task_id)?;
        self.service().mcp_task_get(agent, id).await.map_err(service_error)?;
        Ok(())
    }

    /// One step of a working task's call; settles it when the step found what the call
    /// waits for, or when the call's wait is over (then with the step's answer).
    async fn step(&self, caller: CallerInfo, agent: AgentId, task: McpTask) -> Result<McpTask, ErrorData> {
        let Some((reply, caller_id)) = self.run_tool(&task.tool, caller, poll::step_arguments()).await else {
            let error = json!({"code": ErrorData::invalid_params("", None).code.0,
                "message": format!("this server no longer offers {}", task.tool)});
            return self.settle(agent, &task, McpTaskStatus::Failed, error).await;
        };
        let success = reply.is_success();
        let result = reply.into_result(caller_id);
        let found = result.structured_content.as_ref().is_some_and(|content| !content["trigger"].is_null());
        if success && !found && Timestamp::now() < task.deadline {
            return Ok(task);
        }
        let outcome =
            serde_json::to_value(&result).map_err(|err| ErrorData::internal_error(err.to_string(), None))?;
        self.settle(agent, &task, McpTaskStatus::Completed, outcome).await
    }

    async fn settle(
        &self,
        agent: AgentId,
        task: &McpTask,
        to: McpTaskStatus,
        outcome: Value,
    ) -> Result<McpTask, ErrorData> {
        let settled =
            self.service().mcp_task_settle(agent, task.id, to, Some(outcome)).await.map_err(service_error)?;
        if settled.status != to {
            // Cancelled meanwhile: what this step claimed goes back when its lease runs out.
            tracing::warn!(task = %task.id, status = settled.status.as_str(), "an MCP task settled before its step");
        }
        Ok(settled)
    }
}

fn task_ref(caller: &CallerInfo, task_id: &str) -> Result<(AgentId, McpTaskId), ErrorData> {
    let unknown =
        || ErrorData::invalid_params(format!("no task {task_id}"), Some(json!({"taskId": task_id})));
    let agent = caller.agent.as_ref().map(|agent| agent.id).ok_or_else(unknown)?;
    let id = McpTaskId::parse(task_id.trim()).map_err(|_| unknown())?;
    Ok((agent, id))
}

fn service_error(err: ServiceError) -> ErrorData {
    match err {
        ServiceError::Internal(cause) => {
            tracing::error!(error = %cause, "an MCP task could not be read or written");
            ErrorData::internal_error("the hub could not complete this request (see its log)", None)
        }
        other => ErrorData::invalid_params(other.to_string(), None),
    }
}

fn wire(task: &McpTask) -> Task {
    Task::new(
        task.id.to_string(),
        status(task.status),
        task.created_at.to_string(),
        task.updated_at.to_string(),
    )
    .with_ttl_ms(MCP_TASK_TTL_MS.unsigned_abs())
    .with_poll_interval_ms(MCP_TASK_POLL_INTERVAL_MS)
}

fn status(status: McpTaskStatus) -> TaskStatus {
    match status {
        McpTaskStatus::Working => TaskStatus::Working,
        McpTaskStatus::Completed => TaskStatus::Completed,
        McpTaskStatus::Failed => TaskStatus::Failed,
        McpTaskStatus::Cancelled => TaskStatus::Cancelled,
    }
}

fn detailed(task: &McpTask) -> DetailedTask {
    let object = |value: &Option<Value>| -> JsonObject {
        match value {
            Some(Value::Object(fields)) => fields.clone(),
            _ => JsonObject::new(),
        }
    };
    let payload = match task.status {
        McpTaskStatus::Working => TaskPayload::Working,
        McpTaskStatus::Completed => TaskPayload::Completed { result: object(&task.outcome) },
        McpTaskStatus::Failed => TaskPayload::Failed { error: object(&task.outcome) },
        McpTaskStatus::Cancelled => TaskPayload::Cancelled,
    };
    DetailedTask::new(wire(task), payload)
}
