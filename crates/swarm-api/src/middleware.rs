//! Cross-cutting HTTP behaviour: API key, CORS, JSON error bodies, panics.

use std::net::SocketAddr;

use axum::{
    body::{Body, to_bytes},
    extract::{ConnectInfo, Request, State},
    http::{HeaderValue, Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use subtle::ConstantTimeEq;

use swarm_service::{AgentAuth, Authenticated, Credential};

use crate::{
    AppState,
    error::{ApiError, error_response},
};

/// Paths anyone may read: the health check, the static docs page (which asks for the
/// key before it fetches the API description) and the dashboard's static files (which
/// ask for it before they fetch data); `/metrics` when the operator made it public
/// (`--metrics-public`, for a Prometheus that holds no key); and Slack's signed
/// events and interactions, which carry their own signature instead (Slack's signing
/// secret), as do triggers' webhooks.
fn is_public(state: &AppState, method: &Method, path: &str) -> bool {
    (*method == Method::GET
        && (matches!(path, "/health" | "/docs" | "/docs/script.js" | "/docs/style.css")
            || crate::dashboard::is_public_path(path)
            || (path == crate::metrics::METRICS_PATH && state.metrics.is_public())))
        || (*method == Method::POST
            && (is_slack_path(path) || path.starts_with("/api/webhooks/") || is_tracker_webhook(path)))
}

/// Where Linear (signed), Jira (a token in the path) and GitLab (`X-Gitlab-Token`) post
/// their webhooks (issue 47).
fn is_tracker_webhook(path: &str) -> bool {
    path == "/api/trackers/linear/webhook"
        || path.starts_with("/api/trackers/jira/webhook/")
        || path == "/api/gitlab/webhook"
}

/// Where Slack posts, signed with its signing secret.
fn is_slack_path(path: &str) -> bool {
    matches!(path, "/slack/events" | "/slack/interactivity")
}

/// What every request goes through, as one layer: each layer of its own costs every
/// request a clone of the service below it and a boxed future. In order: a CORS
/// preflight is answered (204) before authentication; the API key is checked; errors
/// produced outside our handlers get a JSON body; every answer gets the CORS headers.
///
/// A hub without a key (`--insecure-no-auth`) answers web pages of its own address or
/// of this machine's loopback only: a page of another site gets no CORS approval and
/// its requests are refused (403), so it can neither read the hub nor post to it (a
/// "simple" cross-site POST needs no preflight). A hub with a key approves any origin:
/// a page cannot send the key without the user giving it.
pub async fn edge(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let started = state.metrics.start(&request);
    let open_hub = !state.api_key.is_set();
    let foreign = if open_hub || request.uri().path() == "/mcp" { foreign_origin(&request) } else { None };
    // A request without `Origin` is no browser's CORS request: it keeps `*` (and `Vary:
    // Origin` keeps a cache from handing that answer to a page).
    let approved = match (open_hub, &foreign) {
        (true, None) => {
            Some(request.headers().get(header::ORIGIN).cloned().unwrap_or(HeaderValue::from_static("*")))
        }
        _ => None,
    };
    let mut response = if request.method() == Method::OPTIONS {
        StatusCode::NO_CONTENT.into_response()
    } else if let Some(refused) = budget_public_post(&state, &mut request) {
        refused
    } else if open_hub && let Some(origin) = &foreign {
        ApiError::Forbidden(format!(
            "this hub has no key (--insecure-no-auth), so it answers web pages of its own address or of \
             this machine only, not Origin {origin}; scripts and agent CLIs send no Origin. Give the hub a \
             key (drop --insecure-no-auth) to use it from other sites' pages"
        ))
        .into_response()
    } else {
        // Only `Sync` parts cross the lookup's await (a request's body is not `Sync`).
        let (method, path) = (request.method().clone(), request.uri().path().to_string());
        match authenticate(&state, request.headers(), &method, &path).await {
            Err(error) => error.into_response(),
            Ok(_) if let Some(origin) = foreign.filter(|_| request.uri().path() == "/mcp") => {
                ApiError::Forbidden(format!(
                    "MCP at /mcp does not answer web pages of other sites (Origin {origin}); agent CLIs send no Origin"
                ))
                .into_response()
            }
            // A public path carries no credential: its handlers take none, and one that
            // asked would be refused (identity fails closed).
            Ok(None) => json_errors(next.run(request).await).await,
            Ok(Some(authenticated)) => {
                // What a token holds open (a stream, a parked poll) ends when it is revoked.
                if let Credential::Agent(agent) = authenticated.credential
                    && let Some(secret) = bearer(request.headers())
                {
                    let token = crate::routes::tokens::PresentedToken { agent, secret: secret.into() };
                    request.extensions_mut().insert(token);
                }
                // Handlers (and MCP, which sees the request's parts) read who it is from here.
                request.extensions_mut().insert(authenticated);
                json_errors(next.run(request).await).await
            }
        }
    };
    if open_hub {
        add_cors_headers_for(&mut response, approved);
    } else {
        add_cors_headers(&mut response);
    }
    // No answer may be read as something else than it says (a JSON body as HTML or script).
    response.headers_mut().insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    state.metrics.finish(started, &response);
    response
}

/// What the request's `Authorization` proves: the operator key, or (token mode) a live
/// token of one agent, looked up by its hash on every request so that a revocation holds
/// at once. Anything else is 401, except on the public paths.
async fn authenticate(
    state: &AppState,
    headers: &axum::http::HeaderMap,
    method: &Method,
    path: &str,
) -> Result<Option<Authenticated>, ApiError> {
    let mode = state.service.agent_auth();
    let operator = Authenticated { mode, credential: Credential::Operator };
    let presented = bearer(headers).unwrap_or("");
    let Some(expected) = state.api_key.expose() else {
        // `--insecure-no-auth`: whoever reaches the hub is the operator, by the operator's choice.
        return Ok(Some(operator));
    };
    // Constant-time on the contents; only the length can leak, which a key of fixed
    // length does not mind.
    if bool::from(presented.as_bytes().ct_eq(expected.as_bytes())) {
        return Ok(Some(operator));
    }
    if mode == AgentAuth::Token && !presented.is_empty() {
        // The lookup is by hash, so its timing says nothing about the token.
        match state.service.agent_token_verify(presented).await {
            Ok(Some(agent)) => return Ok(Some(Authenticated { mode, credential: Credential::Agent(agent) })),
            Ok(None) => {}
            Err(error) => return Err(error.into()),
        }
    }
    if is_public(state, method, path) {
        return Ok(None);
    }
    Err(ApiError::Unauthorized)
}

/// The paths anyone may post to, kept to a budget before anything else is done: a
/// webhook delivery counts against its address's rate (429 with `Retry-After` past it),
/// and webhook and Slack bodies get a lower size limit than the API's (413).
fn budget_public_post(state: &AppState, request: &mut Request) -> Option<Response> {
    if request.method() != Method::POST {
        return None;
    }
    let path = request.uri().path();
    let webhook = path.starts_with("/api/webhooks/") || is_tracker_webhook(path);
    let limit = if webhook {
        crate::WEBHOOK_BODY_LIMIT_BYTES
    } else if is_slack_path(path) {
        crate::SLACK_BODY_LIMIT_BYTES
    } else {
        return None;
    };
    if webhook
        && let Some(ConnectInfo(peer)) = request.extensions().get::<ConnectInfo<SocketAddr>>()
        && let Err(wait) = state.limits.admit_webhook(peer.ip())
    {
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let mut refused = ApiError::TooManyRequests(format!(
            "too many webhook deliveries from your address; retry in {seconds}s (the hub's \
             --webhook-rate-per-minute, env WEBHOOK_RATE_PER_MINUTE, sets the budget)"
        ))
        .into_response();
        refused.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        return Some(refused);
    }
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Some(
            ApiError::PayloadTooLarge(format!(
                "the body is larger than the {} KiB this path takes; send a smaller payload",
                limit / 1024
            ))
            .into_response(),
        );
    }
    // A body that does not say its length is cut at the limit as it arrives.
    let body = std::mem::take(request.body_mut());
    *request.body_mut() = Body::new(http_body_util::Limited::new(body, limit));
    None
}

/// The request's `Authorization: Bearer` credential.
fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
}

