//! Linear for `swarm serve`: `POST /api/trackers/linear/webhook`, signed with
//! `LINEAR_SIGNING_SECRET`, turns issues labelled (or assigned) for the swarm into tasks
//! and comments that mention the bot into steering or follow-ups; the tracker reporter
//! moves the workflow state and comments through Linear's GraphQL API.
//!
//! Architecture invariant: an adapter. It changes state only through `swarm_service`;
//! deduplication and "reported once" are database marks. Only who the bot is lives in
//! memory, and it is asked of Linear again when missing.

pub mod client;
mod inbound;
pub mod outbound;
mod text;
pub mod webhook;

use std::sync::Arc;

use swarm_service::{Service, trackers::TrackerReporter};

pub use client::{DEFAULT_API_URL, LinearApi};
use webhook::{Bot, Gate};

/// The provider's name in the tracker tables and task sources.
pub const PROVIDER: &str = "linear";

/// Where Linear posts its webhooks (the reference's route).
pub const WEBHOOK_PATH: &str = "/api/trackers/linear/webhook";

/// Linear settings; secrets are redacted from `Debug`.
#[derive(Clone, Default)]
pub struct LinearConfig {
    /// `LINEAR_SIGNING_SECRET`: the webhook's signing secret.
    pub signing_secret: String,
    /// `LINEAR_API_KEY`: a personal API key (or an OAuth access token) for the GraphQL
    /// API; without it nothing is reported back and only `bot_name` names the bot.
    pub api_key: Option<String>,
    /// `LINEAR_API_URL`.
    pub api_url: String,
    pub gate: Gate,
    /// `LINEAR_BOT_NAME`: the name mentions use, when not the API key's user's.
    pub bot_name: Option<String>,
}

impl std::fmt::Debug for LinearConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinearConfig")
            .field("signing_secret", &"<redacted>")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_url", &self.api_url)
            .field("gate", &self.gate)
            .field("bot_name", &self.bot_name)
            .finish()
    }
}

pub(crate) struct Linear {
    service: Service,
    config: LinearConfig,
    api: Option<LinearApi>,
    bot: tokio::sync::Mutex<Option<Bot>>,
}

impl Linear {
    /// Who the bot is: the API key's user (asked once, again after a failure), with the
    /// configured name added.
    async fn bot(&self) -> Bot {
        let mut known = self.bot.lock().await;
        if let Some(bot) = known.as_ref() {
            return bot.clone();
        }
        let mut bot = Bot::default();
        let asked = match &self.api {
            Some(api) => match api.viewer().await {
                Ok(viewer) => {
                    bot = viewer;
                    true
                }
                Err(error) => {
                    tracing::warn!(%error, "linear: could not learn who the bot is (viewer); mentions and assignments wait for it");
                    false
                }
            },
            None => true,
        };
        if let Some(name) = &self.config.bot_name {
            bot.names.insert(0, name.clone());
        }
        if asked {
            *known = Some(bot.clone());
        }
        bot
    }
}

/// The running integration: its route, and the reporter's provider.
pub struct LinearIntegration {
    linear: Arc<Linear>,
}

impl LinearIntegration {
    /// `POST /api/trackers/linear/webhook`, to merge into the hub's router.
    pub fn router<S: Clone + Send + Sync + 'static>(&self) -> axum::Router<S> {
        inbound::router(self.linear.clone())
    }

    /// What reports task outcomes back to Linear: none without an API key.
    pub fn reporter(&self) -> Option<Arc<dyn TrackerReporter>> {
        let api = self.linear.api.clone()?;
        Some(Arc::new(outbound::LinearReporter { api }))
    }
}

/// Linear on `service`: the webhook route, and the reporter's provider when an API key
/// lets the hub write to Linear.
pub fn start(service: Service, config: LinearConfig) -> (Service, LinearIntegration) {
    let api = config.api_key.as_deref().map(|key| LinearApi::new(&config.api_url, key));
    let linear = Arc::new(Linear { service: service.clone(), config, api, bot: Default::default() });
    (service, LinearIntegration { linear })
}
