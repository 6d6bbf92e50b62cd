//! Agent mail: send, reply, list, read (deliver) and the unread count. The MCP tools
//! `send-mail`, `reply-mail`, `list-mail`, `read-mail` and `unread-mail-count` call the
//! same service functions.

use axum::{
    extract::{Path, Query, State},
    http::StatusCode,
};
use serde::{Deserialize, Serialize};
use swarm_domain::{
    id::{AgentId, MailId},
    mail::{Mail, MailBox, MailPriority, MailType},
};
use swarm_service::{DeliverMail, ListMail, ReplyMail, SendMail};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::Json;
use crate::{
    AppState,
    error::{ApiError, ErrorResponses},
    extract::{AppJson, CallerHeader},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(mail_list, mail_send))
        .routes(routes!(mail_unread_count))
        .routes(routes!(mail_read))
        .routes(routes!(mail_get))
        .routes(routes!(mail_reply))
        .routes(routes!(mail_stopped))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StoppedResponse {
    /// The alert sent to the agent's coordinator, or null: nothing pending, nobody to
    /// tell, or told about exactly this mail already.
    alert: Option<Mail>,
}

/// The calling agent stopped (its `Stop`/`SubagentStop` hook says so): when it waits for
/// a response, or left mail it must see unread, the agent that delegated its work (the
/// creator of its latest task, else the lead) gets urgent mail saying so, once per set
/// of pending mail. Ours (the waiting pattern of the mailbox seed).
#[utoipa::path(post, path = "/api/mail/stopped", tag = "mail",
    responses((status = 200, body = StoppedResponse), ErrorResponses))]
