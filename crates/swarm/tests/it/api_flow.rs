//! The REST API driven over real HTTP against the real binary: the flows of issue #2.

use serde_json::{Value, json};

use crate::hub::{Hub, sqlite_file};

const KEY: &str = "test-key-0123456789";

fn new_agent_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

async fn register(hub: &Hub, id: &str, name: &str, extra: Value) -> (u16, Value) {
    let mut body = json!({ "name": name });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    hub.post("/api/agents", Some(id), body).await
}

#[tokio::test]
async fn register_create_list_show_finish_pause_resume() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let worker = new_agent_id();

    let (status, agent) = register(&hub, &worker, "worker-one", json!({"maxTasks": 2})).await;
    assert_eq!(status, 201, "{agent}");
    assert_eq!(agent["id"], worker.as_str());
    assert_eq!(agent["status"], "idle");
    assert_eq!(agent["capacity"], json!({"current": 0, "max": 2, "available": 2}));
    let (status, again) = register(&hub, &worker, "worker-one", json!({"maxTasks": 3})).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["maxTasks"], 3);

    let (status, task) = hub
        .post(
            "/api/tasks",
            None,
            json!({"task": "Write the release notes", "agentId": worker, "priority": 70, "tags": ["docs"]}),
        )
        .await;
    assert_eq!(status, 201, "{task}");
    assert_eq!(task["status"], "pending");
    assert_eq!(task["source"], "api");
    assert_eq!(task["tags"], json!(["docs"]));
    let created_at = task["createdAt"].as_str().unwrap();
    assert!(created_at.ends_with('Z') && created_at.len() == 24, "millisecond UTC timestamp: {created_at}");
    let task_id = task["id"].as_str().unwrap().to_string();

    let (status, list) = hub.get(&format!("/api/tasks?agentId={worker}&status=pending"), None).await;
    assert_eq!(status, 200);
    assert_eq!(list["total"], 1);
    assert_eq!(list["tasks"][0]["id"], task_id.as_str());
    let (_, searched) = hub.get("/api/tasks?search=RELEASE%20notes", None).await;
    assert_eq!(searched["total"], 1);

    let (status, started) = hub.post(&format!("/api/tasks/{task_id}/start"), Some(&worker), json!({})).await;
    assert_eq!(status, 200, "{started}");
    assert_eq!(started["task"]["status"], "in_progress");
    let (_, me) = hub.get("/me?include=inbox", Some(&worker)).await;
    assert_eq!(me["status"], "busy");
    assert_eq!(me["capacity"]["current"], 1);
    assert_eq!(me["inbox"]["inProgressCount"], 1);

    let (status, paused) = hub.post(&format!("/api/tasks/{task_id}/pause"), Some(&worker), json!({})).await;
    assert_eq!(status, 200, "{paused}");
    assert_eq!(paused["task"]["status"], "paused");
    let (_, paused_list) = hub.get("/api/paused-tasks", Some(&worker)).await;
    assert_eq!(paused_list["tasks"][0]["id"], task_id.as_str());
    let (status, resumed) = hub.post(&format!("/api/tasks/{task_id}/resume"), Some(&worker), json!({})).await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["task"]["status"], "in_progress");
    let (status, _) = hub.post(&format!("/api/tasks/{task_id}/resume"), Some(&worker), json!({})).await;
    assert_eq!(status, 400, "resuming a task in progress is refused, as the reference does");

    let (status, progress) = hub
        .post(&format!("/api/tasks/{task_id}/progress"), Some(&worker), json!({"progress": "half done"}))
        .await;
    assert_eq!(status, 200, "{progress}");

    let finish = json!({"status": "completed", "output": "notes written"});
    let (status, first) =
        hub.post(&format!("/api/tasks/{task_id}/finish"), Some(&worker), finish.clone()).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["success"], true);
    assert_eq!(first["alreadyFinished"], false);
    assert_eq!(first["task"]["status"], "completed");
    assert_eq!(first["task"]["output"], "notes written");
    assert!(first["task"]["finishedAt"].is_string());

    let failing = json!({"status": "failed", "failureReason": "changed my mind"});
    let (status, second) = hub.post(&format!("/api/tasks/{task_id}/finish"), Some(&worker), failing).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["alreadyFinished"], true);
    assert_eq!(second["task"]["status"], "completed", "a finished task stays as it finished");
    assert_eq!(second["task"]["output"], "notes written");

    let (status, late_progress) = hub
        .post(&format!("/api/tasks/{task_id}/progress"), Some(&worker), json!({"progress": "zombie"}))
        .await;
    assert_eq!(status, 409, "{late_progress}");

    let (status, detail) = hub.get(&format!("/api/tasks/{task_id}"), None).await;
    assert_eq!(status, 200);
    assert_eq!(detail["status"], "completed");
    assert_eq!(detail["progress"], "half done");
    let events: Vec<&str> =
        detail["logs"].as_array().unwrap().iter().map(|e| e["eventType"].as_str().unwrap()).collect();
    assert_eq!(events.first(), Some(&"task_status_change"), "newest first: {events:?}");
    assert_eq!(events.last(), Some(&"task_created"), "oldest last: {events:?}");
    assert!(events.contains(&"task_progress"));

    let (_, me) = hub.get("/me", Some(&worker)).await;
    assert_eq!(me["status"], "idle", "the agent is idle again once its task finished");

    let (_, stats) = hub.get("/api/stats", None).await;
    assert_eq!(stats["agents"]["total"], 1);
    assert_eq!(stats["tasks"]["completed"], 1);
    let (_, logs) = hub.get(&format!("/api/logs?agentId={worker}&limit=5"), None).await;
    assert!(logs["logs"].as_array().unwrap().len() <= 5);
}

