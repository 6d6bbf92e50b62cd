//! The reference's newest runner (desplega-ai/agent-swarm v1.135.0, `bun src/cli.tsx
//! worker`: `src/commands/runner.ts`, `provider-credentials.ts`, `profile-sync.ts`,
//! `utils/credentials.ts`, `utils/skills-refresh.ts`, `prompts/resolver.ts`) replayed
//! request by request against swarm, with its field names and headers (`X-Agent-ID` where
//! it sends one, only `Authorization` where it does not, `X-Runtime-Instance-ID`), and its
//! idea of success: a 2xx, JSON where it reads JSON, and the events query answered at
//! once. Issue 48; the real runner is run by `scripts/reference-runner-1135`.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::hub::{Hub, send, sqlite_file};

const KEY: &str = "reference-runner-1135-key-0123";
const RUNTIME: &str = "runtime-instance-1";

fn runner_accepts(what: &str, status: u16, body: &Value) {
    assert!((200..300).contains(&status), "the 1.135 runner would log a failure for {what}: {status} {body}");
}

/// A request as the runner sends it: the key, `X-Agent-ID` when it sends one.
async fn call(
    hub: &Hub,
    method: Method,
    path: &str,
    agent: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = hub.request(method, path, agent);
    if let Some(body) = body {
        request = request.json(&body);
    }
    send(request).await
}

async fn ok(
    hub: &Hub,
    what: &str,
    method: Method,
    path: &str,
    agent: Option<&str>,
    body: Option<Value>,
) -> Value {
    let (status, answer) = call(hub, method, path, agent, body).await;
    runner_accepts(what, status, &answer);
    answer
}

/// `fetchProfileSyncRejectionBanner`: `GET /api/events?event=&agentId=&dataField=&limit=1`
/// with the default `Accept: */*`; must answer JSON at once, never the endless stream.
async fn latest_event(hub: &Hub, agent: &str, event: &str, field: &str) -> Value {
    let path = format!("/api/events?event={event}&agentId={agent}&dataField={field}&limit=1");
    let request = hub.request(Method::GET, &path, Some(agent)).header("Accept", "*/*");
    let (status, answer) = tokio::time::timeout(Duration::from_secs(10), send(request))
        .await
        .expect("the events query must answer promptly, not stream");
    runner_accepts("the events query", status, &answer);
    assert!(answer["events"].is_array(), "{answer}");
    answer["events"].get(0).cloned().unwrap_or(Value::Null)
}

