//! `POST /api/gitlab/webhook`: the token checked in constant time, the event read, its
//! author checked against the project's members, then one service call that creates
//! the task, its link and the delivery's mark together.

use std::sync::Arc;

use axum::{
    Json,
    body::Bytes,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use swarm_domain::task::TaskDraft;
use swarm_service::{ServiceError, trackers::TrackerLink};

use crate::{
    GitLab, PROVIDER,
    event::{self, Request},
};

/// Each piece of outside text is cut to this before it is fenced (the task's text has
/// its own limit, 100,000 characters).
const WORDS_MAX_CHARS: usize = 20_000;

pub(crate) async fn receive(gitlab: Option<Arc<GitLab>>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(gitlab) = gitlab else {
        return answer(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({ "error": "GitLab is not configured on this hub: set GITLAB_WEBHOOK_SECRET (or \
                              --gitlab-webhook-secret) to the webhook's secret token, and unset GITLAB_DISABLE" }),
        );
    };
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).map(str::trim);
    let token_ok = header("x-gitlab-token")
        .is_some_and(|given| bool::from(given.as_bytes().ct_eq(gitlab.config.webhook_secret.as_bytes())));
    if !token_ok {
        gitlab.service.note_inbound(PROVIDER, "rejected");
        return answer(
            StatusCode::UNAUTHORIZED,
            json!({ "error": "bad or missing X-Gitlab-Token: set the webhook's secret token to GITLAB_WEBHOOK_SECRET" }),
        );
    }
    gitlab.service.note_inbound(PROVIDER, "received");
    let Ok(json) = serde_json::from_slice::<Value>(&body) else {
        return answer(StatusCode::BAD_REQUEST, json!({ "error": "a GitLab delivery is a JSON body" }));
    };
    let request = match event::read(&json, &gitlab.config.bot_name) {
        Ok(request) => request,
        Err(reason) => return ignored(reason),
    };
    if let Some(refusal) = member_check(&gitlab, &request).await {
        return refusal;
    }
    // GitLab names each delivery (a resend keeps the name); without a name, the body is one.
    let delivery = header("x-gitlab-event-uuid")
        .or_else(|| header("idempotency-key"))
        .filter(|id| !id.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| format!("sha256:{}", hex::encode(Sha256::digest(&body))));
    let draft = TaskDraft {
        task: task_text(&request, &json),
        source: Some(PROVIDER.into()),
        task_type: Some(request.task_type.into()),
        ..TaskDraft::default()
    };
    let link = TrackerLink {
        provider: PROVIDER.into(),
        provider_entity_type: Some(request.item.kind.entity_type().into()),
        external_id: request.item.external_id(),
        external_identifier: Some(request.item.identifier()),
        external_url: request.item.url.clone(),
    };
    match gitlab.service.tracker_task_create(draft, link, &delivery).await {
        Ok(Some(task)) => answer(StatusCode::OK, json!({ "created": true, "taskId": task.id })),
        Ok(None) => {
            gitlab.service.note_inbound(PROVIDER, "duplicate");
            answer(StatusCode::OK, json!({ "created": false, "duplicate": true }))
        }
        Err(error) => {
            tracing::warn!(%error, "gitlab: a delivery could not be turned into a task");
            let (status, message) = match error {
                ServiceError::Invalid(message) => (StatusCode::BAD_REQUEST, message),
                ServiceError::Unavailable(message) => (StatusCode::SERVICE_UNAVAILABLE, message),
                _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal error".to_string()),
            };
            answer(status, json!({ "error": message }))
        }
    }
}

/// Only the project's members may ask the bot, where GitLab can tell (`GITLAB_TOKEN`
/// set): anyone may comment on a public project. `None` to go on.
async fn member_check(gitlab: &GitLab, request: &Request) -> Option<Response> {
    let api = gitlab.api.as_ref()?;
    let who = request.username.as_deref().map(|name| format!("@{name}")).unwrap_or_else(|| "someone".into());
    let Some(user_id) = request.user_id else {
        return Some(ignored(format!("GitLab event without its user's id: {who} cannot be checked")));
    };
    match api.is_member(request.item.project_id, user_id).await {
        Ok(true) => None,
        Ok(false) => Some(ignored(format!(
            "{who} is not a member of {}: only project members may ask @{}",
            request.item.project_path.as_deref().unwrap_or("the project"),
            gitlab.config.bot_name
        ))),
        Err(error) => {
            tracing::warn!(%error, "gitlab: could not check a sender's membership");
            Some(answer(
                StatusCode::BAD_GATEWAY,
                json!({ "error": format!("could not ask GitLab whether {who} is a project member ({error}); \
                                          nothing was created, resend the delivery") }),
            ))
        }
    }
}

/// Our line (what, who, where: identifiers only), then GitLab's words, fenced.
fn task_text(request: &Request, json: &Value) -> String {
    let attributes = &json["object_attributes"];
    let item = match request.item.kind {
        event::ItemKind::Issue if json["object_kind"] == "note" => &json["issue"],
        event::ItemKind::MergeRequest if json["object_kind"] != "merge_request" => &json["merge_request"],
        _ => attributes,
    };
    let mut words = Vec::new();
    let mut add = |label: &str, value: &Value| {
        if let Some(text) = value.as_str().map(str::trim).filter(|text| !text.is_empty()) {
            let text: String = text.chars().filter(|c| *c != '\0').take(WORDS_MAX_CHARS).collect();
            words.push(format!("{label}: {text}"));
        }
    };
    add("Title", &item["title"]);
    add("Description", &item["description"]);
    add("Source branch", &item["source_branch"]);
    add("Target branch", &item["target_branch"]);
    if json["object_kind"] == "note" {
        add("Comment", &attributes["note"]);
    }
    if json["object_kind"] == "pipeline" {
        add("Ref", &attributes["ref"]);
        for build in json["builds"].as_array().into_iter().flatten().filter(|b| b["status"] == "failed") {
            let job = format!(
                "{} (stage {})",
                build["name"].as_str().unwrap_or("?"),
                build["stage"].as_str().unwrap_or("?")
            );
            add("Failed job", &Value::from(job));
        }
    }
    let url = request.item.url.as_deref().map(|url| format!("\nLink: {url}")).unwrap_or_default();
    let url = if url.chars().any(char::is_whitespace) || url.contains('<') { String::new() } else { url };
    format!(
        "{}{url}\n\n{}",
        request.summary,
        swarm_domain::untrusted::fence(PROVIDER, request.username.as_deref(), &words.join("\n\n"))
    )
}

fn ignored(reason: String) -> Response {
    answer(StatusCode::OK, json!({ "created": false, "ignored": reason }))
}

fn answer(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}
