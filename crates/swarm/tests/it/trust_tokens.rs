//! Issue 39, token mode from the attacker's side on one OS user: an agent started with
//! only its token must not find the operator key where the hub's user keeps it, a runner
//! that could read the hub's key or database says so instead of pretending to isolate,
//! and `swarm mcp --db` is not a way around the token. Issue 44: `swarm mcp` follows the
//! hub's lease policy and rescues nothing on its own. Also the secret flags seen by `ps`
//! and the weak keys a hub refuses.

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use serde_json::{Value, json};

use crate::{
    hub::{Database, Hub, SWARM, sqlite_file},
    mcp_client::{connect_stdio, ok},
    support::eventually,
};

const KEY: &str = "trust-tokens-operator-key";

/// Registers an agent with the operator key; its id and first token.
async fn register(hub: &Hub, name: &str, lead: bool) -> (String, String) {
    let (status, body) = hub.post("/api/agents", None, json!({"name": name, "isLead": lead})).await;
    assert_eq!(status, 201, "{body}");
    (body["id"].as_str().unwrap().to_string(), body["token"]["token"].as_str().unwrap().to_string())
}

fn key_file_for_port(home: &std::path::Path, hub: &Hub) -> std::path::PathBuf {
    let port = hub.base_url.rsplit(':').next().unwrap();
    home.join(".config").join("swarm").join("keys").join(format!("localhost-{port}.key"))
}

/// The attack: a hub in token mode with a generated key, and an agent running as the
/// same user that reads `~/.config/swarm/keys/localhost-<port>.key` to mint itself a
/// lead's token. In token mode the hub leaves no copy there unless asked.
#[test]
fn a_token_hub_leaves_no_key_where_its_agents_can_read_it() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let hub = Hub::spawn_generating_key(&sqlite_file(dir.path()), &home, &["--agent-auth", "token"]);
    let copy = key_file_for_port(&home, &hub);
    assert!(!copy.exists(), "token mode left the operator key in {}", copy.display());
    assert!(!hub.banner.iter().any(|line| line.contains("read it from")), "{:#?}", hub.banner);
    drop(hub);

    // Asked for by flag, it is there (a one-user set-up that accepts what that means).
    let other = tempfile::tempdir().unwrap();
    let hub = Hub::spawn_generating_key(
        &sqlite_file(other.path()),
        &home,
        &["--agent-auth", "token", "--share-local-key", "on"],
    );
    assert!(key_file_for_port(&home, &hub).exists(), "{:#?}", hub.banner);
}

fn worker_command(hub: &Hub, dir: &std::path::Path, agent: &str, token: &str) -> Command {
    let mut command = Command::new(SWARM);
    command
        .args(["worker", "--skip-preflight", "--harness", "cmd", "--harness-cmd", "true", "--log-dir"])
        .arg(dir.join("logs"))
        .current_dir(dir)
        .env("MCP_BASE_URL", &hub.base_url)
        .env("AGENT_ID", agent)
        .env("AGENT_TOKEN", token)
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .env_remove("API_KEY")
        .env_remove("ACCEPT_READABLE_HUB_FILES")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    command
}

/// The attack: the README's one-user set-up in token mode. The runner (and the agent it
/// would start) can open the hub's database, so its token isolates nothing: it refuses
/// to start, names the files and what to do, and takes no work.
#[tokio::test]
async fn a_runner_with_a_token_refuses_to_start_when_it_can_read_the_hubs_files() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let hub = Hub::start_with(&database, Some(KEY), &["--agent-auth", "token"]);
    let (agent, token) = register(&hub, "same-user", false).await;
    let (status, task) = hub.post("/api/tasks", None, json!({"task": "stay here", "agentId": agent})).await;
    assert_eq!(status, 201, "{task}");

    let output = tokio::task::spawn_blocking({
        let mut command = worker_command(&hub, dir.path(), &agent, &token);
        move || command.output().unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the runner started: {stderr}");
    let Database::SqliteFile(db) = &database else { unreachable!() };
    assert!(stderr.contains(&db.display().to_string()), "names the database: {stderr}");
    assert!(stderr.contains("--accept-readable-hub-files"), "says what to do: {stderr}");
    let (_, after) = hub.get(&format!("/api/tasks/{}", task["id"].as_str().unwrap()), None).await;
    assert_eq!(after["status"], "pending", "the refused runner took work: {after}");

    // Accepted by flag: it starts, and says loudly why it should not have.
    let mut child = worker_command(&hub, dir.path(), &agent, &token)
        .env("ACCEPT_READABLE_HUB_FILES", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let lines = tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stderr).lines().map_while(Result::ok).find(|line| line.contains("WARNING"))
    });
    let warning = tokio::time::timeout(Duration::from_secs(60), lines).await.unwrap().unwrap();
    assert!(warning.is_some_and(|line| line.contains("isolates nothing")));
    let _ = child.kill();
    let _ = child.wait();
}

