//! The hub, assembled: a store opened from the flags, the service over it with its
//! rescuer and scheduler, and one HTTP application (REST API, MCP at `/mcp`, the Slack
//! bridge's routes) served on one listener.
//!
//! `swarm serve` is argument glue over [`Hub::start`]; `swarm demo` and the integration
//! tests start the same hub inside their own process, so what they test is what users
//! run. Only [`HubOptions`] differs, and it has no flag: a test's clock and scheduler
//! tick never reach the production binary's command line.

mod args;
mod gitlab;
mod key;
mod linear_jira;
mod logging;
mod mcp_host;
mod memory;
mod open;
mod open_hub;
mod serve;

use std::{net::SocketAddr, sync::Arc, time::Duration};

use swarm_api::{ApiKey, AppState, AppStateParts};
use swarm_domain::lease::LeasePolicy;
use swarm_mcp::{AllowedHosts, HttpOptions};
use swarm_service::{Background, Service, clock::Clock};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use args::{DatabaseArgs, LimitArgs, RetentionArgs, ServeArgs, SlackArgs};
pub use gitlab::GitLabArgs;
pub use key::{HubKey, default_key_file};
pub use linear_jira::{JiraArgs, LinearArgs};
pub use logging::{init_logging, shutdown_signal};
pub use memory::tune_allocator;
pub use open::{backup, open_sqlite, open_store, restore, sqlite_path};