async fn mail_stopped(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
) -> Result<Json<StoppedResponse>, ApiError> {
    Ok(Json(StoppedResponse { alert: state.service.agent_stopped(caller).await? }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendMailBody {
    /// An agent id, an agent name, or `coordinator` (the lead). Not needed with `inReplyTo`.
    to: Option<String>,
    /// `question` when not given (`response` for a reply).
    #[serde(rename = "type")]
    mail_type: Option<MailType>,
    #[schema(min_length = 1, pattern = r"^[^\u0000\n]*[^\s\u0000][^\u0000\n]*$")]
    subject: Option<String>,
    #[schema(min_length = 1, pattern = r"^[^\u0000]*[^\s\u0000][^\u0000]*$")]
    body: String,
    /// `normal` when not given (for a reply: the replied-to mail's priority).
    priority: Option<MailPriority>,
    /// The sender waits for a reply (its waiting state).
    #[serde(default)]
    awaiting_response: bool,
    /// Answer this mail (sent to you): the answer goes to its sender.
    in_reply_to: Option<MailId>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplyMailBody {
    #[schema(min_length = 1, pattern = r"^[^\u0000]*[^\s\u0000][^\u0000]*$")]
    body: String,
    /// `Re: <subject>` when not given.
    #[schema(min_length = 1, pattern = r"^[^\u0000\n]*[^\s\u0000][^\u0000\n]*$")]
    subject: Option<String>,
    #[serde(rename = "type")]
    mail_type: Option<MailType>,
    priority: Option<MailPriority>,
    #[serde(default)]
    awaiting_response: bool,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadMailBody {
    /// These pieces only; otherwise the oldest undelivered mail, urgent first.
    #[serde(default)]
    #[schema(max_items = 200)]
    mail_ids: Vec<MailId>,
    /// Deliver `low` mail too.
    #[serde(default)]
    include_low: bool,
    /// 1 to 200, default 20.
    #[schema(minimum = 1, maximum = 200)]
    limit: Option<i64>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct ListMailQuery {
    /// Whose mail (the operator only; an agent lists its own).
    #[param(value_type = Option<uuid::Uuid>)]
    agent_id: Option<String>,
    /// `inbox` (default), `outbox` or `all`.
    #[serde(rename = "box")]
    #[param(rename = "box", value_type = Option<String>, pattern = "^(inbox|outbox|all)$")]
    mailbox: Option<String>,
    /// Only mail not yet delivered.
    unread_only: Option<bool>,
    #[param(value_type = Option<MailPriority>)]
    priority: Option<String>,
    /// Only mail whose sender waits for a reply, or urgent mail not yet delivered.
    pending: Option<bool>,
    /// `newest` (default) or `oldest` first.
    #[param(value_type = Option<String>, pattern = "^(newest|oldest)$")]
    order: Option<String>,
    /// Continue after this mail (the previous page's `nextCursor`).
    #[param(value_type = Option<uuid::Uuid>)]
    after: Option<String>,
    /// 1 to 200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<i64>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct CountQuery {
    /// Whose counts (the operator only; an agent reads its own).
    #[param(value_type = Option<uuid::Uuid>)]
    agent_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MailListResponse {
    mail: Vec<Mail>,
    /// Present when there may be more: pass it as `after`.
    next_cursor: Option<MailId>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MailDeliveredResponse {
    mail: Vec<Mail>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MailCountResponse {
    agent_id: AgentId,
    /// Undelivered mail to the agent, and by priority.
    unread: i64,
    urgent: i64,
    normal: i64,
    low: i64,
    /// Mail the agent sent that still waits for a reply.
    awaiting_response: i64,
    /// The agent's waiting state: `awaitingResponse > 0`.
    waiting_for_response: bool,
}

fn optional_id<T>(
    field: &str,
    text: Option<String>,
    parse: fn(&str) -> Result<T, swarm_domain::Invalid>,
) -> Result<Option<T>, ApiError> {
    text.map(|text| parse(&text).map_err(|invalid| ApiError::BadRequest(format!("{field}: {invalid}"))))
        .transpose()
}

/// Send mail to an agent (id or name) or to the coordinator (the lead); with
/// `inReplyTo`, answer mail sent to you. Urgent mail wakes the recipient's poll.
#[utoipa::path(post, path = "/api/mail", tag = "mail", request_body = SendMailBody,
    responses((status = 201, body = Mail), ErrorResponses))]
async fn mail_send(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    AppJson(body): AppJson<SendMailBody>,
) -> Result<(StatusCode, Json<Mail>), ApiError> {
    let mail = match body.in_reply_to {
        Some(original) => {
            let reply = ReplyMail {
                body: body.body,
                subject: body.subject,
                mail_type: body.mail_type,
                priority: body.priority,
                awaiting_response: body.awaiting_response,
            };
            state.service.mail_reply(caller, original, reply).await?
        }
        None => {
            let (Some(to), Some(subject)) = (body.to, body.subject) else {
                return Err(ApiError::BadRequest(
                    "to and subject are required (or inReplyTo to reply)".into(),
                ));
            };
            let request = SendMail {
                to,
                mail_type: body.mail_type,
                subject,
                body: body.body,
                priority: body.priority,
                awaiting_response: body.awaiting_response,
            };
            state.service.mail_send(caller, request).await?
        }
    };
    Ok((StatusCode::CREATED, Json(mail)))
}

/// Answer mail sent to you: the answer goes to its sender, and ends its waiting.
#[utoipa::path(post, path = "/api/mail/{id}/reply", tag = "mail", request_body = ReplyMailBody,
    params(("id" = uuid::Uuid, Path, description = "The mail answered")),
    responses((status = 201, body = Mail), ErrorResponses))]
async fn mail_reply(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    AppJson(body): AppJson<ReplyMailBody>,
) -> Result<(StatusCode, Json<Mail>), ApiError> {
    let id = MailId::parse(&id)?;
    let reply = ReplyMail {
        body: body.body,
        subject: body.subject,
        mail_type: body.mail_type,
        priority: body.priority,
        awaiting_response: body.awaiting_response,
    };
    let mail = state.service.mail_reply(caller, id, reply).await?;
    Ok((StatusCode::CREATED, Json(mail)))
}

/// A page of mail, newest first unless `order=oldest`. Listing does not deliver.
#[utoipa::path(get, path = "/api/mail", tag = "mail", params(ListMailQuery),
    responses((status = 200, body = MailListResponse), ErrorResponses))]
async fn mail_list(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Query(query): Query<ListMailQuery>,
) -> Result<Json<MailListResponse>, ApiError> {
    let oldest_first = match query.order.as_deref() {
        None | Some("newest") => false,
        Some("oldest") => true,
        Some(other) => {
            return Err(ApiError::BadRequest(format!("order must be newest or oldest, got {other:?}")));
        }
    };
    let request = ListMail {
        agent: optional_id("agentId", query.agent_id, AgentId::parse)?,
        mailbox: query.mailbox.as_deref().map(MailBox::parse).transpose()?.unwrap_or_default(),
        unread_only: query.unread_only.unwrap_or(false),
        priorities: query.priority.as_deref().map(MailPriority::parse).transpose()?.into_iter().collect(),
        pending_only: query.pending.unwrap_or(false),
        oldest_first,
        after: optional_id("after", query.after, MailId::parse)?,
        limit: query.limit,
    };
    let limit = request.limit.unwrap_or(50);
    let mail = state.service.mail_list(caller, request).await?;
    let next_cursor = match i64::try_from(mail.len()) {
        Ok(count) if count == limit => mail.last().map(|mail| mail.id),
        _ => None,
    };
    Ok(Json(MailListResponse { mail, next_cursor }))
}

/// One piece of mail (its sender's, its recipient's, or the operator's view). Reading
/// it here does not deliver it: `POST /api/mail/read` does.
#[utoipa::path(get, path = "/api/mail/{id}", tag = "mail",
    params(("id" = uuid::Uuid, Path, description = "Mail id")),
    responses((status = 200, body = Mail), ErrorResponses))]
async fn mail_get(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
) -> Result<Json<Mail>, ApiError> {
    let id = MailId::parse(&id)?;
    Ok(Json(state.service.mail_get(caller, id).await?))
}

/// Read your undelivered mail, which delivers it: urgent first, then oldest; `low` only
/// with `includeLow`. What the `UserPromptSubmit` hook injects. Each piece is delivered
/// once.
#[utoipa::path(post, path = "/api/mail/read", tag = "mail", request_body = ReadMailBody,
    responses((status = 200, body = MailDeliveredResponse), ErrorResponses))]
