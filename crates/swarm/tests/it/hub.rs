//! The real `swarm` binary, started on port 0 with a temporary database, for black-box
//! tests over HTTP.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use serde_json::Value;

pub const SWARM: &str = env!("CARGO_BIN_EXE_swarm");

/// Which database a hub uses.
#[derive(Clone, Debug)]
pub enum Database {
    SqliteFile(PathBuf),
    Postgres(String),
}

pub struct Hub {
    child: Child,
    pub base_url: String,
    pub api_key: Option<String>,
    /// Everything the hub printed on stdout up to and including its address line.
    pub banner: Vec<String>,
    http: reqwest::Client,
}

impl Hub {
    pub fn start(database: &Database, api_key: Option<&str>) -> Hub {
        Self::start_with(database, api_key, &[])
    }

    /// A hub with extra `swarm serve` flags (e.g. a short `--lease-seconds`, or a
    /// `--port` of its own instead of any free one).
    pub fn start_with(database: &Database, api_key: Option<&str>, extra_args: &[&str]) -> Hub {
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
        let base_url = loop {
            let line = lines_rx
                .recv_timeout(Duration::from_secs(60))
                .expect("the hub prints its address within a minute");
            banner.push(line.clone());
            if let Some(rest) = line.split("listening on ").nth(1) {
                break rest.trim().to_string();
            }
        };
        // Keep draining stdout so the hub never blocks on a full pipe.
        let mut rest_of_banner = Vec::new();
        while let Ok(line) = lines_rx.recv_timeout(Duration::from_millis(200)) {
            rest_of_banner.push(line);
            if rest_of_banner.len() >= 8 {
                break;
            }
        }
        banner.extend(rest_of_banner);
        std::thread::spawn(move || while lines_rx.recv().is_ok() {});
        Hub { child, base_url, api_key: api_key.map(str::to_string), banner, http: reqwest::Client::new() }
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

    pub async fn get(&self, path: &str, agent: Option<&str>) -> (u16, Value) {
        send(self.request(reqwest::Method::GET, path, agent)).await
    }

    pub async fn post(&self, path: &str, agent: Option<&str>, body: Value) -> (u16, Value) {
        send(self.request(reqwest::Method::POST, path, agent).json(&body)).await
    }

    /// Kill the process without letting it clean up (SIGKILL).
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Ask the hub to stop (SIGTERM) and wait for it; returns whether it exited cleanly.
    pub fn terminate(mut self) -> bool {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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

pub fn sqlite_file(dir: &Path) -> Database {
    Database::SqliteFile(dir.join("swarm.db"))
}
