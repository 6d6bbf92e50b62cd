//! MCP clients for the black-box tests: rmcp's own client over Streamable HTTP (against
//! a real hub) and over stdio (running the real `swarm mcp`).

use std::{collections::HashMap, sync::Arc};

use rmcp::{
    ClientHandler, Peer, RoleClient, ServiceExt,
    model::{CallToolRequestParams, ClientConfig, ProtocolVersion},
    service::{ClientLifecycleMode, ClientServiceExt, NotificationContext, RunningService},
    transport::{
        ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::Value;

use crate::hub::{Database, Hub, SWARM};

pub type Client = RunningService<RoleClient, ClientConfig>;

/// Which protocol revision a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revision {
    /// `initialize` first (2025-11-25).
    Initialize,
    /// The stateless 2026-07-28 revision: `server/discover`, metadata on each request.
    Stateless,
}

pub const REVISIONS: [Revision; 2] = [Revision::Initialize, Revision::Stateless];

/// A client of `hub`'s `/mcp` acting as `agent` (sent as `X-Agent-ID`).
pub async fn connect_http(hub: &Hub, agent: Option<&str>, revision: Revision) -> Client {
    connect_http_with(hub, hub.bearer_for(agent).as_deref(), agent, revision).await
}

/// A client sending `bearer` (the API key, or an agent's token) instead of the hub's key.
pub async fn connect_http_with(
    hub: &Hub,
    bearer: Option<&str>,
    agent: Option<&str>,
    revision: Revision,
) -> Client {
    connect_http_as(hub, bearer, agent, revision, client_info()).await
}

/// A client that introduces itself with `info` (its capabilities: the Tasks extension).
pub async fn connect_http_as(
    hub: &Hub,
    bearer: Option<&str>,
    agent: Option<&str>,
    revision: Revision,
    info: ClientConfig,
) -> Client {
    let mut headers = HashMap::new();
    if let Some(agent) = agent {
        headers.insert(
            reqwest::header::HeaderName::from_static("x-agent-id"),
            reqwest::header::HeaderValue::from_str(agent).expect("an agent id is a valid header"),
        );
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(hub.url("/mcp")).custom_headers(headers);
    if let Some(key) = bearer {
        config = config.auth_header(key.to_string());
    }
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    let connected = match revision {
        Revision::Initialize => info.serve(transport).await,
        Revision::Stateless => {
            let lifecycle =
                ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
            info.serve_with_lifecycle(transport, lifecycle).await
        }
    };
    connected.unwrap_or_else(|err| panic!("connect to {} ({revision:?}): {err}", hub.url("/mcp")))
}

/// A client of a `swarm mcp` child process on `database`, with extra environment.
pub async fn connect_stdio(database: &Database, agent: Option<&str>, env: &[(&str, &str)]) -> Client {
    connect_stdio_as(database, agent, env, client_info()).await
}

/// A `swarm mcp` client that introduces itself with `info`.
pub async fn connect_stdio_as(
    database: &Database,
    agent: Option<&str>,
    env: &[(&str, &str)],
    info: ClientConfig,
) -> Client {
    let transport = stdio_transport(database, agent, env);
    info.serve(transport).await.expect("swarm mcp answers initialize")
}

/// A client that is told when the server's tool list changes.
#[derive(Clone)]
pub struct ListWatcher {
    info: ClientConfig,
    pub changed: Arc<tokio::sync::Notify>,
}

impl ClientHandler for ListWatcher {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.notify_one();
    }
}

pub async fn connect_stdio_watching(
    database: &Database,
) -> (RunningService<RoleClient, ListWatcher>, Arc<tokio::sync::Notify>) {
    let changed = Arc::new(tokio::sync::Notify::new());
    let watcher = ListWatcher { info: client_info(), changed: Arc::clone(&changed) };
    let client =
        watcher.serve(stdio_transport(database, None, &[])).await.expect("swarm mcp answers initialize");
    (client, changed)
}

fn stdio_transport(database: &Database, agent: Option<&str>, env: &[(&str, &str)]) -> TokioChildProcess {
    let database = database.clone();
    let agent = agent.map(str::to_string);
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let command = tokio::process::Command::new(SWARM).configure(move |command| {
        command
            .arg("mcp")
            .env_remove("API_KEY")
            .env_remove("DATABASE_URL")
            .env_remove("DATABASE_PATH")
            .env_remove("AGENT_ID")
            .env_remove("AGENT_TOKEN")
            .env_remove("ATLAS_TRIGGER")
            .env_remove("MCP_BASE_URL")
            .env("RUST_LOG", "warn");
        match &database {
            Database::SqliteFile(path) => command.arg("--db").arg(path),
            Database::Postgres(url) => command.arg("--database-url").arg(url),
        };
        if let Some(agent) = &agent {
            command.env("AGENT_ID", agent);
        }
        for (key, value) in &env {
            command.env(key, value);
        }
    });
    TokioChildProcess::new(command).expect("swarm mcp starts")
}

pub fn client_info() -> ClientConfig {
    let mut info = ClientConfig::default();
    info.protocol_version = ProtocolVersion::V_2025_11_25;
    info.client_info = rmcp::model::Implementation::new("swarm-tests", "1");
    info
}

/// The names of the tools `client` is offered.
pub async fn tool_names(client: &Peer<RoleClient>) -> Vec<String> {
    let tools = client.list_all_tools().await.expect("tools/list answers");
    tools.into_iter().map(|tool| tool.name.to_string()).collect()
}

/// Call a tool and return its `structuredContent`, checking the shape every tool
/// result has (`{yourAgentId, success, message, ...}`) and that `isError` agrees with `success`.
pub async fn call(client: &Peer<RoleClient>, tool: &str, arguments: Value) -> Value {
    let Value::Object(arguments) = arguments else { panic!("arguments are an object") };
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
    let result = client.call_tool(params).await.unwrap_or_else(|err| panic!("{tool}: protocol error {err}"));
    let content = result.structured_content.clone().unwrap_or_else(|| panic!("{tool}: no structuredContent"));
    let success = content["success"].as_bool().unwrap_or_else(|| panic!("{tool}: no success in {content}"));
    assert!(content["message"].is_string(), "{tool}: no message in {content}");
    assert!(content.get("yourAgentId").is_some(), "{tool}: no yourAgentId in {content}");
    assert_eq!(result.is_error, Some(!success), "{tool}: isError disagrees with success in {content}");
    check_output_schema(client, tool, &content).await;
    content
}

/// Every tool the caller is offered has an `outputSchema`, and its result fits it. (A tool
/// called though hidden is not listed, and a caller the hub cannot name gets no list: their
/// refusals have no schema to fit.)
async fn check_output_schema(client: &Peer<RoleClient>, tool: &str, content: &Value) {
    let Ok(tools) = client.list_all_tools().await else { return };
    let Some(listed) = tools.iter().find(|listed| listed.name == tool) else { return };
    let schema = listed.output_schema.as_ref().unwrap_or_else(|| panic!("{tool} has no outputSchema"));
    let schema = Value::Object(schema.as_ref().clone());
    if let Err(err) = crate::mcp_schema::validate(&schema, content) {
        panic!(
            "{tool}: the result does not fit its outputSchema: {err}\nresult: {content}\nschema: {schema}"
        );
    }
}

/// Call a tool that must succeed; returns its structured content.
pub async fn ok(client: &Peer<RoleClient>, tool: &str, arguments: Value) -> Value {
    let content = call(client, tool, arguments.clone()).await;
    assert_eq!(content["success"], true, "{tool} {arguments} failed: {}", content["message"]);
    content
}

/// Call a tool that must be refused; returns the reason.
pub async fn refused(client: &Peer<RoleClient>, tool: &str, arguments: Value) -> String {
    let content = call(client, tool, arguments.clone()).await;
    assert_eq!(content["success"], false, "{tool} {arguments} should be refused: {content}");
    content["message"].as_str().unwrap_or_default().to_string()
}

pub fn new_agent_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The tools each role is offered on the hub with no capabilities asked for (stdio adds the
/// Inbox-MCP names); the opt-in groups (scheduling, services, epics, ...) are offered to an
/// agent that names them, or by the hub's `CAPABILITIES`.
pub const UNREGISTERED_TOOLS: [&str; 4] = ["join-swarm", "get-swarm", "get-tasks", "get-task-details"];
pub const WORKER_TOOLS: [&str; 14] = [
    "my-agent-info",
    "get-swarm",
    "get-tasks",
    "get-task-details",
    "send-task",
    "task-action",
    "store-progress",
    "poll-task",
    "list-channels",
    "post-message",
    "read-messages",
    "send-mail",
    "reply-mail",
    "read-mail",
];

/// The lead's set: the worker's but `poll-task`, with cancelling, steering, its Slack inbox and
/// threads, the mail history and the epics.
pub fn lead_tools() -> Vec<&'static str> {
    vec![
        "my-agent-info",
        "get-swarm",
        "get-tasks",
        "get-task-details",
        "send-task",
        "task-action",
        "store-progress",
        "cancel-task",
        "steer-task",
        "slack-reply",
        "inbox-delegate",
        "get-inbox-message",
        "slack-read",
        "slack-post",
        "slack-list-channels",
        "slack-start-thread",
        "slack-update",
        "slack-delete",
        "list-channels",
        "post-message",
        "read-messages",
        "send-mail",
        "reply-mail",
        "read-mail",
        "list-mail",
        "unread-mail-count",
        "create-epic",
        "list-epics",
        "get-epic-details",
        "update-epic",
        "delete-epic",
        "assign-task-to-epic",
        "unassign-task-from-epic",
    ]
}
