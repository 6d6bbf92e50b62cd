use axum::{
    Router,
    extract::{Query, State},
    response::IntoResponse,
    routing::get,
};
use serde::{Deserialize, Serialize};
use swarm_domain::{
    event::Event,
    id::AgentId,
    stats::{Stats, StatsPoint},
};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::Json;
use crate::{
    AppState,
    error::{ApiError, ErrorResponses},
    extract::optional_id,
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(stats_get))
        .routes(routes!(stats_history))
        .routes(routes!(logs_list))
        .routes(routes!(private_files_list))
}

/// `/openapi.json` and the `/docs` page that renders it.
///
/// The document is kept as its JSON text: the `OpenApi` value it is written from is
/// several megabytes of small maps and strings (about half of an idle hub's heap), the
/// text 0.2 MB.
pub fn docs_router(openapi: &utoipa::openapi::OpenApi) -> Router<AppState> {
    let document =
        axum::body::Bytes::from(serde_json::to_vec(openapi).expect("the OpenAPI document is JSON"));
    Router::new()
        .route(
            "/openapi.json",
            get(move || {
                let document = document.clone();
                async move {
                    let json = axum::http::HeaderValue::from_static("application/json");
                    ([(axum::http::header::CONTENT_TYPE, json)], document)
                }
            }),
        )
        .route(
            "/docs",
            get(|| async { static_page(include_str!("../docs.html"), "text/html; charset=utf-8") }),
        )
        .route(
            "/docs/script.js",
            get(|| async { static_page(include_str!("../docs.js"), "text/javascript; charset=utf-8") }),
        )
        .route(
            "/docs/style.css",
            get(|| async { static_page(include_str!("../docs.css"), "text/css; charset=utf-8") }),
        )
}

/// The docs page is served like the dashboard: its script and style are files of their
/// own so that the page's policy allows no inline script, and no site may frame it.
fn static_page(body: &'static str, content_type: &'static str) -> axum::response::Response {
    crate::dashboard::with_headers(body, content_type)
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthResponse {
    status: &'static str,
    version: &'static str,
    /// `sqlite` or `postgres`.
    database: &'static str,
    /// How long a claim lasts without a heartbeat from its holder (`--lease-seconds`);
    /// runners heartbeat well within it.
    lease_seconds: u64,
    /// Whether the hub has a Slack bot (`SLACK_BOT_TOKEN`): without one the lead's inbox
    /// stays empty, which the dashboard says rather than "every message was answered".
    slack_configured: bool,
}

/// Liveness; needs no key.
#[utoipa::path(get, path = "/health", tag = "system", responses((status = 200, body = HealthResponse)))]
async fn health(State(state): State<AppState>) -> impl IntoResponse {
    Json(HealthResponse {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
        database: state.service.backend_name(),
        lease_seconds: state.service.lease_policy().period.as_secs(),
        slack_configured: state.service.slack_configured(),
    })
}

/// Agents by status and tasks by status.
#[utoipa::path(get, path = "/api/stats", tag = "system", responses((status = 200, body = Stats), ErrorResponses))]
async fn stats_get(State(state): State<AppState>) -> Result<Json<Stats>, ApiError> {
    Ok(Json(state.service.stats().await?))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StatsHistoryResponse {
    /// One point a minute over the last hour, oldest first; a restarted hub starts over.
    points: Vec<StatsPoint>,
}

/// The last hour, a point a minute: queue depth, trigger wait (p95), runs finished. What
/// the dashboard's overview charts.
#[utoipa::path(get, path = "/api/stats/history", tag = "system", responses((status = 200, body = StatsHistoryResponse), ErrorResponses))]
async fn stats_history(State(state): State<AppState>) -> Json<StatsHistoryResponse> {
    Json(StatsHistoryResponse { points: state.service.stats_history() })
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct LogsQuery {
    /// 1 to 1000, default 100.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
    /// A UUID; empty means no filter.
    #[param(value_type = Option<String>, pattern = r"^$|^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")]
    agent_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LogsResponse {
    logs: Vec<Event>,
}

/// The event log, newest first.
#[utoipa::path(get, path = "/api/logs", tag = "system", params(LogsQuery),
    responses((status = 200, body = LogsResponse), ErrorResponses))]
async fn logs_list(
    State(state): State<AppState>,
    Query(query): Query<LogsQuery>,
) -> Result<Json<LogsResponse>, ApiError> {
    let agent_id = optional_id(query.agent_id.as_deref(), AgentId::parse)?;
    Ok(Json(LogsResponse { logs: state.service.event_list(agent_id, query.limit).await? }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PrivateFilesResponse {
    /// Absolute paths of the hub's database and key files on the hub's machine.
    files: Vec<String>,
}

/// The hub's files that hold its key or its data (ours). A runner started with an agent
/// token reads this list and refuses to start when it can read one of them: an agent
/// that can read the key or open the database is not isolated by its token.
#[utoipa::path(get, path = "/api/hub/private-files", tag = "system",
    responses((status = 200, body = PrivateFilesResponse), ErrorResponses))]
async fn private_files_list(State(state): State<AppState>) -> Json<PrivateFilesResponse> {
    let files = state.service.private_files().iter().map(|path| path.display().to_string()).collect();
    Json(PrivateFilesResponse { files })
}
