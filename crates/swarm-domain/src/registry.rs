//! The services registry: long-running processes agents start (a web server, a
//! preview), registered so that others can find them and a process manager can restart
//! them (`GET /ecosystem`, PM2's format). A service is named uniquely per agent;
//! registering the same name again updates it and keeps its id and status.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    Invalid,
    id::{AgentId, ServiceId},
    reject_nul,
    time::Timestamp,
};

pub const NAME_MAX_CHARS: usize = 50;
pub const PORT_DEFAULT: i32 = 3000;
pub const HEALTH_CHECK_PATH_DEFAULT: &str = "/health";
pub const FIELD_MAX_CHARS: usize = 4_000;
pub const ARGS_MAX: usize = 100;
pub const ENV_MAX: usize = 200;
/// The metadata object's JSON text, at most.
pub const METADATA_MAX_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ServiceStatus {
    #[default]
    Starting,
    Healthy,
    Unhealthy,
    Stopped,
}

impl ServiceStatus {
    pub const ALL: [ServiceStatus; 4] =
        [ServiceStatus::Starting, ServiceStatus::Healthy, ServiceStatus::Unhealthy, ServiceStatus::Stopped];

    pub fn as_str(&self) -> &'static str {
        match self {
            ServiceStatus::Starting => "starting",
            ServiceStatus::Healthy => "healthy",
            ServiceStatus::Unhealthy => "unhealthy",
            ServiceStatus::Stopped => "stopped",
        }
    }

    pub fn parse(text: &str) -> Result<Self, Invalid> {
        Self::ALL.into_iter().find(|status| status.as_str() == text.trim()).ok_or_else(|| {
            Invalid(format!(
                "unknown service status {text:?} (expected starting, healthy, unhealthy or stopped)"
            ))
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegisteredService {
    pub id: ServiceId,
    pub agent_id: AgentId,
    pub name: String,
    pub port: i32,
    pub description: Option<String>,
    pub url: Option<String>,
    pub health_check_path: String,
    pub status: ServiceStatus,
    /// What a process manager runs (PM2's `script`).
    pub script: String,
    pub cwd: Option<String>,
    pub interpreter: Option<String>,
    pub args: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    #[schema(value_type = Object)]
    pub metadata: Value,
    pub created_at: Timestamp,
    pub last_updated_at: Timestamp,
}

/// One app of PM2's ecosystem file, as `GET /ecosystem` lists them.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct EcosystemApp {
    pub name: String,
    pub script: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interpreter: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
}

impl RegisteredService {
    /// The PM2 app that restarts this service, `None` without a script. Its port reaches
    /// the process as `PORT`, as the reference's ecosystem does.
    pub fn ecosystem_app(&self) -> Option<EcosystemApp> {
        if self.script.trim().is_empty() {
            return None;
        }
        let mut env = self.env.clone().unwrap_or_default();
        env.insert("PORT".into(), self.port.to_string());
        Some(EcosystemApp {
            name: self.name.clone(),
            script: self.script.clone(),
            cwd: self.cwd.clone(),
            interpreter: self.interpreter.clone(),
            args: self.args.clone().filter(|args| !args.is_empty()),
            env: Some(env),
        })
    }
}

/// What an agent registers, before validation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServiceDraft {
    /// Default: the agent's id (the reference names an agent's one service so).
    pub name: Option<String>,
    pub port: Option<i64>,
    pub description: Option<String>,
    pub url: Option<String>,
    pub health_check_path: Option<String>,
    pub script: String,
    pub cwd: Option<String>,
    pub interpreter: Option<String>,
    pub args: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    pub metadata: Option<Value>,
}

/// A service to insert, or to update when the agent has one by that name.
#[derive(Debug, Clone, PartialEq)]
pub struct NewService {
    pub id: ServiceId,
    pub agent_id: AgentId,
    pub name: String,
    pub port: i32,
    pub description: Option<String>,
    pub url: Option<String>,
    pub health_check_path: String,
    pub script: String,
    pub cwd: Option<String>,
    pub interpreter: Option<String>,
    pub args: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    pub metadata: Value,
}

impl ServiceDraft {
    pub fn parse(self, agent: AgentId) -> Result<NewService, Invalid> {
        let name = match self.name {
            Some(name) => name.trim().to_string(),
            None => agent.to_string(),
        };
        reject_nul("name", &name)?;
        if name.is_empty() || name.chars().count() > NAME_MAX_CHARS {
            return Err(Invalid(format!("name must be 1 to {NAME_MAX_CHARS} characters")));
        }
        let port = self.port.unwrap_or(i64::from(PORT_DEFAULT));
        if !(1..=65_535).contains(&port) {
            return Err(Invalid(format!("port must be between 1 and 65535, got {port}")));
        }
        let script = self.script.trim().to_string();
        if script.is_empty() {
            return Err(Invalid::new("script must not be empty: it is what a process manager runs"));
        }
        let health_check_path = self.health_check_path.filter(|path| !path.trim().is_empty());
        let args = self.args;
        if args.as_ref().is_some_and(|args| args.len() > ARGS_MAX) {
            return Err(Invalid(format!("at most {ARGS_MAX} args")));
        }
        if self.env.as_ref().is_some_and(|env| env.len() > ENV_MAX) {
            return Err(Invalid(format!("at most {ENV_MAX} env variables")));
        }
        let metadata = self.metadata.unwrap_or_else(|| Value::Object(Default::default()));
        if !metadata.is_object() {
            return Err(Invalid::new("metadata must be a JSON object"));
        }
        let metadata_text = metadata.to_string();
        if metadata_text.len() > METADATA_MAX_BYTES || metadata_text.contains("\\u0000") {
            return Err(Invalid(format!("metadata must be at most {METADATA_MAX_BYTES} bytes, without NUL")));
        }
        let texts = [
            ("script", Some(&script)),
            ("description", self.description.as_ref()),
            ("url", self.url.as_ref()),
            ("healthCheckPath", health_check_path.as_ref()),
            ("cwd", self.cwd.as_ref()),
            ("interpreter", self.interpreter.as_ref()),
        ];
        for (field, text) in texts {
            if let Some(text) = text {
                check_text(field, text)?;
            }
        }
        for text in args.iter().flatten() {
            check_text("args", text)?;
        }
        for (key, value) in self.env.iter().flatten() {
            if key.is_empty() {
                return Err(Invalid::new("env names must not be empty"));
            }
            check_text("env", key)?;
            check_text("env", value)?;
        }
        Ok(NewService {
            id: ServiceId::new_v7(),
            agent_id: agent,
            name,
            port: port as i32,
            description: self.description,
            url: self.url,
            health_check_path: health_check_path.unwrap_or_else(|| HEALTH_CHECK_PATH_DEFAULT.to_string()),
            script,
            cwd: self.cwd,
            interpreter: self.interpreter,
            args,
            env: self.env,
            metadata,
        })
    }
}

fn check_text(field: &str, text: &str) -> Result<(), Invalid> {
    reject_nul(field, text)?;
    if text.chars().count() > FIELD_MAX_CHARS {
        return Err(Invalid(format!("{field} must be at most {FIELD_MAX_CHARS} characters")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_reference() {
        let agent = AgentId::new_v7();
        let service =
            ServiceDraft { script: "server.js".into(), ..ServiceDraft::default() }.parse(agent).unwrap();
        assert_eq!(service.name, agent.to_string());
        assert_eq!((service.port, service.health_check_path.as_str()), (3000, "/health"));
        assert_eq!(service.metadata, serde_json::json!({}));
    }

    #[test]
    fn bad_input_is_named() {
        let agent = AgentId::new_v7();
        let base = ServiceDraft { script: "s".into(), ..ServiceDraft::default() };
        let long = ServiceDraft { name: Some("x".repeat(51)), ..base.clone() };
        assert!(long.parse(agent).unwrap_err().0.contains("name"));
        let port = ServiceDraft { port: Some(0), ..base.clone() };
        assert!(port.parse(agent).unwrap_err().0.contains("port"));
        let script = ServiceDraft { script: " ".into(), ..base.clone() };
        assert!(script.parse(agent).unwrap_err().0.contains("script"));
        let metadata = ServiceDraft { metadata: Some(serde_json::json!([1])), ..base };
        assert!(metadata.parse(agent).unwrap_err().0.contains("metadata"));
    }
}
