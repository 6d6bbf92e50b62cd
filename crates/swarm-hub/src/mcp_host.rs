//! rmcp refuses an MCP request addressed to a host it was not told about (DNS-rebinding
//! protection) with a bare "Forbidden". The usual cause is a deployment, not an attack:
//! workers in containers reach the hub as `host.docker.internal`. This says what to set.

use axum::{
    body::{Body, to_bytes},
    extract::Request,
    http::{StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};

/// rmcp's answer to a `Host` outside its allowed list (rmcp's `tower.rs`).
const RMCP_REFUSED_HOST: &[u8] = b"Forbidden: Host header is not allowed";
/// Longer bodies are not rmcp's refusal; they pass untouched.
const REFUSAL_READ_LIMIT: usize = 1024;

pub(crate) async fn explain_refused_host(request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string)
        .or_else(|| request.uri().authority().map(ToString::to_string))
        .unwrap_or_default();
    let response = next.run(request).await;
    if response.status() != StatusCode::FORBIDDEN {
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(bytes) = to_bytes(body, REFUSAL_READ_LIMIT).await else {
        return (StatusCode::FORBIDDEN, "Forbidden").into_response();
    };
    if bytes.as_ref() != RMCP_REFUSED_HOST {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let name = host.rsplit_once(':').map_or(host.as_str(), |(name, _port)| name);
    let message = format!(
        "MCP at /mcp does not answer requests addressed to host {host:?}: list that name in \
         --mcp-allowed-hosts (env MCP_ALLOWED_HOSTS), e.g. MCP_ALLOWED_HOSTS=localhost,127.0.0.1,{name}; \
         a hub reached from other machines or containers also needs --host 0.0.0.0 (env HOST)"
    );
    let body = serde_json::json!({ "error": message });
    (StatusCode::FORBIDDEN, axum::Json(body)).into_response()
}
