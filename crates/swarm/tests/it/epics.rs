//! Epics from the user's side, over real HTTP and a real MCP client: the reference's
//! `/api/epics` routes and tools, who may change them, bad input, and a task finishing
//! that moves an epic's progress and tells the lead (`epic_progress_changed`).

use serde_json::{Value, json};

use crate::{
    hub::{Database, Hub, send, sqlite_file},
    mcp_client::{Revision, connect_http, ok, refused},
    support::postgres_database,
};

async fn put(hub: &Hub, path: &str, agent: Option<&str>, body: Value) -> (u16, Value) {
    send(hub.request(reqwest::Method::PUT, path, agent).json(&body)).await
}

async fn delete(hub: &Hub, path: &str, agent: Option<&str>) -> (u16, Value) {
    send(hub.request(reqwest::Method::DELETE, path, agent)).await
}

async fn poll(hub: &Hub, agent: &str) -> Value {
    let (status, body) = hub.get("/api/poll", Some(agent)).await;
    assert_eq!(status, 200, "{body}");
    body["trigger"].clone()
}

fn assert_error(status: u16, body: &Value, expected: u16, mentions: &str) {
    assert_eq!(status, expected, "{body}");
    let message = body["error"].as_str().unwrap_or_else(|| panic!("a JSON error body: {body}"));
    assert!(message.contains(mentions), "{message:?} should mention {mentions:?}");
}

