//! The calls of the reference's newest runner (agent-swarm 1.135 `worker`, issue 48)
//! that swarm had no route for: credential status, a task's provider session and context
//! usage, its event log in batches, its active sessions, and the features swarm does not
//! have, answered with the reference's shapes and an honest empty
//! ([compatibility](../../../../docs/compatibility.md#the-newest-reference-runner)).

use std::collections::BTreeMap;

use axum::{
    extract::{Path, Query, State},
    http::StatusCode,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use swarm_domain::id::{AgentId, TaskId};
use swarm_service::{EVENT_BATCH_MAX, NewWorkerEvent, RunnerRecordView};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    AppState, Json,
    error::{ApiError, ErrorResponses},
    extract::{AppJson, CallerHeader},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(credential_status_report, credential_status_get))
        .routes(routes!(credential_status_list))
        .routes(routes!(agents_activity))
        .routes(routes!(task_session_report))
        .routes(routes!(task_context_report, task_context_list))
        .routes(routes!(events_batch_create))
        .routes(routes!(active_sessions_list, active_sessions_create))
        .routes(routes!(active_sessions_end_by_task))
        .routes(routes!(active_sessions_end))
        .routes(routes!(active_sessions_heartbeat))
        .routes(routes!(active_sessions_provider_session))
        .routes(routes!(active_sessions_cleanup))
        .routes(routes!(active_sessions_recover_orphaned))
        .routes(routes!(agents_mcp_servers))
        .routes(routes!(agents_skills))
        .routes(routes!(agents_skills_signature))
        .routes(routes!(config_resolved))
        .routes(routes!(config_list))
        .routes(routes!(keys_available))
        .routes(routes!(keys_report_usage))
        .routes(routes!(keys_clear_rate_limit))
        .routes(routes!(keys_report_rate_limit))
        .routes(routes!(keys_report_rate_limit_windows))
        .routes(routes!(prompt_templates_render))
        .routes(routes!(memory_search))
        .routes(routes!(fs_agent_credentials))
}

fn iso(at: swarm_domain::time::Timestamp) -> String {
    let at: DateTime<Utc> = at.datetime();
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

// ----- profile files -----

/// An agent's profile files, kept on the hub for its runner (`PUT /api/agents/:id/profile`,
/// read back in `/me`), as the reference's runner names them.
#[derive(Debug, Default, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProfileFiles {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claude_md: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soul_md: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_md: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools_md: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setup_script: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat_md: Option<String>,
}

impl ProfileFiles {
    pub fn into_map(self) -> BTreeMap<String, String> {
        [
            ("claudeMd", self.claude_md),
            ("soulMd", self.soul_md),
            ("identityMd", self.identity_md),
            ("toolsMd", self.tools_md),
            ("setupScript", self.setup_script),
            ("heartbeatMd", self.heartbeat_md),
        ]
        .into_iter()
        .filter_map(|(name, content)| content.map(|content| (name.to_string(), content)))
        .collect()
    }

    pub fn from_map(mut files: BTreeMap<String, String>) -> Self {
        ProfileFiles {
            claude_md: files.remove("claudeMd"),
            soul_md: files.remove("soulMd"),
            identity_md: files.remove("identityMd"),
            tools_md: files.remove("toolsMd"),
            setup_script: files.remove("setupScript"),
            heartbeat_md: files.remove("heartbeatMd"),
        }
    }
}

// ----- credential status -----

/// `PUT /api/agents/:id/credential-status`, as the reference's runner sends it.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CredentialStatusBody {
    pub ready: Option<bool>,
    /// Environment variables (or files) the runner waits for.
    pub missing: Option<Vec<String>>,
    /// The runner's full credential snapshot, kept as sent.
    #[schema(value_type = Option<Object>)]
    pub cred_status: Option<Map<String, Value>>,
    /// The model the runner last used, kept as sent.
    #[schema(value_type = Option<Object>)]
    pub latest_model: Option<Map<String, Value>>,
}

