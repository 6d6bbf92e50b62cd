//! GitLab's webhook (issue 47), for the OpenAPI document only: its handler lives in
//! `swarm-gitlab`, which checks `X-Gitlab-Token` itself (not the API key); on a hub
//! without `GITLAB_WEBHOOK_SECRET` the route answers 503 saying what to set.

use serde::Serialize;
use utoipa::ToSchema;

use crate::error::ErrorBody;

/// What the GitLab webhook answers a delivery it verified (the reference's shape, plus
/// why nothing was done).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // only described: swarm-gitlab builds this answer
pub struct GitLabWebhookAnswer {
    /// Whether a task was created.
    created: bool,
    /// The task created.
    task_id: Option<uuid::Uuid>,
    /// This delivery (`X-Gitlab-Event-UUID`) was received before: nothing changed.
    duplicate: Option<bool>,
    /// Why the event concerns nobody here (not for the bot, not a project member ...).
    ignored: Option<String>,
}

/// The answers the GitLab webhook may give besides 200.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // only described, never built
pub enum GitLabWebhookErrors {
    /// Not JSON.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// A missing or wrong `X-Gitlab-Token`: nothing was changed.
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// The body is larger than a webhook may send.
    #[response(status = 413)]
    PayloadTooLarge(ErrorBody),
    /// Too many webhook deliveries from this address (`Retry-After` says when to retry).
    #[response(status = 429)]
    TooManyRequests(ErrorBody),
    /// GitLab could not say whether the sender is a project member: nothing was created.
    #[response(status = 502)]
    BadGateway(ErrorBody),
    /// GitLab is not configured on this hub (the message says what to set), or the
    /// database cannot serve this now: nothing was changed.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}

/// Receive a GitLab webhook (`GITLAB_WEBHOOK_SECRET` in `X-Gitlab-Token`). A note
/// mentioning the bot (`GITLAB_BOT_NAME`) on an issue or merge request, an issue or
/// merge request opened mentioning it or assigned to it, and a failed merge request
/// pipeline become a task, when their author is a project member (checked with
/// `GITLAB_TOKEN`); the task's end is noted on the item once.
#[utoipa::path(post, path = "/api/gitlab/webhook", tag = "trackers",
    params(
        ("X-Gitlab-Token" = String, Header, description = "The webhook's secret token"),
        ("X-Gitlab-Event-UUID" = Option<String>, Header, description = "The delivery's id, the same when GitLab resends it"),
    ),
    request_body(content = serde_json::Value, content_type = "application/json", description = "GitLab's webhook payload"),
    responses((status = 200, body = GitLabWebhookAnswer), GitLabWebhookErrors),
)]
#[allow(dead_code)] // only described: swarm-gitlab serves it
pub(crate) async fn gitlab_webhook() {}
