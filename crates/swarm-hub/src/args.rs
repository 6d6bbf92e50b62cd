//! The flags and environment of `swarm serve` (and the database flags `swarm mcp` shares).

use std::path::PathBuf;

use clap::Args;
use swarm_domain::retention::RetentionPolicy;

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Port to listen on (0 picks a free one and prints it).
    #[arg(long, env = "PORT", default_value_t = 3013)]
    pub port: u16,
    /// Address to bind. The default serves this machine only; use 0.0.0.0 to serve the network.
    #[arg(long, env = "HOST", default_value = "127.0.0.1")]
    pub host: String,
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// The operator key: every request but GET /health and the static pages (the
    /// dashboard at / and the API docs at /docs, which ask for the key before they fetch
    /// data) needs `Authorization: Bearer <key>`; Slack's events and triggers' webhooks
    /// are signed instead. Unset: the hub uses the key in --api-key-file, generating it
    /// on first start, and leaves it for this user's local `swarm` commands.
    #[arg(long, env = "API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Where the hub keeps its key when API_KEY is unset (created 0600 with a new random
    /// key when missing). Default: beside the SQLite database (`./swarm.db.key`). A
    /// PostgreSQL hub has no default: give its replicas API_KEY or a shared file.
    #[arg(long, env = "API_KEY_FILE", value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,
    /// Serve with no key at all: anyone who can reach the port, and any web page open in
    /// a browser on this machine, can control the swarm. For throwaway setups only.
    #[arg(long, env = "INSECURE_NO_AUTH", value_parser = clap::builder::BoolishValueParser::new())]
    pub insecure_no_auth: bool,
    /// What names the calling agent. `header`: its `X-Agent-ID`, believed (the
    /// reference's; whoever holds the API key can act as any agent). `token`: its own
    /// token (`Authorization: Bearer <token>`, from `POST /api/agents/:id/tokens`), which
    /// acts as that agent only; the API key then administers but cannot act as an agent.
    /// `token` needs an API key.
    #[arg(long, env = "AGENT_AUTH", default_value = "header", value_parser = ["header", "token"])]
    pub agent_auth: String,
    /// Whether to leave the key where this user's local `swarm` commands find it
    /// (`~/.config/swarm/keys/localhost-<port>.key`). `auto`: yes in header mode, no in
    /// token mode, where agents running as this user would read it and mint any token.
    #[arg(long, env = "SHARE_LOCAL_KEY", default_value = "auto", value_parser = ["auto", "on", "off"])]
    pub share_local_key: String,
    /// Log format on stderr: text or json. The level is set with RUST_LOG (default info).
    #[arg(long, env = "LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    /// Seconds a claim (an offer under review, a task in progress) lasts without a
    /// heartbeat from its holder; also how long an agent may stay silent before it is
    /// marked offline. Runners heartbeat well within it.
    #[arg(long, env = "LEASE_SECONDS", default_value_t = 45, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub lease_seconds: u64,
    /// Seconds between two passes of the rescuer, which returns expired claims.
    #[arg(long, env = "RESCUE_INTERVAL_SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub rescue_interval_seconds: u64,
    /// A task whose holders let its lease run out this many times is failed with a reason.
    #[arg(long, env = "MAX_LEASE_LOSSES", default_value_t = 3, value_parser = clap::value_parser!(i64).range(1..=1_000))]
    pub max_lease_losses: i64,
    /// A lead-side claim (inbox message, mentions, urgent mail, task result) handed to the
    /// agent's runs this many times without being handled becomes a dead letter, shown on
    /// the dashboard, until an operator requeues it.
    #[arg(long, env = "MAX_DELIVERIES", default_value_t = 5, value_parser = clap::value_parser!(i64).range(1..=1_000))]
    pub max_deliveries: i64,
    /// Seconds a finished task's result waits for its awaiting agent to come back online
    /// (or after its delivery was dead-lettered) before it goes to the lead instead.
    #[arg(long, env = "RESULT_HANDOFF_SECONDS", default_value_t = 900, value_parser = clap::value_parser!(u64).range(1..=2_592_000))]
    pub result_handoff_seconds: u64,
    /// Seconds an agent may stay offline before it loses its pending, in-progress and
    /// offered tasks: pool work goes back to the pool, work asked of that agent to the
    /// backlog, and the lead is told (`tasks_handed_back`). 0 keeps them waiting for it.
    #[arg(long, env = "REASSIGN_AFTER_SECONDS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(0..=2_592_000))]
    pub reassign_after_seconds: u64,
    /// Host names (comma-separated, `name` or `name:port`) that MCP at /mcp answers; others
    /// get 403, which guards against DNS rebinding. Default: localhost, 127.0.0.1, ::1 and
    /// --host. Use `*` for any host (then rely on API_KEY).
    #[arg(long, env = "MCP_ALLOWED_HOSTS", value_name = "HOSTS")]
    pub mcp_allowed_hosts: Option<String>,
    /// Opt-in MCP tool groups offered to every agent (comma-separated: scheduling, services,
    /// epics, slack, slack-files, channels-admin, steering, mail-history, task-admin, profile).
    /// Default none: an agent gets a group by naming it in its capabilities; the lead has
    /// epics, slack, steering, mail-history and task-admin. Every tool offered costs bytes in
    /// every model call.
    #[arg(long, env = "CAPABILITIES", value_name = "GROUPS", default_value = "")]
    pub capabilities: String,
    /// Serve GET /metrics (Prometheus text format) without the API key, for a scraper
    /// that holds none. The numbers name no task or agent, but they do show how busy
    /// the swarm is: keep the port private when you set this.
    #[arg(long, env = "METRICS_PUBLIC", value_parser = clap::builder::BoolishValueParser::new())]
    pub metrics_public: bool,
    /// Whose GitHub comments and new issues may ask a `github` trigger's bot for work, by
    /// GitHub's `author_association` (comma-separated; `*` for anyone, which lets anyone
    /// who can comment on a public repository put text into an agent's prompt).
    /// Assignments, review requests and failed checks need repository access anyway.
    #[arg(
        long,
        env = "GITHUB_ALLOWED_ASSOCIATIONS",
        default_value = "OWNER,MEMBER,COLLABORATOR",
        value_name = "LIST"
    )]
    pub github_allowed_associations: String,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub retention: RetentionArgs,
    #[command(flatten)]
    pub slack: SlackArgs,
    #[command(flatten)]
    pub linear: crate::linear_jira::LinearArgs,
    #[command(flatten)]
    pub jira: crate::linear_jira::JiraArgs,
    #[command(flatten)]
    pub gitlab: crate::gitlab::GitLabArgs,
}