async fn epic_story(database: &Database) {
    let hub = Hub::start(database, None);
    let lead = hub.register_agent("lead", true).await;
    let worker = hub.register_agent("worker", false).await;

    // Creation: the reference's 400 names what is missing; a worker may not; names are unique.
    let (status, body) = hub.post("/api/epics", Some(&lead), json!({ "description": "no name" })).await;
    assert_error(status, &body, 400, "name, goal");
    let (status, body) = hub.post("/api/epics", Some(&lead), json!({ "name": "checkout" })).await;
    assert_error(status, &body, 400, "goal");
    let (status, body) =
        hub.post("/api/epics", Some(&worker), json!({ "name": "checkout", "goal": "ship it" })).await;
    assert_error(status, &body, 403, "lead");
    let (status, epic) = hub
        .post(
            "/api/epics",
            Some(&lead),
            json!({ "name": "checkout", "goal": "ship it", "priority": 80, "tags": ["q1"] }),
        )
        .await;
    assert_eq!(status, 201, "{epic}");
    assert_eq!(
        (epic["status"].as_str(), epic["createdByAgentId"].as_str()),
        (Some("draft"), Some(lead.as_str()))
    );
    let id = epic["id"].as_str().unwrap().to_string();
    let (status, body) = hub.post("/api/epics", None, json!({ "name": "checkout", "goal": "again" })).await;
    assert_error(status, &body, 409, "checkout");
    let (status, list) = hub.get("/api/epics", None).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!((list["total"].as_u64(), list["epics"][0]["id"].as_str()), (Some(1), Some(id.as_str())));
    let (status, body) = hub.get("/api/epics?status=someday", None).await;
    assert!((400..500).contains(&status) && body["error"].is_string(), "{status} {body}");

    // Unknown and malformed ids.
    let unknown = uuid::Uuid::new_v4();
    assert_error_status(hub.get(&format!("/api/epics/{unknown}"), None).await, 404);
    assert_error_status(hub.get("/api/epics/not-a-uuid", None).await, 400);
    assert_error_status(
        put(&hub, &format!("/api/epics/{unknown}"), None, json!({ "status": "active" })).await,
        404,
    );
    assert_error_status(delete(&hub, &format!("/api/epics/{unknown}"), None).await, 404);

    // Changes: the lead activates it; a worker may not; bad values change nothing.
    let (status, body) =
        put(&hub, &format!("/api/epics/{id}"), Some(&worker), json!({ "status": "active" })).await;
    assert_error(status, &body, 403, "lead");
    let (status, body) = put(&hub, &format!("/api/epics/{id}"), None, json!({ "priority": 101 })).await;
    assert_error(status, &body, 400, "priority");
    let (status, body) =
        put(&hub, &format!("/api/epics/{id}"), None, json!({ "leadAgentId": unknown })).await;
    assert_error(status, &body, 400, "leadAgentId");
    let (status, active) = put(
        &hub,
        &format!("/api/epics/{id}"),
        Some(&lead),
        json!({ "status": "active", "leadAgentId": lead }),
    )
    .await;
    assert_eq!(status, 200, "{active}");
    assert_eq!((active["status"].as_str(), active["priority"].as_i64()), (Some("active"), Some(80)));
    assert!(active["startedAt"].is_string(), "{active}");

    // Tasks: a new one created in it (tagged as the reference tags it), an existing one added.
    let tasks_path = format!("/api/epics/{id}/tasks");
    let (status, body) = hub.post(&tasks_path, Some(&lead), json!({})).await;
    assert_error(status, &body, 400, "taskId");
    let (status, body) = hub.post(&tasks_path, Some(&lead), json!({ "taskId": unknown })).await;
    assert_error(status, &body, 404, "task");
    let (status, body) =
        hub.post(&format!("/api/epics/{unknown}/tasks"), Some(&lead), json!({ "task": "x" })).await;
    assert_error(status, &body, 404, "Epic not found");
    let (status, body) = hub.post(&tasks_path, Some(&worker), json!({ "task": "sneaky" })).await;
    assert_error(status, &body, 403, "lead");
    let (status, first) =
        hub.post(&tasks_path, Some(&lead), json!({ "task": "build the cart", "agentId": worker })).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["epicId"].as_str(), Some(id.as_str()));
    assert_eq!(first["tags"], json!(["epic:checkout"]));
    let (status, loose) = hub.post("/api/tasks", None, json!({ "task": "write the docs" })).await;
    assert_eq!(status, 201, "{loose}");
    assert_eq!(loose["epicId"], Value::Null, "a task outside any epic says so");
    let (status, second) = hub.post(&tasks_path, None, json!({ "taskId": loose["id"] })).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["epicId"].as_str(), Some(id.as_str()));

    let (status, detail) = hub.get(&format!("/api/epics/{id}"), None).await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(
        detail["taskStats"],
        json!({ "total": 2, "completed": 0, "failed": 0, "inProgress": 0, "pending": 1 })
    );
    assert_eq!(detail["progress"], 0);
    assert_eq!(detail["tasks"].as_array().map(Vec::len), Some(2));

    // The worker does the first task: the epic is half done, and the lead hears of it.
    let started = poll(&hub, &worker).await;
    assert_eq!(
        (started["type"].as_str(), started["taskId"].as_str()),
        (Some("task_assigned"), first["id"].as_str())
    );
    let (status, body) = hub
        .post(
            &format!("/api/tasks/{}/finish", first["id"].as_str().unwrap()),
            Some(&worker),
            json!({ "status": "completed", "output": "cart built" }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (_, detail) = hub.get(&format!("/api/epics/{id}"), None).await;
    assert_eq!((detail["progress"].as_i64(), detail["taskStats"]["completed"].as_i64()), (Some(50), Some(1)));

    let mut kinds = Vec::new();
    let mut progress = None;
    loop {
        let trigger = poll(&hub, &lead).await;
        if trigger.is_null() {
            break;
        }
        kinds.push(trigger["type"].as_str().unwrap_or_default().to_string());
        if trigger["type"] == "epic_progress_changed" {
            progress = Some(trigger);
        }
    }
    assert_eq!(
        kinds,
        ["tasks_finished", "epic_progress_changed"],
        "each told once, in the reference's order"
    );
    let progress = progress.unwrap();
    assert_eq!(progress["count"], 1, "{progress}");
    let entry = &progress["epics"][0];
    assert_eq!(
        (entry["epic"]["id"].as_str(), entry["epic"]["progress"].as_i64()),
        (Some(id.as_str()), Some(50))
    );
    assert_eq!(entry["epic"]["taskStats"]["completed"], 1);
    assert_eq!(entry["finishedTasks"][0]["id"], first["id"]);
    assert_eq!(entry["finishedTasks"][0]["output"], "cart built");

    // Deleting: not by a worker; the tasks stay, without an epic.
    assert_error_status(delete(&hub, &format!("/api/epics/{id}"), Some(&worker)).await, 403);
    let (status, body) = delete(&hub, &format!("/api/epics/{id}"), None).await;
    assert_eq!((status, &body), (200, &json!({ "success": true })));
    assert_error_status(hub.get(&format!("/api/epics/{id}"), None).await, 404);
    let (_, task) = hub.get(&format!("/api/tasks/{}", first["id"].as_str().unwrap()), None).await;
    assert_eq!((task["status"].as_str(), &task["epicId"]), (Some("completed"), &Value::Null));
}

fn assert_error_status((status, body): (u16, Value), expected: u16) {
    assert_eq!(status, expected, "{body}");
    assert!(body["error"].is_string(), "a JSON error body: {body}");
}

#[tokio::test]
async fn epics_over_rest_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    epic_story(&sqlite_file(dir.path())).await;
}

#[tokio::test]
async fn epics_over_rest_on_postgres() {
    let database = postgres_database().await;
    epic_story(&database.database()).await;
}

