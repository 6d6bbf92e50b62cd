//! `swarm serve`: open the store, mount the HTTP API, run until SIGINT or SIGTERM.

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use anyhow::{Context, bail};
use clap::Args;
use swarm_api::{ApiKey, AppState};
use swarm_domain::lease::LeasePolicy;
use swarm_mcp::{AllowedHosts, HttpOptions};
use swarm_service::Service;
use swarm_store::Store;
use swarm_store_postgres::PgStore;
use swarm_store_sqlite::SqliteStore;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Port to listen on (0 picks a free one and prints it).
    #[arg(long, env = "PORT", default_value_t = 3013)]
    port: u16,
    /// Address to bind. The default serves this machine only; use 0.0.0.0 to serve the network.
    #[arg(long, env = "HOST", default_value = "127.0.0.1")]
    host: String,
    #[command(flatten)]
    database: DatabaseArgs,
    /// Require `Authorization: Bearer <key>` on every request but /health. Empty = open hub.
    #[arg(long, env = "API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Log format on stderr: text or json. The level is set with RUST_LOG (default info).
    #[arg(long, env = "LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Seconds a claim (an offer under review, a task in progress) lasts without a
    /// heartbeat from its holder; also how long an agent may stay silent before it is
    /// marked offline. Runners heartbeat well within it.
    #[arg(long, env = "LEASE_SECONDS", default_value_t = 45, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    lease_seconds: u64,
    /// Seconds between two passes of the rescuer, which returns expired claims.
    #[arg(long, env = "RESCUE_INTERVAL_SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3_600))]
    rescue_interval_seconds: u64,
    /// A task whose holders let its lease run out this many times is failed with a reason.
    #[arg(long, env = "MAX_LEASE_LOSSES", default_value_t = 3, value_parser = clap::value_parser!(i64).range(1..=1_000))]
    max_lease_losses: i64,
    /// Host names (comma-separated, `name` or `name:port`) that MCP at /mcp answers; others
    /// get 403, which guards against DNS rebinding. Default: localhost, 127.0.0.1, ::1 and
    /// --host. Use `*` for any host (then rely on API_KEY).
    #[arg(long, env = "MCP_ALLOWED_HOSTS", value_name = "HOSTS")]
    mcp_allowed_hosts: Option<String>,
    #[command(flatten)]
    slack: SlackArgs,
    /// Milliseconds between two passes of the scheduler (tests shorten it).
    #[arg(long, env = "SWARM_SCHEDULER_TICK_MS", default_value_t = 1000, hide = true,
          value_parser = clap::value_parser!(u64).range(10..=60_000))]
    scheduler_tick_ms: u64,
    /// Read the scheduler's time from this file (RFC 3339) instead of the system clock:
    /// for tests that move time forward without waiting.
    #[arg(long, env = "SWARM_TEST_CLOCK_FILE", hide = true)]
    test_clock_file: Option<PathBuf>,
}

/// Slack: the bridge starts when a bot token is set, with Socket Mode (app token) and/or
/// the Events API at POST /slack/events (signing secret).
#[derive(Debug, Args)]
pub struct SlackArgs {
    /// Bot token (xoxb-...): enables the Slack bridge.
    #[arg(long, env = "SLACK_BOT_TOKEN", hide_env_values = true)]
    slack_bot_token: Option<String>,
    /// App-level token (xapp-...) with connections:write: enables Socket Mode.
    #[arg(long, env = "SLACK_APP_TOKEN", hide_env_values = true)]
    slack_app_token: Option<String>,
    /// Signing secret: enables the Events API at POST /slack/events.
    #[arg(long, env = "SLACK_SIGNING_SECRET", hide_env_values = true)]
    slack_signing_secret: Option<String>,
    /// Comma-separated Slack user ids allowed to talk to the swarm (default: everyone,
    /// unless SLACK_ALLOWED_EMAIL_DOMAINS is set).
    #[arg(long, env = "SLACK_ALLOWED_USER_IDS", value_name = "IDS")]
    slack_allowed_user_ids: Option<String>,
    /// Comma-separated e-mail domains whose users may talk to the swarm.
    #[arg(long, env = "SLACK_ALLOWED_EMAIL_DOMAINS", value_name = "DOMAINS")]
    slack_allowed_email_domains: Option<String>,
    /// Slack Web API base URL (tests point it at a stand-in).
    #[arg(long, env = "SLACK_API_URL", default_value = swarm_slack::DEFAULT_API_URL)]
    slack_api_url: String,
}

impl SlackArgs {
    fn config(&self) -> Option<swarm_slack::SlackConfig> {
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
        })
    }
}

