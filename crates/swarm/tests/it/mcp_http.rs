//! MCP over Streamable HTTP: rmcp's own client against the real hub at `/mcp`, in both
//! protocol revisions (2025-11-25 with `initialize`, 2026-07-28 stateless), checked
//! against what the REST API says.

use serde_json::{Value, json};

use crate::{
    hub::{Database, Hub, sqlite_file},
    mcp_client::{
        REVISIONS, Revision, UNREGISTERED_TOOLS, WORKER_TOOLS, call, connect_http, lead_tools, new_agent_id,
        ok, refused, tool_names,
    },
    support,
};

const KEY: &str = "mcp-test-key-0123456789";

/// The opt-in groups: offered to an agent that names one in its capabilities, and to every
/// agent when the hub's `--capabilities` names it; calls are answered either way.
#[tokio::test]
async fn opt_in_tool_groups_are_offered_by_capability() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(&sqlite_file(dir.path()), None, &["--capabilities", "services"]);
    let (plain, scheduler) = (new_agent_id(), new_agent_id());
    let plain_client = connect_http(&hub, Some(&plain), Revision::Stateless).await;
    ok(&plain_client, "join-swarm", json!({"name": "plain"})).await;
    let names = tool_names(&plain_client).await;
    assert!(names.contains(&"register-service".to_string()), "the hub offers services: {names:?}");
    assert!(!names.contains(&"create-schedule".to_string()), "{names:?}");
    let listed = ok(&plain_client, "list-schedules", json!({})).await;
    assert_eq!(listed["success"], true, "{listed}");
    let scheduler_client = connect_http(&hub, Some(&scheduler), Revision::Stateless).await;
    ok(&scheduler_client, "join-swarm", json!({"name": "cron", "capabilities": ["scheduling"]})).await;
    let names = tool_names(&scheduler_client).await;
    assert!(names.contains(&"create-schedule".to_string()), "{names:?}");
}

#[tokio::test]
async fn mcp_tools_are_listed_by_role() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let (lead, worker) = (new_agent_id(), new_agent_id());
    for revision in REVISIONS {
        let anonymous = connect_http(&hub, None, revision).await;
        assert_eq!(tool_names(&anonymous).await, UNREGISTERED_TOOLS, "{revision:?}");
        // An id nobody registered is an unregistered caller too.
        let stranger = connect_http(&hub, Some(&new_agent_id()), revision).await;
        assert_eq!(tool_names(&stranger).await, UNREGISTERED_TOOLS, "{revision:?}");
    }

    // The role is looked up on every request, so a client sees its new tools right after joining.
    let lead_client = connect_http(&hub, Some(&lead), Revision::Initialize).await;
    let joined = ok(&lead_client, "join-swarm", json!({"name": "boss", "lead": true})).await;
    assert_eq!(joined["yourAgentId"], lead.as_str());
    assert_eq!(joined["agent"]["isLead"], true);
    assert_eq!(tool_names(&lead_client).await, lead_tools());

    let worker_client = connect_http(&hub, Some(&worker), Revision::Stateless).await;
    ok(&worker_client, "join-swarm", json!({"name": "builder", "capabilities": ["rust"]})).await;
    assert_eq!(tool_names(&worker_client).await, WORKER_TOOLS);
    for revision in REVISIONS {
        let lead_again = connect_http(&hub, Some(&lead), revision).await;
        assert_eq!(tool_names(&lead_again).await, lead_tools(), "{revision:?}");
    }

    // Hidden tools are refused with the reason, not a protocol error.
    let reason = refused(&lead_client, "poll-task", json!({})).await;
    assert!(reason.contains("for workers"), "{reason}");
    let anonymous = connect_http(&hub, None, Revision::Initialize).await;
    let reason = refused(&anonymous, "send-task", json!({"task": "x"})).await;
    assert!(reason.contains("join-swarm"), "{reason}");

    // One lead per swarm.
    let second = new_agent_id();
    let second_client = connect_http(&hub, Some(&second), Revision::Initialize).await;
    let reason = refused(&second_client, "join-swarm", json!({"name": "usurper", "lead": true})).await;
    assert!(reason.to_lowercase().contains("lead"), "{reason}");

    // requestedId names the agent, whatever the header says.
    let requested = new_agent_id();
    let joined = ok(&anonymous, "join-swarm", json!({"name": "picked", "requestedId": requested})).await;
    assert_eq!(joined["yourAgentId"], requested.as_str());
    let (status, agent) = hub.get(&format!("/api/agents/{requested}"), None).await;
    assert_eq!((status, agent["name"].as_str()), (200, Some("picked")));
}