#[tokio::test]
async fn epic_tools_over_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let lead = hub.register_agent("lead", true).await;
    let worker = hub.register_agent("worker", false).await;
    let lead_client = connect_http(&hub, Some(&lead), Revision::Initialize).await;
    let worker_client = connect_http(&hub, Some(&worker), Revision::Initialize).await;

    let created = ok(
        &lead_client,
        "create-epic",
        json!({ "name": "search", "goal": "find anything", "plan": "1. index" }),
    )
    .await;
    let id = created["epic"]["id"].as_str().unwrap().to_string();
    assert_eq!(created["epic"]["plan"], "1. index");
    let reason = refused(&lead_client, "create-epic", json!({ "name": "search", "goal": "twice" })).await;
    assert!(reason.contains("search"), "{reason}");
    let reason = refused(&worker_client, "create-epic", json!({ "name": "mine", "goal": "no" })).await;
    assert!(reason.contains("lead"), "{reason}");
    let reason = refused(&lead_client, "update-epic", json!({ "name": "search", "status": "someday" })).await;
    assert!(reason.contains("status"), "{reason}");

    let updated = ok(
        &lead_client,
        "update-epic",
        json!({ "name": "search", "newName": "search v2", "status": "active" }),
    )
    .await;
    assert_eq!(
        (updated["epic"]["name"].as_str(), updated["epic"]["status"].as_str()),
        (Some("search v2"), Some("active"))
    );

    let (_, task) =
        hub.post("/api/tasks", None, json!({ "task": "index the docs", "agentId": worker })).await;
    let task_id = task["id"].as_str().unwrap().to_string();
    let reason =
        refused(&worker_client, "assign-task-to-epic", json!({ "taskId": task_id, "epicId": id })).await;
    assert!(reason.contains("lead"), "{reason}");
    let reason =
        refused(&lead_client, "assign-task-to-epic", json!({ "taskId": uuid::Uuid::new_v4(), "epicId": id }))
            .await;
    assert!(reason.contains("not found"), "{reason}");
    let reason =
        refused(&lead_client, "assign-task-to-epic", json!({ "taskId": task_id, "epicName": "nope" })).await;
    assert!(reason.contains("nope"), "{reason}");
    let assigned =
        ok(&lead_client, "assign-task-to-epic", json!({ "taskId": task_id, "epicName": "search v2" })).await;
    assert_eq!(assigned["task"]["epicId"].as_str(), Some(id.as_str()));

    // Reading is for everyone.
    let listed = ok(&worker_client, "list-epics", json!({ "status": "active" })).await;
    assert_eq!(
        (listed["total"].as_u64(), listed["epics"][0]["taskStats"]["total"].as_i64()),
        (Some(1), Some(1))
    );
    let details = ok(&worker_client, "get-epic-details", json!({ "epicId": id })).await;
    assert_eq!(details["tasks"][0]["id"].as_str(), Some(task_id.as_str()));
    assert_eq!(details["epic"]["progress"], 0);
    let reason = refused(&worker_client, "get-epic-details", json!({})).await;
    assert!(reason.contains("epicId"), "{reason}");

    let unassigned = ok(&lead_client, "unassign-task-from-epic", json!({ "taskId": task_id })).await;
    assert_eq!(unassigned["task"]["epicId"], Value::Null);
    let (_, detail) = hub.get(&format!("/api/epics/{id}"), None).await;
    assert_eq!(detail["taskStats"]["total"], 0, "{detail}");

    refused(&worker_client, "delete-epic", json!({ "epicId": id })).await;
    ok(&lead_client, "delete-epic", json!({ "name": "search v2" })).await;
    let (status, _) = hub.get(&format!("/api/epics/{id}"), None).await;
    assert_eq!(status, 404);
}

/// An epic's tasks may finish while it is a draft; activating it then wakes the lead's
/// parked poll with their progress. The lease is long, so the parked poll does not
/// re-read by itself before its wait ends (60 s, when it would look once more): an
/// answer in the first half of the wait is the wake-up's.
#[tokio::test]
async fn activating_an_epic_wakes_the_leads_parked_poll() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(&sqlite_file(dir.path()), None, &["--lease-seconds", "600"]);
    let lead = hub.register_agent("lead", true).await;
    let worker = hub.register_agent("worker", false).await;
    let (_, epic) = hub.post("/api/epics", None, json!({ "name": "later", "goal": "start it later" })).await;
    let id = epic["id"].as_str().unwrap().to_string();
    let (status, task) = hub
        .post(&format!("/api/epics/{id}/tasks"), None, json!({ "task": "early work", "agentId": worker }))
        .await;
    assert_eq!(status, 201, "{task}");
    assert_eq!(poll(&hub, &worker).await["type"], "task_assigned");
    let finish = format!("/api/tasks/{}/finish", task["id"].as_str().unwrap());
    assert_eq!(hub.post(&finish, Some(&worker), json!({ "status": "completed" })).await.0, 200);
    assert_eq!(poll(&hub, &lead).await["type"], "tasks_finished");
    assert_eq!(poll(&hub, &lead).await, Value::Null, "a draft epic's progress is not reported");

    let parked = {
        let request = hub.request(reqwest::Method::GET, "/api/poll?wait=60", Some(&lead));
        tokio::spawn(send(request))
    };
    hub.parked_polls(1).await;
    let activated = std::time::Instant::now();
    let (status, body) = put(&hub, &format!("/api/epics/{id}"), None, json!({ "status": "active" })).await;
    assert_eq!(status, 200, "{body}");
    let (status, answer) = parked.await.unwrap();
    assert_eq!(status, 200, "{answer}");
    assert!(activated.elapsed().as_secs() < 30, "the poll was not woken: it answered at the end of its wait");
    let trigger = &answer["trigger"];
    assert_eq!(trigger["type"], "epic_progress_changed", "{answer}");
    assert_eq!(trigger["epics"][0]["epic"]["progress"], 100);
    assert_eq!(trigger["epics"][0]["finishedTasks"][0]["id"], task["id"]);
}
