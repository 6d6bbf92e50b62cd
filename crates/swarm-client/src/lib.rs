//! A typed HTTP client for a swarm hub (its REST API, docs/api.md), used by the CLI commands and
//! the runner.
//!
//! Architecture invariant: this crate knows the hub only through its HTTP API. It
//! holds no state beyond the connection settings, and retries nothing: the caller
//! decides what a failure means.
//!
//! The connection, its errors and the generic calls are here; the typed calls are in
//! one module per area of the API (`agents`, `tasks`, `poll`, `sessions`, `tokens`,
//! `triggers`).

mod agents;
mod flags;
mod hub_url;
mod poll;
mod sessions;
mod steering;
mod tasks;
mod tokens;
mod triggers;

use std::time::Duration;

pub use agents::{AgentList, AgentView, RegisterAgentRequest};
pub use flags::{DEFAULT_HUB_URL, HubFlags};
pub use hub_url::is_plain_loopback_url;
pub use poll::{BudgetRefused, Trigger};
use reqwest::{Method, StatusCode};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
pub use sessions::{SessionCostRequest, SessionLogsRequest, SessionStartRequest};
pub use steering::{PromotedMessage, SteerRequest, SteeringSettled};
use swarm_domain::{
    id::{AgentId, RunnerId},
    stats::Stats,
};
pub use tasks::{
    ActionResponse, CreateTaskRequest, FinishResponse, FinishStatus, InitialStatus, TaskDetail, TaskList,
    TaskQuery,
};
pub use tokens::{NewToken, TokenInfo, TokenList};

/// How long to wait for a TCP connection to the hub.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a request may take; above the hub's 60 s long-poll limit.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);

/// Where the hub is and who is calling it.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The hub's base URL, e.g. `http://localhost:3013` (`MCP_BASE_URL`).
    pub base_url: String,
    /// Sent as `Authorization: Bearer <key>` when set (`API_KEY`).
    pub api_key: Option<String>,
    /// Sent as `X-Agent-ID` when set: the hub treats the request as this agent's.
    pub agent_id: Option<AgentId>,
}

/// What can go wrong talking to the hub. Each message says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "{url:?} is not a valid hub URL ({reason}); set MCP_BASE_URL or --url to e.g. http://localhost:3013"
    )]
    InvalidUrl { url: String, reason: String },
    #[error(
        "cannot connect to the hub ({reason}); is the hub running at {url}? \
         start it with `swarm serve` or set MCP_BASE_URL"
    )]
    Connect { url: String, reason: String },
    #[error("no answer from the hub at {url} within {}s ({method} {path})", REQUEST_TIMEOUT.as_secs())]
    Timeout { url: String, method: Method, path: String },
    #[error("request to the hub failed ({method} {url}{path}): {reason}")]
    Request { url: String, method: Method, path: String, reason: String },
    /// 401: the hub has an API key and the request did not carry it.
    #[error("{}", unauthorized_message(*key_sent, message))]
    Unauthorized { key_sent: bool, message: String },
    /// Any other non-2xx answer; `message` is the hub's `{"error": ...}`.
    #[error("the hub answered {}: {message}", status.as_u16())]
    Status { status: StatusCode, message: String },
    #[error(
        "the hub sent a response that cannot be read ({method} {path}: {reason}); \
         is {url} a swarm hub of a matching version?"
    )]
    BadResponse { url: String, method: Method, path: String, reason: String },
}

impl ClientError {
    /// The HTTP status, when the hub answered with an error status.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            ClientError::Status { status, .. } => Some(*status),
            ClientError::Unauthorized { .. } => Some(StatusCode::UNAUTHORIZED),
            _ => None,
        }
    }

    /// True when the hub could not be reached at all (down, wrong URL, timeout).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, ClientError::Connect { .. } | ClientError::Timeout { .. })
    }
}

