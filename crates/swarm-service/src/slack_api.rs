//! What the service needs from Slack's Web API, as a trait: the Slack bridge
//! (`swarm-slack`) implements it over HTTP, and a hub without Slack credentials has
//! none (the Slack tools then say Slack is not configured).

use async_trait::async_trait;
use serde::Serialize;

/// A message to post, under a persona (`username`, `icon_emoji`; needs `chat:write.customize`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackPost {
    pub channel: String,
    pub thread_ts: Option<String>,
    pub text: String,
    pub persona: Option<Persona>,
}

/// How an agent appears in Slack: its name, and `:crown:` for the lead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Persona {
    pub username: String,
    pub icon_emoji: String,
}

impl Persona {
    pub fn of(name: &str, is_lead: bool) -> Persona {
        let icon = if is_lead { ":crown:" } else { ":robot_face:" };
        Persona { username: name.to_string(), icon_emoji: icon.to_string() }
    }
}

/// One message of a channel or thread, as `slack-read` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SlackMessageView {
    pub ts: String,
    pub user: Option<String>,
    pub bot_id: Option<String>,
    pub username: Option<String>,
    pub text: String,
    pub thread_ts: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SlackChannelView {
    pub id: String,
    pub name: String,
    pub is_private: bool,
    pub is_member: bool,
}

/// A file to share in a channel or thread (Slack's `files.getUploadURLExternal`, the
/// upload, then `files.completeUploadExternal`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackUpload {
    pub channel: String,
    pub thread_ts: Option<String>,
    pub filename: String,
    pub title: Option<String>,
    pub initial_comment: Option<String>,
    pub bytes: Vec<u8>,
}

/// A file as `files.info` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SlackFileView {
    pub id: String,
    pub name: String,
    pub title: Option<String>,
    pub mimetype: Option<String>,
    pub size: u64,
    /// Where the bot downloads it (with its token); never handed to agents as a way in.
    #[serde(skip)]
    pub url_private_download: Option<String>,
    /// Where it was shared: (channel, the `ts` of the message or of its thread).
    #[serde(skip)]
    pub shared_in: Vec<(String, String)>,
}

/// An edit of a message the bot posted (`chat.update`): new fallback text and, when
/// given, new Block Kit blocks.
#[derive(Debug, Clone, PartialEq)]
pub struct SlackUpdate {
    pub channel: String,
    pub ts: String,
    pub text: String,
    pub blocks: Option<serde_json::Value>,
}

/// Slack refused or could not be reached; the message says which and why.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct SlackApiError(pub String);

#[async_trait]
pub trait SlackApi: Send + Sync + 'static {
    /// Post; returns the new message's `ts`.
    async fn post_message(&self, post: &SlackPost) -> Result<String, SlackApiError>;
    /// Post with Block Kit `blocks` (`post.text` is the notification's fallback); returns
    /// the new message's `ts`.
    async fn post_blocks(
        &self,
        post: &SlackPost,
        blocks: &serde_json::Value,
    ) -> Result<String, SlackApiError>;
    /// Edit a message the bot posted (`chat.update`).
    async fn update_message(&self, update: &SlackUpdate) -> Result<(), SlackApiError>;
    /// Delete a message the bot posted (`chat.delete`; Slack refuses anyone else's).
    async fn delete_message(&self, channel: &str, ts: &str) -> Result<(), SlackApiError>;
    /// React to a message (`reactions.add`), `name` without colons.
    async fn add_reaction(&self, channel: &str, ts: &str, name: &str) -> Result<(), SlackApiError>;
    /// `conversations.create`.
    async fn create_channel(&self, name: &str, is_private: bool) -> Result<SlackChannelView, SlackApiError>;
    /// `conversations.invite`: comma-separated user ids.
    async fn invite_to_channel(&self, channel: &str, users: &str) -> Result<(), SlackApiError>;
    /// `conversations.archive`.
    async fn archive_channel(&self, channel: &str) -> Result<(), SlackApiError>;
    /// A thread (`conversations.replies`), oldest first.
    async fn thread_history(
        &self,
        channel: &str,
        thread_ts: &str,
        limit: u32,
    ) -> Result<Vec<SlackMessageView>, SlackApiError>;
    /// A channel's latest messages (`conversations.history`), oldest first.
    async fn channel_history(
        &self,
        channel: &str,
        limit: u32,
    ) -> Result<Vec<SlackMessageView>, SlackApiError>;
    /// Channels the bot can see (`conversations.list`).
    async fn list_channels(&self) -> Result<Vec<SlackChannelView>, SlackApiError>;
    /// Share a file; returns its Slack file id.
    async fn upload_file(&self, upload: &SlackUpload) -> Result<String, SlackApiError>;
    /// A file's description (`files.info`).
    async fn file_info(&self, file_id: &str) -> Result<SlackFileView, SlackApiError>;
    /// A file's bytes, fetched with the bot token from a URL on Slack's file host only,
    /// at most `max_bytes` of them.
    async fn download_file(&self, url: &str, max_bytes: u64) -> Result<Vec<u8>, SlackApiError>;
}
