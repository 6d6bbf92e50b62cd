use axum::{
    extract::{DefaultBodyLimit, Path, Query, State},
    http::StatusCode,
};
use serde::{Deserialize, Serialize};
use swarm_domain::{
    id::{AgentId, TaskId},
    session::{NewSessionCost, NewSessionLogs, SessionCost, SessionLog},
    wire::{SessionCostRequest, SessionLogsRequest, SessionStartRequest},
};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{
    router::{OpenApiRouter, UtoipaMethodRouterExt},
    routes,
};

use crate::Json;
use crate::{
    AppState, SESSION_LOGS_BODY_LIMIT_BYTES,
    error::{ApiError, ErrorResponses},
    extract::{AppJson, CallerHeader, optional_id},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(session_logs_create).layer(DefaultBodyLimit::max(SESSION_LOGS_BODY_LIMIT_BYTES)))
        .routes(routes!(session_logs_for_task))
        .routes(routes!(session_costs_create, session_costs_list))
        .routes(routes!(session_starts_create))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionStartRecorded {
    success: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionLogsCreated {
    success: bool,
    count: u64,
}

/// The reference's answer: `{success: true, cost}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionCostCreated {
    success: bool,
    cost: SessionCost,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionLogsResponse {
    logs: Vec<SessionLog>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct SessionCostQuery {
    /// A UUID; empty means no filter.
    #[param(value_type = Option<String>, pattern = r"^$|^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")]
    task_id: Option<String>,
    /// A UUID; empty means no filter.
    #[param(value_type = Option<String>, pattern = r"^$|^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")]
    agent_id: Option<String>,
    /// 1 to 1000, default 100.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionCostsResponse {
    costs: Vec<SessionCost>,
}

/// Append lines of an agent session's output (stream-json), in order.
#[utoipa::path(post, path = "/api/session-logs", tag = "sessions", request_body = SessionLogsRequest,
    responses((status = 201, body = SessionLogsCreated), ErrorResponses))]
async fn session_logs_create(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    AppJson(body): AppJson<SessionLogsRequest>,
) -> Result<(StatusCode, Json<SessionLogsCreated>), ApiError> {
    let logs = NewSessionLogs::parse(body.session_id, body.iteration, body.task_id, body.cli, body.lines)?;
    let count = state.service.session_logs_append(caller, logs).await?;
    Ok((StatusCode::CREATED, Json(SessionLogsCreated { success: true, count })))
}

/// A task's session output, in the order it was written.
#[utoipa::path(get, path = "/api/tasks/{id}/session-logs", tag = "sessions", params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = SessionLogsResponse), ErrorResponses))]
async fn session_logs_for_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SessionLogsResponse>, ApiError> {
    let logs = state.service.session_logs_for_task(TaskId::parse(&id)?).await?;
    Ok(Json(SessionLogsResponse { logs }))
}

/// Record what an agent session cost.
#[utoipa::path(post, path = "/api/session-costs", tag = "sessions", request_body = SessionCostRequest,
    responses((status = 201, body = SessionCostCreated), ErrorResponses))]
async fn session_costs_create(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    AppJson(body): AppJson<SessionCostRequest>,
) -> Result<(StatusCode, Json<SessionCostCreated>), ApiError> {
    let cost = NewSessionCost {
        session_id: body.session_id,
        agent_id: body.agent_id,
        task_id: body.task_id,
        total_cost_usd: body.total_cost_usd,
        input_tokens: body.input_tokens,
        output_tokens: body.output_tokens,
        cache_read_tokens: body.cache_read_tokens,
        cache_write_tokens: body.cache_write_tokens,
        duration_ms: body.duration_ms,
        num_turns: body.num_turns,
        model: body.model,
        is_error: body.is_error,
    };
    let cost = state.service.session_cost_record(caller, cost).await?;
    Ok((StatusCode::CREATED, Json(SessionCostCreated { success: true, cost })))
}

/// A runner reports that it started the agent CLI for a run, or could not (ours, for
/// `swarm_runner_spawns_total` in `/metrics`; nothing is stored). The caller is the
/// agent (`X-Agent-ID`).
#[utoipa::path(post, path = "/api/session-starts", tag = "sessions", request_body = SessionStartRequest,
    responses((status = 202, body = SessionStartRecorded), ErrorResponses))]
async fn session_starts_create(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    AppJson(body): AppJson<SessionStartRequest>,
) -> Result<(StatusCode, Json<SessionStartRecorded>), ApiError> {
    state.service.session_start_report(caller, &body.cli, body.started).await?;
    Ok((StatusCode::ACCEPTED, Json(SessionStartRecorded { success: true })))
}

/// Session costs, newest first.
#[utoipa::path(get, path = "/api/session-costs", tag = "sessions", params(SessionCostQuery),
    responses((status = 200, body = SessionCostsResponse), ErrorResponses))]
async fn session_costs_list(
    State(state): State<AppState>,
    Query(query): Query<SessionCostQuery>,
) -> Result<Json<SessionCostsResponse>, ApiError> {
    let task_id = optional_id(query.task_id.as_deref(), TaskId::parse)?;
    let agent_id = optional_id(query.agent_id.as_deref(), AgentId::parse)?;
    let costs = state.service.session_cost_list(task_id, agent_id, query.limit).await?;
    Ok(Json(SessionCostsResponse { costs }))
}
