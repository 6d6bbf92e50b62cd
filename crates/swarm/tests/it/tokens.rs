//! Agent tokens (`--agent-auth token`, issue 23) from the attacker's side: a token acts
//! as its own agent only, a revoked one is refused at once, and the operator key
//! administers without acting as an agent; on REST, on the event stream and on MCP.

use reqwest::Method;
use serde_json::{Value, json};

use crate::{
    hub::{Hub, send, sqlite_file},
    mcp_client::{Revision, connect_http_with, ok, refused},
};

const KEY: &str = "operator-key-0123456789";

fn token_hub(dir: &std::path::Path) -> Hub {
    Hub::start_with(&sqlite_file(dir), Some(KEY), &["--agent-auth", "token"])
}

/// A request with `bearer` (a token, or the key) and, when given, `X-Agent-ID`.
fn as_bearer(
    hub: &Hub,
    method: Method,
    path: &str,
    bearer: &str,
    named: Option<&str>,
) -> reqwest::RequestBuilder {
    let request = reqwest::Client::new().request(method, hub.url(path)).bearer_auth(bearer);
    match named {
        Some(id) => request.header("X-Agent-ID", id),
        None => request,
    }
}

/// Registers an agent with the operator key; its id and first token.
async fn register(hub: &Hub, name: &str, lead: bool) -> (String, String) {
    let (status, body) = hub.post("/api/agents", None, json!({"name": name, "isLead": lead})).await;
    assert_eq!(status, 201, "{body}");
    let token = body["token"]["token"].as_str().unwrap_or_else(|| panic!("a first token in {body}"));
    assert!(body["token"]["id"].is_string() && body["token"]["createdAt"].is_string(), "{body}");
    (body["id"].as_str().unwrap().to_string(), token.to_string())
}

async fn task_status(hub: &Hub, id: &str) -> Value {
    let (status, body) = hub.get(&format!("/api/tasks/{id}"), None).await;
    assert_eq!(status, 200, "{body}");
    body["status"].clone()
}

