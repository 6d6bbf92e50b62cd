//! Steering: words for the agent working a task, sent while it works
//! (`POST /api/tasks/:id/steer`, the reference's shapes).
//!
//! A message's states: `pending` (recorded, not yet shown) → `delivered` (put into the
//! running agent's context, once) → `handled` (the agent went on with it); or `pending`
//! → `promoted` (it could not reach a run, so it became a follow-up task for the same
//! agent) or `cancelled`. Every change is guarded by its from-status in SQL, so a
//! message is shown once and never lost.

use serde::{Deserialize, Serialize};

use crate::{
    Invalid,
    id::{AgentId, SteeringMessageId, TaskId},
    reject_nul,
    time::Timestamp,
};

pub const STEERING_TEXT_MAX_CHARS: usize = 20_000;
/// Set to `hooks` by the runner for a CLI whose hooks pass steering on to the agent: only
/// then does `swarm hook` take a task's steering messages.
pub const STEERING_ENV: &str = "SWARM_STEERING";
/// The task type of the follow-up task an undeliverable message becomes.
pub const FOLLOW_UP_TASK_TYPE: &str = "follow-up";

macro_rules! word_enum {
    ($(#[$doc:meta])* $name:ident, $what:literal, { $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vdoc])* $variant),+ }

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

word_enum!(
    /// When the running agent sees the message.
    SteerMode, "mode", {
        /// At its next tool call: it changes course mid-turn.
        Steer => "steer",
        /// When its turn ends: it goes on with the message instead of stopping.
        Queue => "queue",
    }
);

word_enum!(
    /// What to do when the message cannot be delivered as asked.
    OnUnsupported, "onUnsupported", {
        /// Deliver it another way (`queue` for `steer`, a follow-up task for a finished task).
        Degrade => "degrade",
        /// Refuse the request.
        Fail => "fail",
    }
);

word_enum!(
    SteeringStatus, "steering status", {
        Pending => "pending",
        Delivered => "delivered",
        Handled => "handled",
        Promoted => "promoted",
        Cancelled => "cancelled",
    }
);

word_enum!(
    /// What a steer request did.
    SteerOutcome, "outcome", {
        /// Recorded for delivery at the agent's next tool call.
        Steered => "steered",
        /// Recorded for delivery at the end of the agent's turn.
        Queued => "queued",
        /// Turned into a follow-up task for the task's agent (the task was finished).
        Promoted => "promoted",
    }
);

/// One steering message as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SteeringMessage {
    pub id: SteeringMessageId,
    pub task_id: TaskId,
    pub message: String,
    pub mode: SteerMode,
    pub status: SteeringStatus,
    /// Where it came from: `api`, `ui`, `mcp`, `cli`, `slack`.
    pub source: String,
    /// The agent that sent it; none for the operator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_by_agent_id: Option<AgentId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub promoted_task_id: Option<TaskId>,
    pub created_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handled_at: Option<Timestamp>,
}

/// A message to record, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSteeringMessage {
    pub id: SteeringMessageId,
    pub task_id: TaskId,
    pub message: String,
    pub mode: SteerMode,
    pub source: String,
    pub created_by_agent_id: Option<AgentId>,
}

impl NewSteeringMessage {
    pub fn created(&self, now: Timestamp) -> SteeringMessage {
        SteeringMessage {
            id: self.id,
            task_id: self.task_id,
            message: self.message.clone(),
            mode: self.mode,
            status: SteeringStatus::Pending,
            source: self.source.clone(),
            created_by_agent_id: self.created_by_agent_id,
            promoted_task_id: None,
            created_at: now,
            delivered_at: None,
            handled_at: None,
        }
    }
}

/// What `POST /api/tasks/:id/steer` answers (the reference's `SteerResult`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SteerResult {
    pub outcome: SteerOutcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steering_message_id: Option<SteeringMessageId>,
    /// The follow-up task the message became (`outcome: promoted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub promoted_task_id: Option<TaskId>,
    pub effective_mode: SteerMode,
    /// The mode asked for, when another one is used (`steer` on a task not started yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded_from: Option<SteerMode>,
}

pub fn parse_steering_text(text: &str) -> Result<String, Invalid> {
    let text = text.trim();
    reject_nul("message", text)?;
    if text.is_empty() {
        return Err(Invalid::new("message must not be empty"));
    }
    if text.chars().count() > STEERING_TEXT_MAX_CHARS {
        return Err(Invalid(format!("message must be at most {STEERING_TEXT_MAX_CHARS} characters")));
    }
    Ok(text.to_string())
}

/// `source`: a short word naming where the message was written.
pub fn parse_steering_source(text: Option<&str>) -> Result<String, Invalid> {
    let text = text.map(str::trim).unwrap_or("api");
    let ok = !text.is_empty()
        && text.len() <= 32
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !ok {
        return Err(Invalid(format!(
            "source must be a short word of letters, digits, '-' or '_' (such as api, ui, slack), got {text:?}"
        )));
    }
    Ok(text.to_string())
}

/// The text an agent is shown for the messages it is given, oldest first.
pub fn steering_prompt(task_id: TaskId, messages: &[SteeringMessage]) -> String {
    let mut text = format!(
        "Steering from the swarm for your task {task_id}: the person or agent who set you to work \
         sends these instructions while you work. Follow them; they take precedence over your plan."
    );
    for message in messages {
        text.push_str("\n\n");
        text.push_str(&message.message);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_unknown_words_say_what_is_known() {
        for mode in SteerMode::ALL {
            assert_eq!(SteerMode::parse(mode.as_str()), Ok(*mode));
        }
        let error = SteerMode::parse("now").unwrap_err();
        assert!(error.0.contains("steer, queue"), "{error}");
        assert_eq!(OnUnsupported::parse("fail"), Ok(OnUnsupported::Fail));
    }

    #[test]
    fn text_and_source_are_checked() {
        assert!(parse_steering_text("  ").is_err());
        assert!(parse_steering_text("a\0b").is_err());
        assert!(parse_steering_text(&"x".repeat(STEERING_TEXT_MAX_CHARS + 1)).is_err());
        assert_eq!(parse_steering_text(" use tabs ").unwrap(), "use tabs");
        assert_eq!(parse_steering_source(None).unwrap(), "api");
        assert!(parse_steering_source(Some("a b")).is_err());
    }
}
