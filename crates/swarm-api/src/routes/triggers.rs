//! Triggers (cron, interval, once, webhook, github, manual): management, manual
//! firing, the sessions of persistent triggers, task results delivered, and the
//! webhook endpoint itself (`POST /api/webhooks/{name}`, outside the API key: it
//! carries its own signature).

use axum::{
    body::Bytes,
    extract::{Path, Query, State},
    http::{HeaderMap, StatusCode},
};
use serde::{Deserialize, Serialize};
use swarm_domain::{
    id::TaskId,
    task::Task,
    time::Timestamp,
    trigger::{SessionMode, TaskAwait, TriggerDef, TriggerDraft, TriggerSession, TriggerTarget, TriggerType},
};
use swarm_service::{FireRequest, WebhookOutcome, WebhookRequest};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::Json;
use crate::{
    AppState,
    error::{ApiError, ErrorResponses},
    extract::{AppJson, CallerHeader, OptionalJson},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(triggers_list, triggers_create))
        .routes(routes!(triggers_get, triggers_update, triggers_delete))
        .routes(routes!(triggers_fire))
        .routes(routes!(trigger_session_get, trigger_session_set))
        .routes(routes!(tasks_result_delivered))
        .routes(routes!(webhooks_receive))
}

type JsonObject = serde_json::Map<String, serde_json::Value>;

/// Bodies are read as JSON objects first: serde would also build these structs from a
/// JSON array of their fields, which the documented schema does not allow.
fn from_object<T: serde::de::DeserializeOwned>(body: JsonObject) -> Result<T, ApiError> {
    serde_json::from_value(serde_json::Value::Object(body))
        .map_err(|err| ApiError::BadRequest(format!("invalid request body: {err}")))
}

/// A trigger as the API shows it: the stored fields, whether it has a webhook secret
/// (never the secret), and where a webhook is called.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TriggerView {
    #[serde(flatten)]
    trigger: TriggerDef,
    has_webhook_secret: bool,
    /// `/api/webhooks/<name>` for webhook and github triggers.
    webhook_path: Option<String>,
}

impl From<TriggerDef> for TriggerView {
    fn from(trigger: TriggerDef) -> Self {
        let webhook_path = trigger.kind.is_webhook().then(|| format!("/api/webhooks/{}", trigger.name));
        TriggerView { has_webhook_secret: trigger.has_webhook_secret(), webhook_path, trigger }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TriggerListResponse {
    triggers: Vec<TriggerView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TriggerResponse {
    trigger: TriggerView,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TriggerListQuery {
    /// Only triggers of this type.
    #[serde(rename = "type")]
    #[param(rename = "type", value_type = Option<TriggerType>)]
    kind: Option<String>,
}

/// The fields of a trigger. On creation `name` and `type` are required; on update
/// both are ignored and every other field is optional (unset fields are kept).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TriggerBody {
    /// Lowercase letters, digits, `-` and `_`.
    #[schema(pattern = "^[a-z0-9][a-z0-9_-]{0,63}$")]
    name: Option<String>,
    #[serde(rename = "type")]
    #[schema(value_type = Option<TriggerType>)]
    kind: Option<String>,
    #[schema(max_length = 1000)]
    description: Option<String>,
    /// Cron expression, 5 fields, minute first (`cron`).
    #[schema(max_length = 200)]
    schedule: Option<String>,
    /// IANA time zone of the cron expression, default `UTC`.
    #[schema(max_length = 64)]
    timezone: Option<String>,
    /// `interval`: milliseconds between firings (at least 1000), as the reference's
    /// schedules count them.
    #[schema(minimum = 1000, maximum = 31622400000_i64)]
    interval_ms: Option<i64>,
    /// `interval`: seconds between firings (ours, kept for older clients; not together
    /// with `intervalMs`).
    #[schema(minimum = 1, maximum = 31622400)]
    interval_seconds: Option<i64>,
    /// `once`: when it fires.
    run_at: Option<Timestamp>,
    /// HMAC key of `X-Hub-Signature-256`, or the value of `X-Webhook-Secret`: at least
    /// 16 characters (`openssl rand -hex 32`).
    #[schema(min_length = 16, max_length = 512)]
    webhook_secret: Option<String>,
    /// Accept unsigned webhook requests (must be asked for).
    webhook_public: Option<bool>,
    /// `github`: the login whose assignments, review requests and mentions count.
    #[schema(max_length = 100)]
    github_bot: Option<String>,
    /// Where its tasks come from (their `source`, and `{{channel}}`): a lowercase word;
    /// unset, the trigger's type decides.
    #[schema(max_length = 32)]
    channel: Option<String>,
    #[schema(value_type = Option<TriggerTarget>)]
    target: Option<String>,
    /// Template with `{{payload}}`, `{{sender}}`, `{{channel}}`, `{{trigger_name}}`.
    #[schema(max_length = 20000)]
    prompt: Option<String>,
    #[schema(max_length = 64)]
    task_type: Option<String>,
    #[schema(max_items = 50)]
    tags: Option<Vec<String>>,
    #[schema(minimum = 0, maximum = 100)]
    priority: Option<i64>,
    #[schema(value_type = Option<SessionMode>)]
    session_mode: Option<String>,
    enabled: Option<bool>,
}

impl TriggerBody {
    fn into_draft(self) -> Result<TriggerDraft, ApiError> {
        let interval_seconds = match (self.interval_ms, self.interval_seconds) {
            (Some(_), Some(_)) => {
                return Err(ApiError::BadRequest(
                    "give the interval once: intervalMs (milliseconds) or intervalSeconds, not both".into(),
                ));
            }
            (None, Some(seconds)) if !(1..=31_622_400).contains(&seconds) => {
                return Err(ApiError::BadRequest(format!(
                    "intervalSeconds must be between 1 and 31622400 (a year); got {seconds}"
                )));
            }
            (_, seconds) => seconds,
        };
        Ok(TriggerDraft {
            name: self.name.unwrap_or_default(),
            kind: self.kind.unwrap_or_default(),
            description: self.description,
            schedule: self.schedule,
            timezone: self.timezone,
            interval_ms: self.interval_ms.or(interval_seconds.map(|seconds| seconds * 1000)),
            run_at: self.run_at,
            webhook_secret: self.webhook_secret,
            webhook_public: self.webhook_public,
            github_bot: self.github_bot,
            channel: self.channel,
            target: self.target,
            prompt: self.prompt,
            task_type: self.task_type,
            tags: self.tags,
            priority: self.priority,
            session_mode: self.session_mode,
            enabled: self.enabled,
        })
    }
}

/// Every trigger, by name.
#[utoipa::path(get, path = "/api/triggers", tag = "triggers", params(TriggerListQuery),
    responses((status = 200, body = TriggerListResponse), ErrorResponses))]
async fn triggers_list(
    State(state): State<AppState>,
    Query(query): Query<TriggerListQuery>,
) -> Result<Json<TriggerListResponse>, ApiError> {
    // An empty `type` is not a type: only its absence means every type.
    let kinds = match query.kind.as_deref() {
        Some(kind) => vec![TriggerType::parse(kind)?],
        None => Vec::new(),
    };
    let triggers = state.service.trigger_list(&kinds).await?;
    Ok(Json(TriggerListResponse { triggers: triggers.into_iter().map(TriggerView::from).collect() }))
}

/// Create a trigger. A webhook needs `webhookSecret` unless `webhookPublic` is true.
#[utoipa::path(post, path = "/api/triggers", tag = "triggers", request_body = TriggerBody,
    responses((status = 201, body = TriggerResponse), ErrorResponses))]