async fn mail_read(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    AppJson(body): AppJson<ReadMailBody>,
) -> Result<Json<MailDeliveredResponse>, ApiError> {
    let request = DeliverMail { ids: body.mail_ids, include_low: body.include_low, limit: body.limit };
    Ok(Json(MailDeliveredResponse { mail: state.service.mail_deliver(caller, request).await? }))
}

/// Unread mail by priority and the waiting state: one indexed lookup each.
#[utoipa::path(get, path = "/api/mail/unread-count", tag = "mail", params(CountQuery),
    responses((status = 200, body = MailCountResponse), ErrorResponses))]
async fn mail_unread_count(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Query(query): Query<CountQuery>,
) -> Result<Json<MailCountResponse>, ApiError> {
    let asked = optional_id("agentId", query.agent_id, AgentId::parse)?;
    let agent_id = match (caller.agent_id(), asked) {
        (Some(me), _) => me,
        (None, Some(asked)) => asked,
        (None, None) => {
            return Err(ApiError::BadRequest(
                "whose mail? send X-Agent-ID, or agentId as the operator".into(),
            ));
        }
    };
    let counts = state.service.mail_counts(caller, asked).await?;
    Ok(Json(MailCountResponse {
        agent_id,
        unread: counts.unread,
        urgent: counts.urgent,
        normal: counts.normal,
        low: counts.low,
        awaiting_response: counts.awaiting_response,
        waiting_for_response: counts.waiting_for_response(),
    }))
}