#[tokio::test]
async fn the_api_key_is_required_except_for_health() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let client = reqwest::Client::new();

    let health = client.get(hub.url("/health")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let body: Value = health.json().await.unwrap();
    assert_eq!(body["status"], "ok");

    for path in ["/api/agents", "/api/tasks", "/api/stats", "/openapi.json"] {
        let response = client.get(hub.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 401, "{path} without a key");
        assert_eq!(response.json::<Value>().await.unwrap(), json!({"error": "Unauthorized"}));
        let wrong = client.get(hub.url(path)).bearer_auth("test-key-0123456780").send().await.unwrap();
        assert_eq!(wrong.status(), 401, "{path} with a wrong key");
    }
    let created = client.post(hub.url("/api/tasks")).json(&json!({"task": "sneaky"})).send().await.unwrap();
    assert_eq!(created.status(), 401);
    let (_, list) = hub.get("/api/tasks", None).await;
    assert_eq!(list["total"], 0, "a refused request changes nothing");
}

#[tokio::test]
async fn malformed_input_gets_a_json_4xx_and_the_server_keeps_answering() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    assert!(
        hub.banner.iter().any(|line| line.contains("WARNING") && line.contains("API key")),
        "{:?}",
        hub.banner
    );
    let agent = new_agent_id();
    assert_eq!(register(&hub, &agent, "solo", json!({})).await.0, 201);
    let raw = |method: reqwest::Method, path: &str, body: &'static str| {
        hub.request(method, path, Some(&agent)).header("content-type", "application/json").body(body)
    };
    use crate::hub::send;
    use reqwest::Method;

    let cases: Vec<(reqwest::RequestBuilder, u16, &str)> = vec![
        (raw(Method::POST, "/api/tasks", "{\"task\": "), 400, "truncated JSON"),
        (raw(Method::POST, "/api/tasks", "not json at all"), 400, "not JSON"),
        (raw(Method::POST, "/api/tasks", "[1,2,3]"), 400, "an array"),
        (raw(Method::POST, "/api/tasks", "{\"task\": 42}"), 400, "wrong type"),
        (
            raw(Method::POST, "/api/tasks", "{\"task\": \"x\", \"priority\": 500}"),
            400,
            "priority out of range",
        ),
        (
            raw(Method::POST, "/api/tasks", "{\"task\": \"x\", \"agentId\": \"nope\"}"),
            400,
            "agent id not a UUID",
        ),
        (
            raw(
                Method::POST,
                "/api/tasks",
                "{\"task\": \"x\", \"agentId\": \"6f1c2a9e-1111-4a4a-8b8b-000000000000\"}",
            ),
            400,
            "unknown agent",
        ),
        (
            raw(
                Method::POST,
                "/api/tasks",
                "{\"task\": \"x\", \"dependsOn\": [\"6f1c2a9e-1111-4a4a-8b8b-000000000000\"]}",
            ),
            400,
            "unknown dependency",
        ),
        (raw(Method::POST, "/api/tasks", ""), 400, "empty body"),
        (
            raw(Method::POST, "/api/agents", "{\"description\": \"no name\"}"),
            400,
            "registration without a name",
        ),
        (raw(Method::GET, "/api/tasks/not-a-uuid", ""), 400, "malformed task id"),
        (raw(Method::GET, "/api/tasks/6f1c2a9e-1111-4a4a-8b8b-000000000000", ""), 404, "unknown task"),
        (raw(Method::GET, "/api/agents/6f1c2a9e-1111-4a4a-8b8b-000000000000", ""), 404, "unknown agent"),
        (raw(Method::GET, "/api/tasks?status=bogus", ""), 400, "unknown status filter"),
        (raw(Method::GET, "/api/tasks?limit=abc", ""), 400, "limit not a number"),
        (raw(Method::GET, "/api/tasks?limit=0", ""), 400, "limit out of range"),
        (raw(Method::DELETE, "/api/tasks", ""), 405, "method not allowed"),
        (raw(Method::GET, "/no/such/route", ""), 404, "unknown route"),
        (
            raw(
                Method::POST,
                "/api/session-costs",
                "{\"sessionId\": \"s\", \"agentId\": \"6f1c2a9e-1111-4a4a-8b8b-000000000000\", \"totalCostUsd\": -1}",
            ),
            400,
            "negative cost",
        ),
    ];
    for (request, expected, what) in cases {
        let (status, body) = send(request).await;
        assert_eq!(status, expected, "{what}: {body}");
        assert!(
            body["error"].as_str().is_some_and(|m| !m.is_empty()),
            "{what}: JSON error with a message: {body}"
        );
    }

    // A hub may close the connection on an oversized body before the client has sent it
    // all; then the client sees a broken connection instead of the 413. Either way the
    // body is refused and nothing is stored.
    // Its own client, so the connection the hub closes never returns to the shared pool.
    let huge = "x".repeat(5 * 1024 * 1024);
    let too_large = reqwest::Client::new()
        .post(hub.url("/api/tasks"))
        .header("X-Agent-ID", &agent)
        .json(&json!({"task": huge}));
    if let Ok(response) = too_large.send().await {
        assert_eq!(response.status(), 413);
        let body: serde_json::Value = response.json().await.unwrap();
        assert!(body["error"].is_string(), "{body}");
    }
    let nul = raw(Method::POST, "/api/tasks", "{\"task\": \"nul \\u0000 inside\"}");
    let (status, body) = send(nul).await;
    assert_eq!(status, 400, "NUL in text is refused: {body}");

    let (status, list) = hub.get("/api/tasks", None).await;
    assert_eq!(status, 200, "the server still answers");
    assert_eq!(list["total"], 0, "no bad request created anything");

    let preflight = hub.request(Method::OPTIONS, "/api/tasks", None).send().await.unwrap();
    assert_eq!(preflight.status(), 204);
    assert_eq!(preflight.headers()["access-control-allow-origin"], "*");
}

