//! When the real CLI cannot work, the environment is at fault, not the task: the runner refuses
//! to start when it can tell beforehand (Claude Code as root without `IS_SANDBOX`, a CLI that is
//! missing), and when the CLI fails at once (the model refuses the key, the model is down) or
//! waits for an unreachable model forever (Codex), the task goes back to the queue with the
//! reason on it, the runner says so in `#general`, and nothing that never ran is failed.

use serde_json::{Value, json};
use swarm_scripted_model::{Failure, Script, ScriptedModel};

use super::{Cli, RunnerProcess, World, complete, every_cli};

every_cli!(
    a_missing_cli_stops_the_runner_before_it_claims_anything,
    a_model_that_refuses_the_key_gives_the_task_back,
    a_model_that_is_down_gives_the_task_back
);

fn script() -> Script {
    Script::new().call_tool("store-progress", complete).reply("Reported.")
}

/// The task is still in the pool, never claimed, and the runner never registered its
/// agent (in token mode the operator registered it beforehand: it stays as registered).
async fn nothing_claimed(world: &World, runner: &RunnerProcess, task_id: &str) {
    let seen = world.task(task_id).await;
    assert_eq!(seen["status"], "unassigned", "{seen}\n{}", runner.output());
    assert!(seen["agentId"].is_null(), "{seen}");
    let (status, agent) = world.hub.get(&format!("/api/agents/{}", runner.agent_id), None).await;
    if world.hub.agent_token(&runner.agent_id).is_some() {
        assert_eq!(agent["lastUpdatedAt"], agent["createdAt"], "the runner never spoke to the hub: {agent}");
    } else {
        assert_eq!(status, 404, "the agent registered:\n{}", runner.output());
    }
}

/// Back in the queue, never failed, with the CLI's words on the task and in `#general`.
async fn given_back(world: &World, runner: &mut RunnerProcess, task_id: &str, said: &str) {
    // One environment failure is enough to stop (ENV_FAILURE_LIMIT=1).
    let status = runner.exited().await;
    assert!(!status.success(), "{}", runner.output());
    let seen = world.task(task_id).await;
    assert_eq!(seen["status"], "unassigned", "back in the queue: {seen}\n{}", runner.output());
    assert!(seen["failureReason"].is_null(), "{seen}");
    let progress = seen["progress"].as_str().unwrap_or_default();
    assert!(progress.contains(said), "the reason is on the task: {progress:?}\n{}", runner.output());
    let failed = seen["logs"].as_array().unwrap().iter().any(|event| event["newValue"] == "failed");
    assert!(!failed, "a task that never ran was failed: {seen}");

    let (_, channels) = world.hub.get("/api/channels", None).await;
    let general =
        channels["channels"].as_array().unwrap().iter().find(|channel| channel["name"] == "general");
    let general = general.unwrap()["id"].as_str().unwrap().to_string();
    let (_, messages) = world.hub.get(&format!("/api/channels/{general}/messages?limit=10"), None).await;
    let said_there: Vec<&Value> = messages["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["agentId"] == runner.agent_id.as_str())
        .collect();
    assert_eq!(said_there.len(), 1, "{messages}");
    let content = said_there[0]["content"].as_str().unwrap();
    assert!(content.contains("stopped taking work") && content.contains(said), "{content}");
}

fn running_as_root() -> bool {
    // `Uid: real effective saved fs`
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let uid = status.lines().find_map(|line| line.strip_prefix("Uid:")).unwrap();
    uid.split_whitespace().nth(1) == Some("0")
}

/// Claude Code only: Codex has no such refusal. As a normal user the same setup works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_as_root_without_is_sandbox_is_refused_before_any_claim() {
    let world = World::new(Cli::Claude, script()).await;
    let pool = world.create(json!({"task": "Work for anyone"})).await;
    let mut runner = world.runner("worker", &[("IS_SANDBOX", String::new())]);
    if running_as_root() {
        let status = runner.exited().await;
        assert!(!status.success(), "{}", runner.output());
        let output = runner.output();
        assert!(output.contains("IS_SANDBOX=1") && output.contains("normal user"), "{output}");
        nothing_claimed(&world, &runner, &pool).await;
    } else {
        let done = world.task_in(&pool, &["completed", "failed"], &runner).await;
        assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    }
}

