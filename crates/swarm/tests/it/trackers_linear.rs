//! Linear (issue 47) through the real hub, against the Linear stand-in: a signed
//! delivery of an issue labelled `swarm-ready` becomes one task (fenced), a replay
//! nothing, a bad signature or a stale delivery 401 and nothing; the task's start moves
//! the issue to In Progress, its end leaves exactly one comment and one move to Done,
//! across a restart of the hub while Linear was down; a comment that mentions the bot
//! steers the running task, and after its end becomes a follow-up task whose end is
//! reported too.

use serde_json::{Value, json};

use crate::{
    hub::{Database, Hub, send, sqlite_file},
    support::clock::TestClock,
    tracker_stand_ins::{LINEAR_API_KEY, LINEAR_BOT_ID, TrackerStandIn},
};

const SECRET: &str = "linear-signing-secret";

fn flags(stand_in: &TrackerStandIn) -> Vec<String> {
    ["--linear-signing-secret", SECRET, "--linear-api-key", LINEAR_API_KEY, "--linear-api-url", &stand_in.url]
        .iter()
        .map(|flag| flag.to_string())
        .collect()
}

fn start_hub(database: &Database, flags: &[String]) -> Hub {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    Hub::start_with(database, None, &flags)
}

/// A hub on a clock the test moves (real time until it does).
fn start_hub_on(database: &Database, flags: &[String], clock: &TestClock) -> Hub {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    Hub::start_with_options(database, None, &flags, clock.options())
}

/// Now on the hub's clock, which a test may have moved ahead of real time.
fn now_ms() -> i64 {
    let real = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    real + CLOCK_AHEAD_MS.load(std::sync::atomic::Ordering::Relaxed)
}

/// How far the test moved the hub's clock ahead (each test runs in a process of its own).
static CLOCK_AHEAD_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// An `Issue` `create` delivery for issue `id`, labelled swarm-ready, sent now.
fn issue_created(id: &str, identifier: &str, title: &str) -> Value {
    json!({
        "action": "create", "type": "Issue", "webhookTimestamp": now_ms(),
        "actor": {"id": "user-ada", "name": "ada", "type": "user"},
        "data": {
            "id": id, "identifier": identifier, "title": title,
            "description": "Please fix the flaky login test.",
            "url": format!("https://linear.app/acme/issue/{identifier}"),
            "state": {"id": "st-todo", "name": "Todo", "type": "unstarted"},
            "labels": [{"id": "lab-ready", "name": "swarm-ready"}],
        },
    })
}

fn comment_created(issue_id: &str, comment_id: &str, body: &str) -> Value {
    json!({
        "action": "create", "type": "Comment", "webhookTimestamp": now_ms(),
        "actor": {"id": "user-ada", "name": "ada"},
        "data": {"id": comment_id, "body": body, "userId": "user-ada", "issueId": issue_id,
                 "issue": {"id": issue_id, "identifier": "ENG-1"}},
    })
}

/// POST a delivery as Linear does: the body signed with `secret`.
async fn deliver(hub: &Hub, delivery: &str, body: &Value, secret: &str) -> (u16, Value) {
    let bytes = serde_json::to_vec(body).unwrap();
    let signature = swarm_linear::webhook::sign(secret, &bytes);
    let request = reqwest::Client::new()
        .post(hub.url(swarm_linear::WEBHOOK_PATH))
        .header("content-type", "application/json")
        .header("Linear-Delivery", delivery)
        .header("Linear-Event", body["type"].as_str().unwrap_or_default())
        .header("Linear-Signature", signature)
        .body(bytes);
    send(request).await
}

async fn linear_tasks(hub: &Hub) -> Vec<Value> {
    let (status, body) = hub.get("/api/tasks?limit=100", None).await;
    assert_eq!(status, 200, "{body}");
    body["tasks"].as_array().unwrap().iter().filter(|task| task["source"] == "linear").cloned().collect()
}

