//! Noticing a run that is going nowhere (issue 40): a run with no sign of life for
//! `STALL_SECONDS` is *stalled*, one that makes the same tool call with the same arguments
//! `TOOL_LOOP_LIMIT` times in a row is *looping*, and one whose model refused its key
//! (issue 41) will never get anywhere. `supervise.rs` stops each at once, with its process
//! tree; `agent_run.rs` hands its task back to the queue (not `failed`: the work was never
//! the problem) with the reason on the task and on the agent.
//!
//! The reference notices stalled tasks in its heartbeat sweep, from the task's
//! `lastUpdatedAt` (`detectAndRemediateStalledTasks`, `getStalledInProgressTasks`,
//! `stalledTasks`), after 5 to 30 minutes. A runner sees more and sooner: every line the
//! agent CLI prints is a sign of life, and so is any change of the task at the hub
//! (`store-progress`, the agent's own task actions), which [`watch_task`] reads while the
//! run is about a task. Hooks (`swarm hook`) fire only around a tool call or at the end of a
//! turn, which the CLI prints on its stream anyway: the stream stands for them.

use std::time::Duration;

use serde_json::{Value, json};
use swarm_client::Client;
use swarm_domain::{id::TaskId, time::Timestamp};
use tokio::sync::watch;

use crate::{
    run::{Context, clip_chars},
    view::human_duration,
};

/// `STALL_SECONDS` default. Claude Code lets one `Bash` command run silently for up to 10
/// minutes (its longest tool timeout) and Codex waits 5 minutes on a silent model stream
/// before it retries: a run quiet for longer than both, with no progress at the hub either,
/// is hung (a stream that never ends, a tool waiting for input nobody will type), not busy.
pub const DEFAULT_STALL: Duration = Duration::from_secs(11 * 60);

/// `TOOL_LOOP_LIMIT` default. An agent that runs a command again to see whether something
/// changed does so a few times, with other calls in between; ten identical calls in a row are
/// a model repeating itself.
pub const DEFAULT_TOOL_LOOP_LIMIT: u32 = 10;

/// How long noting a reason on the agent may take before the run's end goes on without it.
const NOTE_DEADLINE: Duration = Duration::from_secs(10);
/// The hub's limit on an agent's `statusReason`, less the clipping mark (`...`).
const STATUS_REASON_CHARS: usize = swarm_domain::agent::STATUS_REASON_MAX_CHARS - 3;

/// The longest tool call kept for comparison and for the reason: a loop is told by its
/// first few hundred characters as well as by all of them.
const CALL_CHARS: usize = 400;

/// The tool calls a run made, as far as a loop is concerned: the last one and how many
/// times in a row it was made. Each harness's output parser reports every tool call it
/// reads, in order, with [`ToolLoop::called`] (Claude Code's `tool_use` blocks, Codex's
/// `item.started` of a tool or command): a CLI added to the runner only has to do the same.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ToolLoop {
    last: Option<String>,
    in_a_row: u32,
}

impl ToolLoop {
    /// One tool call the agent started: `name` with `arguments` (call ids left out: they
    /// differ every time).
    pub fn called(&mut self, name: &str, arguments: &Value) {
        let call = clip_chars(&format!("{name} {arguments}"), CALL_CHARS);
        if self.last.as_ref() == Some(&call) {
            self.in_a_row += 1;
        } else {
            self.last = Some(call);
            self.in_a_row = 1;
        }
    }

    /// How many times in a row the last call was made (for a parser's tests).
    #[cfg(test)]
    pub fn in_a_row(&self) -> u32 {
        self.in_a_row
    }

    /// The reason to stop the run, once the same call was made `limit` times in a row
    /// (`limit` 0: never).
    pub fn looping(&self, limit: u32) -> Option<String> {
        let call = self.last.as_deref().filter(|_| limit > 0 && self.in_a_row >= limit)?;
        Some(format!(
            "the agent made the same tool call {} times in a row (TOOL_LOOP_LIMIT {limit}), \
             and the runner stopped it: {call}",
            self.in_a_row
        ))
    }
}

/// The reason for a run stopped after `quiet` without a sign of life.
pub(crate) fn stalled_reason(quiet: Duration) -> String {
    format!(
        "the run stalled: no output from the agent CLI and no progress at the hub for {} \
         (STALL_SECONDS), and the runner stopped it",
        human_duration(quiet)
    )
}

/// The reason for a run stopped because its model refused it.
pub(crate) fn refused_reason(said: &str) -> String {
    format!(
        "the model refused the agent CLI's key or account, and the runner stopped it: {said}. \
         Fix the key (or the account's access) the CLI uses, then start the runner again"
    )
}