impl ServeArgs {
    /// `--agent-auth` as the service's mode (clap allowed only the two names).
    pub fn agent_auth(&self) -> swarm_service::AgentAuth {
        swarm_service::AgentAuth::parse(&self.agent_auth).unwrap_or_default()
    }
}

/// What one client may hold: a flood of connections, half-sent requests or endless
/// streams must not starve the runners' polls.
#[derive(Debug, Clone, Args)]
pub struct LimitArgs {
    /// Connections served at once; one more is answered 503 and closed.
    #[arg(long, env = "MAX_CONNECTIONS", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
    /// Connections one client address (an IPv6 client's /64) may hold at once; one more
    /// is answered 429 and closed. Default: --max-connections less an eighth (896 of
    /// 1024) for every address but this machine's own (loopback), so that no remote
    /// address takes the slots every other client needs, while runners, agent CLIs and
    /// dashboards on the hub's machine (one address, a few connections each, a thousand
    /// agents in `swarm-bench memory`) are held only to --max-connections. Set, it holds
    /// every address to it, loopback included: do so behind a reverse proxy on the same
    /// machine (every client is then the proxy's loopback address) only with a share
    /// that fits all of them, and cap connections per client in the proxy.
    #[arg(long, env = "MAX_CONNECTIONS_PER_ADDRESS", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections_per_address: Option<u32>,
    /// Seconds a client has to send a request's headers before its connection is closed.
    #[arg(long, env = "HEADER_READ_TIMEOUT_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub header_read_timeout_seconds: u64,
    /// Seconds a client has to send a request's body once its headers arrived; a body
    /// still owing bytes then is answered 408 and its connection closed. With the header
    /// timeout this bounds how long any request may take to arrive. The largest body
    /// (a 32 MB batch of session logs) needs about 4.5 Mbit/s at the default.
    #[arg(long, env = "BODY_READ_TIMEOUT_SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub body_read_timeout_seconds: u64,
    /// Webhook deliveries (`POST /api/webhooks/<name>`, GitHub's included) one client
    /// address may make per minute, in bursts of up to as many; one more is 429 with
    /// Retry-After. Default: 120, for every address but loopback (this machine's own
    /// scripts); set, it holds every address to it, loopback included (behind a reverse
    /// proxy on the same machine every delivery is the proxy's address: budget for all
    /// senders, or rate-limit in the proxy). 0 = no limit. GitHub delivers from several
    /// addresses.
    #[arg(long, env = "WEBHOOK_RATE_PER_MINUTE", value_name = "N", value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub webhook_rate_per_minute: Option<u32>,
    /// Open `GET /api/events` streams per caller (an agent, or the operator); one more is 429.
    #[arg(long, env = "MAX_STREAMS_PER_AGENT", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_streams_per_agent: u32,
    /// Parked polls (`GET /api/poll?wait=`) per agent at once; one more is 429.
    #[arg(long, env = "MAX_POLLS_PER_AGENT", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_polls_per_agent: u32,
}

