//! A hub on port 0 with a temporary database, for tests over real HTTP: served from the
//! test process, or the real `swarm` binary when the test is about the process.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use serde_json::{Value, json};
use swarm_hub::{DatabaseArgs, HubOptions, ServeArgs};
use swarm_service::{ActivitySnapshot, Service};

use crate::support::{child_exit_within, eventually};

pub const SWARM: &str = env!("CARGO_BIN_EXE_swarm");

/// Which database a hub uses.
#[derive(Clone, Debug)]
pub enum Database {
    SqliteFile(PathBuf),
    Postgres(String),
}

/// A hub for one test. [`Hub::start`] serves it from this test process (the same
/// `swarm_hub::Hub` that `swarm serve` runs, on a thread and runtime of its own, so a
/// test that blocks its own thread never stalls the hub); [`Hub::spawn`] runs the real
/// binary, for what only a process can show (SIGKILL, SIGTERM, exit status).
pub struct Hub {
    running: Running,
    pub base_url: String,
    pub api_key: Option<String>,
    /// What the hub prints at start-up, up to and including where to go next.
    pub banner: Vec<String>,
    http: reqwest::Client,
    /// Token mode chosen by `SWARM_TEST_AGENT_AUTH=token` rather than by the test: agents
    /// registered through the fixture get their token, used for every request they make.
    auto_tokens: bool,
    tokens: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

/// `SWARM_TEST_AGENT_AUTH=token` runs the end-to-end tests with agent tokens
/// (`--agent-auth token`) instead of the reference's `X-Agent-ID` (`scripts/test` runs
/// them both ways): every hub the fixtures start without a mode of its test's choosing
/// takes tokens, agents registered through the fixtures get theirs, and runners start
/// with `AGENT_TOKEN`.
pub fn token_mode_requested() -> bool {
    std::env::var("SWARM_TEST_AGENT_AUTH").is_ok_and(|mode| mode == "token")
}

/// The operator key of a hub in token mode that the test started without one.
const TOKEN_MODE_KEY: &str = "token-mode-operator-key";

/// Whether the flags choose the mode themselves, and the key and flags the hub gets.
fn with_requested_mode<'a>(
    api_key: Option<&'a str>,
    extra_args: &[&'a str],
) -> (bool, Option<&'a str>, Vec<&'a str>) {
    let mut flags = extra_args.to_vec();
    if !token_mode_requested() || extra_args.contains(&"--agent-auth") {
        return (false, api_key, flags);
    }
    flags.extend(["--agent-auth", "token"]);
    (true, Some(api_key.unwrap_or(TOKEN_MODE_KEY)), flags)
}

enum Running {
    InProcess {
        service: Box<Service>,
        stop: Option<tokio::sync::oneshot::Sender<bool>>,
        thread: Option<std::thread::JoinHandle<bool>>,
    },
    Process(Child),
    Stopped,
}

#[derive(clap::Parser)]
struct ServeFlags {
    #[command(flatten)]
    args: ServeArgs,
}

impl Hub {
    pub fn start(database: &Database, api_key: Option<&str>) -> Hub {
        Self::start_with(database, api_key, &[])
    }

    /// A hub with extra `swarm serve` flags (e.g. a short `--lease-seconds`, or a
    /// `--port` of its own instead of any free one).
    pub fn start_with(database: &Database, api_key: Option<&str>, extra_args: &[&str]) -> Hub {
        Self::start_with_options(database, api_key, extra_args, HubOptions::default())
    }

