//! The hub under test, and the HTTP client the measurements talk to it with.
//!
//! A hub the bench starts is the `swarm` binary (beside this one, or `--swarm`,
//! `SWARM_BIN`, `PATH`) running `swarm serve --port 0` on a scratch database that
//! nothing else sees: a new SQLite file in a new temporary folder, or a new PostgreSQL
//! database on the server the URL names. Both are removed after.

use std::{
    path::PathBuf,
    process::Stdio,
    sync::{Arc, OnceLock},
    time::Duration,
};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, client::conn::http1::SendRequest, header};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, de::DeserializeOwned};
use sqlx::Connection;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

/// Longer than the longest poll the bench parks (30 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The scratch SQLite database's name in its folder.
const SQLITE_FILE: &str = "swarm.db";
/// Migrations on a cold PostgreSQL server can take a while.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The `swarm serve` settings a hub would otherwise take from the bench's environment.
const SERVE_ENV: &[&str] = &[
    "API_KEY",
    "API_KEY_FILE",
    "INSECURE_NO_AUTH",
    "DATABASE_URL",
    "DATABASE_PATH",
    "PORT",
    "HOST",
    "LOG_FORMAT",
    "LEASE_SECONDS",
    "RESCUE_INTERVAL_SECONDS",
    "MAX_LEASE_LOSSES",
    "MCP_ALLOWED_HOSTS",
    "CAPABILITIES",
];

/// Where a hub listens, the key it wants, and its process when the bench started it.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    base_url: Arc<str>,
    /// `host:port`, what the client connects to.
    authority: Arc<str>,
    /// The URL's path, when the hub is served below one.
    path_prefix: Arc<str>,
    api_key: Option<Arc<str>>,
    pid: Option<u32>,
    /// Every replica, this one among them, when the bench started several on one database
    /// (`--replicas`); empty otherwise.
    replicas: Arc<[Target]>,
}

impl Target {
    pub(crate) fn new(url: &str, api_key: Option<String>) -> anyhow::Result<Target> {
        let base_url = url.trim().trim_end_matches('/');
        let parsed = reqwest::Url::parse(base_url).with_context(|| format!("{url:?} is not a hub URL"))?;
        if parsed.scheme() != "http" {
            bail!(
                "{url:?}: the bench speaks plain HTTP; use http://host:port, the hub itself rather than a TLS proxy in front of it"
            );
        }
        let host = parsed.host_str().with_context(|| format!("{url:?} names no host"))?;
        let port = parsed.port_or_known_default().unwrap_or(80);
        let authority =
            if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
        let api_key = api_key.filter(|key| !key.is_empty()).map(Arc::from);
        Ok(Target {
            base_url: Arc::from(base_url),
            authority: Arc::from(authority),
            path_prefix: Arc::from(parsed.path().trim_end_matches('/')),
            api_key,
            pid: None,
            replicas: Arc::new([]),
        })
    }

    /// `http://host:port`, for the MCP client and the runners the `tools` command starts.
    pub(crate) fn base_url(&self) -> &str {
        &self.base_url
    }

    pub(crate) fn api_key(&self) -> Option<&str> {
        self.api_key.as_deref()
    }

    /// The hub's process id, for its CPU time; only known for a hub the bench started.
    /// With several replicas, the first one's.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.replica(0).pid
    }

    /// Every replica's process id, for their CPU time.
    pub(crate) fn pids(&self) -> Vec<u32> {
        if self.replicas.is_empty() {
            self.pid.into_iter().collect()
        } else {
            self.replicas.iter().filter_map(|replica| replica.pid).collect()
        }
    }

    /// Every replica (one: this hub, when it was not started with several).
    pub(crate) fn all_replicas(&self) -> Vec<Target> {
        if self.replicas.is_empty() { vec![self.clone()] } else { self.replicas.to_vec() }
    }

    /// The replica client number `index` talks to: clients are dealt out over the replicas
    /// in turn.
    pub(crate) fn replica(&self, index: usize) -> &Target {
        if self.replicas.is_empty() { self } else { &self.replicas[index % self.replicas.len()] }
    }
}

/// `GET /health`.
#[derive(Debug, Deserialize)]
pub(crate) struct Health {
    pub version: String,
    /// `sqlite` or `postgres`.
    pub database: String,
}