/// What the runner does around one task, from its poll to its finish.
async fn work_task(hub: &Hub, agent: &str, task_id: &str) {
    // Before the session: profile-sync banner, memory recall, prompt template.
    for field in ["soulMd", "identityMd", "toolsMd", "claudeMd"] {
        for event in ["system.profile_sync_rejected", "system.profile_sync_reconciled"] {
            assert_eq!(latest_event(hub, agent, event, field).await, Value::Null);
        }
    }
    let recall = json!({"query": "Write the changelog", "limit": 5, "intent": "pre-task memory recall"});
    let memory =
        ok(hub, "memory recall", Method::POST, "/api/memory/search", Some(agent), Some(recall)).await;
    assert_eq!(memory["results"], json!([]));
    let render = json!({"eventType": "task.assigned", "variables": {"task": "x"}, "agentId": agent});
    let (status, answer) = call(hub, Method::POST, "/api/prompt-templates/render", None, Some(render)).await;
    assert_eq!(status, 404, "no template: the runner renders its code defaults ({answer})");
    assert!(answer["error"].is_string());

    // The session starts: active session, provider session, task session.
    let session = json!({"agentId": agent, "taskId": task_id, "triggerType": "task_assigned",
        "taskDescription": "Write the changelog", "runnerSessionId": "runner-session-1",
        "runtimeInstanceId": RUNTIME});
    let created =
        ok(hub, "active session", Method::POST, "/api/active-sessions", Some(agent), Some(session)).await;
    assert_eq!(created["session"]["taskId"], task_id);
    let provider = json!({"providerSessionId": "claude-session-1"});
    let path = format!("/api/active-sessions/provider-session/{task_id}");
    let updated = ok(hub, "provider session", Method::PUT, &path, None, Some(provider)).await;
    assert_eq!(updated["updated"], true);
    let task_session = json!({"claudeSessionId": "claude-session-1", "provider": "claude",
        "providerMeta": {"cwd": "/workspace"}, "model": "opus", "harnessVariant": "default"});
    let path = format!("/api/tasks/{task_id}/session");
    ok(hub, "task session", Method::PUT, &path, None, Some(task_session)).await;

    // While it runs: context usage, events in batch, heartbeat, progress.
    let context = json!({"eventType": "progress", "sessionId": "claude-session-1",
        "contextUsedTokens": 42000, "contextTotalTokens": 200000, "contextPercent": 21.0,
        "cumulativeInputTokens": 50000, "cumulativeOutputTokens": 3000});
    let path = format!("/api/tasks/{task_id}/context");
    ok(hub, "context usage", Method::POST, &path, None, Some(context)).await;
    let events = json!({"events": [
        {"category": "tool", "event": "tool.start", "source": "worker", "agentId": agent, "taskId": task_id,
         "sessionId": "claude-session-1", "data": {"tool": "Bash"}},
        {"category": "tool", "event": "tool.end", "status": "ok", "source": "worker", "agentId": agent,
         "taskId": task_id, "sessionId": "claude-session-1", "durationMs": 120, "data": {"tool": "Bash"}},
    ]});
    let stored = ok(hub, "events batch", Method::POST, "/api/events/batch", Some(agent), Some(events)).await;
    assert_eq!(stored["count"], 2);
    let path = format!("/api/active-sessions/heartbeat/{task_id}");
    let beat = ok(hub, "session heartbeat", Method::PUT, &path, None, None).await;
    assert_eq!(beat["updated"], true);
    ok(hub, "ping", Method::POST, "/ping", Some(agent), None).await;

    // The session ends: the runner's fallback finish, then the active session goes.
    let finish = json!({"status": "completed", "output": "done"});
    let path = format!("/api/tasks/{task_id}/finish");
    let finished = ok(hub, "finishing", Method::POST, &path, Some(agent), Some(finish)).await;
    assert_eq!(finished["success"], true, "{finished}");
    let path = format!("/api/active-sessions/by-task/{task_id}");
    let deleted = ok(hub, "ending the session", Method::DELETE, &path, Some(agent), None).await;
    assert_eq!(deleted["deleted"], true);

    // What it reported is kept: the resume reads the session from the task.
    let detail =
        ok(hub, "the resume's task read", Method::GET, &format!("/api/tasks/{task_id}"), None, None).await;
    assert_eq!(detail["status"], "completed");
    assert_eq!(detail["claudeSessionId"], "claude-session-1");
    assert_eq!(detail["provider"], "claude");
    assert_eq!(detail["model"], "opus");
    assert_eq!(detail["providerMeta"]["cwd"], "/workspace");
    assert_eq!(detail["contextUsage"][0]["contextUsedTokens"], 42000.0);
    let path = format!("/api/events?taskId={task_id}&limit=10");
    let logged = ok(hub, "the events query", Method::GET, &path, None, None).await;
    let names: Vec<_> = logged["events"].as_array().unwrap().iter().map(|e| e["event"].clone()).collect();
    assert_eq!(names.len(), 2, "{logged}");
    assert!(names.contains(&json!("tool.end")) && names.contains(&json!("tool.start")), "{logged}");
}

