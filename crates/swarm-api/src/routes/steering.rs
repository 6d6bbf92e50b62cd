//! Steering a running task (issue 40; the reference's `POST /api/tasks/{id}/steer`), and
//! the calls a run makes to take its messages (Claude Code's hooks, the runner).

use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use swarm_domain::{
    id::{SteeringMessageId, TaskId},
    steering::{OnUnsupported, SteerMode, SteerResult, SteeringMessage},
};
use swarm_service::SteeringSettled;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    AppState, Json,
    error::{ApiError, ErrorResponses},
    extract::{AppJson, CallerHeader, OptionalJson},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(tasks_steer))
        .routes(routes!(tasks_steering_messages))
        .routes(routes!(tasks_steering_deliver))
        .routes(routes!(tasks_steering_settle))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SteerBody {
    /// What the agent should hear.
    #[schema(min_length = 1, max_length = 20000, pattern = r"^[^\u0000]*[^\s\u0000][^\u0000]*$")]
    message: String,
    /// `steer`: at the agent's next tool call; `queue` (default): when its turn ends.
    mode: Option<SteerMode>,
    /// For a finished task: `degrade` (default) makes the message a follow-up task for its
    /// agent; `fail` answers 409.
    on_unsupported: Option<OnUnsupported>,
    /// Where the message was written (`api`, `ui`, `slack`, ...); default `api`.
    #[schema(min_length = 1, max_length = 32, pattern = r"^[A-Za-z0-9_-]+$")]
    source: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SteeringMessagesResponse {
    messages: Vec<SteeringMessage>,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeliverBody {
    /// The modes this moment of the run can take (a tool call: `steer`; the end of a
    /// turn: both). Default both.
    modes: Option<Vec<SteerMode>>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromotedMessage {
    steering_message_id: SteeringMessageId,
    task_id: TaskId,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SettleResponse {
    /// Messages the run had shown its agent, now `handled`.
    handled: u64,
    /// Messages it never showed, each now a follow-up task for the task's agent.
    promoted: Vec<PromotedMessage>,
}

impl From<SteeringSettled> for SettleResponse {
    fn from(settled: SteeringSettled) -> Self {
        let promoted = settled
            .promoted
            .into_iter()
            .map(|(steering_message_id, task_id)| PromotedMessage { steering_message_id, task_id })
            .collect();
        SettleResponse { handled: settled.handled, promoted }
    }
}

/// Send words to the agent working a task: at its next tool call (`steer`) or when its
/// turn ends (`queue`). The operator, the lead or the task's creator may. A finished task
/// answers 409, or with `onUnsupported: degrade` (the default) the message becomes a
/// follow-up task for its agent (`outcome: promoted`).
#[utoipa::path(post, path = "/api/tasks/{id}/steer", tag = "tasks", request_body = SteerBody,
    params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = SteerResult), ErrorResponses))]
async fn tasks_steer(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    AppJson(body): AppJson<SteerBody>,
) -> Result<Json<SteerResult>, ApiError> {
    let id = TaskId::parse(&id)?;
    let mode = body.mode.unwrap_or(SteerMode::Queue);
    let on_unsupported = body.on_unsupported.unwrap_or(OnUnsupported::Degrade);
    let source = body.source.as_deref().unwrap_or("api");
    let result =
        Box::pin(state.service.steer_task(caller, id, &body.message, mode, on_unsupported, source)).await?;
    Ok(Json(result))
}

/// A task's steering messages, oldest first, with their status (`pending`, `delivered`,
/// `handled`, `promoted`, `cancelled`).
#[utoipa::path(get, path = "/api/tasks/{id}/steering-messages", tag = "tasks",
    params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = SteeringMessagesResponse), ErrorResponses))]
async fn tasks_steering_messages(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SteeringMessagesResponse>, ApiError> {
    let messages = state.service.steering_messages(TaskId::parse(&id)?).await?;
    Ok(Json(SteeringMessagesResponse { messages }))
}

/// For the agent working the task (`X-Agent-ID`): its messages not yet shown, of these
/// modes, now `delivered` (each is returned once); those shown before become `handled`.
#[utoipa::path(post, path = "/api/tasks/{id}/steering-messages/deliver", tag = "tasks",
    request_body = DeliverBody, params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = SteeringMessagesResponse), ErrorResponses))]
async fn tasks_steering_deliver(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    OptionalJson(body): OptionalJson<DeliverBody>,
) -> Result<Json<SteeringMessagesResponse>, ApiError> {
    let modes = body.modes.unwrap_or_else(|| SteerMode::ALL.to_vec());
    let messages = state.service.steering_deliver(caller, TaskId::parse(&id)?, &modes).await?;
    Ok(Json(SteeringMessagesResponse { messages }))
}

/// When a run of the task ended (its agent, the lead or the operator): what it showed is
/// `handled`; what it never showed becomes a follow-up task for the task's agent.
#[utoipa::path(post, path = "/api/tasks/{id}/steering-messages/settle", tag = "tasks",
    params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = SettleResponse), ErrorResponses))]
async fn tasks_steering_settle(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
) -> Result<Json<SettleResponse>, ApiError> {
    let settled = Box::pin(state.service.steering_settle(caller, TaskId::parse(&id)?)).await?;
    Ok(Json(settled.into()))
}
