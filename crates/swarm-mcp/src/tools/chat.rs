//! Channels (agent chat): `list-channels`, `create-channel`, `post-message`,
//! `read-messages`. Each is one service call, the same its REST twin makes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use swarm_domain::{
    chat::ChannelType,
    id::{AgentId, ChannelId, ChatMessageId},
    time::Timestamp,
};
use swarm_service::{CreateChannel, PostMessage, ReadMessages};
use uuid::Uuid;

use crate::{
    context::ToolCall,
    registry::{Audience, ToolSpec},
    reply::{Answer, Outcome, Reply},
};

pub fn group() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "list-channels",
            "The chat channels you can see, with your unread mention counts.",
            Audience::Agents,
            list_channels,
        )
        .read_only(),
        ToolSpec::new(
            "create-channel",
            "Create a chat channel: public (default), or dm with participants (agent ids; you are added).",
            Audience::Agents,
            create_channel,
        ),
        ToolSpec::new(
            "post-message",
            "Post in a chat channel. @name in the text, or mentions (agent ids), notify those agents; \
             \"/task \" at the start creates a task per mentioned agent.",
            Audience::Agents,
            post_message,
        ),
        ToolSpec::new(
            "read-messages",
            "Read a chat channel, oldest first; this marks it read (and its mentions of you).",
            Audience::Agents,
            read_messages,
        ),
    ]
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListChannelsArguments {}

async fn list_channels(call: ToolCall, _args: ListChannelsArguments) -> Outcome<ChannelList> {
    let channels = call.service.channel_list(call.caller()).await?;
    let unread = call.service.chat_unread_mentions(call.caller()).await?;
    let unread_mentions = unread.into_iter().map(|(channel, count)| (channel.to_string(), count)).collect();
    Ok(Answer::new(format!("{} channel(s)", channels.len()), ChannelList { channels, unread_mentions }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateChannelArguments {
    /// 1 to 64 of a-z, 0-9, '-' and '_'.
    name: String,
    description: Option<String>,
    /// `public` (default) or `dm`.
    #[serde(rename = "type")]
    #[schemars(regex(pattern = "^(public|dm)$"))]
    channel_type: Option<String>,
    /// For a dm: the other agents.
    #[serde(default)]
    participants: Vec<Uuid>,
}

async fn create_channel(call: ToolCall, args: CreateChannelArguments) -> Outcome<OneChannel> {
    let channel_type = args
        .channel_type
        .as_deref()
        .map(ChannelType::parse)
        .transpose()
        .map_err(|invalid| Reply::refused(invalid.0))?;
    let request = CreateChannel {
        name: args.name,
        description: args.description,
        channel_type,
        participants: args.participants.into_iter().map(AgentId::from_uuid).collect(),
    };
    let channel = call.service.channel_create(call.caller(), request).await?;
    Ok(Answer::new(format!("Channel #{} created.", channel.name), OneChannel { channel }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PostMessageArguments {
    /// The channel; general when omitted.
    channel_id: Option<Uuid>,
    /// 1 to 20000 characters.
    content: String,
    /// The message this one answers.
    reply_to_id: Option<Uuid>,
    /// Agents to mention by id, on top of the @names in the text.
    #[serde(default)]
    mentions: Vec<Uuid>,
}

async fn post_message(call: ToolCall, args: PostMessageArguments) -> Outcome<PostedMessage> {
    let channel = args.channel_id.map(ChannelId::from_uuid).unwrap_or_else(ChannelId::general);
    let request = PostMessage {
        content: args.content,
        reply_to_id: args.reply_to_id.map(ChatMessageId::from_uuid),
        mentions: args.mentions.into_iter().map(AgentId::from_uuid).collect(),
    };
    let message = call.service.chat_post(call.caller(), channel, request).await?;
    let summary = match message.task_ids.len() {
        0 => format!("Message posted, mentioning {} agent(s).", message.mentions.len()),
        tasks => format!("Message posted; {tasks} task(s) created."),
    };
    Ok(Answer::new(summary, PostedMessage { chat_message: message }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReadMessagesArguments {
    /// The channel by name or id (as the reference names it); general when omitted.
    channel: Option<String>,
    /// The channel by id.
    channel_id: Option<Uuid>,
    /// A message: read it and its replies instead.
    thread_id: Option<Uuid>,
    /// 1 to 100 messages (default 50).
    #[schemars(range(min = 1, max = 100))]
    limit: Option<i64>,
    /// Only messages after this time (e.g. 2026-01-20T10:00:00.000Z).
    #[schemars(with = "Option<String>")]
    since: Option<Timestamp>,
    /// Only messages before this time.
    #[schemars(with = "Option<String>")]
    before: Option<Timestamp>,
    /// Only the messages that mention you.
    #[serde(default)]
    mentions_only: bool,
    /// Only the messages since you last read the channel.
    #[serde(default)]
    unread_only: bool,
    /// Mark the channel read (default true): clears your unread mentions there.
    mark_as_read: Option<bool>,
}

async fn read_messages(call: ToolCall, args: ReadMessagesArguments) -> Outcome<MessageList> {
    let channel = match (args.channel_id, args.channel.as_deref()) {
        (Some(id), _) => ChannelId::from_uuid(id),
        (None, Some(name)) => call.service.channel_find(call.caller(), name).await?.id,
        (None, None) => ChannelId::general(),
    };
    let messages = match args.thread_id {
        Some(root) => {
            call.service.chat_thread(call.caller(), channel, ChatMessageId::from_uuid(root)).await?
        }
        None => {
            let request = ReadMessages {
                limit: args.limit,
                since: args.since,
                before: args.before,
                mentions_only: args.mentions_only,
                unread_only: args.unread_only,
                mark_as_read: args.mark_as_read.unwrap_or(true),
            };
            call.service.chat_read(call.caller(), channel, request).await?
        }
    };
    Ok(Answer::new(format!("{} message(s)", messages.len()), MessageList { messages }))
}

// The result fields of the chat tools, for their output schemas.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct ChannelList {
    channels: Vec<swarm_domain::chat::Channel>,
    /// Unread mentions of you, by channel id.
    unread_mentions: std::collections::BTreeMap<String, i64>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct OneChannel {
    channel: swarm_domain::chat::Channel,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct PostedMessage {
    chat_message: swarm_domain::chat::ChatMessage,
}

#[derive(Serialize, utoipa::ToSchema)]
struct MessageList {
    messages: Vec<swarm_domain::chat::ChatMessage>,
}
