//! The hub's MCP prompts reach the real Claude Code: in a project `swarm connect` set up, its
//! stream-json `init` message lists the `agent-swarm` server connected and each prompt as the
//! slash command `/mcp__agent-swarm__<prompt>`, beside the command files `swarm connect` wrote.
//! (Codex has no MCP prompts; it gets the same texts from the runner.) pi has no MCP client:
//! its commands are the prompt templates `swarm connect` writes (`.pi/prompts/*.md`), which pi
//! expands itself, and the hub's tools come from the extension `swarm connect` writes.
//! The Gemini CLI gets the commands' texts from the runner (see its test below).
//! So does opencode, on its standard input, with the hub's tools from the `opencode.json`
//! `swarm connect` writes.

use std::process::Command;

use serde_json::Value;
use swarm_scripted_model::{Script, clis};

use super::{Cli, World};

/// The runner's and the lead's commands, and the lead's inbox prompt.
const PROMPTS: [&str; 7] = [
    "work-on-task",
    "review-offered-task",
    "task-result",
    "swarm-chat",
    "start-worker",
    "start-leader",
    "slack-inbox",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_lists_the_hubs_prompts_as_slash_commands() {
    let world = World::new(Cli::Claude, Script::new().reply("Hello.")).await;
    let program = clis::claude_bin().unwrap_or_else(|message| panic!("{message}"));
    let mut command = Command::new(program);
    command.env_clear().current_dir(&world.project).envs(world.runner_env());
    let agent = uuid::Uuid::new_v4().to_string();
    command.env("AGENT_ID", &agent);
    // What a runner would give it: the agent's token (token mode), else the hub's key.
    if let Some(bearer) =
        world.hub.register_for_token(&agent, "prompt-reader", false, 1).or(world.hub.api_key.clone())
    {
        command.env("API_KEY", bearer);
    }
    command.args(["--verbose", "--output-format", "stream-json", "--dangerously-skip-permissions"]);
    command.args(["--permission-mode", "bypassPermissions", "-p", "Say hello."]);
    let output = tokio::task::spawn_blocking(move || command.output()).await.unwrap().expect("claude runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let init: Value = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|message| message["type"] == "system" && message["subtype"] == "init")
        .unwrap_or_else(|| panic!("no init message:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr)));
    let servers = init["mcp_servers"].as_array().expect("mcp_servers");
    assert!(
        servers.iter().any(|server| server["name"] == "agent-swarm" && server["status"] == "connected"),
        "{init}"
    );
    let commands: Vec<&str> =
        init["slash_commands"].as_array().expect("slash_commands").iter().filter_map(Value::as_str).collect();
    for prompt in PROMPTS {
        let name = format!("mcp__agent-swarm__{prompt}");
        assert!(commands.contains(&name.as_str()), "{name} is not among {commands:?}");
    }
}

/// pi: `/work-on-task <id>` reaches the model as the command's text, with the hub's tools
/// offered as Claude Code names them. The hub's MCP prompts do not reach pi (the extension
/// registers tools only); the lead's inbox prompt comes from the runner as text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_expands_the_runners_commands_and_offers_the_hubs_tools() {
    let world = World::new(Cli::Pi, Script::new().reply("Hello.")).await;
    let program = clis::pi_bin().unwrap_or_else(|message| panic!("{message}"));
    let mut command = Command::new(program);
    command.env_clear().current_dir(&world.project).envs(world.runner_env());
    let agent = uuid::Uuid::new_v4().to_string();
    command.env("AGENT_ID", &agent);
    // A registered worker: the hub offers an unknown agent its public tools only.
    let token = world.hub.register_for_token(&agent, "prompt-reader", false, 1);
    if token.is_none() {
        let (status, body) =
            world.hub.post("/api/agents", Some(&agent), serde_json::json!({"name": "prompt-reader"})).await;
        assert_eq!(status, 201, "{body}");
    }
    if let Some(bearer) = token.or(world.hub.api_key.clone()) {
        command.env("API_KEY", bearer);
    }
    let task = uuid::Uuid::new_v4().to_string();
    command.args(["--mode", "json", &format!("/work-on-task {task}")]);
    let output = tokio::task::spawn_blocking(move || command.output()).await.unwrap().expect("pi runs");
    let said =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let conversation =
        world.model.conversations().into_iter().next().unwrap_or_else(|| panic!("no request:\n{said}"));
    let prompt = conversation.prompt();
    assert!(prompt.starts_with(&format!("# Work on swarm task {task}")), "{prompt}");
    let tools = conversation.tool_names();
    for tool in ["store-progress", "get-task-details", "task-action", "send-mail", "read-mail", "poll-task"] {
        let name = format!("mcp__agent-swarm__{tool}");
        assert!(tools.contains(&name), "{name} is not among {tools:?}");
    }
    assert!(!tools.iter().any(|tool| tool.contains("slack-inbox")), "{tools:?}");
}

/// The Gemini CLI offers the hub's tools as `mcp_agent-swarm_<tool>`, but a headless run of
/// 0.61.0 does not turn `/work-on-task <id>` into the hub's MCP prompt of that name (its
/// slash-command loader lists MCP prompts; the word reaches the model as it was typed, after
/// the BeforeAgent hook's context). So the runner sends Gemini the commands' texts
/// (`prompts = "expanded"`, docs/real-agent-clis.md, "Gemini CLI").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_gets_the_runners_commands_as_text_and_offers_the_hubs_tools() {
    let world = World::new(Cli::Gemini, Script::new().reply("Hello.")).await;
    let program = clis::gemini_bin().unwrap_or_else(|message| panic!("{message}"));
    let mut command = Command::new(program);
    command.env_clear().current_dir(&world.project).envs(world.runner_env());
    let agent = uuid::Uuid::new_v4().to_string();
    command.env("AGENT_ID", &agent);
    let token = world.hub.register_for_token(&agent, "prompt-reader", false, 1);
    if token.is_none() {
        let (status, body) =
            world.hub.post("/api/agents", Some(&agent), serde_json::json!({"name": "prompt-reader"})).await;
        assert_eq!(status, 201, "{body}");
    }
    if let Some(bearer) = token.or(world.hub.api_key.clone()) {
        command.env("API_KEY", bearer);
    }
    let task = uuid::Uuid::new_v4().to_string();
    command.args(["--output-format", "stream-json", "--yolo", "--skip-trust"]);
    command.arg(format!("--prompt=/work-on-task {task}"));
    let output = tokio::task::spawn_blocking(move || command.output()).await.unwrap().expect("gemini runs");
    let said =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let conversation =
        world.model.conversations().into_iter().next().unwrap_or_else(|| panic!("no request:\n{said}"));
    let prompt = conversation.prompt();
    assert_eq!(prompt, format!("/work-on-task {task}"), "{said}");
    assert!(!conversation.contains("# Work on swarm task"), "the hub's prompt was run: {said}");
    let tools = conversation.tool_names();
    for tool in ["store-progress", "get-task-details", "task-action", "send-mail", "read-mail", "poll-task"] {
        let name = format!("mcp_agent-swarm_{tool}");
        assert!(tools.contains(&name), "{name} is not among {tools:?}");
    }
}

/// opencode reads the `agent-swarm` server `swarm connect` wrote into the project's
/// `opencode.json` and offers the hub's tools as `agent-swarm_<tool>`; the runner's commands
/// reach it as their texts on standard input (`prompts = "expanded"`, `stdin`), unquoted
/// (docs/real-agent-clis.md, "opencode").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_gets_the_runners_commands_as_text_and_offers_the_hubs_tools() {
    use std::io::Write as _;

    let world = World::new(Cli::Opencode, Script::new().reply("Hello.")).await;
    let program = clis::opencode_bin().unwrap_or_else(|message| panic!("{message}"));
    let mut command = Command::new(program);
    command.env_clear().current_dir(&world.project).envs(world.runner_env());
    let agent = uuid::Uuid::new_v4().to_string();
    command.env("AGENT_ID", &agent);
    let token = world.hub.register_for_token(&agent, "prompt-reader", false, 1);
    if token.is_none() {
        let (status, body) =
            world.hub.post("/api/agents", Some(&agent), serde_json::json!({"name": "prompt-reader"})).await;
        assert_eq!(status, 201, "{body}");
    }
    if let Some(bearer) = token.or(world.hub.api_key.clone()) {
        command.env("API_KEY", bearer);
    }
    let task = uuid::Uuid::new_v4().to_string();
    let text = swarm_domain::prompts::expand(&format!("/work-on-task {task}")).expect("a runner's command");
    command.args(["run", "--format", "json", "--auto"]);
    command.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    command.stderr(std::process::Stdio::piped());
    let output = tokio::task::spawn_blocking(move || {
        let mut child = command.spawn().expect("opencode runs");
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        child.wait_with_output()
    })
    .await
    .unwrap()
    .expect("opencode ends");
    let said =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let conversation =
        world.model.conversations().into_iter().next().unwrap_or_else(|| panic!("no request:\n{said}"));
    let prompt = conversation.prompt();
    assert!(prompt.starts_with(&format!("# Work on swarm task {task}")), "as sent, unquoted: {prompt}");
    let tools = conversation.tool_names();
    for tool in ["store-progress", "get-task-details", "task-action", "send-mail", "read-mail", "poll-task"] {
        let name = format!("agent-swarm_{tool}");
        assert!(tools.contains(&name), "{name} is not among {tools:?}\n{said}");
    }
}