/// One simulated client: its own keep-alive HTTP/1.1 connection to the hub, as a runner
/// has. Clones share the connection and take turns on it.
///
/// It speaks HTTP through hyper's connection API directly, not reqwest: the client shares
/// the machine's CPUs with the hub, and reqwest's pool, redirect and timeout layers cost
/// about as much per request as the hub's own HTTP handling. Requests are the same bytes.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    connection: Arc<tokio::sync::Mutex<Option<SendRequest<Full<Bytes>>>>>,
    target: Target,
}

impl Http {
    /// Connects on the first request.
    pub(crate) fn new(target: &Target) -> Http {
        Http { connection: Arc::default(), target: target.clone() }
    }

    /// `GET path` as `agent` (its `X-Agent-ID`), or as the operator.
    pub(crate) async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        agent: Option<&str>,
    ) -> anyhow::Result<T> {
        self.send(Method::GET, path, agent, None).await
    }

    pub(crate) async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        agent: Option<&str>,
        body: &serde_json::Value,
    ) -> anyhow::Result<T> {
        self.send(Method::POST, path, agent, Some(body)).await
    }

    /// `POST path` with a body of raw bytes (JSON) and headers of its own: a signed webhook.
    pub(crate) async fn post_raw<T: DeserializeOwned>(
        &self,
        path: &str,
        body: Bytes,
        headers: &[(&str, &str)],
    ) -> anyhow::Result<T> {
        let bytes = self.exchange(Method::POST, path, None, Some(body), headers).await?;
        json_answer(&Method::POST, path, &bytes)
    }

    async fn send<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        agent: Option<&str>,
        body: Option<&serde_json::Value>,
    ) -> anyhow::Result<T> {
        let body = body.map(serde_json::to_vec).transpose()?.map(Bytes::from);
        let bytes = self.exchange(method.clone(), path, agent, body, &[]).await?;
        json_answer(&method, path, &bytes)
    }

    /// `GET path` as the operator, the answer as text (`/metrics`).
    pub(crate) async fn get_text(&self, path: &str) -> anyhow::Result<String> {
        let bytes = self.exchange(Method::GET, path, None, None, &[]).await?;
        String::from_utf8(bytes.to_vec()).with_context(|| format!("GET {path} answered something not UTF-8"))
    }

    /// Any answer but a 2xx is an error: the bench measures the happy path only.
    async fn exchange(
        &self,
        method: Method,
        path: &str,
        agent: Option<&str>,
        body: Option<Bytes>,
        headers: &[(&str, &str)],
    ) -> anyhow::Result<Bytes> {
        let target = &self.target;
        let mut request = Request::builder()
            .method(method.clone())
            .uri(format!("{}{path}", target.path_prefix))
            .header(header::HOST, &*target.authority);
        if let Some(key) = &target.api_key {
            request = request.header(header::AUTHORIZATION, format!("Bearer {key}"));
        }
        if let Some(agent) = agent {
            request = request.header("X-Agent-ID", agent);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let body = match body {
            Some(body) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                body
            }
            None => Bytes::new(),
        };
        let request = request.body(Full::new(body)).context("cannot build the request")?;

        let mut slot = self.connection.lock().await;
        let exchange = async {
            let sender = match slot.take() {
                Some(sender) if !sender.is_closed() => slot.insert(sender),
                _ => slot.insert(self.connect().await?),
            };
            sender.ready().await?;
            let response = sender.send_request(request).await?;
            let status = response.status();
            let bytes = response.into_body().collect().await?.to_bytes();
            anyhow::Ok((status, bytes))
        };
        let outcome = tokio::time::timeout(REQUEST_TIMEOUT, exchange).await;
        let (status, bytes) = match outcome {
            Ok(Ok(answer)) => answer,
            failed => {
                // The connection may be half-way through an answer: start a new one.
                *slot = None;
                let error = match failed {
                    Ok(Err(error)) => error,
                    _ => anyhow::anyhow!("no answer within {} s", REQUEST_TIMEOUT.as_secs()),
                };
                return Err(
                    error.context(format!("{method} {path} to the hub at {} failed", target.base_url))
                );
            }
        };
        drop(slot);
        if !status.is_success() {
            bail!("{method} {path} answered {status}: {}", String::from_utf8_lossy(&bytes));
        }
        Ok(bytes)
    }

    async fn connect(&self) -> anyhow::Result<SendRequest<Full<Bytes>>> {
        let authority = &*self.target.authority;
        let stream = tokio::net::TcpStream::connect(authority)
            .await
            .with_context(|| format!("cannot connect to the hub at {authority}"))?;
        stream.set_nodelay(true)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            // Ends when the hub closes the connection or the sender is dropped.
            let _ = connection.await;
        });
        Ok(sender)
    }
}