/// An agent's last reported credential status (the reference's `AgentCredentialStatusEntry`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialStatusEntry {
    pub agent_id: String,
    pub ready: Option<bool>,
    pub missing: Vec<String>,
    #[schema(value_type = Option<Object>)]
    pub cred_status: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub latest_model: Option<Value>,
    pub last_checked_at: String,
}

impl From<RunnerRecordView> for CredentialStatusEntry {
    fn from(record: RunnerRecordView) -> Self {
        let field = |name: &str| record.body.get(name).filter(|value| !value.is_null()).cloned();
        CredentialStatusEntry {
            agent_id: record.owner_id.clone(),
            ready: record.body.get("ready").and_then(Value::as_bool),
            missing: field("missing")
                .and_then(|value| serde_json::from_value(value).ok())
                .unwrap_or_default(),
            cred_status: field("cred_status"),
            latest_model: field("latest_model"),
            last_checked_at: iso(record.updated_at),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CredentialStatusList {
    pub agents: Vec<CredentialStatusEntry>,
}

/// The runner reports its credential readiness (itself; the operator for any agent).
/// Kept on the agent, merged over the last report; answers the agent.
#[utoipa::path(put, path = "/api/agents/{id}/credential-status", tag = "agents",
    request_body = CredentialStatusBody,
    params(("id" = uuid::Uuid, Path, description = "Agent id")),
    responses((status = 200, body = swarm_domain::agent::Agent), ErrorResponses))]
async fn credential_status_report(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    AppJson(body): AppJson<CredentialStatusBody>,
) -> Result<Json<swarm_domain::agent::Agent>, ApiError> {
    let mut report = Map::new();
    if let Some(ready) = body.ready {
        report.insert("ready".into(), Value::Bool(ready));
    }
    if let Some(missing) = body.missing {
        report.insert("missing".into(), json!(missing));
    }
    if let Some(cred) = body.cred_status {
        report.insert("cred_status".into(), Value::Object(cred));
    }
    if let Some(model) = body.latest_model {
        report.insert("latest_model".into(), Value::Object(model));
    }
    let agent = AgentId::parse(&id)?;
    Ok(Json(state.service.credential_status_report(caller, agent, Value::Object(report)).await?))
}

/// An agent's last reported credential status; 404 when it never reported one.
#[utoipa::path(get, path = "/api/agents/{id}/credential-status", tag = "agents",
    params(("id" = uuid::Uuid, Path, description = "Agent id")),
    responses((status = 200, body = CredentialStatusEntry), ErrorResponses))]
async fn credential_status_get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<CredentialStatusEntry>, ApiError> {
    let agent = AgentId::parse(&id)?;
    let found = state.service.credential_statuses(Some(agent)).await?.into_iter().next();
    let found = found
        .ok_or_else(|| ApiError::NotFound(format!("agent {agent} has reported no credential status")))?;
    Ok(Json(found.into()))
}

/// Every agent's last reported credential status, newest first.
#[utoipa::path(get, path = "/api/agents/credential-status", tag = "agents",
    responses((status = 200, body = CredentialStatusList), ErrorResponses))]
async fn credential_status_list(
    State(state): State<AppState>,
) -> Result<Json<CredentialStatusList>, ApiError> {
    let agents = state.service.credential_statuses(None).await?;
    Ok(Json(CredentialStatusList { agents: agents.into_iter().map(Into::into).collect() }))
}

/// The agent is active (the reference's Claude Code hooks send it on every tool use): from
/// the agent itself a heartbeat, as `POST /ping`; the operator may send it for any agent.
#[utoipa::path(put, path = "/api/agents/{id}/activity", tag = "agents",
    params(("id" = uuid::Uuid, Path, description = "Agent id")),
    responses((status = 204), ErrorResponses))]
