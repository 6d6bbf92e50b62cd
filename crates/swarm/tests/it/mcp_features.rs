//! MCP beyond tools, with rmcp's client against the real hub and the real `swarm mcp`:
//! prompts, resources (and subscriptions on stdio), completion, logging/setLevel, and the
//! protocol defects fixed in the HTTP front (JSON-RPC errors for malformed requests, JSON
//! for a client accepting only JSON) and in `swarm mcp` (exit 0 when the client leaves).

use std::{
    io::Write,
    process::{Command, Stdio},
    sync::Arc,
    time::Duration,
};

use rmcp::{
    ClientHandler, RoleClient, ServiceExt,
    model::{
        ArgumentInfo, ClientConfig, CompleteRequestParams, ErrorCode, GetPromptRequestParams,
        ProtocolVersion, ReadResourceRequestParams, Reference, ResourceContents, SubscribeRequestParams,
        SubscriptionFilter,
    },
    service::{ClientLifecycleMode, ClientServiceExt, NotificationContext, RunningService, ServiceError},
    transport::{ConfigureCommandExt, TokioChildProcess},
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::{
    hub::{Database, Hub, SWARM, sqlite_file},
    mcp_client::{REVISIONS, Revision, connect_http, new_agent_id, ok},
};

const KEY: &str = "mcp-features-key";
const PROMPTS: [&str; 7] = [
    "work-on-task",
    "review-offered-task",
    "task-result",
    "swarm-chat",
    "start-worker",
    "start-leader",
    "slack-inbox",
];

fn error_code(err: ServiceError) -> (i32, Option<Value>) {
    match err {
        ServiceError::McpError(error) => (error.code.0, error.data),
        other => panic!("expected a JSON-RPC error, got {other}"),
    }
}

fn text_of(contents: &ResourceContents) -> Value {
    match contents {
        ResourceContents::TextResourceContents { text, mime_type, .. } => {
            assert_eq!(mime_type.as_deref(), Some("application/json"));
            serde_json::from_str(text).expect("a resource is a JSON document")
        }
        other => panic!("expected text, got {other:?}"),
    }
}

#[tokio::test]
async fn mcp_prompts_resources_and_completion_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let (lead, worker) = (new_agent_id(), new_agent_id());
    let lead_client = connect_http(&hub, Some(&lead), Revision::Initialize).await;
    ok(&lead_client, "join-swarm", json!({"name": "boss", "lead": true})).await;
    let worker_client = connect_http(&hub, Some(&worker), Revision::Initialize).await;
    ok(&worker_client, "join-swarm", json!({"name": "builder"})).await;
    let sent = ok(&lead_client, "send-task", json!({"agentId": worker, "task": "port the parser"})).await;
    let task_id = sent["task"]["id"].as_str().unwrap().to_string();

    for revision in REVISIONS {
        let client = connect_http(&hub, Some(&worker), revision).await;
        // Prompts: the runner's commands, with their arguments, rendered from the one text.
        let prompts = client.list_all_prompts().await.expect("prompts/list");
        assert_eq!(
            prompts.iter().map(|prompt| prompt.name.as_str()).collect::<Vec<_>>(),
            PROMPTS,
            "{revision:?}"
        );
        let work = &prompts[0];
        let argument = &work.arguments.as_ref().expect("work-on-task takes the task id")[0];
        assert_eq!((argument.name.as_str(), argument.required), ("taskId", Some(true)));
        let arguments = json!({"taskId": task_id}).as_object().unwrap().clone();
        let prompt = client
            .get_prompt(GetPromptRequestParams::new("work-on-task").with_arguments(arguments))
            .await
            .expect("prompts/get");
        // 2026-07-28 results name the server; the 2025 revisions named it in `initialize`.
        let named = prompt.meta.as_ref().and_then(|meta| meta.0.get("io.modelcontextprotocol/serverInfo"));
        match revision {
            Revision::Stateless => assert_eq!(named.map(|info| &info["name"]), Some(&json!("swarm"))),
            Revision::Initialize => assert_eq!(named, None),
        }
        let message = serde_json::to_value(&prompt.messages[0]).unwrap();
        assert_eq!(message["role"], "user");
        let text = message["content"]["text"].as_str().unwrap();
        assert!(text.starts_with(&format!("# Work on swarm task {task_id}\n")), "{text}");
        assert!(text.contains("every `taskId` below is that id"), "{text}");
        let missing = client.get_prompt(GetPromptRequestParams::new("work-on-task")).await.unwrap_err();
        assert_eq!(error_code(missing).0, ErrorCode::INVALID_PARAMS.0);
        let unknown = client.get_prompt(GetPromptRequestParams::new("no-such-prompt")).await.unwrap_err();
        assert_eq!(error_code(unknown).0, ErrorCode::INVALID_PARAMS.0);
        // The inbox prompt renders the caller's open inbox: this worker's is empty (the Slack
        // tests render a lead's with its messages).
        let inbox = client.get_prompt(GetPromptRequestParams::new("slack-inbox")).await.expect("slack-inbox");
        let text = serde_json::to_value(&inbox.messages[0]).unwrap()["content"]["text"].clone();
        assert!(text.as_str().unwrap().starts_with("You have 0 inbox message(s) from Slack:\n"), "{text}");
        let arguments = json!({"inboxMessageId": "not-an-id"}).as_object().unwrap().clone();
        let bad = client.get_prompt(GetPromptRequestParams::new("slack-inbox").with_arguments(arguments));
        assert_eq!(error_code(bad.await.unwrap_err()).0, ErrorCode::INVALID_PARAMS.0);
        let arguments = json!({"inboxMessageId": uuid::Uuid::new_v4()}).as_object().unwrap().clone();
        let none = client.get_prompt(GetPromptRequestParams::new("slack-inbox").with_arguments(arguments));
        assert_eq!(error_code(none.await.unwrap_err()).0, ErrorCode::INVALID_PARAMS.0);

        // Resources: the caller's own view, read through the same tools.
        let resources = client.list_all_resources().await.expect("resources/list");
        let uris: Vec<&str> = resources.iter().map(|resource| resource.uri.as_str()).collect();
        assert_eq!(
            uris,
            [
                "swarm://me",
                "swarm://tasks",
                "swarm://mail",
                "swarm://mail/unread",
                "swarm://channels",
                "swarm://agents"
            ],
            "{revision:?}"
        );
        let templates = client.list_all_resource_templates().await.expect("resources/templates/list");
        assert_eq!(templates[0].uri_template, "swarm://tasks/{id}");
        let read = |uri: String| {
            let client = &client;
            async move { client.read_resource(ReadResourceRequestParams::new(uri)).await }
        };
        let task = read(format!("swarm://tasks/{task_id}")).await.expect("the task reads");
        let task = text_of(&task.contents[0]);
        assert_eq!(
            (task["task"]["id"].as_str(), task["task"]["status"].as_str()),
            (Some(&*task_id), Some("pending"))
        );
        assert!(task["logs"].as_array().is_some_and(|logs| !logs.is_empty()), "{task}");
        assert!(task.get("success").is_none(), "the tool envelope is not part of the document: {task}");
        let mine = text_of(&read("swarm://tasks".into()).await.unwrap().contents[0]);
        assert_eq!(mine["tasks"][0]["id"], task_id.as_str());
        let roster = text_of(&read("swarm://agents".into()).await.unwrap().contents[0]);
        assert_eq!(roster["agents"].as_array().map(Vec::len), Some(2));
        let me = text_of(&read("swarm://me".into()).await.unwrap().contents[0]);
        assert_eq!(me["agent"]["id"], worker.as_str());
        let missing = format!("swarm://tasks/{}", uuid::Uuid::new_v4());
        let (code, data) = error_code(read(missing.clone()).await.unwrap_err());
        assert_eq!((code, data), (ErrorCode::INVALID_PARAMS.0, Some(json!({"uri": missing}))));
        let (code, _) = error_code(read("file:///etc/passwd".into()).await.unwrap_err());
        assert_eq!(code, ErrorCode::INVALID_PARAMS.0);

        // Completion of arguments that name a task: the caller's tasks by prefix.
        let prefix = &task_id[..6];
        let complete = |reference: Reference, name: &str| {
            let client = &client;
            let params = CompleteRequestParams::new(reference, ArgumentInfo::new(name, prefix));
            async move { client.complete(params).await.expect("completion/complete").completion.values }
        };
        assert_eq!(complete(Reference::for_prompt("work-on-task"), "taskId").await, [task_id.as_str()]);
        assert_eq!(complete(Reference::for_resource("swarm://tasks/{id}"), "id").await, [task_id.as_str()]);
        assert!(complete(Reference::for_prompt("start-worker"), "taskId").await.is_empty());

        client.cancel().await.ok();
    }

    // An unregistered caller has no tasks of its own to list, nor mail.
    let anonymous = connect_http(&hub, None, Revision::Initialize).await;
    let resources = anonymous.list_all_resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|resource| resource.uri.as_str()).collect();
    assert_eq!(uris, ["swarm://agents"]);
    let unregistered = anonymous.get_prompt(GetPromptRequestParams::new("slack-inbox")).await.unwrap_err();
    assert_eq!(error_code(unregistered).0, ErrorCode::INVALID_PARAMS.0);
    let (code, _) = error_code(
        anonymous.read_resource(ReadResourceRequestParams::new("swarm://mail")).await.unwrap_err(),
    );
    assert_eq!(code, ErrorCode::INVALID_PARAMS.0);
}

