//! Supervising a started agent CLI: read its output until it exits (log file, parsed
//! report, lines shipped to the hub, the stderr tail kept for a failure's reason), and
//! stop it on shutdown, on its task's cancellation at the hub, or when it cannot reach
//! its model: SIGTERM to its process tree, SIGKILL after a grace.

use std::{collections::VecDeque, time::Duration};

use serde_json::json;
use swarm_client::Client;
use swarm_domain::{id::TaskId, session::SESSION_LINE_MAX_CHARS};
use tokio::{
    io::{AsyncBufReadExt, AsyncRead, BufReader},
    time::Instant,
};
use tokio_util::sync::CancellationToken;

use crate::{
    harness::RunReport,
    logs::RunLog,
    process::{ChildExit, descendants, signal_tree},
    resume,
    run::{Context, clip_chars},
    shipper::RunKey,
    stall,
    view::human_duration,
};

/// How long a stopped agent gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(3);
/// How often a run asks the hub whether its task was cancelled: a cancelled task's CLI
/// must stop within seconds, not when it chooses to.
const CANCEL_CHECK: Duration = Duration::from_secs(1);
/// The agent's last stderr lines kept for a failure's reason.
const STDERR_TAIL_LINES: usize = 12;
const STDERR_LINE_CHARS: usize = 400;
/// After the agent exits, how long its output pipes may stay open (held by a process it
/// left behind) before the runner stops reading them.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// How a supervised agent CLI ended, and what it said.
pub(crate) struct Supervised {
    pub exit: ChildExit,
    /// Stopped by the runner (shutdown).
    pub stopped: bool,
    /// Stopped because the CLI kept failing to reach the model: what it said last.
    pub unreachable: Option<String>,
    /// Stopped because the task was cancelled at the hub.
    pub cancelled: bool,
    /// Stopped because the run was going nowhere (`stall.rs`: stalled, looping, refused by
    /// its model): why.
    pub nowhere: Option<String>,
    /// The agent's last lines on stderr.
    pub stderr_tail: String,
    pub report: RunReport,
    /// Output lines the hub did not get because the shipping queue was full.
    pub unshipped: u64,
}

