//! `POST /api/trackers/linear/webhook`: verified (signature, then freshness), then one
//! service call: a task with its link and delivery mark in one transaction, or a
//! steering message for the issue's running task (a follow-up task when it has ended).

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
use swarm_domain::{
    steering::{OnUnsupported, SteerMode},
    task::TaskDraft,
};
use swarm_service::{Caller, Service, ServiceError, trackers::TrackerLink};

use crate::{
    Linear, PROVIDER, WEBHOOK_PATH, text,
    webhook::{Issue, LinearEvent, classify, signature_valid, timestamp_fresh},
};

pub(crate) fn router<S: Clone + Send + Sync + 'static>(linear: Arc<Linear>) -> Router<S> {
    Router::new().route(WEBHOOK_PATH, post(linear_webhook)).with_state(linear)
}

fn answer(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}

fn refuse(linear: &Linear, status: StatusCode, message: &str) -> Response {
    linear.service.note_inbound(PROVIDER, "rejected");
    answer(status, json!({ "error": message }))
}

async fn linear_webhook(State(linear): State<Arc<Linear>>, headers: HeaderMap, body: Bytes) -> Response {
    linear.service.note_inbound(PROVIDER, "received");
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let signature = header("linear-signature").or_else(|| header("x-linear-signature"));
    if !signature.is_some_and(|signature| signature_valid(&linear.config.signing_secret, signature, &body)) {
        return refuse(&linear, StatusCode::UNAUTHORIZED, "invalid Linear signature (Linear-Signature)");
    }
    let Ok(json) = serde_json::from_slice::<Value>(&body) else {
        return refuse(&linear, StatusCode::BAD_REQUEST, "a Linear delivery is a JSON body");
    };
    if !timestamp_fresh(&json, linear.service.now().unix_millis()) {
        return refuse(
            &linear,
            StatusCode::UNAUTHORIZED,
            "stale Linear delivery: its webhookTimestamp is more than a minute from the hub's clock \
             (a replay, or the hub's clock is off)",
        );
    }
    let Some(delivery) = header("linear-delivery").map(str::trim).filter(|id| !id.is_empty()) else {
        return refuse(
            &linear,
            StatusCode::BAD_REQUEST,
            "a Linear delivery carries a Linear-Delivery header",
        );
    };
    let delivery = format!("linear:{}", delivery.chars().take(200).collect::<String>());
    let bot = linear.bot().await;
    let outcome = match classify(&json, &linear.config.gate, &bot) {
        LinearEvent::IssueReady { issue, ready, actor } => {
            match running_task(&linear.service, &issue.id).await {
                Ok(Some(running)) => Ok(json!({ "status": "ignored",
                "reason": format!("the issue's task {running} is not finished: it goes on") })),
                Ok(None) => {
                    let draft = task_draft(text::issue_task(&issue, ready, &actor));
                    create(&linear.service, draft, &issue, &delivery).await
                }
                Err(error) => Err(error),
            }
        }
        LinearEvent::Mention { issue, comment_id, body, actor } => {
            // The comment's id is in the signed body, where `Linear-Delivery` is not: a
            // signed comment replayed within its minute under another delivery id is
            // still the same comment.
            let delivery = if comment_id.is_empty() {
                delivery
            } else {
                format!("linear:comment:{}", comment_id.chars().take(200).collect::<String>())
            };
            mention(&linear.service, &issue, &body, &actor, &delivery).await
        }
        LinearEvent::Ignored(reason) => Ok(json!({ "status": "ignored", "reason": reason })),
    };
    match outcome {
        Ok(body) => {
            if body["status"] == "duplicate" {
                linear.service.note_inbound(PROVIDER, "duplicate");
            }
            answer(StatusCode::OK, body)
        }
        Err(error) => {
            tracing::warn!(%error, "linear: a delivery could not be handled");
            let status = match error {
                ServiceError::Invalid(_) => StatusCode::BAD_REQUEST,
                ServiceError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            let message = match error {
                ServiceError::Internal(_) => "internal error".to_string(),
                other => other.to_string(),
            };
            answer(status, json!({ "error": message }))
        }
    }
}

/// The issue's newest task, while it is not finished: a second "ready" event (labelled,
/// then assigned) goes to it rather than to a second task.
async fn running_task(
    service: &Service,
    issue_id: &str,
) -> Result<Option<swarm_domain::id::TaskId>, ServiceError> {
    let Some(newest) = service.tracker_links(PROVIDER, issue_id).await?.into_iter().next() else {
        return Ok(None);
    };
    let task = service.task_get(newest.task_id).await?;
    Ok((!task.status.is_finished()).then_some(task.id))
}

fn task_draft(text: String) -> TaskDraft {
    TaskDraft {
        task: text,
        source: Some(PROVIDER.into()),
        task_type: Some("linear-issue".into()),
        ..TaskDraft::default()
    }
}

fn link(issue: &Issue) -> TrackerLink {
    TrackerLink {
        provider: PROVIDER.into(),
        provider_entity_type: Some("issue".into()),
        external_id: issue.id.clone(),
        external_identifier: issue.identifier.clone(),
        external_url: issue.url.clone(),
    }
}

async fn create(
    service: &Service,
    draft: TaskDraft,
    issue: &Issue,
    delivery: &str,
) -> Result<Value, ServiceError> {
    Ok(match service.tracker_task_create(draft, link(issue), delivery).await? {
        Some(task) => json!({ "status": "accepted", "taskId": task.id }),
        None => json!({ "status": "duplicate" }),
    })
}

/// A comment for the bot on an issue: steering for its newest task while that runs, a
/// follow-up task linked to the issue once it ended; nothing for an issue with no task.
async fn mention(
    service: &Service,
    issue: &Issue,
    body: &str,
    actor: &crate::webhook::Actor,
    delivery: &str,
) -> Result<Value, ServiceError> {
    let links = service.tracker_links(PROVIDER, &issue.id).await?;
    let Some(newest) = links.first() else {
        return Ok(
            json!({ "status": "ignored", "reason": "a mention on an issue the swarm has no task for" }),
        );
    };
    let mut issue = issue.clone();
    if issue.identifier.is_none() {
        issue.identifier = newest.external_identifier.clone();
    }
    let task = service.task_get(newest.task_id).await?;
    if !task.status.is_finished() {
        if !service.tracker_delivery_mark(PROVIDER, delivery).await? {
            return Ok(json!({ "status": "duplicate" }));
        }
        let message = text::steering(&issue, body, actor);
        match service
            .steer_task(Caller::Operator, task.id, &message, SteerMode::Queue, OnUnsupported::Fail, PROVIDER)
            .await
        {
            Ok(steered) => {
                return Ok(json!({ "status": "accepted", "taskId": task.id, "steering": steered.outcome }));
            }
            // It ended between the read and the steer: the follow-up below takes the words.
            Err(ServiceError::Conflict(_)) => {}
            Err(error) => return Err(error),
        }
    }
    let mut draft = task_draft(text::follow_up_task(&issue, &task.id.to_string(), body, actor));
    draft.agent_id = task.agent_id;
    // A steered-then-finished task marked the delivery already: the follow-up's own
    // mark must differ, or it would read as a replay.
    let follow_up_delivery = format!("{delivery}:follow-up");
    create(service, draft, &issue, &follow_up_delivery).await
}