/// Where the data lives: shared by `swarm serve` and `swarm mcp`, which may open the
/// same database at once.
#[derive(Debug, Args)]
pub struct DatabaseArgs {
    /// SQLite database file, created when missing (the default backend).
    #[arg(long, env = "DATABASE_PATH", default_value = "./swarm.db")]
    db: PathBuf,
    /// A postgres:// URL selects PostgreSQL instead of the SQLite file.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    init_logging(&args.log_format, "info,tower_http=warn,sqlx=warn");
    let (store, description) = open_store(&args.database).await?;
    let api_key = ApiKey::new(args.api_key.clone());
    let lease = LeasePolicy {
        period: Duration::from_secs(args.lease_seconds),
        max_losses: i32::try_from(args.max_lease_losses).unwrap_or(i32::MAX),
    };
    let mut service = Service::with_lease_policy(store, lease);
    if let Some(path) = &args.test_clock_file {
        tracing::warn!(path = %path.display(), "the scheduler reads its time from a file (test clock)");
        service = service.with_clock(Arc::new(swarm_service::clock::FileClock::new(path.clone())));
    }
    let (service, slack) = match args.slack.config() {
        Some(config) => {
            let socket_mode = config.app_token.is_some();
            let events_api = config.signing_secret.is_some();
            let (service, bridge) = swarm_slack::start(service, config).await;
            println!(
                "slack: bridge on (Socket Mode: {}, Events API at POST /slack/events: {})",
                if socket_mode { "on" } else { "off" },
                if events_api { "on" } else { "off" }
            );
            (service, Some(bridge))
        }
        None => (service, None),
    };
    // Runs until dropped at the end of `run`.
    let _background = service.start_background(Duration::from_secs(args.rescue_interval_seconds));
    let _scheduler = service.start_scheduler(Duration::from_millis(args.scheduler_tick_ms));
    let mcp_shutdown = CancellationToken::new();
    let mcp_options = HttpOptions {
        allowed_hosts: mcp_allowed_hosts(args.mcp_allowed_hosts.as_deref(), &args.host),
        shutdown: mcp_shutdown.clone(),
    };
    let app = hub_app(service, api_key.clone(), mcp_options, slack.as_ref().map(|bridge| bridge.router()));

    let address = format!("{}:{}", args.host, args.port);
    let listener = TcpListener::bind(&address).await.with_context(|| {
        format!("cannot listen on {address}: is another hub running there? pick another --port")
    })?;
    let local: SocketAddr = listener.local_addr()?;
    println!("swarm {} listening on http://{local}", env!("CARGO_PKG_VERSION"));
    println!("database: {description}");
    println!(
        "leases: {}s without a heartbeat; rescuer every {}s; a task is failed after {} lost leases",
        args.lease_seconds, args.rescue_interval_seconds, args.max_lease_losses
    );
    if !api_key.is_set() {
        println!(
            "WARNING: no API key is set: anyone who can reach http://{local} can control this swarm. \
             Set API_KEY (or --api-key) to require `Authorization: Bearer <key>`."
        );
    }
    let configured_hosts = args.mcp_allowed_hosts.as_deref().is_some_and(|list| !list.trim().is_empty());
    if local.ip().is_unspecified() && !configured_hosts {
        println!(
            "NOTE: MCP at /mcp answers only requests addressed to localhost, 127.0.0.1 or ::1. \
             Set MCP_ALLOWED_HOSTS (or --mcp-allowed-hosts) to the names agents use to reach this hub."
        );
    }
    tracing::info!(%local, database = %description, "hub started");

    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            // MCP requests still waiting (poll-task) end now instead of holding shutdown.
            mcp_shutdown.cancel();
        })
        .await
        .context("the HTTP server failed")?;
    println!("swarm stopped");
    Ok(())
}

/// The hub's whole HTTP application: the API, and MCP at `/mcp` behind the same
/// middleware. `swarm serve` and `swarm demo` both serve this.
pub fn hub_app(
    service: Service,
    api_key: ApiKey,
    mcp_options: HttpOptions,
    slack_routes: Option<axum::Router<AppState>>,
) -> axum::Router {
    // One token ends MCP's waiting requests and the dashboard's event streams at shutdown.
    let shutdown = mcp_options.shutdown.clone();
    let mut extra =
        axum::Router::new().route_service("/mcp", swarm_mcp::http_service(service.clone(), mcp_options));
    if let Some(slack_routes) = slack_routes {
        extra = extra.merge(slack_routes);
    }
    swarm_api::router_with(AppState { service, api_key, shutdown }, extra)
}

/// Loopback plus the address the hub binds, unless told otherwise.
fn mcp_allowed_hosts(configured: Option<&str>, bind_host: &str) -> AllowedHosts {
    if let Some(list) = configured.filter(|list| !list.trim().is_empty()) {
        return AllowedHosts::parse(list);
    }
    let mut hosts = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    let unspecified = bind_host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified());
    if !unspecified && !hosts.iter().any(|host| host == bind_host) {
        hosts.push(bind_host.to_string());
    }
    AllowedHosts::Only(hosts)
}

pub async fn open_store(args: &DatabaseArgs) -> anyhow::Result<(Arc<dyn Store>, String)> {
    match args.database_url.as_deref().filter(|url| !url.is_empty()) {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            let store = PgStore::connect(url).await.context(
                "cannot open the PostgreSQL database: check DATABASE_URL and that the server is up",
            )?;
            let description = store.describe();
            Ok((Arc::new(store), description))
        }
        Some(url) => match url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) {
            Some(path) => open_sqlite(&PathBuf::from(path)).await,
            None => bail!("DATABASE_URL must start with postgres:// (or sqlite:); got a URL of another kind"),
        },
        None => open_sqlite(&args.db).await,
    }
}

pub async fn open_sqlite(path: &std::path::Path) -> anyhow::Result<(Arc<dyn Store>, String)> {
    let store = SqliteStore::open(path).await.with_context(|| {
        format!("cannot open the SQLite database {}: check the path and its permissions", path.display())
    })?;
    let description = store.describe();
    Ok((Arc::new(store), description))
}

/// Logs go to stderr; `default_filter` applies when RUST_LOG is unset.
pub fn init_logging(format: &str, default_filter: &str) {
    use tracing_subscriber::{EnvFilter, fmt};
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // Colours only for a person at a terminal.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = if format == "json" { builder.json().try_init() } else { builder.with_ansi(ansi).try_init() };
}

pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down: finishing requests in flight");
}
