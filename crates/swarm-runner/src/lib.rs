//! The runner behind `swarm worker` and `swarm lead` (the reference's runner, docs/running-agents.md).
//!
//! A runner speaks for one agent: it registers it with a hub, long-polls the hub for
//! triggers, and starts the agent CLI (a "harness": Claude Code, Codex, or any program)
//! only when there is work, up to `max_concurrent` runs at once. It heartbeats while
//! anything runs, logs every run locally and to the hub, settles what each run leaves
//! behind, and on shutdown hands unfinished tasks back as `paused`.
//!
//! Start one with [`run`]; `swarm demo` can start several in one process, each with its
//! own [`RunnerConfig`] and [`Shutdown`].
//!
//! Architecture invariant: the runner knows the hub only through HTTP (`swarm-client`)
//! and keeps no state that matters beyond one run: what it holds is recorded at the hub,
//! so a restarted runner (same `AGENT_ID`) picks it up from there.

mod agent_run;
mod budget_wait;
mod claims;
mod config;
pub mod doctor;
mod error;
mod harness;
mod hub;
mod isolation;
mod logs;
mod presence;
mod process;
mod resume;
mod run;
mod runner;
mod settle;
mod shipper;
mod stall;
mod steering;
mod supervise;
mod view;
mod work;
mod worktree;

pub use config::{
    DEFAULT_ENV_FAILURE_LIMIT, DEFAULT_MODEL_UNREACHABLE, DEFAULT_POLL_WAIT, DEFAULT_QUICK_EXIT,
    DEFAULT_SHUTDOWN_TIMEOUT, MAX_CONCURRENT_TASKS_LIMIT, OutputFormat, Role, RunnerConfig, WorktreeMode,
};
pub use error::RunnerError;
pub use harness::{Harness, MailDelivery, McpConfig, Prompts, StreamFormat};
pub use stall::{DEFAULT_STALL, DEFAULT_TOOL_LOOP_LIMIT};
use tokio_util::sync::CancellationToken;

/// How a runner is told to stop. `graceful`: take no new work, give running agents up to
/// `shutdown_timeout`, then stop them. `immediate`: stop running agents now (their tasks
/// are still paused and the agent closed).
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    pub graceful: CancellationToken,
    pub immediate: CancellationToken,
}

impl Shutdown {
    /// A shutdown driven by SIGINT and SIGTERM: the first asks for a graceful stop, the
    /// second for an immediate one, and a third ends the process at once (exit status
    /// 130), for when even that waits on an absent hub. For a command's `main`, not for
    /// a runner embedded among other work.
    pub fn on_signals() -> std::io::Result<Shutdown> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let shutdown = Shutdown::default();
        let tokens = shutdown.clone();
        tokio::spawn(async move {
            for token in [&tokens.graceful, &tokens.immediate] {
                tokio::select! {
                    _ = interrupt.recv() => {}
                    _ = terminate.recv() => {}
                }
                token.cancel();
            }
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            std::process::exit(130);
        });
        Ok(shutdown)
    }
}

/// Why a runner returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunnerExit {
    /// It was asked to stop.
    Stopped,
    /// An agent run failed (non-zero exit, or the agent CLI could not be started) and
    /// the runner was not told to keep going (`yolo`); says how the run ended.
    AgentFailed(String),
    /// The agent CLI failed at once, without doing anything, too many times in a row
    /// (bad key, model unreachable, bad flag): the environment needs fixing, the tasks
    /// went back to the queue. Says what the CLI said last.
    EnvironmentFailed(String),
}

/// Runs until `shutdown` (or, without `yolo`, until an agent run fails). Errors are
/// the ones that make running pointless: an agent CLI that cannot run here (found by
/// [`doctor::preflight`] before anything is claimed), a configuration the hub refuses
/// (bad API key, a second lead), an invalid setting.
pub async fn run(config: RunnerConfig, shutdown: Shutdown) -> Result<RunnerExit, RunnerError> {
    runner::run(config, shutdown).await
}
