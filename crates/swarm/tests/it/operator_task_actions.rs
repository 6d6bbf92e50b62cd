//! The REST side of the dashboard's task actions (issue 49) over real HTTP on both
//! stores: priorities, an operator's pause and resume of an agent's task, and a reassign
//! from an agent that is online only when the caller says so.

use serde_json::{Value, json};

use crate::hub::{Database, Hub, sqlite_file};

async fn must(hub: &Hub, path: &str, agent: Option<&str>, body: Value) -> Value {
    let (status, answer) = hub.post(path, agent, body).await;
    assert!((200..300).contains(&status), "{path}: {status} {answer}");
    answer
}

async fn task(hub: &Hub, id: &str) -> Value {
    let (status, body) = hub.get(&format!("/api/tasks/{id}"), None).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// A worker starts its assigned task as a runner does: the poll hands it over.
async fn start_as(hub: &Hub, agent: &str, id: &str) {
    let (status, poll) = hub.get("/api/poll", Some(agent)).await;
    assert_eq!(status, 200, "{poll}");
    assert_eq!(poll["trigger"]["taskId"], json!(id), "{poll}");
    assert_eq!(task(hub, id).await["status"], "in_progress");
}

/// The hub's side of the actions, over HTTP on both stores: who may set a priority and
/// in which statuses, an operator's pause and resume of an agent's task, and a reassign
/// from an online holder only when the caller says so (after which the holder's finish
/// is refused). Refusals change nothing.
async fn the_hub_guards_the_operators_actions(database: &Database) {
    let hub = Hub::start(database, None);
    let ada = hub.register_agent("ada", false).await;
    let bob = hub.register_agent("bob", false).await;

    let pool = hub.create_task(json!({"task": "Order by priority", "priority": 10})).await;
    let set = must(&hub, &format!("/api/tasks/{pool}/priority"), None, json!({"priority": 90})).await;
    assert_eq!(set["priority"], 90, "{set}");
    for bad in [json!({"priority": 101}), json!({"priority": -1}), json!({"priority": "high"}), json!({})] {
        let (status, body) = hub.post(&format!("/api/tasks/{pool}/priority"), None, bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body["error"].is_string(), "{body}");
    }
    let (status, body) =
        hub.post(&format!("/api/tasks/{pool}/priority"), Some(&ada), json!({"priority": 5})).await;
    assert_eq!(status, 403, "a worker that did not create it: {body}");
    assert_eq!(task(&hub, &pool).await["priority"], 90, "refusals change nothing");
    let (_, logs) = hub.get(&format!("/api/tasks/{pool}"), None).await;
    let edited: Vec<&Value> =
        logs["logs"].as_array().unwrap().iter().filter(|log| log["eventType"] == "task_edited").collect();
    assert_eq!(edited.len(), 1, "{logs}");
    assert_eq!((edited[0]["oldValue"].as_str(), edited[0]["newValue"].as_str()), (Some("10"), Some("90")));

    // Pause and resume by the operator; a task nobody holds cannot be paused.
    let held = hub.create_task(json!({"task": "Long job", "agentId": ada})).await;
    start_as(&hub, &ada, &held).await;
    let (status, body) = hub.post(&format!("/api/tasks/{pool}/pause"), None, json!({})).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = hub.post(&format!("/api/tasks/{held}/pause"), Some(&bob), json!({})).await;
    assert_eq!(status, 403, "another worker's task: {body}");
    let paused = must(&hub, &format!("/api/tasks/{held}/pause"), None, json!({})).await;
    assert_eq!(
        (paused["task"]["status"].as_str(), paused["task"]["agentId"].as_str()),
        (Some("paused"), Some(ada.as_str()))
    );
    let resumed = must(&hub, &format!("/api/tasks/{held}/resume"), None, json!({})).await;
    assert_eq!(resumed["task"]["status"], "in_progress");

    // ada is online: reassigning its work needs evenIfOnline.
    let (status, body) =
        hub.post(&format!("/api/tasks/{held}/reassign"), None, json!({"agentId": bob})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(task(&hub, &held).await["agentId"], json!(ada));
    let moved = must(
        &hub,
        &format!("/api/tasks/{held}/reassign"),
        None,
        json!({"agentId": bob, "evenIfOnline": true}),
    )
    .await;
    assert_eq!(
        (moved["task"]["status"].as_str(), moved["task"]["agentId"].as_str()),
        (Some("pending"), Some(bob.as_str()))
    );
    let (status, body) =
        hub.post(&format!("/api/tasks/{held}/finish"), Some(&ada), json!({"status": "completed"})).await;
    assert_eq!(status, 403, "the former holder's finish is refused: {body}");
    assert_eq!(task(&hub, &held).await["status"], "pending");

    let (status, _) = hub.post(&format!("/api/tasks/{held}/cancel"), None, json!({})).await;
    assert_eq!(status, 200);
    let (status, body) = hub.post(&format!("/api/tasks/{held}/priority"), None, json!({"priority": 1})).await;
    assert_eq!(status, 409, "a finished task keeps its priority: {body}");
    let (status, _) = hub
        .post(&format!("/api/tasks/{}/priority", uuid::Uuid::now_v7()), None, json!({"priority": 1}))
        .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn the_hub_guards_the_operators_actions_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    the_hub_guards_the_operators_actions(&sqlite_file(dir.path())).await;
}

#[tokio::test]
async fn the_hub_guards_the_operators_actions_on_postgres() {
    let database = crate::support::postgres_database().await;
    the_hub_guards_the_operators_actions(&database.database()).await;
}
