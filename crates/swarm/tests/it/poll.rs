//! `GET /api/poll` over real HTTP against the real binary: long-polls, wake-ups from
//! other processes, offers under review, and what happens when a runner dies.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{
    hub::{Hub, sqlite_file},
    support::{clock::TestClock, eventually, postgres_database},
};

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Register an agent and return its id.
async fn create(hub: &Hub, body: Value) -> String {
    let (status, task) = hub.post("/api/tasks", None, body).await;
    assert_eq!(status, 201, "{task}");
    task["id"].as_str().unwrap().to_string()
}

async fn poll(hub: &Hub, agent: &str, wait: f64) -> Value {
    let (status, body) = hub.get(&format!("/api/poll?wait={wait}"), Some(agent)).await;
    assert_eq!(status, 200, "{body}");
    body["trigger"].clone()
}

async fn task(hub: &Hub, id: &str) -> Value {
    let (status, body) = hub.get(&format!("/api/tasks/{id}"), None).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn agent_status(hub: &Hub, id: &str) -> String {
    let (_, body) = hub.get(&format!("/api/agents/{id}"), None).await;
    body["status"].as_str().unwrap().to_string()
}

/// The task once `check` holds.
async fn wait_for_task(hub: &Hub, id: &str, check: impl Fn(&Value) -> bool) -> Value {
    eventually(&format!("task {id} to reach the expected state"), || async {
        let seen = task(hub, id).await;
        check(&seen).then_some(seen)
    })
    .await
}

#[tokio::test]
async fn a_parked_poll_wakes_when_its_trigger_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let worker = hub.register_agent_with("worker", json!({})).await;

    let started = Instant::now();
    let parked = {
        let hub_url = hub.base_url.clone();
        let worker = worker.clone();
        tokio::spawn(async move {
            let response = reqwest::Client::new()
                .get(format!("{hub_url}/api/poll?wait=30"))
                .header("X-Agent-ID", worker)
                .send()
                .await
                .unwrap();
            (response.status().as_u16(), response.json::<Value>().await.unwrap(), started.elapsed())
        })
    };
    hub.parked_polls(1).await;
    assert!(!parked.is_finished(), "with nothing to do, the poll waits");
    let id = create(&hub, json!({"task": "wake up", "agentId": worker})).await;

    let (status, body, elapsed) = parked.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(body["trigger"]["type"], "task_assigned", "{body}");
    assert_eq!(body["trigger"]["taskId"], id.as_str());
    assert_eq!(body["trigger"]["task"]["status"], "in_progress");
    assert!(elapsed < Duration::from_secs(30), "woken by the task, not by the end of the wait ({elapsed:?})");
    assert_eq!(agent_status(&hub, &worker).await, "busy", "an in_progress task makes the agent busy");

    // It was claimed: no second poll gets it.
    assert_eq!(poll(&hub, &worker, 0.0).await, Value::Null);
    let (status, _) =
        hub.post(&format!("/api/tasks/{id}/finish"), Some(&worker), json!({"status": "completed"})).await;
    assert_eq!(status, 200);
    assert_eq!(agent_status(&hub, &worker).await, "idle");
}

#[tokio::test]
async fn a_poll_with_nothing_to_do_answers_null_after_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let worker = hub.register_agent_with("worker", json!({})).await;

    assert_eq!(poll(&hub, &worker, 0.0).await, Value::Null, "without wait it answers at once");
    let started = Instant::now();
    assert_eq!(poll(&hub, &worker, 1.0).await, Value::Null);
    assert!(started.elapsed() >= Duration::from_millis(950), "it held the request for the wait");

    let (status, body) = hub.get("/api/poll", None).await;
    assert_eq!(status, 400, "no X-Agent-ID: {body}");
    let (status, body) = hub.get("/api/poll", Some(&new_id())).await;
    assert_eq!(status, 404, "unknown agent: {body}");
    for bad in ["wait=61", "wait=-1", "wait=abc", "wait=inf", "pool=everything"] {
        let (status, body) = hub.get(&format!("/api/poll?{bad}"), Some(&worker)).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body["error"].as_str().is_some_and(|message| !message.is_empty()), "{bad}: {body}");
    }
}

