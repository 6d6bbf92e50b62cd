//! OpenAI Codex: its harness file (`codex.toml`), what the runner reads of `codex exec
//! --json`, and of Codex's own files: a thread's token counts so far, because Codex reports a
//! resumed thread's counts including the turns before (docs/real-agent-clis.md), and the hub
//! wants each run's own.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::report::{RunReport, TokenCounts};

/// The built-in harness, as data.
pub(crate) const SPEC: &str = include_str!("codex.toml");

/// Takes in one `exec --json` event.
pub(crate) fn observe(report: &mut RunReport, event: &Value) {
    let text = |key: &str| event.get(key).and_then(Value::as_str).map(str::to_string);
    let number = |value: Option<&Value>| value.and_then(Value::as_i64);
    let kind = event.get("type").and_then(Value::as_str);
    match kind {
        Some("thread.started") => report.session_id = text("thread_id").or(report.session_id.take()),
        Some("session.created") => report.session_id = text("session_id").or(report.session_id.take()),
        Some("turn.completed") | Some("turn.failed") => {
            if kind == Some("turn.failed") {
                report.is_error = true;
                let message = event.pointer("/error/message").and_then(Value::as_str);
                report.error_text = message.map(str::to_string).or(report.error_text.take());
                if let Some(said) = message.filter(|said| model_refusal(said)) {
                    report.model_refused = Some(said.to_string());
                }
            }
            report.num_turns = Some(report.num_turns.unwrap_or(0) + 1);
            // Codex counts the whole thread so far, earlier invocations included: the
            // latest count replaces the previous one (see `RunReport::subtract`).
            if let Some(usage) = event.get("usage") {
                report.input_tokens = number(usage.get("input_tokens")).or(report.input_tokens);
                report.cache_read_tokens =
                    number(usage.get("cached_input_tokens")).or(report.cache_read_tokens);
                report.output_tokens = number(usage.get("output_tokens")).or(report.output_tokens);
            }
            report.waiting_for_model = None;
        }
        Some(kind @ ("item.started" | "item.completed")) => {
            let item = event.get("item");
            let item_kind = item
                .and_then(|item| item.get("type").or_else(|| item.get("item_type")))
                .and_then(Value::as_str);
            if item_kind.is_some_and(|item_kind| item_kind != "error") {
                report.activity = true;
            }
            if kind == "item.started"
                && let Some((name, arguments)) = item.and_then(|item| tool_call(item, item_kind?))
            {
                report.tool_loop.called(&name, &arguments);
            }
            if kind == "item.completed"
                && item_kind == Some("agent_message")
                && let Some(message) = item.and_then(|item| item.get("text")).and_then(Value::as_str)
            {
                report.result = Some(message.to_string());
                report.last_text = Some(message.to_string());
            }
            // The model answered or a tool ran.
            report.waiting_for_model = None;
        }
        Some("error") => {
            report.is_error = true;
            // Codex does not give up on a model it cannot reach: it says so and retries
            // forever (docs/real-agent-clis.md).
            let message = text("message").unwrap_or_default();
            if message.starts_with("Reconnecting") {
                report.waiting_for_model = Some(message.clone());
            }
            // "unexpected status 401 Unauthorized: ...", retried or not.
            if model_refusal(&message) {
                report.model_refused = Some(message.clone());
            }
            report.error_text = Some(message);
        }
        _ => {}
    }
}

/// The model's API refused Codex (`unexpected status 401 Unauthorized: ...`, retried or
/// not); not an MCP server refusing it, which Codex reports in other words.
fn model_refusal(message: &str) -> bool {
    message.contains("unexpected status") && crate::stall::refusal_in(message)
}

/// A tool call Codex started, as its name and arguments (`None` for what is no call: the
/// model's messages and reasoning, its plan).
fn tool_call(item: &Value, kind: &str) -> Option<(String, Value)> {
    match kind {
        "agent_message" | "reasoning" | "todo_list" | "error" => None,
        "mcp_tool_call" => {
            let name = format!("{}.{}", item["server"].as_str()?, item["tool"].as_str()?);
            Some((name, item.get("arguments").cloned().unwrap_or(Value::Null)))
        }
        "command_execution" => Some((kind.to_string(), item.get("command").cloned()?)),
        // A web search, a file change: the item without what differs between two calls.
        _ => {
            let mut call = item.clone();
            if let Some(fields) = call.as_object_mut() {
                for varying in ["id", "status", "aggregated_output", "exit_code", "result", "error"] {
                    fields.remove(varying);
                }
            }
            Some((kind.to_string(), call))
        }
    }
}

/// `$CODEX_HOME`, else `~/.codex`: where Codex keeps its sessions.
fn codex_home() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    var("CODEX_HOME").or_else(|| var("HOME").map(|home| home.join(".codex")))
}

/// The thread's counts as its session file last recorded them (`token_count` events'
/// `total_token_usage`); `None` when there is no file or no count, and the run's counts are
/// then taken as they come.
pub(crate) fn thread_usage(thread_id: &str) -> Option<TokenCounts> {
    usage_in(&codex_home()?.join("sessions"), thread_id)
}

fn usage_in(sessions: &Path, thread_id: &str) -> Option<TokenCounts> {
    let file = find_rollout(sessions, thread_id)?;
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().rev().find_map(|line| {
        if !line.contains("\"token_count\"") {
            return None;
        }
        let event: Value = serde_json::from_str(line).ok()?;
        let total = event.pointer("/payload/info/total_token_usage")?;
        let count = |key: &str| total.get(key).and_then(Value::as_i64).unwrap_or(0);
        Some(TokenCounts {
            input: count("input_tokens"),
            cached: count("cached_input_tokens"),
            output: count("output_tokens"),
        })
    })
}

/// `sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`, searched for rather than built:
/// the date is the thread's start, not today.
fn find_rollout(dir: &Path, thread_id: &str) -> Option<PathBuf> {
    let suffix = format!("-{thread_id}.jsonl");
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).ok()?.map_while(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.file_name().is_some_and(|name| name.to_string_lossy().ends_with(&suffix)) {
                return Some(path);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_threads_last_total() {
        let dir = tempfile::tempdir().unwrap();
        let day = dir.path().join("2026/11/25");
        std::fs::create_dir_all(&day).unwrap();
        let total = |input: i64| {
            format!(
                r#"{{"type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{input},"cached_input_tokens":3,"output_tokens":20}}}}}}}}"#
            )
        };
        std::fs::write(
            day.join("rollout-2026-11-25T10-00-00-th-1.jsonl"),
            format!("{}\n{{\"type\":\"other\"}}\n{}\n", total(100), total(200)),
        )
        .unwrap();
        let file = find_rollout(dir.path(), "th-1").unwrap();
        assert!(file.ends_with("rollout-2026-11-25T10-00-00-th-1.jsonl"));
        assert_eq!(find_rollout(dir.path(), "th-2"), None);
        assert_eq!(usage_in(dir.path(), "th-1"), Some(TokenCounts { input: 200, cached: 3, output: 20 }));
    }
}
