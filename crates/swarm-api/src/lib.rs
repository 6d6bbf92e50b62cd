//! The HTTP adapter of swarm: REST routes over `swarm_service`, authentication, CORS,
//! JSON errors and the OpenAPI document.
//!
//! Architecture invariant: handlers extract, call one service function and convert the
//! result. They hold no SQL and make no permission decisions.

mod dashboard;
pub mod error;
pub mod extract;
mod json;
mod limits;
pub mod metrics;
mod middleware;
mod routes;

pub use json::Json;
pub use limits::{Limits, address_key};
pub use metrics::Metrics;

use std::sync::Arc;

use axum::{Router, extract::DefaultBodyLimit};
use swarm_service::Service;
use tower_http::{catch_panic::CatchPanicLayer, trace::TraceLayer};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

/// Request bodies larger than this are refused with 413. Session logs get more.
pub const BODY_LIMIT_BYTES: usize = 4 * 1024 * 1024;
pub const SESSION_LOGS_BODY_LIMIT_BYTES: usize = 32 * 1024 * 1024;
/// The paths anyone may post to get less: a webhook delivery (GitHub's events that
/// swarm acts on are tens of kilobytes) and a Slack event (a few kilobytes).
pub const WEBHOOK_BODY_LIMIT_BYTES: usize = 1024 * 1024;
pub const SLACK_BODY_LIMIT_BYTES: usize = 512 * 1024;

/// The API key, kept out of `Debug` output and logs.
#[derive(Clone, Default)]
pub struct ApiKey(Option<Arc<str>>);

impl ApiKey {
    /// An empty key means no key: the hub is open.
    pub fn new(key: Option<String>) -> Self {
        ApiKey(key.filter(|key| !key.is_empty()).map(Into::into))
    }
    pub fn is_set(&self) -> bool {
        self.0.is_some()
    }
    fn expose(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_set() { "ApiKey(<redacted>)" } else { "ApiKey(none)" })
    }
}

/// What every handler reads, behind one `Arc`: axum clones the state into each request
/// (the router's service and each `State` extractor), and a clone of the parts themselves
/// cost a request about twenty atomic increments and decrements and a lock of the
/// shutdown token's tree, twice over (BENCHMARKS.md, "Where the time goes").
#[derive(Clone)]
pub struct AppState(Arc<AppStateParts>);

pub struct AppStateParts {
    pub service: Service,
    pub api_key: ApiKey,
    /// Cancelled when the hub stops: endless responses (`GET /api/events`) end then,
    /// so a graceful shutdown does not wait for open dashboards.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Per-caller caps on open event streams and parked polls.
    pub limits: Arc<Limits>,
    /// HTTP request counts for `GET /metrics`, and whether it needs the key.
    pub metrics: Arc<Metrics>,
}

impl AppState {
    pub fn new(parts: AppStateParts) -> AppState {
        AppState(Arc::new(parts))
    }
}

impl std::ops::Deref for AppState {
    type Target = AppStateParts;

    fn deref(&self) -> &AppStateParts {
        &self.0
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "swarm",
        description = "A coordination hub for crews of AI coding agents. Send `Authorization: Bearer <API_KEY>` \
            when the hub has a key, and `X-Agent-ID: <uuid>` to act as an agent. A hub with AGENT_AUTH=token \
            takes an agent's own token instead (`Authorization: Bearer <token>`, from \
            `POST /api/agents/{id}/tokens`): it acts as that agent only, and the API key administers but \
            cannot act as an agent.",
    ),
    tags(
        (name = "agents", description = "Registration, profiles, heartbeats"),
        (name = "tasks", description = "Tasks and their state machine"),
        (name = "epics", description = "Epics: goals that group tasks, with their progress"),
        (name = "services", description = "Long-running services agents registered, and PM2's ecosystem"),
        (name = "channels", description = "Agent chat: channels, messages, mentions"),
        (name = "mail", description = "Agent mail: priorities, awaiting a response, delivery"),
        (name = "inbox", description = "The lead's inbox: Slack messages routed to the lead"),
        (name = "triggers", description = "Cron, interval, once, webhook, github and manual triggers"),
        (name = "sessions", description = "What runners report about agent sessions"),
        (name = "budgets", description = "Daily spending ceilings, and the polls they refused"),
        (name = "trackers", description = "Issue trackers' webhooks (GitLab, Linear, Jira), each verified its own way"),
        (name = "system", description = "Health, stats, the event log, this document"),
    ),
    paths(
        routes::tracker_webhooks::linear_webhook,
        routes::tracker_webhooks::jira_webhook,
        routes::gitlab_webhook::gitlab_webhook
    ),
    components(schemas(error::ErrorBody))
)]
struct ApiDoc;

/// The whole HTTP application, for `swarm serve` and for tests.
pub fn router(state: AppState) -> Router {
    router_with(state, Router::new())
}

/// The HTTP application plus `extra` routes (MCP at `/mcp`) behind the same API key,
/// CORS, error bodies and tracing.
pub fn router_with(state: AppState, extra: Router<AppState>) -> Router {
    let (router, openapi) = openapi_router().split_for_parts();
    router
        .merge(routes::system::docs_router(&openapi))
        .merge(dashboard::router())
        .merge(metrics::router())
        .merge(extra)
        .fallback(middleware::not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT_BYTES))
        .layer(axum::middleware::from_fn_with_state(state.clone(), middleware::edge))
        .layer(CatchPanicLayer::custom(middleware::panic_response))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// The OpenAPI document that `GET /openapi.json` serves.
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    openapi_router().split_for_parts().1
}

fn openapi_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(routes::agents::router())
        .merge(routes::tokens::router())
        .merge(routes::poll::router())
        .merge(routes::tasks::router())
        .merge(routes::steering::router())
        .merge(routes::channels::router())
        .merge(routes::mail::router())
        .merge(routes::triggers::router())
        .merge(routes::sessions::router())
        .merge(routes::budgets::router())
        .merge(routes::insight::router())
        .merge(routes::system::router())
        .merge(routes::events::router())
        .merge(routes::inbox::router())
        .merge(routes::epics::router())
        .merge(routes::services::router())
        .merge(routes::reference_runner::router())
}
