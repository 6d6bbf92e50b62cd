use axum::{
    extract::{Path, Query, State},
    http::StatusCode,
};
use serde::{Deserialize, Serialize};
use swarm_domain::{
    event::Event,
    id::{AgentId, TaskId},
    task::{Task, TaskDraft, TaskOrigin, TaskStatus},
    wire::{CreateTaskRequest, InitialStatus},
};
use swarm_service::{ActionOutcome, Caller, TaskListQuery, TaskReport, TaskRequest};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::Json;
use crate::{
    AppState,
    error::{ApiError, ErrorResponses},
    extract::{AppJson, CallerHeader, OptionalJson, optional_id, split_list},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(tasks_create, tasks_list))
        .routes(routes!(tasks_get))
        .routes(routes!(tasks_finish))
        .routes(routes!(tasks_cancel))
        .routes(routes!(tasks_claim))
        .routes(routes!(tasks_release))
        .routes(routes!(tasks_give_back))
        .routes(routes!(tasks_reassign))
        .routes(routes!(tasks_accept))
        .routes(routes!(tasks_reject))
        .routes(routes!(tasks_start))
        .routes(routes!(tasks_pause))
        .routes(routes!(tasks_resume))
        .routes(routes!(tasks_progress))
        .routes(routes!(tasks_edit))
        .routes(routes!(tasks_priority))
        .routes(routes!(tasks_to_backlog))
        .routes(routes!(tasks_from_backlog))
        .routes(routes!(tasks_paused))
        .routes(routes!(tasks_cancelled))
}

