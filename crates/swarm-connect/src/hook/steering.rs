//! The steering side of the hooks (issue 40): a task's steering messages reach the agent
//! working it, each once. `PostToolUse` gives it the `steer` messages as context (it reads
//! them before its next step); `Stop` gives it every message left and keeps it going,
//! with Claude Code's `{"decision": "block", "reason": ...}`, whose reason the model gets
//! as its next instruction (https://code.claude.com/docs/en/hooks, "Stop decision
//! control"). The hub marks a message delivered as it hands it out; the next delivery, or
//! the runner when the run ends, marks it handled.
//!
//! Only where the runner says this CLI's hooks carry steering (`SWARM_STEERING=hooks`):
//! a CLI that runs `swarm hook` but drops what it prints would lose the messages it took.

use swarm_client::Client;
use swarm_domain::steering::{STEERING_ENV, SteerMode, steering_prompt};

use super::{HookSettings, trace};

fn enabled() -> bool {
    std::env::var(STEERING_ENV).is_ok_and(|value| value.trim() == "hooks")
}

/// At a tool call: the task's `steer` messages, as context.
pub(super) async fn at_tool_use(client: &Client, settings: &HookSettings) -> Option<String> {
    deliver(client, settings, &[SteerMode::Steer], "post-tool-use").await
}

/// At the end of a turn: every message left, as the reason to go on.
pub(super) async fn at_turn_end(client: &Client, settings: &HookSettings) -> Option<String> {
    deliver(client, settings, SteerMode::ALL, "stop").await
}

async fn deliver(
    client: &Client,
    settings: &HookSettings,
    modes: &[SteerMode],
    event: &str,
) -> Option<String> {
    if !enabled() {
        return None;
    }
    settings.agent_id?;
    let task_id = settings.task_id?;
    match client.steering_deliver(task_id, modes).await {
        Ok(messages) if messages.is_empty() => None,
        Ok(messages) => Some(steering_prompt(task_id, &messages)),
        Err(error) => {
            trace::why(event, &format!("could not take task {task_id}'s steering messages: {error}"));
            None
        }
    }
}
