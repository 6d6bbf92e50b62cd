//! The security review's findings (issue 23), each from the attacker's side: what a
//! worker, a replayed request or a hostile page tries, and that the hub refuses it and
//! changes nothing.

use serde_json::{Value, json};

use crate::hub::{Hub, send, sqlite_file};

async fn register(hub: &Hub, name: &str, lead: bool) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    let (status, body) = hub.post("/api/agents", Some(&id), json!({"name": name, "isLead": lead})).await;
    assert!(status == 201 || status == 200, "{body}");
    id
}

async fn trigger_names(hub: &Hub) -> Vec<String> {
    let (_, listed) = hub.get("/api/triggers", None).await;
    listed["triggers"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

/// Finding 3: a worker (maybe prompt-injected) cannot open a lasting way in: no public
/// webhook, no trigger aimed at the lead, not by creating one nor by changing its own.
#[tokio::test]
async fn a_worker_cannot_create_a_public_or_lead_targeted_trigger() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some("trust-test-key-0123"));
    let worker = register(&hub, "mallory", false).await;
    let lead = register(&hub, "boss", true).await;

    let attempts = [
        json!({"name": "backdoor", "type": "webhook", "webhookPublic": true, "target": "pool"}),
        json!({"name": "to-lead", "type": "webhook", "webhookSecret": "x-0123456789abcdef", "target": "lead"}),
        json!({"name": "lead-manual", "type": "manual", "target": "lead"}),
    ];
    for attempt in &attempts {
        let (status, body) = hub.post("/api/triggers", Some(&worker), attempt.clone()).await;
        assert_eq!(status, 403, "{attempt}: {body}");
        assert!(body["error"].as_str().unwrap().contains("operator or the lead"), "{body}");
    }
    assert!(trigger_names(&hub).await.is_empty(), "nothing was created");

    // Its own harmless trigger cannot be turned into one either.
    let (status, body) =
        hub.post("/api/triggers", Some(&worker), json!({"name": "mine", "type": "manual"})).await;
    assert_eq!(status, 201, "{body}");
    for change in [json!({"target": "lead"}), json!({"type": "manual", "webhookPublic": true})] {
        let request = hub.request(reqwest::Method::PATCH, "/api/triggers/mine", Some(&worker)).json(&change);
        let (status, body) = send(request).await;
        assert_eq!(status, 403, "{change}: {body}");
    }
    let (_, mine) = hub.get("/api/triggers/mine", None).await;
    assert_eq!(mine["trigger"]["target"], "pool", "{mine}");

    // The lead and the operator may.
    let (status, body) = hub.post("/api/triggers", Some(&lead), attempts[1].clone()).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = hub.post("/api/triggers", None, attempts[0].clone()).await;
    assert_eq!(status, 201, "{body}");
}

async fn post_webhook(hub: &Hub, name: &str, body: &[u8], headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request =
        reqwest::Client::new().post(hub.url(&format!("/api/webhooks/{name}"))).body(body.to_vec());
    for (header, value) in headers {
        request = request.header(*header, *value);
    }
    send(request).await
}

/// Finding 5: a captured signed body replayed (with a fresh `X-GitHub-Delivery`, which
/// nobody signs) fires nothing; unsigned headers choose neither the sender nor the session.
#[tokio::test]
async fn a_replayed_signed_webhook_fires_once_and_unsigned_headers_decide_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some("trust-test-key-0123"));
    let (status, body) = hub
        .post(
            "/api/triggers",
            None,
            json!({"name": "deploys", "type": "webhook", "webhookSecret": "s3cret-0123456789abcdef",
                   "sessionMode": "persistent", "prompt": "from {{sender}}: {{payload}}"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let body = br#"{"deploy":"v1.2"}"#;
    let signature = swarm_service::sign_body("s3cret-0123456789abcdef", body);
    let (status, first) = post_webhook(
        &hub,
        "deploys",
        body,
        &[
            ("x-hub-signature-256", &signature),
            ("x-github-delivery", "d-1"),
            ("x-sender", "the-ceo"),
            ("x-session-key", "victim-thread"),
        ],
    )
    .await;
    assert_eq!(status, 202, "{first}");
    let task_id = first["taskId"].as_str().expect("the first delivery fires").to_string();
    let (_, task) = hub.get(&format!("/api/tasks/{task_id}"), None).await;
    assert!(!task["task"].as_str().unwrap().contains("the-ceo"), "X-Sender is unsigned: {task}");
    assert_ne!(task["sessionKey"], "victim-thread", "X-Session-Key is unsigned: {task}");

    for delivery in ["d-2", "d-3", ""] {
        let (status, replay) = post_webhook(
            &hub,
            "deploys",
            body,
            &[("x-hub-signature-256", &signature), ("x-github-delivery", delivery)],
        )
        .await;
        assert_eq!(status, 202, "{replay}");
        assert_eq!(replay["taskId"], Value::Null, "replay with delivery {delivery:?} fired: {replay}");
    }
    let (_, trigger) = hub.get("/api/triggers/deploys", None).await;
    assert_eq!(trigger["trigger"]["runCount"], 1);
    // Another body is another event.
    let other = br#"{"deploy":"v1.3"}"#;
    let (_, next) = post_webhook(
        &hub,
        "deploys",
        other,
        &[("x-hub-signature-256", &swarm_service::sign_body("s3cret-0123456789abcdef", other))],
    )
    .await;
    assert!(next["taskId"].is_string(), "{next}");
}

/// Finding 6: a seconds field would fire every second, past the minimum gap.
#[tokio::test]
async fn a_six_field_cron_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some("trust-test-key-0123"));
    for schedule in ["* * * * * *", "*/1 * * * * *", "0 * * * * * 2030"] {
        let (status, body) = hub
            .post("/api/triggers", None, json!({"name": "flood", "type": "cron", "schedule": schedule}))
            .await;
        assert_eq!(status, 400, "{schedule}: {body}");
        assert!(body["error"].as_str().unwrap().contains("seconds field"), "{body}");
    }
    assert!(trigger_names(&hub).await.is_empty());
}