#[tokio::test]
async fn a_token_acts_as_its_agent_only() {
    let dir = tempfile::tempdir().unwrap();
    let hub = token_hub(dir.path());
    let (alice, alice_token) = register(&hub, "alice", false).await;
    let (bob, _) = register(&hub, "bob", false).await;
    let (status, task) = hub.post("/api/tasks", None, json!({"task": "bob's work", "agentId": bob})).await;
    assert_eq!(status, 201, "{task}");
    let task_id = task["id"].as_str().unwrap();

    // The token alone is alice.
    let (status, me) = send(as_bearer(&hub, Method::GET, "/me", &alice_token, None)).await;
    assert_eq!((status, me["id"].as_str()), (200, Some(alice.as_str())), "{me}");

    // Alice's token naming bob: refused everywhere, and bob's task is untouched.
    let attempts = [
        (Method::GET, "/api/poll".to_string(), None),
        (Method::GET, "/me".to_string(), None),
        (Method::POST, format!("/api/tasks/{task_id}/start"), None),
        (Method::POST, format!("/api/tasks/{task_id}/finish"), Some(json!({"status": "completed"}))),
        (Method::GET, "/api/mail".to_string(), None),
        (Method::GET, "/api/events".to_string(), None),
        (Method::POST, "/api/agents".to_string(), Some(json!({"name": "bob"}))),
    ];
    for (method, path, body) in attempts {
        let mut request = as_bearer(&hub, method.clone(), &path, &alice_token, Some(&bob));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let (status, answer) = send(request).await;
        assert_eq!(status, 403, "{method} {path}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains("cannot act as agent"), "{answer}");
    }
    assert_eq!(task_status(&hub, task_id).await, "pending");

    // Nor can a token make more tokens, or see another agent's.
    let path = format!("/api/agents/{bob}/tokens");
    let (status, _) = send(as_bearer(&hub, Method::POST, &path, &alice_token, None)).await;
    assert_eq!(status, 403);
    let (status, _) = send(as_bearer(&hub, Method::GET, &path, &alice_token, None)).await;
    assert_eq!(status, 403);

    // An agent's token brings its own agent back (the runner's registration).
    let again =
        as_bearer(&hub, Method::POST, "/api/agents", &alice_token, None).json(&json!({"name": "alice"}));
    let (status, body) = send(again).await;
    assert_eq!((status, body["id"].as_str()), (200, Some(alice.as_str())), "{body}");
    assert!(body.get("token").is_none(), "no new token for a returning agent: {body}");
}

#[tokio::test]
async fn a_revoked_token_is_refused_at_the_next_request() {
    let dir = tempfile::tempdir().unwrap();
    let hub = token_hub(dir.path());
    let (agent, first) = register(&hub, "worker", false).await;
    let tokens_path = format!("/api/agents/{agent}/tokens");
    let (status, second) = hub.post(&tokens_path, None, json!({})).await;
    assert_eq!(status, 201, "{second}");
    let second_token = second["token"].as_str().unwrap();
    assert_ne!(second_token, first);

    let (status, _) = send(as_bearer(&hub, Method::GET, "/api/poll", second_token, None)).await;
    assert_eq!(status, 200);
    let (status, listed) = hub.get(&tokens_path, None).await;
    assert_eq!(status, 200, "{listed}");
    let listed = listed["tokens"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 2);
    assert!(
        listed.iter().all(|token| token.get("token").is_none()),
        "a list never shows a token: {listed:?}"
    );

    let revoke_path = format!("{tokens_path}/{}", second["id"].as_str().unwrap());
    let (status, revoked) = send(hub.request(Method::DELETE, &revoke_path, None)).await;
    assert_eq!(status, 200, "{revoked}");
    assert!(revoked["revokedAt"].is_string(), "{revoked}");
    let (status, body) = send(as_bearer(&hub, Method::GET, "/api/poll", second_token, None)).await;
    assert_eq!(status, 401, "{body}");
    assert!(body["error"].is_string(), "{body}");
    // The other token still works; revoking twice is a conflict; junk ids are a 400.
    let (status, _) = send(as_bearer(&hub, Method::GET, "/api/poll", &first, None)).await;
    assert_eq!(status, 200);
    let (status, _) = send(hub.request(Method::DELETE, &revoke_path, None)).await;
    assert_eq!(status, 409);
    let (status, body) = send(hub.request(Method::DELETE, &format!("{tokens_path}/nope"), None)).await;
    assert_eq!(status, 400, "{body}");
    // A made-up token, or none, is no one.
    let (status, _) =
        send(as_bearer(&hub, Method::GET, "/api/poll", &format!("swt_{}", "0".repeat(64)), None)).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn the_operator_key_administers_but_cannot_act_as_an_agent() {
    let dir = tempfile::tempdir().unwrap();
    let hub = token_hub(dir.path());
    let (worker, worker_token) = register(&hub, "worker", false).await;
    let (status, task) = hub.post("/api/tasks", None, json!({"task": "work", "agentId": worker})).await;
    assert_eq!(status, 201, "{task}");
    let task_id = task["id"].as_str().unwrap().to_string();

    for (method, path) in [
        (Method::GET, "/api/poll".to_string()),
        (Method::POST, format!("/api/tasks/{task_id}/start")),
        (Method::GET, "/api/mail".to_string()),
        (Method::GET, "/api/events".to_string()),
    ] {
        let (status, body) = send(hub.request(method.clone(), &path, Some(&worker))).await;
        assert_eq!(status, 403, "{method} {path}: {body}");
        let message = body["error"].as_str().unwrap();
        assert!(message.contains(&format!("POST /api/agents/{worker}/tokens")), "names the token: {message}");
    }
    // Re-registering an existing agent needs that agent's token.
    let (status, body) =
        hub.post("/api/agents", Some(&worker), json!({"name": "worker", "maxTasks": 5})).await;
    assert_eq!(status, 403, "{body}");
    let (_, agent) = hub.get(&format!("/api/agents/{worker}"), None).await;
    assert_eq!(agent["capacity"]["max"], 1, "nothing changed: {agent}");
    assert_eq!(task_status(&hub, &task_id).await, "pending");

    // It still administers: reads everything, cancels.
    let (status, _) = hub.get("/api/tasks", None).await;
    assert_eq!(status, 200);
    let (status, body) = hub.post(&format!("/api/tasks/{task_id}/cancel"), None, json!({})).await;
    assert_eq!(status, 200, "{body}");
    // And the agent with its token works as itself.
    let (status, _) = send(as_bearer(&hub, Method::GET, "/api/poll", &worker_token, None)).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn header_mode_takes_no_tokens_and_token_mode_needs_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(&sqlite_file(dir.path()), Some(KEY), &["--agent-auth", "header"]);
    let (status, agent) = hub.post("/api/agents", None, json!({"name": "w"})).await;
    assert_eq!(status, 201, "{agent}");
    assert!(agent.get("token").is_none(), "header mode issues no token: {agent}");
    let (status, token) =
        hub.post(&format!("/api/agents/{}/tokens", agent["id"].as_str().unwrap()), None, json!({})).await;
    assert_eq!(status, 201, "{token}");
    let (status, _) =
        send(as_bearer(&hub, Method::GET, "/api/tasks", token["token"].as_str().unwrap(), None)).await;
    assert_eq!(status, 401, "a token is not the key in header mode");

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        serve: swarm_hub::ServeArgs,
    }
    let db = dir.path().join("keyless.db");
    // A key is generated when none is given, so "no key" is only --insecure-no-auth.
    let flags = ["serve", "--agent-auth", "token", "--insecure-no-auth", "--db", db.to_str().unwrap()];
    let mut args = <Flags as clap::Parser>::try_parse_from(flags).unwrap();
    args.serve.api_key = None;
    let started = swarm_hub::Hub::start(&args.serve, swarm_hub::HubOptions::default()).await;
    assert!(
        matches!(started, Err(swarm_hub::HubError::TokenModeWithoutKey)),
        "token mode without a key must not start"
    );
}

#[tokio::test]
async fn mcp_follows_the_token_and_lead_tools_need_a_leads_token() {
    let dir = tempfile::tempdir().unwrap();
    let hub = token_hub(dir.path());
    let (worker, worker_token) = register(&hub, "worker", false).await;
    let (lead, lead_token) = register(&hub, "boss", true).await;

    for revision in [Revision::Initialize, Revision::Stateless] {
        // The worker's token is the worker, whatever it claims to be.
        let as_worker = connect_http_with(&hub, Some(&worker_token), None, revision).await;
        let me = ok(&as_worker, "my-agent-info", json!({})).await;
        assert_eq!(me["yourAgentId"], worker.as_str(), "{revision:?}");
        let reason = refused(&as_worker, "slack-list-channels", json!({})).await;
        assert!(reason.contains("lead only"), "{reason}");
        let reason = refused(&as_worker, "join-swarm", json!({"name": "boss", "requestedId": lead})).await;
        assert!(reason.contains("cannot act as agent"), "{reason}");

        let pretending = connect_http_with(&hub, Some(&worker_token), Some(&lead), revision).await;
        let reason = refused(&pretending, "inbox-delegate", json!({})).await;
        assert!(reason.contains("cannot act as agent"), "{reason}");

        // The operator key over MCP is no agent either.
        let operator = connect_http_with(&hub, Some(KEY), Some(&lead), revision).await;
        let reason = refused(&operator, "my-agent-info", json!({})).await;
        assert!(reason.contains("token"), "{reason}");
    }
    // The lead's own token reaches the lead's tools.
    let as_lead = connect_http_with(&hub, Some(&lead_token), None, Revision::Initialize).await;
    let me = ok(&as_lead, "my-agent-info", json!({})).await;
    assert_eq!(me["yourAgentId"], lead.as_str());
}

/// A runner given the agent's token (and, in its environment, the operator key too)
/// completes a task end to end: the stand-in agent reports through MCP with what the
/// runner handed it, which must be the token, since the key cannot act as the agent.
#[tokio::test]
async fn a_runner_in_token_mode_completes_a_task_with_the_agents_token() {
    let dir = tempfile::tempdir().unwrap();
    let hub = token_hub(dir.path());
    let (agent, token) = register(&hub, "tokened", false).await;
    let setup = crate::runner::RunnerSetup {
        agent_id: agent.clone(),
        ..crate::runner::RunnerSetup::worker(dir.path())
    }
    .env("API_KEY", KEY)
    .env("AGENT_TOKEN", token)
    .env("ACCEPT_READABLE_HUB_FILES", "1");
    let _runner = crate::runner::Runner::start(&hub, setup);
    let id = crate::runner::create(&hub, json!({"task": "Tidy the changelog", "agentId": agent})).await;
    let done = crate::runner::task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["output"], "stand-in finished: Tidy the changelog");
}