    /// A hub with options no user sets (a test clock, a fast scheduler tick).
    pub fn start_with_options(
        database: &Database,
        api_key: Option<&str>,
        extra_args: &[&str],
        options: HubOptions,
    ) -> Hub {
        let (auto_tokens, api_key, extra_args) = with_requested_mode(api_key, extra_args);
        let mut flags = vec!["serve", "--host", "127.0.0.1"];
        if !extra_args.contains(&"--port") {
            flags.extend(["--port", "0"]);
        }
        flags.extend(&extra_args);
        let mut args = <ServeFlags as clap::Parser>::try_parse_from(flags)
            .unwrap_or_else(|err| panic!("swarm serve flags {extra_args:?}: {err}"))
            .args;
        // The test decides these, whatever the environment running it says. Without a key
        // the hub is open, as a test of the API wants it; the generated key has tests of
        // its own (`first_start_key`).
        args.api_key = api_key.map(str::to_string);
        args.api_key_file = None;
        args.insecure_no_auth = api_key.is_none();
        args.database = match database {
            Database::SqliteFile(path) => {
                DatabaseArgs { db: path.clone(), database_url: None, sqlite_wal_batching: false }
            }
            Database::Postgres(url) => DatabaseArgs {
                db: PathBuf::new(),
                database_url: Some(url.clone()),
                sqlite_wal_batching: false,
            },
        };
        let (started_tx, started_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<bool>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime for the hub");
            runtime.block_on(async move {
                let hub = match swarm_hub::Hub::start(&args, options).await {
                    Ok(hub) => hub,
                    Err(err) => {
                        let _ = started_tx.send(Err(format!("{err}")));
                        return false;
                    }
                };
                let _ = started_tx.send(Ok((hub.url(), hub.banner().to_vec(), hub.service.clone())));
                // `true`: stop gracefully; `false` (or the test gone): drop everything at once.
                let graceful = stop_rx.await.unwrap_or(false);
                if graceful { hub.stop().await.is_ok() } else { true }
            })
        });
        let (base_url, banner, service) = started_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the hub starts within a minute")
            .unwrap_or_else(|err| panic!("the hub does not start: {err}"));
        Hub {
            running: Running::InProcess {
                service: Box::new(service),
                stop: Some(stop_tx),
                thread: Some(thread),
            },
            base_url,
            api_key: api_key.map(str::to_string),
            banner,
            http: reqwest::Client::new(),
            auto_tokens,
            tokens: Default::default(),
        }
    }

    /// The real `swarm serve` process.
    pub fn spawn(database: &Database, api_key: Option<&str>) -> Hub {
        Self::spawn_with(database, api_key, &[])
    }

    /// The real `swarm serve` process with extra flags (a `--port` of its own, so that a
    /// restarted hub is where its clients look for it).
    pub fn spawn_with(database: &Database, api_key: Option<&str>, extra_args: &[&str]) -> Hub {
        Self::spawn_with_home(database, api_key, extra_args, None)
    }

    /// The real `swarm serve` as a user starts it on a fresh machine: no key given, so it
    /// generates one and leaves it under `home` for local commands. The fixture reads the
    /// key from the data directory, as the operator would, for its own requests.
    pub fn spawn_generating_key(database: &Database, home: &Path, extra_args: &[&str]) -> Hub {
        let mut hub = Self::spawn_with_home(database, None, extra_args, Some(home));
        if let Database::SqliteFile(path) = database {
            let file = swarm_hub::default_key_file(path);
            let text = std::fs::read_to_string(&file).expect("the hub keeps its key beside its database");
            hub.api_key = Some(text.trim().to_string());
        }
        hub
    }