fn json_answer<T: DeserializeOwned>(method: &Method, path: &str, bytes: &[u8]) -> anyhow::Result<T> {
    serde_json::from_slice(bytes).with_context(|| {
        format!("{method} {path} answered something unexpected: {}", String::from_utf8_lossy(bytes))
    })
}

/// A database for the bench to start a hub on.
#[derive(Debug, Clone)]
pub(crate) enum Backend {
    Sqlite,
    /// The bench creates its scratch database on this server.
    Postgres {
        server_url: String,
    },
}

impl Backend {
    /// A scratch database on the PostgreSQL server of `--postgres` when given, else SQLite.
    pub(crate) fn from_postgres_flag(url: Option<&str>) -> anyhow::Result<Backend> {
        let Some(url) = url.map(str::trim) else {
            return Ok(Backend::Sqlite);
        };
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            bail!("--postgres must be a postgres:// URL");
        }
        Ok(Backend::Postgres { server_url: url.to_string() })
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres { .. } => "PostgreSQL",
        }
    }
}

/// The `swarm` binary the bench starts hubs with, when `--swarm` (or `SWARM_BIN`) names it.
static SWARM_PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// Start hubs with this `swarm` binary rather than the one found beside this program
/// or on `PATH`.
pub(crate) fn use_swarm_program(path: PathBuf) {
    let _ = SWARM_PROGRAM.set(path);
}

/// The `swarm` binary to start: the one named by `--swarm`/`SWARM_BIN`, else the one in
/// this program's folder (the same cargo target dir), else the first on `PATH`.
pub(crate) fn swarm_program() -> anyhow::Result<PathBuf> {
    const BUILD: &str = "build it with `cargo build --release -p swarm` (it lands beside swarm-bench \
        in target/release), or name it with --swarm <path> or SWARM_BIN";
    if let Some(path) = SWARM_PROGRAM.get() {
        if path.is_file() {
            return Ok(path.clone());
        }
        bail!("the swarm binary {} (--swarm or SWARM_BIN) is not a file; {BUILD}", path.display());
    }
    let name = format!("swarm{}", std::env::consts::EXE_SUFFIX);
    let beside = std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.join(&name)));
    let on_path = || {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path).map(|folder| folder.join(&name)).find(|candidate| candidate.is_file())
    };
    match beside.filter(|path| path.is_file()).or_else(on_path) {
        Some(path) => Ok(path),
        None => bail!(
            "cannot find the swarm binary to start a hub with: not beside swarm-bench, not on PATH; {BUILD}"
        ),
    }
}

/// A `swarm serve` child process on a scratch database. Killed when dropped, so an
/// error in the bench does not leave it running; `stop` also removes the database.
pub(crate) struct SpawnedHub {
    children: Vec<Child>,
    target: Target,
    description: String,
    scratch: Scratch,
}

impl SpawnedHub {
    pub(crate) async fn start(backend: &Backend) -> anyhow::Result<SpawnedHub> {
        Self::start_replicas(backend, 1).await
    }

    /// One hub with `swarm serve` settings of its own (`CAPABILITIES`), by environment.
    pub(crate) async fn start_with_env(
        backend: &Backend,
        env: &[(&str, &str)],
    ) -> anyhow::Result<SpawnedHub> {
        Self::start_on_with_env(Scratch::create(backend).await?, 1, env).await
    }

    /// `replicas` processes of `swarm serve` on one scratch database, started one after
    /// the other (the first one migrates it).
    pub(crate) async fn start_replicas(backend: &Backend, replicas: usize) -> anyhow::Result<SpawnedHub> {
        Self::start_on(Scratch::create(backend).await?, replicas).await
    }

    /// [`SpawnedHub::start_replicas`] on a scratch database made (and maybe filled)
    /// already; removed when the hub does not start.
    pub(crate) async fn start_on(scratch: Scratch, replicas: usize) -> anyhow::Result<SpawnedHub> {
        Self::start_on_with_env(scratch, replicas, &[]).await
    }

