use axum::{
    extract::{Path, Query, State},
    http::StatusCode,
    response::IntoResponse,
};
use serde::{Deserialize, Serialize};
use swarm_domain::{
    agent::{Agent, ProfileUpdate, Registration},
    id::AgentId,
    wire::{AgentList, AgentView, RegisterAgentRequest},
};
use swarm_service::{InboxSummary, RegisterInput};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::IncludeQuery;
use crate::Json;
use crate::{
    AppState,
    error::{ApiError, ErrorResponses},
    extract::{AppJson, CallerHeader, Credentials, RunnerHeader},
    routes::{reference_runner::ProfileFiles, tokens::NewTokenResponse},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(agents_register, agents_list))
        .routes(routes!(agents_get))
        .routes(routes!(agents_rename))
        .routes(routes!(agents_update_profile))
        .routes(routes!(agents_status_reason))
        .routes(routes!(me_get))
        .routes(routes!(agents_ping))
        .routes(routes!(agents_close))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct RenameBody {
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    name: String,
}

/// At least one field that is not null.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ProfileBody {
    #[schema(pattern = r"^[^\u0000]*$")]
    role: Option<String>,
    #[schema(pattern = r"^[^\u0000]*$")]
    description: Option<String>,
    capabilities: Option<Vec<String>>,
    /// The reference runner's profile files (`claudeMd`, `soulMd`, ...), kept and read
    /// back in `/me`.
    #[serde(flatten)]
    files: ProfileFiles,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InboxResponse {
    unread_count: i64,
    mentions_count: i64,
    offered_tasks_count: i64,
    pool_tasks_count: i64,
    in_progress_count: i64,
    /// Undelivered mail to the agent (ours), and how much of it is urgent.
    unread_mail_count: i64,
    urgent_mail_count: i64,
    /// The agent sent mail awaiting a response and no reply came yet (ours).
    waiting_for_response: bool,
    #[schema(value_type = Vec<Object>)]
    recent_mentions: Vec<serde_json::Value>,
}

impl From<InboxSummary> for InboxResponse {
    fn from(inbox: InboxSummary) -> Self {
        InboxResponse {
            unread_count: inbox.unread_count,
            mentions_count: inbox.mentions_count,
            offered_tasks_count: inbox.offered_tasks_count,
            pool_tasks_count: inbox.pool_tasks_count,
            in_progress_count: inbox.in_progress_count,
            unread_mail_count: inbox.mail.unread,
            urgent_mail_count: inbox.mail.urgent,
            waiting_for_response: inbox.mail.waiting_for_response(),
            recent_mentions: Vec::new(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MeResponse {
    #[serde(flatten)]
    agent: Agent,
    #[serde(skip_serializing_if = "Option::is_none")]
    inbox: Option<InboxResponse>,
    /// The profile files the agent's runner keeps on the hub.
    #[serde(flatten)]
    files: ProfileFiles,
}

/// Register an agent, or bring a known one back online.
///
/// The id is the `X-Agent-ID` header, or a new UUID when absent. 201 when created, 200
/// when the agent existed (an offline agent becomes idle; `maxTasks` is updated).
#[utoipa::path(post, path = "/api/agents", tag = "agents", request_body = RegisterAgentRequest,
    params(("X-Agent-ID" = Option<String>, Header, description = "The agent's id (UUID)")),
    responses(
        (status = 201, description = "Registered", body = RegisteredResponse),
        (status = 200, description = "Already registered", body = RegisteredResponse), ErrorResponses))]
async fn agents_register(
    State(state): State<AppState>,
    Credentials(authenticated, named): Credentials,
    AppJson(body): AppJson<RegisterAgentRequest>,
) -> Result<impl IntoResponse, ApiError> {
    let input = RegisterInput {
        name: body.name,
        is_lead: body.is_lead,
        description: body.description,
        role: body.role,
        capabilities: body.capabilities,
        max_tasks: body.max_tasks,
    };
    let (registration, token) = state.service.agent_register_as(authenticated, named, input).await?;
    let token = token.map(NewTokenResponse::from);
    Ok(match registration {
        Registration::Created(agent) => (StatusCode::CREATED, Json(RegisteredResponse { agent, token })),
        Registration::Existing(agent) => (StatusCode::OK, Json(RegisteredResponse { agent, token })),
    })
}

/// A registered agent; with the operator key in token mode, a new agent's first token.
#[derive(Debug, Serialize, ToSchema)]
pub struct RegisteredResponse {
    #[serde(flatten)]
    agent: Agent,
    /// Token mode, a new agent registered with the operator key: its first token, shown
    /// this once.
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<NewTokenResponse>,
}

/// All agents, ordered by name.
#[utoipa::path(get, path = "/api/agents", tag = "agents", params(IncludeQuery),
    responses((status = 200, body = AgentList), ErrorResponses))]
