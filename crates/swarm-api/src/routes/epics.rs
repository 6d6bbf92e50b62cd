//! Epics (the reference's `/api/epics`): a goal that groups tasks, with its progress.

use axum::{
    extract::{Path, Query, State},
    http::StatusCode,
};
use serde::{Deserialize, Deserializer, Serialize};
use swarm_domain::{
    epic::{Epic, EpicDraft, EpicStatus, EpicWithProgress},
    id::{AgentId, EpicId, TaskId},
    task::{Task, TaskDraft},
};
use swarm_service::{EpicQuery, EpicTask};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::Json;
use crate::{
    AppState,
    error::{ApiError, ErrorResponses},
    extract::{AppJson, CallerHeader, optional_id},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(epics_list, epics_create))
        .routes(routes!(epics_get, epics_update, epics_delete))
        .routes(routes!(epics_add_task))
}

/// Every field of an epic a caller sets. On create `name` and `goal` are required
/// (400 names the missing ones); on update only the fields given change.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EpicBody {
    /// 1 to 200 characters, unique.
    #[schema(max_length = 200)]
    name: Option<String>,
    goal: Option<String>,
    description: Option<String>,
    prd: Option<String>,
    plan: Option<String>,
    status: Option<EpicStatus>,
    #[schema(minimum = 0, maximum = 100)]
    priority: Option<i64>,
    tags: Option<Vec<String>>,
    /// An agent id; `null` clears it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, format = Uuid)]
    lead_agent_id: Option<Option<AgentId>>,
    slack_channel_id: Option<String>,
    slack_thread_ts: Option<String>,
    github_repo: Option<String>,
    github_milestone: Option<String>,
}

/// A field that is present (even as `null`) is `Some`; an absent one stays `None`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

impl From<EpicBody> for EpicDraft {
    fn from(body: EpicBody) -> Self {
        EpicDraft {
            name: body.name,
            goal: body.goal,
            description: body.description,
            prd: body.prd,
            plan: body.plan,
            status: body.status,
            priority: body.priority,
            tags: body.tags,
            lead_agent_id: body.lead_agent_id,
            slack_channel_id: body.slack_channel_id,
            slack_thread_ts: body.slack_thread_ts,
            github_repo: body.github_repo,
            github_milestone: body.github_milestone,
        }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ListEpicsQuery {
    status: Option<EpicStatus>,
    /// Case-insensitive text in the name, description or goal.
    search: Option<String>,
    /// A UUID; empty means no filter.
    #[param(value_type = Option<String>, pattern = r"^$|^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")]
    lead_agent_id: Option<String>,
    /// A UUID; empty means no filter.
    #[param(value_type = Option<String>, pattern = r"^$|^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")]
    created_by_agent_id: Option<String>,
    /// 1 to 1000; all when absent.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EpicListResponse {
    epics: Vec<EpicWithProgress>,
    total: usize,
}

/// An epic with its task counts, progress and tasks.
#[derive(Debug, Serialize, ToSchema)]
pub struct EpicDetailResponse {
    #[serde(flatten)]
    epic: EpicWithProgress,
    tasks: Vec<Task>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeletedResponse {
    success: bool,
}

/// `{taskId}` to put an existing task in the epic, or a new task's fields.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EpicTaskBody {
    task_id: Option<TaskId>,
    /// The new task's text (when no `taskId`).
    task: Option<String>,
    agent_id: Option<AgentId>,
    offered_to: Option<AgentId>,
    task_type: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    #[schema(minimum = 0, maximum = 100)]
    priority: Option<i64>,
    #[serde(default)]
    depends_on: Vec<TaskId>,
    source: Option<String>,
}

fn epic_id(text: &str) -> Result<EpicId, ApiError> {
    Ok(EpicId::parse(text)?)
}

/// Epics, highest priority first, each with its task counts and progress.
#[utoipa::path(get, path = "/api/epics", tag = "epics", params(ListEpicsQuery),
    responses((status = 200, body = EpicListResponse), ErrorResponses))]
