//! The runner against agent CLIs that cannot work or must be stopped, as the real ones
//! behave: a CLI that is missing, refuses root, or exits at once on a bad key; a run
//! that worked but never reported; a task cancelled while its CLI runs. Real processes,
//! a real hub over loopback, small shell scripts as agents (`--harness-cmd`).

use std::{path::Path, time::Duration};

use serde_json::{Value, json};

use crate::{
    hub::{Hub, SWARM, sqlite_file},
    runner::{
        Runner, RunnerSetup, agent, create, event_types, eventually, is_alive, records, registered, task,
        task_in,
    },
};

/// An executable shell script named `name` in `dir`; its path.
pub(crate) fn script(dir: &Path, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

fn euid_is_root() -> bool {
    // `Uid: real effective saved fs`
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let uid = status.lines().find_map(|line| line.strip_prefix("Uid:")).unwrap();
    uid.split_whitespace().nth(1) == Some("0")
}

/// Claimed nothing: the task is still in the pool, the agent never registered.
async fn nothing_claimed(hub: &Hub, runner: &Runner, task_id: &str) {
    let seen = task(hub, task_id).await;
    assert_eq!(seen["status"], "unassigned", "{seen}\n{}", runner.output());
    assert!(!event_types(&seen).iter().any(|kind| kind == "task_claimed"), "{seen}");
    assert_eq!(agent(hub, &runner.agent_id).await, None, "the agent registered:\n{}", runner.output());
}

#[tokio::test]
async fn without_the_agent_cli_on_path_the_runner_stops_before_claiming_anything() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let pool = create(&hub, json!({"task": "Work for anyone"})).await;
    let empty = dir.path().join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    let setup = RunnerSetup {
        harness: Some("claude"),
        ..RunnerSetup::worker(dir.path()).env("PATH", empty.display().to_string())
    };
    let mut runner = Runner::start(&hub, setup);
    let status = runner.wait();
    assert!(!status.success(), "{}", runner.output());
    let output = runner.output();
    assert!(output.contains("claude is not found") && output.contains("npm install"), "{output}");
    assert!(output.contains("nothing was claimed"), "{output}");
    nothing_claimed(&hub, &runner, &pool).await;
}

/// As root, Claude Code refuses `--dangerously-skip-permissions` without `IS_SANDBOX=1`:
/// the runner says so before it claims anything. (As a normal user the same setup works.)
#[tokio::test]
async fn claude_as_root_without_is_sandbox_is_refused_before_any_claim() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let pool = create(&hub, json!({"task": "Work for anyone"})).await;
    let setup = RunnerSetup { harness: Some("claude"), ..RunnerSetup::worker(dir.path()) };
    let mut setup = setup;
    // The harness setup sets IS_SANDBOX=1; an empty value is no sandbox.
    setup.env.push(("IS_SANDBOX", String::new()));
    let mut runner = Runner::start(&hub, setup);
    if euid_is_root() {
        let status = runner.wait();
        assert!(!status.success(), "{}", runner.output());
        let output = runner.output();
        assert!(output.contains("IS_SANDBOX=1") && output.contains("normal user"), "{output}");
        nothing_claimed(&hub, &runner, &pool).await;
    } else {
        let done = task_in(&hub, &pool, &["completed", "failed"]).await;
        assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    }
}

#[tokio::test]
async fn a_harness_command_line_with_arguments_runs_and_a_broken_one_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let broken =
        RunnerSetup { harness_cmd: Some("sh 'unbalanced".into()), ..RunnerSetup::worker(dir.path()) };
    let mut refused = Runner::start(&hub, broken);
    assert!(!refused.wait().success());
    assert!(refused.output().contains("not a valid command line"), "{}", refused.output());

    // `sh <script> --first`: the line's words, then what follows `--` (`stand-in-agent`),
    // then the prompt.
    let agent_script = script(
        dir.path(),
        "my agent.sh",
        &format!("echo \"$1\" > \"$0.first\"\nshift 2\nexec '{SWARM}' stand-in-agent \"$@\""),
    );
    let line = format!("sh '{agent_script}' --first");
    let setup = RunnerSetup { harness_cmd: Some(line), ..RunnerSetup::worker(dir.path()) };
    let runner = Runner::start(&hub, setup);
    registered(&hub, &runner).await;
    let id = create(&hub, json!({"task": "Say hello", "agentId": runner.agent_id})).await;
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    assert_eq!(records(dir.path()).len(), 1);
    assert_eq!(std::fs::read_to_string(format!("{agent_script}.first")).unwrap(), "--first\n");
}

