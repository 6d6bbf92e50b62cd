//! The lead's inbox: Slack messages routed to the lead, which it answers (`slack-reply`)
//! or hands to a worker (`inbox-delegate`). Never a task: the lead coordinates, it does
//! not work. The state machine lives here; `docs/state_machine.md` has the diagram.
//!
//! ```text
//! unread ──poll claims (lease)──► processing ──slack-reply──► responded
//!   ▲                                 │  └────inbox-delegate──► delegated
//!   └──────── lease expired ──────────┘  └────mark read───────► read
//! ```
//! `unread` may also go straight to `responded`, `delegated` or `read` (a lead acting
//! from `get-inbox-message` without a poll). `responded`, `delegated` and `read` are final
//! for the machine; a further reply to a `responded` message still posts to Slack.
//!
//! A claim belongs to the lead's run that took it: when the run ends without closing
//! the message, its runner releases it (`processing` → `unread`), and after
//! `MAX_DELIVERIES` hand-overs it becomes a `dead_letter` instead, which an operator
//! puts back to `unread` (`POST /api/inbox/:id/requeue`).

use serde::{Deserialize, Serialize};

use crate::{
    Invalid,
    id::{AgentId, InboxMessageId, TaskId},
    reject_nul,
    time::Timestamp,
};

/// At most this many messages are handed over in one `slack_inbox_message` trigger.
pub const INBOX_TRIGGER_MAX: i64 = 5;
/// The longest reply `slack-reply` accepts (the reference's limit).
pub const REPLY_MAX_CHARS: usize = 4000;
const CONTENT_MAX_CHARS: usize = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum InboxStatus {
    Unread,
    /// Claimed by a poll for the lead, with a lease.
    Processing,
    Read,
    Responded,
    Delegated,
    /// Handed to the lead's runs `MAX_DELIVERIES` times and never handled: set aside,
    /// shown on the dashboard, until an operator puts it back (`unread`).
    DeadLetter,
}

impl InboxStatus {
    pub const ALL: [InboxStatus; 6] = [
        InboxStatus::Unread,
        InboxStatus::Processing,
        InboxStatus::Read,
        InboxStatus::Responded,
        InboxStatus::Delegated,
        InboxStatus::DeadLetter,
    ];
    /// The statuses from which the lead may still answer, delegate or dismiss a message.
    pub const OPEN: [InboxStatus; 2] = [InboxStatus::Unread, InboxStatus::Processing];

    pub fn as_str(&self) -> &'static str {
        match self {
            InboxStatus::Unread => "unread",
            InboxStatus::Processing => "processing",
            InboxStatus::Read => "read",
            InboxStatus::Responded => "responded",
            InboxStatus::Delegated => "delegated",
            InboxStatus::DeadLetter => "dead_letter",
        }
    }

    pub fn parse(text: &str) -> Result<Self, Invalid> {
        Self::ALL.into_iter().find(|status| status.as_str() == text).ok_or_else(|| {
            let known: Vec<&str> = Self::ALL.iter().map(InboxStatus::as_str).collect();
            Invalid(format!("unknown inbox status {text:?} (expected one of {})", known.join(", ")))
        })
    }

    pub fn is_open(&self) -> bool {
        Self::OPEN.contains(self)
    }
}

impl std::fmt::Display for InboxStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where in Slack a message came from, and where answers go.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SlackContext {
    pub slack_channel_id: Option<String>,
    pub slack_thread_ts: Option<String>,
    pub slack_user_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InboxMessage {
    pub id: InboxMessageId,
    pub agent_id: AgentId,
    /// The message, with the thread's earlier messages before it when it came in a thread.
    pub content: String,
    pub source: String,
    pub status: InboxStatus,
    #[serde(flatten)]
    pub slack: SlackContext,
    /// Why the message was routed to this agent.
    pub matched_text: Option<String>,
    pub delegated_to_task_id: Option<TaskId>,
    pub response_text: Option<String>,
    /// While `processing`: when the poll's claim runs out unless the lead heartbeats (ours).
    pub lease_expires_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub last_updated_at: Timestamp,
}

/// An inbox message to create, validated by [`NewInboxMessage::parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewInboxMessage {
    pub id: InboxMessageId,
    pub agent_id: AgentId,
    pub content: String,
    pub slack: SlackContext,
    pub matched_text: Option<String>,
}

