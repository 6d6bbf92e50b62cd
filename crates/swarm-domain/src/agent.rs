//! Agents: who they are and the status that follows their work.
//!
//! ```text
//!   register ──► idle ◄──► busy      busy  = holds at least one in_progress task
//!                 ▲  \      |        idle  = holds none
//!       ping /    |   \     |
//!       register  |    ▼    ▼
//!               offline ◄───┘        close (POST /close), or heartbeats stop
//! ```

use serde::{Deserialize, Serialize};

use crate::{Invalid, id::AgentId, reject_nul, time::Timestamp};

pub const MAX_TASKS_LIMIT: i32 = 20;
pub const NAME_MAX_CHARS: usize = 100;
pub const TEXT_MAX_CHARS: usize = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    Idle,
    Busy,
    Offline,
}

impl AgentStatus {
    pub const ALL: [AgentStatus; 3] = [AgentStatus::Idle, AgentStatus::Busy, AgentStatus::Offline];

    pub fn as_str(&self) -> &'static str {
        match self {
            AgentStatus::Idle => "idle",
            AgentStatus::Busy => "busy",
            AgentStatus::Offline => "offline",
        }
    }

    /// The status that follows an online agent's work: `busy` while it holds an
    /// `in_progress` task, else `idle`.
    pub fn for_work(in_progress: i64) -> Self {
        if in_progress > 0 { AgentStatus::Busy } else { AgentStatus::Idle }
    }

    pub fn parse(text: &str) -> Result<Self, Invalid> {
        Self::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
            .ok_or_else(|| Invalid(format!("unknown agent status {text:?} (expected idle, busy or offline)")))
    }
}

/// How many tasks an agent works at once: `current` counts its `in_progress` tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Capacity {
    pub current: i64,
    pub max: i64,
    pub available: i64,
}

impl Capacity {
    pub fn new(in_progress: i64, max_tasks: i32) -> Self {
        let max = i64::from(max_tasks);
        Capacity { current: in_progress, max, available: (max - in_progress).max(0) }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Agent {
    pub id: AgentId,
    pub name: String,
    pub is_lead: bool,
    pub status: AgentStatus,
    pub description: Option<String>,
    pub role: Option<String>,
    pub capabilities: Vec<String>,
    pub max_tasks: i32,
    pub created_at: Timestamp,
    pub last_updated_at: Timestamp,
    pub capacity: Capacity,
    /// Why the agent stopped taking work, as its runner said (ours, issue #19): e.g.
    /// "Claude Code exited at once 3 times: Invalid API key". Cleared when it takes work.
    #[serde(default)]
    pub status_reason: Option<String>,
}

/// How a registration went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    /// A new agent (`agent_joined` logged).
    Created(Agent),
    /// The agent existed: `offline` became `idle` (or `busy`), `max_tasks` was updated.
    Existing(Agent),
}

/// A registration, validated: build it with [`NewAgent::parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAgent {
    pub id: AgentId,
    pub name: String,
    pub is_lead: bool,
    pub description: Option<String>,
    pub role: Option<String>,
    pub capabilities: Vec<String>,
    pub max_tasks: i32,
}

impl NewAgent {
    #[allow(clippy::too_many_arguments)]
    pub fn parse(
        id: AgentId,
        name: &str,
        is_lead: bool,
        description: Option<String>,
        role: Option<String>,
        capabilities: Option<Vec<String>>,
        max_tasks: Option<i64>,
    ) -> Result<Self, Invalid> {
        Ok(NewAgent {
            id,
            name: parse_name(name)?,
            is_lead,
            description: parse_optional_text("description", description)?,
            role: parse_optional_text("role", role)?,
            capabilities: parse_capabilities(capabilities.unwrap_or_default())?,
            max_tasks: parse_max_tasks(max_tasks)?,
        })
    }
}

/// A profile change: at least one field is present.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProfileUpdate {
    pub description: Option<String>,
    pub role: Option<String>,
    pub capabilities: Option<Vec<String>>,
}