async fn agents_activity(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.service.agent_activity(caller, AgentId::parse(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

// ----- a task's provider session and context usage -----

/// `PUT /api/tasks/:id/session`: the provider session a runner started for the task.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskSessionBody {
    #[schema(min_length = 1, max_length = 512)]
    pub claude_session_id: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub provider_meta: Option<Map<String, Value>>,
    pub harness_variant: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub harness_variant_meta: Option<Map<String, Value>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Success {
    pub success: bool,
}

/// Keep the task's provider session (its assignee; the operator): `GET /api/tasks/:id`
/// answers it as `claudeSessionId`, `provider`, `model`, `providerMeta`, which the
/// runner's resume reads.
#[utoipa::path(put, path = "/api/tasks/{id}/session", tag = "tasks", request_body = TaskSessionBody,
    params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = Success), ErrorResponses))]
async fn task_session_report(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    AppJson(body): AppJson<TaskSessionBody>,
) -> Result<Json<Success>, ApiError> {
    if body.claude_session_id.is_empty() || body.claude_session_id.len() > 512 {
        return Err(ApiError::BadRequest("claudeSessionId: 1 to 512 characters".into()));
    }
    let mut session = Map::new();
    session.insert("claudeSessionId".into(), Value::String(body.claude_session_id));
    let optional = [
        ("provider", body.provider.map(Value::String)),
        ("model", body.model.map(Value::String)),
        ("providerMeta", body.provider_meta.map(Value::Object)),
        ("harnessVariant", body.harness_variant.map(Value::String)),
        ("harnessVariantMeta", body.harness_variant_meta.map(Value::Object)),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            session.insert(name.into(), value);
        }
    }
    state.service.task_session_report(caller, TaskId::parse(&id)?, Value::Object(session)).await?;
    Ok(Json(Success { success: true }))
}

/// `POST /api/tasks/:id/context`: one context-usage snapshot of the task's session.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextSnapshotBody {
    #[schema(min_length = 1, max_length = 64)]
    pub event_type: String,
    #[schema(max_length = 512)]
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_used_tokens: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_total_tokens: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compact_trigger: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_compact_tokens: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cumulative_input_tokens: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cumulative_output_tokens: Option<f64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ContextSnapshots {
    #[schema(value_type = Vec<Object>)]
    pub snapshots: Vec<Value>,
}

/// Keep a context-usage snapshot (the task's assignee; the operator); `GET
/// /api/tasks/:id` shows the latest as `contextUsage`.
#[utoipa::path(post, path = "/api/tasks/{id}/context", tag = "tasks", request_body = ContextSnapshotBody,
    params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 201, body = Success), ErrorResponses))]
async fn task_context_report(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    AppJson(body): AppJson<ContextSnapshotBody>,
) -> Result<(StatusCode, Json<Success>), ApiError> {
    if body.event_type.is_empty() || body.event_type.len() > 64 || body.session_id.len() > 512 {
        return Err(ApiError::BadRequest("eventType: 1 to 64 characters; sessionId: at most 512".into()));
    }
    let mut snapshot = serde_json::to_value(&body).map_err(|_| ApiError::Internal)?;
    if let Some(map) = snapshot.as_object_mut() {
        map.insert("createdAt".into(), Value::String(iso(state.service.now())));
    }
    state.service.task_context_report(caller, TaskId::parse(&id)?, snapshot).await?;
    Ok((StatusCode::CREATED, Json(Success { success: true })))
}

/// The task's latest context-usage snapshots, newest first.
#[utoipa::path(get, path = "/api/tasks/{id}/context", tag = "tasks",
    params(("id" = uuid::Uuid, Path, description = "Task id")),
    responses((status = 200, body = ContextSnapshots), ErrorResponses))]
async fn task_context_list(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<ContextSnapshots>, ApiError> {
    let reported = state.service.task_detail_reported(TaskId::parse(&id)?).await?;
    Ok(Json(ContextSnapshots { snapshots: reported.context }))
}

// ----- the reference's event log -----

/// One event as the reference's runner sends it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerEventBody {
    #[schema(min_length = 1, max_length = 64)]
    pub category: String,
    #[schema(min_length = 1, max_length = 128)]
    pub event: String,
    pub status: Option<String>,
    #[schema(min_length = 1, max_length = 64)]
    pub source: String,
    pub agent_id: Option<String>,
    pub task_id: Option<String>,
    pub session_id: Option<String>,
    pub parent_event_id: Option<String>,
    pub numeric_value: Option<f64>,
    pub duration_ms: Option<i64>,
    #[schema(value_type = Option<Object>)]
    pub data: Option<Map<String, Value>>,
}