/// A client that reports resource updates and tool-list changes.
#[derive(Clone)]
struct Watcher {
    info: ClientConfig,
    updated: mpsc::UnboundedSender<String>,
    tools_changed: Arc<tokio::sync::Notify>,
}

impl ClientHandler for Watcher {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.updated.send(params.uri);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }
}

struct Watched {
    client: RunningService<RoleClient, Watcher>,
    updated: mpsc::UnboundedReceiver<String>,
    tools_changed: Arc<tokio::sync::Notify>,
}

async fn watch_stdio(database: &Database, agent: Option<&str>, revision: Revision) -> Watched {
    let (sender, updated) = mpsc::unbounded_channel();
    let tools_changed = Arc::new(tokio::sync::Notify::new());
    let mut info = ClientConfig::default();
    info.protocol_version = ProtocolVersion::V_2025_11_25;
    info.client_info = rmcp::model::Implementation::new("swarm-tests", "1");
    let watcher = Watcher { info, updated: sender, tools_changed: Arc::clone(&tools_changed) };
    let (database, agent) = (database.clone(), agent.map(str::to_string));
    let command = tokio::process::Command::new(SWARM).configure(move |command| {
        command.arg("mcp").env_remove("API_KEY").env_remove("DATABASE_URL").env_remove("AGENT_ID");
        command.env_remove("ATLAS_TRIGGER").env("RUST_LOG", "warn");
        if let Database::SqliteFile(path) = &database {
            command.arg("--db").arg(path);
        }
        if let Some(agent) = &agent {
            command.env("AGENT_ID", agent);
        }
    });
    let transport = TokioChildProcess::new(command).expect("swarm mcp starts");
    let client = match revision {
        Revision::Initialize => watcher.serve(transport).await,
        Revision::Stateless => {
            let lifecycle =
                ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
            watcher.serve_with_lifecycle(transport, lifecycle).await
        }
    }
    .expect("swarm mcp answers");
    Watched { client, updated, tools_changed }
}