impl ProfileUpdate {
    pub fn parse(
        description: Option<String>,
        role: Option<String>,
        capabilities: Option<Vec<String>>,
    ) -> Result<Self, Invalid> {
        if description.is_none() && role.is_none() && capabilities.is_none() {
            return Err(Invalid::new("give at least one of role, description, capabilities"));
        }
        Ok(ProfileUpdate {
            description: parse_optional_text("description", description)?,
            role: parse_optional_text("role", role)?,
            capabilities: capabilities.map(parse_capabilities).transpose()?,
        })
    }
}

pub fn parse_name(name: &str) -> Result<String, Invalid> {
    let name = name.trim();
    if name.is_empty() {
        return Err(Invalid::new("name must not be empty"));
    }
    if name.chars().count() > NAME_MAX_CHARS {
        return Err(Invalid(format!("name must be at most {NAME_MAX_CHARS} characters")));
    }
    if name.chars().any(char::is_control) {
        return Err(Invalid::new("name must not contain control characters"));
    }
    Ok(name.to_string())
}

/// The most a status reason keeps: a line for a person, not a log.
pub const STATUS_REASON_MAX_CHARS: usize = 1_000;

/// A status reason as stored: trimmed, bounded, one paragraph; empty means none.
pub fn parse_status_reason(reason: Option<&str>) -> Result<Option<String>, Invalid> {
    let Some(reason) = reason.map(str::trim).filter(|reason| !reason.is_empty()) else {
        return Ok(None);
    };
    reject_nul("reason", reason)?;
    if reason.chars().count() > STATUS_REASON_MAX_CHARS {
        return Err(Invalid(format!("reason must be at most {STATUS_REASON_MAX_CHARS} characters")));
    }
    Ok(Some(reason.to_string()))
}

pub fn parse_max_tasks(max_tasks: Option<i64>) -> Result<i32, Invalid> {
    match max_tasks {
        None => Ok(1),
        Some(n) if (1..=i64::from(MAX_TASKS_LIMIT)).contains(&n) => Ok(n as i32),
        Some(n) => Err(Invalid(format!("maxTasks must be between 1 and {MAX_TASKS_LIMIT}, got {n}"))),
    }
}

fn parse_optional_text(field: &str, text: Option<String>) -> Result<Option<String>, Invalid> {
    match text {
        Some(text) if text.chars().count() > TEXT_MAX_CHARS => {
            Err(Invalid(format!("{field} must be at most {TEXT_MAX_CHARS} characters")))
        }
        Some(text) => reject_nul(field, &text).map(|()| Some(text)),
        None => Ok(None),
    }
}

fn parse_capabilities(capabilities: Vec<String>) -> Result<Vec<String>, Invalid> {
    if capabilities.len() > 100 {
        return Err(Invalid::new("at most 100 capabilities"));
    }
    let mut parsed: Vec<String> = Vec::with_capacity(capabilities.len());
    for capability in capabilities {
        let capability = capability.trim().to_string();
        reject_nul("capabilities", &capability)?;
        if capability.is_empty() || capability.chars().count() > NAME_MAX_CHARS {
            return Err(Invalid(format!("each capability must be 1 to {NAME_MAX_CHARS} characters")));
        }
        if !parsed.contains(&capability) {
            parsed.push(capability);
        }
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_tasks_defaults_to_one_and_is_bounded() {
        assert_eq!(parse_max_tasks(None), Ok(1));
        assert_eq!(parse_max_tasks(Some(20)), Ok(20));
        assert!(parse_max_tasks(Some(0)).is_err());
        assert!(parse_max_tasks(Some(21)).is_err());
    }

    #[test]
    fn capacity_never_goes_negative() {
        assert_eq!(Capacity::new(3, 2), Capacity { current: 3, max: 2, available: 0 });
        assert_eq!(Capacity::new(0, 2).available, 2);
    }

    #[test]
    fn names_are_trimmed_and_required() {
        assert_eq!(parse_name("  worker-1 ").unwrap(), "worker-1");
        assert!(parse_name("   ").is_err());
        assert!(parse_name("a\u{0}b").is_err());
    }

    #[test]
    fn profile_update_needs_a_field() {
        assert!(ProfileUpdate::parse(None, None, None).is_err());
        assert!(ProfileUpdate::parse(None, Some("reviewer".into()), None).is_ok());
    }
}