#[tokio::test]
async fn transitions_are_guarded_by_owner_and_status() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let (lead, alice, bob) = (new_agent_id(), new_agent_id(), new_agent_id());
    assert_eq!(register(&hub, &lead, "lead", json!({"isLead": true})).await.0, 201);
    assert_eq!(register(&hub, &alice, "alice", json!({})).await.0, 201);
    assert_eq!(register(&hub, &bob, "bob", json!({})).await.0, 201);
    let (status, second_lead) = register(&hub, &new_agent_id(), "pretender", json!({"isLead": true})).await;
    assert_eq!(status, 409, "one lead per swarm: {second_lead}");
    let (status, _) = register(&hub, &new_agent_id(), "alice", json!({})).await;
    assert_eq!(status, 409, "names are unique");

    // An offer: only the agent it was made to may accept or reject it.
    let (_, offered) =
        hub.post("/api/tasks", Some(&lead), json!({"task": "review PR", "offeredTo": alice})).await;
    let offered_id = offered["id"].as_str().unwrap();
    assert_eq!(offered["status"], "offered");
    let (status, _) = hub.post(&format!("/api/tasks/{offered_id}/accept"), Some(&bob), json!({})).await;
    assert_eq!(status, 403);
    let (status, rejected) =
        hub.post(&format!("/api/tasks/{offered_id}/reject"), Some(&alice), json!({"reason": "busy"})).await;
    assert_eq!(status, 200, "{rejected}");
    assert_eq!(rejected["task"]["status"], "unassigned");
    assert_eq!(rejected["task"]["rejectionReason"], "busy");

    // The pool: claimed once; a second claim conflicts.
    let (status, claimed) = hub.post(&format!("/api/tasks/{offered_id}/claim"), Some(&bob), json!({})).await;
    assert_eq!(status, 200, "{claimed}");
    assert_eq!(claimed["task"]["agentId"], bob.as_str());
    let (status, _) = hub.post(&format!("/api/tasks/{offered_id}/claim"), Some(&alice), json!({})).await;
    assert_eq!(status, 409);
    // Only the assignee may start, finish or release it.
    let (status, _) = hub.post(&format!("/api/tasks/{offered_id}/start"), Some(&alice), json!({})).await;
    assert_eq!(status, 403);
    let (status, _) = hub.post(&format!("/api/tasks/{offered_id}/start"), Some(&bob), json!({})).await;
    assert_eq!(status, 200);
    let (status, _) = hub
        .post(&format!("/api/tasks/{offered_id}/finish"), Some(&alice), json!({"status": "completed"}))
        .await;
    assert_eq!(status, 403, "another agent's task");

    // Dependencies: a task waiting on an unfinished one cannot be claimed.
    let (_, dependent) =
        hub.post("/api/tasks", Some(&lead), json!({"task": "deploy", "dependsOn": [offered_id]})).await;
    let dependent_id = dependent["id"].as_str().unwrap();
    let (status, refused) =
        hub.post(&format!("/api/tasks/{dependent_id}/claim"), Some(&alice), json!({})).await;
    assert_eq!(status, 409);
    assert!(refused["error"].as_str().unwrap().contains("depends on"), "{refused}");
    let (status, _) = hub
        .post(&format!("/api/tasks/{offered_id}/finish"), Some(&bob), json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200);
    let (status, _) = hub.post(&format!("/api/tasks/{dependent_id}/claim"), Some(&alice), json!({})).await;
    assert_eq!(status, 200, "claimable once its dependency completed");

    // Cancel: the creator or the lead, not a bystander; a cancelled task is final.
    let (status, _) = hub.post(&format!("/api/tasks/{dependent_id}/cancel"), Some(&bob), json!({})).await;
    assert_eq!(status, 403);
    let (status, cancelled) = hub
        .post(&format!("/api/tasks/{dependent_id}/cancel"), Some(&lead), json!({"reason": "not needed"}))
        .await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["task"]["status"], "cancelled");
    let (_, cancelled_list) = hub.get(&format!("/cancelled-tasks?taskId={dependent_id}"), None).await;
    assert_eq!(cancelled_list["cancelled"][0]["failureReason"], "not needed");
    let (status, _) = hub.post(&format!("/api/tasks/{dependent_id}/start"), Some(&alice), json!({})).await;
    assert_eq!(status, 409, "no way out of cancelled");
    let (status, _) = hub.post(&format!("/api/tasks/{offered_id}/cancel"), Some(&lead), json!({})).await;
    assert_eq!(status, 409, "a completed task cannot be cancelled");
}

