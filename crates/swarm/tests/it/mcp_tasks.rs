//! The MCP Tasks extension (SEP-2663) with rmcp's client: a client that declares it gets
//! `poll-task` as a task, reads the outcome with `tasks/get` from any process on the same
//! database, and cancels it; a client that does not declare it calls as before. The hub's
//! retention removes an expired one.

use std::{sync::Arc, time::Duration};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ErrorCode, GetTaskParams,
    GetTaskResult, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::service::ServiceError;
use serde_json::{Value, json};
use swarm_hub::HubOptions;

use crate::{
    hub::{Hub, sqlite_file},
    mcp_client::{
        Client, Revision, client_info, connect_http, connect_http_as, connect_stdio_as, new_agent_id, ok,
    },
    metrics::scrape,
    support::eventually,
};

const KEY: &str = "mcp-tasks-key-0123456789";

fn declaring_tasks() -> rmcp::model::ClientConfig {
    let mut info = client_info();
    info.capabilities = ClientCapabilities::builder().enable_tasks().build();
    info
}

/// A stateless (2026-07-28) client of `agent` that declares the extension.
async fn declaring_client(hub: &Hub, agent: &str) -> Client {
    connect_http_as(
        hub,
        hub.bearer_for(Some(agent)).as_deref(),
        Some(agent),
        Revision::Stateless,
        declaring_tasks(),
    )
    .await
}

async fn poll_once(client: &Client, wait_seconds: u64) -> CallToolResponse {
    let arguments = json!({"waitSeconds": wait_seconds}).as_object().unwrap().clone();
    let params = CallToolRequestParams::new("poll-task").with_arguments(arguments);
    client.call_tool_once(params).await.expect("tools/call poll-task")
}

/// The task id of a call answered with a task (and its seed state checked).
async fn start(client: &Client, wait_seconds: u64) -> String {
    match poll_once(client, wait_seconds).await {
        CallToolResponse::Task(created) => {
            assert_eq!(created.task.status, TaskStatus::Working);
            assert_eq!(created.task.ttl_ms, Some(3_600_000));
            assert_eq!(created.task.poll_interval_ms, Some(1000));
            created.task.task_id
        }
        other => panic!("expected a task, got {other:?}"),
    }
}

async fn get(client: &Client, id: &str) -> GetTaskResult {
    client.get_task(GetTaskParams::new(id)).await.unwrap_or_else(|err| panic!("tasks/get {id}: {err}"))
}

fn code(err: ServiceError) -> i32 {
    match err {
        ServiceError::McpError(error) => error.code.0,
        other => panic!("expected a JSON-RPC error, got {other}"),
    }
}

