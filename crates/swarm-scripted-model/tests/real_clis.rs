//! The scripted model drives the real, pinned Claude Code and Codex (installed by
//! `scripts/install-agent-clis`): one non-interactive turn in which the model has the CLI run a
//! shell command that writes a file, then ends with a text.
//!
//! A missing CLI fails these tests; it never skips them.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use swarm_scripted_model::clis::{self, CODEX_KEY_ENV};
use swarm_scripted_model::{Failure, Script, ScriptedModel};
use tokio::process::Command;

const FINAL_TEXT: &str = "The scripted turn is over.";
const PROOF: &str = "written-by-the-scripted-model";
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// A fresh `HOME` and project directory for one run.
struct Sandbox {
    _dir: tempfile::TempDir,
    home: std::path::PathBuf,
    project: std::path::PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let project = dir.path().join("project");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        Sandbox { _dir: dir, home, project }
    }

    fn proof_file(&self) -> std::path::PathBuf {
        self.project.join("proof.txt")
    }
}

fn write_file_script(proof_file: &Path) -> Script {
    Script::new().shell(&format!("echo {PROOF} | tee {}", proof_file.display())).reply(FINAL_TEXT)
}

/// A command with a clean environment: only `PATH` (Codex's npm launcher needs `node`), a fresh
/// `HOME`, and what the test adds.
fn command(program: &Path, sandbox: &Sandbox) -> Command {
    let mut command = Command::new(program);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &sandbox.home)
        .current_dir(&sandbox.project)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

async fn run(mut command: Command) -> Output {
    tokio::time::timeout(RUN_LIMIT, command.output())
        .await
        .expect("the CLI finished within the time limit")
        .expect("the CLI started")
}