#[tokio::test]
async fn session_logs_and_costs_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let agent = new_agent_id();
    register(&hub, &agent, "logger", json!({})).await;
    let (_, task) = hub.post("/api/tasks", None, json!({"task": "t", "agentId": agent})).await;
    let task_id = task["id"].as_str().unwrap();

    for (iteration, lines) in
        [(1, vec!["{\"type\":\"system\"}", "{\"type\":\"assistant\"}"]), (1, vec!["{\"type\":\"result\"}"])]
    {
        let body = json!({"sessionId": "s-1", "iteration": iteration, "lines": lines, "taskId": task_id, "cli": "claude"});
        let (status, created) = hub.post("/api/session-logs", Some(&agent), body).await;
        assert_eq!(status, 201, "{created}");
        assert_eq!(created["count"], lines.len());
    }
    let (status, logs) = hub.get(&format!("/api/tasks/{task_id}/session-logs"), None).await;
    assert_eq!(status, 200);
    let contents: Vec<&str> =
        logs["logs"].as_array().unwrap().iter().map(|l| l["content"].as_str().unwrap()).collect();
    assert_eq!(contents, ["{\"type\":\"system\"}", "{\"type\":\"assistant\"}", "{\"type\":\"result\"}"]);

    let cost = json!({"sessionId": "s-1", "agentId": agent, "taskId": task_id, "totalCostUsd": 0.42, "inputTokens": 1200, "numTurns": 3, "model": "claude-opus"});
    let (status, recorded) = hub.post("/api/session-costs", Some(&agent), cost).await;
    assert_eq!(status, 201, "{recorded}");
    assert_eq!(recorded["success"], true, "the reference's answer: {recorded}");
    assert_eq!(recorded["cost"]["totalCostUsd"], 0.42, "{recorded}");
    assert_eq!(recorded["cost"]["sessionId"], "s-1", "{recorded}");
    let (_, costs) = hub.get(&format!("/api/session-costs?taskId={task_id}"), None).await;
    assert_eq!(costs["costs"][0]["totalCostUsd"], 0.42);
    assert_eq!(costs["costs"][0]["inputTokens"], 1200);
}

