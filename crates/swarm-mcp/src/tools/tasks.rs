//! Task tools: `get-tasks`, `get-task-details`, `send-task`, `task-action`,
//! `store-progress`, `cancel-task`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use swarm_domain::{
    event::Event,
    id::{AgentId, TaskId},
    task::{Task, TaskDraft, TaskStatus},
};
use swarm_service::{Finish, SendTask, TaskListQuery, TaskReport, TaskRequest};
use uuid::Uuid;

use super::{parse_status, task_status_schema};
use crate::{
    context::ToolCall,
    registry::{Audience, ToolSpec},
    reply::{Answer, Outcome, Reply},
};

/// Where tasks created over MCP say they came from.
pub const MCP_SOURCE: &str = "mcp";
const GET_TASKS_LIMIT_DEFAULT: i64 = 25;
const GET_TASKS_LIMIT_MAX: i64 = 100;

pub fn group() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "get-tasks",
            "List tasks, newest first; the filters combine.",
            Audience::Anyone,
            get_tasks,
        )
        .read_only(),
        ToolSpec::new(
            "get-task-details",
            "One task with its history (newest first).",
            Audience::Anyone,
            get_task_details,
        )
        .read_only(),
        ToolSpec::new(
            "send-task",
            "Give a task to an agent (assigned; it needs a free slot), offer it (offerMode), or put it \
             in the pool (no agentId). Never to the lead or yourself.",
            Audience::Agents,
            send_task,
        ),
        ToolSpec::new(
            "task-action",
            "Act on a task: create (in the pool), claim (from the pool), release (back to the pool), \
             accept or reject (an offer to you), to_backlog or from_backlog (lead or creator).",
            Audience::Agents,
            task_action,
        ),
        ToolSpec::new(
            "store-progress",
            "Report on your task (the lead: any): a progress note, and/or status completed (with \
             output) or failed (with failureReason). Reporting on a pending task starts it.",
            Audience::Agents,
            store_progress,
        ),
        ToolSpec::new(
            "cancel-task",
            "Cancel a task that has not finished (the lead, or the task's creator).",
            Audience::Agents,
            cancel_task,
        ),
    ]
}

// The result fields of the task tools, for their output schemas.
#[derive(Serialize, utoipa::ToSchema)]
struct TaskListOutput {
    tasks: Vec<Task>,
    total: i64,
}

