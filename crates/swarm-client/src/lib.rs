//! A typed HTTP client for a swarm hub (CONTRACT.md), used by the CLI commands and
//! the runner.
//!
//! Architecture invariant: this crate knows the hub only through its HTTP API. It
//! holds no state beyond the connection settings, and retries nothing: the caller
//! decides what a failure means.

mod poll;
mod sessions;
mod tokens;
mod triggers;

use std::time::Duration;

pub use poll::Trigger;
use reqwest::{Method, StatusCode};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
pub use sessions::{SessionCostRequest, SessionLogsRequest, SessionStartRequest};
use swarm_domain::{
    agent::Agent,
    event::Event,
    id::{AgentId, RunnerId, TaskId},
    stats::Stats,
    task::{Task, TaskStatus},
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
    let text = std::fs::read_to_string(&file).ok()?;
    Some((swarm_domain::local_key::parse_key_file(&text)?, file))
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

/// `POST /api/agents`. The new agent's id is the client's `agent_id`, else the hub picks one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterAgentRequest {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_lead: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tasks: Option<i64>,
}

/// An agent, with its tasks when they were asked for (`?include=tasks`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentView {
    #[serde(flatten)]
    pub agent: Agent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Vec<Task>>,
}

/// `GET /api/agents`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentList {
    pub agents: Vec<AgentView>,
}

/// `POST /api/tasks`. The initial status follows from the fields: `offered_to` →
/// offered, `agent_id` → pending, `status: backlog` → backlog, else unassigned.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateTaskRequest {
    pub task: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<AgentId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offered_to: Option<AgentId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_type: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<TaskId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<TaskStatus>,
}

/// Filters of `GET /api/tasks`; empty fields are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskQuery {
    /// Any of these statuses (sent as a comma-separated list).
    pub status: Vec<TaskStatus>,
    pub agent_id: Option<AgentId>,
    /// Text the task contains (case-insensitive).
    pub search: Option<String>,
    pub source: Option<String>,
    pub task_type: Option<String>,
    /// Tags the task must all carry.
    pub tags: Vec<String>,
    /// At most this many tasks (the hub allows 1 to 1000, default 100).
    pub limit: Option<u32>,
    pub offset: Option<u32>,
}

impl TaskQuery {
    fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = Vec::new();
        if !self.status.is_empty() {
            let statuses: Vec<&str> = self.status.iter().map(TaskStatus::as_str).collect();
            pairs.push(("status", statuses.join(",")));
        }
        if let Some(agent_id) = self.agent_id {
            pairs.push(("agentId", agent_id.to_string()));
        }
        if let Some(search) = &self.search {
            pairs.push(("search", search.clone()));
        }
        if let Some(source) = &self.source {
            pairs.push(("source", source.clone()));
        }
        if let Some(task_type) = &self.task_type {
            pairs.push(("taskType", task_type.clone()));
        }
        if !self.tags.is_empty() {
            pairs.push(("tags", self.tags.join(",")));
        }
        if let Some(limit) = self.limit {
            pairs.push(("limit", limit.to_string()));
        }
        if let Some(offset) = self.offset {
            pairs.push(("offset", offset.to_string()));
        }
        pairs
    }
}

/// `GET /api/tasks`: one page of tasks, and how many match in all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskList {
    pub tasks: Vec<Task>,
    pub total: i64,
}

/// `GET /api/tasks/:id`: the task and its history, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskDetail {
    #[serde(flatten)]
    pub task: Task,
    #[serde(default)]
    pub logs: Vec<Event>,
}

/// How a task ends in `finish_task`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishStatus {
    Completed,
    Failed,
}

/// `finish` and `cancel`: `already_finished` says the task was finished before this
/// call, and `task` is then returned unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinishResponse {
    pub success: bool,
    #[serde(default)]
    pub already_finished: bool,
    pub task: Task,
}

/// The other task actions (claim, accept, start, progress...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionResponse {
    pub success: bool,
    pub task: Task,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FinishBody<'a> {
    status: FinishStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure_reason: Option<&'a str>,
}

#[derive(Serialize)]
struct ReasonBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