impl NewInboxMessage {
    pub fn parse(
        agent_id: AgentId,
        content: &str,
        slack: SlackContext,
        matched_text: Option<String>,
    ) -> Result<Self, Invalid> {
        let content = content.trim();
        if content.is_empty() {
            return Err(Invalid::new("an inbox message needs content"));
        }
        if content.chars().count() > CONTENT_MAX_CHARS {
            return Err(Invalid(format!("an inbox message is at most {CONTENT_MAX_CHARS} characters")));
        }
        reject_nul("content", content)?;
        Ok(NewInboxMessage {
            id: InboxMessageId::new_v7(),
            agent_id,
            content: content.to_string(),
            slack,
            matched_text,
        })
    }
}

/// How the lead closes an open message: one guarded update from [`InboxStatus::OPEN`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboxChange {
    Responded { response_text: String },
    Delegated { task_id: TaskId },
    Read,
}

impl InboxChange {
    pub fn to(&self) -> InboxStatus {
        match self {
            InboxChange::Responded { .. } => InboxStatus::Responded,
            InboxChange::Delegated { .. } => InboxStatus::Delegated,
            InboxChange::Read => InboxStatus::Read,
        }
    }

    /// The statuses the change may start from (the `WHERE` guard).
    pub fn from(&self) -> &'static [InboxStatus] {
        &InboxStatus::OPEN
    }
}

/// A reply to post in Slack: 1 to [`REPLY_MAX_CHARS`] characters.
pub fn parse_reply(text: &str) -> Result<String, Invalid> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(Invalid::new("message must not be empty"));
    }
    if trimmed.chars().count() > REPLY_MAX_CHARS {
        return Err(Invalid(format!("message must be at most {REPLY_MAX_CHARS} characters")));
    }
    reject_nul("message", trimmed)?;
    Ok(trimmed.to_string())
}

/// Once-only marks for the Slack bridge: each `(kind, key)` can be taken once, durably,
/// so a retried delivery or a second replica does nothing twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlackMark {
    /// A Slack event id (`event_id` of the Events API envelope) was handled.
    Event,
    /// A task's outcome was posted to its thread.
    TaskOutcome,
    /// A task's progress note (key: task id and a digest of the note) was posted.
    TaskProgress,
}

impl SlackMark {
    pub fn as_str(&self) -> &'static str {
        match self {
            SlackMark::Event => "event",
            SlackMark::TaskOutcome => "task_outcome",
            SlackMark::TaskProgress => "task_progress",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_change_starts_from_an_open_status() {
        for change in [
            InboxChange::Read,
            InboxChange::Responded { response_text: "ok".into() },
            InboxChange::Delegated { task_id: TaskId::new_v7() },
        ] {
            assert_eq!(change.from(), &[InboxStatus::Unread, InboxStatus::Processing]);
            assert!(!change.to().is_open(), "{change:?} closes the message");
        }
    }

    #[test]
    fn statuses_round_trip() {
        for status in InboxStatus::ALL {
            assert_eq!(InboxStatus::parse(status.as_str()), Ok(status));
        }
        assert!(InboxStatus::parse("done").is_err());
    }

    #[test]
    fn replies_are_bounded() {
        assert!(parse_reply("  ").is_err());
        assert!(parse_reply(&"x".repeat(REPLY_MAX_CHARS + 1)).is_err());
        assert_eq!(parse_reply(" hi ").as_deref(), Ok("hi"));
    }
}
