//! The services registry and the reference's schedule view from the user's side: MCP
//! tools to register and change services, `GET /api/services`, `GET /ecosystem` (PM2's
//! format), and `GET /api/scheduled-tasks` over the timed triggers.

use serde_json::{Value, json};

use crate::{
    hub::{Hub, sqlite_file},
    mcp_client::{Revision, connect_http, ok, refused},
};

fn ids(body: &Value, list: &str) -> Vec<String> {
    body[list]
        .as_array()
        .unwrap_or_else(|| panic!("{list} in {body}"))
        .iter()
        .map(|item| item["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn agents_register_services_and_a_process_manager_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let alice = hub.register_agent("alice", false).await;
    let bob = hub.register_agent("bob", false).await;
    let alice_client = connect_http(&hub, Some(&alice), Revision::Initialize).await;
    let bob_client = connect_http(&hub, Some(&bob), Revision::Initialize).await;

    // The reference's defaults: named after the agent, port 3000, /health, starting.
    let first =
        ok(&alice_client, "register-service", json!({ "script": "server.js", "interpreter": "node" })).await;
    let service = &first["service"];
    assert_eq!(
        (
            service["name"].as_str(),
            service["port"].as_i64(),
            service["healthCheckPath"].as_str(),
            service["status"].as_str()
        ),
        (Some(alice.as_str()), Some(3000), Some("/health"), Some("starting"))
    );
    let id = service["id"].as_str().unwrap().to_string();
    // Registering the same name again updates it.
    let again = ok(
        &alice_client,
        "register-service",
        json!({ "script": "server.js", "port": 4000, "args": ["--watch"], "env": { "MODE": "dev" }, "cwd": "/srv/site" }),
    )
    .await;
    assert_eq!(
        (again["service"]["id"].as_str(), again["service"]["port"].as_i64()),
        (Some(id.as_str()), Some(4000))
    );
    let api = ok(
        &alice_client,
        "register-service",
        json!({ "name": "api", "script": "api.py", "interpreter": "python3" }),
    )
    .await;
    let api_id = api["service"]["id"].as_str().unwrap().to_string();
    let bobs = ok(&bob_client, "register-service", json!({ "name": "api", "script": "bob.js" })).await;

    // Bad input is refused and registers nothing.
    for bad in [
        json!({ "script": "" }),
        json!({ "script": "x", "name": "n".repeat(51) }),
        json!({ "script": "x", "port": 70000 }),
        json!({ "name": "no-script" }),
    ] {
        refused(&alice_client, "register-service", bad).await;
    }
    let (status, all) = hub.get("/api/services", None).await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(all["services"].as_array().map(Vec::len), Some(3), "{all}");

    // Status: the owner changes it; another worker may not.
    let reason =
        refused(&bob_client, "update-service-status", json!({ "serviceId": id, "status": "healthy" })).await;
    assert!(reason.contains("belongs to"), "{reason}");
    refused(&alice_client, "update-service-status", json!({ "serviceId": id, "status": "sleepy" })).await;
    let healthy =
        ok(&alice_client, "update-service-status", json!({ "name": alice, "status": "healthy" })).await;
    assert_eq!(healthy["service"]["status"], "healthy");

    // REST filters.
    let (_, healthy_list) = hub.get("/api/services?status=healthy", None).await;
    assert_eq!(ids(&healthy_list, "services"), std::slice::from_ref(&id));
    let (_, alices) = hub.get(&format!("/api/services?agentId={alice}"), None).await;
    assert_eq!(ids(&alices, "services").len(), 2);
    let (_, named) = hub.get("/api/services?name=API", None).await;
    let mut found = ids(&named, "services");
    found.sort();
    let mut expected = vec![api_id.clone(), bobs["service"]["id"].as_str().unwrap().to_string()];
    expected.sort();
    assert_eq!(found, expected);
    for bad in ["/api/services?status=sleepy", "/api/services?agentId=nope"] {
        let (status, body) = hub.get(bad, None).await;
        assert!((400..500).contains(&status) && body["error"].is_string(), "{bad}: {status} {body}");
    }
    let listed = ok(&bob_client, "list-services", json!({ "includeOwn": false })).await;
    assert_eq!(listed["services"].as_array().map(Vec::len), Some(2), "alice's two");

    // The ecosystem: the caller's services as PM2 apps, each with its PORT.
    let (status, body) = hub.get("/ecosystem", None).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().is_some_and(|error| error.contains("X-Agent-ID")), "{body}");
    let (status, ecosystem) = hub.get("/ecosystem", Some(&alice)).await;
    assert_eq!(status, 200, "{ecosystem}");
    let apps = ecosystem["apps"].as_array().unwrap();
    assert_eq!(apps.len(), 2, "{ecosystem}");
    let site = apps.iter().find(|app| app["name"] == alice.as_str()).expect("the site");
    assert_eq!(
        site,
        &json!({ "name": alice, "script": "server.js", "cwd": "/srv/site", "args": ["--watch"],
                 "env": { "MODE": "dev", "PORT": "4000" } }),
        "interpreter was not given again, so it is gone (the reference replaces it too)"
    );
    let api_app = apps.iter().find(|app| app["name"] == "api").expect("the api");
    assert_eq!(api_app["interpreter"], "python3");
    assert!(api_app.get("cwd").is_none(), "absent fields are left out: {api_app}");

    // Unregistering: the owner only.
    refused(&bob_client, "unregister-service", json!({ "serviceId": api_id })).await;
    ok(&alice_client, "unregister-service", json!({ "name": "api" })).await;
    refused(&alice_client, "unregister-service", json!({ "name": "api" })).await;
    let (_, alices) = hub.get(&format!("/api/services?agentId={alice}"), None).await;
    assert_eq!(ids(&alices, "services"), [id]);
}

#[tokio::test]
async fn scheduled_tasks_show_the_timed_triggers() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let bob = hub.register_agent("bob", false).await;
    let triggers = [
        json!({ "name": "standup", "type": "cron", "schedule": "30 9 * * 1-5", "timezone": "Europe/Paris",
                "target": bob, "prompt": "Post the standup summary", "priority": 80 }),
        json!({ "name": "tick", "type": "interval", "intervalSeconds": 60, "prompt": "tick", "enabled": false }),
        json!({ "name": "hook", "type": "webhook", "webhookSecret": "s3cret-0123456789abcdef", "prompt": "hooked" }),
    ];
    for trigger in triggers {
        let (status, body) = hub.post("/api/triggers", None, trigger).await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, body) = hub.get("/api/scheduled-tasks", None).await;
    assert_eq!(status, 200, "{body}");
    let schedules = body["scheduledTasks"].as_array().unwrap();
    let names: Vec<&str> = schedules.iter().map(|schedule| schedule["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["standup", "tick"], "timed triggers only");
    let standup = &schedules[0];
    assert_eq!(standup["cronExpression"], "30 9 * * 1-5");
    assert_eq!(standup["taskTemplate"], "Post the standup summary");
    assert_eq!(standup["targetAgentId"].as_str(), Some(bob.as_str()));
    assert_eq!(
        (standup["enabled"].as_bool(), standup["timezone"].as_str()),
        (Some(true), Some("Europe/Paris"))
    );
    assert!(standup["nextRunAt"].is_string() && standup["lastRunAt"].is_null(), "{standup}");
    assert_eq!(
        (schedules[1]["intervalMs"].as_i64(), schedules[1]["cronExpression"].is_null()),
        (Some(60_000), true)
    );

    let (_, disabled) = hub.get("/api/scheduled-tasks?enabled=false", None).await;
    assert_eq!(disabled["scheduledTasks"].as_array().map(Vec::len), Some(1));
    assert_eq!(disabled["scheduledTasks"][0]["name"], "tick");
    let (_, named) = hub.get("/api/scheduled-tasks?name=stand", None).await;
    assert_eq!(named["scheduledTasks"][0]["name"], "standup");
    let (status, body) = hub.get("/api/scheduled-tasks?enabled=maybe", None).await;
    assert!((400..500).contains(&status) && body["error"].is_string(), "{status} {body}");
}
