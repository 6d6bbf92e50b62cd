//! Agent mail over real HTTP and MCP against the real binary, and the Claude Code hooks
//! fed Claude Code's own hook payloads: urgent mail wakes a parked poll, delivery is
//! urgent first and once, replies end the sender's waiting, bad input gets a JSON 4xx,
//! `swarm mail log` prints the seed's JSONL, and the hooks inject, alert and count.

use std::{
    io::Write as _,
    path::Path,
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::hub::{Hub, SWARM, TEST_RUNNER_ID, sqlite_file};

async fn send(hub: &Hub, from: &str, body: Value) -> Value {
    let (status, mail) = hub.post("/api/mail", Some(from), body).await;
    assert_eq!(status, 201, "{mail}");
    mail
}

async fn counts(hub: &Hub, agent: &str) -> Value {
    let (status, counts) = hub.get("/api/mail/unread-count", Some(agent)).await;
    assert_eq!(status, 200, "{counts}");
    counts
}

fn subjects(mail: &Value) -> Vec<String> {
    mail.as_array().unwrap().iter().map(|mail| mail["subject"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn urgent_mail_wakes_the_recipient_and_a_reply_ends_the_senders_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let lead = hub.register_agent("lead-1", true).await;
    let worker = hub.register_agent("worker-1", false).await;

    let started = Instant::now();
    let parked = {
        let url = hub.url("/api/poll?wait=10");
        let lead = lead.clone();
        tokio::spawn(async move {
            let response = reqwest::Client::new()
                .get(url)
                .header("X-Agent-ID", lead)
                .header("X-Runner-ID", TEST_RUNNER_ID)
                .send()
                .await
                .unwrap();
            (response.json::<Value>().await.unwrap(), started.elapsed())
        })
    };
    hub.parked_polls(1).await;
    send(&hub, &worker, json!({"to": "lead-1", "subject": "fyi", "body": "normal mail waits"})).await;
    // Normal mail makes no trigger: the poll, woken or not, stays parked, and what ends
    // it below is the urgent mail alone.
    hub.parked_polls(1).await;
    assert!(!parked.is_finished(), "normal mail does not wake the recipient");

    let ask = send(
        &hub,
        &worker,
        json!({"to": "coordinator", "type": "help_request", "priority": "urgent", "awaitingResponse": true,
               "subject": "Which database?", "body": "SQLite or PostgreSQL for the cache?"}),
    )
    .await;
    assert_eq!((ask["toAgentId"].as_str(), ask["status"].as_str()), (Some(lead.as_str()), Some("unread")));
    let (woken, elapsed) = parked.await.unwrap();
    assert!(elapsed < Duration::from_secs(10), "woken by the urgent mail, not the wait's end");
    assert_eq!(woken["trigger"]["type"], "urgent_mail", "{woken}");
    assert_eq!(subjects(&woken["trigger"]["mail"]), ["Which database?"]);
    assert_eq!(woken["trigger"]["mail"][0]["status"], "processing");
    let (_, again) = hub.get("/api/poll", Some(&lead)).await;
    assert_eq!(again["trigger"], Value::Null, "claimed once");

    let waiting = counts(&hub, &worker).await;
    assert_eq!(
        (waiting["waitingForResponse"].as_bool(), waiting["awaitingResponse"].as_i64()),
        (Some(true), Some(1))
    );
    let lead_counts = counts(&hub, &lead).await;
    assert_eq!((lead_counts["unread"].as_i64(), lead_counts["urgent"].as_i64()), (Some(2), Some(1)));
    let (_, me) = hub.get("/me?include=inbox", Some(&worker)).await;
    assert_eq!(me["inbox"]["waitingForResponse"], true, "{me}");

    let (status, read) = hub.post("/api/mail/read", Some(&lead), json!({})).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(subjects(&read["mail"]), ["Which database?", "fyi"], "urgent first");
    let (_, read) = hub.post("/api/mail/read", Some(&lead), json!({})).await;
    assert_eq!(read["mail"], json!([]), "delivered once");

    let id = ask["id"].as_str().unwrap();
    let (status, refused) =
        hub.post(&format!("/api/mail/{id}/reply"), Some(&worker), json!({"body": "me?"})).await;
    assert_eq!(status, 403, "the sender does not answer its own mail: {refused}");
    let (status, reply) =
        hub.post(&format!("/api/mail/{id}/reply"), Some(&lead), json!({"body": "PostgreSQL."})).await;
    assert_eq!(status, 201, "{reply}");
    assert_eq!(
        (reply["subject"].as_str(), reply["type"].as_str(), reply["priority"].as_str()),
        (Some("Re: Which database?"), Some("response"), Some("urgent")),
        "an urgent question gets an urgent answer"
    );
    assert_eq!(reply["toAgentId"], worker.as_str());
    let answered = counts(&hub, &worker).await;
    assert_eq!(answered["waitingForResponse"], false, "{answered}");
    let (_, original) = hub.get(&format!("/api/mail/{id}"), Some(&worker)).await;
    assert!(original["answeredAt"].is_string(), "{original}");

    let (_, history) = hub.get("/api/mail?box=all&order=oldest", Some(&worker)).await;
    assert_eq!(subjects(&history["mail"]), ["fyi", "Which database?", "Re: Which database?"]);
    let (_, page) = hub.get("/api/mail?box=all&order=oldest&limit=2", Some(&worker)).await;
    let cursor = page["nextCursor"].as_str().expect("a full page has a cursor");
    let (_, rest) = hub.get(&format!("/api/mail?box=all&order=oldest&after={cursor}"), Some(&worker)).await;
    assert_eq!(subjects(&rest["mail"]), ["Re: Which database?"]);
    assert_eq!(rest["nextCursor"], Value::Null);

    // `swarm mail log`: the worker's history as the seed's JSONL, oldest first.
    let output = Command::new(SWARM)
        .args(["mail", "log", "worker-1", "--url", &hub.base_url])
        .env_remove("API_KEY")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(
        lines[1],
        json!({"id": id, "from": worker, "to": lead, "type": "help_request", "subject": "Which database?",
               "body": "SQLite or PostgreSQL for the cache?", "priority": "urgent",
               "created_at": ask["createdAt"], "awaiting_response": true})
    );
    assert_eq!(lines[2]["in_reply_to"], id);
}

#[tokio::test]
async fn bad_mail_is_refused_with_a_json_error_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let alice = hub.register_agent("alice", false).await;
    let bob = hub.register_agent("bob", false).await;
    let mail = send(&hub, &alice, json!({"to": bob, "subject": "hi", "body": "hello"})).await;
    let id = mail["id"].as_str().unwrap();
    let unknown = uuid::Uuid::new_v4().to_string();
    let cases = [
        (
            404,
            hub.post("/api/mail", Some(&alice), json!({"to": "coordinator", "subject": "s", "body": "b"}))
                .await,
        ),
        (
            404,
            hub.post("/api/mail", Some(&alice), json!({"to": "nobody", "subject": "s", "body": "b"})).await,
        ),
        (400, hub.post("/api/mail", Some(&alice), json!({"to": "alice", "subject": "s", "body": "b"})).await),
        (400, hub.post("/api/mail", Some(&alice), json!({"to": "bob", "subject": " ", "body": "b"})).await),
        (
            400,
            hub.post("/api/mail", Some(&alice), json!({"to": "bob", "subject": "a\nb", "body": "b"})).await,
        ),
        (
            400,
            hub.post("/api/mail", Some(&alice), json!({"to": "bob", "subject": "s", "body": "b\u{0}"})).await,
        ),
        (
            400,
            hub.post(
                "/api/mail",
                Some(&alice),
                json!({"to": "bob", "subject": "s", "body": "x".repeat(20_001)}),
            )
            .await,
        ),
        (
            400,
            hub.post(
                "/api/mail",
                Some(&alice),
                json!({"to": "bob", "subject": "s", "body": "b", "priority": "asap"}),
            )
            .await,
        ),
        (
            400,
            hub.post(
                "/api/mail",
                Some(&alice),
                json!({"to": "bob", "subject": "s", "body": "b", "type": "gossip"}),
            )
            .await,
        ),
        (400, hub.post("/api/mail", Some(&alice), json!({"to": "bob", "body": "b"})).await),
        (400, hub.post("/api/mail", None, json!({"to": "bob", "subject": "s", "body": "b"})).await),
        (404, hub.post("/api/mail", Some(&unknown), json!({"to": "bob", "subject": "s", "body": "b"})).await),
        (404, hub.post("/api/mail", Some(&alice), json!({"inReplyTo": unknown, "body": "b"})).await),
        (403, hub.post(&format!("/api/mail/{id}/reply"), Some(&alice), json!({"body": "b"})).await),
        (400, hub.post(&format!("/api/mail/{id}/reply"), Some(&bob), json!({"body": ""})).await),
        (400, hub.post("/api/mail/not-a-uuid/reply", Some(&bob), json!({"body": "b"})).await),
        (400, hub.post("/api/mail/read", Some(&bob), json!({"limit": 0})).await),
        (400, hub.post("/api/mail/read", None, json!({})).await),
        (400, hub.get("/api/mail?limit=201", Some(&bob)).await),
        (400, hub.get("/api/mail?box=spam", Some(&bob)).await),
        (400, hub.get("/api/mail?order=sideways", Some(&bob)).await),
        (400, hub.get("/api/mail?after=nope", Some(&bob)).await),
        (403, hub.get(&format!("/api/mail?agentId={alice}"), Some(&bob)).await),
        (404, hub.get(&format!("/api/mail?agentId={unknown}"), None).await),
        (400, hub.get("/api/mail/unread-count", None).await),
        (404, hub.get(&format!("/api/mail/{unknown}"), None).await),
    ];
    for (index, (expected, (status, body))) in cases.into_iter().enumerate() {
        assert_eq!(status, expected, "case {index}: {body}");
        assert!(body["error"].is_string(), "case {index}: a JSON error body: {body}");
    }
    let (_, all) = hub.get("/api/mail?box=all", None).await;
    assert_eq!(all["mail"].as_array().unwrap().len(), 1, "nothing was written: {all}");
    assert_eq!(counts(&hub, &bob).await["unread"], 1, "nothing was delivered");
}

#[tokio::test]
async fn the_mail_tools_send_read_reply_and_count() {
    use crate::mcp_client::{Revision, connect_http, new_agent_id, ok, refused};

    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let (lead, worker) = (new_agent_id(), new_agent_id());
    let lead_client = connect_http(&hub, Some(&lead), Revision::Initialize).await;
    let worker_client = connect_http(&hub, Some(&worker), Revision::Initialize).await;
    ok(&lead_client, "join-swarm", json!({"name": "lead", "lead": true})).await;
    ok(&worker_client, "join-swarm", json!({"name": "worker"})).await;

    let sent = ok(
        &worker_client,
        "send-mail",
        json!({"to": "coordinator", "type": "help_request", "priority": "urgent", "awaitingResponse": true,
               "subject": "Stuck on the migration", "body": "The column already exists."}),
    )
    .await;
    assert!(sent["message"].as_str().unwrap().contains("waiting for a response"), "{sent}");
    ok(
        &worker_client,
        "send-mail",
        json!({"to": "lead", "priority": "low", "subject": "later", "body": "no rush"}),
    )
    .await;
    let counted = ok(&lead_client, "unread-mail-count", json!({})).await;
    assert_eq!((counted["counts"]["unread"].as_i64(), counted["counts"]["low"].as_i64()), (Some(2), Some(1)));
    let listed = ok(&lead_client, "list-mail", json!({"unreadOnly": true})).await;
    assert_eq!(listed["mail"].as_array().unwrap().len(), 2, "listing does not mark read");
    let read = ok(&lead_client, "read-mail", json!({})).await;
    assert_eq!(subjects(&read["mail"]), ["Stuck on the migration"], "low waits until asked");
    let read = ok(&lead_client, "read-mail", json!({"includeLow": true})).await;
    assert_eq!(subjects(&read["mail"]), ["later"]);
    // Mail a prompt or hook already delivered is still there when asked for by id.
    let id = sent["mail"]["id"].as_str().unwrap();
    let again = ok(&lead_client, "read-mail", json!({"mailIds": [id]})).await;
    assert_eq!(subjects(&again["mail"]), ["Stuck on the migration"], "{again}");
    assert_eq!(again["mail"][0]["status"], "read", "{again}");
    let others = ok(&worker_client, "read-mail", json!({"mailIds": [id]})).await;
    assert_eq!(others["mail"], json!([]), "another agent's mail stays its own: {others}");

    let reason = refused(&worker_client, "reply-mail", json!({"mailId": id, "body": "me"})).await;
    assert!(reason.contains("only its recipient"), "{reason}");
    ok(&lead_client, "reply-mail", json!({"mailId": id, "body": "Use IF NOT EXISTS."})).await;
    let counted = ok(&worker_client, "unread-mail-count", json!({})).await;
    assert_eq!(counted["waitingForResponse"], false, "{counted}");
    assert_eq!(counted["counts"]["urgent"], 1, "the answer is urgent like the question");
    let pending = ok(&worker_client, "list-mail", json!({"box": "outbox", "pending": true})).await;
    assert_eq!(pending["mail"], json!([]));
    refused(&worker_client, "send-mail", json!({"to": "worker", "subject": "s", "body": "b"})).await;
    refused(
        &worker_client,
        "send-mail",
        json!({"to": "lead", "subject": "s", "body": "b", "priority": "asap"}),
    )
    .await;
    refused(&worker_client, "read-mail", json!({"limit": 0})).await;
}

/// `swarm hook <event>` with `payload` on stdin, as Claude Code runs it.
fn hook(dir: &Path, event: &str, env: &[(&str, &str)], payload: &Value) -> Output {
    let mut command = Command::new(SWARM);
    command.args(["hook", event]).current_dir(dir).env("HOME", dir).env("SWARM_HOOK_DIR", dir.join("hooks"));
    for name in ["MCP_BASE_URL", "API_KEY", "AGENT_ID", "TASK_ID", "CLAUDE_PROJECT_DIR"] {
        command.env_remove(name);
    }
    command.envs(env.iter().copied()).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    child.stdin.take().unwrap().write_all(payload.to_string().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{event}: {}", String::from_utf8_lossy(&output.stderr));
    output
}

fn stdout_json(output: &Output) -> Option<Value> {
    let text = String::from_utf8_lossy(&output.stdout);
    (!text.trim().is_empty()).then(|| serde_json::from_str(&text).expect("the hook prints JSON"))
}

/// Payloads as Claude Code sends them (https://code.claude.com/docs/en/hooks).
fn payload(dir: &Path, event: &str) -> Value {
    let common = json!({
        "session_id": "eb5b0174-0555-4601-804e-672d68069c89",
        "transcript_path": "/home/dev/.claude/projects/demo/eb5b0174-0555-4601-804e-672d68069c89.jsonl",
        "cwd": dir, "permission_mode": "default", "hook_event_name": event,
    });
    let mut payload = common.as_object().unwrap().clone();
    let extra = match event {
        "UserPromptSubmit" => json!({"prompt": "Continue with the migration"}),
        "PostToolUse" => json!({"tool_name": "Write", "tool_use_id": "toolu_01ABC123",
            "tool_input": {"file_path": "/tmp/notes.md", "content": "notes"},
            "tool_response": {"filePath": "/tmp/notes.md", "success": true}}),
        "Stop" => json!({"stop_hook_active": false}),
        "SubagentStop" => {
            json!({"stop_hook_active": false, "agent_id": "def456", "agent_type": "general-purpose",
            "agent_transcript_path": "/home/dev/.claude/projects/demo/subagents/agent-def456.jsonl"})
        }
        _ => json!({}),
    };
    payload.extend(extra.as_object().unwrap().clone());
    Value::Object(payload)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_deliver_mail_alert_the_coordinator_and_refresh_counts() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let lead = hub.register_agent("lead-1", true).await;
    let worker = hub.register_agent("worker-1", false).await;
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let as_worker = [("MCP_BASE_URL", hub.base_url.as_str()), ("AGENT_ID", worker.as_str())];

    // Nothing waits: nothing is said.
    let quiet = hook(&project, "user-prompt-submit", &as_worker, &payload(&project, "UserPromptSubmit"));
    assert_eq!(stdout_json(&quiet), None);
    let quiet = hook(&project, "stop", &as_worker, &payload(&project, "Stop"));
    assert_eq!(stdout_json(&quiet), None);

    let ask = send(
        &hub,
        &worker,
        json!({"to": "coordinator", "type": "help_request", "priority": "urgent", "awaitingResponse": true,
               "subject": "Migration fails", "body": "duplicate column"}),
    )
    .await;
    for (event, name) in [("stop", "Stop"), ("subagent-stop", "SubagentStop")] {
        let alert =
            stdout_json(&hook(&project, event, &as_worker, &payload(&project, name))).expect("an alert");
        let message = alert["systemMessage"].as_str().unwrap();
        assert!(message.starts_with("swarm: worker-1 stopped waiting for a response"), "{message}");
        assert!(
            message.contains("urgent help_request to lead-1 (the lead) \"Migration fails\""),
            "{message}"
        );
        assert!(alert.get("decision").is_none(), "an alert never blocks stopping");
    }

    send(&hub, &lead, json!({"to": "worker-1", "priority": "low", "subject": "someday", "body": "later"}))
        .await;
    send(&hub, &lead, json!({"to": "worker-1", "subject": "heads up", "body": "deploy at 5"})).await;
    let id = ask["id"].as_str().unwrap();
    let (status, _) = hub
        .post(&format!("/api/mail/{id}/reply"), Some(&lead), json!({"body": "Drop the column first."}))
        .await;
    assert_eq!(status, 201);

    // PostToolUse: the counts file, and a word only when urgent mail is new.
    let refreshed = hook(&project, "post-tool-use", &as_worker, &payload(&project, "PostToolUse"));
    let context = stdout_json(&refreshed).expect("new urgent mail is announced");
    assert_eq!(context["hookSpecificOutput"]["hookEventName"], "PostToolUse");
    assert!(
        context["hookSpecificOutput"]["additionalContext"].as_str().unwrap().contains("1 urgent unread mail")
    );
    let counts_file = project.join("hooks").join(&worker).join("inbox_count.json");
    let cached: Value = serde_json::from_str(&std::fs::read_to_string(&counts_file).unwrap()).unwrap();
    assert_eq!((cached["unread"].as_i64(), cached["urgent"].as_i64()), (Some(3), Some(1)), "{cached}");
    assert!(cached["last_checked"].is_string());
    let again = hook(&project, "post-tool-use", &as_worker, &payload(&project, "PostToolUse"));
    assert_eq!(stdout_json(&again), None, "already announced");

    // UserPromptSubmit: urgent first, then normal; low waits; each delivered once.
    let injected = stdout_json(&hook(
        &project,
        "user-prompt-submit",
        &as_worker,
        &payload(&project, "UserPromptSubmit"),
    ))
    .expect("mail is injected");
    assert_eq!(injected["hookSpecificOutput"]["hookEventName"], "UserPromptSubmit");
    let text = injected["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
    let urgent = text.find("[URGENT] response from lead-1 (the lead)").expect(text);
    let normal = text.find("[normal] question from lead-1 (the lead)").expect(text);
    assert!(urgent < normal, "{text}");
    assert!(
        text.contains("Drop the column first.") && text.contains(&format!("answering your mail {id}")),
        "{text}"
    );
    assert!(!text.contains("someday"), "low mail waits: {text}");
    assert!(!text.contains("waiting for a response to mail you sent"), "the reply ended the waiting: {text}");
    let after = counts(&hub, &worker).await;
    assert_eq!((after["unread"].as_i64(), after["low"].as_i64()), (Some(1), Some(1)));
    let quiet = hook(&project, "user-prompt-submit", &as_worker, &payload(&project, "UserPromptSubmit"));
    assert_eq!(stdout_json(&quiet), None, "injected once");
    let quiet = hook(&project, "stop", &as_worker, &payload(&project, "Stop"));
    assert_eq!(stdout_json(&quiet), None, "nothing left to wait on");
}