impl WorkerEventBody {
    fn into_new(self) -> Result<NewWorkerEvent, ApiError> {
        let short = |name: &str, text: &str, max: usize| {
            if text.is_empty() || text.len() > max {
                Err(ApiError::BadRequest(format!("{name}: 1 to {max} characters")))
            } else {
                Ok(())
            }
        };
        short("category", &self.category, 64)?;
        short("event", &self.event, 128)?;
        short("source", &self.source, 64)?;
        for (name, text) in [
            ("status", &self.status),
            ("agentId", &self.agent_id),
            ("taskId", &self.task_id),
            ("sessionId", &self.session_id),
            ("parentEventId", &self.parent_event_id),
        ] {
            if let Some(text) = text {
                short(name, text, 512)?;
            }
        }
        if self.numeric_value.is_some_and(|value| !value.is_finite()) {
            return Err(ApiError::BadRequest("numericValue: a finite number".into()));
        }
        Ok(NewWorkerEvent {
            category: self.category,
            event: self.event,
            status: self.status.unwrap_or_else(|| "ok".into()),
            source: self.source,
            agent_id: self.agent_id,
            task_id: self.task_id,
            session_id: self.session_id,
            parent_event_id: self.parent_event_id,
            numeric_value: self.numeric_value,
            duration_ms: self.duration_ms,
            data: self.data.map(Value::Object),
        })
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct EventsBatchBody {
    pub events: Vec<WorkerEventBody>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EventsBatchResponse {
    pub success: bool,
    pub count: u64,
}

/// Append 1 to 500 events to the reference's event log (`GET /api/events?...` reads it).
/// An agent logs its own events only.
#[utoipa::path(post, path = "/api/events/batch", tag = "system", request_body = EventsBatchBody,
    responses((status = 201, body = EventsBatchResponse), ErrorResponses))]
async fn events_batch_create(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    AppJson(body): AppJson<EventsBatchBody>,
) -> Result<(StatusCode, Json<EventsBatchResponse>), ApiError> {
    if body.events.is_empty() || body.events.len() > EVENT_BATCH_MAX {
        return Err(ApiError::BadRequest(format!("events: from 1 to {EVENT_BATCH_MAX} events")));
    }
    let events = body.events.into_iter().map(WorkerEventBody::into_new).collect::<Result<Vec<_>, _>>()?;
    let count = state.service.worker_events_add(caller, events).await?;
    Ok((StatusCode::CREATED, Json(EventsBatchResponse { success: true, count })))
}

// ----- active sessions -----

/// The reference's `ActiveSession`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActiveSession {
    pub id: String,
    pub agent_id: String,
    pub task_id: Option<String>,
    pub trigger_type: String,
    pub inbox_message_id: Option<String>,
    pub task_description: Option<String>,
    pub runner_session_id: Option<String>,
    pub provider_session_id: Option<String>,
    pub runtime_instance_id: Option<String>,
    pub started_at: String,
    pub last_heartbeat_at: String,
}