#[tokio::test]
async fn offers_and_pool_tasks_come_through_the_poll() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let worker = hub.register_agent_with("worker", json!({"maxTasks": 3})).await;
    let lead = hub.register_agent_with("lead", json!({"isLead": true})).await;

    let to_accept = create(&hub, json!({"task": "review me", "offeredTo": worker})).await;
    let to_reject = create(&hub, json!({"task": "not for me", "offeredTo": worker})).await;
    for expected in [&to_accept, &to_reject] {
        let trigger = poll(&hub, &worker, 0.0).await;
        assert_eq!(trigger["type"], "task_offered", "{trigger}");
        assert_eq!(trigger["taskId"], expected.as_str());
        assert_eq!(trigger["task"]["status"], "reviewing");
        assert!(trigger["task"]["leaseExpiresAt"].is_string(), "a claim carries a lease: {trigger}");
    }

    // An offer under review can be accepted or rejected, by the agent it was offered to.
    let (status, body) = hub.post(&format!("/api/tasks/{to_accept}/accept"), Some(&lead), json!({})).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = hub.post(&format!("/api/tasks/{to_accept}/accept"), Some(&worker), json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["task"]["status"], "pending");
    assert_eq!(body["task"]["leaseExpiresAt"], Value::Null);
    let (status, body) =
        hub.post(&format!("/api/tasks/{to_reject}/reject"), Some(&worker), json!({"reason": "busy"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["task"]["status"], "unassigned");

    // The accepted task comes back as assigned work; the rejected one as pool work.
    let trigger = poll(&hub, &worker, 0.0).await;
    assert_eq!(
        (trigger["type"].as_str(), trigger["taskId"].as_str()),
        (Some("task_assigned"), Some(to_accept.as_str()))
    );
    let trigger = poll(&hub, &worker, 0.0).await;
    assert_eq!(
        (trigger["type"].as_str(), trigger["taskId"].as_str()),
        (Some("task_assigned"), Some(to_reject.as_str()))
    );
    assert_eq!(trigger["task"]["agentId"], worker.as_str());

    // The reference's informational pool trigger, for clients that ask for it.
    let pooled = create(&hub, json!({"task": "for anyone"})).await;
    let (_, body) = hub.get("/api/poll?pool=notify", Some(&worker)).await;
    assert_eq!(body["trigger"], json!({"type": "pool_tasks_available", "count": 1}));
    assert_eq!(task(&hub, &pooled).await["status"], "unassigned", "notify claims nothing");

    // The lead hears about finished worker tasks once.
    for id in [&to_accept, &to_reject] {
        let (status, _) = hub
            .post(
                &format!("/api/tasks/{id}/finish"),
                Some(&worker),
                json!({"status": "completed", "output": "ok"}),
            )
            .await;
        assert_eq!(status, 200);
    }
    let trigger = poll(&hub, &lead, 0.0).await;
    assert_eq!(trigger["type"], "tasks_finished", "{trigger}");
    assert_eq!(trigger["count"], 2);
    assert_eq!(poll(&hub, &lead, 0.0).await, Value::Null, "a lead never gets pool work");
}

#[tokio::test]
async fn a_change_made_by_another_process_on_the_same_sqlite_file_wakes_the_poll() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let first = Hub::start(&database, None);
    let second = Hub::start(&database, None);
    wakes_across_processes(&first, &second).await;
}

#[tokio::test]
async fn a_change_made_by_another_replica_on_postgres_wakes_the_poll() {
    let postgres = postgres_database().await;
    let database = postgres.database();
    let first = Hub::start(&database, None);
    let second = Hub::start(&database, None);
    wakes_across_processes(&first, &second).await;
}

/// Null polls on one replica are answered from memory while nothing changes, and that
/// memory hides no work: not a task created through the same replica (the very next
/// poll has it), nor one created through the other (it shows as soon as its `NOTIFY`
/// arrives), and the task is still handed out once.
#[tokio::test]
async fn null_polls_answered_from_memory_hide_no_work_on_either_replica() {
    let postgres = postgres_database().await;
    let database = postgres.database();
    let first = Hub::start(&database, None);
    let second = Hub::start(&database, None);
    let worker = first.register_agent_with("worker", json!({"maxTasks": 5})).await;

    let from_memory = || first.poll_views_from_memory();
    eventually("null polls on the first replica answered from memory", || async {
        assert_eq!(poll(&first, &worker, 0.0).await, Value::Null);
        (from_memory() >= 3).then_some(())
    })
    .await;

    // Through the same replica: the next poll reads the database.
    let here = create(&first, json!({"task": "created here", "agentId": worker})).await;
    assert_eq!(poll(&first, &worker, 0.0).await["taskId"], here.as_str());
    eventually("the first replica to answer from memory again", || async {
        let before = from_memory();
        assert_eq!(poll(&first, &worker, 0.0).await, Value::Null);
        (from_memory() > before).then_some(())
    })
    .await;

    // Through the other replica: its notification makes the first one read again.
    let there = create(&second, json!({"task": "created there", "agentId": worker})).await;
    let trigger = eventually("the first replica's null poll to find the other's task", || async {
        let trigger = poll(&first, &worker, 0.0).await;
        (trigger != Value::Null).then_some(trigger)
    })
    .await;
    assert_eq!(trigger["taskId"], there.as_str(), "{trigger}");
    assert_eq!(poll(&second, &worker, 0.0).await, Value::Null, "handed out once, through either replica");
    assert_eq!(poll(&first, &worker, 0.0).await, Value::Null);
}

