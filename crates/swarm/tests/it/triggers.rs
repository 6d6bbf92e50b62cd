//! Triggers over HTTP: cron slots in their time zone under a clock the test drives (a
//! file the hub reads, given to the hub as `HubOptions::clock`), exactly once with two hubs
//! on one PostgreSQL database, a missed slot fired once after a restart; webhooks
//! signed, refused and replayed; the github kind; manual firing and bad input.

use std::{path::Path, sync::Arc, time::Duration};

use serde_json::{Value, json};
use swarm_hub::HubOptions;

use crate::{
    hub::{Database, Hub, send, sqlite_file},
    support::{self, eventually},
};

const TICK: Duration = Duration::from_millis(50);

fn set_clock(path: &Path, at: &str) {
    // Write then rename: the hub never reads a half-written time.
    let partial = path.with_extension("tmp");
    std::fs::write(&partial, at).unwrap();
    std::fs::rename(&partial, path).unwrap();
}

fn clocked_hub(database: &Database, clock: &Path) -> Hub {
    let options = HubOptions {
        scheduler_tick: TICK,
        clock: Some(Arc::new(swarm_service::clock::FileClock::new(clock.to_path_buf()))),
        ..HubOptions::default()
    };
    Hub::start_with_options(database, None, &[], options)
}

async fn tasks_of(hub: &Hub, trigger: &str) -> Vec<Value> {
    let (status, body) = hub.get("/api/tasks?limit=100", None).await;
    assert_eq!(status, 200, "{body}");
    body["tasks"].as_array().unwrap().iter().filter(|task| task["triggerName"] == trigger).cloned().collect()
}

pub(crate) async fn create_trigger(hub: &Hub, body: Value) -> Value {
    let (status, created) = hub.post("/api/triggers", None, body).await;
    assert_eq!(status, 201, "{created}");
    created["trigger"].clone()
}