#[tokio::test]
async fn mcp_walks_a_task_from_offer_to_completion_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    offer_accept_progress_complete(sqlite_file(dir.path())).await;
}

#[tokio::test]
async fn mcp_walks_a_task_from_offer_to_completion_postgres() {
    let database = support::postgres_database().await;
    offer_accept_progress_complete(database.database()).await;
}

/// The lead offers a task over MCP; the worker accepts it, reports progress and
/// completes it over MCP; after every step the REST view agrees.
async fn offer_accept_progress_complete(database: Database) {
    let hub = Hub::start(&database, Some(KEY));
    let (lead, worker, bystander) = (new_agent_id(), new_agent_id(), new_agent_id());
    let lead_client = connect_http(&hub, Some(&lead), Revision::Initialize).await;
    let worker_client = connect_http(&hub, Some(&worker), Revision::Stateless).await;
    let bystander_client = connect_http(&hub, Some(&bystander), Revision::Initialize).await;
    ok(&lead_client, "join-swarm", json!({"name": "lead", "lead": true})).await;
    ok(&worker_client, "join-swarm", json!({"name": "worker", "maxTasks": 2})).await;
    ok(&bystander_client, "join-swarm", json!({"name": "bystander"})).await;
    let rest_task = async |id: &str| -> Value {
        let (status, body) = hub.get(&format!("/api/tasks/{id}"), None).await;
        assert_eq!(status, 200, "{body}");
        body
    };

    // send-task's rules: never to the lead, never to yourself.
    let reason = refused(&worker_client, "send-task", json!({"agentId": lead, "task": "x"})).await;
    assert!(reason.contains("lead"), "{reason}");
    let reason = refused(&worker_client, "send-task", json!({"agentId": worker, "task": "x"})).await;
    assert!(reason.contains("yourself"), "{reason}");

    let sent = ok(
        &lead_client,
        "send-task",
        json!({"agentId": worker, "task": "write the report", "offerMode": true, "tags": ["docs"], "priority": 70}),
    )
    .await;
    let task_id = sent["task"]["id"].as_str().expect("a task id").to_string();
    let task = rest_task(&task_id).await;
    assert_eq!(task["status"], "offered");
    assert_eq!(task["offeredTo"], worker.as_str());
    assert_eq!(task["creatorAgentId"], lead.as_str());
    assert_eq!((task["source"].as_str(), task["priority"].as_i64()), (Some("mcp"), Some(70)));

    let offers = ok(&worker_client, "get-tasks", json!({"offeredToMe": true})).await;
    assert_eq!(offers["total"], 1);
    assert_eq!(offers["tasks"][0]["id"], task_id.as_str());
    let reason =
        refused(&bystander_client, "task-action", json!({"action": "accept", "taskId": task_id})).await;
    assert!(reason.contains("not offered to you"), "{reason}");

    let accepted = ok(&worker_client, "task-action", json!({"action": "accept", "taskId": task_id})).await;
    assert_eq!(accepted["task"]["status"], "pending");
    let task = rest_task(&task_id).await;
    assert_eq!((task["status"].as_str(), task["agentId"].as_str()), (Some("pending"), Some(worker.as_str())));

    let reason =
        refused(&bystander_client, "store-progress", json!({"taskId": task_id, "progress": "mine"})).await;
    assert!(reason.contains("assignee"), "{reason}");
    let reason = refused(&bystander_client, "cancel-task", json!({"taskId": task_id})).await;
    assert!(reason.contains("lead or the task's creator"), "{reason}");

    // Reporting on one's own pending task starts it.
    let progress =
        ok(&worker_client, "store-progress", json!({"taskId": task_id, "progress": "half done"})).await;
    assert_eq!(progress["task"]["status"], "in_progress");
    let task = rest_task(&task_id).await;
    assert_eq!(
        (task["status"].as_str(), task["progress"].as_str()),
        (Some("in_progress"), Some("half done"))
    );
    let (_, agent) = hub.get(&format!("/api/agents/{worker}"), None).await;
    assert_eq!(agent["status"], "busy");

    let done = ok(
        &worker_client,
        "store-progress",
        json!({"taskId": task_id, "status": "completed", "output": "report.md"}),
    )
    .await;
    assert_eq!(
        (done["task"]["status"].as_str(), done["alreadyFinished"].as_bool()),
        (Some("completed"), Some(false))
    );
    let task = rest_task(&task_id).await;
    assert_eq!((task["status"].as_str(), task["output"].as_str()), (Some("completed"), Some("report.md")));
    assert!(task["finishedAt"].is_string());
    let (_, agent) = hub.get(&format!("/api/agents/{worker}"), None).await;
    assert_eq!(agent["status"], "idle");

    // A repeated finish changes nothing; a late note is refused.
    let again = ok(&worker_client, "store-progress", json!({"taskId": task_id, "status": "completed"})).await;
    assert_eq!(again["alreadyFinished"], true);
    let reason =
        refused(&worker_client, "store-progress", json!({"taskId": task_id, "progress": "more"})).await;
    assert!(reason.contains("finished"), "{reason}");

    // The MCP history is the REST history.
    let details = ok(&lead_client, "get-task-details", json!({"taskId": task_id})).await;
    let event_types = |logs: &Value| -> Vec<String> {
        logs.as_array()
            .unwrap()
            .iter()
            .map(|event| event["eventType"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(event_types(&details["logs"]), event_types(&task["logs"]));
    assert!(event_types(&details["logs"]).contains(&"task_accepted".to_string()));
}

#[tokio::test]
async fn mcp_task_actions_and_lists_follow_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let (lead, worker) = (new_agent_id(), new_agent_id());
    let lead_client = connect_http(&hub, Some(&lead), Revision::Stateless).await;
    let worker_client = connect_http(&hub, Some(&worker), Revision::Initialize).await;
    ok(&lead_client, "join-swarm", json!({"name": "lead", "lead": true})).await;
    ok(&worker_client, "join-swarm", json!({"name": "worker"})).await;

    let created =
        ok(&worker_client, "task-action", json!({"action": "create", "task": "tidy up", "tags": ["chore"]}))
            .await;
    let pool_id = created["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(created["task"]["status"], "unassigned");
    let pool = ok(&lead_client, "get-tasks", json!({"unassigned": true, "tags": ["chore"]})).await;
    assert_eq!(pool["total"], 1);

    ok(&worker_client, "task-action", json!({"action": "to_backlog", "taskId": pool_id})).await;
    let backlog = ok(&lead_client, "get-tasks", json!({"status": "backlog"})).await;
    assert_eq!(backlog["total"], 1);
    ok(&lead_client, "task-action", json!({"action": "from_backlog", "taskId": pool_id})).await;

    let claimed = ok(&worker_client, "task-action", json!({"action": "claim", "taskId": pool_id})).await;
    assert_eq!(claimed["task"]["agentId"], worker.as_str());
    let mine = ok(&worker_client, "get-tasks", json!({"mineOnly": true})).await;
    assert_eq!(mine["total"], 1);
    ok(&worker_client, "task-action", json!({"action": "release", "taskId": pool_id})).await;

    // A direct assignment needs a free slot; an offer does not.
    let busy = ok(&lead_client, "send-task", json!({"agentId": worker, "task": "first"})).await;
    let busy_id = busy["task"]["id"].as_str().unwrap().to_string();
    ok(&worker_client, "store-progress", json!({"taskId": busy_id, "progress": "on it"})).await;
    let reason = refused(&lead_client, "send-task", json!({"agentId": worker, "task": "second"})).await;
    assert!(reason.contains("capacity"), "{reason}");
    let offered =
        ok(&lead_client, "send-task", json!({"agentId": worker, "task": "second", "offerMode": true})).await;
    let offer_id = offered["task"]["id"].as_str().unwrap().to_string();
    let rejected =
        ok(&worker_client, "task-action", json!({"action": "reject", "taskId": offer_id, "reason": "busy"}))
            .await;
    assert_eq!(
        (rejected["task"]["status"].as_str(), rejected["task"]["rejectionReason"].as_str()),
        (Some("unassigned"), Some("busy"))
    );

    // The lead may report on and cancel any task; the worker's task ends cancelled.
    ok(&lead_client, "store-progress", json!({"taskId": busy_id, "progress": "checked by lead"})).await;
    let cancelled = ok(&lead_client, "cancel-task", json!({"taskId": busy_id, "reason": "not needed"})).await;
    assert_eq!(cancelled["task"]["status"], "cancelled");
    let (_, task) = hub.get(&format!("/api/tasks/{busy_id}"), None).await;
    assert_eq!(
        (task["status"].as_str(), task["failureReason"].as_str()),
        (Some("cancelled"), Some("not needed"))
    );

    let profile = ok(&worker_client, "update-profile", json!({"name": "renamed", "role": "tester"})).await;
    assert_eq!(
        (profile["agent"]["name"].as_str(), profile["agent"]["role"].as_str()),
        (Some("renamed"), Some("tester"))
    );
    let info = ok(&worker_client, "my-agent-info", json!({})).await;
    assert_eq!(info["agent"]["name"], "renamed");
    assert_eq!(info["inbox"]["poolTasksCount"], 2);
    let swarm = ok(&worker_client, "get-swarm", json!({})).await;
    assert_eq!(swarm["agents"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn mcp_bad_input_gets_a_clear_refusal_and_the_hub_keeps_answering() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let worker = new_agent_id();
    let client = connect_http(&hub, Some(&worker), Revision::Initialize).await;
    ok(&client, "join-swarm", json!({"name": "worker"})).await;

    let check = async |tool: &str, arguments: Value, expected: &str| {
        let reason = refused(&client, tool, arguments.clone()).await;
        assert!(reason.contains(expected), "{tool} {arguments}: {reason:?} lacks {expected:?}");
    };
    check("send-task", json!({"task": 5}), "task: invalid type").await;
    check("send-task", json!({}), "missing field `task`").await;
    check("send-task", json!({"task": "   "}), "must not be empty").await;
    check("send-task", json!({"task": "x", "priority": 101}), "priority").await;
    check("get-task-details", json!({"taskId": "not-a-uuid"}), "taskId:").await;
    check("get-task-details", json!({"taskId": new_agent_id()}), "not found").await;
    check("get-tasks", json!({"bogus": true}), "unknown field `bogus`").await;
    check("get-tasks", json!({"limit": 0}), "limit must be between 1 and 100").await;
    check("get-tasks", json!({"limit": 101}), "limit must be between 1 and 100").await;
    check("get-tasks", json!({"status": "done"}), "unknown task status").await;
    check("task-action", json!({"action": "explode", "taskId": new_agent_id()}), "action:").await;
    check("task-action", json!({"action": "claim"}), "taskId").await;
    check("store-progress", json!({"taskId": new_agent_id()}), "give progress").await;
    check("store-progress", json!({"taskId": new_agent_id(), "progress": "x"}), "not found").await;
    check("store-progress", json!({"taskId": new_agent_id(), "status": "paused"}), "status:").await;
    check("poll-task", json!({"waitSeconds": 61}), "waitSeconds").await;
    check("my-agent-info", json!({"extra": 1}), "unknown field").await;
    check("join-swarm", json!({"name": "x", "maxTasks": 50}), "maxTasks").await;

    // An unknown tool is a protocol error (the request cannot be routed).
    let params = rmcp::model::CallToolRequestParams::new("no-such-tool");
    assert!(client.call_tool(params).await.is_err());

    // A header that is not a UUID: calls say why; listing is refused.
    let bad = connect_http(&hub, Some("agent-7"), Revision::Initialize).await;
    let reason = refused(&bad, "get-swarm", json!({})).await;
    assert!(reason.contains("X-Agent-ID must be a UUID"), "{reason}");
    assert!(bad.list_all_tools().await.is_err());

    // Raw HTTP: no key, a foreign Host, garbage bodies. Only 4xx, always JSON.
    let http = reqwest::Client::new();
    let response = http.post(hub.url("/mcp")).body("{}").send().await.unwrap();
    assert_eq!(response.status(), 401);
    let response = http
        .post(hub.url("/mcp"))
        .bearer_auth(KEY)
        .header("Host", "host.docker.internal:3013")
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    // A worker in a container reaches the hub by another name: the refusal says what to set.
    let refusal: Value = response.json().await.expect("a JSON refusal");
    let error = refusal["error"].as_str().unwrap_or_default();
    assert!(
        ["host.docker.internal", "--mcp-allowed-hosts", "MCP_ALLOWED_HOSTS", "--host"]
            .iter()
            .all(|needed| error.contains(needed)),
        "{refusal}"
    );
    for body in ["not json", "{", "[]", r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":7}"#] {
        let response = http
            .post(hub.url("/mcp"))
            .bearer_auth(KEY)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        assert!(status.is_client_error() || status.is_success(), "{body}: {status} {text}");
        assert!(serde_json::from_str::<Value>(&text).is_ok(), "{body}: {status} body is not JSON: {text}");
    }
    let (status, _) = hub.get("/health", None).await;
    assert_eq!(status, 200);
    let still = call(&client, "get-swarm", json!({})).await;
    assert_eq!(still["success"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_poll_task_hands_work_to_a_waiting_worker() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let (lead, worker) = (new_agent_id(), new_agent_id());
    let lead_client = connect_http(&hub, Some(&lead), Revision::Initialize).await;
    let worker_client = connect_http(&hub, Some(&worker), Revision::Stateless).await;
    ok(&lead_client, "join-swarm", json!({"name": "lead", "lead": true})).await;
    ok(&worker_client, "join-swarm", json!({"name": "worker"})).await;

    let empty = ok(&worker_client, "poll-task", json!({"waitSeconds": 0})).await;
    assert!(empty["trigger"].is_null(), "{empty}");

    // A waiting poll is woken by the new pool task, which it gets claimed and started.
    let started = std::time::Instant::now();
    let (polled, created) = tokio::join!(
        ok(&worker_client, "poll-task", json!({"waitSeconds": 30})),
        ok(&lead_client, "task-action", json!({"action": "create", "task": "from the pool"})),
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "the poll waited out its time");
    assert_eq!(polled["trigger"]["type"], "task_assigned", "{polled}");
    assert_eq!(polled["task"]["id"], created["task"]["id"]);
    let (_, task) = hub.get(&format!("/api/tasks/{}", created["task"]["id"].as_str().unwrap()), None).await;
    assert_eq!(
        (task["status"].as_str(), task["agentId"].as_str()),
        (Some("in_progress"), Some(worker.as_str()))
    );
    ok(&worker_client, "store-progress", json!({"taskId": task["id"], "status": "completed"})).await;

    // An offer comes as task_offered, under review until accepted.
    let offered =
        ok(&lead_client, "send-task", json!({"agentId": worker, "task": "look at this", "offerMode": true}))
            .await;
    let polled = ok(&worker_client, "poll-task", json!({"waitSeconds": 5})).await;
    assert_eq!(polled["trigger"]["type"], "task_offered", "{polled}");
    let offer_id = offered["task"]["id"].as_str().unwrap();
    let (_, task) = hub.get(&format!("/api/tasks/{offer_id}"), None).await;
    assert_eq!(task["status"], "reviewing");
    let accepted = ok(&worker_client, "task-action", json!({"action": "accept", "taskId": offer_id})).await;
    assert_eq!(accepted["task"]["status"], "pending");

    let reason = refused(&lead_client, "poll-task", json!({"waitSeconds": 0})).await;
    assert!(reason.contains("inbox"), "{reason}");
}