async fn a_missing_cli_stops_the_runner_before_it_claims_anything(cli: Cli) {
    let world = World::new(cli, script()).await;
    let pool = world.create(json!({"task": "Work for anyone"})).await;
    // The machine's PATH without the pinned CLIs (and no CLI of that name on it).
    let path = std::env::var("PATH").unwrap_or_default();
    let empty = world.dir.path().join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    let path = format!("{}:{path}", empty.display());
    let mut runner = world.runner("worker", &[("PATH", path)]);
    let status = runner.exited().await;
    assert!(!status.success(), "{}", runner.output());
    let output = runner.output();
    assert!(
        output.contains(&format!("{} is not found", cli.name())) && output.contains("npm install"),
        "{output}"
    );
    assert!(output.contains("nothing was claimed"), "{output}");
    nothing_claimed(&world, &runner, &pool).await;
}

/// A 401 stops the run at once (issue 41), whatever the CLI would do next: Claude Code is
/// left to retry it (`CLAUDE_CODE_MAX_RETRIES` at its default: minutes of `api_retry`), and
/// nothing else can pass this test: the model would have to be unreachable for an hour
/// (`MODEL_UNREACHABLE_MS`) and no exit counts as quick (`QUICK_EXIT_MS=0`), so only the
/// refusal makes the run an environment failure and gives its task back, the reason on the
/// task, on the agent and in `#general`.
async fn a_model_that_refuses_the_key_gives_the_task_back(cli: Cli) {
    let world = World::new(cli, script()).await;
    world.model.set_failure(Some(Failure::Reply401));
    let mut env = vec![
        ("ENV_FAILURE_LIMIT", "1".to_string()),
        ("MODEL_UNREACHABLE_MS", "3600000".to_string()),
        ("QUICK_EXIT_MS", "0".to_string()),
    ];
    if cli == Cli::Claude {
        env.push(("CLAUDE_CODE_MAX_RETRIES", "10".to_string()));
    }
    let mut runner = world.runner("worker", &env);
    world.registered(&runner).await;
    let id = world.create(json!({"task": "Fix the build", "agentId": runner.agent_id})).await;
    given_back(&world, &mut runner, &id, "the model refused the agent CLI's key").await;
    let progress = world.task(&id).await["progress"].as_str().unwrap_or_default().to_string();
    assert!(
        progress.contains("401") || progress.contains("Invalid API key"),
        "in the CLI's words: {progress}"
    );
    let (_, agent) = world.hub.get(&format!("/api/agents/{}", runner.agent_id), None).await;
    let reason = agent["statusReason"].as_str().unwrap_or_default();
    assert!(reason.contains("the model refused"), "the reason is on the agent: {agent}");
}

/// Claude Code exits at once; Codex keeps reconnecting until the runner stops it
/// (`MODEL_UNREACHABLE_MS`).
async fn a_model_that_is_down_gives_the_task_back(cli: Cli) {
    let closed = ScriptedModel::closed_base_url().await;
    let model = ScriptedModel::start(script()).await;
    let world = World::with_model(cli, model, &format!("{closed}/v1")).await;
    let mut env = vec![("ENV_FAILURE_LIMIT", "1".to_string()), ("MODEL_UNREACHABLE_MS", "3000".to_string())];
    if cli == Cli::Claude {
        env.push(("ANTHROPIC_BASE_URL", closed.clone()));
    }
    if cli == Cli::Pi {
        world.point_pi_at(&closed);
    }
    if cli == Cli::Gemini {
        env.push(("GOOGLE_GEMINI_BASE_URL", closed.clone()));
    }
    if cli == Cli::Opencode {
        world.point_opencode_at(&closed);
    }
    let mut runner = world.runner("worker", &env);
    world.registered(&runner).await;
    let id = world.create(json!({"task": "Fix the build", "agentId": runner.agent_id})).await;
    // Claude Code's words changed: 2.1.197 says "API Error: Unable to connect to API
    // (ConnectionRefused)", 2.1.332 "API Error: Connection refused — ... (ECONNREFUSED)".
    let said = match cli {
        Cli::Claude => "API Error:",
        Cli::Codex => "Reconnecting",
        // pi gives up at once (no retries in the test's settings) and exits 0.
        Cli::Pi => "Connection error",
        // One attempt in the test's settings (ten by default, over minutes), then exit 1.
        Cli::Gemini => "fetch failed",
        // opencode retries five times over about 70 s (not configurable), then exits 1 with
        // an `error` event: however long that took, the runner hands the task back.
        Cli::Opencode => "Cannot connect to API",
    };
    given_back(&world, &mut runner, &id, said).await;
    assert!(world.model.conversations().is_empty(), "the model was never reached");
    if cli == Cli::Claude {
        let progress = world.task(&id).await["progress"].as_str().unwrap_or_default().to_string();
        assert!(
            progress.contains("ConnectionRefused") || progress.contains("ECONNREFUSED"),
            "in the CLI's words, the connection refused: {progress}"
        );
    }
}
