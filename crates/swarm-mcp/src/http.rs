//! MCP over Streamable HTTP, for `swarm serve` to mount at `/mcp`.
//!
//! Stateless: no transport session is kept (rmcp's legacy session mode is off; the
//! `Mcp-Session-Id` a 2025 client gets names no state, see [`issue_session_id`]), every
//! reply is plain JSON when the tool sends nothing before its result, and the caller is
//! read from each request's `X-Agent-ID`. So any replica answers any request. Clients of
//! the 2025 revisions (`initialize` first) and of the 2026-07-28 stateless revision
//! (`server/discover`, per-request metadata) share the one endpoint.

use std::sync::Arc;

use axum::{
    body::{Body, Bytes},
    extract::{Request, State},
    response::{IntoResponse, Response},
};
use http::{HeaderValue, StatusCode, header};
use rmcp::{
    model::{ClientJsonRpcMessage, ClientRequest, ErrorCode},
    transport::{
        StreamableHttpServerConfig, StreamableHttpService,
        streamable_http_server::session::never::NeverSessionManager,
    },
};
use serde_json::{Value, json};
use swarm_service::Service;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::{context::Identity, registry::Registry, server::McpServer, tools};

type Inner = StreamableHttpService<McpServer, NeverSessionManager>;

/// The tower service that answers `/mcp`: rmcp's, behind [`front`].
pub type McpHttpService = axum::routing::MethodRouter;

/// The largest request body `/mcp` reads (rmcp's own limit).
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Which `Host` headers `/mcp` answers. rmcp refuses others with 403, which protects
/// a hub on loopback from DNS rebinding; a hub reached by name must list that name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedHosts {
    Any,
    /// Host names or `host:port` authorities.
    Only(Vec<String>),
}

impl AllowedHosts {
    pub fn loopback() -> Self {
        AllowedHosts::Only(vec!["localhost".into(), "127.0.0.1".into(), "::1".into()])
    }

    /// A comma-separated list; `*` allows any host.
    pub fn parse(list: &str) -> Self {
        let hosts: Vec<String> =
            list.split(',').map(str::trim).filter(|host| !host.is_empty()).map(str::to_string).collect();
        if hosts.iter().any(|host| host == "*") { AllowedHosts::Any } else { AllowedHosts::Only(hosts) }
    }
}

#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub allowed_hosts: AllowedHosts,
    /// The opt-in tool groups offered to everyone (`--capabilities`, comma-separated).
    pub capabilities: String,
    /// Cancelled on shutdown: requests in flight (a waiting `poll-task`) end at once.
    pub shutdown: CancellationToken,
}

pub fn http_service(service: Service, options: HttpOptions) -> McpHttpService {
    let registry = Arc::new(Registry::new(tools::hub_groups()).with_capabilities(&options.capabilities));
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_cancellation_token(options.shutdown);
    let config = match options.allowed_hosts {
        AllowedHosts::Any => config.disable_allowed_hosts(),
        AllowedHosts::Only(hosts) => config.with_allowed_hosts(hosts),
    };
    let config = config.with_max_request_body_bytes(MAX_BODY_BYTES);
    let inner: Inner = StreamableHttpService::new(
        move || Ok(McpServer::new(service.clone(), Identity::Header, Arc::clone(&registry))),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    axum::routing::any(front).with_state(inner)
}

/// What rmcp answers badly, answered here instead: a body that is not JSON (rmcp: 415) is a
/// JSON-RPC parse error, one that is not a request an invalid request, a known method with
/// missing or wrong params (rmcp: "method not found") invalid params, each with HTTP 400.
/// rmcp sees every request first, so its own refusals (a foreign `Host` or `Origin`, a body
/// that does not say it is JSON) stand. And a client that accepts only `application/json`
/// gets JSON (rmcp wants `text/event-stream` listed too, though this endpoint never streams
/// a reply).
async fn front(State(inner): State<Inner>, request: Request) -> Response {
    if request.method() != http::Method::POST {
        return forward(inner, request).await;
    }
    let (mut parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": ErrorCode::INVALID_REQUEST.0,
            "message": format!("the request body is larger than {MAX_BODY_BYTES} bytes")}});
        return (StatusCode::PAYLOAD_TOO_LARGE, axum::Json(body)).into_response();
    };
    if accepts_json_only(&parts.headers) {
        parts.headers.insert(header::ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
    }
    let says_json = is_json(&parts.headers);
    let refusal = refusal(&bytes);
    let initialize = is_initialize(&bytes);
    let mut response = forward(inner, Request::from_parts(parts, Body::from(bytes))).await;
    if initialize && response.status() == StatusCode::OK {
        issue_session_id(&mut response);
    }
    match refusal {
        Some(refusal) if says_json && !RMCP_REFUSALS.contains(&response.status()) => refusal,
        _ => response,
    }
}