/// How a task ends when its agent finishes it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FinishStatus {
    Completed,
    Failed,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ListTasksQuery {
    /// One status or a comma-separated list.
    status: Option<String>,
    /// A UUID; empty means no filter.
    #[param(value_type = Option<String>, pattern = r"^$|^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")]
    agent_id: Option<String>,
    /// Case-insensitive text in the task.
    search: Option<String>,
    source: Option<String>,
    task_type: Option<String>,
    /// Comma-separated tags the task must all carry.
    tags: Option<String>,
    /// 1 to 1000, default 100.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
    #[param(minimum = 0)]
    offset: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TaskListResponse {
    tasks: Vec<Task>,
    total: i64,
}

/// A task with its history (newest first).
#[derive(Debug, Serialize, ToSchema)]
pub struct TaskDetailResponse {
    #[serde(flatten)]
    task: Task,
    logs: Vec<Event>,
    /// The provider session the runner reported (`PUT /api/tasks/:id/session`):
    /// `claudeSessionId`, `provider`, `model`, `providerMeta`, ...
    #[serde(flatten)]
    #[schema(value_type = Object)]
    session: serde_json::Map<String, serde_json::Value>,
    /// The latest context-usage snapshots (`POST /api/tasks/:id/context`), newest first.
    #[schema(value_type = Vec<Object>)]
    #[serde(rename = "contextUsage")]
    context_usage: Vec<serde_json::Value>,
    /// The pull and merge request URLs the task's agent reported (in its progress or
    /// output), each once, in the order first seen: the evidence of its shipped work.
    #[serde(rename = "pullRequestUrls")]
    pull_request_urls: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskActionResponse {
    success: bool,
    /// True when a finish or cancel found the task already finished; nothing changed.
    already_finished: bool,
    task: Task,
}

impl From<ActionOutcome> for TaskActionResponse {
    fn from(outcome: ActionOutcome) -> Self {
        TaskActionResponse { success: true, already_finished: outcome.already_finished, task: outcome.task }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FinishBody {
    status: FinishStatus,
    output: Option<String>,
    failure_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct ReasonBody {
    reason: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReassignBody {
    /// The agent that takes the task (status `pending`).
    agent_id: AgentId,
    /// Ours: take it even from a holder that is online (its run is not stopped, and its
    /// finish is refused). Without it, a holder that is online answers 409.
    #[serde(default)]
    even_if_online: bool,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PriorityBody {
    /// 0 (lowest) to 100 (highest).
    #[schema(minimum = 0, maximum = 100)]
    priority: i64,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct EditBody {
    /// The new text.
    #[schema(min_length = 1, max_length = 100000, pattern = r"^[^\u0000]*[^\s\u0000][^\u0000]*$")]
    task: String,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ProgressBody {
    #[schema(min_length = 1, pattern = r"^[^\u0000]*[^\s\u0000][^\u0000]*$")]
    progress: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TasksResponse {
    tasks: Vec<Task>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CancelledTask {
    id: TaskId,
    task: String,
    failure_reason: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CancelledTasksResponse {
    cancelled: Vec<CancelledTask>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct CancelledQuery {
    /// A UUID; empty means no filter.
    #[param(value_type = Option<String>, pattern = r"^$|^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")]
    task_id: Option<String>,
}

/// Create a task: offered (`offeredTo`), assigned (`agentId`), parked (`status: backlog`)
/// or in the pool.
#[utoipa::path(post, path = "/api/tasks", tag = "tasks", request_body = CreateTaskRequest,
    responses((status = 201, body = Task), ErrorResponses))]
async fn tasks_create(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    AppJson(body): AppJson<CreateTaskRequest>,
) -> Result<(StatusCode, Json<Task>), ApiError> {
    let backlog = matches!(body.status, Some(InitialStatus::Backlog));
    let draft = TaskDraft {
        task: body.task,
        agent_id: body.agent_id,
        offered_to: body.offered_to,
        backlog,
        source: body.source,
        task_type: body.task_type,
        tags: body.tags,
        priority: body.priority,
        depends_on: body.depends_on,
        origin: TaskOrigin { model: body.model, ..TaskOrigin::default() },
        epic_id: None,
    };
    // Boxed, as every task action below: see `act`.
    let task = Box::pin(state.service.task_create(caller, draft)).await?;
    Ok((StatusCode::CREATED, Json(task)))
}

/// Tasks, newest first, with the total that match.
#[utoipa::path(get, path = "/api/tasks", tag = "tasks", params(ListTasksQuery),
    responses((status = 200, body = TaskListResponse), ErrorResponses))]
async fn tasks_list(
    State(state): State<AppState>,
    Query(query): Query<ListTasksQuery>,
) -> Result<Json<TaskListResponse>, ApiError> {
    let statuses = split_list(query.status.as_deref())
        .iter()
        .map(|status| TaskStatus::parse(status))
        .collect::<Result<Vec<_>, _>>()?;
    let agent_id = optional_id(query.agent_id.as_deref(), AgentId::parse)?;
    let list_query = TaskListQuery {
        statuses,
        agent_id,
        search: query.search,
        source: query.source,
        task_type: query.task_type,
        tags: split_list(query.tags.as_deref()),
        limit: query.limit,
        offset: query.offset,
        ..TaskListQuery::default()
    };
    let (tasks, total) = state.service.task_list(list_query).await?;
    Ok(Json(TaskListResponse { tasks, total }))
}

/// One task and its history.
#[utoipa::path(get, path = "/api/tasks/{id}", tag = "tasks", params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = TaskDetailResponse), ErrorResponses))]
async fn tasks_get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<TaskDetailResponse>, ApiError> {
    let id = TaskId::parse(&id)?;
    let reported = state.service.task_detail_reported(id).await?;
    let pull_request_urls = state.service.task_pull_requests(id).await?;
    let session = match reported.session {
        Some(serde_json::Value::Object(session)) => session,
        _ => serde_json::Map::new(),
    };
    Ok(Json(TaskDetailResponse {
        task: reported.detail.task,
        logs: reported.detail.logs,
        session,
        context_usage: reported.context,
        pull_request_urls,
    }))
}

async fn act(
    state: &AppState,
    caller: Caller,
    id: &str,
    request: TaskRequest,
) -> Result<Json<TaskActionResponse>, ApiError> {
    // Boxed: the service's future is kilobytes (a task action holds tasks across its
    // awaits), and held inline it would be copied whole each time axum's layers move the
    // handler's future along, several times per request.
    let outcome = Box::pin(state.service.task_act(caller, TaskId::parse(id)?, request)).await?;
    Ok(Json(outcome.into()))
}

/// Finish an `in_progress` task as completed or failed. Finishing again changes
/// nothing and answers `alreadyFinished: true`.
#[utoipa::path(post, path = "/api/tasks/{id}/finish", tag = "tasks", request_body = FinishBody,
    params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = TaskActionResponse), ErrorResponses))]
async fn tasks_finish(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    AppJson(body): AppJson<FinishBody>,
) -> Result<Json<TaskActionResponse>, ApiError> {
    let status = match body.status {
        FinishStatus::Completed => TaskStatus::Completed,
        FinishStatus::Failed => TaskStatus::Failed,
    };
    let request = TaskRequest::Finish { status, output: body.output, failure_reason: body.failure_reason };
    act(&state, caller, &id, request).await
}

/// Cancel a task that is not finished (the lead, the creator, or an operator).
#[utoipa::path(post, path = "/api/tasks/{id}/cancel", tag = "tasks", request_body(content = Option<ReasonBody>, description = "Optional"),
    params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = TaskActionResponse), ErrorResponses))]
async fn tasks_cancel(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    OptionalJson(body): OptionalJson<ReasonBody>,
) -> Result<Json<TaskActionResponse>, ApiError> {
    act(&state, caller, &id, TaskRequest::Cancel { reason: body.reason }).await
}

/// Take a pool task (`unassigned` → `pending`); needs capacity and completed dependencies.
#[utoipa::path(post, path = "/api/tasks/{id}/claim", tag = "tasks", params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = TaskActionResponse), ErrorResponses))]
async fn tasks_claim(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
) -> Result<Json<TaskActionResponse>, ApiError> {
    act(&state, caller, &id, TaskRequest::Claim).await
}

/// Give an own pending or started task back to the pool; as the operator (no
/// `X-Agent-ID`) or the lead, hand a gone (offline) agent's pending, started, paused or
/// offered task back to the pool (409 while that agent is online).
#[utoipa::path(post, path = "/api/tasks/{id}/release", tag = "tasks", params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = TaskActionResponse), ErrorResponses))]
async fn tasks_release(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
) -> Result<Json<TaskActionResponse>, ApiError> {
    act(&state, caller, &id, TaskRequest::Release).await
}

/// The task's body for `give-back`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GiveBackBody {
    /// Why the task is given back: logged on it and told to the lead.
    #[schema(min_length = 1, max_length = 100000, pattern = r"^[^\u0000]*[^\s\u0000][^\u0000]*$")]
    reason: String,
}

