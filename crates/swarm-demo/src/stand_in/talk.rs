//! The stand-in's side of agent chat, mail and Claude Code's hooks:
//! - `You have N unread mention(s) in chat channels:` reads each listed channel
//!   (`read-messages`, unread only) and answers, in its thread, each message read that
//!   mentions it;
//! - `You have N urgent mail:` answers each piece whose sender waits (`reply-mail`);
//! - a task whose text starts with `Ask the coordinator:` sends the rest as an urgent
//!   help request awaiting a response (`send-mail` to the coordinator), then reports the
//!   task done: asking was the work;
//! - as `claude`, it runs the project's Claude Code hooks as Claude Code does: the
//!   `UserPromptSubmit` command hooks of `.claude/settings.json` before acting, with the
//!   prompt, and the `Stop` hooks after, each with Claude Code's JSON on stdin. Each
//!   hook's exit code and output is recorded as `<pid>.hook-<Event>` in the record
//!   folder, which is how tests see what the hooks told the agent.

use std::{
    io::Write as _,
    path::Path,
    process::{Command, Stdio},
};

use anyhow::Context as _;
use serde_json::{Value, json};

use super::call_tool;

/// The start of a task's text that makes the stand-in ask the coordinator for help.
pub(super) const ASK_MARKER: &str = "Ask the coordinator:";

/// `read-messages` each channel of the prompt (unread only), then answer, in its
/// thread, every message read that mentions this agent: what was read is marked read,
/// so what it shows is what must be answered, including mentions newer than the prompt.
pub(super) async fn answer_mentions(prompt: &str) -> anyhow::Result<String> {
    let me = std::env::var("AGENT_ID").unwrap_or_default();
    let mut answered = 0;
    for channel in prompt.lines().filter_map(|line| field(line, "channelId: ")) {
        let read = call_tool("read-messages", json!({"channelId": channel, "unreadOnly": true})).await?;
        for message in read["messages"].as_array().into_iter().flatten() {
            let mentions_me =
                message["mentions"].as_array().is_some_and(|ids| ids.iter().any(|id| id == &json!(me)));
            let Some(id) = message["id"].as_str().filter(|_| mentions_me) else { continue };
            let reply =
                json!({"channelId": channel, "replyToId": id, "content": format!("stand-in answer to {id}")});
            call_tool("post-message", reply).await?;
            answered += 1;
        }
    }
    Ok(format!("answered {answered} mention(s)"))
}

/// Answer each listed piece of mail whose sender waits; the rest is only read.
pub(super) async fn answer_mail(prompt: &str) -> anyhow::Result<String> {
    let mut ids = Vec::new();
    let mut waiting = Vec::new();
    for line in prompt.lines() {
        if let Some(id) = field(line.trim_start_matches("- "), "mailId: ") {
            if line.contains("waiting for your response") {
                waiting.push(id.clone());
            }
            ids.push(id);
        }
    }
    // A hook may have delivered it already: reading by id then shows it again, read.
    call_tool("read-mail", json!({"mailIds": ids})).await?;
    for id in &waiting {
        call_tool("reply-mail", json!({"mailId": id, "body": format!("stand-in answer to mail {id}")}))
            .await?;
    }
    Ok(format!("read {} mail, answered {}", ids.len(), waiting.len()))
}

/// Send the question as an urgent help request awaiting a response, and report the task
/// done.
pub(super) async fn ask_for_help(task_id: &str, question: &str) -> anyhow::Result<String> {
    let mail = json!({
        "to": "coordinator", "type": "help_request", "priority": "urgent", "awaitingResponse": true,
        "subject": question, "body": format!("Task {task_id} is blocked: {question}"),
    });
    call_tool("send-mail", mail).await?;
    let output = format!("asked the coordinator: {question}");
    call_tool("store-progress", json!({"taskId": task_id, "status": "completed", "output": output})).await?;
    Ok(output)
}

/// `<prefix><value>;` somewhere in the line: the value.
fn field(line: &str, prefix: &str) -> Option<String> {
    let rest = &line[line.find(prefix)? + prefix.len()..];
    Some(rest.split(';').next()?.trim().to_string()).filter(|value| !value.is_empty())
}

/// Run the command hooks `.claude/settings.json` (in the current directory) has for
/// `event`, as Claude Code runs them: through the shell, the event's JSON on stdin,
/// `CLAUDE_PROJECT_DIR` set. What each printed is recorded; the `additionalContext`s are
/// returned.
pub(super) fn run_hooks(
    event: &str,
    extra: Value,
    session_id: &str,
    record_dir: Option<&Path>,
) -> Vec<String> {
    let Ok(project) = std::env::current_dir() else { return Vec::new() };
    let Ok(text) = std::fs::read_to_string(project.join(".claude").join("settings.json")) else {
        return Vec::new();
    };
    let Ok(settings) = serde_json::from_str::<Value>(&text) else { return Vec::new() };
    let mut payload = json!({
        "session_id": session_id,
        "transcript_path": project.join(format!(".claude/transcripts/{session_id}.jsonl")),
        "cwd": project,
        "permission_mode": "default",
        "hook_event_name": event,
    });
    if let (Some(payload), Some(extra)) = (payload.as_object_mut(), extra.as_object()) {
        payload.extend(extra.clone());
    }
    let commands: Vec<String> = settings["hooks"][event]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|group| group["hooks"].as_array().cloned().unwrap_or_default())
        .filter(|hook| hook["type"] == "command")
        .filter_map(|hook| hook["command"].as_str().map(str::to_string))
        .collect();
    let mut contexts = Vec::new();
    for (index, command) in commands.iter().enumerate() {
        let outcome = run_hook(command, &payload, &project);
        if let Some(context) =
            outcome.as_ref().ok().and_then(|(_, stdout)| serde_json::from_str::<Value>(stdout).ok()).and_then(
                |answer| answer["hookSpecificOutput"]["additionalContext"].as_str().map(str::to_string),
            )
        {
            contexts.push(context);
        }
        if let Some(dir) = record_dir {
            let entry = match &outcome {
                Ok((code, stdout)) => json!({"command": command, "exitCode": code, "stdout": stdout}),
                Err(error) => json!({"command": command, "error": format!("{error:#}")}),
            };
            let path = dir.join(format!("{}.hook-{event}.{index}", std::process::id()));
            let _ = std::fs::write(path, entry.to_string());
        }
    }
    contexts
}

fn run_hook(command: &str, payload: &Value, project: &Path) -> anyhow::Result<(Option<i32>, String)> {
    let mut child = Command::new("sh")
        .args(["-c", command])
        .env("CLAUDE_PROJECT_DIR", project)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot run the hook {command:?}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(payload.to_string().as_bytes());
    }
    let output = child.wait_with_output().context("the hook did not end")?;
    Ok((output.status.code(), String::from_utf8_lossy(&output.stdout).into_owned()))
}
