//! Linear and Jira on `swarm serve` (issue 47): their flags and environment (the
//! reference's names where it has them), and the integrations started from them. Each
//! is off unless configured: Linear by its signing secret, Jira by its webhook token.

use clap::Args;
use swarm_service::Service;

/// Linear: signed webhooks at POST /api/trackers/linear/webhook, and reports back
/// through its GraphQL API.
#[derive(Debug, Clone, Args, Default)]
pub struct LinearArgs {
    /// The webhook's signing secret (Linear's webhook settings): enables Linear at POST
    /// /api/trackers/linear/webhook, which takes only deliveries signed with it.
    #[arg(long, env = "LINEAR_SIGNING_SECRET", hide_env_values = true)]
    pub linear_signing_secret: Option<String>,
    /// A Linear API key (Settings → Security & access → Personal API keys) or an OAuth
    /// access token: the hub moves issues' states and comments with it, and learns who
    /// the bot is (whose mentions and assignments count). Without it nothing is reported.
    #[arg(long, env = "LINEAR_API_KEY", hide_env_values = true)]
    pub linear_api_key: Option<String>,
    /// Linear's GraphQL endpoint.
    #[arg(long, env = "LINEAR_API_URL", default_value = swarm_linear::DEFAULT_API_URL)]
    pub linear_api_url: String,
    /// The label that makes an issue a task, when it is created with it or given it.
    #[arg(long, env = "LINEAR_SWARM_READY_LABEL", default_value = swarm_linear::webhook::DEFAULT_READY_LABEL)]
    pub linear_swarm_ready_label: String,
    /// Workflow-state types (comma-separated) in which an issue assigned to the bot
    /// becomes a task (the label overrides). Default: unstarted,started,completed,canceled;
    /// empty: only the label counts.
    #[arg(long, env = "LINEAR_ALLOWED_STATES", value_name = "TYPES")]
    pub linear_allowed_states: Option<String>,
    /// The name comments use to mention the bot (`@name`), besides the API key's user's.
    #[arg(long, env = "LINEAR_BOT_NAME", value_name = "NAME")]
    pub linear_bot_name: Option<String>,
    /// Turn Linear off whatever else is set.
    #[arg(long, env = "LINEAR_DISABLE", value_parser = clap::builder::BoolishValueParser::new())]
    pub linear_disable: bool,
}

/// Jira Cloud: webhooks at POST /api/trackers/jira/webhook/<token>, and reports back
/// through its REST API v3.
#[derive(Debug, Clone, Args, Default)]
pub struct JiraArgs {
    /// The token in the webhook's URL (`openssl rand -hex 32`): enables Jira at POST
    /// /api/trackers/jira/webhook/<token>; deliveries to any other token are refused.
    #[arg(long, env = "JIRA_WEBHOOK_TOKEN", hide_env_values = true)]
    pub jira_webhook_token: Option<String>,
    /// Your Jira site (https://your-team.atlassian.net): with JIRA_API_TOKEN, the hub
    /// comments on and transitions issues when their tasks end.
    #[arg(long, env = "JIRA_BASE_URL", value_name = "URL")]
    pub jira_base_url: Option<String>,
    /// The e-mail of the Atlassian account whose API token JIRA_API_TOKEN is (Basic
    /// auth); without it the token is sent as a bearer token.
    #[arg(long, env = "JIRA_EMAIL")]
    pub jira_email: Option<String>,
    /// An Atlassian API token (id.atlassian.com → Security → API tokens).
    #[arg(long, env = "JIRA_API_TOKEN", hide_env_values = true)]
    pub jira_api_token: Option<String>,
    /// The bot's Atlassian account id, whose assignments count. Default: the token's user.
    #[arg(long, env = "JIRA_BOT_ACCOUNT_ID", value_name = "ID")]
    pub jira_bot_account_id: Option<String>,
    /// The label that makes an issue a task, when it is created with it or given it.
    #[arg(long, env = "JIRA_SWARM_READY_LABEL", default_value = swarm_jira::webhook::DEFAULT_READY_LABEL)]
    pub jira_swarm_ready_label: String,
    /// Turn Jira off whatever else is set.
    #[arg(long, env = "JIRA_DISABLE", value_parser = clap::builder::BoolishValueParser::new())]
    pub jira_disable: bool,
}

fn present(value: &Option<String>) -> Option<String> {
    value.as_deref().map(str::trim).filter(|value| !value.is_empty()).map(str::to_string)
}

impl LinearArgs {
    pub fn config(&self) -> Option<swarm_linear::LinearConfig> {
        if self.linear_disable {
            return None;
        }
        Some(swarm_linear::LinearConfig {
            signing_secret: present(&self.linear_signing_secret)?,
            api_key: present(&self.linear_api_key),
            api_url: self.linear_api_url.clone(),
            gate: swarm_linear::webhook::Gate::new(
                Some(&self.linear_swarm_ready_label),
                self.linear_allowed_states.as_deref(),
            ),
            bot_name: present(&self.linear_bot_name),
        })
    }
}