impl From<RunnerRecordView> for ActiveSession {
    fn from(record: RunnerRecordView) -> Self {
        let text = |name: &str| record.body.get(name).and_then(Value::as_str).map(str::to_string);
        ActiveSession {
            id: text("id").unwrap_or_else(|| record.name.clone()),
            agent_id: record.owner_id.clone(),
            task_id: text("taskId"),
            trigger_type: text("triggerType").unwrap_or_default(),
            inbox_message_id: text("inboxMessageId"),
            task_description: text("taskDescription"),
            runner_session_id: text("runnerSessionId"),
            provider_session_id: text("providerSessionId"),
            runtime_instance_id: text("runtimeInstanceId"),
            started_at: text("startedAt").unwrap_or_else(|| iso(record.updated_at)),
            last_heartbeat_at: iso(record.updated_at),
        }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ActiveSessionsQuery {
    pub agent_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ActiveSessions {
    pub sessions: Vec<ActiveSession>,
}

/// The runner's sessions it reported running, newest first; of one agent with `agentId`.
#[utoipa::path(get, path = "/api/active-sessions", tag = "agents", params(ActiveSessionsQuery),
    responses((status = 200, body = ActiveSessions), ErrorResponses))]
async fn active_sessions_list(
    State(state): State<AppState>,
    Query(query): Query<ActiveSessionsQuery>,
) -> Result<Json<ActiveSessions>, ApiError> {
    let agent = query.agent_id.as_deref().map(AgentId::parse).transpose()?;
    let sessions = state.service.active_sessions(agent).await?;
    Ok(Json(ActiveSessions { sessions: sessions.into_iter().map(Into::into).collect() }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActiveSessionBody {
    pub agent_id: String,
    pub task_id: Option<String>,
    #[schema(min_length = 1, max_length = 64)]
    pub trigger_type: String,
    pub inbox_message_id: Option<String>,
    pub task_description: Option<String>,
    pub runner_session_id: Option<String>,
    pub runtime_instance_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ActiveSessionCreated {
    pub session: ActiveSession,
}

/// Record a session the agent's runner started (the agent itself; the operator).
#[utoipa::path(post, path = "/api/active-sessions", tag = "agents", request_body = ActiveSessionBody,
    responses((status = 201, body = ActiveSessionCreated), ErrorResponses))]
async fn active_sessions_create(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    AppJson(body): AppJson<ActiveSessionBody>,
) -> Result<(StatusCode, Json<ActiveSessionCreated>), ApiError> {
    let agent = AgentId::parse(&body.agent_id)?;
    if body.trigger_type.is_empty() || body.trigger_type.len() > 64 {
        return Err(ApiError::BadRequest("triggerType: 1 to 64 characters".into()));
    }
    let texts = [
        ("taskId", &body.task_id),
        ("inboxMessageId", &body.inbox_message_id),
        ("runnerSessionId", &body.runner_session_id),
        ("runtimeInstanceId", &body.runtime_instance_id),
    ];
    if let Some((name, _)) = texts.iter().find(|(_, text)| text.as_ref().is_some_and(|text| text.len() > 512))
    {
        return Err(ApiError::BadRequest(format!("{name}: at most 512 characters")));
    }
    let id = uuid::Uuid::now_v7().to_string();
    let key = body.task_id.clone().unwrap_or_else(|| id.clone());
    let mut session = Map::new();
    session.insert("id".into(), Value::String(id));
    session.insert("triggerType".into(), Value::String(body.trigger_type));
    session.insert("startedAt".into(), Value::String(iso(state.service.now())));
    for (name, text) in texts.into_iter().chain([("taskDescription", &body.task_description)]) {
        if let Some(text) = text {
            session.insert(name.into(), Value::String(text.clone()));
        }
    }
    let record = state.service.active_session_start(caller, agent, key, Value::Object(session)).await?;
    Ok((StatusCode::CREATED, Json(ActiveSessionCreated { session: record.into() })))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Deleted {
    pub deleted: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Updated {
    pub updated: bool,
}

/// End the caller's session for a task (the operator: anyone's).
#[utoipa::path(delete, path = "/api/active-sessions/by-task/{taskId}", tag = "agents",
    params(("taskId" = String, Path, description = "Task id")),
    responses((status = 200, body = Deleted), ErrorResponses))]
async fn active_sessions_end_by_task(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(task_id): Path<String>,
) -> Result<Json<Deleted>, ApiError> {
    Ok(Json(Deleted { deleted: state.service.active_session_end(caller, &task_id).await? }))
}

/// End a session by its id or its task's id.
#[utoipa::path(delete, path = "/api/active-sessions/{id}", tag = "agents",
    params(("id" = String, Path, description = "Session id")),
    responses((status = 200, body = Deleted), ErrorResponses))]
async fn active_sessions_end(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
) -> Result<Json<Deleted>, ApiError> {
    Ok(Json(Deleted { deleted: state.service.active_session_end(caller, &id).await? }))
}

/// The session of a task is alive. Bookkeeping only: the task's lease runs on with the
/// agent's ping (`POST /ping`), as for every runner.
#[utoipa::path(put, path = "/api/active-sessions/heartbeat/{taskId}", tag = "agents",
    params(("taskId" = String, Path, description = "Task id")),
    responses((status = 200, body = Updated), ErrorResponses))]
