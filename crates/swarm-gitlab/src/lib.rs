//! GitLab for `swarm serve` (issue 47): `POST /api/gitlab/webhook`, checked against
//! `GITLAB_WEBHOOK_SECRET` (`X-Gitlab-Token`), turns a note mentioning the bot, an issue
//! or merge request opened for it or assigned to it, and a failed merge request pipeline
//! into a task; when the task ends, the tracker reporter leaves one note on the issue or
//! merge request through `GITLAB_URL`'s REST API with `GITLAB_TOKEN`.
//!
//! Architecture invariant: an adapter. It changes state only through `swarm_service`;
//! deduplication and "reported once" are database marks, nothing is kept in memory.

pub mod api;
pub mod event;
mod inbound;
mod outbound;

use std::sync::Arc;

use swarm_service::{Service, trackers::TrackerReporter};

pub use api::{DEFAULT_URL, GitLabApi};

/// The provider's name in the tracker tables and task sources.
pub const PROVIDER: &str = "gitlab";
/// Where GitLab posts its webhooks (the reference's route).
pub const WEBHOOK_PATH: &str = "/api/gitlab/webhook";
/// The bot's GitLab username when `GITLAB_BOT_NAME` is not set (the reference's).
pub const DEFAULT_BOT_NAME: &str = "agent-swarm-bot";

/// GitLab settings; secrets are redacted from `Debug`.
#[derive(Clone)]
pub struct GitLabConfig {
    /// `GITLAB_WEBHOOK_SECRET`: the webhook's secret token.
    pub webhook_secret: String,
    /// `GITLAB_URL`: the instance (`https://gitlab.com`, or your own).
    pub url: String,
    /// `GITLAB_TOKEN`: a token with the `api` scope: membership checks and notes.
    /// Without it every author counts and nothing is reported back.
    pub token: Option<String>,
    /// `GITLAB_BOT_NAME`: the username mentions and assignments name.
    pub bot_name: String,
}

impl std::fmt::Debug for GitLabConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitLabConfig")
            .field("webhook_secret", &"<redacted>")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("bot_name", &self.bot_name)
            .finish()
    }
}

pub(crate) struct GitLab {
    service: Service,
    config: GitLabConfig,
    api: Option<GitLabApi>,
}

/// GitLab on a hub: its route (answering 503 with what to set when GitLab is off), and
/// the reporter's provider when a token lets the hub write to GitLab.
pub struct GitLabIntegration {
    gitlab: Option<Arc<GitLab>>,
}

impl GitLabIntegration {
    /// `POST /api/gitlab/webhook`, to merge into the hub's router.
    pub fn router<S: Clone + Send + Sync + 'static>(&self) -> axum::Router<S> {
        let gitlab = self.gitlab.clone();
        axum::Router::new().route(
            WEBHOOK_PATH,
            axum::routing::post(move |headers, body| inbound::receive(gitlab.clone(), headers, body)),
        )
    }

    /// Whether GitLab's webhooks are taken.
    pub fn enabled(&self) -> bool {
        self.gitlab.is_some()
    }

    /// The reporter's provider, when task outcomes go back to GitLab (a token is set).
    pub fn reporter(&self) -> Option<Arc<dyn TrackerReporter>> {
        let api = self.gitlab.as_ref()?.api.clone()?;
        Some(Arc::new(outbound::GitLabReporter { api }))
    }
}

/// GitLab on `service` when configured (`None`: off, the route says how to turn it on).
pub fn start(service: &Service, config: Option<GitLabConfig>) -> GitLabIntegration {
    let gitlab = config.map(|config| {
        let api = config
            .token
            .as_deref()
            .filter(|token| !token.trim().is_empty())
            .map(|token| GitLabApi::new(&config.url, token));
        Arc::new(GitLab { service: service.clone(), config, api })
    });
    GitLabIntegration { gitlab }
}