async fn next_update(updated: &mut mpsc::UnboundedReceiver<String>, what: &str) -> String {
    tokio::time::timeout(Duration::from_secs(15), updated.recv())
        .await
        .unwrap_or_else(|_| panic!("no notifications/resources/updated for {what}"))
        .expect("the client is alive")
}

#[tokio::test]
#[allow(deprecated)]
async fn mcp_stdio_subscriptions_tell_of_task_changes_and_new_mail() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let (lead, worker) = (new_agent_id(), new_agent_id());
    let mut lead_side = watch_stdio(&database, Some(&lead), Revision::Initialize).await;
    ok(&lead_side.client, "join-swarm", json!({"name": "boss", "lead": true})).await;
    let mut worker_side = watch_stdio(&database, Some(&worker), Revision::Initialize).await;
    ok(&worker_side.client, "join-swarm", json!({"name": "builder"})).await;
    let sent = ok(
        &lead_side.client,
        "send-task",
        json!({"agentId": worker, "task": "port the parser", "offerMode": true}),
    )
    .await;
    let task_id = sent["task"]["id"].as_str().unwrap().to_string();
    let task_uri = format!("swarm://tasks/{task_id}");

    // 2025 revisions: resources/subscribe, notifications on the session.
    lead_side.client.subscribe(SubscribeRequestParams::new(task_uri.clone())).await.expect("subscribe");
    worker_side
        .client
        .subscribe(SubscribeRequestParams::new("swarm://mail/unread"))
        .await
        .expect("subscribe");
    // Nobody subscribes to what does not exist.
    let missing = format!("swarm://tasks/{}", uuid::Uuid::new_v4());
    let (code, _) =
        error_code(lead_side.client.subscribe(SubscribeRequestParams::new(missing)).await.unwrap_err());
    assert_eq!(code, ErrorCode::INVALID_PARAMS.0);

    // At once: what the subscriber read when subscribing is the baseline.
    ok(&worker_side.client, "task-action", json!({"action": "accept", "taskId": task_id})).await;
    assert_eq!(next_update(&mut lead_side.updated, "the accepted task").await, task_uri);
    let read =
        lead_side.client.read_resource(ReadResourceRequestParams::new(task_uri.clone())).await.unwrap();
    assert_eq!(text_of(&read.contents[0])["task"]["status"], "pending");

    ok(&lead_side.client, "send-mail", json!({"to": worker, "subject": "hi", "body": "how goes it"})).await;
    assert_eq!(next_update(&mut worker_side.updated, "new mail").await, "swarm://mail/unread");

    // Unsubscribed, the lead hears no more of the task.
    lead_side.client.unsubscribe(rmcp::model::UnsubscribeRequestParams::new(task_uri.clone())).await.unwrap();
    ok(&worker_side.client, "store-progress", json!({"taskId": task_id, "progress": "lexer done"})).await;
    let quiet = tokio::time::timeout(Duration::from_secs(3), lead_side.updated.recv()).await;
    assert!(quiet.is_err(), "an update after unsubscribe: {quiet:?}");
    lead_side.client.cancel().await.ok();
    worker_side.client.cancel().await.ok();
}

