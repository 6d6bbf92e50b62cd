//! Agent mail (`seeds/agent-mailbox.md`): messages from one agent to another, or to the
//! coordinator (the lead), with a type, a priority and "awaiting a response".
//!
//! History is append-only: a piece of mail is never edited or deleted. What changes is
//! its delivery to the recipient, and, for mail awaiting a response, whether a reply
//! came. The recipient's side is this state machine:
//!
//! ```text
//! unread ──poll claims urgent mail (lease)──► processing ──read / injected by a hook──► read
//!   ▲                                             │
//!   └──────────────── lease expired ──────────────┘
//! unread ──read / injected by a hook──► read
//! ```
//!
//! Priorities decide how mail reaches the recipient: `urgent` wakes it through the poll
//! (`urgent_mail`); `normal` waits for its next natural break (the `UserPromptSubmit`
//! hook injects it); `low` is delivered only when the agent asks (`read-mail` with
//! `includeLow`).
//!
//! The sender's waiting state: mail sent with `awaitingResponse` leaves the sender
//! waiting until the recipient replies to it (`inReplyTo`), which sets `answeredAt`.
//! That reply wakes the waiting sender whatever its priority: the store marks it
//! `wakes` when it is appended, and the poll hands waking mail over as `urgent_mail`
//! (urgent mail wakes too), the hook injects it at the next prompt.

use serde::{Deserialize, Serialize};

use crate::{
    Invalid,
    id::{AgentId, MailId},
    reject_nul,
    time::Timestamp,
};

pub const SUBJECT_MAX_CHARS: usize = 200;
pub const BODY_MAX_CHARS: usize = 20_000;
/// At most this many urgent pieces are handed over in one `urgent_mail` trigger.
pub const URGENT_TRIGGER_MAX: i64 = 10;
/// The words that address the lead, as the seed's `"to": "coordinator"` does.
pub const COORDINATOR_ALIASES: [&str; 2] = ["coordinator", "lead"];

