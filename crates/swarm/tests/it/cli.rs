//! The client commands (`swarm task|agent|stats`) run as a user would, against a real hub.

use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::hub::{Hub, SWARM, sqlite_file};

const KEY: &str = "cli-test-key-0123456789";

fn swarm(hub_url: &str, key: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(SWARM);
    command.args(args).env("MCP_BASE_URL", hub_url).env_remove("AGENT_ID").env_remove("API_KEY");
    if let Some(key) = key {
        command.env("API_KEY", key);
    }
    command.output().expect("the swarm binary runs")
}

fn stdout_json(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "exit {:?}, stderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!("--json prints JSON ({err}): {}", String::from_utf8_lossy(&output.stdout))
    })
}

#[tokio::test]
async fn task_agent_and_stats_commands_drive_a_hub() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let url = hub.base_url.clone();
    let agent = uuid::Uuid::new_v4().to_string();
    let (status, _) =
        hub.post("/api/agents", Some(&agent), json!({"name": "cli-worker", "maxTasks": 2})).await;
    assert_eq!(status, 201);

    let created = stdout_json(&swarm(
        &url,
        Some(KEY),
        &["task", "create", "Ship the CLI", "--agent", &agent, "--priority", "80", "--tag", "cli", "--json"],
    ));
    assert_eq!(created["status"], "pending");
    assert_eq!(created["priority"], 80);
    let task_id = created["id"].as_str().unwrap().to_string();

    let plain = swarm(&url, Some(KEY), &["task", "create", "A pool task"]);
    assert!(plain.status.success());
    let said = String::from_utf8(plain.stdout).unwrap();
    let pool_id = said.lines().next().unwrap().trim_start_matches("created task ").to_string();
    assert!(uuid::Uuid::parse_str(&pool_id).is_ok(), "create names the new task first: {said}");
    assert!(said.contains("unassigned") && said.contains("A pool task"), "and shows it: {said}");
    assert!(said.contains(&format!("swarm task show {pool_id}")), "and what to run next: {said}");
    let quiet = swarm(&url, Some(KEY), &["task", "create", "-q", "Another pool task"]);
    let quiet_id = String::from_utf8(quiet.stdout).unwrap().trim().to_string();
    assert!(uuid::Uuid::parse_str(&quiet_id).is_ok(), "--quiet prints the id alone: {quiet_id:?}");

    let listed = stdout_json(&swarm(&url, Some(KEY), &["task", "list", "--status", "pending", "--json"]));
    assert_eq!(listed["total"], 1);
    assert_eq!(listed["tasks"][0]["id"], task_id.as_str());
    let table = swarm(&url, Some(KEY), &["task", "list"]);
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(table.contains("Ship the CLI") && table.contains("A pool task"), "{table}");

    // The table shows ids as people read them: their random last 8 hex digits (issue 49),
    // which the task commands take.
    let short_id = &task_id[task_id.len() - 8..];
    assert!(table.contains(short_id) && !table.contains(&task_id), "{table}");
    let by_short = stdout_json(&swarm(&url, Some(KEY), &["task", "show", short_id, "--json"]));
    assert_eq!(by_short["id"], task_id.as_str());
    let by_typed = stdout_json(&swarm(&url, Some(KEY), &["task", "show", &format!("…{short_id}"), "--json"]));
    assert_eq!(by_typed["id"], task_id.as_str(), "as the dashboard shows it");
    let missing = swarm(&url, Some(KEY), &["task", "show", "0badf00d"]);
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(
        !missing.status.success() && said.contains("0badf00d") && said.contains("swarm task list"),
        "{said}"
    );
    let garbled = swarm(&url, Some(KEY), &["task", "show", "not-an-id"]);
    let said = String::from_utf8_lossy(&garbled.stderr);
    assert!(!garbled.status.success() && said.contains("4 to 12 hex digits"), "{said}");

    let shown = stdout_json(&swarm(&url, Some(KEY), &["task", "show", &task_id, "--json"]));
    assert_eq!(shown["task"], "Ship the CLI");
    assert!(shown["logs"].as_array().is_some_and(|logs| !logs.is_empty()));

    let (status, _) = hub.post(&format!("/api/tasks/{task_id}/start"), Some(&agent), json!({})).await;
    assert_eq!(status, 200);
    let finished =
        stdout_json(&swarm(&url, Some(KEY), &["task", "finish", &task_id, "--output", "shipped", "--json"]));
    assert_eq!(finished["alreadyFinished"], false);
    assert_eq!(finished["task"]["status"], "completed");
    let again = swarm(&url, Some(KEY), &["task", "finish", &task_id, "--failed", "--reason", "late"]);
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stdout).contains("already finished"));
    // A task nobody started cannot be finished: the hub changes nothing, the CLI says so.
    let unstarted = swarm(&url, Some(KEY), &["task", "finish", &pool_id]);
    assert!(!unstarted.status.success());
    let said = String::from_utf8_lossy(&unstarted.stderr);
    assert!(said.contains("unassigned") && said.contains("only a task in progress"), "{said}");

    let cancelled =
        stdout_json(&swarm(&url, Some(KEY), &["task", "cancel", &pool_id, "--reason", "dropped", "--json"]));
    assert_eq!(cancelled["task"]["status"], "cancelled");
    assert_eq!(cancelled["task"]["failureReason"], "dropped");

    let agents = stdout_json(&swarm(&url, Some(KEY), &["agent", "list", "--json"]));
    assert_eq!(agents["agents"][0]["name"], "cli-worker");
    let one = stdout_json(&swarm(&url, Some(KEY), &["agent", "show", &agent, "--json"]));
    assert_eq!(one["capacity"]["max"], 2);

    let stats = stdout_json(&swarm(&url, Some(KEY), &["stats", "--json"]));
    assert_eq!(stats["tasks"]["completed"], 1);
    assert_eq!(stats["tasks"]["cancelled"], 1);
    assert_eq!(stats["agents"]["total"], 1);
}