#[tokio::test]
async fn mcp_stdio_2026_clients_hear_only_what_they_listen_for() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    // Without a subscription, joining the swarm sends no notifications/tools/list_changed.
    let quiet = watch_stdio(&database, None, Revision::Stateless).await;
    ok(&quiet.client, "join-swarm", json!({"name": "quiet"})).await;
    let heard = tokio::time::timeout(Duration::from_secs(2), quiet.tools_changed.notified()).await;
    assert!(heard.is_err(), "a 2026-07-28 client that did not subscribe was sent tools/list_changed");
    quiet.client.cancel().await.ok();

    // subscriptions/listen: the tool list change, and updates of the listed resources.
    let listening = watch_stdio(&database, None, Revision::Stateless).await;
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let mut subscription = listening.client.listen(filter).await.expect("subscriptions/listen");
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));
    ok(&listening.client, "join-swarm", json!({"name": "listener"})).await;
    let notification = tokio::time::timeout(Duration::from_secs(10), subscription.next())
        .await
        .expect("tools/list_changed on the stream")
        .expect("the stream is open")
        .expect("a notification");
    assert!(
        matches!(notification, rmcp::model::ServerNotification::ToolListChangedNotification(_)),
        "{notification:?}"
    );

    let filter = SubscriptionFilter::builder().resource_subscriptions(["swarm://mail/unread"]).build();
    let mut mail = listening.client.listen(filter).await.expect("subscriptions/listen");
    let me = ok(&listening.client, "my-agent-info", json!({})).await;
    let my_id = me["yourAgentId"].as_str().unwrap().to_string();
    let sender = watch_stdio(&database, None, Revision::Initialize).await;
    ok(&sender.client, "join-swarm", json!({"name": "sender"})).await;
    // The watcher reads a subscribed resource once a second: mail sent before its first
    // read is what it saw first, not news. Mail again until one is news.
    let mut sent = 0;
    let notification = loop {
        let body = format!("ping {sent}");
        ok(&sender.client, "send-mail", json!({"to": my_id, "subject": "hi", "body": body})).await;
        sent += 1;
        match tokio::time::timeout(Duration::from_secs(2), mail.next()).await {
            Ok(next) => break next.expect("the stream is open").expect("a notification"),
            Err(_) => assert!(sent < 10, "no resources/updated on the stream after {sent} mails"),
        }
    };
    match notification {
        rmcp::model::ServerNotification::ResourceUpdatedNotification(update) => {
            assert_eq!(update.params.uri, "swarm://mail/unread")
        }
        other => panic!("{other:?}"),
    }
    listening.client.cancel().await.ok();
    sender.client.cancel().await.ok();
}