fn swarm_mcp(database: &Database, env: &[(&str, &str)]) -> std::process::Output {
    let Database::SqliteFile(db) = database else { unreachable!() };
    let mut command = Command::new(SWARM);
    command
        .arg("mcp")
        .arg("--db")
        .arg(db)
        .env_remove("AGENT_ID")
        .env_remove("AGENT_TOKEN")
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().unwrap()
}

/// The attack: an agent of a token hub runs `swarm mcp --db` on the hub's database and
/// names the lead as its AGENT_ID. Stdio is no longer trusted as header mode: it needs
/// a live token, and speaks for that token's agent only.
#[tokio::test]
async fn swarm_mcp_on_a_token_hubs_database_needs_the_agents_token() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let hub = Hub::start_with(&database, Some(KEY), &["--agent-auth", "token"]);
    let (lead, _) = register(&hub, "the-lead", true).await;
    let (worker, worker_token) = register(&hub, "a-worker", false).await;

    let as_lead = swarm_mcp(&database, &[("AGENT_ID", &lead)]);
    let stderr = String::from_utf8_lossy(&as_lead.stderr);
    assert!(!as_lead.status.success(), "swarm mcp served as the lead without a token");
    assert!(stderr.contains("AGENT_TOKEN"), "{stderr}");

    let lying = swarm_mcp(&database, &[("AGENT_ID", &lead), ("AGENT_TOKEN", &worker_token)]);
    let stderr = String::from_utf8_lossy(&lying.stderr);
    assert!(!lying.status.success() && stderr.contains("belongs to agent"), "{stderr}");

    let forged = swarm_mcp(&database, &[("AGENT_TOKEN", "swt_0000")]);
    assert!(!forged.status.success(), "a made-up token was accepted");

    // Its own token: served as itself, whatever else it could name.
    let client = connect_stdio(&database, None, &[("AGENT_TOKEN", &worker_token)]).await;
    let me = ok(&client, "my-agent-info", json!({})).await;
    assert_eq!(me["agent"]["id"], worker, "{me}");
    client.cancel().await.unwrap();
}

/// Issue 44: a hub told never to hand a gone agent's work back
/// (`REASSIGN_AFTER_SECONDS=0`) and given long leases, with a `swarm mcp` alive on its
/// database: the stdio process used to rescue on its own defaults (45 s leases, hand-back
/// after 10 minutes). It must hand nothing back and mark nobody offline.
#[tokio::test]
async fn swarm_mcp_hands_nothing_back_on_a_policy_the_hub_was_not_given() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let hub = Hub::start_with(
        &database,
        None,
        &["--agent-auth", "header", "--reassign-after-seconds", "0", "--lease-seconds", "3600"],
    );
    let agent = crate::mcp_client::new_agent_id();
    let (status, body) =
        hub.post("/api/agents", Some(&agent), json!({"name": "held", "isLead": false})).await;
    assert!(status == 200 || status == 201, "{body}");
    let (_, task) = hub.post("/api/tasks", None, json!({"task": "keep it", "agentId": agent})).await;
    let task_id = task["id"].as_str().unwrap().to_string();
    let (status, polled) = hub.poll_as_runner(&agent, 0).await;
    assert_eq!(status, 200, "{polled}");
    let (_, held) = hub.get(&format!("/api/tasks/{task_id}"), None).await;
    assert_eq!(held["status"], "in_progress", "{held}");
    drop(hub);

    // The agent silent for two hours and its claim's lease long gone, as far as the
    // database says: what a `swarm mcp` on default settings would rescue at once.
    let Database::SqliteFile(db) = &database else { unreachable!() };
    let pool = sqlx::SqlitePool::connect(&format!("sqlite:{}", db.display())).await.unwrap();
    let two_hours_ago = chrono::Utc::now().timestamp_millis() - 2 * 3600 * 1000;
    sqlx::query("UPDATE agents SET last_seen_at = ?1 WHERE id = ?2")
        .bind(two_hours_ago)
        .bind(&agent)
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("UPDATE tasks SET lease_expires_at = ?1 WHERE id = ?2")
        .bind(two_hours_ago)
        .bind(&task_id)
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;

    let client = connect_stdio(&database, Some(&agent), &[]).await;
    // Two of the old rescuer's 5 s intervals (its first pass ran at start): nothing
    // signals a pass that did nothing, so this watches for the whole window.
    let watched_until = std::time::Instant::now() + Duration::from_secs(11);
    while std::time::Instant::now() < watched_until {
        let details = ok(&client, "get-task-details", json!({"taskId": task_id})).await;
        let task = &details["task"];
        assert_eq!(task["status"], "in_progress", "swarm mcp rescued the task: {details}");
        assert_eq!(task["agentId"], Value::String(agent.clone()), "{details}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    client.cancel().await.unwrap();
}

/// `swarm mcp` serves with the lease policy the hub wrote, not its own defaults.
#[tokio::test]
async fn the_hub_writes_its_policy_for_every_process_on_its_database() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let _hub = Hub::start_with(
        &database,
        Some(KEY),
        &["--agent-auth", "token", "--lease-seconds", "77", "--reassign-after-seconds", "0"],
    );
    let Database::SqliteFile(db) = &database else { unreachable!() };
    let store = swarm_store_sqlite::SqliteStore::open(db).await.unwrap();
    let store: std::sync::Arc<dyn swarm_store::Store> = std::sync::Arc::new(store);
    let settings = eventually("the hub's settings", || {
        let store = store.clone();
        async move { swarm_service::settings::read_hub_settings(&store).await.unwrap() }
    })
    .await;
    assert_eq!(settings.agent_auth, swarm_service::AgentAuth::Token);
    assert_eq!(settings.lease.period, Duration::from_secs(77));
    assert!(settings.lease.reassign_after.is_zero());
}