/// The `Origin` of a request from a web page of another site, if it is one. Scripts and
/// MCP clients (agent CLIs, the Inspector's proxy) send no `Origin`; a browser always
/// does, and a page of this hub or of this machine (a local Inspector) is let through.
fn foreign_origin(request: &Request) -> Option<String> {
    let origin = request.headers().get(header::ORIGIN)?.to_str().unwrap_or("?").trim();
    let host = request.headers().get(header::HOST).and_then(|value| value.to_str().ok()).unwrap_or("");
    let authority = origin.split_once("://").map_or(origin, |(_, rest)| rest);
    let origin_host = match authority.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    let same_origin = !host.is_empty() && authority.eq_ignore_ascii_case(host);
    let loopback = origin_host.eq_ignore_ascii_case("localhost")
        || origin_host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    (!same_origin && !loopback).then(|| origin.to_string())
}

const ALLOWED_HEADERS: &str = "Authorization, Content-Type, X-Agent-ID, Mcp-Session-Id, Mcp-Protocol-Version, \
     Mcp-Method, Mcp-Name, Last-Event-ID";
const ALLOWED_METHODS: &str = "GET, POST, PUT, PATCH, DELETE, OPTIONS";

/// A hub without a key approves only the origin it let through (`*` for a request
/// without one, which no page's CORS request is), and says the answer depends on it.
fn add_cors_headers_for(response: &mut Response, approved: Option<HeaderValue>) {
    let headers = response.headers_mut();
    headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    let Some(origin) = approved else { return };
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(ALLOWED_HEADERS));
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(ALLOWED_METHODS));
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("Mcp-Session-Id"));
}

/// Any origin may call a hub with a key (it is guarded by the key, not by origin).
fn add_cors_headers(response: &mut Response) {
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(ALLOWED_HEADERS));
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(ALLOWED_METHODS));
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("Mcp-Session-Id"));
}

/// Errors produced outside our handlers (axum's own rejections, 405s, path decoding)
/// come as plain text; rewrite them into the JSON shape every client expects.
async fn json_errors(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text =
        to_bytes(body, 64 * 1024).await.map(|bytes| String::from_utf8_lossy(&bytes).trim().to_string());
    let message = match text {
        Ok(text) if !text.is_empty() => text,
        _ => match status {
            StatusCode::METHOD_NOT_ALLOWED => "method not allowed on this path".to_string(),
            other => other.canonical_reason().unwrap_or("error").to_string(),
        },
    };
    let mut rewritten = error_response(status, &message);
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            rewritten.headers_mut().insert(name.clone(), value.clone());
        }
    }
    rewritten
}

pub async fn not_found(request: Request) -> ApiError {
    ApiError::NotFound(format!("no route for {} {}", request.method(), request.uri().path()))
}

/// A bug must cost one request, never the server.
pub fn panic_response(panic: Box<dyn std::any::Any + Send + 'static>) -> Response<Body> {
    let detail = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic");
    tracing::error!(panic = detail, "a request handler panicked");
    ApiError::Internal.into_response()
}
