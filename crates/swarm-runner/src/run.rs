//! What one agent run works with and how its task ended, shared by the steps of a run
//! (`agent_run.rs` starts it, `supervise.rs` watches it, `settle.rs` settles its task):
//! each of them reads these, none of them reads the others' types.

use std::{
    fmt,
    path::PathBuf,
    sync::{Arc, atomic::AtomicUsize},
};

use swarm_client::Client;
use swarm_domain::task::TaskStatus;

use crate::{
    config::RunnerConfig,
    shipper::Shipper,
    view::View,
    worktree::{RunPlace, Worktrees},
};

/// What every run shares: settings, the hub, the terminal, the log shipper.
pub(crate) struct Context {
    pub config: RunnerConfig,
    pub client: Client,
    pub view: View,
    pub shipper: Shipper,
    pub system_prompt: String,
    pub session_dir: PathBuf,
    /// Runs under way: the heartbeat pings while it is above zero.
    pub active: Arc<AtomicUsize>,
    /// The repository whose task runs get a worktree each, when they do.
    pub worktrees: Option<Worktrees>,
}

impl Context {
    /// Where a run's worktree reports what it did.
    pub(crate) fn run_place(&self) -> RunPlace<'_> {
        RunPlace {
            worktrees: self.worktrees.as_ref(),
            client: &self.client,
            view: &self.view,
            shipper: &self.shipper,
        }
    }
}

/// What became of the run's task.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// The run was about no task.
    NoTask,
    /// The task was finished (by the agent, or by someone else meanwhile).
    Finished { status: TaskStatus, detail: Option<String> },
    /// The agent left its task unreported; the runner failed it with this reason.
    FailedByRunner(String),
    /// The agent left an offer undecided; the runner rejected it with this reason.
    RejectedByRunner(String),
    /// The run was stopped and its task paused, for the next runner start to resume.
    Paused,
    /// The agent CLI could not work (environment failure): the task went back to the pool.
    Released,
    /// The task is in this status now, and the runner left it so (accepted, rejected,
    /// paused or released by the agent, returned through its lease, ...).
    Left(TaskStatus),
    /// The runner could not learn or settle the task's state.
    Unsettled(String),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::NoTask => write!(f, "no task"),
            Outcome::Finished { status, detail: Some(detail) } => write!(f, "{}: {detail}", status.as_str()),
            Outcome::Finished { status, detail: None } => write!(f, "{}", status.as_str()),
            Outcome::FailedByRunner(reason) => write!(f, "failed by the runner: {reason}"),
            Outcome::RejectedByRunner(reason) => write!(f, "offer rejected by the runner: {reason}"),
            Outcome::Paused => write!(f, "paused, resumable by the next runner start"),
            Outcome::Released => write!(f, "given back to the queue"),
            Outcome::Left(status) => write!(f, "left {}", status.as_str()),
            Outcome::Unsettled(reason) => write!(f, "unsettled: {reason}"),
        }
    }
}

pub(crate) fn clip_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}