/// `API_KEY=a` used to be accepted: anyone who reaches the hub could guess it.
#[test]
fn a_hub_refuses_a_key_short_enough_to_guess() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(SWARM)
        .args(["serve", "--port", "0", "--db"])
        .arg(dir.path().join("swarm.db"))
        .env("API_KEY", "a")
        .env_remove("API_KEY_FILE")
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a hub served with API_KEY=a");
    assert!(stderr.contains("at least 16") && stderr.contains("openssl rand -hex 32"), "{stderr}");
}

/// A key on the command line is in `ps` for every user: the command says so and names
/// the variable to use.
#[test]
fn a_secret_given_as_a_flag_is_warned_about() {
    let output = Command::new(SWARM)
        .args(["task", "list", "--url", "http://127.0.0.1:9", "--api-key", "a-key-in-ps-output-0123"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--api-key on the command line") && stderr.contains("API_KEY"), "{stderr}");
}

/// The attack: a hub stops, and whatever listens on its port next is offered its key by
/// the user's local commands, which read the per-port copy. A hub that stops takes its
/// copy with it.
#[test]
fn a_stopped_hub_takes_its_local_key_copy_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let hub = Hub::spawn_generating_key(&sqlite_file(dir.path()), &home, &[]);
    let copy = key_file_for_port(&home, &hub);
    assert!(copy.exists(), "header mode leaves the key for local commands: {:#?}", hub.banner);
    assert!(hub.terminate(), "the hub stops on SIGTERM");
    assert!(!copy.exists(), "the stopped hub left its key in {}", copy.display());
}

/// The attack (token mode): an agent writes session logs into another agent's task and
/// records costs in another agent's name, one of them 1e300 dollars. Logs and costs
/// belong to their caller; a cost is a number a run can have.
#[tokio::test]
async fn logs_and_costs_belong_to_their_caller() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(&sqlite_file(dir.path()), Some(KEY), &["--agent-auth", "token"]);
    let (mallory, mallory_token) = register(&hub, "mallory", false).await;
    let (victim, victim_token) = register(&hub, "victim", false).await;
    let (_, task) = hub.post("/api/tasks", None, json!({"task": "the victim's", "agentId": victim})).await;
    let task_id = task["id"].as_str().unwrap().to_string();
    let as_agent = |token: &str, path: &str, body: Value| {
        reqwest::Client::new().post(hub.url(path)).bearer_auth(token).json(&body)
    };
    let logs = |task: &str| json!({"sessionId": "s1", "iteration": 1, "taskId": task, "lines": ["{\"forged\":true}"]});
    let cost = |agent: &str, usd: f64| json!({"sessionId": "s1", "agentId": agent, "taskId": task_id, "totalCostUsd": usd, "isError": false});

    let (status, body) =
        crate::hub::send(as_agent(&mallory_token, "/api/session-logs", logs(&task_id))).await;
    assert_eq!(status, 403, "logs written into another agent's task: {body}");
    let (status, body) =
        crate::hub::send(as_agent(&mallory_token, "/api/session-costs", cost(&victim, 1.0))).await;
    assert_eq!(status, 403, "a cost recorded in another agent's name: {body}");
    let (status, body) =
        crate::hub::send(as_agent(&mallory_token, "/api/session-costs", cost(&mallory, 1.0))).await;
    assert_eq!(status, 403, "a cost on a task mallory never held: {body}");
    let (status, body) =
        crate::hub::send(as_agent(&victim_token, "/api/session-costs", cost(&victim, 1e300))).await;
    assert_eq!(status, 400, "a cost of 1e300: {body}");
    assert!(body["error"].as_str().unwrap().contains("totalCostUsd"), "{body}");

    let (_, logs_now) = hub.get(&format!("/api/tasks/{task_id}/session-logs"), None).await;
    assert_eq!(logs_now["logs"].as_array().map(Vec::len), Some(0), "{logs_now}");
    let (_, costs) = hub.get("/api/session-costs", None).await;
    assert_eq!(costs["costs"].as_array().map(Vec::len), Some(0), "{costs}");

    // The task's own agent reports on it.
    let (status, body) = crate::hub::send(as_agent(&victim_token, "/api/session-logs", logs(&task_id))).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) =
        crate::hub::send(as_agent(&victim_token, "/api/session-costs", cost(&victim, 0.25))).await;
    assert_eq!(status, 201, "{body}");
    let _ = mallory;
}