/// Ours: give an own pending or started task back to the pool, saying why (a runner that
/// stopped a run going nowhere does): the lead is told (`tasks_handed_back`).
#[utoipa::path(post, path = "/api/tasks/{id}/give-back", tag = "tasks", request_body = GiveBackBody,
    params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = TaskActionResponse), ErrorResponses))]
async fn tasks_give_back(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    AppJson(body): AppJson<GiveBackBody>,
) -> Result<Json<TaskActionResponse>, ApiError> {
    let outcome =
        Box::pin(state.service.task_give_back(caller, TaskId::parse(&id)?, Some(body.reason))).await?;
    Ok(Json(outcome.into()))
}

/// Operator or lead (ours): give a gone (offline) agent's pending, started, paused or
/// offered task, or a pool or backlog task, to another agent (`pending` for it).
#[utoipa::path(post, path = "/api/tasks/{id}/reassign", tag = "tasks", request_body = ReassignBody,
    params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = TaskActionResponse), ErrorResponses))]
async fn tasks_reassign(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    AppJson(body): AppJson<ReassignBody>,
) -> Result<Json<TaskActionResponse>, ApiError> {
    let request = TaskRequest::Reassign { agent_id: body.agent_id, even_if_online: body.even_if_online };
    act(&state, caller, &id, request).await
}

/// Ours: change a task's priority until it is finished (its creator, the lead or an
/// operator); the pool and the poll take higher priorities first.
#[utoipa::path(post, path = "/api/tasks/{id}/priority", tag = "tasks", request_body = PriorityBody,
    params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = Task), ErrorResponses))]
async fn tasks_priority(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    AppJson(body): AppJson<PriorityBody>,
) -> Result<Json<Task>, ApiError> {
    Ok(Json(state.service.task_set_priority(caller, TaskId::parse(&id)?, body.priority).await?))
}

/// Accept a task offered to the caller (`offered` or `reviewing` → `pending`).
#[utoipa::path(post, path = "/api/tasks/{id}/accept", tag = "tasks", params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = TaskActionResponse), ErrorResponses))]
async fn tasks_accept(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
) -> Result<Json<TaskActionResponse>, ApiError> {
    act(&state, caller, &id, TaskRequest::Accept).await
}

/// Decline a task offered to the caller; it returns to the pool.
#[utoipa::path(post, path = "/api/tasks/{id}/reject", tag = "tasks", request_body(content = Option<ReasonBody>, description = "Optional"),
    params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = TaskActionResponse), ErrorResponses))]
async fn tasks_reject(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    OptionalJson(body): OptionalJson<ReasonBody>,
) -> Result<Json<TaskActionResponse>, ApiError> {
    act(&state, caller, &id, TaskRequest::Reject { reason: body.reason }).await
}

