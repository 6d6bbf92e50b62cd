//! Extractors whose rejections use the app's error format.

use axum::{
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Request},
    http::request::Parts,
};
use serde::de::DeserializeOwned;
use swarm_domain::id::{AgentId, RunnerId};
use swarm_service::{Authenticated, Caller};

use crate::error::ApiError;

pub const AGENT_ID_HEADER: &str = "x-agent-id";

/// A JSON body, sent as `Content-Type: application/json` (else 415): a web page can
/// send `text/plain` across sites without asking, but not `application/json`, so this is
/// what keeps a page from driving the hub. Every other failure is a 400 (413 when too
/// large) with a message that names what is wrong.
pub struct AppJson<T>(pub T);

/// 415 unless the request says its body is JSON (`application/json`, or a `+json` type).
fn require_json_content_type(req: &Request) -> Result<(), ApiError> {
    let content_type = req
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    if essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json")) {
        return Ok(());
    }
    Err(ApiError::UnsupportedMediaType(format!(
        "a JSON body must be sent with Content-Type: application/json (got {:?})",
        if content_type.is_empty() { "none" } else { content_type }
    )))
}

impl<S, T> FromRequest<S> for AppJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        require_json_content_type(&req)?;
        let bytes = body_bytes(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::BadRequest("request body must be a JSON object".into()));
        }
        parse_json(&bytes).map(AppJson)
    }
}

/// A JSON body that may be absent: an empty body (of any type) is `T::default()`.
pub struct OptionalJson<T>(pub T);

impl<S, T> FromRequest<S> for OptionalJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Default,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        // No body needs no type; a body does (see AppJson).
        let typed = require_json_content_type(&req);
        let bytes = body_bytes(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(T::default()));
        }
        typed?;
        parse_json(&bytes).map(OptionalJson)
    }
}

async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge("request body is too large".into())
        } else {
            ApiError::BadRequest(format!("cannot read request body: {rejection}"))
        }
    })
}

fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Every body is an object; serde would read `[1]` as a struct's fields in order, so an
    // array could change what an object with the wrong names is refused for.
    if bytes.iter().find(|byte| !byte.is_ascii_whitespace()) == Some(&b'[') {
        return Err(ApiError::BadRequest(
            "invalid request body: expected a JSON object, found an array".into(),
        ));
    }
    serde_json::from_slice(bytes).map_err(|err| {
        let kind = if err.is_data() { "invalid request body" } else { "malformed JSON" };
        ApiError::BadRequest(format!("{kind}: {err}"))
    })
}

/// Who is calling. Header mode: the agent named by `X-Agent-ID`, else the operator.
/// Token mode: the agent whose token the request carries (`X-Agent-ID` must agree), else
/// the operator, who cannot name an agent (403). The rule is the service's
/// ([`Authenticated::caller`]); the edge attached the credential.
pub struct CallerHeader(pub Caller);

impl<S: Send + Sync> FromRequestParts<S> for CallerHeader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let named = agent_id_header(parts)?;
        Ok(CallerHeader(authenticated(parts)?.caller(named)?))
    }
}

/// The request's credential as the edge found it. None was attached on a public path:
/// a handler there that asks for a caller is refused, never given the operator.
pub fn authenticated(parts: &Parts) -> Result<Authenticated, ApiError> {
    parts.extensions.get::<Authenticated>().copied().ok_or(ApiError::Unauthorized)
}

/// The request's credential and its `X-Agent-ID`, for registration, which decides with
/// both (a new agent's id may be named by the operator).
pub struct Credentials(pub Authenticated, pub Option<AgentId>);

impl<S: Send + Sync> FromRequestParts<S> for Credentials {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(Credentials(authenticated(parts)?, agent_id_header(parts)?))
    }
}

/// The `X-Agent-ID` header, when present and not empty.
pub fn agent_id_header(parts: &Parts) -> Result<Option<AgentId>, ApiError> {
    let Some(value) = parts.headers.get(AGENT_ID_HEADER) else {
        return Ok(None);
    };
    let text = value.to_str().map_err(|_| ApiError::BadRequest("X-Agent-ID must be a UUID".into()))?.trim();
    if text.is_empty() {
        return Ok(None);
    }
    AgentId::parse(text)
        .map(Some)
        .map_err(|_| ApiError::BadRequest(format!("X-Agent-ID must be a UUID, got {text:?}")))
}

/// An id from a query parameter; absent or empty means "no filter".
pub fn optional_id<T>(
    text: Option<&str>,
    parse: fn(&str) -> Result<T, swarm_domain::Invalid>,
) -> Result<Option<T>, ApiError> {
    Ok(text.filter(|id| !id.is_empty()).map(parse).transpose()?)
}

/// Deserialize a comma-separated list or a single value.
pub fn split_list(text: Option<&str>) -> Vec<String> {
    text.map(|text| {
        text.split(',').map(str::trim).filter(|part| !part.is_empty()).map(str::to_string).collect()
    })
    .unwrap_or_default()
}

/// The runner process calling (`X-Runner-ID`), when present: the holder of
/// the lead-side claims its polls take and its pings extend.
pub struct RunnerHeader(pub Option<RunnerId>);

pub const RUNNER_ID_HEADER: &str = "x-runner-id";

impl<S: Send + Sync> FromRequestParts<S> for RunnerHeader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let Some(value) = parts.headers.get(RUNNER_ID_HEADER) else {
            return Ok(RunnerHeader(None));
        };
        let invalid = || ApiError::BadRequest("X-Runner-ID must be a UUID (or leave the header out)".into());
        let text = value.to_str().map_err(|_| invalid())?.trim();
        RunnerId::parse(text).map(|id| RunnerHeader(Some(id))).map_err(|_| invalid())
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    struct Body {
        #[allow(dead_code)]
        title: String,
        #[allow(dead_code)]
        priority: i64,
    }

    #[test]
    fn an_array_never_stands_in_for_an_object() {
        assert!(parse_json::<Body>(br#"{"title":"t","priority":1}"#).is_ok());
        for array in [&br#"["t", 1]"#[..], b"  \n[\"t\",1]"] {
            match parse_json::<Body>(array) {
                Err(ApiError::BadRequest(message)) => assert!(message.contains("expected a JSON object")),
                other => panic!("an array was read as {other:?}"),
            }
        }
    }
}