fn describe(output: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn json_lines(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

fn claude_command(model: &ScriptedModel, sandbox: &Sandbox, prompt: &str) -> Command {
    let claude = clis::claude_bin().unwrap_or_else(|message| panic!("{message}"));
    let mut command = command(&claude, sandbox);
    command.envs(clis::claude_env(model)).args([
        "-p",
        prompt,
        "--output-format",
        "stream-json",
        "--verbose",
        "--dangerously-skip-permissions",
    ]);
    command
}

fn codex_command(model_base_url: &str, sandbox: &Sandbox, prompt: &str) -> Command {
    let codex = clis::codex_bin().unwrap_or_else(|message| panic!("{message}"));
    let codex_home = sandbox.home.join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(codex_home.join("config.toml"), clis::codex_config(model_base_url)).unwrap();
    let mut command = command(&codex, sandbox);
    command.env("CODEX_HOME", &codex_home).env(CODEX_KEY_ENV, "sk-scripted").args([
        "exec",
        "--json",
        "--dangerously-bypass-approvals-and-sandbox",
        "--skip-git-repo-check",
        prompt,
    ]);
    command
}

fn running_as_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_runs_a_shell_command_and_ends_the_turn() {
    let sandbox = Sandbox::new();
    let model = ScriptedModel::start(write_file_script(&sandbox.proof_file()).with_usage(1200, 34)).await;

    let output = run(claude_command(&model, &sandbox, "Write the proof file.")).await;

    assert!(output.status.success(), "{}", describe(&output));
    let written = std::fs::read_to_string(sandbox.proof_file()).unwrap_or_default();
    assert_eq!(written.trim(), PROOF, "{}", describe(&output));
    let events = json_lines(&output);
    let result = events.iter().find(|event| event["type"] == "result").expect("a result event");
    assert_eq!(result["result"], FINAL_TEXT, "{}", describe(&output));
    assert_eq!(result["is_error"], false);
    // Two model requests, each reporting the script's usage.
    assert_eq!(result["usage"]["input_tokens"], 2 * 1200, "{result}");
    assert_eq!(result["usage"]["output_tokens"], 2 * 34, "{result}");
    assert!(result["total_cost_usd"].as_f64().is_some_and(|cost| cost > 0.0), "{result}");
    let init = events.iter().find(|event| event["subtype"] == "init").expect("an init event");
    assert_eq!(init["session_id"], result["session_id"]);

    let conversations = model.conversations();
    let last = conversations.last().expect("model requests");
    assert_eq!(last.prompt(), "Write the proof file.");
    assert!(last.tool_results().iter().any(|result| result.contains(PROOF)), "{:?}", last.tool_results());
    assert!(last.tool_names().iter().any(|name| name == "Bash"));
    assert!(last.system_text().contains("Claude"));
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_runs_a_shell_command_and_ends_the_turn() {
    let sandbox = Sandbox::new();
    let model = ScriptedModel::start(write_file_script(&sandbox.proof_file()).with_usage(1200, 34)).await;

    let output = run(codex_command(&model.openai_base_url(), &sandbox, "Write the proof file.")).await;

    assert!(output.status.success(), "{}", describe(&output));
    let written = std::fs::read_to_string(sandbox.proof_file()).unwrap_or_default();
    assert_eq!(written.trim(), PROOF, "{}", describe(&output));
    let events = json_lines(&output);
    let message = events
        .iter()
        .rev()
        .find(|event| event["type"] == "item.completed" && event["item"]["type"] == "agent_message")
        .expect("an agent message");
    assert_eq!(message["item"]["text"], FINAL_TEXT, "{}", describe(&output));
    let completed = events.iter().find(|event| event["type"] == "turn.completed").expect("turn.completed");
    assert_eq!(completed["usage"]["input_tokens"], 2 * 1200, "{completed}");
    assert_eq!(completed["usage"]["output_tokens"], 2 * 34, "{completed}");
    let started = events.iter().find(|event| event["type"] == "thread.started").expect("thread.started");
    assert!(started["thread_id"].as_str().is_some_and(|id| !id.is_empty()));

    let conversations = model.conversations();
    let last = conversations.last().expect("model requests");
    assert_eq!(last.prompt(), "Write the proof file.");
    assert!(last.tool_results().iter().any(|result| result.contains(PROOF)), "{:?}", last.tool_results());
    assert!(last.tool_names().iter().any(|name| name == "exec_command"));
    assert!(last.system_text().contains("Codex"));
}

/// Claude Code as root refuses `--dangerously-skip-permissions` unless `IS_SANDBOX=1`.
#[tokio::test(flavor = "multi_thread")]
async fn claude_code_as_root_needs_is_sandbox() {
    if !running_as_root() {
        return; // The refusal is root's only; as a user the other tests cover the flag.
    }
    let sandbox = Sandbox::new();
    let model = ScriptedModel::start(Script::new().reply(FINAL_TEXT)).await;
    let mut command = claude_command(&model, &sandbox, "hello");
    command.env_remove("IS_SANDBOX");

    let output = run(command).await;

    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains(
            "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"
        ),
        "{}",
        describe(&output)
    );
    assert!(model.conversations().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_exits_at_once_when_the_key_is_refused() {
    let sandbox = Sandbox::new();
    let model = ScriptedModel::start(Script::new().reply(FINAL_TEXT)).await;
    model.set_failure(Some(Failure::Reply401));

    let output = run(claude_command(&model, &sandbox, "hello")).await;

    assert!(!output.status.success(), "{}", describe(&output));
    let events = json_lines(&output);
    let result = events.iter().find(|event| event["type"] == "result").expect("a result event");
    assert_eq!(result["is_error"], true, "{result}");
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_exits_at_once_when_the_key_is_refused() {
    let sandbox = Sandbox::new();
    let model = ScriptedModel::start(Script::new().reply(FINAL_TEXT)).await;
    model.set_failure(Some(Failure::Reply401));

    let output = run(codex_command(&model.openai_base_url(), &sandbox, "hello")).await;

    assert!(!output.status.success(), "{}", describe(&output));
    let events = json_lines(&output);
    assert!(events.iter().any(|event| event["type"] == "turn.failed"), "{}", describe(&output));
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_exits_at_once_when_the_model_is_down() {
    let model = ScriptedModel::start(Script::new().reply(FINAL_TEXT)).await;
    let sandbox = Sandbox::new();
    let command = claude_command(&model, &sandbox, "hello");
    model.stop().await;

    let output = run(command).await;

    assert!(!output.status.success(), "{}", describe(&output));
    let events = json_lines(&output);
    let result = events.iter().find(|event| event["type"] == "result").expect("a result event");
    assert_eq!(result["is_error"], true, "{result}");
    // 2.1.197: "API Error: Unable to connect to API (ConnectionRefused)"; 2.1.332: "API Error:
    // Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)".
    let said = result["result"].as_str().unwrap_or_default();
    assert!(
        said.starts_with("API Error:")
            && (said.contains("ConnectionRefused") || said.contains("ECONNREFUSED")),
        "{result}"
    );
}

/// Codex does not give up when the model is unreachable, even with `request_max_retries = 0`
/// and `stream_max_retries = 0`: it prints `{"type":"error","message":"Reconnecting... waiting
/// for network (...)"}` events and keeps trying. Whoever runs it needs a time limit of its own.
#[tokio::test(flavor = "multi_thread")]
async fn codex_waits_for_the_network_when_the_model_is_down() {
    use tokio::io::{AsyncBufReadExt, BufReader};

    let base = ScriptedModel::closed_base_url().await;
    let sandbox = Sandbox::new();
    let mut command = codex_command(&format!("{base}/v1"), &sandbox, "hello");
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("codex starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();

    let waiting = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("\"type\":\"error\"") && line.contains("waiting for network") {
                return line;
            }
        }
        panic!("codex ended without saying it waits for the network");
    })
    .await
    .expect("codex says it waits for the network");

    assert!(waiting.contains("Reconnecting"), "{waiting}");
    assert!(child.try_wait().unwrap().is_none(), "codex is still running");
    child.kill().await.unwrap();
}

/// The second step answers the prompt that resumed the session.
fn resume_script() -> Script {
    Script::new().reply("First turn over.").reply_with(|c| format!("Relayed: {}", c.latest_prompt()))
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_resumes_a_session_with_its_history() {
    let sandbox = Sandbox::new();
    let model = ScriptedModel::start(resume_script()).await;
    let first = run(claude_command(&model, &sandbox, "Start the session.")).await;
    assert!(first.status.success(), "{}", describe(&first));
    let session_id = json_lines(&first)
        .iter()
        .find(|event| event["type"] == "result")
        .and_then(|event| event["session_id"].as_str().map(str::to_owned))
        .expect("a session id");

    let mut command = claude_command(&model, &sandbox, "task result: RELAY-1");
    command.args(["--resume", &session_id]);
    let second = run(command).await;

    assert!(second.status.success(), "{}", describe(&second));
    let events = json_lines(&second);
    let result = events.iter().find(|event| event["type"] == "result").expect("a result event");
    assert_eq!(result["result"], "Relayed: task result: RELAY-1", "{result}");
    assert_eq!(result["session_id"], session_id.as_str(), "resuming keeps the session id");
    // Usage in the result is this invocation's only.
    assert_eq!(result["usage"]["input_tokens"], Script::new().usage.input_tokens, "{result}");
    let last = model.conversations().pop().unwrap();
    assert_eq!(last.prompt(), "Start the session.");
    assert_eq!(last.final_replies(), ["First turn over."]);
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_resumes_a_thread_with_its_history() {
    let sandbox = Sandbox::new();
    let model = ScriptedModel::start(resume_script()).await;
    let first = run(codex_command(&model.openai_base_url(), &sandbox, "Start the session.")).await;
    assert!(first.status.success(), "{}", describe(&first));
    let thread_id = json_lines(&first)
        .iter()
        .find(|event| event["type"] == "thread.started")
        .and_then(|event| event["thread_id"].as_str().map(str::to_owned))
        .expect("a thread id");

    // `codex exec resume [flags] <thread id> <prompt>`: rebuild the argument list.
    let codex = clis::codex_bin().unwrap();
    let mut command = command(&codex, &sandbox);
    command.env("CODEX_HOME", sandbox.home.join(".codex")).env(CODEX_KEY_ENV, "sk-scripted").args([
        "exec",
        "resume",
        "--json",
        "--dangerously-bypass-approvals-and-sandbox",
        "--skip-git-repo-check",
        &thread_id,
        "task result: RELAY-2",
    ]);
    let second = run(command).await;

    assert!(second.status.success(), "{}", describe(&second));
    let events = json_lines(&second);
    let started = events.iter().find(|event| event["type"] == "thread.started").expect("thread.started");
    assert_eq!(started["thread_id"], thread_id.as_str(), "resuming keeps the thread id");
    let message = events
        .iter()
        .find(|event| event["type"] == "item.completed" && event["item"]["type"] == "agent_message")
        .expect("an agent message");
    assert_eq!(message["item"]["text"], "Relayed: task result: RELAY-2");
    // turn.completed counts the whole thread: both requests.
    let completed = events.iter().find(|event| event["type"] == "turn.completed").expect("turn.completed");
    assert_eq!(completed["usage"]["input_tokens"], 2 * Script::new().usage.input_tokens, "{completed}");
    let last = model.conversations().pop().unwrap();
    assert_eq!(last.prompt(), "Start the session.");
    assert_eq!(last.final_replies(), ["First turn over."]);
}

fn gemini_command(model: &ScriptedModel, sandbox: &Sandbox, prompt: &str) -> Command {
    let gemini = clis::gemini_bin().unwrap_or_else(|message| panic!("{message}"));
    let settings_dir = sandbox.home.join(".gemini");
    std::fs::create_dir_all(&settings_dir).unwrap();
    std::fs::write(settings_dir.join("settings.json"), clis::gemini_settings_json()).unwrap();
    let mut command = command(&gemini, sandbox);
    command.envs(clis::gemini_env(model)).args([
        "-p",
        prompt,
        "--output-format",
        "stream-json",
        "--yolo",
        "--model",
        swarm_scripted_model::MODEL_NAME,
    ]);
    command
}

fn gemini_result(output: &Output) -> Value {
    json_lines(output)
        .into_iter()
        .find(|event| event["type"] == "result")
        .unwrap_or_else(|| panic!("a result event\n{}", describe(output)))
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_runs_a_shell_command_and_ends_the_turn() {
    let sandbox = Sandbox::new();
    let model = ScriptedModel::start(write_file_script(&sandbox.proof_file()).with_usage(1200, 34)).await;

    let output = run(gemini_command(&model, &sandbox, "Write the proof file.")).await;

    assert!(output.status.success(), "{}", describe(&output));
    let written = std::fs::read_to_string(sandbox.proof_file()).unwrap_or_default();
    assert_eq!(written.trim(), PROOF, "{}", describe(&output));
    let events = json_lines(&output);
    let reply: String = events
        .iter()
        .filter(|event| event["type"] == "message" && event["role"] == "assistant")
        .filter_map(|event| event["content"].as_str())
        .collect();
    assert_eq!(reply, FINAL_TEXT, "{}", describe(&output));
    assert!(
        events.iter().any(|event| event["type"] == "tool_use" && event["tool_name"] == "run_shell_command")
    );
    let result = gemini_result(&output);
    assert_eq!(result["status"], "success", "{result}");
    // Two model requests, each reporting the script's usage; no cost (the CLI reports none).
    assert_eq!(result["stats"]["input_tokens"], 2 * 1200, "{result}");
    assert_eq!(result["stats"]["output_tokens"], 2 * 34, "{result}");
    let init = events.iter().find(|event| event["type"] == "init").expect("an init event");
    assert!(init["session_id"].as_str().is_some_and(|id| swarm_scripted_model::find_uuid(id).is_some()));
    assert_eq!(init["model"], swarm_scripted_model::MODEL_NAME);

    let conversations = model.conversations();
    let last = conversations.last().expect("model requests");
    assert_eq!(last.prompt(), "Write the proof file.");
    assert!(last.tool_results().iter().any(|result| result.contains(PROOF)), "{:?}", last.tool_results());
    assert!(last.tool_names().iter().any(|name| name == "run_shell_command"));
    assert!(last.system_text().contains("Gemini CLI"));
    let request = model.requests().into_iter().find(|request| request.conversation().is_some()).unwrap();
    assert_eq!(request.header("x-goog-api-key"), Some("scripted-key"));
    // The session is kept under $HOME/.gemini/tmp/<project>/chats, one JSONL file each.
    let chats = sandbox.home.join(".gemini/tmp/project/chats");
    let session_id = init["session_id"].as_str().unwrap();
    let kept = std::fs::read_dir(&chats)
        .unwrap()
        .flatten()
        .any(|entry| entry.file_name().to_string_lossy().ends_with(&format!("{}.jsonl", &session_id[..8])));
    assert!(kept, "a session file in {}", chats.display());
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_exits_at_once_when_the_key_is_refused() {
    for (failure, status) in
        [(Failure::Reply401, 401), (Failure::Status(403), 403), (Failure::Status(500), 500)]
    {
        let sandbox = Sandbox::new();
        let model = ScriptedModel::start(Script::new().reply(FINAL_TEXT)).await;
        model.set_failure(Some(failure));

        let output = run(gemini_command(&model, &sandbox, "hello")).await;

        assert!(!output.status.success(), "{failure:?}: {}", describe(&output));
        let result = gemini_result(&output);
        assert_eq!(result["status"], "error", "{result}");
        let message = result["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&format!("\"code\":{status}")), "{failure:?}: {result}");
        // `general.maxAttempts: 1`: one request, even for a 500.
        assert_eq!(model.conversations().len(), 1, "{failure:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_exits_at_once_when_the_model_is_down() {
    let model = ScriptedModel::start(Script::new().reply(FINAL_TEXT)).await;
    let sandbox = Sandbox::new();
    let command = gemini_command(&model, &sandbox, "hello");
    model.stop().await;

    let output = run(command).await;

    assert!(!output.status.success(), "{}", describe(&output));
    let result = gemini_result(&output);
    assert_eq!(result["status"], "error", "{result}");
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_resumes_a_session_by_its_id() {
    let sandbox = Sandbox::new();
    let model = ScriptedModel::start(resume_script()).await;
    let first = run(gemini_command(&model, &sandbox, "Start the session.")).await;
    assert!(first.status.success(), "{}", describe(&first));
    let session_id = json_lines(&first)
        .iter()
        .find(|event| event["type"] == "init")
        .and_then(|event| event["session_id"].as_str().map(str::to_owned))
        .expect("a session id");

    let mut command = gemini_command(&model, &sandbox, "task result: RELAY-3");
    command.args(["--resume", &session_id]);
    let second = run(command).await;

    assert!(second.status.success(), "{}", describe(&second));
    let events = json_lines(&second);
    let init = events.iter().find(|event| event["type"] == "init").expect("an init event");
    assert_eq!(init["session_id"], session_id.as_str(), "resuming keeps the session id");
    let reply: String = events
        .iter()
        .filter(|event| event["type"] == "message" && event["role"] == "assistant")
        .filter_map(|event| event["content"].as_str())
        .collect();
    assert_eq!(reply, "Relayed: task result: RELAY-3");
    // The result counts this invocation's requests only.
    let result = gemini_result(&second);
    assert_eq!(result["stats"]["input_tokens"], Script::new().usage.input_tokens, "{result}");
    let last = model.conversations().pop().unwrap();
    assert_eq!(last.prompt(), "Start the session.");
    assert_eq!(last.final_replies(), ["First turn over."]);
}