async fn triggers_create(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    AppJson(body): AppJson<JsonObject>,
) -> Result<(StatusCode, Json<TriggerResponse>), ApiError> {
    let body: TriggerBody = from_object(body)?;
    let trigger = state.service.trigger_create(caller, body.into_draft()?).await?;
    Ok((StatusCode::CREATED, Json(TriggerResponse { trigger: trigger.into() })))
}

/// One trigger, by name or id.
#[utoipa::path(get, path = "/api/triggers/{name}", tag = "triggers",
    params(("name" = String, Path, description = "Trigger name or id")),
    responses((status = 200, body = TriggerResponse), ErrorResponses))]
async fn triggers_get(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<TriggerResponse>, ApiError> {
    Ok(Json(TriggerResponse { trigger: state.service.trigger_find(&name).await?.into() }))
}

/// Change a trigger: only the fields given (creator, lead or operator).
#[utoipa::path(patch, path = "/api/triggers/{name}", tag = "triggers",
    params(("name" = String, Path, description = "Trigger name or id")), request_body = TriggerBody,
    responses((status = 200, body = TriggerResponse), ErrorResponses))]
async fn triggers_update(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(name): Path<String>,
    AppJson(body): AppJson<JsonObject>,
) -> Result<Json<TriggerResponse>, ApiError> {
    let body: TriggerBody = from_object(body)?;
    // Given, they must be valid (the service then refuses any other than the trigger's own).
    if let Some(given) = &body.name {
        swarm_domain::trigger::parse_name(given)?;
    }
    if let Some(given) = &body.kind {
        TriggerType::parse(given)?;
    }
    let trigger = state.service.trigger_update(caller, &name, body.into_draft()?).await?;
    Ok(Json(TriggerResponse { trigger: trigger.into() }))
}

/// Delete a trigger with its sessions (creator, lead or operator).
#[utoipa::path(delete, path = "/api/triggers/{name}", tag = "triggers",
    params(("name" = String, Path, description = "Trigger name or id")),
    responses((status = 200, body = TriggerResponse), ErrorResponses))]