#[derive(Serialize, utoipa::ToSchema)]
struct TaskDetailsOutput {
    task: Task,
    /// The task's history, newest first.
    logs: Vec<Event>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct TaskOutput {
    task: Task,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct TaskFinishOutput {
    already_finished: bool,
    task: Task,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GetTasksArguments {
    /// Only tasks in this status.
    #[serde(default)]
    #[schemars(schema_with = "task_status_schema")]
    status: Option<String>,
    /// Only tasks assigned to you.
    #[serde(default)]
    mine_only: bool,
    /// Only pool tasks (status unassigned).
    #[serde(default)]
    unassigned: bool,
    /// Only offers to you awaiting your answer.
    #[serde(default)]
    offered_to_me: bool,
    /// Only tasks ready to start (dependencies completed).
    #[serde(default)]
    ready_only: bool,
    task_type: Option<String>,
    /// Only tasks carrying all of these tags.
    #[serde(default)]
    tags: Vec<String>,
    /// Text the task contains (case-insensitive).
    search: Option<String>,
    /// 1 to 100, default 25.
    #[schemars(range(min = 1, max = 100))]
    limit: Option<i64>,
}

async fn get_tasks(call: ToolCall, args: GetTasksArguments) -> Outcome<TaskListOutput> {
    let limit = args.limit.unwrap_or(GET_TASKS_LIMIT_DEFAULT);
    if !(1..=GET_TASKS_LIMIT_MAX).contains(&limit) {
        return Err(Reply::refused(format!(
            "limit must be between 1 and {GET_TASKS_LIMIT_MAX}, got {limit}"
        )));
    }
    let me = || {
        call.agent_id().filter(|_| call.caller.agent.is_some()).ok_or_else(|| {
            Reply::refused("mineOnly and offeredToMe need a registered agent: send your X-Agent-ID")
        })
    };
    let mut query = TaskListQuery {
        statuses: args.status.as_deref().map(parse_status).transpose()?.into_iter().collect(),
        task_type: args.task_type,
        tags: args.tags,
        search: args.search,
        ready_only: args.ready_only,
        limit: Some(limit),
        ..TaskListQuery::default()
    };
    if args.unassigned {
        if query.statuses.iter().any(|status| *status != TaskStatus::Unassigned) {
            return Err(Reply::refused(
                "unassigned lists pool tasks: leave out status, or use status unassigned",
            ));
        }
        query.statuses = vec![TaskStatus::Unassigned];
    }
    if args.mine_only {
        query.agent_id = Some(me()?);
    }
    if args.offered_to_me {
        query.offered_to = Some(me()?);
        if query.statuses.is_empty() {
            query.statuses = vec![TaskStatus::Offered, TaskStatus::Reviewing];
        }
    }
    let (tasks, total) = call.service.task_list(query).await?;
    let message = format!("{} of {total} matching tasks", tasks.len());
    Ok(Answer::new(message, TaskListOutput { tasks, total }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TaskIdArguments {
    task_id: Uuid,
}

async fn get_task_details(call: ToolCall, args: TaskIdArguments) -> Outcome<TaskDetailsOutput> {
    let detail = call.service.task_detail(TaskId::from_uuid(args.task_id)).await?;
    let message = format!("task {} is {}", detail.task.id, detail.task.status);
    Ok(Answer::new(message, TaskDetailsOutput { task: detail.task, logs: detail.logs }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SendTaskArguments {
    agent_id: Option<Uuid>,
    /// What to do, with the context the agent needs.
    task: String,
    #[serde(default)]
    offer_mode: bool,
    task_type: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    /// 0 to 100, default 50; higher is picked first.
    #[schemars(range(min = 0, max = 100))]
    priority: Option<i64>,
    /// Tasks that must be completed before this one can start.
    #[serde(default)]
    depends_on: Vec<Uuid>,
    /// The model the assignee's CLI runs it with (`opus`, `gpt-5.5`); default: the agent's.
    model: Option<String>,
}

async fn send_task(call: ToolCall, args: SendTaskArguments) -> Outcome<TaskOutput> {
    let request = SendTask {
        task: args.task,
        to: args.agent_id.map(AgentId::from_uuid),
        offer: args.offer_mode,
        source: Some(MCP_SOURCE.into()),
        task_type: args.task_type,
        tags: args.tags,
        priority: args.priority,
        depends_on: args.depends_on.into_iter().map(TaskId::from_uuid).collect(),
        session_task: call.session_task(),
        model: args.model,
    };
    let task = call.service.task_send(call.caller(), request).await?;
    let message = match (task.status, task.agent_id.or(task.offered_to)) {
        (TaskStatus::Offered, Some(to)) => format!("task {} offered to agent {to}", task.id),
        (_, Some(to)) => format!("task {} assigned to agent {to}", task.id),
        _ => format!("task {} put in the pool", task.id),
    };
    Ok(Answer::new(message, TaskOutput { task }))
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Action {
    Create,
    Claim,
    Release,
    Accept,
    Reject,
    ToBacklog,
    FromBacklog,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TaskActionArguments {
    action: Action,
    /// create: the task text.
    task: Option<String>,
    /// create: the task's type.
    task_type: Option<String>,
    /// create: tags.
    #[serde(default)]
    tags: Vec<String>,
    /// create: 0 to 100, default 50.
    #[schemars(range(min = 0, max = 100))]
    priority: Option<i64>,
    /// create: tasks that must be completed first.
    #[serde(default)]
    depends_on: Vec<Uuid>,
    /// Every action but create: the task to act on.
    task_id: Option<Uuid>,
    /// reject: why.
    reason: Option<String>,
}

async fn task_action(call: ToolCall, args: TaskActionArguments) -> Outcome<TaskOutput> {
    let request = match args.action {
        Action::Create => {
            let Some(text) = args.task else {
                return Err(Reply::refused("create needs the task text (task)"));
            };
            let draft = TaskDraft {
                task: text,
                source: Some(MCP_SOURCE.into()),
                task_type: args.task_type,
                tags: args.tags,
                priority: args.priority,
                depends_on: args.depends_on.into_iter().map(TaskId::from_uuid).collect(),
                ..TaskDraft::default()
            };
            let task = call.service.task_create(call.caller(), draft).await?;
            return Ok(Answer::new(format!("task {} created in the pool", task.id), TaskOutput { task }));
        }
        Action::Claim => TaskRequest::Claim,
        Action::Release => TaskRequest::Release,
        Action::Accept => TaskRequest::Accept,
        Action::Reject => TaskRequest::Reject { reason: args.reason },
        Action::ToBacklog => TaskRequest::ToBacklog,
        Action::FromBacklog => TaskRequest::FromBacklog,
    };
    let Some(task_id) = args.task_id else {
        return Err(Reply::refused("this action needs the task to act on (taskId)"));
    };
    let outcome = call.service.task_act(call.caller(), TaskId::from_uuid(task_id), request).await?;
    let task = outcome.task;
    Ok(Answer::new(format!("task {} is now {}", task.id, task.status), TaskOutput { task }))
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum FinishStatus {
    Completed,
    Failed,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StoreProgressArguments {
    task_id: Uuid,
    /// A progress note.
    progress: Option<String>,
    /// Finish the task: completed or failed.
    status: Option<FinishStatus>,
    /// The result, when completing.
    output: Option<String>,
    /// What went wrong, when failing.
    failure_reason: Option<String>,
}

async fn store_progress(call: ToolCall, args: StoreProgressArguments) -> Outcome<TaskFinishOutput> {
    let finish = args.status.map(|status| Finish {
        status: match status {
            FinishStatus::Completed => TaskStatus::Completed,
            FinishStatus::Failed => TaskStatus::Failed,
        },
        output: args.output,
        failure_reason: args.failure_reason,
    });
    let report = TaskReport { progress: args.progress, finish };
    let outcome = call.service.task_report(call.caller(), TaskId::from_uuid(args.task_id), report).await?;
    let task = outcome.task;
    let message = if outcome.already_finished {
        format!("task {} was already {}: nothing changed", task.id, task.status)
    } else if task.status.is_finished() {
        format!("task {} marked as {}", task.id, task.status)
    } else if outcome.started {
        format!("task {} started; progress stored", task.id)
    } else {
        format!("progress stored for task {}", task.id)
    };
    Ok(Answer::new(message, TaskFinishOutput { already_finished: outcome.already_finished, task }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CancelTaskArguments {
    task_id: Uuid,
    /// Why; recorded as the task's failure reason.
    reason: Option<String>,
}

async fn cancel_task(call: ToolCall, args: CancelTaskArguments) -> Outcome<TaskFinishOutput> {
    let request = TaskRequest::Cancel { reason: args.reason };
    let outcome = call.service.task_act(call.caller(), TaskId::from_uuid(args.task_id), request).await?;
    let task = outcome.task;
    let message = if outcome.already_finished {
        format!("task {} was already cancelled", task.id)
    } else {
        format!("task {} cancelled", task.id)
    };
    Ok(Answer::new(message, TaskFinishOutput { already_finished: outcome.already_finished, task }))
}
