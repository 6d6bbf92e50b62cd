//! No request, however malformed, crashes the hub or gets a non-JSON error: every route
//! of the hub's own OpenAPI document is sent hostile paths and bodies.

use reqwest::Method;
use serde_json::{Value, json};

use crate::{
    hub::{Database, Hub, sqlite_file},
    support,
};

fn hostile_bodies() -> Vec<Vec<u8>> {
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    vec![
        b"".to_vec(),
        b"{".to_vec(),
        b"null".to_vec(),
        b"[]".to_vec(),
        b"\"just a string\"".to_vec(),
        b"{\"task\": null, \"name\": null, \"status\": 7}".to_vec(),
        b"{\"task\": \"x\", \"priority\": 1e400, \"maxTasks\": -99999999999999999999}".to_vec(),
        b"{\"task\": \"\\u0000\\ud800\", \"name\": \"\\u0000\"}".to_vec(),
        b"{\"task\": \"nul \\u0000 inside\", \"name\": \"n\\u0000\", \"progress\": \"p\\u0000\", \"status\": \"completed\", \"output\": \"\\u0000\", \"reason\": \"\\u0000\", \"description\": \"\\u0000\"}".to_vec(),
        b"{\"status\": \"completed\", \"lines\": [1, 2], \"iteration\": \"one\"}".to_vec(),
        b"{\"sessionId\": \"\", \"agentId\": \"x\", \"totalCostUsd\": \"NaN\"}".to_vec(),
        vec![0xff, 0xfe, 0x00, 0x80, 0xc3],
        deep.into_bytes(),
    ]
}

#[tokio::test]
async fn every_route_survives_hostile_input_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    every_route_survives_hostile_input(sqlite_file(dir.path())).await;
}

#[tokio::test]
async fn every_route_survives_hostile_input_postgres() {
    let database = support::postgres_database().await;
    every_route_survives_hostile_input(database.database()).await;
}

async fn every_route_survives_hostile_input(database: Database) {
    // The trackers are on, so their routes answer as a configured hub's do (off, they
    // answer 503 naming what to set, as the reference does).
    let trackers = [
        "--gitlab-webhook-secret",
        "hostile-gitlab-secret",
        "--linear-signing-secret",
        "hostile-linear-secret",
        "--jira-webhook-token",
        "hostile-jira-token-0123456789abcdef",
    ];
    let hub = Hub::start_with(&database, None, &trackers);
    let agent = uuid::Uuid::new_v4().to_string();
    let (_, _) = hub.post("/api/agents", Some(&agent), json!({"name": "target", "isLead": true})).await;
    let (_, task) =
        hub.post("/api/tasks", Some(&agent), json!({"task": "a real task", "agentId": agent})).await;
    let real_task = task["id"].as_str().unwrap().to_string();

    let (_, spec) = hub.get("/openapi.json", None).await;
    let paths = spec["paths"].as_object().unwrap().clone();
    let ids =
        [real_task.as_str(), agent.as_str(), "not-a-uuid", "%ZZ", "00000000-0000-0000-0000-000000000000"];
    let agent_headers = [Some(agent.as_str()), Some("not-a-uuid"), None];
    let mut n_requests = 0;
    for (template, operations) in &paths {
        // An endless text/event-stream: any request it accepts never ends, by design.
        // dashboard.rs checks its auth, and its stream, on its own.
        if template == "/api/events" {
            continue;
        }
        for method in operations.as_object().unwrap().keys() {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            for id in ids {
                let path = template.replace("{id}", id);
                for (n, body) in hostile_bodies().into_iter().enumerate() {
                    let agent_header = agent_headers[n % agent_headers.len()];
                    let request = hub
                        .request(
                            method.clone(),
                            &format!("{path}?limit=-1&status=%FF&agentId=x"),
                            agent_header,
                        )
                        .header("content-type", "application/json")
                        .body(body);
                    let response = request
                        .send()
                        .await
                        .unwrap_or_else(|err| panic!("{method} {path}: no answer: {err}"));
                    let status = response.status().as_u16();
                    let text = response.text().await.unwrap();
                    assert!(status < 500, "{method} {path} answered {status}: {text}");
                    if status >= 400 {
                        let body: Value = serde_json::from_str(&text)
                            .unwrap_or_else(|_| panic!("{method} {path} {status}: non-JSON error {text:?}"));
                        assert!(body["error"].is_string(), "{method} {path}: {body}");
                    }
                    n_requests += 1;
                }
            }
        }
    }
    assert!(n_requests > 1000, "covered {n_requests} requests");
    let (status, health) = hub.get("/health", None).await;
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")), "the hub is still up");
    let (_, detail) = hub.get(&format!("/api/tasks/{real_task}"), None).await;
    assert!(detail["status"].is_string(), "the real task is still readable: {detail}");
}
