//! The reference's own runner and hook (desplega-ai/agent-swarm 1.18,
//! `src/commands/runner.ts` and `src/hooks/hook.ts`) replayed request by request against
//! swarm: its field names, no `X-Runner-ID`, and its idea of success (`response.ok`, so
//! a 2xx; anything else it logs as a failure). A team that points that runner at swarm
//! must see no failure in its logs and no work lost or done twice.

use serde_json::{Value, json};

use crate::hub::{Hub, sqlite_file};

const KEY: &str = "reference-runner-key-0123";

/// What the reference's runner checks before it trusts an answer.
fn runner_accepts(what: &str, status: u16, body: &Value) {
    assert!((200..300).contains(&status), "the runner would log a failure for {what}: {status} {body}");
}

/// `registerAgent`: `POST /api/agents` with the runner's fields (capabilities left out).
async fn register(hub: &Hub, id: &str, name: &str, is_lead: bool) {
    let (status, body) =
        hub.post("/api/agents", Some(id), json!({"name": name, "isLead": is_lead, "maxTasks": 1})).await;
    runner_accepts("registering", status, &body);
}

/// `pollForTrigger`: `GET /api/poll[?since=]`, no `X-Runner-ID`.
async fn poll(hub: &Hub, agent: &str, since: Option<&str>) -> Value {
    let path = match since {
        Some(since) => format!("/api/poll?since={}", urlencode(since)),
        None => "/api/poll".to_string(),
    };
    let (status, body) = hub.get(&path, Some(agent)).await;
    runner_accepts("polling", status, &body);
    body["trigger"].clone()
}

fn urlencode(text: &str) -> String {
    text.replace(':', "%3A").replace('+', "%2B")
}

async fn ping(hub: &Hub, agent: &str) {
    let (status, body) = send_empty(hub, "/ping", agent).await;
    runner_accepts("ping", status, &body);
}

/// A POST with no body, as the runner sends `/ping`, `/close`, `pause` and `resume`.
async fn send_empty(hub: &Hub, path: &str, agent: &str) -> (u16, Value) {
    crate::hub::send(hub.request(reqwest::Method::POST, path, Some(agent))).await
}

/// `ensureTaskFinished` after the agent's process exited with code 0.
async fn runner_finishes(hub: &Hub, agent: &str, task_id: &str) -> Value {
    let body = json!({"status": "completed",
        "output": "Process completed (runner wrapper fallback - agent may have provided explicit output)"});
    let (status, answer) = hub.post(&format!("/api/tasks/{task_id}/finish"), Some(agent), body).await;
    runner_accepts("finishing the run's task", status, &answer);
    assert_eq!(answer["success"], true, "{answer}");
    answer
}

async fn task_status(hub: &Hub, task_id: &str) -> Value {
    let (status, body) = hub.get(&format!("/api/tasks/{task_id}"), None).await;
    assert_eq!(status, 200, "{body}");
    body["status"].clone()
}

