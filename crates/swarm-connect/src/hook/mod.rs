//! `swarm hook <event>`: what Claude Code runs at its hook events (installed by
//! `swarm connect`), answering with what the agent should know.
//!
//! A hook never fails the agent. Whatever goes wrong (hub down or slow, bad input, no
//! agent id, an unknown event) it prints nothing harmful and exits 0. The one
//! deliberate exception is a cancelled task: `pre-tool-use` and `user-prompt-submit`
//! then exit 2 with the reason on stderr, which Claude Code documents as "block this
//! tool call" and "block this prompt", showing the reason to the agent (to the user for
//! a prompt) (https://code.claude.com/docs/en/hooks, "Exit code 2 behavior"). We use the
//! exit code rather than the JSON `permissionDecision: "deny"` because every version of
//! Claude Code with hooks honours it, and a block must not depend on a field's spelling.
//!
//! Mail (`mail.rs`): `UserPromptSubmit` injects the agent's unread mail, urgent first,
//! and marks it delivered; `Stop` and `SubagentStop` alert the coordinator with a
//! `systemMessage` when the agent stops waiting on mail it sent; `PostToolUse` refreshes
//! the mail counts. Why a hook said nothing is logged (`trace.rs`).
//!
//! Input is the event's JSON on stdin (`session_id`, `hook_event_name`, `cwd`,
//! `tool_name`, ...). Context for the agent goes out as JSON
//! `{"hookSpecificOutput": {"hookEventName", "additionalContext"}}` on stdout (SessionStart
//! and UserPromptSubmit); the status line is the first line printed.
//!
//! Where the hub is: `MCP_BASE_URL`, `API_KEY`, `AGENT_ID` and `TASK_ID` from the
//! environment (a runner sets them), else the `agent-swarm` entry of the project's
//! `.mcp.json` with its `${VAR:-default}` placeholders expanded as Claude Code does, so
//! the hooks speak to the hub as the same agent as the MCP tools.

use std::{io::Read as _, path::PathBuf, time::Duration};

use clap::Args;
use serde::Deserialize;
use serde_json::{Value, json};
use swarm_client::{Client, ClientConfig};
use swarm_domain::{
    id::{AgentId, TaskId},
    prompts::excerpt,
};

use crate::connect::{SERVER_NAME, expand_env_placeholders};

mod mail;
mod steering;
mod trace;

/// The most a hook spends talking to the hub: Claude Code waits for hooks, and a
/// status line that lags is worse than one that says the hub is slow.
const HUB_DEADLINE: Duration = Duration::from_secs(2);
/// Claude Code closes stdin after writing the event; someone running the hook by hand
/// may not, so reading it never waits longer than this.
const STDIN_DEADLINE: Duration = Duration::from_secs(1);
/// Hook output goes into the agent's context: keep it short.
const TASK_EXCERPT_CHARS: usize = 300;
const DEFAULT_URL: &str = swarm_client::DEFAULT_HUB_URL;
/// Claude Code's "block" exit code for PreToolUse and UserPromptSubmit.
const BLOCK_EXIT_CODE: i32 = 2;

#[derive(Debug, Args)]
pub struct HookArgs {
    /// The event: session-start, user-prompt-submit, pre-tool-use, post-tool-use, stop,
    /// subagent-stop, or status-line. Anything else is ignored (exit 0, no output)
    #[arg(value_name = "EVENT", allow_hyphen_values = true)]
    event: Option<String>,
    /// Ignored, so that a settings file from a newer swarm never fails the agent
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    rest: Vec<String>,
}

pub const LONG_ABOUT: &str = "\
Answer a Claude Code or Gemini CLI hook event (installed by `swarm connect`; pi's extension
sends the same events).

Reads the event's JSON on stdin and talks to the hub as the agent (MCP_BASE_URL, API_KEY,
AGENT_ID, TASK_ID (or the taskId of the JSON file TASK_FILE names) from the environment, else from the project's .mcp.json), for at most
2 seconds:
  session-start        tells the agent who it is in the swarm and what its task is
  user-prompt-submit   adds what waits for the agent (offers, mentions) and delivers its
                       unread mail, urgent first (low-priority mail waits for read-mail)
  pre-tool-use         blocks the tool call (exit 2) when the task TASK_ID (or TASK_FILE's) was cancelled
  post-tool-use        heartbeat; refreshes the mail counts and says when urgent mail came;
                       gives the agent its task's `steer` steering messages (SWARM_STEERING=hooks)
  stop                 with steering messages left for the task (SWARM_STEERING=hooks): keeps
                       the agent going with them (a Stop block decision)
  stop, subagent-stop  heartbeat; when the agent stops waiting on mail it sent (awaiting a
                       response, or urgent and unread) or with mail it must see unread, the
                       hub mails the agent that delegated its work, and a systemMessage says so
  status-line          one line: the agent, its task, offered and pool tasks, mail

It never fails the agent: any error prints nothing harmful and exits 0, and the reason
goes to hook.log in SWARM_HOOK_DIR (default ~/.swarm/hooks), beside each agent's
inbox_count.json.";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HookEvent {
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    PostToolUse,
    Stop,
    SubagentStop,
    StatusLine,
}