    /// `home`: the user's `HOME` (and `XDG_CONFIG_HOME` below it) for a hub without a key;
    /// `None` for a hub with `api_key`, or an open one (`--insecure-no-auth`).
    fn spawn_with_home(
        database: &Database,
        api_key: Option<&str>,
        extra_args: &[&str],
        home: Option<&Path>,
    ) -> Hub {
        let (auto_tokens, api_key, extra_args) = if home.is_some() {
            (false, api_key, extra_args.to_vec())
        } else {
            with_requested_mode(api_key, extra_args)
        };
        let mut command = Command::new(SWARM);
        command.args(["serve", "--host", "127.0.0.1"]);
        if !extra_args.contains(&"--port") {
            command.args(["--port", "0"]);
        }
        command
            .args(&extra_args)
            .env_remove("API_KEY")
            .env_remove("API_KEY_FILE")
            .env_remove("INSECURE_NO_AUTH")
            .env_remove("DATABASE_URL")
            .env_remove("DATABASE_PATH")
            .env_remove("PORT")
            .env_remove("LEASE_SECONDS")
            .env_remove("RESCUE_INTERVAL_SECONDS")
            .env_remove("MAX_LEASE_LOSSES")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        match database {
            Database::SqliteFile(path) => command.arg("--db").arg(path),
            Database::Postgres(url) => command.arg("--database-url").arg(url),
        };
        match (api_key, home) {
            (Some(key), _) => command.env("API_KEY", key),
            (None, Some(home)) => command.env("HOME", home).env("XDG_CONFIG_HOME", home.join(".config")),
            (None, None) => command.arg("--insecure-no-auth"),
        };
        let mut child = command.spawn().expect("the swarm binary starts");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (lines_tx, lines_rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut banner = Vec::new();
        loop {
            let line = lines_rx
                .recv_timeout(Duration::from_secs(60))
                .expect("the hub prints its start-up lines within a minute");
            let last = line.starts_with("next:");
            banner.push(line);
            if last {
                break;
            }
        }
        // Keep draining stdout so the hub never blocks on a full pipe.
        std::thread::spawn(move || while lines_rx.recv().is_ok() {});
        let base_url = banner
            .iter()
            .find_map(|line| line.split("listening on ").nth(1))
            .expect("the hub says where it listens")
            .trim()
            .to_string();
        Hub {
            running: Running::Process(child),
            base_url,
            api_key: api_key.map(str::to_string),
            banner,
            http: reqwest::Client::new(),
            auto_tokens,
            tokens: Default::default(),
        }
    }

    /// The service of a hub in this process: what the hub is doing right now.
    pub fn activity(&self) -> ActivitySnapshot {
        match &self.running {
            Running::InProcess { service, .. } => service.activity(),
            _ => panic!("only a hub served from the test process shows its activity"),
        }
    }

    /// Polls this hub's store answered from memory (PostgreSQL's null-poll cache).
    pub fn poll_views_from_memory(&self) -> u64 {
        match &self.running {
            Running::InProcess { service, .. } => service.store_poll_views_from_memory().unwrap_or(0),
            _ => panic!("only a hub served from the test process shows its store's counters"),
        }
    }

    /// Waits until `count` polls are parked on this hub: from then on, whatever wakes
    /// them is what the test did next.
    pub async fn parked_polls(&self, count: i64) {
        eventually(&format!("{count} parked poll(s)"), || async {
            (self.activity().parked_polls >= count).then_some(())
        })
        .await;
    }

    /// Waits until the scheduler has finished `passes` more passes than it had: what
    /// was due has fired by then, and what did not fire was not due.
    pub async fn scheduler_passes(&self, passes: u64) {
        let until = self.activity().scheduler_passes + passes;
        eventually(&format!("{passes} scheduler pass(es)"), || async {
            (self.activity().scheduler_passes >= until).then_some(())
        })
        .await;
    }

    /// Waits until the Slack bridge has finished two more passes: what it was going to
    /// post about the state before the call is posted by then.
    pub async fn slack_sweeps(&self) {
        let until = self.activity().slack_sweeps + 2;
        eventually("two Slack sweeps", || async { (self.activity().slack_sweeps >= until).then_some(()) })
            .await;
    }

    /// Waits until the rescuer has finished `passes` more passes than it had: a lease that
    /// had run out by the clock before the call has been found by then.
    pub async fn rescue_passes(&self, passes: u64) {
        let until = self.activity().rescue_passes + passes;
        eventually(&format!("{passes} rescuer pass(es)"), || async {
            (self.activity().rescue_passes >= until).then_some(())
        })
        .await;
    }

    /// Registers a new agent (a fresh id) named `name`, a lead when `lead`; its id. In
    /// suite-chosen token mode the fixture keeps its first token.
    pub async fn register_agent(&self, name: &str, lead: bool) -> String {
        self.register_agent_with(name, json!({ "isLead": lead })).await
    }

    /// [`Hub::register_agent`] with more registration fields (`maxTasks`, `isLead`, ...).
    pub async fn register_agent_with(&self, name: &str, fields: Value) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        let mut body = json!({ "name": name });
        body.as_object_mut().unwrap().extend(fields.as_object().cloned().unwrap_or_default());
        let (status, answer) = self.post("/api/agents", Some(&id), body).await;
        assert_eq!(status, 201, "registering {name}: {answer}");
        id
    }

