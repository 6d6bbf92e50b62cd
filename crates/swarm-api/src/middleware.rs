//! Cross-cutting HTTP behaviour: API key, CORS, JSON error bodies, panics.

use axum::{
    body::{Body, to_bytes},
    extract::{Request, State},
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
/// webhook, which carries its own signature instead (CONTRACT.md, Conventions), as do
/// triggers' webhooks.
fn is_public(state: &AppState, method: &Method, path: &str) -> bool {
    (*method == Method::GET
        && (matches!(path, "/health" | "/docs" | "/docs/script.js" | "/docs/style.css")
            || crate::dashboard::is_public_path(path)
            || (path == crate::metrics::METRICS_PATH && state.metrics.is_public())))
        || (*method == Method::POST && (path == "/slack/events" || path.starts_with("/api/webhooks/")))
}

/// What every request goes through, as one layer: each layer of its own costs every
/// request a clone of the service below it and a boxed future. In order: a CORS
/// preflight is answered (204) before authentication; the API key is checked; errors
/// produced outside our handlers get a JSON body; every answer gets the CORS headers.
pub async fn edge(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let started = state.metrics.start(&request);
    let mut response = if request.method() == Method::OPTIONS {
        StatusCode::NO_CONTENT.into_response()
    } else {
        // Only `Sync` parts cross the lookup's await (a request's body is not `Sync`).
        let (method, path) = (request.method().clone(), request.uri().path().to_string());
        match authenticate(&state, request.headers(), &method, &path).await {
            Err(error) => error.into_response(),
            Ok(_) if let Some(origin) = cross_site_mcp_origin(&request) => ApiError::Forbidden(format!(
                "MCP at /mcp does not answer web pages of other sites (Origin {origin}); agent CLIs send no Origin"
            ))
            .into_response(),
            Ok(authenticated) => {
                // Handlers (and MCP, which sees the request's parts) read who it is from here.
                request.extensions_mut().insert(authenticated);
                json_errors(next.run(request).await).await
            }
        }
    };
    add_cors_headers(&mut response);
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
) -> Result<Authenticated, ApiError> {
    let mode = state.service.agent_auth();
    let operator = Authenticated { mode, credential: Credential::Operator };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
        .unwrap_or("");
    let Some(expected) = state.api_key.expose() else {
        return Ok(operator);
    };
    // Constant-time on the contents; only the length can leak, which a key of fixed
    // length does not mind.
    if bool::from(presented.as_bytes().ct_eq(expected.as_bytes())) {
        return Ok(operator);
    }
    if mode == AgentAuth::Token && !presented.is_empty() {
        // The lookup is by hash, so its timing says nothing about the token.
        match state.service.agent_token_verify(presented).await {
            Ok(Some(agent)) => return Ok(Authenticated { mode, credential: Credential::Agent(agent) }),
            Ok(None) => {}
            Err(error) => return Err(error.into()),
        }
    }
    if is_public(state, method, path) {
        return Ok(operator);
    }
    Err(ApiError::Unauthorized)
}

/// The `Origin` of a request to `/mcp` from a web page of another site, if it is one.
/// MCP clients (agent CLIs, the Inspector's proxy) send no `Origin`; a browser always
/// does, and a page of this hub or of this machine (a local Inspector) is let through.
fn cross_site_mcp_origin(request: &Request) -> Option<String> {
    if request.uri().path() != "/mcp" {
        return None;
    }
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

/// Any origin may call the hub (it is guarded by the key, not by origin).
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
