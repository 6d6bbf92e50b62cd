//! Channels (agent chat): public channels and direct ones, messages with replies and
//! mentions, per-agent read state, and `/task` messages that create work.
//!
//! Mentions are kept twice: on the message (its `mentions`, for display) and as rows
//! indexed by (agent, channel), with a per-(agent, channel) read state that counts the
//! unread ones, so "has this agent unread mentions" is an index probe, never a text scan.
//!
//! ```text
//! read state of (agent, channel):
//!   idle ──mention──► unread (count > 0) ──poll claims (processing_since, lease)──► processing
//!     ▲                   ▲                                                            │
//!     │                   └──────────────── lease expired ─────────────────────────────┤
//!     └──────────────────────────── the agent reads the channel ───────────────────────┘
//! ```

use serde::{Deserialize, Serialize};

use crate::{
    Invalid,
    id::{AgentId, ChannelId, ChatMessageId, TaskId},
    reject_nul,
    time::Timestamp,
};

/// The name of the channel that always exists.
pub const GENERAL: &str = "general";
/// The prefix of a message that creates one task per mentioned agent.
pub const TASK_COMMAND: &str = "/task ";
/// The longest message accepted.
pub const MESSAGE_MAX_CHARS: usize = 20_000;
const NAME_MAX_CHARS: usize = 64;
const DESCRIPTION_MAX_CHARS: usize = 1_000;
/// At most this many agents may be mentioned in one message.
pub const MENTIONS_MAX: usize = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChannelType {
    Public,
    /// A direct channel: only its participants see it.
    Dm,
}