/// Waits until each hub has run two whole scheduler passes after the clock last moved
/// (the first may have begun before): whatever was due has fired by then.
async fn settle(hubs: &[&Hub]) {
    for hub in hubs {
        hub.scheduler_passes(2).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cron_trigger_fires_once_per_slot_in_its_time_zone_with_two_hubs_on_postgres() {
    let postgres = support::postgres_database().await;
    let database = postgres.database();
    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("clock");
    // Paris is UTC+1 until the night of 29 March 2026, UTC+2 after.
    set_clock(&clock, "2026-03-28T07:59:00Z");
    let first = clocked_hub(&database, &clock);
    let second = clocked_hub(&database, &clock);
    let trigger = create_trigger(
        &first,
        json!({"name": "morning-review", "type": "cron", "schedule": "0 9 * * *",
               "timezone": "Europe/Paris", "prompt": "Review as {{trigger_name}} ({{channel}})"}),
    )
    .await;
    assert_eq!(trigger["nextRunAt"], "2026-03-28T08:00:00.000Z", "09:00 in Paris in winter");
    settle(&[&first, &second]).await;
    assert!(tasks_of(&first, "morning-review").await.is_empty(), "not before its time");

    set_clock(&clock, "2026-03-28T08:00:00.200Z");
    let fired = eventually("the first slot to fire", || async {
        let tasks = tasks_of(&second, "morning-review").await;
        (!tasks.is_empty()).then_some(tasks)
    })
    .await;
    settle(&[&first, &second]).await;
    let tasks = tasks_of(&first, "morning-review").await;
    assert_eq!(tasks.len(), 1, "two hubs, one slot, one task: {tasks:#?}");
    assert_eq!(fired[0]["source"], "schedule");
    assert_eq!(fired[0]["task"], "Review as morning-review (schedule)");
    let (_, read) = second.get("/api/triggers/morning-review", None).await;
    assert_eq!(read["trigger"]["runCount"], 1);
    assert_eq!(read["trigger"]["lastRunAt"], "2026-03-28T08:00:00.200Z");
    assert_eq!(read["trigger"]["nextRunAt"], "2026-03-29T07:00:00.000Z", "09:00 in Paris in summer");

    set_clock(&clock, "2026-03-29T06:59:59Z");
    settle(&[&first, &second]).await;
    assert_eq!(tasks_of(&first, "morning-review").await.len(), 1);
    set_clock(&clock, "2026-03-29T07:00:00Z");
    eventually("the second slot to fire", || async {
        (tasks_of(&first, "morning-review").await.len() == 2).then_some(())
    })
    .await;
    settle(&[&first, &second]).await;
    assert_eq!(tasks_of(&second, "morning-review").await.len(), 2, "each slot exactly once");
}

#[tokio::test]
async fn a_slot_missed_while_the_hub_was_down_fires_once_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let clock = dir.path().join("clock");
    set_clock(&clock, "2026-01-10T10:30:00Z");
    let hub = clocked_hub(&database, &clock);
    let trigger =
        create_trigger(&hub, json!({"name": "hourly", "type": "cron", "schedule": "0 * * * *"})).await;
    assert_eq!(trigger["nextRunAt"], "2026-01-10T11:00:00.000Z");
    assert!(hub.terminate());

    // Down for five slots (11:00 to 15:00).
    set_clock(&clock, "2026-01-10T15:10:00Z");
    let hub = clocked_hub(&database, &clock);
    eventually("the missed slot to fire", || async {
        (!tasks_of(&hub, "hourly").await.is_empty()).then_some(())
    })
    .await;
    settle(&[&hub]).await;
    assert_eq!(tasks_of(&hub, "hourly").await.len(), 1, "once, not once per missed slot");
    let (_, read) = hub.get("/api/triggers/hourly", None).await;
    assert_eq!(read["trigger"]["nextRunAt"], "2026-01-10T16:00:00.000Z");
}

#[tokio::test]
async fn interval_and_once_triggers_follow_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("clock");
    set_clock(&clock, "2026-01-10T10:00:00Z");
    let hub = clocked_hub(&sqlite_file(dir.path()), &clock);
    create_trigger(&hub, json!({"name": "every-minute", "type": "interval", "intervalSeconds": 60})).await;
    create_trigger(&hub, json!({"name": "launch", "type": "once", "runAt": "2026-01-10T10:00:30Z"})).await;
    set_clock(&clock, "2026-01-10T10:00:31Z");
    eventually("the once trigger", || async { (tasks_of(&hub, "launch").await.len() == 1).then_some(()) })
        .await;
    set_clock(&clock, "2026-01-10T10:01:00Z");
    eventually("the interval", || async { (tasks_of(&hub, "every-minute").await.len() == 1).then_some(()) })
        .await;
    set_clock(&clock, "2026-01-10T10:05:00Z");
    settle(&[&hub]).await;
    assert_eq!(tasks_of(&hub, "launch").await.len(), 1, "once means once");
    let (_, read) = hub.get("/api/triggers/launch", None).await;
    assert_eq!(read["trigger"]["nextRunAt"], Value::Null);
}

pub(crate) async fn post_webhook(
    hub: &Hub,
    name: &str,
    body: &[u8],
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut request =
        reqwest::Client::new().post(hub.url(&format!("/api/webhooks/{name}"))).body(body.to_vec());
    for (header, value) in headers {
        request = request.header(*header, *value);
    }
    send(request).await
}

