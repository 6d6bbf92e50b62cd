//! The Inbox-MCP tool names of `seeds/inbox-mcp.md`, offered by `swarm mcp` (stdio)
//! over the swarm's own tasks.
//!
//! The seed's queue maps onto tasks as follows. Its statuses: `pending` is a task not
//! yet started (backlog, unassigned, offered, reviewing, pending), `processing` one
//! being worked (in_progress, paused), `done` a finished one (completed, failed), and
//! `cancelled`. A message's `channel` is the task's source, its `sender` the creator,
//! its `response_summary` the output (or failure reason). Ids are task UUIDs, not the
//! seed's integers.
//!
//! Which tools a session gets follows the seed: a trigger session (`ATLAS_TRIGGER`
//! set) files and watches tasks; a worker session takes and completes them. The trigger
//! tools (`trigger_*`) come with triggers.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use swarm_domain::{
    id::TaskId,
    poll::Trigger,
    task::{Task, TaskDraft, TaskStatus},
};
use swarm_service::{Finish, ServiceError, TaskListQuery, TaskReport, TaskRequest};
use uuid::Uuid;

use super::{NoArguments, tasks::MCP_SOURCE};
use crate::{
    context::ToolCall,
    registry::{Audience, ToolSpec},
    reply::{Answer, Outcome, Reply},
};

const LIST_LIMIT_DEFAULT: i64 = 20;
const LIST_LIMIT_MAX: i64 = 100;
/// Sources counted one by one in `inbox_stats`; anything else is `other`.
const KNOWN_SOURCES: [&str; 6] = ["mcp", "api", "slack", "github", "schedule", "webhook"];

/// Which Inbox-MCP session this process serves (the seed's `ATLAS_TRIGGER`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboxRole {
    /// The main worker session: takes tasks and completes them.
    Worker,
    /// A trigger session (cron, webhook, manual) that files tasks for the worker.
    Trigger { name: String },
}

pub fn group(role: &InboxRole) -> Vec<ToolSpec> {
    let task_get = ToolSpec::new(
        "task_get",
        "Inbox: one task by id, with its status and response.",
        Audience::Anyone,
        task_get,
    )
    .read_only();
    match role {
        InboxRole::Trigger { name } => {
            let name = name.clone();
            vec![
                ToolSpec::new(
                    "task_create",
                    "Inbox: file a task for the workers, with the full context in content. It goes \
                     to the pool, tagged with this trigger.",
                    Audience::Anyone,
                    move |call, args| task_create(call, args, name.clone()),
                ),
                task_get,
                ToolSpec::new(
                    "task_update",
                    "Inbox: change the content of a task that has not started.",
                    Audience::Anyone,
                    task_update,
                ),
                ToolSpec::new(
                    "task_cancel",
                    "Inbox: cancel a task that has not started.",
                    Audience::Anyone,
                    task_cancel,
                ),
            ]
        }
        InboxRole::Worker => vec![
            ToolSpec::new(
                "get_next_task",
                "Inbox: take the next task, claimed for you and started; warns when you already \
                 have one in progress. Returns next_task null when there is none.",
                Audience::WorkerOnly,
                get_next_task,
            ),
            ToolSpec::new(
                "task_complete",
                "Inbox: mark your task done with a response summary, written as the reply to \
                 whoever asked.",
                Audience::Agents,
                task_complete,
            ),
            ToolSpec::new(
                "task_list",
                "Inbox: tasks by status: pending (default), processing, done, cancelled, or any \
                 task status. limit 1 to 100, default 20.",
                Audience::Anyone,
                task_list,
            )
            .read_only(),
            task_get,
            ToolSpec::new(
                "inbox_stats",
                "Inbox: how many tasks there are, by status and by channel (source).",
                Audience::Anyone,
                inbox_stats,
            )
            .read_only(),
        ],
    }
}

/// A task as the seed's `messages` row.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct Message {
    id: TaskId,
    channel: String,
    sender: Option<String>,
    content: String,
    status: &'static str,
    swarm_status: TaskStatus,
    response_summary: Option<String>,
    created_at: String,
    processed_at: Option<String>,
}

fn message(task: &Task) -> Message {
    Message {
        id: task.id,
        channel: task.source.clone(),
        sender: task.creator_agent_id.map(|id| id.to_string()),
        content: task.task.clone(),
        status: inbox_status(task.status),
        swarm_status: task.status,
        response_summary: task.output.clone().or_else(|| task.failure_reason.clone()),
        created_at: task.created_at.to_string(),
        processed_at: task.finished_at.map(|at| at.to_string()),
    }
}

