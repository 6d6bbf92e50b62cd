//! The dashboard's control room (issue 49): a task id from the end of one as a person
//! typed it (the CLI's `swarm task show 9c41d0e2`), and the spend per agent, epic and day.

use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use swarm_domain::{costs::CostSummary, id::TaskId};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    AppState, Json,
    error::{ApiError, ErrorResponses},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(task_ids_resolve)).routes(routes!(costs_summary))
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdResponse {
    id: TaskId,
    /// The id as lists show it: its last 8 hex digits.
    short_id: String,
}

/// A task id as a person typed it.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Path)]
pub struct ShortIdPath {
    /// A whole task id, or its last 4 to 12 hex digits (`9c41d0e2`, also `…9c41d0e2` or
    /// `#9c41d0e2`).
    #[param(
        pattern = r"^[…#]?[0-9a-fA-F]{4,12}$|^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
    )]
    short_id: String,
}

/// The task a short id names: a whole id, or the end of one (4 to 12 hex digits, as the
/// dashboard and `swarm task list` show it). 404 when no task id ends so, 409 listing
/// them when several do.
#[utoipa::path(get, path = "/api/task-ids/{shortId}", tag = "tasks",
    params(ShortIdPath),
    responses((status = 200, body = TaskIdResponse), ErrorResponses))]
async fn task_ids_resolve(
    State(state): State<AppState>,
    Path(path): Path<ShortIdPath>,
) -> Result<Json<TaskIdResponse>, ApiError> {
    let id = state.service.task_resolve(&path.short_id).await?;
    Ok(Json(TaskIdResponse { id, short_id: id.short() }))
}

/// What was spent on agent sessions today and in the last 7 UTC days, per agent, per
/// epic and per day, from the session costs the runners report.
#[utoipa::path(get, path = "/api/costs", tag = "sessions",
    responses((status = 200, body = CostSummary), ErrorResponses))]
async fn costs_summary(State(state): State<AppState>) -> Result<Json<CostSummary>, ApiError> {
    Ok(Json(state.service.cost_summary().await?))
}