#[tokio::test]
async fn a_signed_webhook_creates_a_task_and_bad_signatures_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // With an API key: webhooks carry their own signature instead.
    let hub = Hub::start(&sqlite_file(dir.path()), Some("hub-key-0123456789"));
    let (status, refused) =
        hub.post("/api/triggers", None, json!({"name": "alerts", "type": "webhook"})).await;
    assert_eq!(status, 400, "a webhook without a secret must be asked for as public: {refused}");
    let (status, created) = hub
        .post(
            "/api/triggers",
            None,
            json!({"name": "alerts", "type": "webhook", "webhookSecret": "s3cret-0123456789abcdef",
                   "prompt": "Alert from {{sender}}:\n{{payload}}", "tags": ["ops"]}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["trigger"]["hasWebhookSecret"], true);
    assert!(created["trigger"].get("webhookSecret").is_none(), "the secret never leaves the hub");

    // A signed request names its sender inside the signed body; the unsigned X-Sender
    // header is anyone's, and is not read.
    let body = br#"{"alert":"disk full","host":"db-1","sender":"monitoring"}"#;
    let signature = swarm_service::sign_body("s3cret-0123456789abcdef", body);
    let headers = [
        ("content-type", "application/json"),
        ("x-hub-signature-256", signature.as_str()),
        ("x-sender", "someone-else"),
    ];
    let (status, accepted) = post_webhook(&hub, "alerts", body, &headers).await;
    assert_eq!(status, 202, "{accepted}");
    let task_id = accepted["taskId"].as_str().unwrap().to_string();
    let (_, task) = hub.get(&format!("/api/tasks/{task_id}"), None).await;
    assert_eq!(task["source"], "webhook");
    assert_eq!(task["tags"], json!(["ops"]));
    // The body is outside text: fenced (untrusted_input.rs), as it was sent.
    let text = task["task"].as_str().unwrap();
    assert!(text.starts_with("Alert from monitoring:\nOutside input (webhook, from monitoring)"), "{text}");
    assert!(
        text.contains(
            "<untrusted-input source=\"webhook\" from=\"monitoring\">\n{\n  \"alert\": \"disk full\",\n  \"host\": \"db-1\",\n  \"sender\": \"monitoring\"\n}\n</untrusted-input>"
        ),
        "{text}"
    );

    let wrong = swarm_service::sign_body("not-the-secret", body);
    for headers in
        [vec![("x-hub-signature-256", wrong.as_str())], vec![], vec![("x-webhook-secret", "guess")]]
    {
        let (status, error) = post_webhook(&hub, "alerts", body, &headers).await;
        assert_eq!((status, error["error"].as_str()), (401, Some("Unauthorized")), "{headers:?}");
    }
    let (status, _) =
        post_webhook(&hub, "no-such-hook", body, &[("x-webhook-secret", "s3cret-0123456789abcdef")]).await;
    assert_eq!(status, 401, "unknown names read like bad signatures");
    let (status, accepted) =
        post_webhook(&hub, "alerts", b"plain text alert", &[("x-webhook-secret", "s3cret-0123456789abcdef")])
            .await;
    assert_eq!(status, 202, "the secret header is the other way in: {accepted}");
    let (_, run) = hub.get("/api/triggers/alerts", None).await;
    assert_eq!(run["trigger"]["runCount"], 2);

    let (status, public) = hub
        .post("/api/triggers", None, json!({"name": "open", "type": "webhook", "webhookPublic": true}))
        .await;
    assert_eq!(status, 201, "{public}");
    let (status, _) =
        post_webhook(&hub, "open", b"name=a&b=c", &[("content-type", "application/x-www-form-urlencoded")])
            .await;
    assert_eq!(status, 202);
}

#[tokio::test]
async fn github_events_for_the_bot_become_tasks_and_replays_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    create_trigger(
        &hub,
        json!({"name": "github", "type": "github", "webhookSecret": "gh-secret-0123456789abcdef", "githubBot": "swarm-bot",
               "sessionMode": "persistent"}),
    )
    .await;
    let event = json!({
        "action": "review_requested", "requested_reviewer": {"login": "swarm-bot"},
        "pull_request": {"number": 42, "title": "Faster polls", "html_url": "https://github.com/o/r/pull/42"},
        "repository": {"full_name": "o/r"}, "sender": {"login": "ada"}
    });
    let body = serde_json::to_vec(&event).unwrap();
    let signature = swarm_service::sign_body("gh-secret-0123456789abcdef", &body);
    let headers = [
        ("x-hub-signature-256", signature.as_str()),
        ("x-github-event", "pull_request"),
        ("x-github-delivery", "delivery-1"),
        ("content-type", "application/json"),
    ];
    let (status, accepted) = post_webhook(&hub, "github", &body, &headers).await;
    assert_eq!(status, 202, "{accepted}");
    let (_, task) = hub.get(&format!("/api/tasks/{}", accepted["taskId"].as_str().unwrap()), None).await;
    assert_eq!(task["source"], "github");
    assert_eq!(task["githubRepo"], "o/r");
    assert_eq!(task["githubNumber"], 42);
    assert_eq!(task["githubAuthor"], "ada");
    assert_eq!(task["githubEventType"], "pull_request");
    assert_eq!(task["githubUrl"], "https://github.com/o/r/pull/42");
    assert_eq!(task["sessionKey"], "o/r#42", "one conversation per pull request");
    assert!(task["task"].as_str().unwrap().contains("Your review was requested on pull request #42"));

    let (status, replay) = post_webhook(&hub, "github", &body, &headers).await;
    assert_eq!(status, 202);
    assert_eq!(
        (replay["taskId"].clone(), replay["ignored"].as_str()),
        (Value::Null, Some("this delivery was already received"))
    );

    let other =
        serde_json::to_vec(&json!({"action": "opened", "issue": {"number": 1, "body": "no mention"}}))
            .unwrap();
    let other_signature = swarm_service::sign_body("gh-secret-0123456789abcdef", &other);
    let (status, ignored) = post_webhook(
        &hub,
        "github",
        &other,
        &[
            ("x-hub-signature-256", other_signature.as_str()),
            ("x-github-event", "issues"),
            ("x-github-delivery", "delivery-2"),
        ],
    )
    .await;
    assert_eq!(status, 202);
    assert!(ignored["ignored"].as_str().unwrap().contains("does not concern @swarm-bot"), "{ignored}");
    let (status, _) = post_webhook(
        &hub,
        "github",
        &body,
        &[("x-webhook-secret", "gh-secret-0123456789abcdef"), ("x-github-event", "pull_request")],
    )
    .await;
    assert_eq!(status, 401, "GitHub always signs: no header secret");
    let (_, run) = hub.get("/api/triggers/github", None).await;
    assert_eq!(run["trigger"]["runCount"], 1);
}