    /// Creates a task as the operator; its id.
    pub async fn create_task(&self, body: Value) -> String {
        let (status, task) = self.post("/api/tasks", None, body).await;
        assert_eq!(status, 201, "{task}");
        task["id"].as_str().expect("a task id").to_string()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url, path)
    }

    /// The token the fixture holds for `agent` (token mode chosen by the suite).
    pub fn agent_token(&self, agent: &str) -> Option<String> {
        self.tokens.lock().unwrap().get(agent).cloned()
    }

    /// What a client acting as `agent` sends as its bearer: the agent's token when the
    /// fixture holds one, else the hub's key.
    pub fn bearer_for(&self, agent: Option<&str>) -> Option<String> {
        agent.and_then(|agent| self.agent_token(agent)).or_else(|| self.api_key.clone())
    }

    /// In suite-chosen token mode, registers `agent` with the operator key (as an operator
    /// sets up a runner) and keeps its first token; `None` in any other mode. Callable from
    /// sync code: the request runs on a thread and runtime of its own.
    pub fn register_for_token(
        &self,
        agent: &str,
        name: &str,
        is_lead: bool,
        max_tasks: u32,
    ) -> Option<String> {
        if !self.auto_tokens {
            return None;
        }
        if let Some(token) = self.agent_token(agent) {
            return Some(token);
        }
        let body = json!({"name": name, "isLead": is_lead, "maxTasks": max_tasks});
        // A client of its own: the hub's pooled connections belong to the test's runtime,
        // which this call blocks.
        let request = reqwest::Client::new()
            .post(self.url("/api/agents"))
            .header("X-Agent-ID", agent)
            .bearer_auth(self.api_key.clone().unwrap_or_default())
            .json(&body);
        let (status, answer) = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                    runtime.block_on(send(request))
                })
                .join()
                .unwrap()
        });
        assert!(status == 201, "registering {agent} for its token: {status} {answer}");
        let token = answer["token"]["token"].as_str().expect("a new agent's first token").to_string();
        self.tokens.lock().unwrap().insert(agent.to_string(), token.clone());
        Some(token)
    }

    /// A request with the hub's key (when it has one) and, when given, an agent id; in
    /// suite-chosen token mode, an agent with a token sends that instead of the key.
    pub fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        agent: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, self.url(path));
        if let Some(bearer) = self.bearer_for(agent) {
            request = request.bearer_auth(bearer);
        }
        if let Some(agent) = agent {
            request = request.header("X-Agent-ID", agent);
        }
        request
    }

    /// `GET /api/poll?wait=` as our runner polls: with `X-Runner-ID`, so every kind of
    /// trigger comes (a poll without it gets only the reference's kinds).
    pub async fn poll_as_runner(&self, agent: &str, wait: u32) -> (u16, Value) {
        let path = format!("/api/poll?wait={wait}");
        send(self.request(reqwest::Method::GET, &path, Some(agent)).header("X-Runner-ID", TEST_RUNNER_ID))
            .await
    }

    pub async fn get(&self, path: &str, agent: Option<&str>) -> (u16, Value) {
        send(self.request(reqwest::Method::GET, path, agent)).await
    }

    pub async fn post(&self, path: &str, agent: Option<&str>, body: Value) -> (u16, Value) {
        let registering =
            self.auto_tokens && path == "/api/agents" && agent.is_some_and(|a| self.agent_token(a).is_none());
        let request = if registering {
            // Registration is the operator's in token mode; it hands out the first token.
            let mut request = self.http.post(self.url(path)).header("X-Agent-ID", agent.unwrap_or_default());
            if let Some(key) = &self.api_key {
                request = request.bearer_auth(key);
            }
            request
        } else {
            self.request(reqwest::Method::POST, path, agent)
        };
        let (status, answer) = send(request.json(&body)).await;
        if registering && let (Some(agent), Some(token)) = (agent, answer["token"]["token"].as_str()) {
            self.tokens.lock().unwrap().insert(agent.to_string(), token.to_string());
        }
        (status, answer)
    }

    /// Stop at once, finishing nothing: SIGKILL for a process; for a hub in this
    /// process, its runtime is dropped with every connection and request in flight.
    pub fn kill(mut self) {
        self.stop(false);
    }

    /// Stop gracefully (SIGTERM for a process) and wait; returns whether it stopped cleanly.
    pub fn terminate(mut self) -> bool {
        self.stop(true)
    }

    fn stop(&mut self, graceful: bool) -> bool {
        match std::mem::replace(&mut self.running, Running::Stopped) {
            Running::InProcess { mut stop, mut thread, .. } => {
                if let Some(stop) = stop.take() {
                    let _ = stop.send(graceful);
                }
                thread.take().is_some_and(|thread| thread.join().unwrap_or(false))
            }
            Running::Process(mut child) if graceful => {
                let pid = child.id().to_string();
                let _ = Command::new("kill").args(["-TERM", &pid]).status();
                // Not stopped within 30 s: killed, and not a clean stop.
                child_exit_within(&mut child, Duration::from_secs(30)).is_some_and(|status| status.success())
            }
            Running::Process(mut child) => {
                let _ = child.kill();
                let _ = child.wait();
                true
            }
            Running::Stopped => true,
        }
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.stop(false);
    }
}

/// Send and decode: the status and the JSON body (`Value::Null` when empty).
pub async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.expect("the hub answers");
    let status = response.status().as_u16();
    let text = response.text().await.expect("a body");
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("status {status}: body is not JSON: {text:?}"))
    };
    (status, body)
}

/// The runner id the tests' polls send when they stand for our runner.
pub const TEST_RUNNER_ID: &str = "0193a5c0-0000-7000-8000-00000000f00d";

pub fn sqlite_file(dir: &Path) -> Database {
    Database::SqliteFile(dir.join("swarm.db"))
}