#[tokio::test]
async fn the_reference_runner_works_a_task_from_offer_to_completion_without_a_logged_failure() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let worker = uuid::Uuid::new_v4().to_string();
    let lead = uuid::Uuid::new_v4().to_string();
    let colleague = uuid::Uuid::new_v4().to_string();
    register(&hub, &lead, "lead-1", true).await;
    register(&hub, &colleague, "colleague", false).await;

    // Start: register, resume what an earlier shutdown paused (nothing yet), ping, poll.
    register(&hub, &worker, "worker-1", false).await;
    let (status, paused) = hub.get("/api/paused-tasks", Some(&worker)).await;
    runner_accepts("fetching paused tasks", status, &paused);
    assert_eq!(paused["tasks"], json!([]), "{paused}");
    ping(&hub, &worker).await;
    assert_eq!(poll(&hub, &worker, None).await, Value::Null);

    // An offer: the runner starts the agent with /review-offered-task <taskId>.
    let (status, offered) = hub
        .post("/api/tasks", Some(&lead), json!({"task": "Write the changelog", "offeredTo": worker}))
        .await;
    assert_eq!(status, 201, "{offered}");
    let task_id = offered["id"].as_str().unwrap().to_string();
    let trigger = poll(&hub, &worker, None).await;
    assert_eq!(trigger["type"], "task_offered", "{trigger}");
    assert_eq!(trigger["taskId"], task_id.as_str());
    assert_eq!(trigger["task"]["task"], "Write the changelog");

    // The run's task file names the offer; its hook asks whether it was cancelled.
    let (status, cancelled) = hub.get(&format!("/cancelled-tasks?taskId={task_id}"), Some(&worker)).await;
    runner_accepts("the hook's cancellation check", status, &cancelled);
    assert_eq!(cancelled["cancelled"], json!([]), "{cancelled}");
    let (status, me) = hub.get("/me?include=inbox", Some(&worker)).await;
    runner_accepts("the hook's /me", status, &me);
    assert_eq!(me["id"], worker.as_str(), "{me}");
    assert!(me["inbox"].is_object(), "{me}");

    // Under review the task has no agentId yet: a finish then is no one else's (no 403).
    let early = runner_finishes(&hub, &worker, &task_id).await;
    assert_eq!(early["alreadyFinished"], true, "{early}");
    assert_eq!(task_status(&hub, &task_id).await, "reviewing");

    // The agent accepts; its process exits 0 and the runner finishes the run's task,
    // which is the accepted offer, still `pending`: nothing may change.
    let (status, accepted) = send_empty(&hub, &format!("/api/tasks/{task_id}/accept"), &worker).await;
    assert_eq!(status, 200, "{accepted}");
    let after_accept = runner_finishes(&hub, &worker, &task_id).await;
    assert_eq!(after_accept["alreadyFinished"], true, "{after_accept}");
    assert_eq!(after_accept["task"]["status"], "pending", "{after_accept}");
    assert_eq!(task_status(&hub, &task_id).await, "pending", "work never started is not completed");

    // Its logs and costs, with the runner's field names.
    let logs = json!({"sessionId": "session-1", "iteration": 1, "taskId": task_id, "cli": "claude",
        "lines": ["{\"type\":\"system\"}", "{\"type\":\"result\"}"]});
    let (status, stored) = hub.post("/api/session-logs", Some(&worker), logs).await;
    runner_accepts("pushing logs", status, &stored);
    let cost = json!({"sessionId": "session-1", "taskId": task_id, "agentId": worker, "totalCostUsd": 0.12,
        "inputTokens": 900, "outputTokens": 300, "cacheReadTokens": 0, "cacheWriteTokens": 0,
        "durationMs": 4200, "numTurns": 3, "model": "opus", "isError": false});
    let (status, stored) = hub.post("/api/session-costs", Some(&worker), cost).await;
    runner_accepts("saving cost data", status, &stored);
    assert_eq!(status, 201, "{stored}");
    assert_eq!(
        (stored["success"].as_bool(), stored["cost"]["totalCostUsd"].as_f64()),
        (Some(true), Some(0.12))
    );

    // Urgent mail arrives; the reference's runner has no prompt for it, so its poll hands
    // it only what it knows: the accepted task, then nothing. The mail waits for a read.
    let (status, mail) = hub
        .post(
            "/api/mail",
            Some(&colleague),
            json!({"to": "worker-1", "priority": "urgent", "subject": "Heads up", "body": "the API changed"}),
        )
        .await;
    assert_eq!(status, 201, "{mail}");
    ping(&hub, &worker).await;
    let trigger = poll(&hub, &worker, None).await;
    assert_eq!(trigger["type"], "task_assigned", "{trigger}");
    assert_eq!(trigger["taskId"], task_id.as_str());
    assert_eq!(
        poll(&hub, &worker, None).await,
        Value::Null,
        "no urgent_mail for a runner that cannot handle it"
    );
    let (_, me) = hub.get("/me?include=inbox", Some(&worker)).await;
    let unread = (me["inbox"]["unreadMailCount"].as_i64(), me["inbox"]["urgentMailCount"].as_i64());
    assert_eq!(unread, (Some(1), Some(1)), "the mail is still there to read: {me}");

    // Shutdown: the runner pauses the task in progress and closes the agent.
    let (status, paused) = send_empty(&hub, &format!("/api/tasks/{task_id}/pause"), &worker).await;
    runner_accepts("pausing for shutdown", status, &paused);
    assert_eq!(paused["task"]["status"], "paused", "{paused}");
    let (status, again) = send_empty(&hub, &format!("/api/tasks/{task_id}/pause"), &worker).await;
    assert_eq!(status, 400, "the reference answers 400 to a task that cannot be paused: {again}");
    let (status, closed) = send_empty(&hub, "/close", &worker).await;
    runner_accepts("closing", status, &closed);

    // Restart: register again, find the paused task with the fields the runner reads, resume it.
    register(&hub, &worker, "worker-1", false).await;
    let (status, paused) = hub.get("/api/paused-tasks", Some(&worker)).await;
    runner_accepts("fetching paused tasks", status, &paused);
    assert_eq!(paused["tasks"][0]["id"], task_id.as_str(), "{paused}");
    assert_eq!(paused["tasks"][0]["task"], "Write the changelog", "{paused}");
    let (status, resumed) = send_empty(&hub, &format!("/api/tasks/{task_id}/resume"), &worker).await;
    runner_accepts("resuming", status, &resumed);
    assert_eq!(task_status(&hub, &task_id).await, "in_progress");

    // The agent exits 0 without reporting: the runner's finish completes it, once.
    let finished = runner_finishes(&hub, &worker, &task_id).await;
    assert_eq!(finished["alreadyFinished"], false, "{finished}");
    assert_eq!(finished["task"]["status"], "completed", "{finished}");
    let twice = runner_finishes(&hub, &worker, &task_id).await;
    assert_eq!(twice["alreadyFinished"], true, "{twice}");

    // The lead's runner polls with `since` and hears of it with the fields its prompt uses.
    let trigger = poll(&hub, &lead, Some("2026-01-01T00:00:00.000Z")).await;
    assert_eq!(trigger["type"], "tasks_finished", "{trigger}");
    let told = &trigger["tasks"][0];
    assert_eq!((told["id"].as_str(), told["status"].as_str()), (Some(task_id.as_str()), Some("completed")));
    assert_eq!(told["agentId"], worker.as_str(), "{trigger}");
    assert!(told["output"].as_str().is_some_and(|output| output.contains("runner wrapper")), "{trigger}");
}