async fn active_sessions_heartbeat(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(task_id): Path<String>,
) -> Result<Json<Updated>, ApiError> {
    Ok(Json(Updated { updated: state.service.active_session_touch(caller, &task_id, None).await? }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderSessionBody {
    #[schema(min_length = 1, max_length = 512)]
    pub provider_session_id: String,
}

/// The provider's session id of a task's session.
#[utoipa::path(put, path = "/api/active-sessions/provider-session/{taskId}", tag = "agents",
    request_body = ProviderSessionBody,
    params(("taskId" = String, Path, description = "Task id")),
    responses((status = 200, body = Updated), ErrorResponses))]
async fn active_sessions_provider_session(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(task_id): Path<String>,
    AppJson(body): AppJson<ProviderSessionBody>,
) -> Result<Json<Updated>, ApiError> {
    if body.provider_session_id.is_empty() || body.provider_session_id.len() > 512 {
        return Err(ApiError::BadRequest("providerSessionId: 1 to 512 characters".into()));
    }
    let updated =
        state.service.active_session_touch(caller, &task_id, Some(body.provider_session_id)).await?;
    Ok(Json(Updated { updated }))
}

#[expect(dead_code, reason = "read as the reference sends it; swarm has nothing to do with some fields")]
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentBody {
    pub agent_id: String,
    /// The reference's `recover-orphaned-tasks` option; swarm's rescuer decides instead.
    pub min_age_seconds: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Cleaned {
    pub cleaned: u64,
}

/// Forget every session of the agent (its runner starting afresh).
#[utoipa::path(post, path = "/api/active-sessions/cleanup", tag = "agents", request_body = AgentBody,
    responses((status = 200, body = Cleaned), ErrorResponses))]
async fn active_sessions_cleanup(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    AppJson(body): AppJson<AgentBody>,
) -> Result<Json<Cleaned>, ApiError> {
    let agent = AgentId::parse(&body.agent_id)?;
    Ok(Json(Cleaned { cleaned: state.service.active_sessions_clear(caller, agent).await? }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Recovered {
    pub recovered: u64,
    #[schema(value_type = Vec<Object>)]
    pub tasks: Vec<Value>,
}

/// Always `{recovered: 0, tasks: []}`: in swarm a task's claim has a lease, and the
/// hub's rescuer returns the tasks whose lease ran out; a runner recovers nothing itself.
#[utoipa::path(post, path = "/api/active-sessions/recover-orphaned-tasks", tag = "agents",
    request_body = AgentBody,
    responses((status = 200, body = Recovered), ErrorResponses))]
async fn active_sessions_recover_orphaned(
    CallerHeader(_caller): CallerHeader,
    AppJson(body): AppJson<AgentBody>,
) -> Result<Json<Recovered>, ApiError> {
    AgentId::parse(&body.agent_id)?;
    Ok(Json(Recovered { recovered: 0, tasks: Vec::new() }))
}

// ----- features swarm does not have: the reference's shapes, empty -----

#[derive(Debug, Serialize, ToSchema)]
pub struct McpServers {
    #[schema(value_type = Vec<Object>)]
    pub servers: Vec<Value>,
}

/// Always `{servers: []}`: swarm keeps no MCP-server registry per agent.
#[utoipa::path(get, path = "/api/agents/{id}/mcp-servers", tag = "agents",
    params(("id" = uuid::Uuid, Path, description = "Agent id")),
    responses((status = 200, body = McpServers), ErrorResponses))]
