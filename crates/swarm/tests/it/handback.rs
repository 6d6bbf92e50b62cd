//! Work of dead agents handed on (issue 25), as stories over real HTTP with raw agents:
//! an agent takes work and disappears, and after `--reassign-after-seconds` a live
//! worker gets it and the lead is told; an agent back in time keeps its work; the
//! operator releases or reassigns what a gone agent holds. The hub reads a clock the
//! tests move (`support::clock`): a lease runs out when the test says so, not after a
//! wait.

use std::{path::Path, time::Duration};

use serde_json::{Value, json};

use crate::{
    hub::{Database, Hub, sqlite_file},
    support::{clock::TestClock, eventually, postgres_database},
};

/// A lease and a hand-back delay as a deployment might set them; the rescuer looks every
/// second of real time, and finds what the moved clock made due.
const POLICY: [&str; 6] =
    ["--lease-seconds", "30", "--rescue-interval-seconds", "1", "--reassign-after-seconds", "60"];
const LEASE: Duration = Duration::from_secs(30);
const REASSIGN_AFTER: Duration = Duration::from_secs(60);

/// A hub with [`POLICY`] on a clock stopped at the time now, kept in `dir`.
fn clocked_hub(database: &Database, dir: &Path) -> (Hub, TestClock) {
    let clock = TestClock::stopped(dir);
    (Hub::start_with_options(database, None, &POLICY, clock.options()), clock)
}

async fn act(hub: &Hub, task: &str, action: &str, agent: Option<&str>, body: Value) -> (u16, Value) {
    hub.post(&format!("/api/tasks/{task}/{action}"), agent, body).await
}

