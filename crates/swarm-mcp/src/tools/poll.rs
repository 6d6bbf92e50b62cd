//! `poll-task`: the legacy wait-for-work loop of `--ai-loop` agents, over the same
//! poll that runners long-poll through `GET /api/poll`.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use swarm_domain::poll::{PoolMode, Trigger};
use swarm_service::{POLL_WAIT_MAX, PollRequest};

use crate::{
    context::ToolCall,
    registry::{Audience, ToolSpec},
    reply::{Answer, Outcome, Reply},
};

const POLL_WAIT_DEFAULT: Duration = Duration::from_secs(30);

/// The wait a `poll-task` call with valid `arguments` asks for: what the Tasks extension
/// runs as a task. `None` for arguments the call would refuse.
pub fn requested_wait(arguments: &serde_json::Value) -> Option<Duration> {
    let arguments = if arguments.is_null() { serde_json::json!({}) } else { arguments.clone() };
    let args: PollTaskArguments = serde_json::from_value(arguments).ok()?;
    let wait = args.wait_seconds.map_or(POLL_WAIT_DEFAULT, Duration::from_secs);
    (wait <= POLL_WAIT_MAX).then_some(wait)
}

/// One step of a `poll-task` run as a task: a poll that answers at once.
pub fn step_arguments() -> serde_json::Value {
    serde_json::json!({"waitSeconds": 0})
}

pub fn group() -> Vec<ToolSpec> {
    vec![ToolSpec::new(
        "poll-task",
        "Wait for work: the next task offered to you (task-action accepts or rejects it) or assigned \
         to you and now started (a ready pool task is claimed for you), or nothing after waitSeconds.",
        Audience::WorkerOnly,
        poll_task,
    )]
}

/// The result fields of `poll-task`: the REST poll's trigger, and its task at the top.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct PollTaskOutput {
    /// `null` when no work arrived; else what `GET /api/poll` hands out.
    trigger: Option<Trigger>,
    /// The offered or assigned task, when there is one.
    task: Option<swarm_domain::task::Task>,
    waited_for_seconds: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PollTaskArguments {
    /// How long to wait for work, 0 to 60 seconds (default 30).
    #[schemars(range(min = 0, max = 60))]
    wait_seconds: Option<u64>,
}

async fn poll_task(call: ToolCall, args: PollTaskArguments) -> Outcome<PollTaskOutput> {
    let wait = match args.wait_seconds {
        None => POLL_WAIT_DEFAULT,
        Some(seconds) if Duration::from_secs(seconds) <= POLL_WAIT_MAX => Duration::from_secs(seconds),
        Some(seconds) => {
            let max = POLL_WAIT_MAX.as_secs();
            return Err(Reply::refused(format!("waitSeconds must be between 0 and {max}, got {seconds}")));
        }
    };
    let request = PollRequest { wait, pool: PoolMode::Claim, runner: None };
    let started = std::time::Instant::now();
    let trigger = call.service.poll(call.caller(), request).await?;
    let waited = started.elapsed().as_secs();
    let (message, task) = match &trigger {
        None => (
            format!("no work arrived within {}s: call poll-task again to keep waiting", wait.as_secs()),
            None,
        ),
        Some(Trigger::TaskOffered { task_id, task }) => {
            (format!("task {task_id} is offered to you: accept or reject it with task-action"), Some(task))
        }
        Some(Trigger::TaskAssigned { task_id, task }) => (
            format!("task {task_id} is yours and started: work on it, then report with store-progress"),
            Some(task),
        ),
        Some(other) => (format!("{} for you", other.type_name()), None),
    };
    let task = task.cloned();
    Ok(Answer::new(message, PollTaskOutput { trigger, task, waited_for_seconds: waited }))
}
