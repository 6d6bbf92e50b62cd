//! The Events API over HTTP: `POST /slack/events`, and the buttons' interactivity at
//! `POST /slack/interactivity` (Bolt apps point both at `/slack/events`, so it takes the
//! form-encoded interactions too). Every request's signature is checked (401 when bad or
//! older than five minutes); URL verification is answered with the challenge; events are
//! acknowledged at once and handled in the background (Slack retries after three seconds
//! without an answer, and the bridge's dedup absorbs it).

use std::sync::Arc;

use axum::{
    Json, Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::{Value, json};

use crate::{
    bridge::Bridge,
    interactions::form_payload,
    signature::{SignatureCheck, verify},
};

pub fn router<S: Clone + Send + Sync + 'static>(bridge: Arc<Bridge>) -> Router<S> {
    Router::new()
        .route("/slack/events", post(slack_events))
        .route("/slack/interactivity", post(slack_interactivity))
        .with_state(bridge)
}

fn refuse(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

/// Check a request's signature, as Slack signs every request: the refusal to send, if any.
fn refusal(bridge: &Bridge, headers: &HeaderMap, body: &[u8]) -> Option<Response> {
    let Some(secret) = bridge.config.signing_secret.as_deref() else {
        return Some(refuse(
            StatusCode::NOT_FOUND,
            "the Events API is not enabled: set SLACK_SIGNING_SECRET",
        ));
    };
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX));
    let check = verify(secret, header("x-slack-request-timestamp"), header("x-slack-signature"), body, now);
    if check != SignatureCheck::Valid {
        bridge.service.note_inbound("slack", "rejected");
    }
    match check {
        SignatureCheck::Valid => None,
        SignatureCheck::Bad => Some(refuse(StatusCode::UNAUTHORIZED, "invalid Slack signature")),
        SignatureCheck::Stale => Some(refuse(
            StatusCode::UNAUTHORIZED,
            "stale Slack request: its timestamp is more than 5 minutes away",
        )),
    }
}

async fn slack_interactivity(State(bridge): State<Arc<Bridge>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(refused) = refusal(&bridge, &headers, &body) {
        return refused;
    }
    let Some(payload) = form_payload(&body) else {
        return refuse(StatusCode::BAD_REQUEST, "the body is not a Slack interaction (payload=<JSON>)");
    };
    tokio::spawn(async move { bridge.handle_interaction(&payload).await });
    StatusCode::OK.into_response()
}

async fn slack_events(State(bridge): State<Arc<Bridge>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(refused) = refusal(&bridge, &headers, &body) {
        return refused;
    }
    if let Some(payload) = form_payload(&body) {
        tokio::spawn(async move { bridge.handle_interaction(&payload).await });
        return StatusCode::OK.into_response();
    }
    let Ok(payload) = serde_json::from_slice::<Value>(&body) else {
        return refuse(StatusCode::BAD_REQUEST, "the body is not JSON");
    };
    match payload.get("type").and_then(Value::as_str) {
        Some("url_verification") => {
            let challenge = payload.get("challenge").cloned().unwrap_or(Value::Null);
            Json(json!({ "challenge": challenge })).into_response()
        }
        Some("event_callback") => {
            tokio::spawn(async move { bridge.handle_callback(&payload).await });
            Json(json!({})).into_response()
        }
        _ => Json(json!({})).into_response(),
    }
}