#[tokio::test]
async fn errors_say_what_to_do_next() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));

    let unauthorized = swarm(&hub.base_url, Some("wrong-key"), &["stats"]);
    assert!(!unauthorized.status.success());
    let stderr = String::from_utf8_lossy(&unauthorized.stderr);
    assert!(stderr.contains("API_KEY"), "a 401 points at API_KEY: {stderr}");

    let unknown = swarm(&hub.base_url, Some(KEY), &["task", "show", "6f1c2a9e-1111-4a4a-8b8b-000000000000"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("not found"));

    drop(hub);
    let down = swarm("http://127.0.0.1:9", Some(KEY), &["task", "list"]);
    assert!(!down.status.success());
    let stderr = String::from_utf8_lossy(&down.stderr);
    assert!(
        stderr.contains("swarm serve") || stderr.contains("MCP_BASE_URL"),
        "says how to reach a hub: {stderr}"
    );
}

#[test]
fn help_lists_every_command_and_flag() {
    let help = Command::new(SWARM).args(["task", "create", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--agent",
        "--offer-to",
        "--priority",
        "--tag",
        "--depends-on",
        "--backlog",
        "--url",
        "--api-key",
        "--json",
    ] {
        assert!(text.contains(flag), "task create --help mentions {flag}");
    }
    let serve = Command::new(SWARM).args(["serve", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&serve.stdout);
    for flag in [
        "--port",
        "PORT",
        "--host",
        "--db",
        "DATABASE_PATH",
        "--database-url",
        "DATABASE_URL",
        "--api-key",
        "API_KEY",
        "--api-key-file",
        "API_KEY_FILE",
        "--insecure-no-auth",
        "--retain-session-logs-days",
        "RETAIN_SESSION_LOGS_DAYS",
        "--retain-events-days",
        "--retain-delivered-triggers-days",
        "--retain-read-mail-days",
        "--retain-finished-tasks-days",
    ] {
        assert!(text.contains(flag), "serve --help mentions {flag}");
    }
    let flowing = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flowing.contains("but GET /health and the static pages"),
        "serve --help says what needs no key, as the README does: {text}"
    );
    // Tests set their clock and scheduler tick through `HubOptions`, never a flag: the
    // binary users run has no hidden test-only option.
    for hidden in ["--test-clock-file", "--scheduler-tick-ms", "--retention-every-ms"] {
        let refused = Command::new(SWARM).args(["serve", hidden, "1", "--port", "0"]).output().unwrap();
        assert!(!refused.status.success(), "swarm serve has no {hidden}");
        assert!(String::from_utf8_lossy(&refused.stderr).contains("unexpected argument"));
    }
}

#[tokio::test]
async fn trigger_commands_create_list_fire_and_disable() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let url = hub.base_url.clone();
    let created = stdout_json(&swarm(
        &url,
        Some(KEY),
        &[
            "trigger",
            "create",
            "nightly",
            "--type",
            "cron",
            "--schedule",
            "0 2 * * *",
            "--timezone",
            "Europe/Paris",
            "--prompt",
            "Review {{payload}}",
            "--tag",
            "nightly",
            "--json",
        ],
    ));
    assert_eq!(
        (created["name"].as_str(), created["timezone"].as_str()),
        (Some("nightly"), Some("Europe/Paris"))
    );
    let listed = swarm(&url, Some(KEY), &["trigger", "list"]);
    let table = String::from_utf8_lossy(&listed.stdout);
    assert!(table.contains("nightly") && table.contains("0 2 * * * (Europe/Paris)"), "{table}");
    let fired = stdout_json(&swarm(
        &url,
        Some(KEY),
        &["trigger", "fire", "nightly", "--payload", "the merges", "--json"],
    ));
    assert_eq!(fired["task"], "Review the merges");
    assert_eq!(fired["triggerName"], "nightly");
    let disabled = stdout_json(&swarm(&url, Some(KEY), &["trigger", "disable", "nightly", "--json"]));
    assert_eq!(disabled["enabled"], false);
    let listed = stdout_json(&swarm(&url, Some(KEY), &["trigger", "list", "--type", "cron", "--json"]));
    assert_eq!(listed["triggers"][0]["runCount"], 1);

    let refused = swarm(&url, Some(KEY), &["trigger", "create", "hook", "--type", "webhook"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("webhookPublic"));
    let missing = swarm(&url, Some(KEY), &["trigger", "fire", "nope"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("swarm trigger list"));
}
