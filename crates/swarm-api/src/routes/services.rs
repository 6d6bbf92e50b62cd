//! The services registry (`GET /api/services`, `GET /ecosystem`) and the reference's
//! view of schedules (`GET /api/scheduled-tasks`). Agents register and change their
//! services through MCP (`register-service` ...); these are the reads.

use axum::extract::{Query, State};
use serde::{Deserialize, Serialize};
use swarm_domain::{
    id::AgentId,
    registry::{EcosystemApp, RegisteredService, ServiceStatus},
    trigger::ScheduledTask,
};
use swarm_service::ServiceFilter;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::Json;
use crate::{
    AppState,
    error::{ApiError, ErrorResponses},
    extract::{CallerHeader, optional_id},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(services_list))
        .routes(routes!(ecosystem_get))
        .routes(routes!(scheduled_tasks_list))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ListServicesQuery {
    status: Option<ServiceStatus>,
    /// A UUID; empty means no filter.
    #[param(value_type = Option<String>, pattern = r"^$|^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")]
    agent_id: Option<String>,
    /// Case-insensitive part of the name.
    name: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ServicesResponse {
    services: Vec<RegisteredService>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EcosystemResponse {
    apps: Vec<EcosystemApp>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListScheduledQuery {
    /// `true` or `false`.
    enabled: Option<bool>,
    /// Part of the name.
    name: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledTasksResponse {
    scheduled_tasks: Vec<ScheduledTask>,
}

/// Services agents registered, by agent then name.
#[utoipa::path(get, path = "/api/services", tag = "services", params(ListServicesQuery),
    responses((status = 200, body = ServicesResponse), ErrorResponses))]
async fn services_list(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Query(query): Query<ListServicesQuery>,
) -> Result<Json<ServicesResponse>, ApiError> {
    let filter = ServiceFilter {
        status: query.status,
        agent_id: optional_id(query.agent_id.as_deref(), AgentId::parse)?,
        name: query.name,
    };
    Ok(Json(ServicesResponse { services: state.service.service_list(caller, filter).await? }))
}

/// The calling agent's services with a script, as PM2's ecosystem file (`X-Agent-ID`
/// required); each app's `env` carries its `PORT`.
#[utoipa::path(get, path = "/ecosystem", tag = "services",
    responses((status = 200, body = EcosystemResponse), ErrorResponses))]
async fn ecosystem_get(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
) -> Result<Json<EcosystemResponse>, ApiError> {
    Ok(Json(EcosystemResponse { apps: state.service.ecosystem(caller).await? }))
}

/// The timed triggers (`cron`, `interval`, `once`) as the reference shows schedules.
#[utoipa::path(get, path = "/api/scheduled-tasks", tag = "triggers", params(ListScheduledQuery),
    responses((status = 200, body = ScheduledTasksResponse), ErrorResponses))]
async fn scheduled_tasks_list(
    State(state): State<AppState>,
    Query(query): Query<ListScheduledQuery>,
) -> Result<Json<ScheduledTasksResponse>, ApiError> {
    let scheduled_tasks = state.service.scheduled_tasks(query.enabled, query.name.as_deref()).await?;
    Ok(Json(ScheduledTasksResponse { scheduled_tasks }))
}
