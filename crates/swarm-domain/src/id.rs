//! Identifiers. Ids are UUIDs on the wire, as the reference's are; new ones are v7 so that
//! they sort by creation time, which the stores use to break timestamp ties.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::Invalid;

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
