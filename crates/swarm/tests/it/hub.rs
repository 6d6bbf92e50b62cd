//! A hub on port 0 with a temporary database, for tests over real HTTP: served from the
//! test process, or the real `swarm` binary when the test is about the process.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use serde_json::Value;
use swarm_hub::{DatabaseArgs, HubOptions, ServeArgs};
use swarm_service::{ActivitySnapshot, Service};

use crate::support::eventually;

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
}

enum Running {
    InProcess {
        service: Service,
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
        let mut flags = vec!["serve", "--host", "127.0.0.1"];
        if !extra_args.contains(&"--port") {
            flags.extend(["--port", "0"]);
        }
        flags.extend(extra_args);
        let mut args = <ServeFlags as clap::Parser>::try_parse_from(flags)
            .unwrap_or_else(|err| panic!("swarm serve flags {extra_args:?}: {err}"))
            .args;
        // The test decides these, whatever the environment running it says.
        args.api_key = api_key.map(str::to_string);
        args.database = match database {
            Database::SqliteFile(path) => DatabaseArgs { db: path.clone(), database_url: None },
            Database::Postgres(url) => DatabaseArgs { db: PathBuf::new(), database_url: Some(url.clone()) },
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
            running: Running::InProcess { service, stop: Some(stop_tx), thread: Some(thread) },
            base_url,
            api_key: api_key.map(str::to_string),
            banner,
            http: reqwest::Client::new(),
        }
    }

    /// The real `swarm serve` process.
    pub fn spawn(database: &Database, api_key: Option<&str>) -> Hub {
        Self::spawn_with(database, api_key, &[])
    }

    /// The real `swarm serve` process with extra flags (a `--port` of its own, so that a
    /// restarted hub is where its clients look for it).
    pub fn spawn_with(database: &Database, api_key: Option<&str>, extra_args: &[&str]) -> Hub {
        let mut command = Command::new(SWARM);
        command.args(["serve", "--host", "127.0.0.1"]);
        if !extra_args.contains(&"--port") {
            command.args(["--port", "0"]);
        }
        command
            .args(extra_args)
            .env_remove("API_KEY")
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
        if let Some(key) = api_key {
            command.env("API_KEY", key);
        }
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
        }
    }

    /// The service of a hub in this process: what the hub is doing right now.
    pub fn activity(&self) -> ActivitySnapshot {
        match &self.running {
            Running::InProcess { service, .. } => service.activity(),
            _ => panic!("only a hub served from the test process shows its activity"),
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

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url, path)
    }

    /// A request with the hub's key (when it has one) and, when given, an agent id.
    pub fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        agent: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, self.url(path));
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
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
        send(self.request(reqwest::Method::POST, path, agent).json(&body)).await
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
                let deadline = std::time::Instant::now() + Duration::from_secs(30);
                while std::time::Instant::now() < deadline {
                    if let Ok(Some(status)) = child.try_wait() {
                        return status.success();
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let _ = child.kill();
                false
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