async fn task(hub: &Hub, id: &str) -> Value {
    let (status, body) = hub.get(&format!("/api/tasks/{id}"), None).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn poll(hub: &Hub, agent: &str, wait: u32) -> Value {
    let (status, body) = hub.poll_as_runner(agent, wait).await;
    assert_eq!(status, 200, "{body}");
    body["trigger"].clone()
}

/// Poll as `agent` until a trigger of `kind` comes.
async fn trigger_of(hub: &Hub, agent: &str, kind: &str) -> Value {
    eventually(&format!("a {kind} trigger for {agent}"), || async {
        let trigger = poll(hub, agent, 1).await;
        (trigger["type"] == kind).then_some(trigger)
    })
    .await
}

async fn wait_offline(hub: &Hub, agent: &str) {
    eventually(&format!("agent {agent} to go offline"), || async {
        let (_, body) = hub.get(&format!("/api/agents/{agent}"), None).await;
        (body["status"] == "offline").then_some(())
    })
    .await
}

async fn dead_agents_work_goes_to_a_live_worker(database: &Database, dir: &Path) {
    let (hub, clock) = clocked_hub(database, dir);
    let lead = hub.register_agent("lead", true).await;
    let dead = hub.register_agent("dead", false).await;
    let live = hub.register_agent("live", false).await;
    // `dead` takes a pool task (pending: no lease protects it) and is asked for
    // another by name; then it disappears.
    let pooled = hub.create_task(json!({ "task": "taken from the pool" })).await;
    let (status, body) = act(&hub, &pooled, "claim", Some(&dead), json!({})).await;
    assert_eq!(status, 200, "{body}");
    let named = hub.create_task(json!({ "task": "asked of dead by name", "agentId": dead })).await;

    // A lease and the hand-back delay pass: `dead` has been gone long enough, and the
    // live worker, polling again, gets the pool task.
    clock.advance(LEASE + REASSIGN_AFTER + Duration::from_secs(1));
    let trigger = trigger_of(&hub, &live, "task_assigned").await;
    assert_eq!(trigger["task"]["id"], pooled.as_str(), "{trigger}");
    let (status, body) =
        act(&hub, &pooled, "finish", Some(&live), json!({ "status": "completed", "output": "done" })).await;
    assert_eq!(status, 200, "{body}");
    let history = task(&hub, &pooled).await;
    let handed: Vec<&Value> = history["logs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["eventType"] == "task_handed_back")
        .collect();
    assert_eq!(handed.len(), 1, "{history}");
    assert_eq!(handed[0]["metadata"]["fromAgentId"], dead.as_str());

    // The task asked of `dead` waits in the backlog for the lead, who is told of both.
    assert_eq!(task(&hub, &named).await["status"], "backlog");
    let told = trigger_of(&hub, &lead, "tasks_handed_back").await;
    assert_eq!(told["count"], 2, "{told}");
    let mut moves: Vec<(String, String)> = told["handoffs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["task"]["id"].as_str().unwrap().to_string(), h["toStatus"].as_str().unwrap().to_string()))
        .collect();
    moves.sort();
    let mut expected =
        vec![(pooled.clone(), "unassigned".to_string()), (named.clone(), "backlog".to_string())];
    expected.sort();
    assert_eq!(moves, expected, "{told}");
    assert!(told["handoffs"][0]["reason"].as_str().unwrap().contains("offline for more than 60s"), "{told}");
}

#[tokio::test]
async fn a_dead_agents_work_goes_to_a_live_worker_and_the_lead_is_told() {
    let dir = tempfile::tempdir().unwrap();
    dead_agents_work_goes_to_a_live_worker(&sqlite_file(dir.path()), dir.path()).await;
}

#[tokio::test]
async fn a_dead_agents_work_goes_to_a_live_worker_on_postgres() {
    let database = postgres_database().await;
    let dir = tempfile::tempdir().unwrap();
    dead_agents_work_goes_to_a_live_worker(&database.database(), dir.path()).await;
}

#[tokio::test]
async fn an_agent_back_in_time_keeps_its_work() {
    let dir = tempfile::tempdir().unwrap();
    let (hub, clock) = clocked_hub(&sqlite_file(dir.path()), dir.path());
    // Two agents take work and fall silent at the same moment; `back` returns, `gone`
    // does not: whatever moves `gone`'s task would move `back`'s too, but for its return.
    let back = hub.register_agent("back", false).await;
    let kept = hub.create_task(json!({ "task": "kept", "agentId": back })).await;
    let gone = hub.register_agent("gone", false).await;
    let lost = hub.create_task(json!({ "task": "lost", "agentId": gone })).await;
    clock.advance(LEASE + Duration::from_secs(1));
    wait_offline(&hub, &back).await;

    // `back` returns and heartbeats, as its runner would; then the hand-back delay
    // passes for `gone`, not for `back`.
    let (status, _) = hub.post("/ping", Some(&back), json!({})).await;
    assert_eq!(status, 204, "ping");
    clock.advance(REASSIGN_AFTER);
    eventually("the gone agent's task to be handed back", || async {
        (task(&hub, &lost).await["status"] == "backlog").then_some(())
    })
    .await;
    let kept = task(&hub, &kept).await;
    assert_eq!(
        (kept["status"].as_str(), kept["agentId"].as_str()),
        (Some("pending"), Some(back.as_str())),
        "{kept}"
    );
}

#[tokio::test]
async fn the_operator_releases_a_gone_agents_paused_task() {
    let dir = tempfile::tempdir().unwrap();
    // Less than a lease passes: nothing runs out and nothing is handed back on its own,
    // only the operator moves anything here.
    let (hub, clock) = clocked_hub(&sqlite_file(dir.path()), dir.path());
    let runner = hub.register_agent("could-not-start", false).await;
    let worker = hub.register_agent("worker", false).await;
    let id = hub
        .create_task(json!({ "task": "paused by a runner whose CLI would not start", "agentId": runner }))
        .await;
    assert_eq!(act(&hub, &id, "start", Some(&runner), json!({})).await.0, 200);
    assert_eq!(act(&hub, &id, "pause", Some(&runner), json!({})).await.0, 200);

    // While its agent is online the operator may not take it.
    let before = task(&hub, &id).await;
    let (status, body) = act(&hub, &id, "release", None, json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert!(body["error"].as_str().unwrap().contains("online"), "{body}");
    assert_eq!(task(&hub, &id).await["logs"], before["logs"], "a refusal changes nothing");

    let (status, _) = hub.post("/close", Some(&runner), json!({})).await;
    assert!((200..300).contains(&status), "close: {status}");
    // The operator acts a moment after the runner was last heard of.
    clock.advance(Duration::from_secs(1));
    let (status, body) = act(&hub, &id, "release", None, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["task"]["status"].as_str(), &body["task"]["agentId"]),
        (Some("unassigned"), &Value::Null)
    );

    let trigger = trigger_of(&hub, &worker, "task_assigned").await;
    assert_eq!(trigger["task"]["id"], id.as_str());
    let (status, body) = act(&hub, &id, "finish", Some(&worker), json!({ "status": "completed" })).await;
    assert_eq!(status, 200, "{body}");
    // Released twice: the task moved on, the guard refuses.
    assert_eq!(act(&hub, &id, "release", None, json!({})).await.0, 409);
}

#[tokio::test]
async fn the_operator_reassigns_a_gone_agents_task() {
    let dir = tempfile::tempdir().unwrap();
    // A lease passes, not the hand-back delay: only the operator hands the task on.
    let (hub, clock) = clocked_hub(&sqlite_file(dir.path()), dir.path());
    let gone = hub.register_agent("gone", false).await;
    let worker = hub.register_agent("worker", false).await;
    let id = hub.create_task(json!({ "task": "started, then its agent died", "agentId": gone })).await;
    assert_eq!(act(&hub, &id, "start", Some(&gone), json!({})).await.0, 200);
    clock.advance(LEASE + Duration::from_secs(1));
    wait_offline(&hub, &gone).await;

    // Bad input: a JSON 4xx, and nothing changes.
    let before = task(&hub, &id).await;
    for body in [json!({}), json!({ "agentId": "not-an-id" }), json!({ "agentId": uuid::Uuid::new_v4() })] {
        let (status, answer) = act(&hub, &id, "reassign", None, body.clone()).await;
        assert!((400..500).contains(&status), "{body} -> {status} {answer}");
        assert!(answer["error"].is_string(), "{answer}");
    }
    let (status, answer) = act(&hub, &id, "reassign", Some(&worker), json!({ "agentId": worker })).await;
    assert_eq!(status, 403, "a worker may not reassign: {answer}");
    assert_eq!(task(&hub, &id).await["logs"], before["logs"]);

    let (status, body) = act(&hub, &id, "reassign", None, json!({ "agentId": worker })).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["task"]["status"].as_str(), body["task"]["agentId"].as_str()),
        (Some("pending"), Some(worker.as_str()))
    );
    let trigger = trigger_of(&hub, &worker, "task_assigned").await;
    assert_eq!(trigger["task"]["id"], id.as_str());
    let (status, body) = act(&hub, &id, "finish", Some(&worker), json!({ "status": "completed" })).await;
    assert_eq!(status, 200, "{body}");
}

/// A runner that stopped a run going nowhere gives its task back, saying why (issue 40):
/// the task returns to the pool and the lead hears why, once. A give-back without a
/// reason, or of another agent's task, is refused and changes nothing.
#[tokio::test]
async fn an_agent_gives_back_its_task_and_the_lead_hears_why() {
    let dir = tempfile::tempdir().unwrap();
    let (hub, _clock) = clocked_hub(&sqlite_file(dir.path()), dir.path());
    let lead = hub.register_agent("lead", true).await;
    let worker = hub.register_agent("worker", false).await;
    let other = hub.register_agent("other", false).await;
    let id = hub.create_task(json!({ "task": "stalls in its run", "agentId": worker })).await;
    assert_eq!(act(&hub, &id, "start", Some(&worker), json!({})).await.0, 200);

    let before = task(&hub, &id).await;
    for (agent, body, refused) in [
        (&worker, json!({}), 400),
        (&worker, json!({ "reason": " " }), 400),
        (&other, json!({ "reason": "not mine" }), 403),
    ] {
        let (status, answer) = act(&hub, &id, "give-back", Some(agent), body).await;
        assert_eq!(status, refused, "{answer}");
        assert!(answer["error"].is_string(), "{answer}");
    }
    assert_eq!(task(&hub, &id).await["logs"], before["logs"], "a refusal changes nothing");

    let reason = "the run stalled: no output from the agent CLI for 11m";
    let (status, body) = act(&hub, &id, "give-back", Some(&worker), json!({ "reason": reason })).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["task"]["status"].as_str(), &body["task"]["agentId"]),
        (Some("unassigned"), &Value::Null)
    );
    let told = trigger_of(&hub, &lead, "tasks_handed_back").await;
    assert_eq!(told["handoffs"][0]["task"]["id"], id.as_str(), "{told}");
    assert_eq!(told["handoffs"][0]["fromAgentId"], worker.as_str(), "{told}");
    assert_eq!(told["handoffs"][0]["reason"], reason, "{told}");
    let (status, _) = act(&hub, &id, "give-back", Some(&worker), json!({ "reason": reason })).await;
    assert_eq!(status, 403, "no longer the worker's");
}