/// A worker's poll takes the task (the pool's, or assigned to it): it is in progress.
async fn take_task(hub: &Hub, worker: &str, expected: &str) {
    let (status, body) = hub.get("/api/poll?wait=10", Some(worker)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["trigger"]["task"]["id"], expected, "{body}");
}

async fn finish(hub: &Hub, worker: &str, task: &str, output: &str) {
    let finish = json!({"status": "completed", "output": output});
    let (status, body) = hub.post(&format!("/api/tasks/{task}/finish"), Some(worker), finish).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linear_a_ready_issue_becomes_one_task_and_a_replay_or_a_bad_signature_nothing() {
    let stand_in = TrackerStandIn::linear().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = start_hub(&sqlite_file(dir.path()), &flags(&stand_in));

    // Unsigned, wrongly signed, or signed but stale: 401 with a JSON error, and nothing.
    let event = issue_created("iss-1", "ENG-1", "Flaky login test");
    let (status, body) = deliver(&hub, "d-0", &event, "not-the-secret").await;
    assert_eq!(status, 401, "{body}");
    assert!(body["error"].as_str().unwrap().contains("signature"), "{body}");
    let unsigned = reqwest::Client::new()
        .post(hub.url(swarm_linear::WEBHOOK_PATH))
        .header("Linear-Delivery", "d-0")
        .json(&event);
    let (status, body) = send(unsigned).await;
    assert_eq!(status, 401, "{body}");
    let mut stale = event.clone();
    stale["webhookTimestamp"] = json!(now_ms() - 120_000);
    let (status, body) = deliver(&hub, "d-stale", &stale, SECRET).await;
    assert_eq!(status, 401, "{body}");
    assert!(body["error"].as_str().unwrap().contains("stale"), "{body}");
    assert!(linear_tasks(&hub).await.is_empty(), "nothing was created");

    // Signed and fresh: one task, the issue's words fenced.
    let (status, body) = deliver(&hub, "d-1", &event, SECRET).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("accepted")), "{body}");
    let tasks = linear_tasks(&hub).await;
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    let text = tasks[0]["task"].as_str().unwrap();
    assert!(text.starts_with("Linear issue ENG-1 was created for the swarm"), "{text}");
    let (outside, inside) = text.split_once("<untrusted-input").unwrap();
    assert!(!outside.contains("Flaky"), "the title stays inside the fence: {outside}");
    assert!(inside.contains("Flaky login test") && inside.contains("flaky login test"), "{inside}");
    assert_eq!(tasks[0]["taskType"], "linear-issue");

    // The same delivery again (Linear retries with the same Linear-Delivery), or the
    // issue labelled again under another while its task is open: nothing (a replay
    // after the task's end is `duplicate`: the restart test).
    for delivery in ["d-1", "d-2"] {
        let (status, body) = deliver(&hub, delivery, &event, SECRET).await;
        assert_eq!((status, body["status"].as_str()), (200, Some("ignored")), "{body}");
    }
    // An issue without the label, a comment on no task's issue: nothing.
    let mut plain = issue_created("iss-2", "ENG-2", "Other");
    plain["data"]["labels"] = json!([]);
    let (status, body) = deliver(&hub, "d-3", &plain, SECRET).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("ignored")), "{body}");
    let (status, body) = deliver(&hub, "d-4", &comment_created("iss-2", "c-1", "@swarm look"), SECRET).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("ignored")), "{body}");
    assert_eq!(linear_tasks(&hub).await.len(), 1);
    assert_eq!(stand_in.refused().await, 0, "the hub sends its API key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linear_a_tasks_end_is_one_comment_and_one_move_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    linear_end_reported_once(sqlite_file(dir.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linear_a_tasks_end_is_one_comment_and_one_move_across_a_restart_on_postgres() {
    let database = crate::support::postgres_database().await;
    linear_end_reported_once(database.database()).await;
}