/// Reads the agent's output until it exits, writing the log, feeding the report and the
/// shipper; on `stop`, SIGTERM to its process group, then SIGKILL after [`KILL_GRACE`].
pub(crate) async fn supervise(
    context: &Context,
    mut child: tokio::process::Child,
    mut log: RunLog,
    key: &RunKey,
    stop: &CancellationToken,
) -> Supervised {
    let pid = child.id();
    let cancelled_at_hub = CancellationToken::new();
    let _watch = key.task_id.map(|task_id| {
        let watch = tokio::spawn(watch_cancel(context.client.clone(), task_id, cancelled_at_hub.clone()));
        AbortOnDrop(watch)
    });
    let mut cancelled = false;
    // Going nowhere (`stall.rs`): since when the run has shown no sign of life, and why it
    // was stopped. Changes of its task at the hub count as signs too.
    let stall = context.config.stall;
    let mut last_sign = Instant::now();
    let mut nowhere: Option<String> = None;
    let mut recorded_session: Option<String> = None;
    // `--ai-loop`'s agent waits for work by calling `poll-task` again and again: no loop.
    let tool_loop_limit = if context.config.ai_loop { 0 } else { context.config.tool_loop_limit };
    let (task_changed, mut task_changes) = tokio::sync::watch::channel(None);
    let _task_watch = key.task_id.filter(|_| !stall.is_zero()).map(|task_id| {
        let every = stall::task_check_every(stall);
        AbortOnDrop(tokio::spawn(stall::watch_task(context.client.clone(), task_id, every, task_changed)))
    });
    let mut stderr_tail: VecDeque<String> = VecDeque::new();
    let mut stdout = child.stdout.take().map(BufReader::new);
    let mut stderr = child.stderr.take().map(BufReader::new);
    let mut report = RunReport::default();
    let mut unshipped = 0;
    let mut log_failed = false;
    let mut stopped = false;
    let mut kill_at: Option<Instant> = None;
    let mut exit: Option<ChildExit> = None;
    let mut drain_until: Option<Instant> = None;
    // Since when the CLI has been saying it cannot reach the model, with no progress.
    let mut waiting_since: Option<Instant> = None;
    let mut unreachable: Option<String> = None;
    // The processes of the run when it was told to stop, its own process group aside.
    let mut tree: Vec<u32> = Vec::new();
    let limit = context.config.model_unreachable;
    loop {
        if stdout.is_none() && stderr.is_none() && exit.is_some() {
            break;
        }
        let watching_for_stall = !stall.is_zero()
            && nowhere.is_none()
            && unreachable.is_none()
            && !stopped
            && !cancelled
            && exit.is_none();
        tokio::select! {
            line = next_line(&mut stdout) => match line {
                Some(line) => {
                    log_failed |= log.write_line(&line).await.is_err();
                    context.config.harness.output().observe(&mut report, &line);
                    last_sign = Instant::now();
                    // Recorded at once: a runner killed mid-run leaves it for the next one.
                    if let (Some(task_id), Some(session)) = (key.task_id, &report.session_id)
                        && recorded_session.as_ref() != Some(session)
                    {
                        recorded_session = Some(session.clone());
                        let cli = context.config.harness.name().to_string();
                        let (client, view) = (context.client.clone(), context.view.clone());
                        tokio::spawn(resume::record_session(client, view, task_id, session.clone(), cli));
                    }
                    let still_going = nowhere.is_none() && !stopped && !cancelled && exit.is_none();
                    let going_nowhere = report.model_refused.as_deref().map(stall::refused_reason)
                        .or_else(|| report.tool_loop.looping(tool_loop_limit));
                    if let Some(reason) = going_nowhere.filter(|_| still_going) {
                        context.view.warn("run_going_nowhere", &reason, &[]);
                        kill_at = Some(terminate(pid, &mut tree));
                        nowhere = Some(reason);
                    }
                    waiting_since = match (&report.waiting_for_model, waiting_since) {
                        (Some(_), None) => Some(Instant::now()),
                        (Some(_), since) => since,
                        (None, _) => None,
                    };
                    if !line.trim().is_empty() && !context.shipper.line(key, clip_for_hub(&line)) {
                        unshipped += 1;
                    }
                }
                None => stdout = None,
            },
            line = next_line(&mut stderr) => match line {
                Some(line) => {
                    log_failed |= log.write_stderr(&line).await.is_err();
                    last_sign = Instant::now();
                    if !line.trim().is_empty() {
                        if stderr_tail.len() == STDERR_TAIL_LINES {
                            stderr_tail.pop_front();
                        }
                        stderr_tail.push_back(clip_chars(&line, STDERR_LINE_CHARS));
                    }
                }
                None => stderr = None,
            },
            status = child.wait(), if exit.is_none() => {
                exit = Some(status.map(ChildExit::from_status).unwrap_or(ChildExit::Code(-1)));
                drain_until = Some(Instant::now() + DRAIN_GRACE);
            }
            _ = stop.cancelled(), if !stopped && !cancelled && exit.is_none() => {
                stopped = true;
                if let Some(pid) = pid {
                    tree = descendants(pid);
                    signal_tree(pid, &tree, libc::SIGTERM);
                }
                kill_at = Some(Instant::now() + KILL_GRACE);
            }
            _ = cancelled_at_hub.cancelled(), if !stopped && !cancelled && exit.is_none() => {
                cancelled = true;
                context.view.info("task_cancelled", "its task was cancelled at the hub: stopping the agent CLI", &[]);
                if let Some(pid) = pid {
                    tree = descendants(pid);
                    signal_tree(pid, &tree, libc::SIGTERM);
                }
                kill_at = Some(Instant::now() + KILL_GRACE);
            }
            _ = tokio::time::sleep_until(waiting_since.map_or_else(Instant::now, |since| since + limit)),
                if waiting_since.is_some() && unreachable.is_none() && nowhere.is_none()
                    && !stopped && !cancelled && exit.is_none() => {
                // Codex retries an unreachable model forever: nobody would end this run.
                unreachable = report.waiting_for_model.clone();
                context.view.warn(
                    "model_unreachable",
                    &format!("the agent CLI has not reached the model for {}: stopping it", human_duration(limit)),
                    &[("said", json!(unreachable))],
                );
                if let Some(pid) = pid {
                    tree = descendants(pid);
                    signal_tree(pid, &tree, libc::SIGTERM);
                }
                kill_at = Some(Instant::now() + KILL_GRACE);
            }
            Ok(()) = task_changes.changed() => last_sign = Instant::now(),
            _ = tokio::time::sleep_until(last_sign + stall), if watching_for_stall => {
                let reason = stall::stalled_reason(stall);
                context.view.warn("run_stalled", &reason, &[]);
                kill_at = Some(terminate(pid, &mut tree));
                nowhere = Some(reason);
            }
            _ = tokio::time::sleep_until(kill_at.unwrap_or_else(Instant::now)), if kill_at.is_some() && exit.is_none() => {
                if let Some(pid) = pid {
                    tree.extend(descendants(pid));
                    signal_tree(pid, &tree, libc::SIGKILL);
                }
                let _ = child.start_kill();
                kill_at = None;
            }
            _ = tokio::time::sleep_until(drain_until.unwrap_or_else(Instant::now)), if drain_until.is_some() => {
                // Something the agent started still holds its output open: stop reading.
                if let Some(pid) = pid {
                    signal_tree(pid, &tree, libc::SIGKILL);
                }
                break;
            }
        }
    }
    if log.finish().await.is_err() || log_failed {
        context.view.warn("log_failed", "some agent output could not be written to the log file", &[]);
    }
    let stderr_tail = Vec::from(stderr_tail).join("\n");
    Supervised {
        exit: exit.unwrap_or(ChildExit::Code(-1)),
        stopped,
        unreachable,
        cancelled,
        nowhere,
        stderr_tail,
        report,
        unshipped,
    }
}

