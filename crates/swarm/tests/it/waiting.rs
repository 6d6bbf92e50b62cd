//! Issue #20, the waiting side, told as users would tell it, against the real binary:
//! an agent waiting on a low-priority question is woken by the answer; the agent that
//! delegated work hears that its worker went idle with mail it never saw; an
//! interactive lead (MCP only, no runner) stays online while its session talks; and an
//! agent's status reason is set by its runner, shown, and cleared when it works again.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    hub::{Hub, TEST_RUNNER_ID, sqlite_file},
    mcp_client::{Revision, connect_http, ok},
    support::{clock::TestClock, eventually},
};

/// A long-poll of `agent`'s, answered in the background.
fn park(hub: &Hub, agent: &str, seconds: u64) -> tokio::task::JoinHandle<Value> {
    let url = hub.url(&format!("/api/poll?wait={seconds}"));
    let agent = agent.to_string();
    tokio::spawn(async move {
        let response = reqwest::Client::new()
            .get(url)
            .header("X-Agent-ID", agent)
            .header("X-Runner-ID", TEST_RUNNER_ID)
            .send()
            .await
            .unwrap();
        response.json::<Value>().await.unwrap()
    })
}

#[tokio::test]
async fn a_reply_to_a_low_priority_question_wakes_the_agent_waiting_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let asker = hub.register_agent("asker", false).await;
    let helper = hub.register_agent("helper", false).await;
    let (status, question) = hub
        .post(
            "/api/mail",
            Some(&asker),
            json!({"to": "helper", "subject": "which branch?", "body": "main or release?",
                   "priority": "low", "awaitingResponse": true}),
        )
        .await;
    assert_eq!(status, 201, "{question}");

    let parked = park(&hub, &asker, 30);
    hub.parked_polls(1).await;
    let id = question["id"].as_str().unwrap();
    let (status, reply) =
        hub.post(&format!("/api/mail/{id}/reply"), Some(&helper), json!({"body": "release"})).await;
    assert_eq!(status, 201, "{reply}");
    assert_eq!(reply["priority"], "low", "the answer keeps the question's priority");

    let answer = parked.await.unwrap();
    let trigger = &answer["trigger"];
    assert_eq!(trigger["type"], "urgent_mail", "the waiting asker was woken: {answer}");
    assert_eq!(trigger["mail"][0]["id"], reply["id"], "{answer}");
    assert_eq!(trigger["mail"][0]["inReplyTo"], question["id"], "{answer}");
}

#[tokio::test]
async fn the_coordinator_hears_that_its_worker_went_idle_with_mail_it_never_saw() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    hub.register_agent("lead", true).await;
    let coordinator = hub.register_agent("planner", false).await;
    let worker = hub.register_agent("builder", false).await;
    let (status, task) =
        hub.post("/api/tasks", Some(&coordinator), json!({"task": "build it", "agentId": worker})).await;
    assert_eq!(status, 201, "{task}");
    let (status, question) = hub
        .post(
            "/api/mail",
            Some(&coordinator),
            json!({"to": "builder", "subject": "which target?", "body": "x86 or arm?",
                   "awaitingResponse": true}),
        )
        .await;
    assert_eq!(status, 201, "{question}");
    let (_, polled) = hub.get("/api/poll", Some(&worker)).await;
    assert_eq!(polled["trigger"]["type"], "task_assigned", "{polled}");

    // The coordinator waits for its answer; the worker finishes without reading its mail.
    let parked = park(&hub, &coordinator, 30);
    hub.parked_polls(1).await;
    let id = task["id"].as_str().unwrap();
    let (status, finished) = hub
        .post(
            &format!("/api/tasks/{id}/finish"),
            Some(&worker),
            json!({"status": "completed", "output": "built"}),
        )
        .await;
    assert_eq!(status, 200, "{finished}");

    let answer = parked.await.unwrap();
    let mail = &answer["trigger"]["mail"][0];
    assert_eq!(answer["trigger"]["type"], "urgent_mail", "{answer}");
    assert_eq!(mail["type"], "status_update", "{answer}");
    assert_eq!(mail["fromAgentId"], worker, "{answer}");
    let body = mail["body"].as_str().unwrap();
    assert!(body.contains("which target?") && body.contains("went idle"), "{body}");

    // Its Stop hook says the same thing again: the coordinator is not told twice.
    let (status, again) = hub.post("/api/mail/stopped", Some(&worker), json!({})).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["alert"], Value::Null, "{again}");
    let (status, refused) = hub.post("/api/mail/stopped", None, json!({})).await;
    assert_eq!(status, 400, "only an agent stops: {refused}");
}

#[tokio::test]
async fn an_interactive_lead_stays_online_while_its_mcp_session_talks() {
    let dir = tempfile::tempdir().unwrap();
    // A 30 s lease on a clock the test moves.
    let clock = TestClock::stopped(dir.path());
    let flags = ["--lease-seconds", "30", "--rescue-interval-seconds", "1"];
    let hub = Hub::start_with_options(&sqlite_file(dir.path()), None, &flags, clock.options());
    let lead = hub.register_agent("person-lead", true).await;
    let silent = hub.register_agent("silent-worker", false).await;
    let client = connect_http(&hub, Some(&lead), Revision::Initialize).await;

    // A person's Claude Code session: tool calls now and then (every 20 s here), never a
    // poll. After each, the rescuer has run, and the lead is online.
    for _ in 0..2 {
        clock.advance(Duration::from_secs(20));
        ok(client.peer(), "my-agent-info", json!({})).await;
        hub.rescue_passes(2).await;
        let (_, me) = hub.get(&format!("/api/agents/{lead}"), None).await;
        assert_ne!(me["status"], "offline", "a live MCP session keeps its lead online: {me}");
    }
    // More than a lease period passed: the silent agent is offline by now.
    eventually("the silent worker to be marked offline", || async {
        let (_, agent) = hub.get(&format!("/api/agents/{silent}"), None).await;
        (agent["status"] == "offline").then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_status_reason_is_set_shown_and_cleared_when_the_agent_works_again() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let worker = hub.register_agent("worker-1", false).await;
    let why = "Claude Code exited at once 3 times: Invalid API key";
    let path = format!("/api/agents/{worker}/status-reason");
    let (status, set) = hub.post(&path, Some(&worker), json!({"reason": why})).await;
    assert_eq!(status, 200, "{set}");
    assert_eq!(set["statusReason"], why);
    let (_, listed) = hub.get("/api/agents", None).await;
    assert_eq!(listed["agents"][0]["statusReason"], why, "{listed}");

    let (status, bad) = hub.post(&path, Some(&worker), json!({"reason": 42})).await;
    assert!((400..500).contains(&status) && bad["error"].is_string(), "{status} {bad}");
    let (status, bad) = hub.post(&path, Some(&worker), json!({"reason": "x".repeat(1001)})).await;
    assert_eq!(status, 400, "{bad}");

    let (status, task) = hub.post("/api/tasks", None, json!({"task": "try again", "agentId": worker})).await;
    assert_eq!(status, 201, "{task}");
    let (_, polled) = hub.get("/api/poll", Some(&worker)).await;
    assert_eq!(polled["trigger"]["type"], "task_assigned", "{polled}");
    let (_, after) = hub.get(&format!("/api/agents/{worker}"), None).await;
    assert_eq!(after["statusReason"], Value::Null, "taking work clears it: {after}");
}