/// Begin work on an own pending task (`pending` → `in_progress`); the poll does this for runners.
#[utoipa::path(post, path = "/api/tasks/{id}/start", tag = "tasks", params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = TaskActionResponse), ErrorResponses))]
async fn tasks_start(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
) -> Result<Json<TaskActionResponse>, ApiError> {
    act(&state, caller, &id, TaskRequest::Start).await
}

/// Pause a task in progress: an agent its own; the operator or the lead anyone's (the
/// agent's run is not stopped: steer or cancel it for that).
#[utoipa::path(post, path = "/api/tasks/{id}/pause", tag = "tasks", params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = TaskActionResponse), ErrorResponses))]
async fn tasks_pause(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
) -> Result<Json<TaskActionResponse>, ApiError> {
    act(&state, caller, &id, TaskRequest::Pause).await
}

/// Resume a paused task: an agent its own; the operator or the lead anyone's.
#[utoipa::path(post, path = "/api/tasks/{id}/resume", tag = "tasks", params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = TaskActionResponse), ErrorResponses))]
async fn tasks_resume(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
) -> Result<Json<TaskActionResponse>, ApiError> {
    act(&state, caller, &id, TaskRequest::Resume).await
}

/// Record a progress note (the assignee or the lead); refused once the task is finished.
/// The REST twin of the `store-progress` tool: an assignee reporting on its own
/// `pending` task starts it first.
#[utoipa::path(post, path = "/api/tasks/{id}/progress", tag = "tasks", request_body = ProgressBody,
    params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = TaskActionResponse), ErrorResponses))]
async fn tasks_progress(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    AppJson(body): AppJson<ProgressBody>,
) -> Result<Json<TaskActionResponse>, ApiError> {
    let report = TaskReport { progress: Some(body.progress), finish: None };
    let outcome = state.service.task_report(caller, TaskId::parse(&id)?, report).await?;
    let outcome = ActionOutcome { task: outcome.task, already_finished: outcome.already_finished };
    Ok(Json(outcome.into()))
}

/// Change a task's text while nobody has taken it up (backlog, pool, offered, pending):
/// the task's creator, the lead or an operator. 409 once it is under review or started.
#[utoipa::path(post, path = "/api/tasks/{id}/edit", tag = "tasks", request_body = EditBody,
    params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = Task), ErrorResponses))]
async fn tasks_edit(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    AppJson(body): AppJson<EditBody>,
) -> Result<Json<Task>, ApiError> {
    Ok(Json(state.service.task_edit(caller, TaskId::parse(&id)?, &body.task).await?))
}

/// Park a pool task in the backlog.
#[utoipa::path(post, path = "/api/tasks/{id}/to-backlog", tag = "tasks", params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = TaskActionResponse), ErrorResponses))]
async fn tasks_to_backlog(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
) -> Result<Json<TaskActionResponse>, ApiError> {
    act(&state, caller, &id, TaskRequest::ToBacklog).await
}

/// Move a backlog task into the pool.
#[utoipa::path(post, path = "/api/tasks/{id}/from-backlog", tag = "tasks", params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = TaskActionResponse), ErrorResponses))]
async fn tasks_from_backlog(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
) -> Result<Json<TaskActionResponse>, ApiError> {
    act(&state, caller, &id, TaskRequest::FromBacklog).await
}

/// The calling agent's paused tasks.
#[utoipa::path(get, path = "/api/paused-tasks", tag = "tasks",
    responses((status = 200, body = TasksResponse), ErrorResponses))]
async fn tasks_paused(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
) -> Result<Json<TasksResponse>, ApiError> {
    Ok(Json(TasksResponse { tasks: state.service.tasks_paused(caller).await? }))
}

/// That task if cancelled, else the calling agent's tasks cancelled in the last 5 minutes.
#[utoipa::path(get, path = "/cancelled-tasks", tag = "tasks", params(CancelledQuery),
    responses((status = 200, body = CancelledTasksResponse), ErrorResponses))]
async fn tasks_cancelled(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Query(query): Query<CancelledQuery>,
) -> Result<Json<CancelledTasksResponse>, ApiError> {
    let task_id = optional_id(query.task_id.as_deref(), TaskId::parse)?;
    let cancelled = state
        .service
        .tasks_cancelled(caller, task_id)
        .await?
        .into_iter()
        .map(|task| CancelledTask { id: task.id, task: task.task, failure_reason: task.failure_reason })
        .collect();
    Ok(Json(CancelledTasksResponse { cancelled }))
}