/// The completed task's `CallToolResult`, its `structuredContent` checked against the
/// tool's output schema as every other result is.
async fn completed(client: &Client, id: &str) -> Value {
    let state = get(client, id).await;
    let TaskPayload::Completed { result } = state.task.payload else {
        panic!("task {id} is not completed: {:?}", state.task)
    };
    let content = result["structuredContent"].clone();
    let tools = client.list_all_tools().await.unwrap();
    let schema = tools.iter().find(|tool| tool.name == "poll-task").unwrap().output_schema.clone().unwrap();
    crate::mcp_schema::validate(&Value::Object(schema.as_ref().clone()), &content)
        .unwrap_or_else(|err| panic!("poll-task's result does not fit its schema: {err}\n{content}"));
    Value::Object(result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_poll_task_runs_as_a_task_any_process_answers_for() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let hub = Hub::start(&database, Some(KEY));
    let (lead, worker, other) = (new_agent_id(), new_agent_id(), new_agent_id());
    let lead_client = connect_http(&hub, Some(&lead), Revision::Initialize).await;
    ok(&lead_client, "join-swarm", json!({"name": "boss", "lead": true})).await;
    for (id, name) in [(&worker, "builder"), (&other, "other")] {
        let client = connect_http(&hub, Some(id), Revision::Initialize).await;
        ok(&client, "join-swarm", json!({"name": name})).await;
    }
    let client = declaring_client(&hub, &worker).await;

    // The call answers at once with a task, durable before its id is seen: no work yet.
    let id = start(&client, 30).await;
    let state = get(&client, &id).await;
    assert_eq!((state.task.task.task_id.as_str(), state.task.status()), (id.as_str(), TaskStatus::Working));

    // Work arrives: the next tasks/get claims it for the worker and completes the task.
    let sent = ok(&lead_client, "send-task", json!({"agentId": worker, "task": "port the parser"})).await;
    let task_id = sent["task"]["id"].as_str().unwrap().to_string();
    let result = completed(&client, &id).await;
    let content = &result["structuredContent"];
    assert_eq!(content["trigger"]["type"], "task_assigned", "{content}");
    assert_eq!(content["task"]["id"], task_id.as_str());
    assert_eq!(content["task"]["status"], "in_progress");
    assert_eq!(result["isError"], false);

    // Another process on the same database answers for the same task, with the same result:
    // the task is in the store, not in the hub that took the call.
    let replica = connect_stdio_as(&database, Some(&worker), &[], declaring_tasks()).await;
    assert_eq!(completed(&replica, &id).await, result);
    // A terminal task stays as it ended: cancel is acknowledged and changes nothing.
    replica.cancel_task(CancelTaskParams::new(id.clone())).await.expect("tasks/cancel of a finished task");
    assert_eq!(completed(&client, &id).await, result);
    let answers = UpdateTaskParams::new(id.clone(), Default::default());
    client.update_task(answers).await.expect("tasks/update is acknowledged");

    // Cancelled while waiting: settles cancelled on every process, twice over.
    let id = start(&client, 30).await;
    client.cancel_task(CancelTaskParams::new(id.clone())).await.expect("tasks/cancel");
    replica.cancel_task(CancelTaskParams::new(id.clone())).await.expect("tasks/cancel again");
    assert_eq!(get(&replica, &id).await.task.status(), TaskStatus::Cancelled);

    // The call's own wait over, no work: completed with no trigger, as the call would answer.
    let id = start(&client, 1).await;
    eventually("the call's wait to end", || async {
        (get(&client, &id).await.task.status() != TaskStatus::Working).then_some(())
    })
    .await;
    let result = completed(&client, &id).await;
    assert_eq!(result["structuredContent"]["trigger"], Value::Null, "{result}");

    // Only its caller reads a task; an unknown or malformed id is -32602.
    let stranger = declaring_client(&hub, &other).await;
    let err = stranger.get_task(GetTaskParams::new(id.clone())).await.unwrap_err();
    assert_eq!(code(err), ErrorCode::INVALID_PARAMS.0);
    let err = client.get_task(GetTaskParams::new(uuid::Uuid::new_v4().to_string())).await.unwrap_err();
    assert_eq!(code(err), ErrorCode::INVALID_PARAMS.0);
    let err = client.get_task(GetTaskParams::new("not-a-task")).await.unwrap_err();
    assert_eq!(code(err), ErrorCode::INVALID_PARAMS.0);

    // No wait: answered at once, no task.
    assert!(matches!(poll_once(&client, 0).await, CallToolResponse::Complete(_)));

    // A client that did not declare the extension calls as before, and has no tasks/*.
    let plain = connect_http(&hub, Some(&worker), Revision::Stateless).await;
    assert!(matches!(poll_once(&plain, 1).await, CallToolResponse::Complete(_)));
    let err = plain.get_task(GetTaskParams::new(id)).await.unwrap_err();
    assert_eq!(code(err), -32021, "missing required client capability");
}

/// The hub's retention pass removes a task whose `ttlMs` ran out, with no other task
/// created to sweep it, and counts it in `/metrics`; a live one stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_task_is_removed_by_the_hubs_retention_pass() {
    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("clock");
    let started = chrono::Utc::now();
    std::fs::write(&clock, started.to_rfc3339()).unwrap();
    let options = HubOptions {
        clock: Some(Arc::new(swarm_service::clock::FileClock::new(clock.clone()))),
        retention_every: Duration::from_millis(100),
        ..HubOptions::default()
    };
    let hub = Hub::start_with_options(&sqlite_file(dir.path()), Some(KEY), &[], options);
    let worker = new_agent_id();
    let joining = connect_http(&hub, Some(&worker), Revision::Initialize).await;
    ok(&joining, "join-swarm", json!({"name": "builder"})).await;
    let client = declaring_client(&hub, &worker).await;
    let id = start(&client, 30).await;

    let removed =
        || async { scrape(&hub).await.get("swarm_retention_removed_rows_total", &[("kind", "mcp_tasks")]) };
    let passes = || async { scrape(&hub).await.get("swarm_retention_passes_total", &[]) };
    let first = passes().await;
    eventually("two retention passes", || async { (passes().await >= first + 2.0).then_some(()) }).await;
    assert_eq!(removed().await, 0.0, "a live task stays");
    assert_eq!(get(&client, &id).await.task.status(), TaskStatus::Working);

    // Two hours on: past the task's hour.
    std::fs::write(&clock, (started + chrono::Duration::hours(2)).to_rfc3339()).unwrap();
    eventually("the expired task removed", || async { (removed().await >= 1.0).then_some(()) }).await;
    let err = client.get_task(GetTaskParams::new(id)).await.unwrap_err();
    assert_eq!(code(err), ErrorCode::INVALID_PARAMS.0);
}