/// A poll parked on `first`, a task created through `second`.
async fn wakes_across_processes(first: &Hub, second: &Hub) {
    let worker = first.register_agent_with("worker", json!({})).await;
    let started = Instant::now();
    let parked = {
        let url = first.url("/api/poll?wait=20");
        let worker = worker.clone();
        tokio::spawn(async move {
            let response = reqwest::Client::new().get(url).header("X-Agent-ID", worker).send().await.unwrap();
            (response.json::<Value>().await.unwrap(), started.elapsed())
        })
    };
    first.parked_polls(1).await;
    let id = create(second, json!({"task": "from the other process", "agentId": worker})).await;
    let (body, elapsed) = parked.await.unwrap();
    assert_eq!(body["trigger"]["taskId"], id.as_str(), "{body}");
    assert!(elapsed < Duration::from_secs(20), "woken by the other process, not by the end of the wait");
}

#[tokio::test]
async fn a_dead_runners_claims_come_back_and_a_task_that_keeps_failing_fails() {
    let dir = tempfile::tempdir().unwrap();
    // The hub reads a clock the test moves: a lease runs out when the test says so.
    let clock = TestClock::stopped(dir.path());
    let flags = ["--lease-seconds", "30", "--rescue-interval-seconds", "1", "--max-lease-losses", "2"];
    let lease_passes = || clock.advance(Duration::from_secs(31));
    let hub = Hub::start_with_options(&sqlite_file(dir.path()), None, &flags, clock.options());
    let dying = hub.register_agent_with("dying", json!({"maxTasks": 2})).await;

    let pooled = create(&hub, json!({"task": "pool work"})).await;
    let offered = create(&hub, json!({"task": "an offer", "offeredTo": dying})).await;
    assert_eq!(poll(&hub, &dying, 0.0).await["taskId"], offered.as_str());
    assert_eq!(poll(&hub, &dying, 0.0).await["taskId"], pooled.as_str());
    assert_eq!(agent_status(&hub, &dying).await, "busy");

    // The runner dies: no more polls, no more pings, and a lease passes. A live worker
    // (heard of since) is waiting for work.
    lease_passes();
    let live = hub.register_agent_with("live", json!({})).await;
    let started = Instant::now();
    let trigger = poll(&hub, &live, 30.0).await;
    assert_eq!(trigger["type"], "task_assigned", "{trigger}");
    assert_eq!(
        trigger["taskId"],
        pooled.as_str(),
        "the pool task came back to the pool and to a live worker"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "delivered by the rescuer, not by the end of the wait"
    );
    let (status, _) =
        hub.post(&format!("/api/tasks/{pooled}/finish"), Some(&live), json!({"status": "completed"})).await;
    assert_eq!(status, 200, "the live worker finishes it");

    let back = wait_for_task(&hub, &offered, |t| t["status"] == "offered").await;
    assert_eq!(back["status"], "offered", "an expired review returns to the offer: {back}");
    assert_eq!(back["offeredTo"], dying.as_str());
    let history = back["logs"].as_array().unwrap();
    assert!(history.iter().any(|event| event["eventType"] == "task_lease_expired"), "the rescue is logged");
    assert_eq!(agent_status(&hub, &dying).await, "offline", "a silent agent is marked offline");

    // The same runner comes back (a restart with the same id): the offer is there again.
    let (status, _) = hub.post("/api/agents", Some(&dying), json!({"name": "dying"})).await;
    assert_eq!(status, 200);
    assert_eq!(agent_status(&hub, &dying).await, "idle");
    assert_eq!(poll(&hub, &dying, 0.0).await["taskId"], offered.as_str());
    let (status, _) = hub.post(&format!("/api/tasks/{offered}/reject"), Some(&dying), json!({})).await;
    assert_eq!(status, 200);
    let (status, _) = hub.post(&format!("/api/tasks/{offered}/cancel"), None, json!({})).await;
    assert_eq!(status, 200);

    // A task whose holders keep dying is failed after two lost leases, with a reason.
    let cursed = create(&hub, json!({"task": "cursed"})).await;
    let first_victim = hub.register_agent_with("first-victim", json!({})).await;
    assert_eq!(poll(&hub, &first_victim, 0.0).await["taskId"], cursed.as_str());
    lease_passes();
    let second_victim = hub.register_agent_with("second-victim", json!({})).await;
    assert_eq!(
        poll(&hub, &second_victim, 30.0).await["taskId"],
        cursed.as_str(),
        "back after the first loss"
    );
    lease_passes();
    let failed = wait_for_task(&hub, &cursed, |t| t["status"] == "failed").await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let reason = failed["failureReason"].as_str().unwrap_or_default();
    assert!(reason.contains("lease lost 2 times"), "{reason}");
}
