//! The lead's inbox and Slack: `slack-reply`, `inbox-delegate`, `get-inbox-message`,
//! `slack-read`, `slack-post`, `slack-list-channels`. Each is one service call.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use swarm_domain::id::{AgentId, InboxMessageId, TaskId};
use swarm_service::{Delegate, ReplyTarget};
use uuid::Uuid;

use crate::{
    context::ToolCall,
    registry::{Audience, ToolSpec},
    reply::{Answer, Outcome, Reply},
};

const READ_LIMIT_DEFAULT: u32 = 20;
const READ_LIMIT_MAX: u32 = 100;

pub fn group() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "slack-reply",
            "Reply in a Slack thread under your name: give inboxMessageId (a message in your inbox; it \
             becomes responded) or taskId (a task with a Slack thread that you work on or created).",
            Audience::Agents,
            slack_reply,
        ),
        ToolSpec::new(
            "inbox-delegate",
            "Lead only: hand an inbox message to a worker as a task that keeps the Slack thread (the \
             worker's result is posted there). taskDescription replaces the message text; offerMode \
             offers the task instead of assigning it. The message becomes delegated.",
            Audience::LeadOnly,
            inbox_delegate,
        ),
        ToolSpec::new(
            "get-inbox-message",
            "One of your inbox messages: its text with the thread history, Slack context and status.",
            Audience::Agents,
            get_inbox_message,
        )
        .read_only(),
        ToolSpec::new(
            "slack-read",
            "Read a Slack thread (channelId and threadTs) or a channel's latest messages (channelId). \
             A worker reads only the thread of one of its tasks.",
            Audience::Agents,
            slack_read,
        )
        .read_only(),
        ToolSpec::new(
            "slack-post",
            "Lead only: post a new message in a Slack channel (or in a thread with threadTs) under \
             your name.",
            Audience::LeadOnly,
            slack_post,
        ),
        ToolSpec::new(
            "slack-list-channels",
            "Lead only: the Slack channels the bot can see.",
            Audience::LeadOnly,
            slack_list_channels,
        )
        .read_only(),
    ]
}

// The result fields of the Slack tools, for their output schemas: the REST API's types.
#[derive(Serialize, utoipa::ToSchema)]
struct PostedTs {
    /// The Slack timestamp of the message posted.
    ts: String,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct DelegatedOutput {
    task: swarm_domain::task::Task,
    inbox_message: swarm_domain::inbox::InboxMessage,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct InboxMessageOutput {
    inbox_message: swarm_domain::inbox::InboxMessage,
}

#[derive(Serialize, utoipa::ToSchema)]
struct SlackMessages {
    messages: Vec<swarm_service::slack_api::SlackMessageView>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct SlackChannels {
    channels: Vec<swarm_service::slack_api::SlackChannelView>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SlackReplyArguments {
    /// The inbox message whose thread to answer.
    inbox_message_id: Option<Uuid>,
    /// Or the task whose thread to post in.
    task_id: Option<Uuid>,
    /// 1 to 4000 characters.
    message: String,
}

async fn slack_reply(call: ToolCall, args: SlackReplyArguments) -> Outcome<PostedTs> {
    let target = match (args.inbox_message_id, args.task_id) {
        (Some(id), None) => ReplyTarget::InboxMessage(InboxMessageId::from_uuid(id)),
        (None, Some(id)) => ReplyTarget::Task(TaskId::from_uuid(id)),
        _ => return Err(Reply::refused("give inboxMessageId or taskId, exactly one")),
    };
    let ts = call.service.slack_reply(call.caller(), target, &args.message).await?;
    Ok(Answer::new("Reply sent successfully.", PostedTs { ts }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct InboxDelegateArguments {
    inbox_message_id: Uuid,
    /// The worker to hand it to.
    agent_id: Uuid,
    /// The task text; the message's text when omitted.
    task_description: Option<String>,
    /// Offer the task (the worker accepts or rejects) instead of assigning it.
    #[serde(default)]
    offer_mode: bool,
}

async fn inbox_delegate(call: ToolCall, args: InboxDelegateArguments) -> Outcome<DelegatedOutput> {
    let request = Delegate {
        inbox_message_id: InboxMessageId::from_uuid(args.inbox_message_id),
        agent_id: AgentId::from_uuid(args.agent_id),
        task_description: args.task_description,
        offer: args.offer_mode,
    };
    let delegated = call.service.inbox_delegate(call.caller(), request).await?;
    let verb = if args.offer_mode { "offered to" } else { "assigned to" };
    let message = format!("Task created and {verb} {}.", delegated.target.name);
    Ok(Answer::new(message, DelegatedOutput { task: delegated.task, inbox_message: delegated.message }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GetInboxMessageArguments {
    inbox_message_id: Uuid,
}

async fn get_inbox_message(call: ToolCall, args: GetInboxMessageArguments) -> Outcome<InboxMessageOutput> {
    let message =
        call.service.inbox_get(call.caller(), InboxMessageId::from_uuid(args.inbox_message_id)).await?;
    let text = format!("inbox message {} ({})", message.id, message.status);
    Ok(Answer::new(text, InboxMessageOutput { inbox_message: message }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SlackReadArguments {
    channel_id: String,
    /// A thread's first message `ts`: read that thread.
    thread_ts: Option<String>,
    /// 1 to 100 messages (default 20).
    #[schemars(range(min = 1, max = 100))]
    limit: Option<u32>,
}

async fn slack_read(call: ToolCall, args: SlackReadArguments) -> Outcome<SlackMessages> {
    let limit = args.limit.unwrap_or(READ_LIMIT_DEFAULT);
    if !(1..=READ_LIMIT_MAX).contains(&limit) {
        return Err(Reply::refused(format!("limit must be between 1 and {READ_LIMIT_MAX}")));
    }
    let messages =
        call.service.slack_read(call.caller(), &args.channel_id, args.thread_ts.as_deref(), limit).await?;
    Ok(Answer::new(format!("{} message(s)", messages.len()), SlackMessages { messages }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SlackPostArguments {
    channel_id: String,
    thread_ts: Option<String>,
    /// 1 to 4000 characters.
    message: String,
}

async fn slack_post(call: ToolCall, args: SlackPostArguments) -> Outcome<PostedTs> {
    let ts = call.service.slack_post(call.caller(), &args.channel_id, args.thread_ts, &args.message).await?;
    Ok(Answer::new("Message posted.", PostedTs { ts }))
}

async fn slack_list_channels(call: ToolCall, _args: super::NoArguments) -> Outcome<SlackChannels> {
    let channels = call.service.slack_list_channels(call.caller()).await?;
    Ok(Answer::new(format!("{} channel(s)", channels.len()), SlackChannels { channels }))
}