/// A CLI refusing its key exits at once: the task goes back to the queue (never failed)
/// with the CLI's words on it, the runner backs off and after three such failures stops
/// taking work, saying so on the hub.
#[tokio::test]
async fn a_cli_that_fails_at_once_gives_the_task_back_and_three_in_a_row_stop_the_runner() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let cli = script(
        dir.path(),
        "bad-key.sh",
        "echo \"$$\" >> \"$0.runs\"\necho 'API Error: 401 invalid x-api-key' >&2\nexit 1",
    );
    let setup = RunnerSetup { harness_cmd: Some(cli.clone()), ..RunnerSetup::worker(dir.path()) };
    let mut runner = Runner::start(&hub, setup);
    registered(&hub, &runner).await;
    let id = create(&hub, json!({"task": "Fix the build", "agentId": runner.agent_id})).await;

    let status = runner.wait();
    assert!(!status.success(), "{}", runner.output());
    let output = runner.output();
    assert!(output.contains("3 times in a row") && output.contains("401 invalid x-api-key"), "{output}");
    assert!(output.contains("taking work again in"), "it backed off:\n{output}");
    let runs = std::fs::read_to_string(format!("{cli}.runs")).unwrap();
    assert_eq!(runs.lines().count(), 3, "{runs}");

    let seen = task(&hub, &id).await;
    assert_eq!(seen["status"], "unassigned", "back in the queue: {seen}");
    assert!(seen["failureReason"].is_null(), "{seen}");
    assert!(seen["progress"].as_str().unwrap().contains("401 invalid x-api-key"), "{seen}");
    let failed = seen["logs"].as_array().unwrap().iter().any(|event| event["newValue"] == "failed");
    assert!(!failed, "a task that never ran was failed: {seen}");
    let released = event_types(&seen).iter().filter(|kind| *kind == "task_released").count();
    assert_eq!(released, 3, "{seen}");

    let me = agent(&hub, &runner.agent_id).await.unwrap();
    assert_eq!(me["status"], "offline", "{me}");
    let (_, channels) = hub.get("/api/channels", None).await;
    let general =
        channels["channels"].as_array().unwrap().iter().find(|channel| channel["name"] == "general");
    let general = general.unwrap()["id"].as_str().unwrap().to_string();
    let (_, messages) = hub.get(&format!("/api/channels/{general}/messages?limit=10"), None).await;
    let said: Vec<&Value> = messages["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["agentId"] == runner.agent_id.as_str())
        .collect();
    assert_eq!(said.len(), 1, "{messages}");
    let content = said[0]["content"].as_str().unwrap();
    assert!(
        content.contains("stopped taking work") && content.contains("401 invalid x-api-key"),
        "{content}"
    );
}

/// A run that did something and then died without reporting fails its task, and the
/// reason carries the model's last words and the CLI's stderr.
#[tokio::test]
async fn a_run_that_worked_and_died_unreported_fails_with_its_last_words_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let cli = script(
        dir.path(),
        "dies.sh",
        r#"echo '{"type":"assistant","message":{"model":"m","content":[{"type":"text","text":"Halfway through the refactor"}]}}'
echo 'panic: index out of range' >&2
exit 2"#,
    );
    let setup =
        RunnerSetup { harness_cmd: Some(cli), flags: vec!["--yolo"], ..RunnerSetup::worker(dir.path()) };
    let runner = Runner::start(&hub, setup);
    registered(&hub, &runner).await;
    let id = create(&hub, json!({"task": "Refactor", "agentId": runner.agent_id})).await;
    let done = task_in(&hub, &id, &["completed", "failed", "unassigned"]).await;
    assert_eq!(done["status"], "failed", "{done}\n{}", runner.output());
    let reason = done["failureReason"].as_str().unwrap();
    assert!(reason.contains("without reporting"), "{reason}");
    assert!(
        reason.contains("Halfway through the refactor") && reason.contains("panic: index out of range"),
        "{reason}"
    );
}