/// `--webhook-rate-per-minute` when not given.
pub const WEBHOOK_RATE_PER_MINUTE: u32 = 120;

impl LimitArgs {
    /// `--max-connections-per-address`, or `--max-connections` less an eighth (at least 1).
    pub fn connections_per_address(&self) -> u32 {
        self.max_connections_per_address.unwrap_or((self.max_connections - self.max_connections / 8).max(1))
    }

    /// Whether loopback clients are held to the per-address share: only when it was set.
    pub fn connections_per_address_loopback_too(&self) -> bool {
        self.max_connections_per_address.is_some()
    }

    /// `--webhook-rate-per-minute` (0: no limit), and whether it holds loopback clients
    /// too (only when it was set).
    pub fn webhook_rate(&self) -> (u32, bool) {
        match self.webhook_rate_per_minute {
            Some(rate) => (rate, true),
            None => (WEBHOOK_RATE_PER_MINUTE, false),
        }
    }
}

impl Default for LimitArgs {
    /// The flags' defaults, for embedders that build `ServeArgs` field by field.
    fn default() -> Self {
        LimitArgs {
            max_connections: 1024,
            max_connections_per_address: None,
            header_read_timeout_seconds: 10,
            body_read_timeout_seconds: 60,
            webhook_rate_per_minute: None,
            max_streams_per_agent: 16,
            max_polls_per_agent: 8,
        }
    }
}

/// How long the record of finished work is kept. The hub removes what is older in small
/// batches in the background; a task itself, and anything still in play, stays.
#[derive(Debug, Clone, Args)]
pub struct RetentionArgs {
    /// Days a finished task's session logs are kept (and log lines of no task). 0 = for good.
    #[arg(long, env = "RETAIN_SESSION_LOGS_DAYS", default_value_t = 14, value_parser = clap::value_parser!(u32).range(0..=36_500))]
    pub retain_session_logs_days: u32,
    /// Days a finished task's events are kept (and events of no task, such as an agent's
    /// status changes). 0 = for good.
    #[arg(long, env = "RETAIN_EVENTS_DAYS", default_value_t = 30, value_parser = clap::value_parser!(u32).range(0..=36_500))]
    pub retain_events_days: u32,
    /// Days delivered trigger hand-outs are kept: task results delivered to their awaiting
    /// session, handed-back tasks the lead was told about, expired webhook replay marks,
    /// Slack's once-only marks. 0 = for good.
    #[arg(long, env = "RETAIN_DELIVERED_TRIGGERS_DAYS", default_value_t = 30, value_parser = clap::value_parser!(u32).range(0..=36_500))]
    pub retain_delivered_triggers_days: u32,
    /// Days read agent mail (answered, if its sender awaited an answer) and handled inbox
    /// messages (read, responded, delegated) are kept. 0 = for good.
    #[arg(long, env = "RETAIN_READ_MAIL_DAYS", default_value_t = 90, value_parser = clap::value_parser!(u32).range(0..=36_500))]
    pub retain_read_mail_days: u32,
    /// Days a finished task itself is kept, with everything of it (tags, logs, events,
    /// costs), once the lead was told about it and no task, trigger session or inbox
    /// message refers to it. 0 (the default) = for good: tasks are the swarm's record.
    #[arg(long, env = "RETAIN_FINISHED_TASKS_DAYS", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=36_500))]
    pub retain_finished_tasks_days: u32,
}