async fn agents_mcp_servers(Path(id): Path<String>) -> Result<Json<McpServers>, ApiError> {
    AgentId::parse(&id)?;
    Ok(Json(McpServers { servers: Vec::new() }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Skills {
    #[schema(value_type = Vec<Object>)]
    pub skills: Vec<Value>,
    pub signature: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SkillsSignature {
    pub hash: String,
}

/// The signature of an empty skill set (swarm has no skills).
const NO_SKILLS: &str = "none";

/// Always `{skills: []}`: swarm has no skills registry.
#[utoipa::path(get, path = "/api/agents/{id}/skills", tag = "agents",
    params(("id" = uuid::Uuid, Path, description = "Agent id")),
    responses((status = 200, body = Skills), ErrorResponses))]
async fn agents_skills(Path(id): Path<String>) -> Result<Json<Skills>, ApiError> {
    AgentId::parse(&id)?;
    Ok(Json(Skills { skills: Vec::new(), signature: NO_SKILLS.into() }))
}

/// The signature of the (empty) skill set, so the runner never re-downloads it.
#[utoipa::path(get, path = "/api/agents/{id}/skills/signature", tag = "agents",
    params(("id" = uuid::Uuid, Path, description = "Agent id")),
    responses((status = 200, body = SkillsSignature), ErrorResponses))]
async fn agents_skills_signature(Path(id): Path<String>) -> Result<Json<SkillsSignature>, ApiError> {
    AgentId::parse(&id)?;
    Ok(Json(SkillsSignature { hash: NO_SKILLS.into() }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Configs {
    #[schema(value_type = Vec<Object>)]
    pub configs: Vec<Value>,
}

/// The query of the reference's config reads; every parameter is accepted and ignored.
#[expect(dead_code, reason = "read as the reference sends it; swarm has nothing to do with some fields")]
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ConfigQuery {
    pub agent_id: Option<String>,
    pub key: Option<String>,
    pub scope: Option<String>,
    pub include_secrets: Option<String>,
}

/// Always `{configs: []}`: swarm has no config store (its settings are flags and
/// environment variables of the hub and the runner).
#[utoipa::path(get, path = "/api/config/resolved", tag = "system", params(ConfigQuery),
    responses((status = 200, body = Configs), ErrorResponses))]
async fn config_resolved(Query(_query): Query<ConfigQuery>) -> Json<Configs> {
    Json(Configs { configs: Vec::new() })
}

/// Always `{configs: []}`, as `/api/config/resolved`.
#[utoipa::path(get, path = "/api/config", tag = "system", params(ConfigQuery),
    responses((status = 200, body = Configs), ErrorResponses))]
async fn config_list(Query(_query): Query<ConfigQuery>) -> Json<Configs> {
    Json(Configs { configs: Vec::new() })
}

#[expect(dead_code, reason = "read as the reference sends it; swarm has nothing to do with some fields")]
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct KeysQuery {
    pub key_type: Option<String>,
    /// How many keys the runner holds (at most 1000).
    #[param(minimum = 0, maximum = 1000)]
    pub total_keys: Option<u32>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AvailableKeys {
    pub available_indices: Vec<u32>,
}

/// Every index from 0 to `totalKeys - 1`: swarm keeps no key pool and no rate-limit
/// marks, so it knows of no key that is not available; the runner picks among its own.
#[utoipa::path(get, path = "/api/keys/available", tag = "system", params(KeysQuery),
    responses((status = 200, body = AvailableKeys), ErrorResponses))]
async fn keys_available(Query(query): Query<KeysQuery>) -> Result<Json<AvailableKeys>, ApiError> {
    let total = query.total_keys.unwrap_or(0);
    if total > 1000 {
        return Err(ApiError::BadRequest("totalKeys: at most 1000".into()));
    }
    Ok(Json(AvailableKeys { available_indices: (0..total).collect() }))
}

