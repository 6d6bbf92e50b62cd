//! Jira Cloud for `swarm serve`: `POST /api/trackers/jira/webhook/<JIRA_WEBHOOK_TOKEN>`
//! turns issues assigned to the bot or labelled for the swarm into tasks; the tracker
//! reporter comments (ADF) and transitions the issue through Jira's REST API v3 when
//! the task ends.
//!
//! Architecture invariant: an adapter. It changes state only through `swarm_service`;
//! deduplication and "reported once" are database marks. Only the bot's account id
//! lives in memory, and it is asked of Jira again when missing.

pub mod adf;
pub mod client;
mod inbound;
pub mod outbound;
pub mod webhook;

use std::sync::Arc;

use swarm_service::{Service, trackers::TrackerReporter};

pub use client::JiraApi;
pub use inbound::WEBHOOK_PREFIX;

/// The provider's name in the tracker tables and task sources.
pub const PROVIDER: &str = "jira";

/// Jira settings; secrets are redacted from `Debug`.
#[derive(Clone, Default)]
pub struct JiraConfig {
    /// `JIRA_WEBHOOK_TOKEN`: the token in the webhook's URL.
    pub webhook_token: String,
    /// `JIRA_BASE_URL`: the site (`https://your-team.atlassian.net`); with
    /// `JIRA_API_TOKEN`, what lets the hub write back.
    pub base_url: Option<String>,
    /// `JIRA_EMAIL`: with an API token, Basic auth (Jira Cloud's scheme); without, the
    /// token is sent as a bearer token.
    pub email: Option<String>,
    pub api_token: Option<String>,
    /// `JIRA_BOT_ACCOUNT_ID`: the bot's Atlassian account id, when not the token's user's.
    pub bot_account_id: Option<String>,
    /// `JIRA_SWARM_READY_LABEL`, lowercased.
    pub ready_label: String,
}

impl std::fmt::Debug for JiraConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JiraConfig")
            .field("webhook_token", &"<redacted>")
            .field("base_url", &self.base_url)
            .field("email", &self.email)
            .field("api_token", &self.api_token.as_ref().map(|_| "<redacted>"))
            .field("bot_account_id", &self.bot_account_id)
            .field("ready_label", &self.ready_label)
            .finish()
    }
}

pub(crate) struct Jira {
    service: Service,
    config: JiraConfig,
    api: Option<JiraApi>,
    bot: tokio::sync::Mutex<Option<String>>,
}

impl Jira {
    /// The bot's account id: configured, else the token's user (asked once, again after
    /// a failure); `None` when neither is known (then only the label counts).
    async fn bot(&self) -> Option<String> {
        if let Some(id) = &self.config.bot_account_id {
            return Some(id.clone());
        }
        let mut known = self.bot.lock().await;
        if known.is_none()
            && let Some(api) = &self.api
        {
            match api.myself().await {
                Ok(id) => *known = Some(id),
                Err(error) => tracing::warn!(%error, "jira: could not learn the bot's account id (/myself)"),
            }
        }
        known.clone()
    }
}

/// The running integration: its route, and the reporter's provider.
pub struct JiraIntegration {
    jira: Arc<Jira>,
}

impl JiraIntegration {
    /// `POST /api/trackers/jira/webhook/{token}`, to merge into the hub's router.
    pub fn router<S: Clone + Send + Sync + 'static>(&self) -> axum::Router<S> {
        inbound::router(self.jira.clone())
    }

    /// What reports task outcomes back to Jira: none without a base URL and a token.
    pub fn reporter(&self) -> Option<Arc<dyn TrackerReporter>> {
        let api = self.jira.api.clone()?;
        Some(Arc::new(outbound::JiraReporter { api }))
    }
}

pub fn start(service: Service, config: JiraConfig) -> (Service, JiraIntegration) {
    let api = match (&config.base_url, &config.api_token) {
        (Some(base_url), Some(token)) => Some(JiraApi::new(base_url, config.email.as_deref(), token)),
        _ => None,
    };
    let jira = Arc::new(Jira { service: service.clone(), config, api, bot: Default::default() });
    (service, JiraIntegration { jira })
}