#[tokio::test]
async fn triggers_are_managed_over_rest_with_json_errors() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let refused = [
        json!({"name": "Bad Name", "type": "manual"}),
        json!({"name": "c", "type": "cron"}),
        json!({"name": "i", "type": "interval", "intervalSeconds": 0}),
        json!({"name": "i", "type": "interval", "intervalMs": 1000, "intervalSeconds": 1}),
        json!({"name": "c", "type": "cron", "schedule": "every day"}),
        json!({"name": "c", "type": "cron", "schedule": "0 9 * * *", "timezone": "Mars/Olympus"}),
        json!({"name": "i", "type": "interval", "intervalMs": 999}),
        json!({"name": "m", "type": "manual", "target": "nobody"}),
        json!({"name": "m", "type": "manual", "target": uuid::Uuid::new_v4().to_string()}),
        json!({"name": "m", "type": "manual", "surprise": true}),
        json!({"name": "m", "type": "sometimes"}),
    ];
    for body in refused {
        let (status, error) = hub.post("/api/triggers", None, body.clone()).await;
        assert_eq!(status, 400, "{body}: {error}");
        assert!(error["error"].is_string());
    }
    create_trigger(
        &hub,
        json!({"name": "by-hand", "type": "manual", "prompt": "Do {{payload}}", "target": "pool"}),
    )
    .await;
    let (status, _) = hub.post("/api/triggers", None, json!({"name": "by-hand", "type": "manual"})).await;
    assert_eq!(status, 409);
    let (status, fired) = hub
        .post("/api/triggers/by-hand/fire", None, json!({"payload": "the dishes", "sessionKey": "k"}))
        .await;
    assert_eq!(status, 201, "{fired}");
    assert_eq!(fired["task"]["task"], "Do the dishes");
    assert_eq!(fired["task"]["status"], "unassigned");
    let (status, updated) = send(
        hub.request(reqwest::Method::PATCH, "/api/triggers/by-hand", None).json(&json!({"enabled": false})),
    )
    .await;
    assert_eq!((status, updated["trigger"]["enabled"].clone()), (200, json!(false)));
    for change in
        [json!({"type": "cron"}), json!({"type": "AAA"}), json!({"name": "renamed"}), json!({"name": ""})]
    {
        let (status, refused) =
            send(hub.request(reqwest::Method::PATCH, "/api/triggers/by-hand", None).json(&change)).await;
        assert_eq!(status, 400, "{change}: {refused}");
    }
    let (_, kept) = hub.get("/api/triggers/by-hand", None).await;
    assert_eq!(
        (kept["trigger"]["type"].as_str(), kept["trigger"]["enabled"].as_bool()),
        (Some("manual"), Some(false))
    );
    let (status, listed) = hub.get("/api/triggers?type=manual", None).await;
    assert_eq!((status, listed["triggers"].as_array().unwrap().len()), (200, 1));
    assert_eq!(hub.get("/api/triggers?type=nope", None).await.0, 400);
    assert_eq!(hub.get("/api/triggers/missing", None).await.0, 404);
    let (status, _) = send(hub.request(reqwest::Method::DELETE, "/api/triggers/by-hand", None)).await;
    assert_eq!(status, 200);
    assert_eq!(hub.get("/api/triggers/by-hand", None).await.0, 404);
}