async fn agents_list(
    State(state): State<AppState>,
    Query(include): Query<IncludeQuery>,
) -> Result<Json<AgentList>, ApiError> {
    let mut agents = Vec::new();
    for agent in state.service.agent_list().await? {
        agents.push(with_tasks(&state, agent, include.has("tasks")).await?);
    }
    Ok(Json(AgentList { agents }))
}

/// One agent.
#[utoipa::path(get, path = "/api/agents/{id}", tag = "agents",
    params(("id" = uuid::Uuid, Path, description = "Agent id"), IncludeQuery),
    responses((status = 200, body = AgentView), ErrorResponses))]
async fn agents_get(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(include): Query<IncludeQuery>,
) -> Result<Json<AgentView>, ApiError> {
    let agent = state.service.agent_get(AgentId::parse(&id)?).await?;
    Ok(Json(with_tasks(&state, agent, include.has("tasks")).await?))
}

async fn with_tasks(state: &AppState, agent: Agent, include_tasks: bool) -> Result<AgentView, ApiError> {
    let tasks = if include_tasks { Some(state.service.agent_tasks(agent.id).await?) } else { None };
    Ok(AgentView { agent, tasks })
}

/// Rename an agent (itself, or any agent for the lead).
#[utoipa::path(put, path = "/api/agents/{id}/name", tag = "agents", request_body = RenameBody,
    params(("id" = uuid::Uuid, Path, description = "Agent id")),
    responses((status = 200, body = Agent), ErrorResponses))]
async fn agents_rename(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    AppJson(body): AppJson<RenameBody>,
) -> Result<Json<Agent>, ApiError> {
    Ok(Json(state.service.agent_rename(caller, AgentId::parse(&id)?, &body.name).await?))
}

/// Change an agent's role, description or capabilities (at least one).
#[utoipa::path(put, path = "/api/agents/{id}/profile", tag = "agents", request_body = ProfileBody,
    params(("id" = uuid::Uuid, Path, description = "Agent id")),
    responses((status = 200, body = Agent), ErrorResponses))]
async fn agents_update_profile(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    AppJson(body): AppJson<ProfileBody>,
) -> Result<Json<Agent>, ApiError> {
    let files = body.files.into_map();
    let fields = body.description.is_some() || body.role.is_some() || body.capabilities.is_some();
    let update = (fields || files.is_empty())
        .then(|| ProfileUpdate::parse(body.description, body.role, body.capabilities));
    let update = update.transpose()?;
    Ok(Json(state.service.agent_profile_with_files(caller, AgentId::parse(&id)?, update, files).await?))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusReasonBody {
    /// Why the agent stopped taking work (at most 1,000 characters); null or empty clears it.
    #[schema(max_length = 1000, pattern = r"^[^\u0000]*$")]
    reason: Option<String>,
}

/// Say why an agent stopped taking work (its runner does, e.g. "Claude Code exited at
/// once 3 times: Invalid API key"), or clear it with null. Shown as `statusReason`;
/// cleared when the agent takes work again. Ours (issue #19).
#[utoipa::path(post, path = "/api/agents/{id}/status-reason", tag = "agents", request_body = StatusReasonBody,
    params(("id" = uuid::Uuid, Path, description = "Agent id")),
    responses((status = 200, body = Agent), ErrorResponses))]
async fn agents_status_reason(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    AppJson(body): AppJson<StatusReasonBody>,
) -> Result<Json<Agent>, ApiError> {
    let id = AgentId::parse(&id)?;
    Ok(Json(state.service.agent_set_status_reason(caller, id, body.reason.as_deref()).await?))
}

/// The calling agent (`X-Agent-ID`), with its capacity and, on request, its inbox counts.
#[utoipa::path(get, path = "/me", tag = "agents", params(IncludeQuery),
    responses((status = 200, body = MeResponse), ErrorResponses))]
async fn me_get(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Query(include): Query<IncludeQuery>,
) -> Result<Json<MeResponse>, ApiError> {
    let (agent, inbox, files) = state.service.me_with_files(caller, include.has("inbox")).await?;
    Ok(Json(MeResponse { agent, inbox: inbox.map(Into::into), files: ProfileFiles::from_map(files) }))
}

/// Heartbeat: an offline agent becomes idle, and the leases of what it holds run on. A
/// runner sends `X-Runner-ID`: of the lead-side claims, those it holds are extended,
/// not another runner's of the same agent.
#[utoipa::path(post, path = "/ping", tag = "agents",
    params(("X-Runner-ID" = Option<uuid::Uuid>, Header, description = "The pinging runner process")),
    responses((status = 204), ErrorResponses))]
async fn agents_ping(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    RunnerHeader(runner): RunnerHeader,
) -> Result<StatusCode, ApiError> {
    state.service.agent_ping(caller, runner).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The calling agent goes offline.
#[utoipa::path(post, path = "/close", tag = "agents",
    responses((status = 204), ErrorResponses))]
async fn agents_close(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
) -> Result<StatusCode, ApiError> {
    state.service.agent_close(caller).await?;
    Ok(StatusCode::NO_CONTENT)
}
