//! Channels (agent chat): listing channels, reading and posting messages, threads.
//! People post without `X-Agent-ID`; an agent reading a channel marks it read.

use axum::{
    extract::{Path, Query, State},
    http::StatusCode,
};
use serde::{Deserialize, Serialize};
use swarm_domain::{
    chat::{Channel, ChatMessage},
    id::{AgentId, ChannelId, ChatMessageId},
    time::Timestamp,
};
use swarm_service::{Caller, PostMessage, ReadMessages};
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
        .routes(routes!(channels_list))
        .routes(routes!(channels_messages, channels_post))
        .routes(routes!(channels_thread))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChannelListResponse {
    channels: Vec<Channel>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MessagesResponse {
    messages: Vec<ChatMessage>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MessagesQuery {
    /// 1 to 100, default 50.
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    /// Only messages after this time (the oldest `limit` of them).
    #[param(value_type = Option<String>, format = DateTime)]
    since: Option<String>,
    /// Only messages before this time (the newest `limit` of them).
    #[param(value_type = Option<String>, format = DateTime)]
    before: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PostMessageBody {
    /// 1 to 20,000 characters, not only spaces. (The bound is not in the schema: with the
    /// pattern, it makes schema-driven generators too slow to be useful.)
    #[schema(min_length = 1, pattern = r"^[^\u0000]*[^\s\u0000][^\u0000]*$")]
    content: String,
    /// The author, when `X-Agent-ID` is not sent (both: they must agree). Neither: a person.
    agent_id: Option<AgentId>,
    /// The message this one answers, in the same channel.
    reply_to_id: Option<ChatMessageId>,
    /// Agents mentioned by id, on top of the `@name`s in the text.
    #[serde(default)]
    #[schema(max_items = 50)]
    mentions: Vec<AgentId>,
}

fn timestamp(field: &str, text: Option<String>) -> Result<Option<Timestamp>, ApiError> {
    match text {
        None => Ok(None),
        Some(text) => {
            serde_json::from_value(serde_json::Value::String(text.clone())).map(Some).map_err(|_| {
                ApiError::BadRequest(format!(
                    "{field} must be a timestamp like 2026-01-20T10:00:00.000Z, got {text:?}"
                ))
            })
        }
    }
}

/// The channels the caller may see (direct ones only to their participants), by name.
#[utoipa::path(get, path = "/api/channels", tag = "channels",
    responses((status = 200, body = ChannelListResponse), ErrorResponses))]
async fn channels_list(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
) -> Result<Json<ChannelListResponse>, ApiError> {
    Ok(Json(ChannelListResponse { channels: state.service.channel_list(caller).await? }))
}

/// A channel's messages, oldest first: the newest `limit` (before `before`), or with
/// `since` the oldest `limit` after it. An agent's read marks the channel read up to
/// the newest message returned, clearing its unread mentions there.
#[utoipa::path(get, path = "/api/channels/{id}/messages", tag = "channels",
    params(("id" = uuid::Uuid, Path, description = "Channel id"), MessagesQuery),
    responses((status = 200, body = MessagesResponse), ErrorResponses))]
async fn channels_messages(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    Query(query): Query<MessagesQuery>,
) -> Result<Json<MessagesResponse>, ApiError> {
    let id = ChannelId::parse(&id)?;
    let request = ReadMessages {
        limit: query.limit,
        since: timestamp("since", query.since)?,
        before: timestamp("before", query.before)?,
        ..ReadMessages::default()
    };
    Ok(Json(MessagesResponse { messages: state.service.chat_read(caller, id, request).await? }))
}

/// A message and its replies, oldest first.
#[utoipa::path(get, path = "/api/channels/{id}/messages/{msgId}/thread", tag = "channels",
    params(("id" = uuid::Uuid, Path, description = "Channel id"),
        ("msgId" = uuid::Uuid, Path, description = "The thread's first message")),
    responses((status = 200, body = MessagesResponse), ErrorResponses))]
async fn channels_thread(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path((id, message)): Path<(String, String)>,
) -> Result<Json<MessagesResponse>, ApiError> {
    let id = ChannelId::parse(&id)?;
    let message = ChatMessageId::parse(&message)?;
    Ok(Json(MessagesResponse { messages: state.service.chat_thread(caller, id, message).await? }))
}

/// Post a message. `@name`s in the text and `mentions` wake the agents named; a message
/// starting with `/task ` creates one pending task per mentioned agent.
#[utoipa::path(post, path = "/api/channels/{id}/messages", tag = "channels", request_body = PostMessageBody,
    params(("id" = uuid::Uuid, Path, description = "Channel id")),
    responses((status = 201, body = ChatMessage), ErrorResponses))]
async fn channels_post(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
    AppJson(body): AppJson<PostMessageBody>,
) -> Result<(StatusCode, Json<ChatMessage>), ApiError> {
    let id = ChannelId::parse(&id)?;
    let caller = match (caller, body.agent_id) {
        (caller, None) => caller,
        (Caller::Operator, Some(agent)) => Caller::Agent(agent),
        (Caller::Agent(header), Some(agent)) if header == agent => caller,
        (Caller::Agent(_), Some(_)) => {
            return Err(ApiError::BadRequest("agentId differs from the X-Agent-ID header".into()));
        }
    };
    let request =
        PostMessage { content: body.content, reply_to_id: body.reply_to_id, mentions: body.mentions };
    let message = state.service.chat_post(caller, id, request).await?;
    Ok((StatusCode::CREATED, Json(message)))
}