fn inbox_status(status: TaskStatus) -> &'static str {
    use TaskStatus::*;
    match status {
        Backlog | Unassigned | Offered | Reviewing | Pending => "pending",
        InProgress | Paused => "processing",
        Completed | Failed => "done",
        Cancelled => "cancelled",
    }
}

/// The task statuses behind an inbox status; a task status names itself.
fn statuses_for(inbox: &str) -> Result<Vec<TaskStatus>, Reply> {
    use TaskStatus::*;
    Ok(match inbox {
        "pending" => vec![Backlog, Unassigned, Offered, Reviewing, Pending],
        "processing" => vec![InProgress, Paused],
        "done" => vec![Completed, Failed],
        other => vec![TaskStatus::parse(other).map_err(|_| {
            Reply::refused(format!(
                "unknown status {other:?}: use pending, processing, done, cancelled, or a task status"
            ))
        })?],
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateArguments {
    /// The task brief, with the full context the worker needs.
    content: String,
}

async fn task_create(call: ToolCall, args: CreateArguments, trigger: String) -> Outcome<OneTask> {
    let draft = TaskDraft {
        task: args.content,
        source: Some(MCP_SOURCE.into()),
        tags: vec!["inbox".into(), format!("trigger:{trigger}")],
        ..TaskDraft::default()
    };
    // The session that files it awaits it: its result comes back as `task_result`.
    let task = call.service.task_create_from_session(call.caller(), draft, call.session_task()).await?;
    Ok(Answer::new(format!("task {} filed", task.id), OneTask { task: message(&task) }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TaskIdArguments {
    /// The task's id (a UUID).
    task_id: Uuid,
}

async fn task_get(call: ToolCall, args: TaskIdArguments) -> Outcome<OneTask> {
    let task = call.service.task_get(TaskId::from_uuid(args.task_id)).await?;
    let view = message(&task);
    Ok(Answer::new(format!("task {} is {}", task.id, view.status), OneTask { task: view }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UpdateArguments {
    task_id: Uuid,
    content: String,
}

async fn task_update(call: ToolCall, args: UpdateArguments) -> Outcome<OneTask> {
    let id = TaskId::from_uuid(args.task_id);
    // The service's guard refuses, in the same statement as the edit, a task an agent
    // has taken up.
    let task = call
        .service
        .task_edit(call.caller(), id, &args.content)
        .await
        .map_err(|err| only_unstarted("updated", err))?;
    Ok(Answer::new(format!("task {id} updated"), OneTask { task: message(&task) }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CancelArguments {
    task_id: Uuid,
    /// Why; recorded with the task.
    reason: Option<String>,
}

async fn task_cancel(call: ToolCall, args: CancelArguments) -> Outcome<OneTask> {
    let id = TaskId::from_uuid(args.task_id);
    let request = TaskRequest::CancelUnstarted { reason: args.reason };
    let outcome = call
        .service
        .task_act(call.caller(), id, request)
        .await
        .map_err(|err| only_unstarted("cancelled", err))?;
    Ok(Answer::new(format!("task {id} cancelled"), OneTask { task: message(&outcome.task) }))
}

/// A refusal in the inbox's words: the service refused because the task had started.
fn only_unstarted(done: &str, err: ServiceError) -> Reply {
    match err {
        ServiceError::Conflict(why) => {
            Reply::refused(format!("only a task that has not started can be {done} here ({why})"))
        }
        other => other.into(),
    }
}

async fn get_next_task(call: ToolCall, _: NoArguments) -> Outcome<NextTask> {
    let active_query = TaskListQuery {
        statuses: vec![TaskStatus::InProgress],
        agent_id: call.agent_id(),
        limit: Some(1),
        ..TaskListQuery::default()
    };
    let (_, n_active) = call.service.task_list(active_query).await?;
    let trigger = call.service.poll_next_task(call.caller()).await?;
    let (mut text, task) = match &trigger {
        None => ("no task is waiting".to_string(), None),
        Some(Trigger::TaskOffered { task, .. }) => {
            (format!("task {} is offered to you: accept or reject it with task-action", task.id), Some(task))
        }
        Some(Trigger::TaskAssigned { task, .. }) => {
            (format!("task {} is yours and started", task.id), Some(task))
        }
        Some(Trigger::BudgetRefused(refused)) => (
            format!(
                "no task was started: the {} daily budget is reached (it resets at {}); ask again later",
                refused.cause.as_str(),
                refused.reset_at
            ),
            None,
        ),
        Some(other) => (format!("{} for you", other.type_name()), None),
    };
    if n_active > 0 {
        text.push_str(&format!(
            ". Warning: you already have {n_active} task(s) in progress; finish them with task_complete"
        ));
    }
    let next_task = task.map(message);
    Ok(Answer::new(text, NextTask { next_task, trigger }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CompleteArguments {
    task_id: Uuid,
    /// The result, written as the reply to whoever asked: it is relayed to them.
    response_summary: String,
}

async fn task_complete(call: ToolCall, args: CompleteArguments) -> Outcome<OneTask> {
    let finish =
        Finish { status: TaskStatus::Completed, output: Some(args.response_summary), failure_reason: None };
    let report = TaskReport { progress: None, finish: Some(finish) };
    let outcome = call.service.task_report(call.caller(), TaskId::from_uuid(args.task_id), report).await?;
    let text = if outcome.already_finished {
        format!("task {} was already {}: nothing changed", outcome.task.id, outcome.task.status)
    } else {
        format!("task {} done", outcome.task.id)
    };
    Ok(Answer::new(text, OneTask { task: message(&outcome.task) }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArguments {
    /// pending (default), processing, done, cancelled, or a task status.
    status: Option<String>,
    /// 1 to 100, default 20.
    #[schemars(range(min = 1, max = 100))]
    limit: Option<i64>,
}

async fn task_list(call: ToolCall, args: ListArguments) -> Outcome<TaskList> {
    let limit = args.limit.unwrap_or(LIST_LIMIT_DEFAULT);
    if !(1..=LIST_LIMIT_MAX).contains(&limit) {
        return Err(Reply::refused(format!("limit must be between 1 and {LIST_LIMIT_MAX}, got {limit}")));
    }
    let status = args.status.unwrap_or_else(|| "pending".into());
    let query =
        TaskListQuery { statuses: statuses_for(&status)?, limit: Some(limit), ..TaskListQuery::default() };
    let (tasks, total) = call.service.task_list(query).await?;
    let tasks: Vec<Message> = tasks.iter().map(message).collect();
    Ok(Answer::new(format!("{} of {total} {status} tasks", tasks.len()), TaskList { tasks, total }))
}

async fn inbox_stats(call: ToolCall, _: NoArguments) -> Outcome<InboxStats> {
    let counts = call.service.stats().await?.tasks;
    let by_status = ByInboxStatus {
        pending: counts.backlog + counts.unassigned + counts.offered + counts.reviewing + counts.pending,
        processing: counts.in_progress + counts.paused,
        done: counts.completed + counts.failed,
        cancelled: counts.cancelled,
    };
    let mut by_channel = std::collections::BTreeMap::new();
    let mut counted = 0;
    for source in KNOWN_SOURCES {
        let query = TaskListQuery { source: Some(source.into()), limit: Some(1), ..TaskListQuery::default() };
        let (_, n_tasks) = call.service.task_list(query).await?;
        if n_tasks > 0 {
            by_channel.insert(source.into(), n_tasks);
            counted += n_tasks;
        }
    }
    if counts.total > counted {
        by_channel.insert("other".into(), counts.total - counted);
    }
    let message = format!("{} tasks", counts.total);
    let stats = InboxStats { total: counts.total, by_status, by_swarm_status: counts, by_channel };
    Ok(Answer::new(message, stats))
}

// The result fields of the Inbox-MCP tools, for their output schemas.
#[derive(Serialize, utoipa::ToSchema)]
struct OneTask {
    task: Message,
}

#[derive(Serialize, utoipa::ToSchema)]
struct NextTask {
    /// `null` when no task is waiting.
    next_task: Option<Message>,
    /// What the poll handed out, as `GET /api/poll` does.
    trigger: Option<Trigger>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct TaskList {
    tasks: Vec<Message>,
    total: i64,
}

#[derive(Serialize, utoipa::ToSchema)]
struct InboxStats {
    total: i64,
    by_status: ByInboxStatus,
    by_swarm_status: swarm_domain::stats::TaskCounts,
    /// Tasks by source (`mcp`, `api`, `slack`, `github`, `schedule`, `webhook`, `other`).
    by_channel: std::collections::BTreeMap<String, i64>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct ByInboxStatus {
    pending: i64,
    processing: i64,
    done: i64,
    cancelled: i64,
}