/// The key a hub on this machine left for its user's local commands (`swarm serve`
/// without API_KEY generates one; `swarm_domain::local_key`), when `base_url` names this
/// machine: the key and the file it came from.
pub fn local_hub_key(base_url: &str) -> Option<(String, std::path::PathBuf)> {
    let url = reqwest::Url::parse(base_url.trim()).ok()?;
    if !swarm_domain::local_key::is_loopback_host(url.host_str()?) {
        return None;
    }
    let file = swarm_domain::local_key::key_file_for_port(url.port_or_known_default()?)?;
    if let Err(why) = trusted_key_file(&file) {
        eprintln!("swarm: not using the key in {}: {why}", file.display());
        return None;
    }
    let text = std::fs::read_to_string(&file).ok()?;
    Some((swarm_domain::local_key::parse_key_file(&text)?, file))
}

/// A key file is trusted when it is this user's own and no one else may read or write
/// it: a key planted by another user (or one others have read) is not this hub's secret.
fn trusted_key_file(file: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let Ok(metadata) = std::fs::metadata(file) else { return Ok(()) };
    let me = rustix::process::geteuid().as_raw();
    if metadata.uid() != me {
        return Err(format!(
            "it belongs to user id {}, not to you ({me}); delete it, or give the command API_KEY",
            metadata.uid()
        ));
    }
    let mode = metadata.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "other users may read or change it (mode {mode:o}): `chmod 600` it if nobody else has read it"
        ));
    }
    Ok(())
}

fn unauthorized_message(key_sent: bool, message: &str) -> String {
    if key_sent {
        format!("the hub answered 401: {message} (it refused the API key: check API_KEY or --api-key)")
    } else {
        format!(
            "the hub answered 401: {message} (the hub needs its API key: set API_KEY or pass --api-key; a hub started without API_KEY keeps the key it generated beside its database, e.g. ./swarm.db.key)"
        )
    }
}

/// `GET /health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub status: String,
    pub version: String,
    /// `sqlite` or `postgres`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// How long the hub's claims last without a heartbeat; older hubs leave it out.
    #[serde(default, rename = "leaseSeconds", skip_serializing_if = "Option::is_none")]
    pub lease_seconds: Option<u64>,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: String,
}

/// A connection to one hub, as one caller. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    agent_id: Option<AgentId>,
    runner_id: Option<RunnerId>,
}

impl Client {
    /// Send `X-Runner-ID` with every request: this process is a runner, which holds the
    /// lead-side claims its polls take (and extends only those with its pings).
    pub fn with_runner_id(mut self, runner: RunnerId) -> Client {
        self.runner_id = Some(runner);
        self
    }

    pub fn new(config: ClientConfig) -> Result<Client, ClientError> {
        let base_url = config.base_url.trim().trim_end_matches('/').to_string();
        let invalid = |reason: String| ClientError::InvalidUrl { url: base_url.clone(), reason };
        let parsed = reqwest::Url::parse(&base_url).map_err(|err| invalid(err.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(invalid("the scheme must be http or https".to_string()));
        }
        let http = reqwest::Client::builder()
            .user_agent(concat!("swarm-client/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|err| ClientError::Request {
                url: base_url.clone(),
                method: Method::GET,
                path: String::new(),
                reason: format!("cannot build the HTTP client: {err}"),
            })?;
        let api_key = config.api_key.filter(|key| !key.is_empty());
        Ok(Client { http, base_url, api_key, agent_id: config.agent_id, runner_id: None })
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn agent_id(&self) -> Option<AgentId> {
        self.agent_id
    }

    /// `GET /health`: no auth needed.
    pub async fn health(&self) -> Result<Health, ClientError> {
        self.get_json("/health", &[]).await
    }

    pub async fn stats(&self) -> Result<Stats, ClientError> {
        self.get_json("/api/stats", &[]).await
    }

    /// `POST /ping`: heartbeat of the client's agent.
    pub async fn ping(&self) -> Result<(), ClientError> {
        self.send(Method::POST, "/ping", &[], Some(&serde_json::json!({}))).await.map(drop)
    }

    /// `POST /close`: the client's agent goes offline.
    pub async fn close(&self) -> Result<(), ClientError> {
        self.send(Method::POST, "/close", &[], Some(&serde_json::json!({}))).await.map(drop)
    }

    /// `GET <path>` decoded as `T`: for endpoints this client has no method for yet.
    pub async fn get_json<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, ClientError> {
        let body = self.send::<()>(Method::GET, path, query, None).await?;
        self.decode(Method::GET, path, &body)
    }

    /// `POST <path>` with a JSON body, the answer decoded as `T`.
    pub async fn post_json<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        let answer = self.send(Method::POST, path, &[], Some(body)).await?;
        self.decode(Method::POST, path, &answer)
    }

    /// `PUT <path>` with a JSON body, the answer decoded as `T`.
    pub async fn put_json<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        let answer = self.send(Method::PUT, path, &[], Some(body)).await?;
        self.decode(Method::PUT, path, &answer)
    }