#[tokio::test]
async fn mcp_http_answers_malformed_requests_with_json_rpc_errors() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let post = |body: &'static str, accept: &'static str| {
        let request = hub
            .request(reqwest::Method::POST, "/mcp", None)
            .header("content-type", "application/json")
            .header("accept", accept)
            .header("mcp-protocol-version", "2025-11-25")
            .body(body);
        async move {
            let response = request.send().await.expect("the hub answers");
            let status = response.status().as_u16();
            let kind = response.headers().get("content-type").map(|v| v.to_str().unwrap().to_string());
            let body: Value = response.json().await.expect("a JSON body");
            (status, kind, body)
        }
    };
    let both = "application/json, text/event-stream";
    let (status, _, body) = post("{not json", both).await;
    assert_eq!((status, &body["error"]["code"], &body["id"]), (400, &json!(-32700), &Value::Null), "{body}");
    let (status, _, body) = post(r#"{"jsonrpc":"2.0","id":7}"#, both).await;
    assert_eq!((status, &body["error"]["code"], &body["id"]), (400, &json!(-32600), &json!(7)), "{body}");
    let (status, _, body) = post(r#"{"id":1,"method":"tools/list"}"#, both).await;
    assert_eq!((status, &body["error"]["code"]), (400, &json!(-32600)), "{body}");
    let (status, _, body) = post(r#"{"jsonrpc":"2.0","id":8,"method":"tools/call"}"#, both).await;
    assert_eq!((status, &body["error"]["code"], &body["id"]), (400, &json!(-32602), &json!(8)), "{body}");
    let (status, _, body) =
        post(r#"{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{}}"#, both).await;
    assert_eq!((status, &body["error"]["code"]), (400, &json!(-32602)), "{body}");
    // A client that accepts only JSON gets JSON.
    let initialize = r#"{"jsonrpc":"2.0","id":10,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}"#;
    let (status, kind, body) = post(initialize, "application/json").await;
    assert_eq!((status, kind.as_deref()), (200, Some("application/json")), "{body}");
    assert_eq!(body["result"]["serverInfo"]["name"], "swarm");
    let (status, _, body) = post(
        r#"{"jsonrpc":"2.0","id":11,"method":"logging/setLevel","params":{"level":"info"}}"#,
        "application/json",
    )
    .await;
    assert_eq!((status, &body["result"]), (200, &json!({})), "{body}");
    // A 2025 client gets a session id with `initialize`: one that names nothing on the hub
    // (no replica looks it up), and requests that carry it are answered as any other.
    let response = hub
        .request(reqwest::Method::POST, "/mcp", None)
        .header("content-type", "application/json")
        .header("accept", both)
        .body(initialize)
        .send()
        .await
        .unwrap();
    let session = response.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_string());
    let session = session.expect("initialize answers an Mcp-Session-Id");
    assert_eq!(session.len(), 32, "a random UUID: {session}");
    let with_session = |method: reqwest::Method, body: &'static str| {
        hub.request(method, "/mcp", None)
            .header("content-type", "application/json")
            .header("accept", both)
            .header("mcp-protocol-version", "2025-11-25")
            .header("mcp-session-id", session.as_str())
            .body(body)
            .send()
    };
    let listed = with_session(reqwest::Method::POST, r#"{"jsonrpc":"2.0","id":12,"method":"tools/list"}"#);
    let listed = listed.await.unwrap();
    assert_eq!(listed.status(), 200);
    assert!(listed.headers().get("mcp-session-id").is_none(), "only initialize hands one out");
    let listed: Value = listed.json().await.unwrap();
    assert!(listed["result"]["tools"].as_array().is_some_and(|tools| !tools.is_empty()), "{listed}");
    // No standalone stream to open and no session to end: 405 both, as the revision allows.
    assert_eq!(with_session(reqwest::Method::GET, "").await.unwrap().status(), 405);
    assert_eq!(with_session(reqwest::Method::DELETE, "").await.unwrap().status(), 405);

    // rmcp's own refusals come first: a foreign Host, a body that does not say it is JSON.
    let foreign = hub
        .request(reqwest::Method::POST, "/mcp", None)
        .header("host", "evil.example")
        .header("content-type", "application/json")
        .header("accept", both)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    let text = hub
        .request(reqwest::Method::POST, "/mcp", None)
        .header("content-type", "text/plain")
        .header("accept", both)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(text.status(), 415);
    // And the hub keeps answering.
    let (status, _) = hub.get("/api/agents", None).await;
    assert_eq!(status, 200);
}

#[test]
fn swarm_mcp_exits_0_when_the_client_leaves_before_a_lifecycle() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("swarm.db");
    let discover = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    for input in ["", ping, discover] {
        let mut child = Command::new(SWARM)
            .arg("mcp")
            .arg("--db")
            .arg(&db)
            .env_remove("AGENT_ID")
            .env_remove("DATABASE_URL")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("swarm mcp starts");
        let mut stdin = child.stdin.take().unwrap();
        if !input.is_empty() {
            writeln!(stdin, "{input}").unwrap();
        }
        drop(stdin);
        let output = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "after {input:?}: {:?}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        if !input.is_empty() {
            let answer: Value =
                serde_json::from_str(stdout.lines().next().unwrap_or("")).expect("one answer");
            assert!(answer.get("result").is_some(), "{answer}");
        }
        if input == discover {
            let answer: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
            assert_eq!(answer["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "swarm");
            assert_eq!(answer["result"]["capabilities"]["resources"]["subscribe"], true);
        }
    }
}
