//! GitLab on `swarm serve` (issue 47): its flags and environment (the reference's
//! names), the integration started from them and its reporter. Off unless
//! `GITLAB_WEBHOOK_SECRET` is set; the route then answers 503 saying what to set.

use clap::Args;
use swarm_service::Service;

/// GitLab: webhooks at POST /api/gitlab/webhook, and notes back through its REST API.
#[derive(Debug, Clone, Args, Default)]
pub struct GitLabArgs {
    /// The webhook's secret token (GitLab: Settings → Webhooks → Secret token;
    /// `openssl rand -hex 32`): enables GitLab at POST /api/gitlab/webhook, which takes
    /// only deliveries carrying it in X-Gitlab-Token.
    #[arg(long, env = "GITLAB_WEBHOOK_SECRET", hide_env_values = true)]
    pub gitlab_webhook_secret: Option<String>,
    /// Your GitLab instance: the REST API calls go to <URL>/api/v4.
    #[arg(long, env = "GITLAB_URL", default_value = swarm_gitlab::DEFAULT_URL, value_name = "URL")]
    pub gitlab_url: String,
    /// A GitLab token with the `api` scope (a project or group access token, or the
    /// bot user's personal one): the hub checks that whoever asks is a project member
    /// and notes each task's outcome on its issue or merge request. Without it anyone
    /// who can comment counts, and nothing is reported.
    #[arg(long, env = "GITLAB_TOKEN", hide_env_values = true)]
    pub gitlab_token: Option<String>,
    /// The bot's GitLab username: `@name` mentions and assignments to it ask for work.
    #[arg(long, env = "GITLAB_BOT_NAME", default_value = swarm_gitlab::DEFAULT_BOT_NAME, value_name = "NAME")]
    pub gitlab_bot_name: String,
    /// Turn GitLab off whatever else is set.
    #[arg(long, env = "GITLAB_DISABLE", value_parser = clap::builder::BoolishValueParser::new())]
    pub gitlab_disable: bool,
}

impl GitLabArgs {
    pub fn config(&self) -> Option<swarm_gitlab::GitLabConfig> {
        let secret = self.gitlab_webhook_secret.as_deref().map(str::trim).filter(|s| !s.is_empty())?;
        if self.gitlab_disable {
            return None;
        }
        Some(swarm_gitlab::GitLabConfig {
            webhook_secret: secret.to_string(),
            url: self.gitlab_url.trim().to_string(),
            token: self.gitlab_token.as_deref().map(str::trim).filter(|t| !t.is_empty()).map(str::to_string),
            bot_name: self.gitlab_bot_name.trim().trim_start_matches('@').to_string(),
        })
    }
}

/// The running integration, and its reporter while the hub runs.
pub struct GitLabHub {
    integration: swarm_gitlab::GitLabIntegration,
    _reporter: Option<swarm_service::Background>,
}

/// Start what is configured; the banner line says what runs.
pub fn start(service: &Service, args: &GitLabArgs, banner: &mut Vec<String>) -> GitLabHub {
    let config = args.config();
    if config.is_none() && args.gitlab_disable && args.gitlab_webhook_secret.is_some() {
        banner.push("gitlab: off (GITLAB_DISABLE)".into());
    }
    let integration = swarm_gitlab::start(service, config);
    let reporter = integration.reporter();
    if integration.enabled() {
        banner.push(format!(
            "gitlab: webhooks at POST {} ({})",
            swarm_gitlab::WEBHOOK_PATH,
            if reporter.is_some() {
                "members only; outcomes noted on GitLab"
            } else {
                "set GITLAB_TOKEN to accept project members only and note outcomes on GitLab"
            }
        ));
    }
    let reporter = reporter.map(|reporter| {
        service.start_tracker_reporter(vec![reporter], swarm_service::trackers::REPORT_EVERY)
    });
    GitLabHub { integration, _reporter: reporter }
}

impl GitLabHub {
    /// The GitLab route (always there: off, it says how to turn GitLab on) added to `routes`.
    pub fn merge_routes<S: Clone + Send + Sync + 'static>(
        &self,
        routes: Option<axum::Router<S>>,
    ) -> Option<axum::Router<S>> {
        let gitlab = self.integration.router();
        Some(match routes {
            Some(routes) => routes.merge(gitlab),
            None => gitlab,
        })
    }
}

/// The name this hub holds tracker reports under (every tracker's, not only GitLab's):
/// its machine and the address it serves, which no other running hub can share, and
/// which a hub restarted in its place has again.
pub fn reporter_name(local_addr: std::net::SocketAddr) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}/{local_addr}")
}