#[tokio::test]
async fn schedule_tools_manage_cron_and_interval_triggers_over_mcp() {
    use crate::mcp_client::{Revision, connect_http, new_agent_id, ok, refused};
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let (alice, bob) = (new_agent_id(), new_agent_id());
    let alice_client = connect_http(&hub, Some(&alice), Revision::Initialize).await;
    let bob_client = connect_http(&hub, Some(&bob), Revision::Initialize).await;
    ok(&alice_client, "join-swarm", json!({"name": "alice"})).await;
    ok(&bob_client, "join-swarm", json!({"name": "bob"})).await;

    let created = ok(
        &alice_client,
        "create-schedule",
        json!({"name": "standup", "cronExpression": "30 9 * * 1-5", "timezone": "America/New_York",
               "taskTemplate": "Post the standup summary", "targetAgentId": bob, "priority": 80}),
    )
    .await;
    assert_eq!(created["schedule"]["type"], "cron");
    assert_eq!(created["schedule"]["target"], bob.as_str());
    let id = created["schedule"]["id"].as_str().unwrap().to_string();
    ok(
        &alice_client,
        "create-schedule",
        json!({"name": "tick", "intervalMs": 60000, "taskTemplate": "tick"}),
    )
    .await;
    refused(&alice_client, "create-schedule", json!({"name": "x", "taskTemplate": "no timing"})).await;
    refused(&alice_client, "create-schedule", json!({"name": "y", "intervalMs": 999, "taskTemplate": "t"}))
        .await;
    // The reference's intervals need not be whole seconds: 1500 ms stays 1500 ms.
    let fast = ok(
        &alice_client,
        "create-schedule",
        json!({"name": "fast", "intervalMs": 1500, "taskTemplate": "fast"}),
    )
    .await;
    assert_eq!(fast["schedule"]["intervalMs"], 1500, "{fast}");
    let (_, stored) = hub.get("/api/triggers/fast", None).await;
    let stored = &stored["trigger"];
    assert_eq!(stored["intervalMs"], 1500, "{stored}");
    let gap = |trigger: &Value| {
        let at = |field: &str| {
            chrono::DateTime::parse_from_rfc3339(trigger[field].as_str().unwrap()).unwrap().timestamp_millis()
        };
        at("nextRunAt") - at("createdAt")
    };
    assert_eq!(gap(stored), 1500, "the first run is 1.5 s after creation: {stored}");
    let slower = ok(&alice_client, "update-schedule", json!({"name": "fast", "intervalMs": 2250})).await;
    assert_eq!(slower["schedule"]["intervalMs"], 2250, "update-schedule by name: {slower}");
    ok(&alice_client, "delete-schedule", json!({"name": "fast"})).await;
    let reason = refused(&alice_client, "delete-schedule", json!({})).await;
    assert!(reason.contains("scheduleId or name"), "{reason}");
    let listed = ok(&bob_client, "list-schedules", json!({})).await;
    assert_eq!(listed["schedules"].as_array().unwrap().len(), 2);

    let refusal =
        refused(&bob_client, "update-schedule", json!({"scheduleId": "standup", "enabled": false})).await;
    assert!(refusal.contains("creator"), "{refusal}");
    let updated = ok(&alice_client, "update-schedule", json!({"scheduleId": id, "enabled": false})).await;
    assert_eq!(updated["schedule"]["enabled"], false);
    assert_eq!(updated["schedule"]["nextRunAt"], Value::Null, "a paused schedule has no next run");
    let enabled = ok(&alice_client, "list-schedules", json!({"enabled": true})).await;
    assert_eq!(enabled["schedules"][0]["name"], "tick");

    let ran = ok(&bob_client, "run-schedule-now", json!({"name": "standup"})).await;
    assert_eq!(
        (ran["task"]["agentId"].as_str(), ran["task"]["source"].as_str()),
        (Some(bob.as_str()), Some("schedule"))
    );
    assert_eq!(ran["task"]["priority"], 80);
    ok(&alice_client, "delete-schedule", json!({"scheduleId": "standup"})).await;
    refused(&alice_client, "run-schedule-now", json!({"scheduleId": "standup"})).await;
}