    pub(crate) async fn start_on_with_env(
        scratch: Scratch,
        replicas: usize,
        env: &[(&str, &str)],
    ) -> anyhow::Result<SpawnedHub> {
        let mut children = Vec::with_capacity(replicas);
        let mut targets = Vec::with_capacity(replicas);
        let mut description = String::new();
        for _ in 0..replicas.max(1) {
            match spawn(&scratch, env).await {
                Ok((child, target, described)) => {
                    children.push(child);
                    targets.push(target);
                    description = described;
                }
                Err(err) => {
                    kill(&mut children).await;
                    scratch.remove().await;
                    return Err(err);
                }
            }
        }
        let mut target = targets[0].clone();
        if targets.len() > 1 {
            description = format!("{description}, {} replicas", targets.len());
            target.replicas = Arc::from(targets);
        }
        Ok(SpawnedHub { children, target, description, scratch })
    }

    pub(crate) fn target(&self) -> &Target {
        &self.target
    }

    /// Whether the hub's processes all still run.
    pub(crate) fn is_running(&mut self) -> bool {
        self.children.iter_mut().all(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// The hub's scratch database, for `--fill` to size.
    pub(crate) fn database(&self) -> Database {
        self.scratch.database()
    }

    /// The database line the hub printed, e.g. `SQLite at /tmp/.../swarm.db`.
    pub(crate) fn description(&self) -> &str {
        &self.description
    }

    pub(crate) async fn stop(mut self) {
        kill(&mut self.children).await;
        self.scratch.remove().await;
    }
}

/// Killed rather than asked to stop: a scratch hub's data is thrown away anyway.
async fn kill(children: &mut [Child]) {
    for child in children {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
}

/// The report of a command that measures a hub it starts itself (`memory`, `soak`).
pub(crate) trait HubReport: serde::Serialize {
    fn markdown(&self) -> String;
    /// Why it did not pass; empty when it did.
    fn failures(&self) -> &[String];
}

/// What a measuring command learns of its hub before it begins.
pub(crate) struct Started {
    pub target: Target,
    pub pid: u32,
    pub health: Health,
}

/// Starts a hub on a scratch database, runs `measure` on it, stops it, prints the report
/// (Markdown, or JSON with `json`) and fails when the report says it did not pass.
pub(crate) async fn measure_scratch_hub<R: HubReport>(
    command: &str,
    postgres: Option<&str>,
    json: bool,
    measure: impl AsyncFnOnce(&mut SpawnedHub, Started) -> anyhow::Result<R>,
) -> anyhow::Result<()> {
    let backend = Backend::from_postgres_flag(postgres)?;
    eprintln!("{command}: starting a hub on a scratch {} database", backend.name());
    let mut hub = SpawnedHub::start(&backend).await?;
    let outcome = async {
        let target = hub.target().clone();
        let pid = target.pid().context("the hub's process id is unknown")?;
        let health: Health = Http::new(&target).get("/health", None).await.context("GET /health")?;
        measure(&mut hub, Started { target, pid, health }).await
    }
    .await;
    hub.stop().await;
    let report = outcome?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.markdown());
    }
    let failures = report.failures();
    if !failures.is_empty() {
        bail!("the {command} bench failed: {}", failures.join("; "));
    }
    Ok(())
}

async fn spawn(scratch: &Scratch, env: &[(&str, &str)]) -> anyhow::Result<(Child, Target, String)> {
    let program = swarm_program()?;
    let mut command = Command::new(&program);
    command.args(["serve", "--host", "127.0.0.1", "--port", "0"]);
    for name in SERVE_ENV {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    // A key of its own, as every hub has: the bench measures the requests users make.
    let api_key = uuid::Uuid::new_v4().simple().to_string();
    command.env("API_KEY", &api_key);
    match scratch {
        Scratch::Folder(folder) => {
            command.arg("--db").arg(folder.join(SQLITE_FILE));
        }
        // In the environment rather than on the command line, where `ps` would show a password.
        Scratch::Database { database_url, .. } => {
            command.env("DATABASE_URL", database_url);
        }
    }
    // The hub's info lines would interleave with the bench's progress; warnings still show.
    if std::env::var_os("RUST_LOG").is_none() {
        command.env("RUST_LOG", "warn");
    }
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit()).kill_on_drop(true);
    let mut child = command.spawn().with_context(|| format!("cannot start `{} serve`", program.display()))?;
    let stdout = child.stdout.take().context("the hub's stdout is not piped")?;
    let mut lines = BufReader::new(stdout).lines();
    let base_url = tokio::time::timeout(START_TIMEOUT, async {
        while let Some(line) = lines.next_line().await? {
            if let Some((_, url)) = line.split_once("listening on ") {
                return Ok(url.trim().to_string());
            }
        }
        bail!("the hub exited before it listened; its messages above say why")
    })
    .await
    .with_context(|| format!("the hub did not listen within {} s", START_TIMEOUT.as_secs()))??;
    // `serve` prints the database line right after the address.
    let description = match tokio::time::timeout(Duration::from_secs(5), lines.next_line()).await {
        Ok(Ok(Some(line))) => line.strip_prefix("database: ").unwrap_or(&line).to_string(),
        _ => "a hub".to_string(),
    };
    // Keep draining stdout so the hub never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let target = Target { pid: child.id(), ..Target::new(&base_url, Some(api_key))? };
    Ok((child, target, description))
}

/// Where the scratch database of a hub the bench started lives.
#[derive(Debug, Clone)]
pub(crate) enum Database {
    SqliteFile(PathBuf),
    Postgres { url: String },
}

/// A database made for one run: a folder for a SQLite file, or a PostgreSQL database.
pub(crate) enum Scratch {
    Folder(PathBuf),
    Database { server_url: String, name: String, database_url: String },
}

impl Scratch {
    pub(crate) async fn create(backend: &Backend) -> anyhow::Result<Scratch> {
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        match backend {
            Backend::Sqlite => {
                let folder = std::env::temp_dir().join(format!("swarm-bench-{suffix}"));
                std::fs::create_dir_all(&folder)
                    .with_context(|| format!("cannot create the scratch folder {}", folder.display()))?;
                Ok(Scratch::Folder(folder))
            }
            Backend::Postgres { server_url } => {
                let name = format!("swarm_bench_{suffix}");
                let mut database_url =
                    reqwest::Url::parse(server_url).context("--database-url is not a URL")?;
                database_url.set_path(&format!("/{name}"));
                let create = admin_execute(server_url, format!("CREATE DATABASE \"{name}\""));
                create.await.with_context(|| {
                    format!(
                        "cannot create the scratch database {name} (the bench needs the server to be up \
                         and a role that may CREATE DATABASE; or start a hub yourself and pass --url)"
                    )
                })?;
                Ok(Scratch::Database {
                    server_url: server_url.clone(),
                    name,
                    database_url: database_url.into(),
                })
            }
        }
    }