impl HookEvent {
    fn parse(name: &str) -> Option<HookEvent> {
        match name.trim() {
            "session-start" => Some(HookEvent::SessionStart),
            "user-prompt-submit" => Some(HookEvent::UserPromptSubmit),
            "pre-tool-use" => Some(HookEvent::PreToolUse),
            "post-tool-use" => Some(HookEvent::PostToolUse),
            "stop" => Some(HookEvent::Stop),
            "subagent-stop" => Some(HookEvent::SubagentStop),
            "status-line" => Some(HookEvent::StatusLine),
            _ => None,
        }
    }

    /// The name `swarm hook` takes (and the hook log uses).
    fn cli_name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "session-start",
            HookEvent::UserPromptSubmit => "user-prompt-submit",
            HookEvent::PreToolUse => "pre-tool-use",
            HookEvent::PostToolUse => "post-tool-use",
            HookEvent::Stop => "stop",
            HookEvent::SubagentStop => "subagent-stop",
            HookEvent::StatusLine => "status-line",
        }
    }

    /// The name Claude Code gives the event in `hookSpecificOutput.hookEventName`.
    fn claude_name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::StatusLine => "StatusLine",
        }
    }
}

/// What the hook ends with.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Nothing,
    /// Context for the agent (SessionStart, UserPromptSubmit, PostToolUse).
    Context(String),
    /// A message for the user, or the coordinator of a subagent (Stop, SubagentStop).
    SystemMessage(String),
    /// The status line.
    Line(String),
    /// Block the tool call or prompt, with the reason.
    Block(String),
    /// Keep the agent going at `Stop`, with its next instruction (steering).
    Continue(String),
}

/// The hub connection and the agent's identity, however they were found.
#[derive(Debug, Clone)]
struct HookSettings {
    base_url: String,
    api_key: Option<String>,
    agent_id: Option<AgentId>,
    task_id: Option<TaskId>,
}