#[tokio::test]
async fn the_1135_runner_boots_and_works_an_assigned_and_a_pool_task_without_a_404_or_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let agent = uuid::Uuid::new_v4().to_string();
    let agent = agent.as_str();

    // Boot: credentials from the hub's config and agent-fs, then register.
    let configs = format!("/api/config/resolved?agentId={agent}&includeSecrets=true");
    let resolved = ok(&hub, "config", Method::GET, &configs, Some(agent), None).await;
    assert_eq!(resolved["configs"], json!([]));
    let global =
        ok(&hub, "global config", Method::GET, "/api/config?scope=global&includeSecrets=true", None, None)
            .await;
    assert_eq!(global["configs"], json!([]));
    let keys = ok(
        &hub,
        "key pool",
        Method::GET,
        "/api/keys/available?keyType=ANTHROPIC_API_KEY&totalKeys=2",
        None,
        None,
    )
    .await;
    assert_eq!(keys["availableIndices"], json!([0, 1]));
    let (status, body) = call(
        &hub,
        Method::POST,
        "/api/agents",
        Some(agent),
        Some(json!({"name": "worker-1135", "isLead": false, "maxTasks": 1, "provider": "claude",
            "capabilities": ["core"]})),
    )
    .await;
    runner_accepts("registering", status, &body);
    let fs =
        ok(&hub, "agent-fs", Method::POST, "/api/fs/agent-credentials", Some(agent), Some(json!({}))).await;
    assert_eq!(fs["enabled"], false);

    // The credential loop: presence ticks, then the full report (the one that must land).
    let path = format!("/api/agents/{agent}/credential-status");
    let tick = json!({"ready": false, "missing": ["ANTHROPIC_API_KEY"]});
    let request = hub.request(Method::PUT, &path, Some(agent)).header("X-Runtime-Instance-ID", RUNTIME);
    let (status, answer) = send(request.json(&tick)).await;
    runner_accepts("the credential tick", status, &answer);
    let report = json!({"ready": true, "missing": [], "cred_status": {"ready": true, "missing": [],
        "reportedAt": 1_755_000_000_000_u64, "reportKind": "boot", "liveTest": {"ok": true}}});
    let request = hub.request(Method::PUT, &path, Some(agent)).header("X-Runtime-Instance-ID", RUNTIME);
    let (status, answer) = send(request.json(&report)).await;
    runner_accepts("the credential report", status, &answer);
    assert_eq!(answer["id"], agent, "answers the agent: {answer}");
    let model = json!({"latest_model": {"model": "opus", "harnessProvider": "claude"}});
    ok(&hub, "the latest model", Method::PUT, &path, Some(agent), Some(model)).await;
    let status_now = ok(&hub, "the dashboard's read", Method::GET, &path, None, None).await;
    assert_eq!((status_now["ready"].clone(), status_now["missing"].clone()), (json!(true), json!([])));
    assert_eq!(status_now["credStatus"]["liveTest"]["ok"], true);
    assert_eq!(status_now["latestModel"]["model"], "opus", "merged, readiness kept: {status_now}");

    // Start-up bookkeeping: sessions cleared, orphans recovered (by our rescuer: none).
    let cleanup = json!({"agentId": agent});
    let cleaned =
        ok(&hub, "cleanup", Method::POST, "/api/active-sessions/cleanup", Some(agent), Some(cleanup)).await;
    assert_eq!(cleaned["cleaned"], 0);
    let orphans = json!({"agentId": agent, "minAgeSeconds": 60});
    let path = "/api/active-sessions/recover-orphaned-tasks";
    let recovered = ok(&hub, "orphans", Method::POST, path, Some(agent), Some(orphans)).await;
    assert_eq!(recovered["recovered"], 0);

    // Profile: /me has none of the files yet, the runner pushes its defaults, reads them back.
    let me = ok(&hub, "/me", Method::GET, "/me", Some(agent), None).await;
    assert!(me.get("soulMd").is_none(), "{me}");
    let files = json!({"soulMd": "# Soul", "identityMd": "# Identity", "toolsMd": "# Tools",
        "claudeMd": "# Claude", "setupScript": "echo hi", "heartbeatMd": "# Heartbeat"});
    let path = format!("/api/agents/{agent}/profile");
    ok(&hub, "saving the profile files", Method::PUT, &path, Some(agent), Some(files)).await;
    let me = ok(&hub, "/me", Method::GET, "/me", Some(agent), None).await;
    assert_eq!((me["soulMd"].clone(), me["heartbeatMd"].clone()), (json!("# Soul"), json!("# Heartbeat")));
    assert_eq!(me["id"], agent);
    let path = format!("/api/agents/{agent}/mcp-servers");
    assert_eq!(ok(&hub, "mcp servers", Method::GET, &path, Some(agent), None).await["servers"], json!([]));
    let path = format!("/api/agents/{agent}/skills/signature");
    let signature = ok(&hub, "skills signature", Method::GET, &path, Some(agent), None).await;
    assert!(signature["hash"].is_string());
    let path = format!("/api/agents/{agent}/skills");
    assert_eq!(ok(&hub, "skills", Method::GET, &path, Some(agent), None).await["skills"], json!([]));

    // An assigned task (the operator's), then a pool task: both through the poll.
    let (status, created) =
        hub.post("/api/tasks", None, json!({"task": "Write the changelog", "agentId": agent})).await;
    assert_eq!(status, 201, "{created}");
    let assigned = created["id"].as_str().unwrap().to_string();
    let trigger = ok(&hub, "polling", Method::GET, "/api/poll", Some(agent), None).await;
    assert_eq!(trigger["trigger"]["taskId"], assigned.as_str(), "{trigger}");
    work_task(&hub, agent, &assigned).await;

    let (status, created) = hub.post("/api/tasks", None, json!({"task": "Tidy the README"})).await;
    assert_eq!(status, 201, "{created}");
    let pooled = created["id"].as_str().unwrap().to_string();
    let trigger = ok(&hub, "polling", Method::GET, "/api/poll", Some(agent), None).await;
    assert_eq!(trigger["trigger"]["taskId"], pooled.as_str(), "{trigger}");
    work_task(&hub, agent, &pooled).await;

    // Keys it used, and the sessions left: none.
    let usage = json!({"keyType": "ANTHROPIC_API_KEY", "keySuffix": "abcd", "keyIndex": 0, "taskId": pooled});
    ok(&hub, "key usage", Method::POST, "/api/keys/report-usage", None, Some(usage)).await;
    let clear = json!({"keyType": "ANTHROPIC_API_KEY", "keySuffix": "abcd"});
    ok(&hub, "clearing a rate limit", Method::POST, "/api/keys/clear-rate-limit", None, Some(clear)).await;
    let sessions =
        ok(&hub, "sessions", Method::GET, &format!("/api/active-sessions?agentId={agent}"), None, None).await;
    assert_eq!(sessions["sessions"], json!([]));
}