/// `swarm agent token create|list|revoke` as the operator types them.
#[tokio::test]
async fn the_cli_creates_lists_and_revokes_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let hub = token_hub(dir.path());
    let (agent, _) = register(&hub, "cli-agent", false).await;
    let swarm = |args: &[&str]| {
        let output = std::process::Command::new(crate::hub::SWARM)
            .args(args)
            .env("MCP_BASE_URL", &hub.base_url)
            .env("API_KEY", KEY)
            .env_remove("AGENT_ID")
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    let created = swarm(&["agent", "token", "create", "cli-agent", "--json"]);
    let token = created["token"].as_str().unwrap().to_string();
    let (status, _) = send(as_bearer(&hub, Method::GET, "/api/poll", &token, None)).await;
    assert_eq!(status, 200);
    let listed = swarm(&["agent", "token", "list", &agent, "--json"]);
    assert_eq!(listed["tokens"].as_array().unwrap().len(), 2, "{listed}");
    swarm(&["agent", "token", "revoke", "cli-agent", created["id"].as_str().unwrap(), "--json"]);
    let (status, _) = send(as_bearer(&hub, Method::GET, "/api/poll", &token, None)).await;
    assert_eq!(status, 401);
}

/// `swarm connect --agent-token` writes the token where each CLI reads it, literally (a
/// person's API_KEY, the operator key, must not win), 0600, and never prints it.
#[test]
fn connect_writes_the_agent_token_0600_and_masks_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let codex = dir.path().join("codex.toml");
    let token = format!("swt_{}", "ab".repeat(32));
    let output = std::process::Command::new(crate::hub::SWARM)
        .args([
            "connect",
            "--harness",
            "all",
            "--agent-token",
            &token,
            "--codex-config",
            codex.to_str().unwrap(),
        ])
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env("API_KEY", KEY)
        .env_remove("AGENT_TOKEN")
        .env_remove("AGENT_ID")
        .env_remove("MCP_BASE_URL")
        .env_remove("CODEX_HOME")
        .env_remove("CLAUDE_PROJECT_DIR")
        .output()
        .unwrap();
    let printed =
        String::from_utf8_lossy(&output.stdout).to_string() + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{printed}");
    assert!(!printed.contains(&token), "the token is never printed: {printed}");
    let mcp = std::fs::read_to_string(dir.path().join(".mcp.json")).unwrap();
    assert!(mcp.contains(&format!("\"Bearer {token}\"")), "Claude sends the token as it is: {mcp}");
    let codex_text = std::fs::read_to_string(&codex).unwrap();
    assert!(codex_text.contains(&format!("Bearer {token}")), "{codex_text}");
    for path in [dir.path().join(".mcp.json"), codex] {
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(KEY), "{} holds no operator key", path.display());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} is readable by its owner only", path.display());
    }
}
