//! `swarm stand-in-agent <prompt>` (hidden): a scripted agent CLI with no LLM, for tests
//! and demos. A runner starts it like any agent (`--harness cmd --harness-cmd swarm --
//! stand-in-agent`): it reads the prompt (its last argument), acts on the hub through the
//! real MCP endpoint (`POST $MCP_BASE_URL/mcp`, JSON-RPC `tools/call`, as `$AGENT_ID`),
//! prints Claude-style stream-json lines, and exits.
//!
//! What it does depends on the prompt's first line, its role and `--behaviour`:
//! - `/work-on-task <id>`, as a worker: `complete` (default) reports the task completed
//!   with an output; `fail` reports it failed (so does a task whose text contains
//!   `--fail-when`); `silent` reports nothing; `hang` never ends (with `--hold-until`,
//!   it works until the file exists, then completes).
//! - `/work-on-task <id>`, as the lead (asked with `my-agent-info`): delegates the task's
//!   text to the least busy worker with a free slot with `send-task` (to the pool when
//!   there is none), then reports its own task completed, naming where the work went.
//! - `/work-on-task <id>` with `--inbox-mcp <command>` (any role): files the task's text
//!   with the Inbox-MCP `task_create` over that stdio server, then completes its task.
//! - `/review-offered-task <id>`: accepts the offer, or rejects it with `reject`
//!   (`silent` and `hang` as above).
//! - `N task(s) finished:` (the lead's `tasks_finished`): looks at the tasks with
//!   `get-tasks`, and is done.
//! - `You have N inbox message(s) from Slack:` (the lead's `slack_inbox_message`):
//!   delegates each listed message that says `Please do:` to a worker with
//!   `inbox-delegate`, and answers the others in their thread with `slack-reply`.
//! - `N task(s) were taken from agents that stayed offline:` (the lead's
//!   `tasks_handed_back`): returns each task the hub parked in the backlog to the pool
//!   with `task-action` `from_backlog`.
//! - `N task(s) finished:` also tries `slack-reply` about each task from Slack, as an
//!   eager model might (the hub refuses: the bridge has answered the thread).
//! - chat mentions, urgent mail, asking the coordinator for help, and Claude Code's
//!   hooks: see [`talk`].
//! - `/work-on-task <id>` with `--escalate-to <agent>`: files the task's text for that
//!   agent with `send-task` (a trigger session escalating), then completes its own task.
//! - `/task-result <id>` (a result resumed into the session that awaited it): relays it.
//! - anything else: nothing.
//!
//! `--hold-until <file>` keeps a run going after it acted until the file exists
//! (`--hold-only <prefix>`: only runs whose prompt starts so), so that a test can act
//! while a run is under way and end it when it chooses.
//!
//! Sessions: a new run gets a new session id, remembered as a file in `<record dir>/sessions`;
//! `--resume <id>` (Claude's flag) or `SWARM_RESUME_SESSION` (any program) continues a
//! known session under the same id, and fails like Claude (exit 1, no output) for an
//! unknown one.
//!
//! Every option can also be set through the environment (`STAND_IN_*`), which is how
//! tests set them for the runs a runner starts.
//!
//! With `--as claude` or `--as codex` it takes the place of that agent CLI (a script named
//! `claude` or `codex` on `PATH` that runs `swarm stand-in-agent --as claude -- "$@"`):
//! it insists on the command line the runner's harness must give the real CLI, reads the
//! prompt where the real CLI would, and prints that CLI's JSON output (Claude Code's
//! stream-json; Codex's `exec --json` events), so the production harness path is the one
//! under test.