#[tokio::test]
async fn the_event_stream_stays_for_the_dashboard_and_bad_reports_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let agent = uuid::Uuid::new_v4().to_string();
    let other = uuid::Uuid::new_v4().to_string();
    for (id, name) in [(&agent, "a"), (&other, "b")] {
        let (status, body) = hub.post("/api/agents", Some(id), json!({"name": name})).await;
        assert_eq!(status, 201, "{body}");
    }

    // No query and no JSON asked: the live stream, as before.
    let response = hub.request(Method::GET, "/api/events", None).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let kind = response.headers()["content-type"].to_str().unwrap().to_string();
    assert!(kind.starts_with("text/event-stream"), "{kind}");
    drop(response);
    // A query asking for the stream gets the stream.
    let request = hub.request(Method::GET, "/api/events?limit=1", None).header("Accept", "text/event-stream");
    let response = request.send().await.unwrap();
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    drop(response);
    // JSON asked for, no parameters: the query.
    let request = hub.request(Method::GET, "/api/events", None).header("Accept", "application/json");
    let (status, answer) = send(request).await;
    assert_eq!((status, answer), (200, json!({"events": []})));
    let (status, answer) = hub.get("/api/events?limit=0", None).await;
    assert_eq!(status, 400, "{answer}");
    let (status, answer) = hub.get("/api/events?since=yesterday", None).await;
    assert_eq!(status, 400, "{answer}");

    // An agent reports only for itself; bad input is refused and changes nothing.
    let path = format!("/api/agents/{other}/credential-status");
    let (status, answer) = call(&hub, Method::PUT, &path, Some(&agent), Some(json!({"ready": true}))).await;
    assert_eq!(status, 403, "{answer}");
    let (status, _) = hub.get(&path, None).await;
    assert_eq!(status, 404, "nothing was kept");
    let (status, answer) = call(&hub, Method::PUT, &path, Some(&other), Some(json!({"ready": "yes"}))).await;
    assert_eq!(status, 400, "{answer}");
    let batch = json!({"events": [{"category": "tool", "event": "tool.start", "source": "worker", "agentId": other}]});
    let (status, answer) = call(&hub, Method::POST, "/api/events/batch", Some(&agent), Some(batch)).await;
    assert_eq!(status, 403, "{answer}");
    let (status, answer) =
        call(&hub, Method::POST, "/api/events/batch", Some(&agent), Some(json!({"events": []}))).await;
    assert_eq!(status, 400, "{answer}");
    let (_, answer) = hub.get("/api/events?limit=10", None).await;
    assert_eq!(answer["events"], json!([]));
    let path = format!("/api/agents/{other}/profile");
    let (status, answer) =
        call(&hub, Method::PUT, &path, Some(&agent), Some(json!({"soulMd": "mine"}))).await;
    assert_eq!(status, 403, "{answer}");
    let (_, me) = hub.get("/me", Some(&other)).await;
    assert!(me.get("soulMd").is_none(), "{me}");
}