macro_rules! text_enum {
    ($(#[$doc:meta])* $name:ident, $what:literal, { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(&self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            pub fn parse(text: &str) -> Result<Self, Invalid> {
                Self::ALL.iter().copied().find(|value| value.as_str() == text.trim()).ok_or_else(|| {
                    let known: Vec<&str> = Self::ALL.iter().map(|value| value.as_str()).collect();
                    Invalid(format!("unknown {} {:?} (expected one of {})", $what, text, known.join(", ")))
                })
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

text_enum!(
    /// What a piece of mail is for.
    MailType, "mail type", {
        HelpRequest => "help_request",
        Question => "question",
        Fyi => "fyi",
        Response => "response",
        StatusUpdate => "status_update",
        ReviewRequest => "review_request",
    }
);

text_enum!(
    /// How soon the recipient should see it.
    MailPriority, "mail priority", {
        Urgent => "urgent",
        Normal => "normal",
        Low => "low",
    }
);

text_enum!(
    /// Where the mail is in its delivery to the recipient.
    MailStatus, "mail status", {
        Unread => "unread",
        Processing => "processing",
        Read => "read",
    }
);

impl MailPriority {
    /// Delivery order: urgent first.
    pub fn rank(&self) -> i64 {
        match self {
            MailPriority::Urgent => 0,
            MailPriority::Normal => 1,
            MailPriority::Low => 2,
        }
    }
}

impl MailStatus {
    /// Not yet delivered: the recipient has not seen it.
    pub const UNDELIVERED: [MailStatus; 2] = [MailStatus::Unread, MailStatus::Processing];
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Mail {
    pub id: MailId,
    pub from_agent_id: AgentId,
    pub to_agent_id: AgentId,
    #[serde(rename = "type")]
    pub mail_type: MailType,
    pub subject: String,
    pub body: String,
    pub priority: MailPriority,
    /// The sender waits for a reply to this mail.
    pub awaiting_response: bool,
    pub in_reply_to: Option<MailId>,
    pub status: MailStatus,
    /// When it was delivered to the recipient (read, or injected by a hook).
    pub read_at: Option<Timestamp>,
    /// For mail awaiting a response: when the recipient replied.
    pub answered_at: Option<Timestamp>,
    /// While `processing`: when the poll's claim runs out unless the recipient heartbeats.
    pub lease_expires_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

impl Mail {
    /// The sender still waits for a reply to it.
    pub fn is_waiting(&self) -> bool {
        self.awaiting_response && self.answered_at.is_none()
    }

    /// The line `swarm mail log` prints: the seed's JSONL message format.
    pub fn log_line(&self) -> serde_json::Value {
        let mut line = serde_json::json!({
            "id": self.id,
            "from": self.from_agent_id,
            "to": self.to_agent_id,
            "type": self.mail_type,
            "subject": self.subject,
            "body": self.body,
            "priority": self.priority,
            "created_at": self.created_at,
            "awaiting_response": self.awaiting_response,
        });
        if let Some(parent) = self.in_reply_to {
            line["in_reply_to"] = serde_json::json!(parent);
        }
        line
    }
}

/// Mail to store, validated by [`NewMail::parse`]; the service resolved the recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMail {
    pub id: MailId,
    pub from_agent_id: AgentId,
    pub to_agent_id: AgentId,
    pub mail_type: MailType,
    pub subject: String,
    pub body: String,
    pub priority: MailPriority,
    pub awaiting_response: bool,
    pub in_reply_to: Option<MailId>,
}

/// What a sender writes; [`NewMail::parse`] checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailDraft {
    pub mail_type: MailType,
    pub subject: String,
    pub body: String,
    pub priority: MailPriority,
    pub awaiting_response: bool,
    pub in_reply_to: Option<MailId>,
}

impl NewMail {
    pub fn parse(from: AgentId, to: AgentId, draft: MailDraft) -> Result<Self, Invalid> {
        if from == to {
            return Err(Invalid::new("to: an agent cannot mail itself"));
        }
        let subject = bounded_text("subject", &draft.subject, SUBJECT_MAX_CHARS)?;
        if subject.contains('\n') {
            return Err(Invalid::new("subject must be one line"));
        }
        let body = bounded_text("body", &draft.body, BODY_MAX_CHARS)?;
        Ok(NewMail {
            id: MailId::new_v7(),
            from_agent_id: from,
            to_agent_id: to,
            mail_type: draft.mail_type,
            subject,
            body,
            priority: draft.priority,
            awaiting_response: draft.awaiting_response,
            in_reply_to: draft.in_reply_to,
        })
    }
}

fn bounded_text(field: &str, text: &str, max_chars: usize) -> Result<String, Invalid> {
    let text = text.trim();
    if text.is_empty() {
        return Err(Invalid(format!("{field} must not be empty")));
    }
    if text.chars().count() > max_chars {
        return Err(Invalid(format!("{field} is at most {max_chars} characters")));
    }
    reject_nul(field, text)?;
    Ok(text.to_string())
}

/// Which side of an agent's mail to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MailBox {
    /// Mail to the agent.
    #[default]
    Inbox,
    /// Mail from the agent.
    Outbox,
    /// Both: the agent's whole history.
    All,
}

impl MailBox {
    pub fn parse(text: &str) -> Result<Self, Invalid> {
        match text.trim() {
            "inbox" => Ok(MailBox::Inbox),
            "outbox" => Ok(MailBox::Outbox),
            "all" => Ok(MailBox::All),
            other => Err(Invalid(format!("unknown box {other:?} (expected inbox, outbox or all)"))),
        }
    }
}

/// A page of mail. Pages run newest first unless `oldest_first`; `after` continues
/// past that mail in the page order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MailQuery {
    /// Whose mail; `None` lists everyone's (the operator's view).
    pub agent: Option<AgentId>,
    pub mailbox: MailBox,
    /// Only these delivery statuses (empty: any).
    pub statuses: Vec<MailStatus>,
    /// Only these priorities (empty: any).
    pub priorities: Vec<MailPriority>,
    /// Only mail whose sender still waits for a reply, or urgent mail not yet delivered:
    /// what a stopping agent should tell its coordinator about.
    pub pending_only: bool,
    pub oldest_first: bool,
    pub after: Option<MailId>,
    pub limit: i64,
}

/// Which of the recipient's undelivered mail to deliver in one go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MailDelivery {
    /// These pieces only (still the recipient's, still undelivered); empty: the oldest
    /// undelivered ones of `priorities`, urgent first.
    pub ids: Vec<MailId>,
    pub priorities: Vec<MailPriority>,
    /// Also mail that wakes the recipient whatever its priority (a reply to mail it
    /// awaits a response to): the waiting pattern holds for low-priority questions too.
    pub include_waking: bool,
    pub limit: i64,
}

/// An agent's counts: each one indexed lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MailCounts {
    /// Undelivered mail to the agent, by priority, and in all.
    pub unread: i64,
    pub urgent: i64,
    pub normal: i64,
    pub low: i64,
    /// Mail the agent sent that still waits for a reply.
    pub awaiting_response: i64,
}

impl MailCounts {
    /// The sender's waiting state: it sent mail awaiting a response, and no reply came.
    pub fn waiting_for_response(&self) -> bool {
        self.awaiting_response > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft() -> MailDraft {
        MailDraft {
            mail_type: MailType::HelpRequest,
            subject: " Build fails ".into(),
            body: "cargo test fails on main".into(),
            priority: MailPriority::Urgent,
            awaiting_response: true,
            in_reply_to: None,
        }
    }

    #[test]
    fn mail_is_checked() {
        let (a, b) = (AgentId::new_v7(), AgentId::new_v7());
        let mail = NewMail::parse(a, b, draft()).unwrap();
        assert_eq!(mail.subject, "Build fails");
        assert!(NewMail::parse(a, a, draft()).unwrap_err().0.contains("itself"));
        let empty = MailDraft { body: "  ".into(), ..draft() };
        assert!(NewMail::parse(a, b, empty).unwrap_err().0.contains("body"));
        let two_lines = MailDraft { subject: "a\nb".into(), ..draft() };
        assert!(NewMail::parse(a, b, two_lines).is_err());
    }

    #[test]
    fn names_round_trip() {
        for kind in MailType::ALL {
            assert_eq!(MailType::parse(kind.as_str()), Ok(*kind));
        }
        assert!(MailPriority::parse("asap").unwrap_err().0.contains("urgent, normal, low"));
        assert!(MailPriority::Urgent.rank() < MailPriority::Low.rank());
    }
}