#[tokio::test]
async fn the_reference_answers_where_swarm_used_to_differ() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let worker = uuid::Uuid::new_v4().to_string();
    let other = uuid::Uuid::new_v4().to_string();
    register(&hub, &worker, "worker-1", false).await;
    register(&hub, &other, "worker-2", false).await;

    let (status, body) = hub.get("/me", None).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("Missing X-Agent-ID"), "{body}");

    // Another agent's task is still refused.
    let (_, task) = hub.post("/api/tasks", None, json!({"task": "theirs", "agentId": other})).await;
    let id = task["id"].as_str().unwrap();
    let (status, refused) =
        hub.post(&format!("/api/tasks/{id}/finish"), Some(&worker), json!({"status": "completed"})).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(task_status(&hub, id).await, "pending", "a refused finish changes nothing");
    // Pausing a task that is not in progress is bad input, as in the reference.
    let (status, refused) = send_empty(&hub, &format!("/api/tasks/{id}/pause"), &other).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("pending"), "{refused}");
}

/// The reference's Docker layout: workers reach the hub as `host.docker.internal:3013`.
/// Once that name is listed, `/mcp` answers it.
#[tokio::test]
async fn mcp_answers_workers_in_containers_once_their_host_name_is_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(
        &sqlite_file(dir.path()),
        Some(KEY),
        &["--mcp-allowed-hosts", "localhost,127.0.0.1,host.docker.internal"],
    );
    let response = hub
        .request(reqwest::Method::POST, "/mcp", None)
        .header("Host", "host.docker.internal:3013")
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(r#""id":1"#), "{text}");
}
