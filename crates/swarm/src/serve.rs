//! `swarm serve`: open the store, mount the HTTP API, run until SIGINT or SIGTERM.

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use anyhow::{Context, bail};
use clap::Args;
use swarm_api::{ApiKey, AppState};
use swarm_service::Service;
use swarm_store::Store;
use swarm_store_postgres::PgStore;
use swarm_store_sqlite::SqliteStore;
use tokio::net::TcpListener;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Port to listen on (0 picks a free one and prints it).
    #[arg(long, env = "PORT", default_value_t = 3013)]
    port: u16,
    /// Address to bind. The default serves this machine only; use 0.0.0.0 to serve the network.
    #[arg(long, env = "HOST", default_value = "127.0.0.1")]
    host: String,
    /// SQLite database file, created when missing (the default backend).
    #[arg(long, env = "DATABASE_PATH", default_value = "./swarm.db")]
    db: PathBuf,
    /// A postgres:// URL selects PostgreSQL instead of the SQLite file.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// Require `Authorization: Bearer <key>` on every request but /health. Empty = open hub.
    #[arg(long, env = "API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Log format on stderr: text or json. The level is set with RUST_LOG (default info).
    #[arg(long, env = "LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    init_logging(&args.log_format);
    let (store, description) = open_store(&args).await?;
    let api_key = ApiKey::new(args.api_key.clone());
    let service = Service::new(store);
    let app = swarm_api::router(AppState { service, api_key: api_key.clone() });

    let address = format!("{}:{}", args.host, args.port);
    let listener = TcpListener::bind(&address).await.with_context(|| {
        format!("cannot listen on {address}: is another hub running there? pick another --port")
    })?;
    let local: SocketAddr = listener.local_addr()?;
    println!("swarm {} listening on http://{local}", env!("CARGO_PKG_VERSION"));
    println!("database: {description}");
    if !api_key.is_set() {
        println!(
            "WARNING: no API key is set: anyone who can reach http://{local} can control this swarm. \
             Set API_KEY (or --api-key) to require `Authorization: Bearer <key>`."
        );
    }
    tracing::info!(%local, database = %description, "hub started");

    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("the HTTP server failed")?;
    println!("swarm stopped");
    Ok(())
}

async fn open_store(args: &ServeArgs) -> anyhow::Result<(Arc<dyn Store>, String)> {
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

async fn open_sqlite(path: &std::path::Path) -> anyhow::Result<(Arc<dyn Store>, String)> {
    let store = SqliteStore::open(path).await.with_context(|| {
        format!("cannot open the SQLite database {}: check the path and its permissions", path.display())
    })?;
    let description = store.describe();
    Ok((Arc::new(store), description))
}

fn init_logging(format: &str) {
    use tracing_subscriber::{EnvFilter, fmt};
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,tower_http=warn,sqlx=warn"));
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // Colours only for a person at a terminal.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = if format == "json" { builder.json().try_init() } else { builder.with_ansi(ansi).try_init() };
}

async fn shutdown_signal() {
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
