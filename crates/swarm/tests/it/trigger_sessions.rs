//! The Inbox-MCP escalation pattern end to end, with stand-in agents behind real
//! runners: a signed webhook fires a persistent trigger for a triage agent (its runner
//! starts the stand-in as `claude`), whose session escalates the request to a worker
//! with `send-task` and stops; the worker completes it; the triage session is resumed
//! (`claude --resume <same id>`) with the result. A session that cannot be resumed any
//! more is replaced by a fresh one, recorded for the next firing.

use std::path::Path;

use serde_json::{Value, json};

use crate::{
    hub::{Hub, send, sqlite_file},
    runner::{Runner, RunnerSetup, records_dir},
    support::eventually,
};

/// Every start record of a stand-in's runs, oldest first.
fn starts(dir: &Path) -> Vec<Value> {
    let mut found: Vec<Value> = std::fs::read_dir(records_dir(dir))
        .unwrap()
        .map_while(Result::ok)
        .filter(|entry| entry.path().extension().is_some_and(|extension| extension == "start"))
        .filter_map(|entry| serde_json::from_str(&std::fs::read_to_string(entry.path()).ok()?).ok())
        .collect();
    found
        .sort_by_key(|record: &Value| record["at"].as_str().unwrap_or_default().parse::<u128>().unwrap_or(0));
    found
}

/// The sender carries the secret itself, which vouches for its headers (a signature
/// covers only the body, and then the headers would not be read).
async fn webhook(hub: &Hub, body: &str, thread: &str) -> String {
    let request = reqwest::Client::new()
        .post(hub.url("/api/webhooks/support-inbox"))
        .header("x-webhook-secret", "inbox-secret-0123456789")
        .header("x-session-key", thread)
        .header("x-sender", "customer@example.com")
        .body(body.to_string());
    let (status, accepted) = send(request).await;
    assert_eq!(status, 202, "{accepted}");
    accepted["taskId"].as_str().unwrap().to_string()
}

async fn session_of(hub: &Hub, thread: &str) -> Option<String> {
    let (status, body) = hub.get(&format!("/api/triggers/support-inbox/session?key={thread}"), None).await;
    (status == 200).then(|| body["session"]["sessionId"].as_str().unwrap().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_persistent_trigger_session_escalates_and_is_resumed_with_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let worker_dir = dir.path().join("worker");
    let triage_dir = dir.path().join("triage");
    let worker = RunnerSetup::worker(&worker_dir);
    let worker_id = worker.agent_id.clone();
    let _worker = Runner::start(&hub, worker);
    let mut triage = RunnerSetup::worker(&triage_dir).env("STAND_IN_ESCALATE_TO", worker_id.clone());
    triage.harness = Some("claude");
    let triage_id = triage.agent_id.clone();
    let _triage = Runner::start(&hub, triage);
    for agent in [&worker_id, &triage_id] {
        eventually("the runners to register", || async {
            (hub.get(&format!("/api/agents/{agent}"), None).await.0 == 200).then_some(())
        })
        .await;
    }
    let (status, created) = hub
        .post(
            "/api/triggers",
            None,
            json!({"name": "support-inbox", "type": "webhook", "webhookSecret": "inbox-secret-0123456789",
                   "target": triage_id, "sessionMode": "persistent",
                   "prompt": "Message from {{sender}} on {{channel}}: {{payload}}"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");

    let first = webhook(&hub, "my invoice is wrong", "thread-1").await;
    // The triage session escalated, the worker completed, the session got the result.
    let runs = eventually("the triage session to be resumed with the result", || async {
        let runs = starts(&triage_dir);
        (runs.len() >= 2).then_some(runs)
    })
    .await;
    assert_eq!(runs[0]["prompt"], format!("/work-on-task {first}"));
    // The customer's words arrive fenced as outside text (untrusted_input.rs).
    let text = runs[0]["text"].as_str().unwrap();
    assert!(
        text.contains(
            "Message from customer@example.com on webhook: Outside input (webhook, from customer@example.com)"
        ) && text.contains("\nmy invoice is wrong\n</untrusted-input>"),
        "{text}"
    );
    let escalated = {
        let (_, task) = hub.get(&format!("/api/tasks/{first}"), None).await;
        assert_eq!(task["status"], "completed", "{task}");
        task["output"].as_str().unwrap().strip_prefix("escalated as task ").unwrap().to_string()
    };
    let (_, worker_task) = hub.get(&format!("/api/tasks/{escalated}"), None).await;
    assert_eq!(
        (worker_task["agentId"].as_str(), worker_task["status"].as_str()),
        (Some(worker_id.as_str()), Some("completed"))
    );
    assert_eq!(runs[1]["prompt"], format!("/task-result {escalated}"));
    assert_eq!(runs[1]["trigger"], "task_result");
    assert!(runs[1]["text"].as_str().unwrap().contains("stand-in finished: Please handle"), "{}", runs[1]);
    let session = runs[0]["sessionId"].as_str().unwrap().to_string();
    assert_eq!(runs[1]["sessionId"], session.as_str(), "the same session was resumed");
    assert_eq!(session_of(&hub, "thread-1").await.as_deref(), Some(session.as_str()));
    // Delivered once: the result is not offered again.
    let (status, refused) =
        hub.post(&format!("/api/tasks/{escalated}/result-delivered"), Some(&worker_id), json!({})).await;
    assert_eq!(status, 403, "{refused}");

    // The next message in the same thread resumes the same session.
    let second = webhook(&hub, "any news?", "thread-1").await;
    let runs = eventually("the second message", || async {
        let runs = starts(&triage_dir);
        runs.iter().any(|run| run["prompt"] == format!("/work-on-task {second}")).then_some(runs)
    })
    .await;
    let run = runs.iter().find(|run| run["prompt"] == format!("/work-on-task {second}")).unwrap();
    assert_eq!(run["sessionId"], session.as_str());

    // The agent CLI lost the session: the runner starts a fresh one and records it.
    eventually("the second escalation to settle", || async {
        (starts(&triage_dir).len() >= 4).then_some(())
    })
    .await;
    std::fs::remove_file(records_dir(&triage_dir).join("sessions").join(&session)).unwrap();
    let third = webhook(&hub, "hello again", "thread-1").await;
    let fresh = eventually("a fresh session for the thread", || async {
        let runs = starts(&triage_dir);
        let run = runs.iter().find(|run| run["prompt"] == format!("/work-on-task {third}"))?;
        let recorded = session_of(&hub, "thread-1").await?;
        (run["sessionId"].as_str() == Some(recorded.as_str())).then_some(recorded)
    })
    .await;
    assert_ne!(fresh, session, "a new session replaced the lost one");

    // Another thread is another conversation.
    let other = webhook(&hub, "new customer", "thread-2").await;
    let other_session =
        eventually("the other thread's session", || async { session_of(&hub, "thread-2").await }).await;
    assert_ne!(other_session, fresh);
    let (_, task) = hub.get(&format!("/api/tasks/{other}"), None).await;
    assert_eq!(
        (task["triggerName"].as_str(), task["sessionKey"].as_str()),
        (Some("support-inbox"), Some("thread-2"))
    );
}
