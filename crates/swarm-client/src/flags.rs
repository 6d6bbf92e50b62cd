//! The flags that say how to reach a hub, written once for every command that talks to
//! one (`swarm task|agent|mail|trigger|stats`, `swarm worker|lead|doctor`, `swarm
//! connect`): the same names, variables, defaults and help everywhere.

use crate::{ClientError, local_hub_key};

/// Where a hub answers when nothing says otherwise (the reference's port).
pub const DEFAULT_HUB_URL: &str = "http://localhost:3013";

/// `--url` / `MCP_BASE_URL` and `--api-key` / `API_KEY`.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Hub connection")]
pub struct HubFlags {
    /// Base URL of the hub
    #[arg(long = "url", env = "MCP_BASE_URL", default_value = DEFAULT_HUB_URL, value_name = "URL")]
    pub url: String,
    /// API key of the hub, sent as `Authorization: Bearer <KEY>`. Unset, a hub on this
    /// machine is reached with the key it left for you (`swarm serve` in header mode).
    /// Prefer the variable: a flag's value is visible to every user in `ps`
    #[arg(long = "api-key", env = "API_KEY", hide_env_values = true, value_name = "KEY")]
    pub api_key: Option<String>,
}

impl HubFlags {
    /// The hub's base URL: trimmed, without a trailing `/`, the default when empty.
    pub fn base_url(&self) -> &str {
        let url = self.url.trim().trim_end_matches('/');
        if url.is_empty() { DEFAULT_HUB_URL } else { url }
    }

    /// The key given by flag or variable (empty counts as unset).
    pub fn given_key(&self) -> Option<String> {
        self.api_key.as_deref().map(str::trim).filter(|key| !key.is_empty()).map(str::to_string)
    }

    /// The key given, else the one a hub on this machine left for local commands.
    pub fn key_or_local(&self) -> Option<String> {
        self.given_key().or_else(|| local_hub_key(self.base_url()).map(|(key, _)| key))
    }

    /// Refuses a URL the client cannot use, saying what is expected.
    pub fn check_url(&self) -> Result<(), ClientError> {
        let url = self.base_url();
        let parsed = reqwest::Url::parse(url)
            .map_err(|error| ClientError::InvalidUrl { url: url.to_string(), reason: error.to_string() })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ClientError::InvalidUrl {
                url: url.to_string(),
                reason: "the scheme must be http or https".to_string(),
            });
        }
        Ok(())
    }
}