/// How often a run asks the hub whether its task changed: often enough to matter against
/// `stall`, never more than once a second nor less than every 30 s.
pub(crate) fn task_check_every(stall: Duration) -> Duration {
    (stall / 4).clamp(Duration::from_secs(1), Duration::from_secs(30))
}

/// Sends the task's `lastUpdatedAt` each time it changes at the hub: the agent stored
/// progress or acted on it through its MCP tools, which the runner does not see on the
/// CLI's stream. A failed read is tried again at the next tick (the hub may be away for a
/// moment; that is no sign of anything).
pub(crate) async fn watch_task(
    client: Client,
    task_id: TaskId,
    every: Duration,
    changed: watch::Sender<Option<Timestamp>>,
) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Ok(detail) = client.get_task(task_id).await else { continue };
        let seen = Some(detail.task.last_updated_at);
        changed.send_if_modified(|last| {
            let moved = *last != seen;
            *last = seen;
            moved
        });
    }
}

/// Puts why a run went nowhere on the agent (`statusReason`, where the dashboard and
/// `GET /api/agents/:id` show it; the hub clears it when the agent takes work again). A hub
/// that does not answer only costs the note: the task already carries the reason.
pub(crate) async fn note_on_agent(context: &Context, reason: &str) {
    let path = format!("/api/agents/{}/status-reason", context.config.agent_id);
    let body = json!({ "reason": clip_chars(reason, STATUS_REASON_CHARS) });
    let record = context.client.post_json::<_, Value>(&path, &body);
    match tokio::time::timeout(NOTE_DEADLINE, record).await {
        Ok(Ok(_)) => {}
        Ok(Err(err)) => {
            context.view.warn("note_failed", &format!("cannot note why on the agent: {err}"), &[])
        }
        Err(_) => {
            context.view.warn("note_failed", "cannot note why on the agent: the hub did not answer", &[])
        }
    }
}

/// Claude Code's and Codex's words for a refused key, and any CLI's: an HTTP 401 or 403
/// from the model's API. A harness's parser that reads an error from its CLI asks this
/// before setting [`crate::harness::RunReport::model_refused`].
pub(crate) fn refusal_in(text: &str) -> bool {
    let lower = text.to_lowercase();
    ["invalid api key", "unauthorized", "forbidden", "authentication_error", "permission_error"]
        .iter()
        .any(|words| lower.contains(words))
        || ["401", "403"].iter().any(|status| {
            lower.match_indices(status).any(|(at, _)| {
                let before = lower[..at].chars().next_back();
                let after = lower[at + 3..].chars().next();
                !before.is_some_and(|c| c.is_ascii_alphanumeric())
                    && !after.is_some_and(|c| c.is_ascii_alphanumeric())
            })
        })
}