async fn linear_end_reported_once(database: Database) {
    let stand_in = TrackerStandIn::linear().await;
    stand_in.put_issue("iss-1", "st-todo").await;
    let flags = flags(&stand_in);
    let clock_dir = tempfile::tempdir().unwrap();
    let clock = TestClock::in_dir(clock_dir.path());
    let hub = start_hub_on(&database, &flags, &clock);
    let worker = hub.register_agent("linear-worker", false).await;

    let (status, body) = deliver(&hub, "d-1", &issue_created("iss-1", "ENG-1", "Flaky"), SECRET).await;
    assert_eq!(status, 200, "{body}");
    let task = body["taskId"].as_str().unwrap().to_string();
    take_task(&hub, &worker, &task).await;
    // Started: the issue moves to In Progress, without a comment.
    let issue = stand_in.wait_issue("iss-1", 0, 1).await;
    assert_eq!(issue.moves, ["st-progress"]);

    // Linear is down when the task ends: the report fails, and the hub stops.
    stand_in.set_failing(true).await;
    finish(&hub, &worker, &task, "Fixed the race; see https://github.com/acme/app/pull/7").await;
    stand_in.wait_refusals(1).await;
    assert!(hub.terminate(), "the hub stops on SIGTERM");
    // The stopped hub may have been cut off between the failed call and its record, so
    // holding the report for its lease: the new hub finds it again once that ran out.
    let ahead = swarm_service::trackers::REPORT_LEASE + std::time::Duration::from_secs(1);
    clock.advance(ahead);
    CLOCK_AHEAD_MS.store(ahead.as_millis() as i64, std::sync::atomic::Ordering::Relaxed);
    assert!(stand_in.issue("iss-1").await.comments.is_empty());

    // Back up, a new hub reports it: one comment (the outcome, the pull request) and one move.
    stand_in.set_failing(false).await;
    let hub = start_hub_on(&database, &flags, &clock);
    let issue = stand_in.wait_issue("iss-1", 1, 2).await;
    assert_eq!(issue.moves, ["st-progress", "st-done"]);
    let comment = &issue.comments[0];
    assert!(comment.contains(&format!("swarm-task:{task}")), "{comment}");
    assert!(comment.contains("https://github.com/acme/app/pull/7"), "{comment}");
    // Its delivery replayed now (signed afresh), its task finished: a duplicate, no task.
    let (_, body) = deliver(&hub, "d-1", &issue_created("iss-1", "ENG-1", "Flaky"), SECRET).await;
    assert_eq!(body["status"], "duplicate", "{body}");
    assert_eq!(linear_tasks(&hub).await.len(), 1);

    // Another issue's task ends after it: reported, while the first gets nothing more.
    stand_in.put_issue("iss-2", "st-todo").await;
    let (status, body) = deliver(&hub, "d-2", &issue_created("iss-2", "ENG-2", "Second"), SECRET).await;
    assert_eq!(status, 200, "{body}");
    let second = body["taskId"].as_str().unwrap().to_string();
    take_task(&hub, &worker, &second).await;
    finish(&hub, &worker, &second, "done").await;
    stand_in.wait_issue("iss-2", 1, 2).await;
    let issue = stand_in.issue("iss-1").await;
    assert_eq!((issue.comments.len(), issue.moves.len()), (1, 2), "{issue:?}");
    assert_eq!(stand_in.calls("SwarmCommentCreate").await.len(), 2, "one comment per task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linear_a_comment_for_the_bot_steers_the_running_task_then_follows_up() {
    let stand_in = TrackerStandIn::linear().await;
    stand_in.put_issue("iss-1", "st-todo").await;
    let dir = tempfile::tempdir().unwrap();
    let hub = start_hub(&sqlite_file(dir.path()), &flags(&stand_in));
    let worker = hub.register_agent("linear-worker", false).await;
    let (_, body) = deliver(&hub, "d-1", &issue_created("iss-1", "ENG-1", "Flaky"), SECRET).await;
    let task = body["taskId"].as_str().unwrap().to_string();
    take_task(&hub, &worker, &task).await;

    // While it runs: a comment mentioning the bot is steering for it, once: Linear's
    // retry, or the signed body replayed under another Linear-Delivery, is a duplicate.
    let comment = comment_created("iss-1", "c-1", "@swarm also cover the logout path");
    let (status, body) = deliver(&hub, "d-2", &comment, SECRET).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("accepted")), "{body}");
    for delivery in ["d-2", "d-2-forged"] {
        let (status, body) = deliver(&hub, delivery, &comment, SECRET).await;
        assert_eq!((status, body["status"].as_str()), (200, Some("duplicate")), "{body}");
    }
    let (status, body) = hub.get(&format!("/api/tasks/{task}/steering-messages"), None).await;
    assert_eq!(status, 200, "{body}");
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["source"], "linear");
    let message = messages[0]["message"].as_str().unwrap();
    assert!(
        message.contains("<untrusted-input") && message.contains("also cover the logout path"),
        "{message}"
    );
    // The bot's own comments and comments not for it: nothing.
    let mut own = comment_created("iss-1", "c-2", "@swarm note to self");
    own["data"]["userId"] = json!(LINEAR_BOT_ID);
    let (_, body) = deliver(&hub, "d-3", &own, SECRET).await;
    assert_eq!(body["status"], "ignored", "{body}");

    // After its end: a follow-up task on the same issue, whose end is reported too.
    finish(&hub, &worker, &task, "done").await;
    stand_in.wait_issue("iss-1", 1, 2).await;
    let (status, body) =
        deliver(&hub, "d-4", &comment_created("iss-1", "c-3", "@swarm one more thing"), SECRET).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("accepted")), "{body}");
    let follow_up = body["taskId"].as_str().expect("a follow-up task").to_string();
    assert_ne!(follow_up, task);
    let (_, shown) = hub.get(&format!("/api/tasks/{follow_up}"), None).await;
    let text = shown["task"].as_str().or(shown["task"]["task"].as_str()).unwrap_or_default().to_string();
    assert!(text.contains("Follow-up on Linear issue ENG-1"), "{shown}");
    take_task(&hub, &worker, &follow_up).await;
    finish(&hub, &worker, &follow_up, "one more thing done").await;
    // Its start moved the issue back to In Progress, its end to Done.
    let issue = stand_in.wait_issue("iss-1", 2, 4).await;
    assert_eq!(issue.moves, ["st-progress", "st-done", "st-progress", "st-done"]);
    assert!(issue.comments[1].contains(&format!("swarm-task:{follow_up}")), "{issue:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linear_and_jira_are_off_unless_configured_and_say_what_to_set() {
    let stand_in = TrackerStandIn::linear().await;
    let dir = tempfile::tempdir().unwrap();
    let event = issue_created("iss-1", "ENG-1", "Flaky");
    // No secret, or the secret with LINEAR_DISABLE: 503 naming what to set, and nothing.
    let mut disabled = flags(&stand_in);
    disabled.extend(["--linear-disable".to_string()]);
    for flags in [vec![], disabled] {
        let hub = start_hub(&sqlite_file(dir.path()), &flags);
        let (status, body) = deliver(&hub, "d-1", &event, SECRET).await;
        assert_eq!(status, 503, "{body}");
        assert!(body["error"].as_str().unwrap().contains("LINEAR_SIGNING_SECRET"), "{body}");
        let jira =
            reqwest::Client::new().post(hub.url("/api/trackers/jira/webhook/any-token")).json(&json!({}));
        let (status, body) = send(jira).await;
        assert_eq!(status, 503, "{body}");
        assert!(body["error"].as_str().unwrap().contains("JIRA_WEBHOOK_TOKEN"), "{body}");
        assert!(linear_tasks(&hub).await.is_empty());
        assert!(hub.terminate());
    }
    assert!(stand_in.calls("SwarmViewer").await.is_empty(), "an integration that is off asks Linear nothing");
}