async fn triggers_delete(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(name): Path<String>,
) -> Result<Json<TriggerResponse>, ApiError> {
    let trigger = state.service.trigger_delete(caller, &name).await?;
    Ok(Json(TriggerResponse { trigger: trigger.into() }))
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FireBody {
    /// `{{payload}}` of this firing.
    #[schema(max_length = 50000)]
    payload: Option<String>,
    /// Persistent triggers: the conversation this firing belongs to.
    #[schema(min_length = 1, max_length = 200)]
    session_key: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FireResponse {
    task: Task,
}

/// Fire a trigger now, whatever its type and even when disabled; its schedule is
/// left alone. For the operator, the lead, the trigger's creator or its target (else
/// 403); the task's `creatorAgentId` is the agent that fired it, and an agent's
/// `payload` arrives fenced as outside input.
#[utoipa::path(post, path = "/api/triggers/{name}/fire", tag = "triggers",
    params(("name" = String, Path, description = "Trigger name or id")), request_body(content = Option<FireBody>),
    responses((status = 201, body = FireResponse), ErrorResponses))]
async fn triggers_fire(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(name): Path<String>,
    OptionalJson(body): OptionalJson<JsonObject>,
) -> Result<(StatusCode, Json<FireResponse>), ApiError> {
    let body: FireBody = from_object(body)?;
    let request = FireRequest { payload: body.payload, session_key: body.session_key };
    let task = state.service.trigger_fire(caller, &name, request).await?;
    Ok((StatusCode::CREATED, Json(FireResponse { task })))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SessionQuery {
    /// The conversation (a thread, a pull request: `owner/repo#12`).
    #[serde(rename = "key")]
    #[param(min_length = 1, max_length = 200)]
    key: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionResponse {
    session: TriggerSession,
}

/// The agent session recorded for one conversation of a trigger (404: none yet).
#[utoipa::path(get, path = "/api/triggers/{name}/session", tag = "triggers",
    params(("name" = String, Path, description = "Trigger name"), SessionQuery),
    responses((status = 200, body = SessionResponse), ErrorResponses))]
async fn trigger_session_get(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(query): Query<SessionQuery>,
) -> Result<Json<SessionResponse>, ApiError> {
    Ok(Json(SessionResponse { session: state.service.trigger_session_get(&name, &query.key).await? }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionBody {
    #[schema(min_length = 1, max_length = 200)]
    session_key: String,
    /// The agent CLI's session id (letters, digits, `-_.:`).
    #[schema(min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9_.:-]+$")]
    session_id: String,
}

/// Record the agent session of one conversation: the next firing with the same key
/// resumes it (the runner calls this after each run of a trigger task).
#[utoipa::path(put, path = "/api/triggers/{name}/session", tag = "triggers",
    params(("name" = String, Path, description = "Trigger name")), request_body = SessionBody,
    responses((status = 200, body = SessionResponse), ErrorResponses))]
async fn trigger_session_set(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(name): Path<String>,
    AppJson(body): AppJson<JsonObject>,
) -> Result<Json<SessionResponse>, ApiError> {
    let body: SessionBody = from_object(body)?;
    let session =
        state.service.trigger_session_set(caller, &name, &body.session_key, &body.session_id).await?;
    Ok(Json(SessionResponse { session }))
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AwaitResponse {
    task_await: TaskAwait,
}

/// The awaiting agent's runner resumed its session with this task's result (after a
/// `task_result` trigger): it is not offered again.
#[utoipa::path(post, path = "/api/tasks/{id}/result-delivered", tag = "triggers",
    params(("id" = uuid::Uuid, Path, description = "The awaited task")),
    responses((status = 200, body = AwaitResponse), ErrorResponses))]
async fn tasks_result_delivered(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
) -> Result<Json<AwaitResponse>, ApiError> {
    let id = TaskId::parse(&id)?;
    Ok(Json(AwaitResponse { task_await: state.service.task_result_delivered(caller, id).await? }))
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookResponse {
    accepted: bool,
    /// The task created, when the event made one.
    task_id: Option<TaskId>,
    /// Why nothing was created (a repeated delivery, an event for nobody here).
    ignored: Option<String>,
}

/// Receive a webhook. Authenticated by `X-Hub-Signature-256: sha256=<HMAC-SHA256 of
/// the body>` or `X-Webhook-Secret`, unless the trigger is public; not by the API key.
/// The body (JSON, form data or text) becomes `{{payload}}`. Answers at once.
#[utoipa::path(post, path = "/api/webhooks/{name}", tag = "triggers",
    params(("name" = String, Path, description = "Trigger name")),
    request_body(content = String, content_type = "application/json",
        description = "Any JSON, form data or text"),
    responses((status = 202, body = WebhookResponse), ErrorResponses))]
async fn webhooks_receive(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<WebhookResponse>), ApiError> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).map(str::to_string);
    let request = WebhookRequest {
        body: body.to_vec(),
        content_type: header("content-type"),
        signature_256: header("x-hub-signature-256"),
        secret_header: header("x-webhook-secret"),
        github_event: header("x-github-event"),
        delivery_id: header("x-github-delivery"),
        session_key: header("x-session-key"),
        sender: header("x-sender"),
    };
    let response = match state.service.webhook_receive(&name, request).await? {
        WebhookOutcome::Fired(task) => {
            WebhookResponse { accepted: true, task_id: Some(task.id), ignored: None }
        }
        WebhookOutcome::Ignored(reason) => {
            WebhookResponse { accepted: true, task_id: None, ignored: Some(reason) }
        }
    };
    Ok((StatusCode::ACCEPTED, Json(response)))
}
