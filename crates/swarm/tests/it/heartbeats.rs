//! Heartbeats that scale (issue 45): a hub keeps the heartbeats of agents it knows to be
//! present and writes them in batches. A live agent's task is not rescued while its
//! heartbeats wait for a batch, a dead agent's is rescued as before, an offline agent
//! coming back is written at once, and with two replicas on one PostgreSQL the rescuer of
//! one does not rescue the task of an agent that heartbeats through the other.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    hub::{Hub, sqlite_file},
    metrics::scrape,
    support::{clock::TestClock, eventually, postgres_database},
};

/// A lease as a deployment might set it; the rescuer looks every second of real time
/// and finds what the moved clock made due.
const POLICY: [&str; 4] = ["--lease-seconds", "30", "--rescue-interval-seconds", "1"];
const LEASE: Duration = Duration::from_secs(30);

async fn task(hub: &Hub, id: &str) -> Value {
    let (status, body) = hub.get(&format!("/api/tasks/{id}"), None).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn agent_status(hub: &Hub, id: &str) -> String {
    let (status, body) = hub.get(&format!("/api/agents/{id}"), None).await;
    assert_eq!(status, 200, "{body}");
    body["status"].as_str().unwrap().to_string()
}

async fn ping(hub: &Hub, agent: &str) {
    let (status, body) = hub.post("/ping", Some(agent), json!({})).await;
    assert_eq!(status, 204, "ping: {body}");
}

/// An agent that took `task` through a runner's poll.
async fn claim(hub: &Hub, agent: &str, id: &str) {
    let (status, body) = hub.poll_as_runner(agent, 0).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["trigger"]["taskId"], id, "{body}");
    assert_eq!(task(hub, id).await["status"], "in_progress");
}

fn lease_expired(task: &Value) -> bool {
    task["logs"].as_array().unwrap().iter().any(|event| event["eventType"] == "task_lease_expired")
}

#[tokio::test]
async fn a_live_agents_task_stays_while_its_heartbeats_are_batched_and_a_dead_ones_is_rescued() {
    let dir = tempfile::tempdir().unwrap();
    let clock = TestClock::stopped(dir.path());
    let hub = Hub::start_with_options(&sqlite_file(dir.path()), None, &POLICY, clock.options());
    let worker = hub.register_agent("worker", false).await;
    let id = hub.create_task(json!({ "task": "long work", "agentId": worker })).await;
    claim(&hub, &worker, &id).await;

    // The first heartbeat is written at once; those that follow within half a lease wait
    // for a batch. Two and a half leases pass, a third of a lease at a time, as a runner
    // pings: the rescuer passes every second and never finds the lease run out.
    ping(&hub, &worker).await;
    let first = hub.activity().heartbeats;
    assert_eq!((first.heard, first.written_at_once, first.batched), (1, 1, 0), "{first:?}");
    for beat in 1..=7u64 {
        clock.advance(LEASE / 3);
        ping(&hub, &worker).await;
        eventually("the heartbeat's batch", || async {
            (hub.activity().heartbeats.batched >= beat).then_some(())
        })
        .await;
        hub.rescue_passes(1).await;
        assert_eq!(task(&hub, &id).await["status"], "in_progress", "after {beat} thirds of a lease");
    }
    let beats = hub.activity().heartbeats;
    assert_eq!((beats.heard, beats.written_at_once, beats.batched), (8, 1, 7), "{beats:?}");
    let scraped = scrape(&hub).await;
    assert_eq!(scraped.get("swarm_heartbeats_total", &[]), 8.0);
    assert_eq!(scraped.get("swarm_heartbeat_writes_total", &[]), (1 + beats.batches) as f64);
    assert_eq!(scraped.get("swarm_heartbeats_batched_total", &[]), 7.0);
    let kept = task(&hub, &id).await;
    assert!(!lease_expired(&kept), "{kept}");
    assert_eq!(agent_status(&hub, &worker).await, "busy");

    // The runner dies: its last heartbeat is in the database, a lease passes, the task
    // comes back as it always did and the agent is marked offline.
    clock.advance(LEASE + Duration::from_secs(1));
    let back = eventually("the dead agent's task to be rescued", || async {
        let back = task(&hub, &id).await;
        (back["status"] != "in_progress").then_some(back)
    })
    .await;
    assert_eq!(back["status"], "pending", "an assigned task waits for its agent again: {back}");
    assert!(lease_expired(&back), "the rescue is logged: {back}");
    eventually("the silent agent to be offline", || async {
        (agent_status(&hub, &worker).await == "offline").then_some(())
    })
    .await;

    // Back from offline: written at once, the agent is present when the ping returns.
    ping(&hub, &worker).await;
    assert_eq!(agent_status(&hub, &worker).await, "idle");
    let after = hub.activity().heartbeats;
    assert_eq!(after.written_at_once, 2, "{after:?}");
}

/// Two `swarm serve` processes on one PostgreSQL, in real time with a short lease: the
/// agent took its task through the first and heartbeats through the second only, whose
/// batches are what the first replica's rescuer reads.
#[tokio::test]
async fn another_replicas_rescuer_leaves_the_task_of_an_agent_heartbeating_in_batches_on_postgres() {
    let database = postgres_database().await;
    let policy = ["--lease-seconds", "6", "--rescue-interval-seconds", "1"];
    let first = Hub::spawn_with(&database.database(), None, &policy);
    let second = Hub::spawn_with(&database.database(), None, &policy);
    let worker = first.register_agent("worker", false).await;
    let id = first.create_task(json!({ "task": "long work", "agentId": worker })).await;
    claim(&first, &worker, &id).await;

    // Three leases of pings, twice a second, all to the second replica.
    let until = tokio::time::Instant::now() + Duration::from_secs(18);
    while tokio::time::Instant::now() < until {
        ping(&second, &worker).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let kept = task(&first, &id).await;
    assert_eq!(kept["status"], "in_progress", "{kept}");
    assert!(!lease_expired(&kept), "{kept}");
    let scraped = scrape(&second).await;
    let (heard, writes, batched) = (
        scraped.get("swarm_heartbeats_total", &[]),
        scraped.get("swarm_heartbeat_writes_total", &[]),
        scraped.get("swarm_heartbeats_batched_total", &[]),
    );
    assert!(batched > 0.0 && writes < heard, "heard {heard}, writes {writes}, batched {batched}");

    // The agent stops: one of the replicas rescues its task, once.
    let back = eventually("the task of the agent that stopped to be rescued", || async {
        let back = task(&first, &id).await;
        (back["status"] == "pending").then_some(back)
    })
    .await;
    let expiries = back["logs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["eventType"] == "task_lease_expired")
        .count();
    assert_eq!(expiries, 1, "{back}");
}