/// `GET /me?include=inbox`, read leniently: a hook must not fail on a field it does
/// not need.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Me {
    id: String,
    name: String,
    is_lead: bool,
    status: String,
    inbox: Option<Inbox>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Inbox {
    mentions_count: i64,
    offered_tasks_count: i64,
    pool_tasks_count: i64,
    unread_mail_count: i64,
    urgent_mail_count: i64,
    waiting_for_response: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct TaskSummary {
    task: String,
    status: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct CancelledTask {
    id: String,
    failure_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct CancelledTasks {
    cancelled: Vec<CancelledTask>,
}

/// Never returns an error: see the module documentation.
pub async fn run(args: HookArgs) -> anyhow::Result<()> {
    let name = args.event.as_deref().unwrap_or_default();
    let Some(event) = HookEvent::parse(name) else {
        trace::why(name, "not an event swarm answers: ignored");
        return Ok(());
    };
    let input = read_stdin_json();
    if input.is_null() && event != HookEvent::StatusLine {
        trace::why(name, "no JSON event on stdin: answering from the environment alone");
    }
    let settings = HookSettings::resolve(&input);
    if settings.agent_id.is_none() {
        trace::why(name, "no agent id (AGENT_ID, or X-Agent-ID in .mcp.json)");
    }
    let answer = match tokio::time::timeout(HUB_DEADLINE, answer(event, &settings)).await {
        Ok(answer) => answer,
        Err(_elapsed) => {
            trace::why(
                name,
                &format!("the hub at {} did not answer within {HUB_DEADLINE:?}", settings.base_url),
            );
            match event {
                HookEvent::StatusLine => {
                    Answer::Line(format!("swarm · hub not answering at {}", settings.base_url))
                }
                _ => Answer::Nothing,
            }
        }
    };
    match answer {
        Answer::Nothing => {}
        Answer::Line(line) => print_stdout(&format!("{line}\n")),
        Answer::Context(context) => {
            let output = json!({
                "hookSpecificOutput": {"hookEventName": event.claude_name(), "additionalContext": context}
            });
            print_stdout(&format!("{output}\n"));
        }
        Answer::SystemMessage(message) => {
            print_stdout(&format!("{}\n", json!({"systemMessage": message})));
        }
        Answer::Block(reason) => {
            eprintln!("{reason}");
            std::process::exit(BLOCK_EXIT_CODE);
        }
        Answer::Continue(reason) => {
            print_stdout(&format!("{}\n", json!({"decision": "block", "reason": reason})));
        }
    }
    Ok(())
}

async fn answer(event: HookEvent, settings: &HookSettings) -> Answer {
    let Some(client) = settings.client() else {
        trace::why(event.cli_name(), &format!("bad hub URL {:?}", settings.base_url));
        return match event {
            HookEvent::StatusLine => Answer::Line(format!("swarm · bad hub URL {:?}", settings.base_url)),
            _ => Answer::Nothing,
        };
    };
    match event {
        HookEvent::PreToolUse => cancelled_block(&client, settings).await.unwrap_or(Answer::Nothing),
        HookEvent::UserPromptSubmit => match cancelled_block(&client, settings).await {
            Some(block) => block,
            None => {
                heartbeat(&client, settings).await;
                prompt_context(&client, settings).await
            }
        },
        HookEvent::SessionStart => {
            heartbeat(&client, settings).await;
            session_context(&client, settings).await
        }
        HookEvent::PostToolUse => {
            heartbeat(&client, settings).await;
            let steering = steering::at_tool_use(&client, settings).await;
            let mail = mail::refresh_counts(&client, settings).await;
            let parts: Vec<String> = [steering, mail].into_iter().flatten().collect();
            if parts.is_empty() { Answer::Nothing } else { Answer::Context(parts.join("\n\n")) }
        }
        HookEvent::Stop => {
            heartbeat(&client, settings).await;
            if let Some(steering) = steering::at_turn_end(&client, settings).await {
                return Answer::Continue(steering);
            }
            mail::tell_coordinator(&client, settings, event.cli_name()).await;
            let alert = mail::stop_alert(&client, settings, event.cli_name()).await;
            alert.map_or(Answer::Nothing, Answer::SystemMessage)
        }
        HookEvent::SubagentStop => {
            heartbeat(&client, settings).await;
            // The systemMessage reaches only this session; the hub tells the coordinator.
            mail::tell_coordinator(&client, settings, event.cli_name()).await;
            let alert = mail::stop_alert(&client, settings, event.cli_name()).await;
            alert.map_or(Answer::Nothing, Answer::SystemMessage)
        }
        HookEvent::StatusLine => Answer::Line(status_line(&client, settings).await),
    }
}

/// A block when the current task (`TASK_ID`) has been cancelled. Without a task id
/// nothing is blocked: an agent may run several tasks at once, and one cancellation
/// must not stop the others.
async fn cancelled_block(client: &Client, settings: &HookSettings) -> Option<Answer> {
    let task_id = settings.task_id?;
    let query = [("taskId", task_id.to_string())];
    let found: CancelledTasks = client.get_json("/cancelled-tasks", &query).await.ok()?;
    let cancelled = found.cancelled.into_iter().find(|task| task.id == task_id.to_string())?;
    let reason = cancelled.failure_reason.filter(|reason| !reason.trim().is_empty());
    let reason = reason.map(|reason| format!(" Reason: {reason}.")).unwrap_or_default();
    Some(Answer::Block(format!(
        "Swarm task {task_id} was cancelled.{reason} Stop working on it now: do not retry this \
         tool call and do not report on the task. Say in one line what state you leave things in, \
         and end."
    )))
}

async fn heartbeat(client: &Client, settings: &HookSettings) {
    if settings.agent_id.is_some() {
        let _ = client.ping().await;
    }
}

async fn me(client: &Client, settings: &HookSettings) -> Option<Me> {
    settings.agent_id?;
    client.get_json("/me", &[("include", "inbox".to_string())]).await.ok()
}

async fn current_task(client: &Client, settings: &HookSettings) -> Option<(TaskId, TaskSummary)> {
    let task_id = settings.task_id?;
    let task = client.get_json(&format!("/api/tasks/{task_id}"), &[]).await.ok()?;
    Some((task_id, task))
}

async fn session_context(client: &Client, settings: &HookSettings) -> Answer {
    let Some(me) = me(client, settings).await else {
        if settings.agent_id.is_none() && client.health().await.is_ok() {
            return Answer::Context(format!(
                "This project is connected to a swarm hub at {} (MCP server `{SERVER_NAME}`), but no \
                 agent id is set. To take part, register with the `join-swarm` tool; `/start-worker` \
                 and `/start-leader` explain the work.",
                settings.base_url
            ));
        }
        return Answer::Nothing;
    };
    let kind = if me.is_lead { "the lead" } else { "a worker" };
    let mut context = format!(
        "You are {} ({kind}, agent id {}) in a swarm of coding agents; its tools are the `{SERVER_NAME}` \
         MCP server's.",
        me.name, me.id
    );
    if let Some((task_id, task)) = current_task(client, settings).await {
        context.push_str(&format!(
            " Your current task is {task_id} ({}): {}. Report progress and the outcome with \
             store-progress.",
            task.status,
            excerpt(&task.task, TASK_EXCERPT_CHARS)
        ));
    }
    if let Some(waiting) = me.inbox.as_ref().and_then(waiting_summary) {
        context.push(' ');
        context.push_str(&waiting);
    }
    Answer::Context(context)
}

/// On each prompt, only what waits for the agent, and nothing when nothing does: this
/// goes into the context every time. The mail is delivered last: once the hub marked it
/// read, only printing it remains.
async fn prompt_context(client: &Client, settings: &HookSettings) -> Answer {
    let inbox = me(client, settings).await.and_then(|me| me.inbox);
    let waiting = inbox.as_ref().and_then(waiting_summary);
    // Most prompts find no mail: the counts just read say so without two more requests.
    let no_mail = inbox.as_ref().is_some_and(|inbox| inbox.unread_mail_count == 0);
    let mail = if no_mail { None } else { mail::deliver(client, settings).await };
    let parts: Vec<String> = [mail, waiting].into_iter().flatten().collect();
    if parts.is_empty() { Answer::Nothing } else { Answer::Context(parts.join("\n\n")) }
}

fn waiting_summary(inbox: &Inbox) -> Option<String> {
    let mut parts = Vec::new();
    if inbox.offered_tasks_count > 0 {
        parts.push(format!(
            "{} task(s) offered to you (review with /review-offered-task <id>; list them with get-tasks, \
             offeredToMe: true)",
            inbox.offered_tasks_count
        ));
    }
    if inbox.mentions_count > 0 {
        parts.push(format!(
            "{} chat message(s) mentioning you (read them with read-messages, unreadOnly: true)",
            inbox.mentions_count
        ));
    }
    if inbox.waiting_for_response {
        parts.push("you are waiting for a response to mail you sent (list-mail, pending: true)".into());
    }
    (!parts.is_empty()).then(|| format!("Waiting for you in the swarm: {}.", parts.join("; ")))
}

async fn status_line(client: &Client, settings: &HookSettings) -> String {
    let Some(agent_id) = settings.agent_id else {
        return "swarm · no agent id (set AGENT_ID, or run `swarm connect --agent-id`)".to_string();
    };
    let me = match client.get_json::<Me>("/me", &[("include", "inbox".to_string())]).await {
        Ok(me) => me,
        Err(err) if err.is_unreachable() => {
            return format!("swarm · hub unreachable at {}", settings.base_url);
        }
        Err(err) => {
            return match err.status().map(|status| status.as_u16()) {
                Some(401) => "swarm · the hub refused the API key (set API_KEY)".to_string(),
                Some(404) => format!("swarm · agent {} is not registered", short_id(&agent_id.to_string())),
                _ => "swarm · cannot read this agent from the hub".to_string(),
            };
        }
    };
    let kind = if me.is_lead { "lead" } else { "worker" };
    let mut parts = vec![format!("swarm · {} ({kind}, {})", me.name, me.status)];
    if let Some((task_id, task)) = current_task(client, settings).await {
        parts.push(format!("task {} {}", short_id(&task_id.to_string()), task.status));
    }
    if let Some(inbox) = &me.inbox {
        parts.push(format!("{} offered", inbox.offered_tasks_count));
        parts.push(format!("{} in pool", inbox.pool_tasks_count));
        if inbox.mentions_count > 0 {
            parts.push(format!("{} @", inbox.mentions_count));
        }
        let urgent = if inbox.urgent_mail_count > 0 {
            format!(" ({} urgent)", inbox.urgent_mail_count)
        } else {
            String::new()
        };
        parts.push(format!("{} mail{urgent}", inbox.unread_mail_count));
        if inbox.waiting_for_response {
            parts.push("waiting for a reply".into());
        }
    }
    parts.join(" · ")
}

impl HookSettings {
    /// From the environment first (a runner sets it per agent), else from the
    /// project's `.mcp.json`, else the defaults.
    fn resolve(input: &Value) -> HookSettings {
        let env = |name: &str| {
            std::env::var(name).ok().map(|value| value.trim().to_string()).filter(|v| !v.is_empty())
        };
        Self::from_sources(env, mcp_json_server(input).as_ref())
    }

    /// A repository's `.mcp.json` may name any URL, so it never decides where the key
    /// of this machine goes: the key from the environment (and `${VAR}`s expanded from
    /// it) is sent only to the environment's URL or to this machine (loopback); a URL
    /// elsewhere that comes from the file gets only a key written literally in the file.
    fn from_sources(env: impl Fn(&str) -> Option<String>, server: Option<&Value>) -> HookSettings {
        let raw = |pointer: &str| server?.pointer(pointer)?.as_str().map(str::to_string);
        let expanded = |pointer: &str| {
            let text = raw(pointer)?;
            let expanded = expand_env_placeholders(&text, |name| env(name));
            let expanded = expanded.trim().to_string();
            (!expanded.is_empty() && !expanded.contains("${")).then_some(expanded)
        };
        let bearer = |header: String| {
            header.strip_prefix("Bearer").map(str::trim).filter(|key| !key.is_empty()).map(str::to_string)
        };
        let (base_url, env_key_may_go) = match env("MCP_BASE_URL") {
            Some(url) => (url, true),
            None => match expanded("/url") {
                Some(url) => {
                    let url = url.trim_end_matches('/').trim_end_matches("/mcp").to_string();
                    let local = swarm_client::is_plain_loopback_url(&url);
                    (url, local)
                }
                None => (DEFAULT_URL.to_string(), true),
            },
        };
        let api_key = if env_key_may_go {
            env("API_KEY").or_else(|| expanded("/headers/Authorization").and_then(bearer))
        } else {
            raw("/headers/Authorization").filter(|header| !header.contains("${")).and_then(bearer)
        };
        let agent_id = env("AGENT_ID").or_else(|| expanded("/headers/X-Agent-ID"));
        HookSettings {
            base_url,
            api_key,
            agent_id: agent_id.and_then(|text| AgentId::parse(&text).ok()),
            task_id: env("TASK_ID")
                .or_else(|| task_id_from_task_file(&env("TASK_FILE")?))
                .and_then(|text| TaskId::parse(&text).ok()),
        }
    }

    fn client(&self) -> Option<Client> {
        let config = ClientConfig {
            base_url: self.base_url.clone(),
            api_key: self.api_key.clone(),
            agent_id: self.agent_id,
        };
        Client::new(config).ok()
    }
}

/// The reference's runner exports no `TASK_ID`: it writes the run's task to a JSON file
/// (`{"taskId": ...}`) and names it in `TASK_FILE`.
fn task_id_from_task_file(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let file: serde_json::Value = serde_json::from_str(&text).ok()?;
    file.get("taskId")?.as_str().map(str::to_string)
}

/// Our server's entry in `<project>/.mcp.json`; the project is `CLAUDE_PROJECT_DIR`
/// (set by Claude Code for hooks), else the event's `cwd`, else ours.
fn mcp_json_server(input: &Value) -> Option<Value> {
    let project = std::env::var_os("CLAUDE_PROJECT_DIR")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| input.get("cwd").and_then(Value::as_str).map(PathBuf::from))
        .or_else(|| std::env::current_dir().ok())?;
    let text = std::fs::read_to_string(project.join(".mcp.json")).ok()?;
    let mut root: Value = serde_json::from_str(&text).ok()?;
    root.get_mut("mcpServers")?.get_mut(SERVER_NAME).map(Value::take)
}

/// The event's JSON, or `Null` when there is none or it is not JSON.
fn read_stdin_json() -> Value {
    use std::io::IsTerminal as _;
    if std::io::stdin().is_terminal() {
        return Value::Null;
    }
    let (sender, receiver) = std::sync::mpsc::channel();
    // A thread, not the runtime: a blocked read on a pipe that never closes must not
    // keep the process alive, and a detached thread ends with it.
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::stdin().lock().take(1 << 20).read_to_string(&mut text);
        let _ = sender.send(text);
    });
    let text = receiver.recv_timeout(STDIN_DEADLINE).unwrap_or_default();
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

fn print_stdout(text: &str) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
}

fn short_id(id: &str) -> String {
    id.chars().take(8).collect()
}

#[cfg(test)]
mod tests;