#[derive(Serialize)]
struct ProgressBody<'a> {
    progress: &'a str,
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

    /// `POST /api/agents`: register the client's agent (or re-register: an offline
    /// agent comes back idle).
    pub async fn register_agent(&self, request: &RegisterAgentRequest) -> Result<Agent, ClientError> {
        self.post_json("/api/agents", request).await
    }

    pub async fn list_agents(&self, include_tasks: bool) -> Result<AgentList, ClientError> {
        self.get_json("/api/agents", &include_query(include_tasks)).await
    }

    pub async fn get_agent(&self, id: AgentId, include_tasks: bool) -> Result<AgentView, ClientError> {
        self.get_json(&format!("/api/agents/{id}"), &include_query(include_tasks)).await
    }

    pub async fn create_task(&self, request: &CreateTaskRequest) -> Result<Task, ClientError> {
        self.post_json("/api/tasks", request).await
    }

    pub async fn list_tasks(&self, query: &TaskQuery) -> Result<TaskList, ClientError> {
        self.get_json("/api/tasks", &query.pairs()).await
    }

    pub async fn get_task(&self, id: TaskId) -> Result<TaskDetail, ClientError> {
        self.get_json(&format!("/api/tasks/{id}"), &[]).await
    }

    /// `POST /api/tasks/:id/finish`; finishing twice returns `already_finished: true`.
    pub async fn finish_task(
        &self,
        id: TaskId,
        status: FinishStatus,
        output: Option<&str>,
        failure_reason: Option<&str>,
    ) -> Result<FinishResponse, ClientError> {
        let body = FinishBody { status, output, failure_reason };
        self.post_json(&format!("/api/tasks/{id}/finish"), &body).await
    }

    pub async fn cancel_task(&self, id: TaskId, reason: Option<&str>) -> Result<FinishResponse, ClientError> {
        self.post_json(&format!("/api/tasks/{id}/cancel"), &ReasonBody { reason }).await
    }

    /// `unassigned` → `pending`, assigned to the caller.
    pub async fn claim_task(&self, id: TaskId) -> Result<ActionResponse, ClientError> {
        self.task_action(id, "claim").await
    }

    /// `pending` → `unassigned`: give the caller's task back to the pool.
    pub async fn release_task(&self, id: TaskId) -> Result<ActionResponse, ClientError> {
        self.task_action(id, "release").await
    }

    /// As the operator or the lead: give a gone agent's task (or a pool or backlog
    /// task) to `agent`, as `pending`.
    pub async fn reassign_task(&self, id: TaskId, agent: AgentId) -> Result<ActionResponse, ClientError> {
        self.post_json(&format!("/api/tasks/{id}/reassign"), &serde_json::json!({ "agentId": agent })).await
    }

    /// `offered`/`reviewing` → `pending`, for the agent the task was offered to.
    pub async fn accept_task(&self, id: TaskId) -> Result<ActionResponse, ClientError> {
        self.task_action(id, "accept").await
    }

    /// `offered`/`reviewing` → `unassigned`, with an optional reason.
    pub async fn reject_task(&self, id: TaskId, reason: Option<&str>) -> Result<ActionResponse, ClientError> {
        self.post_json(&format!("/api/tasks/{id}/reject"), &ReasonBody { reason }).await
    }

    /// `pending` → `in_progress`.
    pub async fn start_task(&self, id: TaskId) -> Result<ActionResponse, ClientError> {
        self.task_action(id, "start").await
    }

    /// `in_progress` → `paused`.
    pub async fn pause_task(&self, id: TaskId) -> Result<ActionResponse, ClientError> {
        self.task_action(id, "pause").await
    }

    /// `paused` → `in_progress`.
    pub async fn resume_task(&self, id: TaskId) -> Result<ActionResponse, ClientError> {
        self.task_action(id, "resume").await
    }

    /// Record a progress note on an unfinished task.
    pub async fn store_progress(&self, id: TaskId, progress: &str) -> Result<ActionResponse, ClientError> {
        self.post_json(&format!("/api/tasks/{id}/progress"), &ProgressBody { progress }).await
    }

    /// `unassigned` → `backlog`: park a pool task.
    pub async fn to_backlog(&self, id: TaskId) -> Result<ActionResponse, ClientError> {
        self.task_action(id, "to-backlog").await
    }

    /// `backlog` → `unassigned`: put a parked task in the pool.
    pub async fn from_backlog(&self, id: TaskId) -> Result<ActionResponse, ClientError> {
        self.task_action(id, "from-backlog").await
    }

    /// `GET /api/paused-tasks`: the caller's paused tasks.
    pub async fn paused_tasks(&self) -> Result<Vec<Task>, ClientError> {
        #[derive(Deserialize)]
        struct Tasks {
            tasks: Vec<Task>,
        }
        Ok(self.get_json::<Tasks>("/api/paused-tasks", &[]).await?.tasks)
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

    async fn task_action(&self, id: TaskId, action: &str) -> Result<ActionResponse, ClientError> {
        // An empty object rather than no body, so that a handler expecting JSON accepts it.
        self.post_json(&format!("/api/tasks/{id}/{action}"), &serde_json::json!({})).await
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

fn include_query(include_tasks: bool) -> Vec<(&'static str, String)> {
    if include_tasks { vec![("include", "tasks".to_string())] } else { Vec::new() }
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
    fn task_query_leaves_out_empty_filters() {
        assert!(TaskQuery::default().pairs().is_empty());
        let query = TaskQuery {
            status: vec![TaskStatus::Pending, TaskStatus::InProgress],
            limit: Some(10),
            ..TaskQuery::default()
        };
        assert_eq!(
            query.pairs(),
            vec![("status", "pending,in_progress".to_string()), ("limit", "10".to_string())]
        );
    }

    #[test]
    fn create_request_sends_only_what_is_set() {
        let request = CreateTaskRequest {
            task: "x".into(),
            status: Some(TaskStatus::Backlog),
            ..CreateTaskRequest::default()
        };
        let json = serde_json::to_value(&request).unwrap();
        assert_eq!(json, serde_json::json!({"task": "x", "status": "backlog"}));
    }

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