    /// Where the hub keeps its data in it.
    pub(crate) fn database(&self) -> Database {
        match self {
            Scratch::Folder(folder) => Database::SqliteFile(folder.join(SQLITE_FILE)),
            Scratch::Database { database_url, .. } => Database::Postgres { url: database_url.clone() },
        }
    }

    /// Best effort: says so on stderr when something is left behind.
    pub(crate) async fn remove(&self) {
        match self {
            Scratch::Folder(folder) => {
                if let Err(err) = std::fs::remove_dir_all(folder) {
                    eprintln!("bench: warning: cannot remove {}: {err}", folder.display());
                }
            }
            Scratch::Database { server_url, name, .. } => {
                // FORCE (PostgreSQL 13+) ends the killed hub's sessions the server has not
                // noticed yet; older servers take the plain form.
                let force =
                    admin_execute(server_url, format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"));
                if force.await.is_ok() {
                    return;
                }
                if let Err(err) =
                    admin_execute(server_url, format!("DROP DATABASE IF EXISTS \"{name}\"")).await
                {
                    eprintln!("bench: warning: cannot drop the scratch database {name}: {err:#}");
                }
            }
        }
    }
}

/// One statement on the server's own database (CREATE and DROP DATABASE cannot run in
/// the database they name).
async fn admin_execute(server_url: &str, statement: String) -> anyhow::Result<()> {
    let mut admin = sqlx::PgConnection::connect(server_url)
        .await
        .context("cannot connect to the PostgreSQL server of --database-url")?;
    let result = sqlx::query(sqlx::AssertSqlSafe(statement)).execute(&mut admin).await;
    admin.close().await.ok();
    result?;
    Ok(())
}