/// Finding 9: a session id that reads as a flag is refused, and only the session's owner
/// records one.
#[tokio::test]
async fn trigger_sessions_refuse_flag_ids_and_strangers() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some("trust-test-key-0123"));
    let owner = register(&hub, "owner", false).await;
    let stranger = register(&hub, "stranger", false).await;
    let (status, body) = hub
        .post(
            "/api/triggers",
            Some(&owner),
            json!({"name": "chat", "type": "manual", "sessionMode": "persistent", "target": owner}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let put = |agent: Option<&str>, session: &str| {
        hub.request(reqwest::Method::PUT, "/api/triggers/chat/session", agent)
            .json(&json!({"sessionKey": "t1", "sessionId": session}))
    };
    let (status, body) = send(put(Some(&stranger), "attacker-session")).await;
    assert_eq!(status, 403, "{body}");
    for flag in ["--dangerously-skip-permissions", "-p"] {
        let (status, body) = send(put(Some(&owner), flag)).await;
        assert_eq!(status, 400, "{flag}: {body}");
    }
    let (status, _) = hub.get("/api/triggers/chat/session?key=t1", None).await;
    assert_eq!(status, 404, "nothing was recorded");
    let (status, body) = send(put(Some(&owner), "abc-123")).await;
    assert_eq!(status, 200, "{body}");
}

/// Finding 11: the docs page cannot be framed nor run inline script, and no answer may be
/// sniffed into something else.
#[tokio::test]
async fn docs_have_a_policy_and_answers_are_not_sniffed() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some("trust-test-key-0123"));
    let docs = reqwest::get(hub.url("/docs")).await.unwrap();
    let policy = docs.headers()["content-security-policy"].to_str().unwrap().to_string();
    assert!(policy.contains("frame-ancestors 'none'") && policy.contains("script-src 'self'"), "{policy}");
    assert_eq!(docs.headers()["x-content-type-options"], "nosniff");
    assert!(!docs.text().await.unwrap().contains("<script>"), "no inline script");
    for path in ["/docs/script.js", "/docs/style.css"] {
        let asset = reqwest::get(hub.url(path)).await.unwrap();
        assert_eq!(asset.status(), 200, "{path}");
    }
    for path in ["/health", "/api/tasks", "/api/no-such-route"] {
        let response = hub.request(reqwest::Method::GET, path, None).send().await.unwrap();
        assert_eq!(response.headers()["x-content-type-options"], "nosniff", "{path}");
    }
}

/// Finding 1 (in part): a web page's cross-site `text/plain` POST (a "simple" request,
/// sent without a preflight) creates nothing, and pages of other sites cannot use MCP.
#[tokio::test]
async fn a_cross_site_text_plain_post_and_a_foreign_mcp_origin_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    for content_type in [Some("text/plain"), Some("application/x-www-form-urlencoded"), None] {
        let mut request = reqwest::Client::new()
            .post(hub.url("/api/tasks"))
            .header("origin", "https://evil.example")
            .body(r#"{"task": "exfiltrate the repository"}"#);
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let (status, body) = send(request).await;
        // A keyless hub refuses other sites' pages outright (issue 39); one with a key
        // (the suite's token mode) refuses the body that is not JSON.
        let (expected, says) =
            if hub.api_key.is_none() { (403, "Origin") } else { (415, "application/json") };
        assert_eq!(status, expected, "{content_type:?}: {body}");
        assert!(body["error"].as_str().unwrap().contains(says), "{body}");
    }
    let (_, tasks) = hub.get("/api/tasks", None).await;
    assert_eq!(tasks["total"], 0, "nothing was created");

    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let mcp = |origin: Option<&str>| {
        let mut request = reqwest::Client::new()
            .post(hub.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(ping);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    let foreign = mcp(Some("https://evil.example")).await.unwrap();
    assert_eq!(foreign.status(), 403);
    for allowed in [None, Some("http://localhost:6274"), Some(hub.base_url.as_str())] {
        let response = mcp(allowed).await.unwrap();
        assert_ne!(response.status(), 403, "{allowed:?}");
    }
}