impl ChannelType {
    pub fn as_str(&self) -> &'static str {
        match self {
            ChannelType::Public => "public",
            ChannelType::Dm => "dm",
        }
    }

    pub fn parse(text: &str) -> Result<Self, Invalid> {
        match text {
            "public" => Ok(ChannelType::Public),
            "dm" => Ok(ChannelType::Dm),
            other => Err(Invalid(format!("unknown channel type {other:?} (expected public or dm)"))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Channel {
    pub id: ChannelId,
    pub name: String,
    pub description: Option<String>,
    #[serde(rename = "type")]
    pub channel_type: ChannelType,
    /// `None`: created by a person, or `general`.
    pub created_by: Option<AgentId>,
    /// Who may see a `dm` channel; empty for public ones.
    pub participants: Vec<AgentId>,
    pub created_at: Timestamp,
}

impl Channel {
    /// Whether `agent` (or, for `None`, the operator) may read and post here.
    pub fn admits(&self, agent: Option<AgentId>) -> bool {
        match (self.channel_type, agent) {
            (ChannelType::Public, _) | (_, None) => true,
            (ChannelType::Dm, Some(agent)) => self.participants.contains(&agent),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatMessage {
    pub id: ChatMessageId,
    pub channel_id: ChannelId,
    /// The author; `None` for a person posting through REST.
    pub agent_id: Option<AgentId>,
    pub content: String,
    pub reply_to_id: Option<ChatMessageId>,
    /// The agents mentioned, by id (`@name` in the text resolved when posted).
    pub mentions: Vec<AgentId>,
    /// The tasks a `/task` message created, one per mentioned agent.
    pub task_ids: Vec<TaskId>,
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewChannel {
    pub id: ChannelId,
    pub name: String,
    pub description: Option<String>,
    pub channel_type: ChannelType,
    pub created_by: Option<AgentId>,
    pub participants: Vec<AgentId>,
}

impl NewChannel {
    /// A direct channel includes its creator among the participants.
    pub fn parse(
        name: &str,
        description: Option<String>,
        channel_type: ChannelType,
        created_by: Option<AgentId>,
        mut participants: Vec<AgentId>,
    ) -> Result<Self, Invalid> {
        let name = parse_channel_name(name)?;
        let description = match description.map(|text| text.trim().to_string()) {
            Some(text) if text.is_empty() => None,
            Some(text) if text.chars().count() > DESCRIPTION_MAX_CHARS => {
                return Err(Invalid(format!("description is at most {DESCRIPTION_MAX_CHARS} characters")));
            }
            Some(text) => {
                reject_nul("description", &text)?;
                Some(text)
            }
            None => None,
        };
        match channel_type {
            ChannelType::Public => participants.clear(),
            ChannelType::Dm => {
                participants.extend(created_by);
                participants.sort();
                participants.dedup();
                if participants.len() < 2 {
                    return Err(Invalid::new("a dm channel needs at least two participants"));
                }
                if participants.len() > MENTIONS_MAX {
                    return Err(Invalid(format!("a dm channel has at most {MENTIONS_MAX} participants")));
                }
            }
        }
        Ok(NewChannel { id: ChannelId::new_v7(), name, description, channel_type, created_by, participants })
    }
}

/// Lowercase letters, digits, `-` and `_`, 1 to 64 characters; a leading `#` is dropped.
pub fn parse_channel_name(name: &str) -> Result<String, Invalid> {
    let name = name.trim().trim_start_matches('#').to_lowercase();
    let valid = !name.is_empty()
        && name.chars().count() <= NAME_MAX_CHARS
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if valid {
        Ok(name)
    } else {
        Err(Invalid(format!(
            "a channel name is 1 to {NAME_MAX_CHARS} of a-z, 0-9, '-' and '_', got {name:?}"
        )))
    }
}

/// A message's text: trimmed, not empty, bounded, no NUL.
pub fn parse_content(content: &str) -> Result<String, Invalid> {
    let content = content.trim();
    if content.is_empty() {
        return Err(Invalid::new("content must not be empty"));
    }
    if content.chars().count() > MESSAGE_MAX_CHARS {
        return Err(Invalid(format!("content is at most {MESSAGE_MAX_CHARS} characters")));
    }
    reject_nul("content", content)?;
    Ok(content.to_string())
}

/// The `@name` words of a message, in order, without duplicates. A name runs to the
/// first character that cannot be part of an agent name (space, punctuation other than
/// `-`, `_` and `.`); a trailing `.` ends a sentence, not a name.
pub fn mentioned_names(content: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut rest = content;
    while let Some(at) = rest.find('@') {
        let preceded_by_word = rest[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric());
        let after = &rest[at + 1..];
        let end = after
            .find(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_' || c == '.'))
            .unwrap_or(after.len());
        let name = after[..end].trim_end_matches('.');
        if !preceded_by_word && !name.is_empty() && !names.iter().any(|known| known == name) {
            names.push(name.to_string());
        }
        rest = &after[end..];
    }
    names
}

/// The task text of a `/task` message (what follows the command), or `None`.
pub fn task_command(content: &str) -> Option<&str> {
    content.strip_prefix(TASK_COMMAND).map(str::trim).filter(|text| !text.is_empty())
}

/// A message ready to store: the service resolved its mentions and built its tasks;
/// the store writes the message, its mention rows, the mentioned agents' unread counts
/// and the tasks in one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewChatMessage {
    pub id: ChatMessageId,
    pub channel_id: ChannelId,
    pub agent_id: Option<AgentId>,
    pub content: String,
    pub reply_to_id: Option<ChatMessageId>,
    pub mentions: Vec<AgentId>,
    pub tasks: Vec<crate::task::NewTask>,
}

/// Which messages of a channel to read. Without `since`, the newest `limit` (before
/// `before`); with it, the oldest `limit` after it. Always returned oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MessageQuery {
    pub since: Option<Timestamp>,
    pub before: Option<Timestamp>,
    /// Only messages that mention this agent.
    pub mentioning: Option<AgentId>,
    pub limit: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_words_after_an_at_sign() {
        assert_eq!(
            mentioned_names("@alpha and @beta-2, see @alpha. mail a@b.c (@gamma_x)."),
            vec!["alpha", "beta-2", "gamma_x"]
        );
        assert!(mentioned_names("no one @ all").is_empty());
    }

    #[test]
    fn task_commands_need_text() {
        assert_eq!(task_command("/task @a fix it"), Some("@a fix it"));
        assert_eq!(task_command("/task   "), None);
        assert_eq!(task_command("task @a"), None);
    }

    #[test]
    fn channel_names_and_dms() {
        assert_eq!(parse_channel_name(" #Dev-Ops ").as_deref(), Ok("dev-ops"));
        assert!(parse_channel_name("a b").is_err());
        let me = AgentId::new_v7();
        assert!(NewChannel::parse("x", None, ChannelType::Dm, Some(me), vec![me]).is_err());
        let dm = NewChannel::parse("x", None, ChannelType::Dm, Some(me), vec![AgentId::new_v7()]).unwrap();
        assert_eq!(dm.participants.len(), 2);
    }

    #[test]
    fn general_has_a_fixed_id() {
        assert_eq!(ChannelId::general().to_string(), "00000000-0000-7000-8000-000000000001");
    }
}