use std::{
    path::{Path, PathBuf},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use serde_json::{Value, json};

mod inbox_mcp;
mod talk;

#[derive(Debug, Args)]
pub struct StandInArgs {
    /// What to do with the task or offer in the prompt.
    #[arg(long, env = "STAND_IN_BEHAVIOUR", value_enum, default_value = "complete")]
    behaviour: Behaviour,
    /// Report tasks whose text contains this as failed (whatever --behaviour says).
    #[arg(long, env = "STAND_IN_FAIL_WHEN", value_name = "TEXT")]
    fail_when: Option<String>,
    /// The exit code after acting.
    #[arg(long, env = "STAND_IN_EXIT_CODE", default_value_t = 0)]
    exit_code: i32,
    /// A pause before acting, in milliseconds.
    #[arg(long, env = "STAND_IN_SLEEP_MS", value_name = "MS")]
    sleep_ms: Option<u64>,
    /// A folder where each run writes `<pid>.start` and `<pid>.end` JSON files (for tests
    /// and the demo to count and time runs).
    #[arg(long, env = "STAND_IN_RECORD_DIR", value_name = "PATH")]
    record_dir: Option<PathBuf>,
    /// Which agent CLI to stand in for: its command line is checked and its output
    /// format spoken.
    #[arg(long = "as", env = "STAND_IN_AS", value_enum, default_value = "cmd")]
    speak_as: Cli,
    /// Escalate every task to this agent with `send-task` instead of doing it.
    #[arg(long, env = "STAND_IN_ESCALATE_TO", value_name = "AGENT_ID")]
    escalate_to: Option<String>,
    /// A trigger session with the Inbox-MCP tools: file every task's text with
    /// `task_create` over the stdio MCP server this command line starts (e.g. `swarm mcp
    /// --db <file> --trigger <name>`), then complete its own task.
    #[arg(long, env = "STAND_IN_INBOX_MCP", value_name = "COMMAND")]
    inbox_mcp: Option<String>,
    /// After acting, stay until this file exists (a run that is still under way while a
    /// test does something, ended when the test says so). With `--behaviour hang`: before
    /// acting, instead of forever.
    #[arg(long, env = "STAND_IN_HOLD_UNTIL", value_name = "PATH")]
    hold_until: Option<PathBuf>,
    /// Hold (see --hold-until) only runs whose prompt starts with this.
    #[arg(long, env = "STAND_IN_HOLD_ONLY", value_name = "PREFIX")]
    hold_only: Option<String>,
    /// Arguments as an agent CLI gets them; the last one is the prompt (for `--as claude`,
    /// the one after `-p`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    args: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Cli {
    /// Any program: the prompt is the last argument; Claude-style output.
    Cmd,
    /// Claude Code: `--output-format stream-json ... -p <prompt> ... --append-system-prompt <text>`.
    Claude,
    /// Codex: `exec --json ... <prompt>`.
    Codex,
}

impl Cli {
    /// The runner's prompt out of the command line, or why the real CLI would refuse it.
    fn prompt(self, args: &[String]) -> anyhow::Result<String> {
        let has = |flag: &str| args.iter().any(|arg| arg == flag);
        let after = |flag: &str| args.iter().position(|arg| arg == flag).and_then(|at| args.get(at + 1));
        match self {
            Cli::Cmd => Ok(args.last().cloned().unwrap_or_default()),
            Cli::Claude => {
                if after("--output-format").map(String::as_str) != Some("stream-json") || !has("--verbose") {
                    bail!(
                        "claude: -p with stream-json output needs --output-format stream-json and --verbose"
                    );
                }
                if !has("--append-system-prompt") {
                    bail!("claude (stand-in): the runner always appends its system prompt");
                }
                after("-p").cloned().context("claude: -p <prompt> is missing")
            }
            Cli::Codex => {
                if args.first().map(String::as_str) != Some("exec") || !has("--json") {
                    bail!("codex: the runner must call `codex exec --json`");
                }
                // The system prompt comes first in Codex's one prompt, then the runner's
                // own prompt: a command's instructions in full (Codex has no slash
                // commands), or a prompt of its own.
                let text = args.last().cloned().unwrap_or_default();
                if let Some(prompt) = swarm_domain::prompts::collapse(&text) {
                    return Ok(prompt);
                }
                let lines: Vec<&str> = text.lines().collect();
                let start = lines
                    .iter()
                    .position(|line| line.starts_with('/') || line.ends_with("task(s) finished:"))
                    .unwrap_or(0);
                Ok(lines[start..].join("\n"))
            }
        }
    }

    /// The first output lines of a run.
    fn started(self, session_id: &str) {
        match self {
            Cli::Cmd | Cli::Claude => println!(
                "{}",
                json!({"type": "system", "subtype": "init", "session_id": session_id, "model": "stand-in"})
            ),
            Cli::Codex => {
                println!("{}", json!({"type": "thread.started", "thread_id": session_id}));
                println!("{}", json!({"type": "turn.started"}));
            }
        }
    }

    /// The last output lines: the answer and what the run cost.
    fn finished(self, session_id: &str, answer: &str, is_error: bool) {
        match self {
            Cli::Cmd | Cli::Claude => println!(
                "{}",
                json!({
                    "type": "result", "subtype": "success", "is_error": is_error, "result": answer,
                    "session_id": session_id, "total_cost_usd": 0.0125, "duration_ms": 1, "num_turns": 1,
                    "usage": {"input_tokens": 120, "output_tokens": 45, "cache_read_input_tokens": 7}
                })
            ),
            Cli::Codex => {
                println!(
                    "{}",
                    json!({"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": answer}})
                );
                let usage = json!({"input_tokens": 200, "cached_input_tokens": 50, "output_tokens": 30});
                let end = if is_error { "turn.failed" } else { "turn.completed" };
                println!("{}", json!({"type": end, "usage": usage}));
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Behaviour {
    /// Complete tasks, accept offers.
    Complete,
    /// Fail tasks (with a reason), accept offers.
    Fail,
    /// Complete tasks, reject offers (with a reason).
    Reject,
    /// Report nothing.
    Silent,
    /// Never end.
    Hang,
}

pub async fn run(args: StandInArgs) -> anyhow::Result<()> {
    let prompt = args.speak_as.prompt(&args.args)?;
    let first_line = prompt.lines().next().unwrap_or_default().to_string();
    // Claude Code's two spellings: `--resume=<id>` (what the runner passes) and `--resume <id>`.
    let resume = args
        .args
        .iter()
        .find_map(|arg| arg.strip_prefix("--resume=").map(str::to_string))
        .or_else(|| {
            let at = args.args.iter().position(|arg| arg == "--resume")?;
            args.args.get(at + 1).cloned()
        })
        .or_else(|| std::env::var("SWARM_RESUME_SESSION").ok().filter(|id| !id.is_empty()));
    let sessions = args.record_dir.as_ref().map(|dir| dir.join("sessions"));
    let session_id = match (&resume, &sessions) {
        (Some(id), Some(dir)) if dir.join(id).exists() => id.clone(),
        (Some(id), _) => {
            eprintln!("No conversation found with session ID: {id}");
            std::process::exit(1);
        }
        (None, _) => {
            let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
            format!("stand-in-{}-{nanos}", std::process::id())
        }
    };
    if let Some(dir) = &sessions {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join(&session_id), &first_line)?;
    }

    if let Some(dir) = &args.record_dir {
        record(dir, "start", &first_line, &session_id, &prompt)?;
    }
    args.speak_as.started(&session_id);
    if args.speak_as == Cli::Claude {
        let hook_prompt = json!({"prompt": prompt});
        talk::run_hooks("UserPromptSubmit", hook_prompt, &session_id, args.record_dir.as_deref());
    }
    if let Some(millis) = args.sleep_ms {
        tokio::time::sleep(Duration::from_millis(millis)).await;
    }
    let gate = args.hold_until.as_deref().filter(|path| !path.as_os_str().is_empty());
    if args.behaviour == Behaviour::Hang {
        match gate {
            // A run still under way (heartbeating, holding its task) for as long as a test
            // needs, which then does its work as `complete` would.
            Some(gate) => {
                say(&format!("working until {} exists", gate.display()));
                while !gate.exists() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            None => {
                say("working forever");
                std::future::pending::<()>().await;
            }
        }
    }

    let mut words = first_line.split_whitespace();
    let command = words.next().unwrap_or_default();
    let task_id = words.next().unwrap_or_default();
    // The task's text follows the command line and a blank line (the runner's `work`).
    let task_text = prompt.lines().nth(2).unwrap_or_default();
    let answer = match command {
        _ if args.behaviour == Behaviour::Silent => "said nothing".to_string(),
        "/work-on-task" => work_on_task(&args, task_id, task_text).await?,
        "/review-offered-task" if args.behaviour == Behaviour::Reject => {
            let reason = "the stand-in was told to reject";
            message(
                call_tool("task-action", json!({"action": "reject", "taskId": task_id, "reason": reason}))
                    .await?,
            )
        }
        "/review-offered-task" => {
            message(call_tool("task-action", json!({"action": "accept", "taskId": task_id})).await?)
        }
        "/task-result" => format!("relayed the result of task {task_id} to whoever asked"),
        _ if first_line.ends_with("inbox message(s) from Slack:") => answer_inbox(&prompt).await?,
        _ if first_line.ends_with("unread mention(s) in chat channels:") => {
            talk::answer_mentions(&prompt).await?
        }
        _ if first_line.ends_with("urgent mail:") => talk::answer_mail(&prompt).await?,
        _ if first_line.ends_with("task(s) finished:") => review_finished(&prompt).await?,
        _ if first_line.ends_with("task(s) were taken from agents that stayed offline:") => {
            return_handed_back_to_pool(&prompt).await?
        }
        _ => "nothing to do".to_string(),
    };

    if let Some(gate) = gate {
        let prefix = args.hold_only.as_deref().unwrap_or_default();
        if first_line.starts_with(prefix) {
            say(&format!("done; holding until {} exists", gate.display()));
            while !gate.exists() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    let is_error = args.exit_code != 0;
    if args.speak_as == Cli::Claude {
        talk::run_hooks("Stop", json!({"stop_hook_active": false}), &session_id, args.record_dir.as_deref());
    }
    args.speak_as.finished(&session_id, &answer, is_error);
    if let Some(dir) = &args.record_dir {
        record(dir, "end", &first_line, &session_id, &answer)?;
    }
    if is_error {
        std::process::exit(args.exit_code);
    }
    Ok(())
}

/// A worker does the task (or fails it, as told); the lead hands it to a worker.
async fn work_on_task(args: &StandInArgs, task_id: &str, text: &str) -> anyhow::Result<String> {
    if let Some(command) = args.inbox_mcp.as_deref().filter(|command| !command.is_empty()) {
        let filed = inbox_mcp::task_create(command, &format!("Please handle: {text}"))?;
        let output = format!("filed as task {filed}");
        call_tool("store-progress", json!({"taskId": task_id, "status": "completed", "output": output}))
            .await?;
        return Ok(output);
    }
    let me = call_tool("my-agent-info", json!({})).await?;
    if me["agent"]["isLead"] == json!(true) {
        return delegate(task_id, text).await;
    }
    if let Some(question) = text.trim().strip_prefix(talk::ASK_MARKER) {
        return talk::ask_for_help(task_id, question.trim()).await;
    }
    if let Some(agent) = args.escalate_to.as_deref().filter(|agent| !agent.is_empty()) {
        let sent =
            call_tool("send-task", json!({"agentId": agent, "task": format!("Please handle: {text}")}))
                .await?;
        let output = format!("escalated as task {}", sent["task"]["id"].as_str().unwrap_or("?"));
        call_tool("store-progress", json!({"taskId": task_id, "status": "completed", "output": output}))
            .await?;
        return Ok(output);
    }
    let told_to_fail =
        args.fail_when.as_deref().is_some_and(|marker| !marker.is_empty() && text.contains(marker));
    let report = if args.behaviour == Behaviour::Fail {
        json!({"taskId": task_id, "status": "failed", "failureReason": "the stand-in was told to fail"})
    } else if told_to_fail {
        let reason = format!(
            "the stand-in fails every task that mentions \"{}\"",
            args.fail_when.as_deref().unwrap_or_default()
        );
        json!({"taskId": task_id, "status": "failed", "failureReason": reason})
    } else {
        json!({"taskId": task_id, "status": "completed", "output": format!("stand-in finished: {text}")})
    };
    Ok(message(call_tool("store-progress", report).await?))
}

/// `send-task` to the least busy worker with a free slot, else to the pool; then the
/// lead's own task is done.
async fn delegate(task_id: &str, text: &str) -> anyhow::Result<String> {
    let swarm = call_tool("get-swarm", json!({})).await?;
    let workers = swarm["agents"].as_array().cloned().unwrap_or_default();
    let target = workers
        .iter()
        .filter(|agent| agent["isLead"] != json!(true) && agent["status"] != json!("offline"))
        .filter(|agent| agent["capacity"]["available"].as_i64().unwrap_or(0) > 0)
        .min_by_key(|agent| agent["capacity"]["current"].as_i64().unwrap_or(0));
    let mut sent = None;
    if let Some(worker) = target {
        let name = worker["name"].as_str().unwrap_or("a worker").to_string();
        say(&format!("delegating to {name}"));
        match call_tool("send-task", json!({"agentId": worker["id"], "task": text})).await {
            Ok(reply) => sent = Some((reply, name)),
            // It took other work meanwhile: the pool will do.
            Err(err) => say(&format!("{err:#}; sending it to the pool instead")),
        }
    }
    let (reply, whom) = match sent {
        Some(sent) => sent,
        None => (call_tool("send-task", json!({"task": text})).await?, "the pool".to_string()),
    };
    let delegated_id = reply["task"]["id"].as_str().unwrap_or("?").to_string();
    let output = format!("delegated to {whom} as task {delegated_id}");
    call_tool("store-progress", json!({"taskId": task_id, "status": "completed", "output": output})).await?;
    Ok(output)
}

/// Each message the prompt lists (`- "<text>" (inboxMessageId: <id>; ...`): one that
/// asks for work ([`WORK_MARKER`]) is delegated to a worker with `inbox-delegate`; any
/// other is answered with `slack-reply`.
async fn answer_inbox(prompt: &str) -> anyhow::Result<String> {
    let (mut answered, mut delegated) = (0, 0);
    // Each message: its `inboxMessageId: ...` line, then its text (fenced) up to the next one.
    for message in prompt.split("inboxMessageId: ").skip(1) {
        let Some(id) = message.split(';').next() else {
            continue;
        };
        if message.contains(WORK_MARKER) {
            let worker = least_busy_worker().await?.context("no worker is online to delegate to")?;
            call_tool("inbox-delegate", json!({"inboxMessageId": id, "agentId": worker["id"]})).await?;
            delegated += 1;
        } else {
            let reply = json!({"inboxMessageId": id, "message": format!("stand-in answer to {id}")});
            call_tool("slack-reply", reply).await?;
            answered += 1;
        }
    }
    Ok(format!("answered {answered} message(s) in Slack, delegated {delegated}"))
}

/// A Slack message that asks for work, which the stand-in lead delegates.
pub const WORK_MARKER: &str = "Please do:";

/// The lead's `tasks_finished`: look at the tasks, then, like an eager model, try to
/// tell the Slack user about each Slack task (the hub refuses it: the bridge has posted
/// the outcome already); what was refused is part of the answer.
async fn review_finished(prompt: &str) -> anyhow::Result<String> {
    let listed = call_tool("get-tasks", json!({"limit": 50})).await?;
    let mut refused = 0;
    for line in prompt.lines().filter(|line| line.starts_with("- ") && line.contains("from Slack")) {
        let Some(id) = line.split_whitespace().nth(3) else { continue };
        let reply = json!({"taskId": id, "message": format!("stand-in lead: task {id} is done")});
        if let Err(error) = call_tool("slack-reply", reply).await {
            say(&format!("{error:#}"));
            refused += 1;
        }
    }
    Ok(format!("looked at the results: {}; {refused} Slack reply(ies) refused", message(listed)))
}

/// The lead's `tasks_handed_back`: each task parked in the backlog (it was asked of an agent
/// that stayed offline) goes back to the pool, for any worker, one of the two ways out the
/// runner's prompt offers.
async fn return_handed_back_to_pool(prompt: &str) -> anyhow::Result<String> {
    let mut returned = Vec::new();
    // `- task <id> (was <status> with agent <agent>, now <status>): "<text>"`
    for line in prompt.lines().filter(|line| line.starts_with("- task ") && line.contains(", now backlog)")) {
        let Some(id) = line.split_whitespace().nth(2) else { continue };
        call_tool("task-action", json!({"action": "from_backlog", "taskId": id})).await?;
        returned.push(id.to_string());
    }
    Ok(format!("returned to the pool: {}", returned.join(", ")))
}

async fn least_busy_worker() -> anyhow::Result<Option<Value>> {
    let swarm = call_tool("get-swarm", json!({})).await?;
    let workers = swarm["agents"].as_array().cloned().unwrap_or_default();
    Ok(workers
        .into_iter()
        .filter(|agent| agent["isLead"] != json!(true) && agent["status"] != json!("offline"))
        .min_by_key(|agent| agent["capacity"]["current"].as_i64().unwrap_or(0)))
}

/// One line of the agent's "thinking", as Claude's stream-json shows it.
fn say(text: &str) {
    println!("{}", json!({"type": "assistant", "message": {"content": text}}));
}

fn message(content: Value) -> String {
    content["message"].as_str().unwrap_or_default().to_string()
}

/// One MCP `tools/call` as `$AGENT_ID`: the tool's `structuredContent`, or an error
/// when the call failed or the tool refused.
async fn call_tool(name: &str, arguments: Value) -> anyhow::Result<Value> {
    let base = std::env::var("MCP_BASE_URL").context("MCP_BASE_URL is not set: a runner sets it")?;
    let agent_id = std::env::var("AGENT_ID").context("AGENT_ID is not set: a runner sets it")?;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    let mut request = reqwest::Client::new()
        .post(format!("{}/mcp", base.trim_end_matches('/')))
        .header("X-Agent-ID", agent_id)
        // The stateless endpoint answers plain JSON, but the transport wants both accepted.
        .header("Accept", "application/json, text/event-stream")
        .json(&body);
    if let Ok(key) = std::env::var("API_KEY")
        && !key.is_empty()
    {
        request = request.bearer_auth(key);
    }
    // What `swarm connect`'s MCP config sends: the trigger session this run continues.
    if let Ok(task) = std::env::var("SWARM_SESSION_TASK_ID")
        && !task.is_empty()
    {
        request = request.header("X-Task-ID", task);
    }
    let response =
        request.send().await.with_context(|| format!("cannot reach the hub's MCP endpoint at {base}"))?;
    let status = response.status();
    let mut answer: Value =
        response.json().await.with_context(|| format!("{name}: the answer ({status}) is not JSON"))?;
    let content = answer["result"]["structuredContent"].take();
    if content["success"] != json!(true) {
        let refusal = content["message"].as_str().map(str::to_string).unwrap_or_else(|| answer.to_string());
        bail!("{name} was refused: {refusal}");
    }
    Ok(content)
}

fn record(dir: &Path, what: &str, first_line: &str, session_id: &str, text: &str) -> anyhow::Result<()> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
    let entry = json!({
        "pid": std::process::id(),
        "at": nanos.to_string(),
        "prompt": first_line,
        "agentId": std::env::var("AGENT_ID").ok(),
        "taskIdEnv": std::env::var("TASK_ID").ok(),
        "trigger": std::env::var("SWARM_TRIGGER").ok(),
        "sessionId": session_id,
        // The whole prompt at the start, the answer at the end.
        "text": text,
    });
    let path = dir.join(format!("{}.{what}", std::process::id()));
    std::fs::write(&path, entry.to_string()).with_context(|| format!("cannot write {}", path.display()))
}
