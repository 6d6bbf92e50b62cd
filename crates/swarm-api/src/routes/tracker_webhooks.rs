//! The issue trackers' webhooks (issue 47), for the OpenAPI document only: their
//! handlers live in the tracker crates (`swarm-linear`, `swarm-jira`), which verify each
//! delivery themselves (not with the API key); on a hub where one is not configured,
//! its route answers 503 saying what to set.

use serde::Serialize;
use utoipa::ToSchema;

use crate::error::ErrorBody;

/// What a tracker webhook answers a delivery it verified.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // only described: the tracker crates build this answer
pub struct TrackerWebhookAnswer {
    /// `accepted` (a task was created or steered), `duplicate` (this delivery was
    /// received before: nothing changed) or `ignored` (nothing for the swarm).
    status: String,
    /// The task created or steered.
    task_id: Option<uuid::Uuid>,
    /// Why nothing was done.
    reason: Option<String>,
    /// Linear comments: what steering the running task did (`queued`, `steered`).
    steering: Option<String>,
}

/// The answers a tracker webhook may give besides 200.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // only described, never built
pub enum TrackerWebhookErrors {
    /// Not JSON, or (Linear) no `Linear-Delivery` header.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// Linear: a missing or wrong `Linear-Signature`, or a `webhookTimestamp` more than a
    /// minute from now. Jira: a wrong token. Nothing was changed.
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// The body is larger than a webhook may send.
    #[response(status = 413)]
    PayloadTooLarge(ErrorBody),
    /// Too many webhook deliveries from this address (`Retry-After` says when to retry).
    #[response(status = 429)]
    TooManyRequests(ErrorBody),
    /// The integration is not configured on this hub (the message says what to set), or
    /// the database cannot serve this now: nothing was changed; the tracker retries.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}

/// Receive a Linear webhook (`LINEAR_SIGNING_SECRET`): `Linear-Signature` is the hex
/// HMAC-SHA256 of the raw body, `webhookTimestamp` within a minute, `Linear-Delivery`
/// received once. An issue created with or given the ready label (`swarm-ready`), or
/// assigned to the bot in an allowed state, becomes a task; a comment mentioning the
/// bot steers the running task, or becomes a follow-up once it ended.
#[utoipa::path(post, path = "/api/trackers/linear/webhook", tag = "trackers",
    params(
        ("Linear-Signature" = String, Header, description = "Hex HMAC-SHA256 of the raw body"),
        ("Linear-Delivery" = String, Header, description = "The delivery's id, the same across Linear's retries"),
    ),
    request_body(content = serde_json::Value, content_type = "application/json", description = "Linear's webhook payload"),
    responses((status = 200, body = TrackerWebhookAnswer), TrackerWebhookErrors),
)]
#[allow(dead_code)] // only described: swarm-linear serves it
pub(crate) async fn linear_webhook() {}

/// Receive a Jira Cloud webhook; the token in the path is `JIRA_WEBHOOK_TOKEN`. An
/// issue assigned to the bot or given the ready label becomes a task.
/// `X-Atlassian-Webhook-Identifier`, when sent, marks the delivery.
#[utoipa::path(post, path = "/api/trackers/jira/webhook/{token}", tag = "trackers",
    params(("token" = String, Path, description = "JIRA_WEBHOOK_TOKEN")),
    request_body(content = serde_json::Value, content_type = "application/json", description = "Jira's webhook payload"),
    responses((status = 200, body = TrackerWebhookAnswer), TrackerWebhookErrors),
)]
#[allow(dead_code)] // only described: swarm-jira serves it
pub(crate) async fn jira_webhook() {}
