//! Jira Cloud (issue 47) through the real hub, against the Jira stand-in: an issue
//! assigned to the bot (or labelled for the swarm) becomes one task, a replayed delivery
//! nothing, a wrong token 401 and nothing; the task's start moves the issue to In
//! Progress, its end leaves exactly one ADF comment and one transition to Done, across
//! a restart of the hub while Jira was down.

use serde_json::{Value, json};

use crate::{
    hub::{Database, Hub, send, sqlite_file},
    support::clock::TestClock,
    tracker_stand_ins::{JIRA_API_TOKEN, JIRA_BOT_ACCOUNT, JIRA_EMAIL, TrackerStandIn},
};

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

fn flags(stand_in: &TrackerStandIn) -> Vec<String> {
    [
        "--jira-webhook-token",
        TOKEN,
        "--jira-base-url",
        &stand_in.url,
        "--jira-email",
        JIRA_EMAIL,
        "--jira-api-token",
        JIRA_API_TOKEN,
    ]
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

/// `jira:issue_updated`: the issue `key` assigned to the bot by someone.
fn assigned(key: &str, summary: &str) -> Value {
    json!({
        "timestamp": 1_700_000_000_000_i64, "webhookEvent": "jira:issue_updated",
        "issue_event_type_name": "issue_assigned",
        "user": {"accountId": "acc-ada", "displayName": "Ada"},
        "issue": {"id": format!("1{}", key.len()), "key": key, "fields": {
            "summary": summary, "labels": [],
            "description": {"type": "doc", "version": 1, "content": [{"type": "paragraph", "content": [
                {"type": "text", "text": "Steps: log in twice."}]}]},
            "assignee": {"accountId": JIRA_BOT_ACCOUNT},
        }},
        "changelog": {"items": [{"field": "assignee", "fieldId": "assignee", "from": null, "to": JIRA_BOT_ACCOUNT}]},
    })
}

async fn deliver(hub: &Hub, token: &str, delivery: &str, body: &Value) -> (u16, Value) {
    let request = reqwest::Client::new()
        .post(hub.url(&format!("/api/trackers/jira/webhook/{token}")))
        .header("X-Atlassian-Webhook-Identifier", delivery)
        .json(body);
    send(request).await
}

async fn jira_tasks(hub: &Hub) -> Vec<Value> {
    let (status, body) = hub.get("/api/tasks?limit=100", None).await;
    assert_eq!(status, 200, "{body}");
    body["tasks"].as_array().unwrap().iter().filter(|task| task["source"] == "jira").cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jira_an_assigned_issue_becomes_one_task_and_a_replay_or_a_wrong_token_nothing() {
    let stand_in = TrackerStandIn::jira().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = start_hub(&sqlite_file(dir.path()), &flags(&stand_in));
    let event = assigned("KAN-1", "Login fails twice");

    let (status, body) = deliver(&hub, "not-the-token", "w-0", &event).await;
    assert_eq!(status, 401, "{body}");
    assert!(body["error"].as_str().unwrap().contains("token"), "{body}");
    let (status, body) = deliver(&hub, &TOKEN[..TOKEN.len() - 1], "w-0", &event).await;
    assert_eq!(status, 401, "a prefix of the token is not the token: {body}");
    assert!(jira_tasks(&hub).await.is_empty());

    let (status, body) = deliver(&hub, TOKEN, "w-1", &event).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("accepted")), "{body}");
    let tasks = jira_tasks(&hub).await;
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    let text = tasks[0]["task"].as_str().unwrap();
    assert!(text.starts_with("Jira issue KAN-1 was assigned to the swarm"), "{text}");
    let (outside, inside) = text.split_once("<untrusted-input").unwrap();
    assert!(!outside.contains("Login"), "{outside}");
    assert!(inside.contains("Login fails twice") && inside.contains("Steps: log in twice."), "{inside}");
    assert!(inside.contains(&format!("{}/browse/KAN-1", stand_in.url)), "{inside}");

    // Jira's retry of the delivery, or a new assignment while the task is open: nothing
    // (a replay after the task's end is `duplicate`: the restart test).
    for delivery in ["w-1", "w-2"] {
        let (status, body) = deliver(&hub, TOKEN, delivery, &event).await;
        assert_eq!((status, body["status"].as_str()), (200, Some("ignored")), "{body}");
    }
    // Assigned to someone else, or by the bot itself: nothing.
    let mut other = assigned("KAN-2", "x");
    other["changelog"]["items"][0]["to"] = json!("acc-other");
    let (_, body) = deliver(&hub, TOKEN, "w-3", &other).await;
    assert_eq!(body["status"], "ignored", "{body}");
    let mut by_bot = assigned("KAN-3", "x");
    by_bot["user"]["accountId"] = json!(JIRA_BOT_ACCOUNT);
    let (_, body) = deliver(&hub, TOKEN, "w-4", &by_bot).await;
    assert_eq!(body["status"], "ignored", "{body}");
    // Labelled for the swarm: a task.
    let labelled = json!({"webhookEvent": "jira:issue_updated", "timestamp": 1,
        "issue": {"id": "20", "key": "KAN-4", "fields": {"summary": "Label me", "labels": ["swarm-ready"]}},
        "changelog": {"items": [{"field": "labels", "fromString": "", "toString": "swarm-ready"}]}});
    let (_, body) = deliver(&hub, TOKEN, "w-5", &labelled).await;
    assert_eq!(body["status"], "accepted", "{body}");
    assert_eq!(jira_tasks(&hub).await.len(), 2);
    assert_eq!(stand_in.refused().await, 0, "the hub sends its e-mail and API token");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jira_a_tasks_end_is_one_comment_and_one_transition_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    jira_end_reported_once(sqlite_file(dir.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jira_a_tasks_end_is_one_comment_and_one_transition_across_a_restart_on_postgres() {
    let database = crate::support::postgres_database().await;
    jira_end_reported_once(database.database()).await;
}

async fn jira_end_reported_once(database: Database) {
    let stand_in = TrackerStandIn::jira().await;
    stand_in.put_issue("KAN-1", "To Do").await;
    let flags = flags(&stand_in);
    let clock_dir = tempfile::tempdir().unwrap();
    let clock = TestClock::in_dir(clock_dir.path());
    let hub = start_hub_on(&database, &flags, &clock);
    let worker = hub.register_agent("jira-worker", false).await;

    let (status, body) = deliver(&hub, TOKEN, "w-1", &assigned("KAN-1", "Login fails")).await;
    assert_eq!(status, 200, "{body}");
    let task = body["taskId"].as_str().unwrap().to_string();
    let (status, body) = hub.get("/api/poll?wait=10", Some(&worker)).await;
    assert_eq!((status, body["trigger"]["task"]["id"].as_str()), (200, Some(task.as_str())), "{body}");
    let issue = stand_in.wait_issue("KAN-1", 0, 1).await;
    assert_eq!(issue.moves, ["In Progress"]);

    stand_in.set_failing(true).await;
    let finish = json!({"status": "completed", "output": "Fixed: https://github.com/acme/app/pull/9"});
    let (status, body) = hub.post(&format!("/api/tasks/{task}/finish"), Some(&worker), finish).await;
    assert_eq!(status, 200, "{body}");
    stand_in.wait_refusals(1).await;
    assert!(hub.terminate(), "the hub stops on SIGTERM");
    // The stopped hub may have been cut off between the failed call and its record, so
    // holding the report for its lease: the new hub finds it again once that ran out.
    clock.advance(swarm_service::trackers::REPORT_LEASE + std::time::Duration::from_secs(1));

    stand_in.set_failing(false).await;
    let hub = start_hub_on(&database, &flags, &clock);
    let issue = stand_in.wait_issue("KAN-1", 1, 2).await;
    assert_eq!(issue.moves, ["In Progress", "Done"]);
    assert!(issue.comments[0].contains(&format!("swarm task {task} completed")), "{:?}", issue.comments);
    assert!(issue.comments[0].contains("https://github.com/acme/app/pull/9"), "{:?}", issue.comments);
    let posted = stand_in.calls("POST comment").await;
    assert_eq!(posted[0]["body"]["body"]["type"], "doc", "an ADF body: {}", posted[0]);
    // Its delivery replayed now, its task finished: a duplicate, no task.
    let (_, body) = deliver(&hub, TOKEN, "w-1", &assigned("KAN-1", "Login fails")).await;
    assert_eq!(body["status"], "duplicate", "{body}");
    assert_eq!(jira_tasks(&hub).await.len(), 1);

    // A second issue's task ends after it: reported, while the first gets nothing more.
    stand_in.put_issue("KAN-2", "To Do").await;
    let (_, body) = deliver(&hub, TOKEN, "w-2", &assigned("KAN-2", "Second")).await;
    let second = body["taskId"].as_str().expect("a task").to_string();
    let (status, _) = hub.get("/api/poll?wait=10", Some(&worker)).await;
    assert_eq!(status, 200);
    let finish = json!({"status": "completed", "output": "done"});
    let (status, body) = hub.post(&format!("/api/tasks/{second}/finish"), Some(&worker), finish).await;
    assert_eq!(status, 200, "{body}");
    stand_in.wait_issue("KAN-2", 1, 2).await;
    let issue = stand_in.issue("KAN-1").await;
    assert_eq!((issue.comments.len(), issue.moves.len()), (1, 2), "{issue:?}");
    assert_eq!(stand_in.calls("POST comment").await.len(), 2, "one comment per task");
}
