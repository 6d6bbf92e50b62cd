//! Acknowledged writes survive a crash, and several hubs share one PostgreSQL database.

use std::collections::HashMap;

use serde_json::json;

use crate::{
    hub::{Database, Hub, sqlite_file},
    support,
};

#[tokio::test]
async fn acknowledged_writes_survive_sigkill_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let hub = Hub::spawn(&database, None);
    let agent = uuid::Uuid::new_v4().to_string();
    assert_eq!(hub.post("/api/agents", Some(&agent), json!({"name": "durable"})).await.0, 201);

    let mut acknowledged = HashMap::new();
    for n in 0..40 {
        let (status, task) =
            hub.post("/api/tasks", None, json!({"task": format!("task {n}"), "priority": n})).await;
        assert_eq!(status, 201);
        acknowledged.insert(task["id"].as_str().unwrap().to_string(), "unassigned");
    }
    let first = acknowledged.keys().next().unwrap().clone();
    let (status, _) = hub.post(&format!("/api/tasks/{first}/claim"), Some(&agent), json!({})).await;
    assert_eq!(status, 200);
    acknowledged.insert(first.clone(), "pending");
    let (status, _) = hub.post(&format!("/api/tasks/{first}/start"), Some(&agent), json!({})).await;
    assert_eq!(status, 200);
    let (status, _) = hub
        .post(
            &format!("/api/tasks/{first}/finish"),
            Some(&agent),
            json!({"status": "completed", "output": "ok"}),
        )
        .await;
    assert_eq!(status, 200);
    acknowledged.insert(first.clone(), "completed");
    hub.kill();

    let restarted = Hub::start(&database, None);
    let (status, list) = restarted.get("/api/tasks?limit=1000", None).await;
    assert_eq!(status, 200);
    assert_eq!(list["total"], 40);
    for task in list["tasks"].as_array().unwrap() {
        let id = task["id"].as_str().unwrap();
        assert_eq!(Some(&task["status"].as_str().unwrap()), acknowledged.get(id), "task {id} after restart");
    }
    let (_, finished) = restarted.get(&format!("/api/tasks/{first}"), None).await;
    assert_eq!(finished["output"], "ok");
    let (status, agent_after) = restarted.get(&format!("/api/agents/{agent}"), None).await;
    assert_eq!(status, 200, "{agent_after}");
}

#[tokio::test]
async fn sigterm_stops_the_hub_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::spawn(&sqlite_file(dir.path()), None);
    assert_eq!(hub.get("/health", None).await.0, 200);
    assert!(hub.terminate(), "swarm serve exits with status 0 on SIGTERM");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hubs_on_one_postgres_database_claim_each_task_once() {
    let database = support::postgres_database().await;
    two_hubs_claim_each_task_once(database.database()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hubs_on_one_sqlite_file_claim_each_task_once() {
    let dir = tempfile::tempdir().unwrap();
    two_hubs_claim_each_task_once(sqlite_file(dir.path())).await;
}

/// Two `swarm serve` processes on one database: what one writes the other sees, and
/// concurrent claims through both never hand a task out twice.
async fn two_hubs_claim_each_task_once(database: Database) {
    let hub_a = Hub::start(&database, None);
    let hub_b = Hub::start(&database, None);

    let mut agents = Vec::new();
    for n in 0..8 {
        let id = uuid::Uuid::new_v4().to_string();
        let hub = if n % 2 == 0 { &hub_a } else { &hub_b };
        let (status, _) =
            hub.post("/api/agents", Some(&id), json!({"name": format!("w{n}"), "maxTasks": 20})).await;
        assert_eq!(status, 201);
        agents.push(id);
    }
    let mut task_ids = Vec::new();
    for n in 0..30 {
        let (status, task) = hub_a.post("/api/tasks", None, json!({"task": format!("pool {n}")})).await;
        assert_eq!(status, 201);
        task_ids.push(task["id"].as_str().unwrap().to_string());
    }
    let (_, seen_by_b) = hub_b.get("/api/tasks?status=unassigned", None).await;
    assert_eq!(seen_by_b["total"], 30, "hub B sees what hub A wrote");

    let mut attempts = Vec::new();
    for (n, agent) in agents.iter().enumerate() {
        for task_id in &task_ids {
            let hub = if n % 2 == 0 { &hub_a } else { &hub_b };
            let path = format!("/api/tasks/{task_id}/claim");
            let agent = agent.clone();
            let task_id = task_id.clone();
            attempts.push(async move {
                let (status, _) = hub.post(&path, Some(&agent), json!({})).await;
                (task_id, agent, status)
            });
        }
    }
    let results = futures_util::future::join_all(attempts).await;
    let mut winners: HashMap<String, Vec<String>> = HashMap::new();
    for (task_id, agent, status) in results {
        assert!(status == 200 || status == 409, "claim answered {status}");
        if status == 200 {
            winners.entry(task_id).or_default().push(agent);
        }
    }
    for task_id in &task_ids {
        let won = winners.get(task_id).map_or(0, Vec::len);
        assert_eq!(won, 1, "task {task_id} claimed {won} times across two hubs");
        let (_, task) = hub_b.get(&format!("/api/tasks/{task_id}"), None).await;
        assert_eq!(task["status"], "pending");
        assert_eq!(task["agentId"], winners[task_id][0].as_str());
    }
}