/// SIGTERM to the run's process tree, kept in `tree` for the SIGKILL that follows at the
/// time this answers.
fn terminate(pid: Option<u32>, tree: &mut Vec<u32>) -> Instant {
    if let Some(pid) = pid {
        *tree = descendants(pid);
        signal_tree(pid, tree, libc::SIGTERM);
    }
    Instant::now() + KILL_GRACE
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Fires `cancelled` once the hub lists the task as cancelled. A failed check is tried
/// again at the next tick: the hub may be away for a moment.
async fn watch_cancel(client: Client, task_id: TaskId, cancelled: CancellationToken) {
    let mut ticks = tokio::time::interval(CANCEL_CHECK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let answer: Result<serde_json::Value, _> =
            client.get_json("/cancelled-tasks", &[("taskId", task_id.to_string())]).await;
        let listed =
            answer.ok().and_then(|body| body.get("cancelled").and_then(|list| list.as_array()).cloned());
        if listed.is_some_and(|list| !list.is_empty()) {
            cancelled.cancel();
            return;
        }
    }
}

/// The next line of a pipe, lossily decoded; `None` at its end (or when there is no pipe).
async fn next_line<R: AsyncRead + Unpin>(reader: &mut Option<BufReader<R>>) -> Option<String> {
    let Some(reader) = reader else {
        return std::future::pending().await;
    };
    let mut bytes = Vec::new();
    match reader.read_until(b'\n', &mut bytes).await {
        Ok(0) | Err(_) => None,
        Ok(_) => {
            while bytes.last().is_some_and(|byte| *byte == b'\n' || *byte == b'\r') {
                bytes.pop();
            }
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
    }
}

/// The hub refuses a batch with a line above its limit; a huge line is cut instead.
fn clip_for_hub(line: &str) -> &str {
    if line.len() <= SESSION_LINE_MAX_CHARS {
        return line;
    }
    let mut cut = SESSION_LINE_MAX_CHARS;
    while !line.is_char_boundary(cut) {
        cut -= 1;
    }
    &line[..cut]
}