impl RetentionArgs {
    pub fn policy(&self) -> RetentionPolicy {
        RetentionPolicy::from_days(
            self.retain_session_logs_days,
            self.retain_events_days,
            self.retain_delivered_triggers_days,
            self.retain_read_mail_days,
        )
        .with_finished_tasks_days(self.retain_finished_tasks_days)
    }
}

impl Default for RetentionArgs {
    /// The flags' defaults, for embedders that build `ServeArgs` field by field.
    fn default() -> Self {
        RetentionArgs {
            retain_session_logs_days: 14,
            retain_events_days: 30,
            retain_delivered_triggers_days: 30,
            retain_read_mail_days: 90,
            retain_finished_tasks_days: 0,
        }
    }
}

/// Where the data lives: shared by `swarm serve` and `swarm mcp`, which may open the
/// same database at once.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// SQLite database file, created when missing (the default backend).
    #[arg(long, env = "DATABASE_PATH", default_value = "./swarm.db")]
    pub db: PathBuf,
    /// A postgres:// URL selects PostgreSQL instead of the SQLite file.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// SQLite: write each commit's WAL frames with one system call instead of two per
    /// page (5-14 % more claims per second). Off by default: experimental (its power-loss
    /// runs pass, docs/reliability.md).
    #[arg(long, env = "SQLITE_WAL_BATCHING", value_parser = clap::builder::BoolishValueParser::new())]
    pub sqlite_wal_batching: bool,
}

/// Slack: the bridge starts when a bot token is set, with Socket Mode (app token) and/or
/// the Events API at POST /slack/events (signing secret).
#[derive(Debug, Clone, Args)]
pub struct SlackArgs {
    /// Bot token (xoxb-...): enables the Slack bridge.
    #[arg(long, env = "SLACK_BOT_TOKEN", hide_env_values = true)]
    pub slack_bot_token: Option<String>,
    /// App-level token (xapp-...) with connections:write: enables Socket Mode.
    #[arg(long, env = "SLACK_APP_TOKEN", hide_env_values = true)]
    pub slack_app_token: Option<String>,
    /// Signing secret: enables the Events API at POST /slack/events.
    #[arg(long, env = "SLACK_SIGNING_SECRET", hide_env_values = true)]
    pub slack_signing_secret: Option<String>,
    /// Comma-separated Slack user ids allowed to talk to the swarm (default: everyone,
    /// unless SLACK_ALLOWED_EMAIL_DOMAINS is set).
    #[arg(long, env = "SLACK_ALLOWED_USER_IDS", value_name = "IDS")]
    pub slack_allowed_user_ids: Option<String>,
    /// Comma-separated e-mail domains whose users may talk to the swarm.
    #[arg(long, env = "SLACK_ALLOWED_EMAIL_DOMAINS", value_name = "DOMAINS")]
    pub slack_allowed_email_domains: Option<String>,
    /// Slack Web API base URL (tests point it at a stand-in).
    #[arg(long, env = "SLACK_API_URL", default_value = swarm_slack::DEFAULT_API_URL)]
    pub slack_api_url: String,
    /// The dashboard's public URL (https://swarm.example.com): the Slack status messages
    /// link each task's page there; without it they name the task without a link.
    #[arg(long, env = "APP_URL", value_name = "URL")]
    pub app_url: Option<String>,
    /// Let the lead create, invite to and archive Slack channels (slack-create-channel,
    /// slack-invite-to-channel, slack-archive-channel); off: those tools are refused.
    #[arg(long, env = "SLACK_CHANNEL_MANAGEMENT")]
    pub slack_channel_management: bool,
}

impl SlackArgs {
    /// The bridge's settings, or `None` without a bot token.
    pub fn config(&self) -> Option<swarm_slack::SlackConfig> {
        let present = |value: &Option<String>| value.clone().filter(|value| !value.trim().is_empty());
        let list = |value: &Option<String>| -> Vec<String> {
            value
                .iter()
                .flat_map(|list| list.split(','))
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(str::to_string)
                .collect()
        };
        Some(swarm_slack::SlackConfig {
            bot_token: present(&self.slack_bot_token)?,
            app_token: present(&self.slack_app_token),
            signing_secret: present(&self.slack_signing_secret),
            allowed_user_ids: list(&self.slack_allowed_user_ids),
            allowed_email_domains: list(&self.slack_allowed_email_domains),
            api_url: self.slack_api_url.clone(),
            app_url: present(&self.app_url),
            channel_management: self.slack_channel_management,
        })
    }
}