/// Its Claude Code hooks (`agent-swarm hook`, on every tool use) mark the agent active with
/// `PUT /api/agents/:id/activity` and the `.mcp.json` headers (the key, `X-Agent-ID`), no
/// body; the real run (`scripts/reference-runner-1135`) met a 404 here. From the agent
/// itself it is a heartbeat: an agent gone offline is back.
#[tokio::test]
async fn the_1135_hooks_mark_the_agent_active() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let agent = uuid::Uuid::new_v4().to_string();
    let other = uuid::Uuid::new_v4().to_string();
    for (id, name) in [(&agent, "a"), (&other, "b")] {
        let (status, body) = hub.post("/api/agents", Some(id), json!({"name": name})).await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, _) = hub.post("/close", Some(&agent), json!({})).await;
    assert_eq!(status, 204);
    let (_, shown) = hub.get(&format!("/api/agents/{agent}"), None).await;
    assert_eq!(shown["status"], "offline", "{shown}");

    let path = format!("/api/agents/{agent}/activity");
    let (status, answer) = call(&hub, Method::PUT, &path, Some(&agent), None).await;
    assert_eq!((status, answer), (204, Value::Null));
    let (_, shown) = hub.get(&format!("/api/agents/{agent}"), None).await;
    assert_eq!(shown["status"], "idle", "a heartbeat, as /ping: {shown}");

    // The operator may mark any agent; another agent may not; an unknown agent is not found.
    let (status, answer) = call(&hub, Method::PUT, &path, None, None).await;
    assert_eq!(status, 204, "{answer}");
    let (status, answer) = call(&hub, Method::PUT, &path, Some(&other), None).await;
    assert_eq!(status, 403, "{answer}");
    let unknown = format!("/api/agents/{}/activity", uuid::Uuid::new_v4());
    let (status, answer) = call(&hub, Method::PUT, &unknown, None, None).await;
    assert_eq!(status, 404, "{answer}");
}