/// Why a hub could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error("cannot open the {what}: {hint}")]
    OpenStore { what: String, hint: &'static str, source: swarm_store::StoreError },
    #[error("DATABASE_URL must start with postgres:// (or sqlite:); got a URL of another kind")]
    DatabaseUrl,
    #[error("cannot listen on {address}: is another hub running there? pick another --port")]
    Bind { address: String, source: std::io::Error },
    #[error(
        "--agent-auth token needs an operator key (--api-key or API_KEY): without one anyone is the operator and can create any agent's token"
    )]
    TokenModeWithoutKey,
    #[error(
        "a PostgreSQL hub needs its key from you, the same on every replica: set API_KEY (or \
         --api-key), or --api-key-file on a path every replica reads (a key is generated there \
         if it is missing); --insecure-no-auth serves without a key"
    )]
    PostgresWithoutKey,
    #[error("cannot read or write the hub's key file {}: {source}", file.display())]
    KeyFile { file: std::path::PathBuf, source: std::io::Error },
    #[error("the hub's key file {} is empty: delete it to generate a new key, or write the key in it", file.display())]
    KeyFileEmpty { file: std::path::PathBuf },
    #[error(
        "the hub's key file {} can be read by other users (mode {mode:o}), so its key may be known: \
         `chmod 600` it if nobody else has read it, else delete it to generate a new key",
        file.display()
    )]
    KeyFileOpen { file: std::path::PathBuf, mode: u32 },
    #[error(
        "the API key {where_} is {length} characters long: a key must have at least {min} (anyone who \
         reaches the hub could guess a short one). Make one with `openssl rand -hex 32`, or unset \
         API_KEY to let the hub generate and keep one"
    )]
    WeakKey { where_: String, length: usize, min: usize },
    #[error("--insecure-no-auth and an API key exclude each other: unset API_KEY or drop the flag")]
    InsecureWithKey,
    #[error(
        "DATABASE_URL names a PostgreSQL database: back it up with pg_dump and restore it with \
         pg_restore (docs/deployment.md, Backups)"
    )]
    NotSqlite,
    #[error(transparent)]
    Backup(swarm_store_sqlite::BackupError),
    #[error("cannot record the hub's identity mode and lease policy in its database: {0}")]
    Settings(#[source] swarm_service::ServiceError),
    #[error("the HTTP server failed")]
    Serve(#[source] std::io::Error),
}

/// What an embedder sets that a user does not: none of it is a flag of `swarm serve`.
#[derive(Clone)]
pub struct HubOptions {
    /// How often the scheduler looks for due triggers.
    pub scheduler_tick: Duration,
    /// Where the scheduler reads the time (tests move it forward without waiting).
    pub clock: Option<Arc<dyn Clock>>,
    /// How often retention runs.
    pub retention_every: Duration,
}

impl Default for HubOptions {
    fn default() -> Self {
        HubOptions {
            scheduler_tick: swarm_service::SCHEDULER_TICK,
            clock: None,
            retention_every: swarm_service::RETENTION_EVERY,
        }
    }
}

/// A hub serving on its listener until [`Hub::stop`].
pub struct Hub {
    pub service: Service,
    local_addr: SocketAddr,
    banner: Vec<String>,
    dashboard_login: Option<String>,
    _shared_key: Option<key::SharedKeyFile>,
    stop: CancellationToken,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    _background: Background,
    _scheduler: Background,
    _retention: Background,
    _history: Background,
    _trimmer: memory::Trimmer,
    _slack: Option<swarm_slack::SlackBridge>,
    _trackers: linear_jira::Trackers,
    _gitlab: gitlab::GitLabHub,
}

impl Hub {
    /// Opens the store, starts the background work and serves on `--host:--port`.
    pub async fn start(args: &ServeArgs, options: HubOptions) -> Result<Hub, HubError> {
        let agent_auth = args.agent_auth();
        if args.insecure_no_auth && args.api_key.as_deref().is_some_and(|key| !key.trim().is_empty()) {
            return Err(HubError::InsecureWithKey);
        }
        let hub_key = key::resolve(args)?;
        if agent_auth == swarm_service::AgentAuth::Token && hub_key.key().is_none() {
            return Err(HubError::TokenModeWithoutKey);
        }
        let (store, description) = open_store(&args.database).await?;
        let lease = LeasePolicy {
            period: Duration::from_secs(args.lease_seconds),
            max_losses: i32::try_from(args.max_lease_losses).unwrap_or(i32::MAX),
            max_deliveries: i32::try_from(args.max_deliveries).unwrap_or(i32::MAX),
            result_handoff: Duration::from_secs(args.result_handoff_seconds),
            reassign_after: Duration::from_secs(args.reassign_after_seconds),
        };
        let associations =
            args.github_allowed_associations.split(',').filter(|a| !a.trim().is_empty()).map(str::to_string);
        let mut service = Service::with_lease_policy(store, lease)
            .with_private_files(private_files(args, &hub_key))
            .with_agent_auth(agent_auth)
            .with_github_associations(associations.collect());
        if let Some(clock) = options.clock {
            service = service.with_clock(clock);
        }
        if let Some(key) = hub_key.key() {
            service = service.with_secret_key(key);
        }
        let mut banner = Vec::new();
        let (service, slack) = match args.slack.config() {
            Some(config) => {
                let socket_mode = config.app_token.is_some();
                let events_api = config.signing_secret.is_some();
                let (service, bridge) = swarm_slack::start(service, config).await;
                banner.push(format!(
                    "slack: bridge on (Socket Mode: {}, Events API at POST /slack/events: {})",
                    on_off(socket_mode),
                    on_off(events_api)
                ));
                (service, Some(bridge))
            }
            None => (service, None),
        };
        let (service, trackers) = linear_jira::start(service, &args.linear, &args.jira, &mut banner);
        let gitlab = gitlab::start(&service, &args.gitlab, &mut banner);
        // Before serving: a `swarm mcp` on this database must see this hub's mode and
        // policy, not a previous hub's.
        service.hub_settings_publish().await.map_err(HubError::Settings)?;
        banner.extend(open::at_rest_lines(&service, &args.database, &hub_key).await);
        let background = service.start_background(Duration::from_secs(args.rescue_interval_seconds));
        let scheduler = service.start_scheduler(options.scheduler_tick);
        let retention = service.start_retention(args.retention.policy(), options.retention_every);
        let history = service.start_history(swarm_service::HISTORY_EVERY);

        let address = format!("{}:{}", args.host, args.port);
        let listener =
            TcpListener::bind(&address).await.map_err(|source| HubError::Bind { address, source })?;
        let local_addr = listener.local_addr().map_err(HubError::Serve)?;
        service.name_tracker_reporter(&gitlab::reporter_name(local_addr));

        let api_key = ApiKey::new(hub_key.key().map(str::to_string));
        let shared_key = match &hub_key {
            HubKey::Stored { key, .. } if serves_this_machine(&args.host) && shares_local_key(args) => {
                Some(key::share_with_local_commands(key, local_addr.port()))
            }
            _ => None,
        };
        let stop = CancellationToken::new();
        let mcp_options = HttpOptions {
            allowed_hosts: mcp_allowed_hosts(args.mcp_allowed_hosts.as_deref(), &args.host),
            capabilities: args.capabilities.clone(),
            shutdown: stop.child_token(),
        };
        let metrics = Arc::new(swarm_api::Metrics::new(args.metrics_public));
        let (webhook_rate, webhook_rate_loopback_too) = args.limits.webhook_rate();
        let caps = swarm_api::Limits::with_webhook_rate(
            args.limits.max_streams_per_agent,
            args.limits.max_polls_per_agent,
            webhook_rate,
            webhook_rate_loopback_too,
        );
        let app = app(
            AppState::new(AppStateParts {
                service: service.clone(),
                api_key: api_key.clone(),
                shutdown: stop.child_token(),
                limits: caps,
                metrics: Arc::clone(&metrics),
            }),
            mcp_options,
            gitlab.merge_routes(trackers.merge_routes(slack.as_ref().map(|bridge| bridge.router()))),
        );
        let limits = serve::ConnectionLimits {
            max_connections: args.limits.max_connections as usize,
            max_per_address: args.limits.connections_per_address() as usize,
            per_address_loopback_too: args.limits.connections_per_address_loopback_too(),
            header_read_timeout: Duration::from_secs(args.limits.header_read_timeout_seconds),
            body_read_timeout: Duration::from_secs(args.limits.body_read_timeout_seconds),
        };
        let server = tokio::spawn(serve::serve(listener, app, limits, stop.clone()));

        let mut lines = start_up_lines(args, &description, local_addr);
        let shared_key_file = match (&shared_key, &hub_key) {
            (Some(Ok(file)), HubKey::Stored { key, .. }) => Some(key::SharedKeyFile::new(file.clone(), key)),
            _ => None,
        };
        lines.splice(4..4, key_lines(&hub_key, shared_key, local_addr));
        banner.splice(0..0, lines);
        let dashboard_login = hub_key.key().map(|key| format!("http://{local_addr}/#key={key}"));
        tracing::info!(%local_addr, database = %description, "hub started");
        let trimmer = memory::Trimmer::start(service.clone(), metrics);
        Ok(Hub {
            service,
            local_addr,
            banner,
            dashboard_login,
            _shared_key: shared_key_file,
            stop,
            server,
            _background: background,
            _scheduler: scheduler,
            _retention: retention,
            _history: history,
            _trimmer: trimmer,
            _slack: slack,
            _trackers: trackers,
            _gitlab: gitlab,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `http://<address>:<port>`, as agents and clients reach it.
    pub fn url(&self) -> String {
        format!("http://{}", self.local_addr)
    }

    /// What a person starting the hub should read: where it listens, its database, its
    /// leases, warnings, and where to go next.
    pub fn banner(&self) -> &[String] {
        &self.banner
    }

    /// The dashboard's address with the key in its fragment (which browsers never send):
    /// opened, it signs the tab in. For the operator's own terminal only.
    pub fn dashboard_login_url(&self) -> Option<&str> {
        self.dashboard_login.as_deref()
    }

    /// Finishes the requests in flight (waiting MCP polls and event streams end at once)
    /// and stops serving.
    pub async fn stop(self) -> Result<(), HubError> {
        self.stop.cancel();
        let served = match self.server.await {
            Ok(result) => result.map_err(HubError::Serve),
            Err(join) => Err(HubError::Serve(std::io::Error::other(join))),
        };
        // Heartbeats kept for the next batch are written before the hub goes.
        if let Err(error) = self.service.flush_heartbeats().await {
            tracing::warn!(%error, "could not write the last batch of heartbeats");
        }
        served
    }
}

/// The files that hold this hub's key or data, absolute: the SQLite database with its
/// WAL, and the key file. A runner with an agent token must not be able to read them.
fn private_files(args: &ServeArgs, hub_key: &HubKey) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    if let Ok(database) = sqlite_path(&args.database) {
        let mut wal = database.clone().into_os_string();
        wal.push("-wal");
        files.extend([database, wal.into()]);
    }
    if let HubKey::Stored { file, .. } = hub_key {
        files.push(file.clone());
    }
    files.into_iter().map(|file| std::path::absolute(&file).unwrap_or(file)).collect()
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

/// Whether the operator wants the key left for local commands: in token mode only when
/// asked, since every agent running as this user could read it.
fn shares_local_key(args: &ServeArgs) -> bool {
    match args.share_local_key.as_str() {
        "on" => true,
        "off" => false,
        _ => args.agent_auth() == swarm_service::AgentAuth::Header,
    }
}

/// Whether clients on this machine reach the hub on loopback (it binds loopback or every
/// interface): only then is its key left for them.
fn serves_this_machine(bind_host: &str) -> bool {
    swarm_domain::local_key::is_loopback_host(bind_host)
        || bind_host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified())
}

/// Where the key is, for the operator; never the key itself (the banner may go to logs).
fn key_lines(
    hub_key: &HubKey,
    shared: Option<std::io::Result<std::path::PathBuf>>,
    local: SocketAddr,
) -> Vec<String> {
    let mut lines = Vec::new();
    match hub_key {
        HubKey::Given(_) => lines.push("api key: from API_KEY (or --api-key)".to_string()),
        HubKey::Stored { file, generated, .. } => {
            let how = if *generated { "generated on first start and kept in" } else { "kept in" };
            lines.push(format!(
                "api key: {how} {} (readable by you only); clients elsewhere need it as API_KEY",
                file.display()
            ));
            match shared {
                Some(Ok(shared)) => lines.push(format!(
                    "local commands (swarm worker, swarm connect, swarm task ...) aimed at http://localhost:{} read it from {}",
                    local.port(),
                    shared.display()
                )),
                Some(Err(error)) => lines.push(format!(
                    "WARNING: could not leave the key for local commands ({error}); give them API_KEY"
                )),
                None => {}
            }
        }
        HubKey::None => lines.push(format!(
            "WARNING: --insecure-no-auth: no API key. Anyone who can reach http://{local} can control this \
             swarm, including any web page open in a browser on this machine. Drop the flag to require a key."
        )),
    }
    lines
}

fn start_up_lines(args: &ServeArgs, database: &str, local: SocketAddr) -> Vec<String> {
    let mut lines = vec![
        format!("swarm {} listening on http://{local}", env!("CARGO_PKG_VERSION")),
        format!("database: {database}"),
        format!(
            "leases: {}s without a heartbeat; rescuer every {}s; a task is failed after {} lost leases; \
             a lead-side claim is dead-lettered after {} deliveries",
            args.lease_seconds, args.rescue_interval_seconds, args.max_lease_losses, args.max_deliveries
        ),
        format!("dashboard: http://{local}/   API docs: http://{local}/docs   MCP: http://{local}/mcp"),
        match args.agent_auth() {
            swarm_service::AgentAuth::Header => {
                "agents: named by X-Agent-ID (--agent-auth header): the API key can act as any agent"
                    .to_string()
            }
            swarm_service::AgentAuth::Token => {
                "agents: each by its own token (--agent-auth token): the API key \
                administers, create tokens with `swarm agent token create <agent>`"
                    .to_string()
            }
        },
    ];
    let configured_hosts = args.mcp_allowed_hosts.as_deref().is_some_and(|list| !list.trim().is_empty());
    if local.ip().is_unspecified() && !configured_hosts {
        lines.push(
            "NOTE: MCP at /mcp answers only requests addressed to localhost, 127.0.0.1 or ::1. \
             Set MCP_ALLOWED_HOSTS (or --mcp-allowed-hosts) to the names agents use to reach this hub."
                .to_string(),
        );
    }
    lines.push(format!(
        "next: `swarm task create \"...\" --url http://{local}` gives the hub work; `swarm worker` runs an \
         agent for it (see `swarm worker --help`); `swarm demo` shows a whole crew at work"
    ));
    lines
}

/// The hub's whole HTTP application: the API, MCP at `/mcp` and the Slack bridge's
/// routes, behind the same middleware.
pub fn app(
    state: AppState,
    mcp_options: HttpOptions,
    slack_routes: Option<axum::Router<AppState>>,
) -> axum::Router {
    let allowed_hosts = mcp_options.allowed_hosts.clone();
    let mut extra = axum::Router::new()
        .route_service("/mcp", swarm_mcp::http_service(state.service.clone(), mcp_options))
        .layer(axum::middleware::from_fn(mcp_host::explain_refused_host));
    if let Some(slack_routes) = slack_routes {
        extra = extra.merge(slack_routes);
    }
    let keyless = !state.api_key.is_set();
    let app = swarm_api::router_with(state, extra);
    match allowed_hosts {
        // A hub without a key checks every request's Host, as MCP does (open_hub.rs).
        AllowedHosts::Only(hosts) if keyless => app.layer(axum::middleware::from_fn_with_state(
            open_hub::KnownHosts::new(hosts),
            open_hub::check_host,
        )),
        _ => app,
    }
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