#[tokio::test]
async fn openapi_document_describes_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let (status, spec) = hub.get("/openapi.json", None).await;
    assert_eq!(status, 200);
    assert!(spec["openapi"].as_str().unwrap().starts_with("3.1"), "{}", spec["openapi"]);
    let paths = spec["paths"].as_object().unwrap();
    for path in [
        "/api/agents",
        "/api/agents/{id}",
        "/api/tasks",
        "/api/tasks/{id}",
        "/api/tasks/{id}/finish",
        "/api/tasks/{id}/claim",
        "/api/tasks/{id}/reject",
        "/api/logs",
        "/api/stats",
        "/api/session-logs",
        "/api/session-costs",
        "/me",
        "/ping",
        "/close",
        "/health",
    ] {
        assert!(paths.contains_key(path), "{path} is documented");
    }
    let docs = reqwest::get(hub.url("/docs")).await.unwrap();
    assert_eq!(docs.status(), 200, "the docs page itself needs no key");
    assert!(docs.text().await.unwrap().contains("/openapi.json"));
}

#[tokio::test]
async fn a_task_can_be_edited_until_someone_takes_it_up() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let worker = new_agent_id();
    let (status, _) = register(&hub, &worker, "worker", json!({})).await;
    assert_eq!(status, 201);
    let (_, task) = hub.post("/api/tasks", None, json!({"task": "Draft the plan", "agentId": worker})).await;
    let id = task["id"].as_str().unwrap().to_string();

    let (status, edited) =
        hub.post(&format!("/api/tasks/{id}/edit"), None, json!({"task": " Draft the final plan "})).await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(edited["task"], "Draft the final plan");
    let (status, body) =
        hub.post(&format!("/api/tasks/{id}/edit"), Some(&worker), json!({"task": "mine now"})).await;
    assert_eq!(status, 403, "the assignee is neither the creator nor the lead: {body}");
    let (status, body) = hub.post(&format!("/api/tasks/{id}/edit"), None, json!({"task": ""})).await;
    assert_eq!(status, 400, "{body}");

    let (status, _) = hub.post(&format!("/api/tasks/{id}/start"), Some(&worker), json!({})).await;
    assert_eq!(status, 200);
    let (status, body) = hub.post(&format!("/api/tasks/{id}/edit"), None, json!({"task": "too late"})).await;
    assert_eq!(status, 409, "{body}");
    let (_, shown) = hub.get(&format!("/api/tasks/{id}"), None).await;
    assert_eq!(shown["task"], "Draft the final plan");
    assert!(shown["logs"].as_array().unwrap().iter().any(|event| event["eventType"] == "task_edited"));
}