/// A 2025-revision client gets an `Mcp-Session-Id` with its `initialize` result, as
/// clients that key their state (streams, reconnection) on it expect. The id names no
/// state on the hub: it is a random UUID that no replica records or looks up, so any
/// replica answers a request that carries it (rmcp, stateless, reads no session header);
/// the caller is still each request's `X-Agent-ID`. With nothing to end, a `DELETE` of
/// the session is answered 405 and a standalone `GET` stream 405, as the revision allows.
fn issue_session_id(response: &mut Response) {
    if response.headers().contains_key(HEADER_SESSION_ID) {
        return;
    }
    let id = uuid::Uuid::new_v4().simple().to_string();
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(HEADER_SESSION_ID, value);
    }
}

const HEADER_SESSION_ID: &str = "mcp-session-id";

fn is_initialize(bytes: &Bytes) -> bool {
    #[derive(serde::Deserialize)]
    struct Method<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Method<'_>>(bytes)
        .is_ok_and(|message| message.method.as_deref() == Some("initialize"))
}

/// rmcp's answers about the request itself rather than its JSON-RPC content: they stand.
const RMCP_REFUSALS: [StatusCode; 4] = [
    StatusCode::FORBIDDEN,
    StatusCode::NOT_FOUND,
    StatusCode::METHOD_NOT_ALLOWED,
    StatusCode::NOT_ACCEPTABLE,
];

fn is_json(headers: &http::HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).is_some_and(|value| {
        value.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json")
    })
}

async fn forward(inner: Inner, request: Request) -> Response {
    match inner.oneshot(request).await {
        Ok(response) => response.into_response(),
        Err(never) => match never {},
    }
}

fn accepts_json_only(headers: &http::HeaderMap) -> bool {
    let accepted: Vec<String> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|item| item.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .collect();
    accepted.iter().any(|kind| kind == "application/json")
        && !accepted.iter().any(|kind| kind == "text/event-stream")
}

/// The JSON-RPC error for a body rmcp cannot take, or `None` when it is a message.
fn refusal(bytes: &Bytes) -> Option<Response> {
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(value) => value,
        Err(err) => {
            return Some(rpc_error(Value::Null, ErrorCode::PARSE_ERROR, &format!("parse error: {err}")));
        }
    };
    let id = match value.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    };
    let invalid_params = |detail: String| Some(rpc_error(id.clone(), ErrorCode::INVALID_PARAMS, &detail));
    match serde_json::from_value::<ClientJsonRpcMessage>(value.clone()) {
        // rmcp takes a known method whose params do not fit for a custom request, and
        // answers it "method not found": the method exists, its params are wrong.
        Ok(ClientJsonRpcMessage::Request(request)) => match &request.request {
            // A 2026-07-28 request (metadata in params) naming a method that revision removed
            // is rmcp's to answer: "method not found", as that revision asks.
            ClientRequest::CustomRequest(_) if has_revision_metadata(&value) => None,
            ClientRequest::CustomRequest(custom) if KNOWN_METHODS.contains(&custom.method.as_str()) => {
                invalid_params(format!("invalid params for {}: missing or malformed", custom.method))
            }
            _ => None,
        },
        Ok(_) => None,
        Err(err) => {
            let is_request = value.get("jsonrpc") == Some(&Value::from("2.0"))
                && value.get("method").is_some_and(Value::is_string)
                && value.get("params").is_none_or(Value::is_object);
            if is_request {
                invalid_params(format!("invalid params: {err}"))
            } else {
                Some(rpc_error(id, ErrorCode::INVALID_REQUEST, "invalid request: not a JSON-RPC 2.0 request"))
            }
        }
    }
}

fn has_revision_metadata(value: &Value) -> bool {
    value.pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion").is_some()
}

/// The requests a client may send, by the revisions swarm speaks.
const KNOWN_METHODS: [&str; 18] = [
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
];

fn rpc_error(id: Value, code: ErrorCode, message: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code.0, "message": message}});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_bodies_get_json_rpc_errors() {
        let code = |body: &str| {
            let response = refusal(&Bytes::from(body.to_string()))?;
            assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{body}");
            Some(())
        };
        assert!(code("{not json").is_some());
        assert!(code(r#"{"jsonrpc":"2.0","id":1}"#).is_some());
        assert!(code(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#).is_some());
        assert!(code(r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{}}"#).is_some());
        assert!(code(r#"[1, 2]"#).is_some());
        assert!(code(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_none());
        assert!(code(r#"{"jsonrpc":"2.0","id":1,"method":"no/such-method","params":{}}"#).is_none());
    }

    #[test]
    fn allowed_hosts_parse() {
        assert_eq!(AllowedHosts::parse("*"), AllowedHosts::Any);
        assert_eq!(
            AllowedHosts::parse("localhost, hub.example:3013,"),
            AllowedHosts::Only(vec!["localhost".into(), "hub.example:3013".into()])
        );
    }
}