/// An HTTP status that refuses the caller (never transient): 401 and 403.
pub(crate) fn refusing_status(status: &Value) -> bool {
    matches!(status.as_i64(), Some(401 | 403))
        || status.as_str().is_some_and(|text| matches!(text.trim(), "401" | "403"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::harness::{RunReport, StreamFormat};

    #[test]
    fn the_same_call_in_a_row_is_a_loop_and_another_call_breaks_it() {
        let mut calls = ToolLoop::default();
        let same = json!({"command": "git status"});
        for _ in 0..2 {
            calls.called("Bash", &same);
        }
        assert_eq!(calls.looping(3), None);
        calls.called("Bash", &same);
        assert_eq!(calls.in_a_row(), 3);
        let reason = calls.looping(3).expect("three in a row");
        assert!(reason.contains("3 times in a row") && reason.contains("git status"), "{reason}");

        // Other arguments, or another tool, start the count again.
        calls.called("Bash", &json!({"command": "git diff"}));
        assert!(calls.looping(1).is_some() && calls.looping(2).is_none(), "{calls:?}");
        calls.called("Read", &json!({"command": "git diff"}));
        calls.called("Bash", &json!({"command": "git diff"}));
        assert!(calls.looping(2).is_none(), "{calls:?}");
        assert_eq!(calls.looping(0), None, "0 turns the check off");
        assert_eq!(ToolLoop::default().looping(1), None, "no call, no loop");
    }

    #[test]
    fn a_huge_call_is_compared_by_its_beginning() {
        let mut calls = ToolLoop::default();
        let long = "x".repeat(10_000);
        calls.called("Write", &json!({"content": long}));
        calls.called("Write", &json!({"content": long}));
        let reason = calls.looping(2).unwrap();
        assert!(reason.len() < 1_000, "{reason}");
    }

    #[test]
    fn refusals_are_401_and_403_in_the_clis_words() {
        for refused in [
            "Invalid API key · Fix external API key",
            "unexpected status 401 Unauthorized: Incorrect API key provided",
            "API Error: 403 {\"type\":\"error\",\"error\":{\"type\":\"permission_error\"}}",
            "Failed to authenticate. API Error: 401",
        ] {
            assert!(refusal_in(refused), "{refused}");
        }
        for other in [
            "Reconnecting... 2/5 (Connection failed)",
            "API Error: 529 Overloaded",
            "unexpected status 500 Internal Server Error",
            "request 14012 failed",
            "",
        ] {
            assert!(!refusal_in(other), "{other}");
        }
        assert!(refusing_status(&json!(401)) && refusing_status(&json!("403")));
        assert!(!refusing_status(&json!(529)) && !refusing_status(&Value::Null));
    }

    /// What Claude Code and Codex print for a refused key and for tool calls, as their
    /// parsers read it (`harness/claude.rs`, `harness/codex.rs`).
    #[test]
    fn the_clis_parsers_report_refusals_and_tool_calls() {
        let read = |format: StreamFormat, lines: &[&str]| {
            let mut report = RunReport::default();
            for line in lines {
                format.observe(&mut report, line);
            }
            report
        };
        let claude = StreamFormat::ClaudeStreamJson;
        let retrying = read(
            claude,
            &[
                r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"error_status":401,"error":"authentication_failed"}"#,
            ],
        );
        assert_eq!(retrying.model_refused.as_deref(), Some("the model answered 401: authentication_failed"));
        let overloaded =
            read(claude, &[r#"{"type":"system","subtype":"api_retry","attempt":1,"error_status":529}"#]);
        assert_eq!(overloaded.model_refused, None, "an overloaded model is waited for");
        let synthetic = read(
            claude,
            &[
                r#"{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"Invalid API key · Fix external API key"}]}}"#,
                r#"{"type":"result","is_error":true,"result":"Invalid API key · Fix external API key"}"#,
            ],
        );
        assert_eq!(synthetic.model_refused.as_deref(), Some("Invalid API key · Fix external API key"));
        let tool_use = r#"{"type":"assistant","message":{"model":"m","content":[{"type":"tool_use","id":"ID","name":"Bash","input":{"command":"ls"}}]}}"#;
        let looping = read(claude, &[&tool_use.replace("ID", "a"), &tool_use.replace("ID", "b")]);
        assert!(looping.tool_loop.looping(2).is_some_and(|reason| reason.contains("Bash")), "{looping:?}");
        assert_eq!(looping.model_refused, None);

        let codex = StreamFormat::CodexJsonl;
        let refused = read(
            codex,
            &[
                r#"{"type":"error","message":"unexpected status 401 Unauthorized: Incorrect API key provided"}"#,
                r#"{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized"}}"#,
            ],
        );
        assert_eq!(refused.model_refused.as_deref(), Some("unexpected status 401 Unauthorized"));
        let down = read(codex, &[r#"{"type":"error","message":"Reconnecting... 2/5 (Connection failed)"}"#]);
        assert_eq!(down.model_refused, None, "an unreachable model is MODEL_UNREACHABLE_MS's");
        let call = r#"{"type":"item.started","item":{"id":"ID","type":"mcp_tool_call","server":"agent_swarm","tool":"get_swarm","arguments":{},"status":"in_progress"}}"#;
        let done = r#"{"type":"item.completed","item":{"id":"a","type":"mcp_tool_call","server":"agent_swarm","tool":"get_swarm","arguments":{},"status":"completed"}}"#;
        let looping = read(codex, &[&call.replace("ID", "a"), done, &call.replace("ID", "b")]);
        let reason = looping.tool_loop.looping(2).expect("the same call twice");
        assert!(reason.contains("agent_swarm.get_swarm"), "{reason}");
        let command = r#"{"type":"item.started","item":{"id":"ID","type":"command_execution","command":"bash -lc ls","aggregated_output":"","status":"in_progress"}}"#;
        let other = read(codex, &[&command.replace("ID", "a"), &call.replace("ID", "b")]);
        assert_eq!(other.tool_loop.looping(2), None, "two different calls");
    }

    #[test]
    fn the_task_is_checked_often_enough_for_the_stall() {
        assert_eq!(task_check_every(Duration::from_secs(2)), Duration::from_secs(1));
        assert_eq!(task_check_every(Duration::from_secs(60)), Duration::from_secs(15));
        assert_eq!(task_check_every(DEFAULT_STALL), Duration::from_secs(30));
        assert!(stalled_reason(Duration::from_secs(5)).contains("STALL_SECONDS"));
    }
}