impl JiraArgs {
    pub fn config(&self) -> Option<swarm_jira::JiraConfig> {
        if self.jira_disable {
            return None;
        }
        let label = self.jira_swarm_ready_label.trim().to_lowercase();
        Some(swarm_jira::JiraConfig {
            webhook_token: present(&self.jira_webhook_token)?,
            base_url: present(&self.jira_base_url),
            email: present(&self.jira_email),
            api_token: present(&self.jira_api_token),
            bot_account_id: present(&self.jira_bot_account_id),
            ready_label: if label.is_empty() {
                swarm_jira::webhook::DEFAULT_READY_LABEL.into()
            } else {
                label
            },
        })
    }
}

/// The integrations that run, kept for as long as the hub serves.
#[derive(Default)]
pub struct Trackers {
    linear: Option<swarm_linear::LinearIntegration>,
    jira: Option<swarm_jira::JiraIntegration>,
    /// Reports Linear's and Jira's finished tasks back (the service's tracker reporter).
    _reporter: Option<swarm_service::Background>,
}

/// The shortest webhook token taken without a warning: a short one can be guessed.
const JIRA_TOKEN_MIN_CHARS: usize = 24;

/// Start what is configured; the banner lines say what runs.
pub fn start(
    mut service: Service,
    linear: &LinearArgs,
    jira: &JiraArgs,
    banner: &mut Vec<String>,
) -> (Service, Trackers) {
    let mut trackers = Trackers::default();
    if let Some(config) = linear.config() {
        let (with_linear, integration) = swarm_linear::start(service, config);
        service = with_linear;
        banner.push(format!(
            "linear: webhooks at POST {} ({})",
            swarm_linear::WEBHOOK_PATH,
            if integration.reporter().is_some() {
                "outcomes reported to Linear"
            } else {
                "set LINEAR_API_KEY to report outcomes back to Linear"
            }
        ));
        trackers.linear = Some(integration);
    }
    if let Some(config) = jira.config() {
        if config.webhook_token.chars().count() < JIRA_TOKEN_MIN_CHARS {
            banner.push(format!(
                "WARNING: JIRA_WEBHOOK_TOKEN is shorter than {JIRA_TOKEN_MIN_CHARS} characters and could be \
                 guessed: use `openssl rand -hex 32`"
            ));
        }
        let (with_jira, integration) = swarm_jira::start(service, config);
        service = with_jira;
        banner.push(format!(
            "jira: webhooks at POST /api/trackers/jira/webhook/<JIRA_WEBHOOK_TOKEN> ({})",
            if integration.reporter().is_some() {
                "outcomes reported to Jira"
            } else {
                "set JIRA_BASE_URL and JIRA_API_TOKEN to report outcomes back to Jira"
            }
        ));
        trackers.jira = Some(integration);
    }
    let reporters: Vec<_> = [
        trackers.linear.as_ref().and_then(|linear| linear.reporter()),
        trackers.jira.as_ref().and_then(|jira| jira.reporter()),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !reporters.is_empty() {
        trackers._reporter =
            Some(service.start_tracker_reporter(reporters, swarm_service::trackers::REPORT_EVERY));
    }
    (service, trackers)
}

impl Trackers {
    /// Their routes merged into `routes` (the Slack bridge's, if any). An integration
    /// that is off answers its route 503 saying what to set (the reference's answer).
    pub fn merge_routes<S: Clone + Send + Sync + 'static>(
        &self,
        routes: Option<axum::Router<S>>,
    ) -> Option<axum::Router<S>> {
        let linear = match &self.linear {
            Some(linear) => linear.router(),
            None => not_configured(
                swarm_linear::WEBHOOK_PATH,
                "Linear is not configured on this hub: set LINEAR_SIGNING_SECRET (and LINEAR_API_KEY to \
                 report back), and leave LINEAR_DISABLE unset",
            ),
        };
        let jira = match &self.jira {
            Some(jira) => jira.router(),
            None => not_configured(
                "/api/trackers/jira/webhook/{token}",
                "Jira is not configured on this hub: set JIRA_WEBHOOK_TOKEN (and JIRA_BASE_URL, JIRA_EMAIL, \
                 JIRA_API_TOKEN to report back), and leave JIRA_DISABLE unset",
            ),
        };
        let ours = linear.merge(jira);
        Some(match routes {
            Some(routes) => routes.merge(ours),
            None => ours,
        })
    }
}

fn not_configured<S: Clone + Send + Sync + 'static>(path: &str, message: &'static str) -> axum::Router<S> {
    use axum::{http::StatusCode, response::IntoResponse};
    let answer = move || async move {
        (StatusCode::SERVICE_UNAVAILABLE, axum::Json(serde_json::json!({ "error": message }))).into_response()
    };
    axum::Router::new().route(path, axum::routing::post(answer))
}