async fn epics_list(
    State(state): State<AppState>,
    Query(query): Query<ListEpicsQuery>,
) -> Result<Json<EpicListResponse>, ApiError> {
    let query = EpicQuery {
        status: query.status,
        search: query.search,
        lead_agent_id: optional_id(query.lead_agent_id.as_deref(), AgentId::parse)?,
        created_by_agent_id: optional_id(query.created_by_agent_id.as_deref(), AgentId::parse)?,
        limit: query.limit,
    };
    let epics = state.service.epic_list(query).await?;
    Ok(Json(EpicListResponse { total: epics.len(), epics }))
}

/// Create an epic (`draft` unless a status is given). The lead or the operator.
#[utoipa::path(post, path = "/api/epics", tag = "epics", request_body = EpicBody,
    responses((status = 201, body = Epic), ErrorResponses))]
async fn epics_create(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    AppJson(body): AppJson<EpicBody>,
) -> Result<(StatusCode, Json<Epic>), ApiError> {
    let epic = state.service.epic_create(caller, body.into()).await?;
    Ok((StatusCode::CREATED, Json(epic)))
}

/// One epic with its task counts (`taskStats`), `progress` and `tasks`.
#[utoipa::path(get, path = "/api/epics/{id}", tag = "epics",
    params(("id" = uuid::Uuid, Path, description = "Epic id")),
    responses((status = 200, body = EpicDetailResponse), ErrorResponses))]
async fn epics_get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<EpicDetailResponse>, ApiError> {
    let detail = state.service.epic_detail(epic_id(&id)?).await?;
    Ok(Json(EpicDetailResponse { epic: detail.epic, tasks: detail.tasks }))
}

/// Change the fields given. The lead or the operator.
#[utoipa::path(put, path = "/api/epics/{id}", tag = "epics", request_body = EpicBody,
    params(("id" = uuid::Uuid, Path, description = "Epic id")),
    responses((status = 200, body = Epic), ErrorResponses))]
async fn epics_update(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    AppJson(body): AppJson<EpicBody>,
) -> Result<Json<Epic>, ApiError> {
    let epic = state.service.epic_update(caller, epic_id(&id)?, body.into()).await?;
    Ok(Json(epic))
}

/// Delete an epic; its tasks stay, without an epic. The lead or the operator.
#[utoipa::path(delete, path = "/api/epics/{id}", tag = "epics",
    params(("id" = uuid::Uuid, Path, description = "Epic id")),
    responses((status = 200, body = DeletedResponse), ErrorResponses))]
async fn epics_delete(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
) -> Result<Json<DeletedResponse>, ApiError> {
    state.service.epic_delete(caller, epic_id(&id)?).await?;
    Ok(Json(DeletedResponse { success: true }))
}

/// Put an existing task in the epic (`{taskId}`, 200), or create one in it from a new
/// task's fields (201, tagged `epic:<name>`). The lead or the operator.
#[utoipa::path(post, path = "/api/epics/{id}/tasks", tag = "epics", request_body = EpicTaskBody,
    params(("id" = uuid::Uuid, Path, description = "Epic id")),
    responses((status = 200, description = "An existing task joined the epic", body = Task),
        (status = 201, description = "A task was created in the epic", body = Task), ErrorResponses))]
async fn epics_add_task(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    AppJson(body): AppJson<EpicTaskBody>,
) -> Result<(StatusCode, Json<Task>), ApiError> {
    let epic = epic_id(&id)?;
    let request = match (body.task_id, body.task) {
        (Some(task_id), _) => EpicTask::Existing(task_id),
        (None, Some(task)) => EpicTask::New(Box::new(TaskDraft {
            task,
            agent_id: body.agent_id,
            offered_to: body.offered_to,
            task_type: body.task_type,
            tags: body.tags,
            priority: body.priority,
            depends_on: body.depends_on,
            source: body.source,
            ..TaskDraft::default()
        })),
        (None, None) => return Err(ApiError::BadRequest("Missing task description or taskId".into())),
    };
    let (task, created) = state.service.epic_add_task(caller, epic, request).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(task)))
}