/// Cancelling a task at the hub stops its CLI and everything the CLI started, within
/// seconds; the task stays cancelled and the runner takes the next task.
#[tokio::test]
async fn cancelling_a_task_stops_the_cli_process_tree_within_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let pids = dir.path().join("pids");
    let cli = script(
        dir.path(),
        "long.sh",
        &format!("sleep 300 &\necho \"$! $$\" > '{}.tmp' && mv '{0}.tmp' '{0}'\nwait", pids.display()),
    );
    let setup = RunnerSetup { harness_cmd: Some(cli), ..RunnerSetup::worker(dir.path()) };
    let runner = Runner::start(&hub, setup);
    registered(&hub, &runner).await;
    let id = create(&hub, json!({"task": "A long job", "agentId": runner.agent_id})).await;
    let running: Vec<u64> = eventually("the CLI and its child to run", || async {
        let text = std::fs::read_to_string(&pids).ok()?;
        Some(text.split_whitespace().map(|pid| pid.parse().unwrap()).collect())
    })
    .await;
    assert_eq!(running.len(), 2);
    assert!(running.iter().all(|pid| is_alive(*pid)));

    let cancelled_at = std::time::Instant::now();
    let (status, body) =
        hub.post(&format!("/api/tasks/{id}/cancel"), None, json!({"reason": "not needed"})).await;
    assert_eq!(status, 200, "{body}");
    eventually("the CLI's process tree to end", || async {
        running.iter().all(|pid| !is_alive(*pid)).then_some(())
    })
    .await;
    assert!(cancelled_at.elapsed() < Duration::from_secs(10), "took {:?}", cancelled_at.elapsed());
    assert!(runner.output().contains("cancelled"), "{}", runner.output());

    // The task stays cancelled, and the runner goes on with the next one.
    std::fs::remove_file(&pids).unwrap();
    let next = create(&hub, json!({"task": "Next", "agentId": runner.agent_id})).await;
    eventually("the next task to start", || async { pids.exists().then_some(()) }).await;
    assert_eq!(task(&hub, &id).await["status"], "cancelled");
    assert_eq!(task(&hub, &next).await["status"], "in_progress");
}

/// Runners tell the hub whether they could start the agent CLI, and `/metrics` counts it
/// (`swarm_runner_spawns_total`): a run that started, then a CLI gone from the disk
/// between two tasks, whose task goes back to the queue with the reason.
#[tokio::test]
async fn the_hub_counts_the_agent_cli_starts_and_failed_starts_runners_report() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let spawns = |outcome: &'static str| {
        let hub = &hub;
        async move {
            let labels = [("cli", "other"), ("outcome", outcome)];
            crate::metrics::scrape(hub).await.value("swarm_runner_spawns_total", &labels).unwrap_or(0.0)
        }
    };
    let cli = script(dir.path(), "agent.sh", &format!("exec '{SWARM}' \"$@\""));
    let setup = RunnerSetup { harness_cmd: Some(cli.clone()), ..RunnerSetup::worker(dir.path()) };
    let runner = Runner::start(&hub, setup);
    registered(&hub, &runner).await;

    let id = create(&hub, json!({"task": "Say hello", "agentId": runner.agent_id})).await;
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    eventually("one start counted", || async { (spawns("started").await == 1.0).then_some(()) }).await;
    assert_eq!(spawns("not_started").await, 0.0);

    std::fs::remove_file(&cli).unwrap();
    let id = create(&hub, json!({"task": "Say it again", "agentId": runner.agent_id})).await;
    eventually("a failed start counted", || async { (spawns("not_started").await >= 1.0).then_some(()) })
        .await;
    let given_back = eventually("the task given back", || async {
        let seen = task(&hub, &id).await;
        (seen["status"] == "unassigned").then_some(seen)
    })
    .await;
    assert!(given_back["progress"].as_str().unwrap_or("").contains("agent.sh"), "{given_back}");
    assert_eq!(spawns("started").await, 1.0, "a CLI that cannot start is not counted as started");
}