    /// Send one request; a 2xx answer's body is returned, anything else is an error.
    async fn send<B: Serialize + ?Sized>(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&B>,
    ) -> Result<Vec<u8>, ClientError> {
        let mut request = self.http.request(method.clone(), format!("{}{path}", self.base_url));
        if !query.is_empty() {
            request = request.query(query);
        }
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        if let Some(agent_id) = self.agent_id {
            request = request.header("X-Agent-ID", agent_id.to_string());
        }
        if let Some(runner) = self.runner_id {
            request = request.header("X-Runner-ID", runner.to_string());
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|err| self.transport_error(&method, path, err))?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|err| self.transport_error(&method, path, err))?;
        if status.is_success() {
            return Ok(bytes.to_vec());
        }
        let message = match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(body) => body.error,
            Err(_) => plain_error_text(status, &bytes),
        };
        if status == StatusCode::UNAUTHORIZED {
            return Err(ClientError::Unauthorized { key_sent: self.api_key.is_some(), message });
        }
        Err(ClientError::Status { status, message })
    }

    fn decode<T: DeserializeOwned>(&self, method: Method, path: &str, body: &[u8]) -> Result<T, ClientError> {
        serde_json::from_slice(body).map_err(|err| ClientError::BadResponse {
            url: self.base_url.clone(),
            method,
            path: path.to_string(),
            reason: err.to_string(),
        })
    }

    fn transport_error(&self, method: &Method, path: &str, err: reqwest::Error) -> ClientError {
        let url = self.base_url.clone();
        if err.is_timeout() {
            return ClientError::Timeout { url, method: method.clone(), path: path.to_string() };
        }
        let reason = root_cause(&err);
        if err.is_connect() {
            return ClientError::Connect { url, reason };
        }
        ClientError::Request { url, method: method.clone(), path: path.to_string(), reason }
    }
}

/// The innermost error's text: "Connection refused (os error 111)" rather than
/// reqwest's "error sending request for url (...)".
fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// An error answer that is not the hub's JSON (a proxy's page, an old hub): its
/// first line, else the status's name.
fn plain_error_text(status: StatusCode, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let first_line = text.lines().map(str::trim).find(|line| !line.is_empty());
    match first_line {
        Some(line) => line.chars().take(200).collect(),
        None => status.canonical_reason().unwrap_or("error").to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unauthorized_says_to_set_the_key() {
        let err = ClientError::Unauthorized { key_sent: false, message: "Unauthorized".into() };
        assert!(err.to_string().contains("set API_KEY"));
        assert_eq!(err.status(), Some(StatusCode::UNAUTHORIZED));
    }

    #[test]
    fn rejects_urls_without_http_scheme() {
        let config = ClientConfig { base_url: "localhost:3013".into(), api_key: None, agent_id: None };
        assert!(matches!(Client::new(config), Err(ClientError::InvalidUrl { .. })));
    }
}