/// Whatever the runner reports about its keys; swarm keeps none of it.
#[expect(dead_code, reason = "read as the reference sends it; swarm has nothing to do with some fields")]
#[derive(Debug, Deserialize, ToSchema)]
pub struct KeyReportBody {
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub report: BTreeMap<String, Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NotKept {
    pub success: bool,
    pub message: String,
}

fn not_kept(what: &str) -> Json<NotKept> {
    Json(NotKept { success: true, message: format!("swarm keeps no key pool: {what} not kept") })
}

/// Accepted and not kept: swarm keeps no key pool.
#[utoipa::path(post, path = "/api/keys/report-usage", tag = "system", request_body = KeyReportBody,
    responses((status = 200, body = NotKept), ErrorResponses))]
async fn keys_report_usage(AppJson(_body): AppJson<KeyReportBody>) -> Json<NotKept> {
    not_kept("usage")
}

/// Accepted and not kept: swarm keeps no rate-limit marks.
#[utoipa::path(post, path = "/api/keys/clear-rate-limit", tag = "system", request_body = KeyReportBody,
    responses((status = 200, body = NotKept), ErrorResponses))]
async fn keys_clear_rate_limit(AppJson(_body): AppJson<KeyReportBody>) -> Json<NotKept> {
    not_kept("rate limit")
}

/// Accepted and not kept: swarm keeps no rate-limit marks.
#[utoipa::path(post, path = "/api/keys/report-rate-limit", tag = "system", request_body = KeyReportBody,
    responses((status = 200, body = NotKept), ErrorResponses))]
async fn keys_report_rate_limit(AppJson(_body): AppJson<KeyReportBody>) -> Json<NotKept> {
    not_kept("rate limit")
}

/// Accepted and not kept: swarm keeps no rate-limit windows.
#[utoipa::path(post, path = "/api/keys/report-rate-limit-windows", tag = "system", request_body = KeyReportBody,
    responses((status = 200, body = NotKept), ErrorResponses))]
async fn keys_report_rate_limit_windows(AppJson(_body): AppJson<KeyReportBody>) -> Json<NotKept> {
    not_kept("rate-limit windows")
}

#[expect(dead_code, reason = "read as the reference sends it; swarm has nothing to do with some fields")]
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RenderBody {
    pub event_type: String,
    #[schema(value_type = Option<Object>)]
    pub variables: Option<Map<String, Value>>,
    pub agent_id: Option<String>,
    pub repo_id: Option<String>,
}

/// Always 404: swarm stores no prompt templates, so the runner renders its own defaults.
#[utoipa::path(post, path = "/api/prompt-templates/render", tag = "system", request_body = RenderBody,
    responses(ErrorResponses))]
async fn prompt_templates_render(AppJson(body): AppJson<RenderBody>) -> ApiError {
    let name: String = body.event_type.chars().take(64).collect();
    ApiError::NotFound(format!("no prompt template for {name:?}: swarm stores none; use your defaults"))
}

#[expect(dead_code, reason = "read as the reference sends it; swarm has nothing to do with some fields")]
#[derive(Debug, Deserialize, ToSchema)]
pub struct MemorySearchBody {
    pub query: String,
    /// 1 to 1000.
    #[schema(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
    pub intent: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryResults {
    #[schema(value_type = Vec<Object>)]
    pub results: Vec<Value>,
}

/// Always `{results: []}`: swarm has no memory store.
#[utoipa::path(post, path = "/api/memory/search", tag = "system", request_body = MemorySearchBody,
    responses((status = 200, body = MemoryResults), ErrorResponses))]
async fn memory_search(AppJson(body): AppJson<MemorySearchBody>) -> Result<Json<MemoryResults>, ApiError> {
    if body.limit.is_some_and(|limit| !(1..=1000).contains(&limit)) {
        return Err(ApiError::BadRequest("limit must be between 1 and 1000".into()));
    }
    Ok(Json(MemoryResults { results: Vec::new() }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentFs {
    pub enabled: bool,
    pub created: bool,
}

/// Always `{enabled: false}`: swarm has no agent file system.
#[utoipa::path(post, path = "/api/fs/agent-credentials", tag = "system",
    responses((status = 200, body = AgentFs), ErrorResponses))]
async fn fs_agent_credentials() -> Json<AgentFs> {
    Json(AgentFs { enabled: false, created: false })
}
