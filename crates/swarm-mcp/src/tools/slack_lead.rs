//! The lead's Slack tools beyond replying (issue 42), named and shaped as the reference's:
//! `slack-start-thread`, `slack-update`, `slack-delete` (the bot's own messages only: Slack
//! refuses anyone else's), and `slack-create-channel`, `slack-invite-to-channel`,
//! `slack-archive-channel`, refused unless the hub runs with `--slack-channel-management`.
//! Each is one service call.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    context::ToolCall,
    registry::{Audience, ToolSpec},
    reply::{Answer, NoFields, Outcome},
};

pub fn group() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "slack-start-thread",
            "Lead only: post a new top-level message in a Slack channel and get its ts; pass that ts as \
             threadTs to slack-post to reply in the thread. blocks: optional Block Kit blocks.",
            Audience::LeadOnly,
            slack_start_thread,
        ),
        ToolSpec::new(
            "slack-update",
            "Lead only: edit a Slack message the bot posted (messageTs: dotted, p-form or permalink). \
             Messages of people or other apps cannot be edited.",
            Audience::LeadOnly,
            slack_update,
        ),
        ToolSpec::new(
            "slack-delete",
            "Lead only: delete a Slack message the bot posted (messageTs: dotted, p-form or permalink). \
             Messages of people or other apps cannot be deleted.",
            Audience::LeadOnly,
            slack_delete,
        ),
        ToolSpec::new(
            "slack-create-channel",
            "Lead only, when the hub allows channel management: create a Slack channel (the name is \
             normalized to Slack's rules).",
            Audience::LeadOnly,
            slack_create_channel,
        ),
        ToolSpec::new(
            "slack-invite-to-channel",
            "Lead only, when the hub allows channel management: invite users to a Slack channel.",
            Audience::LeadOnly,
            slack_invite_to_channel,
        ),
        ToolSpec::new(
            "slack-archive-channel",
            "Lead only, when the hub allows channel management: archive a Slack channel.",
            Audience::LeadOnly,
            slack_archive_channel,
        ),
    ]
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct StartedThread {
    channel_id: String,
    /// The first message's ts: the thread's `threadTs`.
    ts: String,
    message_ts: String,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct UpdatedMessage {
    message_ts: String,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct CreatedChannel {
    channel_id: String,
    name: String,
    is_private: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StartThreadArguments {
    channel_id: String,
    /// 1 to 4000 characters (the notification text, and the message when no blocks are given).
    message: String,
    /// Block Kit blocks (at most 50).
    blocks: Option<Vec<serde_json::Map<String, serde_json::Value>>>,
}

async fn slack_start_thread(call: ToolCall, args: StartThreadArguments) -> Outcome<StartedThread> {
    let blocks = args.blocks.map(|list| list.into_iter().map(serde_json::Value::Object).collect());
    let started =
        call.service.slack_start_thread(call.caller(), &args.channel_id, &args.message, blocks).await?;
    let details = format!(
        "Thread started. channelId={}, ts={}. Pass ts as threadTs on slack-post to reply in-thread.",
        started.channel_id, started.ts
    );
    Ok(Answer::new(
        details,
        StartedThread { channel_id: started.channel_id, message_ts: started.ts.clone(), ts: started.ts },
    ))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UpdateArguments {
    channel_id: String,
    /// The message's ts: 1783411554.596189, p1783411554596189 or its permalink.
    message_ts: String,
    /// The new text, 1 to 4000 characters.
    message: String,
}

async fn slack_update(call: ToolCall, args: UpdateArguments) -> Outcome<UpdatedMessage> {
    let message_ts =
        call.service.slack_update(call.caller(), &args.channel_id, &args.message_ts, &args.message).await?;
    Ok(Answer::new("Message updated successfully.", UpdatedMessage { message_ts }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DeleteArguments {
    channel_id: String,
    /// The message's ts: 1783411554.596189, p1783411554596189 or its permalink.
    message_ts: String,
}

async fn slack_delete(call: ToolCall, args: DeleteArguments) -> Outcome<NoFields> {
    call.service.slack_delete(call.caller(), &args.channel_id, &args.message_ts).await?;
    Ok(Answer::done("Message deleted successfully."))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateChannelArguments {
    name: String,
    #[serde(default)]
    is_private: bool,
}

async fn slack_create_channel(call: ToolCall, args: CreateChannelArguments) -> Outcome<CreatedChannel> {
    let channel = call.service.slack_create_channel(call.caller(), &args.name, args.is_private).await?;
    let message = format!("Created Slack channel {} ({}).", channel.name, channel.id);
    Ok(Answer::new(
        message,
        CreatedChannel { channel_id: channel.id, name: channel.name, is_private: channel.is_private },
    ))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct InviteArguments {
    channel_id: String,
    /// Slack user ids (U...), 1 to 100.
    user_ids: Vec<String>,
}

async fn slack_invite_to_channel(call: ToolCall, args: InviteArguments) -> Outcome<NoFields> {
    call.service.slack_invite_to_channel(call.caller(), &args.channel_id, &args.user_ids).await?;
    Ok(Answer::done(format!("Invited {} user(s).", args.user_ids.len())))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ArchiveArguments {
    channel_id: String,
}

async fn slack_archive_channel(call: ToolCall, args: ArchiveArguments) -> Outcome<NoFields> {
    call.service.slack_archive_channel(call.caller(), &args.channel_id).await?;
    Ok(Answer::done("Channel archived."))
}
