//! The Slack bridge of `swarm serve`: messages in (Socket Mode, or the Events API at
//! `POST /slack/events`), routed into the lead's inbox or a worker's task through the
//! service; answers and task outcomes out through Slack's Web API.
//!
//! Architecture invariant: an adapter. It changes state only through `swarm_service`,
//! and keeps nothing in memory that correctness depends on (event dedup and "posted
//! once" are database marks; only the rate limit lives in memory).

mod announce;
pub mod blocks;
mod bridge;
mod events;
mod interactions;
pub mod mrkdwn;
mod routing;
pub mod signature;
mod socket_mode;
mod thread_replies;
mod web_api;

use std::sync::Arc;

use swarm_service::Service;
use tokio::task::JoinHandle;

pub use web_api::WebApi;

pub const DEFAULT_API_URL: &str = "https://slack.com/api";

/// Slack settings; secrets are redacted from `Debug`.
#[derive(Clone, Default)]
pub struct SlackConfig {
    pub bot_token: String,
    pub app_token: Option<String>,
    pub signing_secret: Option<String>,
    pub allowed_user_ids: Vec<String>,
    pub allowed_email_domains: Vec<String>,
    pub api_url: String,
    /// The dashboard's public URL (the reference's `APP_URL`), for the task links of the
    /// living messages; none: the messages name the task without a link.
    pub app_url: Option<String>,
    /// The lead may create, invite to and archive channels (`SLACK_CHANNEL_MANAGEMENT`).
    pub channel_management: bool,
}

impl std::fmt::Debug for SlackConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackConfig")
            .field("bot_token", &"<redacted>")
            .field("app_token", &self.app_token.as_ref().map(|_| "<redacted>"))
            .field("signing_secret", &self.signing_secret.as_ref().map(|_| "<redacted>"))
            .field("allowed_user_ids", &self.allowed_user_ids)
            .field("allowed_email_domains", &self.allowed_email_domains)
            .field("api_url", &self.api_url)
            .field("app_url", &self.app_url)
            .field("channel_management", &self.channel_management)
            .finish()
    }
}

/// The running bridge: its HTTP routes and background tasks (stopped when dropped).
pub struct SlackBridge {
    tasks: Vec<JoinHandle<()>>,
    bridge: Arc<bridge::Bridge>,
}

impl Drop for SlackBridge {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl SlackBridge {
    /// `POST /slack/events` and `POST /slack/interactivity`, to merge into the hub's router.
    pub fn router<S: Clone + Send + Sync + 'static>(&self) -> axum::Router<S> {
        events::router(self.bridge.clone())
    }
}

/// Give the service its Slack client, and start the bridge: Socket Mode when an app
/// token is configured, the announcer always. Returns the service to serve with.
pub async fn start(service: Service, config: SlackConfig) -> (Service, SlackBridge) {
    let api = Arc::new(WebApi::new(&config.api_url, &config.bot_token));
    let service = service.with_slack(api.clone()).with_slack_channel_management(config.channel_management);
    let bot_user_id = match api.bot_user_id().await {
        Ok(id) => Some(id),
        Err(error) => {
            tracing::error!(%error, "Slack auth.test failed: check SLACK_BOT_TOKEN; mentions cannot be recognised");
            None
        }
    };
    let bridge = Arc::new(bridge::Bridge::new(service.clone(), api, config.clone(), bot_user_id));
    let mut tasks = vec![tokio::spawn(announce::run(service.clone(), config.app_url.clone()))];
    if let Some(app_token) = config.app_token.clone() {
        tasks.push(tokio::spawn(socket_mode::run(bridge.clone(), app_token)));
    }
    (service, SlackBridge { tasks, bridge })
}
