//! Identifiers. Ids are UUIDs on the wire, as the reference's are; new ones are v7 so that
//! they sort by creation time, which the stores use to break timestamp ties.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::Invalid;

/// How many hex digits of an id people read: [`short_id`].
pub const SHORT_ID_LEN: usize = 8;

/// An id as people read and type it: its last 8 hex digits. Ids are UUIDv7, whose first
/// digits are a timestamp that ids made in the same second share; the last 8 are random
/// (32 bits), so two tasks of one hub differ there but for a chance of about one in four
/// billion per pair, and a clash is told apart when typed ([`IdSuffix`]). The dashboard
/// (`ui.js` `shortId`) cuts ids by the same rule.
pub fn short_id(uuid: Uuid) -> String {
    let simple = uuid.simple().to_string();
    simple[simple.len() - SHORT_ID_LEN..].to_string()
}

/// The end of an id as a person typed it (`9c41d0e2`, `…9c41d0e2`, `#9c41d0e2`): 4 to 12
/// hex digits, lower case, which never reach across the UUID's last hyphen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdSuffix(String);

impl IdSuffix {
    pub fn parse(text: &str) -> Result<Self, Invalid> {
        let trimmed = text.trim();
        let digits = trimmed.trim_start_matches(['…', '#', '.']);
        if (4..=12).contains(&digits.len()) && digits.chars().all(|c| c.is_ascii_hexdigit()) {
            Ok(IdSuffix(digits.to_ascii_lowercase()))
        } else {
            Err(Invalid(format!(
                "{trimmed:?} is neither an id (a UUID) nor the end of one (4 to 12 hex digits, as lists show: `9c41d0e2`)"
            )))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema)]
        #[serde(transparent)]
        #[schema(value_type = String, format = Uuid)]
        pub struct $name(Uuid);

        impl $name {
            pub fn new_v7() -> Self {
                $name(Uuid::now_v7())
            }
            pub fn from_uuid(uuid: Uuid) -> Self {
                $name(uuid)
            }
            pub fn as_uuid(&self) -> Uuid {
                self.0
            }
            /// The id as people read and type it: see [`short_id`].
            pub fn short(&self) -> String {
                short_id(self.0)
            }
            pub fn parse(text: &str) -> Result<Self, Invalid> {
                Uuid::parse_str(text.trim())
                    .map($name)
                    .map_err(|_| Invalid(format!("{} must be a UUID, got {:?}", $what, text)))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = Invalid;
            fn from_str(text: &str) -> Result<Self, Invalid> {
                Self::parse(text)
            }
        }
    };
}

uuid_id!(
    /// The id of an agent (the `X-Agent-ID` header).
    AgentId,
    "agent id"
);
uuid_id!(
    /// The id of a task.
    TaskId,
    "task id"
);
uuid_id!(
    /// The id of an event log entry.
    EventId,
    "event id"
);
uuid_id!(
    /// The id of a lead's inbox message (a Slack message routed to the lead).
    InboxMessageId,
    "inbox message id"
);
uuid_id!(
    /// The id of a chat channel (`general` has a fixed one: [`ChannelId::general`]).
    ChannelId,
    "channel id"
);
uuid_id!(
    /// The id of a message in a chat channel.
    ChatMessageId,
    "message id"
);
uuid_id!(
    /// The id of a trigger (cron, interval, once, webhook, github, manual).
    TriggerId,
    "trigger id"
);

impl ChannelId {
    /// The `general` channel, created by the first migration of chat and always there.
    pub fn general() -> ChannelId {
        ChannelId(Uuid::from_u128(0x0000_0000_0000_7000_8000_0000_0000_0001))
    }
}

uuid_id!(
    /// The id of an epic: a project that groups tasks toward one goal.
    EpicId,
    "epic id"
);

uuid_id!(
    /// The id of a service an agent registered (a long-running process it started).
    ServiceId,
    "service id"
);

uuid_id!(
    /// The id of a piece of agent mail.
    MailId,
    "mail id"
);

uuid_id!(
    /// The id of an agent token (`AGENT_AUTH=token`): what lists and revocation name,
    /// never the token itself.
    AgentTokenId,
    "token id"
);

uuid_id!(
    /// A tool call the MCP Tasks extension runs as a pollable task (SEP-2663's `taskId`).
    McpTaskId,
    "MCP task id"
);

uuid_id!(
    /// One runner process (`swarm worker`/`swarm lead`), new at each start: the holder
    /// of the lead-side claims (inbox messages, mentions, urgent mail) it polled, so that
    /// its heartbeats keep those alive, and a crashed runner's claims run out even while
    /// another runner of the same agent heartbeats (`X-Runner-ID`).
    RunnerId,
    "runner id"
);

uuid_id!(
    /// A steering message: words for a task's running agent (`POST /api/tasks/:id/steer`).
    SteeringMessageId,
    "steering message id"
);

#[cfg(test)]
mod short_id_tests {
    use super::*;

    #[test]
    fn ids_made_in_one_millisecond_read_differently() {
        let ids: Vec<String> = (0..200).map(|_| TaskId::new_v7().short()).collect();
        let distinct: std::collections::HashSet<&String> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len(), "{ids:?}");
        assert!(ids.iter().all(|id| id.len() == SHORT_ID_LEN && id.chars().all(|c| c.is_ascii_hexdigit())));
    }

    #[test]
    fn the_short_id_is_the_end_of_the_full_one() {
        let id = TaskId::parse("0193a1b2-0000-7000-8000-00009c41d0e2").unwrap();
        assert_eq!(id.short(), "9c41d0e2");
        assert!(id.to_string().ends_with(&id.short()));
    }

    #[test]
    fn a_typed_suffix_is_hex_of_4_to_12_digits() {
        assert_eq!(IdSuffix::parse(" …9C41D0E2 ").unwrap().as_str(), "9c41d0e2");
        assert_eq!(IdSuffix::parse("#d0e2").unwrap().as_str(), "d0e2");
        for bad in ["", "abc", "9c41-d0e2", "xyz12345", "0123456789abc"] {
            assert!(IdSuffix::parse(bad).is_err(), "{bad:?}");
        }
    }
}
