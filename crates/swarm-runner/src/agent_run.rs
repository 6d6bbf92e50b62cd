//! One agent run: start the agent CLI for a piece of [`Work`], keep its output (log file,
//! hub, parsed report), stop it when asked, and settle what it leaves behind: a task the
//! agent did not report on is failed with a reason, never silently "completed".

use std::{
    collections::VecDeque,
    fmt,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use serde_json::json;
use swarm_client::{Client, SessionCostRequest};
use swarm_domain::{id::TaskId, session::SESSION_LINE_MAX_CHARS, task::TaskStatus};
use tokio::{
    io::{AsyncBufReadExt, AsyncRead, BufReader},
    time::Instant,
};
use tokio_util::sync::CancellationToken;

use crate::{
    codex,
    config::RunnerConfig,
    harness::{Harness, Invocation, RunReport},
    logs::{RunLog, RunMetadata, append_error},
    process::{ChildExit, descendants, signal_tree},
    settle::{clip_chars, give_back, hand_back, settle},
    shipper::{RunKey, Shipper},
    view::{View, human_duration},
    work::Work,
    worktree::{self, Worktrees},
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

/// How a run ended.
#[derive(Debug)]
pub(crate) struct RunResult {
    pub label: String,
    pub elapsed: Duration,
    pub end: RunEnd,
    pub outcome: Outcome,
    /// The agent CLI failed at once without doing anything: the environment's fault
    /// (bad key, model unreachable, bad flag), with what the CLI said.
    pub env_failure: Option<String>,
}

#[derive(Debug)]
pub(crate) enum RunEnd {
    /// The agent exited by itself.
    Exited(ChildExit),
    /// The runner stopped it (shutdown).
    Stopped(ChildExit),
    /// The runner stopped it because its task was cancelled at the hub.
    Cancelled(ChildExit),
    /// The agent could not be started (missing CLI, log folder not writable, ...).
    NotStarted(String),
    /// There was nothing to run any more (a paused task could not be resumed).
    Skipped(String),
}

impl RunResult {
    /// A failed agent run, which stops the runner unless `--yolo`. Environment
    /// failures are counted apart ([`RunResult::env_failure`]).
    pub fn agent_failed(&self) -> bool {
        self.env_failure.is_none()
            && (matches!(&self.end, RunEnd::Exited(exit) if !exit.success())
                || matches!(self.end, RunEnd::NotStarted(_)))
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

/// Counts a run as active for as long as it lives.
struct ActiveGuard(Arc<AtomicUsize>);

impl ActiveGuard {
    fn new(active: &Arc<AtomicUsize>) -> ActiveGuard {
        active.fetch_add(1, Ordering::SeqCst);
        ActiveGuard(Arc::clone(active))
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Runs `work` as run number `iteration`; `stop` asks the agent to stop (shutdown).
/// However it ends, the lead-side claims its trigger took belong to this run: what it
/// left unfinished is offered again at once.
pub(crate) async fn run(
    context: Arc<Context>,
    work: Work,
    iteration: u64,
    stop: CancellationToken,
) -> RunResult {
    let held = work.held();
    let result = run_agent(Arc::clone(&context), work, iteration, stop).await;
    crate::claims::release_after_run(&context.client, &context.view, &result.label, &held).await;
    result
}

async fn run_agent(context: Arc<Context>, work: Work, iteration: u64, stop: CancellationToken) -> RunResult {
    let _active = ActiveGuard::new(&context.active);
    let started = Instant::now();
    let label = work.label();
    let result = |end: RunEnd, outcome: Outcome, env_failure: Option<String>| RunResult {
        label: label.clone(),
        elapsed: started.elapsed(),
        end,
        outcome,
        env_failure,
    };
    if let Work::Resume { task } = &work
        && let Err(err) = context.client.resume_task(task.id).await
    {
        return result(
            RunEnd::Skipped(format!("cannot resume it: {err}")),
            Outcome::Unsettled(err.to_string()),
            None,
        );
    }

    let config = &context.config;
    let mut prompt = work.prompt(&config.default_prompt);
    if config.harness == Harness::Codex
        && let Some(mail) = deliver_mail(&context).await
    {
        prompt.push_str("\n\n");
        prompt.push_str(&mail);
    }
    let task_id = work.task_id();
    let metadata = RunMetadata {
        role: config.role.as_str(),
        session_id: &config.session_id,
        iteration,
        prompt: &prompt,
        trigger: work.kind(),
        task_id: task_id.map(|id| id.to_string()),
        yolo: config.yolo,
    };
    // A trigger conversation resumes its agent session; a result resumes the session
    // that awaited it.
    let session = work.session();
    let mut resume = match (&work, &session) {
        (Work::TaskResult { session_id, .. }, _) => session_id.clone(),
        (_, Some((name, key))) => context.client.trigger_session(name, key).await.unwrap_or_else(|err| {
            context.view.warn(
                "session_lookup_failed",
                &format!("{label}: cannot look up its session: {err}"),
                &[],
            );
            None
        }),
        (_, None) => None,
    };
    // Codex counts a resumed thread's tokens from its start: what it had counted before.
    let resumed_from = resume.clone();
    let counted_before = match (&config.harness, &resume) {
        (Harness::Codex, Some(thread)) => codex::thread_usage(thread),
        _ => None,
    };
    let worktree = worktree::enter(&context, &work, &label).await;
    let cwd =
        worktree.as_ref().ok().and_then(|worktree| worktree.as_ref().map(|worktree| worktree.cwd.clone()));
    let key = RunKey { iteration, task_id };
    let spawned = match (RunLog::create(&context.session_dir, &metadata).await, worktree) {
        (Ok(log), Ok(worktree)) => {
            match spawn_agent(&context, &work, &prompt, resume.as_deref(), cwd.as_deref()) {
                Ok(child) => Ok((log, child, worktree)),
                Err(reason) => {
                    if let Some(worktree) = worktree {
                        worktree::leave(&context, worktree, &work, &key, &label).await;
                    }
                    Err(reason)
                }
            }
        }
        (Err(err), _) => Err(format!("{err:#}")),
        (_, Err(reason)) => Err(reason),
    };
    context.shipper.start(spawned.is_ok());
    let (log, child, worktree) = match spawned {
        Ok(spawned) => spawned,
        Err(reason) => {
            let _ =
                append_error(&context.session_dir, iteration, None, work.kind(), metadata.task_id, &reason)
                    .await;
            // Nobody here can do the work: it goes back to the queue for a runner that can.
            let outcome = give_back(&context, &work, &reason).await;
            return result(RunEnd::NotStarted(reason.clone()), outcome, Some(reason));
        }
    };

    let log_path = log.path().display().to_string();
    context.view.info(
        "run_started",
        &format!("▸ {label}: started {} (run {iteration}, log {log_path})", work.kind()),
        &[
            ("trigger", json!(work.kind())),
            ("taskId", json!(task_id)),
            ("iteration", json!(iteration)),
            ("log", json!(log_path)),
        ],
    );

    let mut supervised = supervise(&context, child, log, &key, &stop).await;
    if let Some(session) = resume.take()
        && !supervised.stopped
        && !supervised.cancelled
        && !supervised.exit.success()
        && supervised.report.session_id.is_none()
    {
        // The agent CLI could not resume the session (expired, another machine's):
        // the conversation goes on in a new one.
        context.view.warn(
            "resume_failed",
            &format!("{label}: could not resume session {session}; starting a new one"),
            &[("sessionId", json!(session))],
        );
        let retried = match RunLog::create(&context.session_dir, &metadata).await {
            Ok(log) => spawn_agent(&context, &work, &prompt, None, cwd.as_deref()).map(|child| (log, child)),
            Err(err) => Err(format!("{err:#}")),
        };
        context.shipper.start(retried.is_ok());
        if let Ok((log, child)) = retried {
            supervised = supervise(&context, child, log, &key, &stop).await;
        }
    }
    if let (Some((name, key)), Some(session_id)) = (&session, &supervised.report.session_id)
        && let Err(err) = context.client.set_trigger_session(name, key, session_id).await
    {
        context.view.warn(
            "session_record_failed",
            &format!("{label}: cannot record its session: {err}"),
            &[],
        );
    }
    if let Work::TaskResult { task, .. } = &work
        && supervised.exit.success()
        && !supervised.stopped
        && let Err(err) = context.client.task_result_delivered(task.id).await
    {
        context.view.warn(
            "result_ack_failed",
            &format!("{label}: cannot acknowledge the result: {err}"),
            &[],
        );
    }
    let exit = supervised.exit;
    if supervised.unshipped > 0 {
        context.view.warn(
            "hub_logs_dropped",
            &format!(
                "{label}: {} output lines were not sent to the hub (it was slow); they are in {log_path}",
                supervised.unshipped
            ),
            &[],
        );
    }
    if !exit.success() && !supervised.stopped && !supervised.cancelled {
        let message = format!("the agent ended with {exit}");
        if let Err(err) =
            append_error(&context.session_dir, iteration, Some(exit), work.kind(), metadata.task_id, &message)
                .await
        {
            context.view.warn("log_failed", &format!("cannot write errors.jsonl: {err:#}"), &[]);
        }
    }
    if let Some(before) = &counted_before
        && supervised.report.session_id == resumed_from
    {
        supervised.report.subtract(before);
    }
    if supervised.report.has_usage() {
        context.shipper.cost(cost_request(&context, task_id, &supervised.report));
    }

    // Before settling: the task may still take a note of what its worktree holds.
    if let Some(worktree) = worktree {
        worktree::leave(&context, worktree, &work, &key, &label).await;
    }
    let quick = started.elapsed() < config.quick_exit;
    let unreachable = supervised.unreachable.as_ref().map(|said| {
        format!(
            "the agent CLI could not reach the model for {}, and the runner stopped it: {said}",
            human_duration(config.model_unreachable)
        )
    });
    let env_failure = unreachable.or_else(|| {
        (!supervised.stopped
            && !supervised.cancelled
            && !exit.success()
            && quick
            && !supervised.report.activity)
            .then(|| {
                // The CLI's own account of the failure first (Claude Code's error result,
                // Codex's error event): its stderr may hold only warnings (an untrusted
                // workspace, plugins it could not sync).
                let own =
                    supervised.report.error_text.clone().or_else(|| supervised.report.last_text.clone());
                let said = match (own, supervised.stderr_tail.as_str()) {
                    (Some(own), "") => own,
                    (Some(own), tail) => format!("{own}; its stderr ended with: {tail}"),
                    (None, "") => "(nothing on stderr)".into(),
                    (None, tail) => tail.to_string(),
                };
                format!("the agent CLI ended with {exit} at once, without doing anything: {said}")
            })
    });
    let outcome = if supervised.stopped {
        hand_back(&context, &work).await
    } else if let Some(reason) = &env_failure {
        context.view.warn(
            "agent_env_failure",
            &format!("{label}: {reason}"),
            &[("stderr", json!(supervised.stderr_tail)), ("exitCode", json!(exit.code()))],
        );
        give_back(&context, &work, reason).await
    } else {
        settle(&context, &work, exit, &supervised).await
    };
    let end = match (supervised.stopped, supervised.cancelled) {
        (_, true) => RunEnd::Cancelled(exit),
        (true, false) => RunEnd::Stopped(exit),
        (false, false) => RunEnd::Exited(exit),
    };
    // The agent may have reported before failing: that is no environment failure.
    let env_failure = env_failure.filter(|_| outcome == Outcome::Released || work.task_id().is_none());
    result(end, outcome, env_failure)
}

fn spawn_agent(
    context: &Context,
    work: &Work,
    prompt: &str,
    resume: Option<&str>,
    cwd: Option<&std::path::Path>,
) -> Result<tokio::process::Child, String> {
    let config = &context.config;
    let invocation =
        Invocation { prompt, system_prompt: &context.system_prompt, agent_args: &config.agent_args, resume };
    let mut command = config.harness.command(&invocation);
    command.env("MCP_BASE_URL", &config.hub_url).env("AGENT_ID", config.agent_id.to_string());
    match &config.api_key {
        Some(key) => command.env("API_KEY", key),
        None => command.env_remove("API_KEY"),
    };
    // Only a run about a task gets TASK_ID; an inherited one would point it at the wrong task.
    match work.task_id() {
        Some(id) => command.env("TASK_ID", id.to_string()),
        None => command.env_remove("TASK_ID"),
    };
    command.env("SWARM_TRIGGER", work.kind());
    if let Some(cwd) = cwd {
        // Inherited from a git hook, these would point the agent's git at the main tree.
        command
            .current_dir(cwd)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE");
    }
    // The trigger session this run continues: `swarm mcp` and the MCP config (`X-Task-ID`)
    // pass it on, so a task the agent creates is awaited by this session.
    match work.session_task_id() {
        Some(id) => command.env("SWARM_SESSION_TASK_ID", id.to_string()),
        None => command.env_remove("SWARM_SESSION_TASK_ID"),
    };
    let (program, _) = config.harness.command_line(&invocation);
    command.spawn().map_err(|err| {
        format!(
            "cannot start the agent CLI {}: {err}; install it, or choose another with --harness / --harness-cmd",
            program.display()
        )
    })
}

pub(crate) struct Supervised {
    exit: ChildExit,
    stopped: bool,
    /// Stopped because the CLI kept failing to reach the model: what it said last.
    unreachable: Option<String>,
    /// Stopped because the task was cancelled at the hub.
    cancelled: bool,
    /// The agent's last lines on stderr.
    pub stderr_tail: String,
    pub report: RunReport,
    /// Output lines the hub did not get because the shipping queue was full.
    unshipped: u64,
}

/// Reads the agent's output until it exits, writing the log, feeding the report and the
/// shipper; on `stop`, SIGTERM to its process group, then SIGKILL after [`KILL_GRACE`].
async fn supervise(
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
        tokio::select! {
            line = next_line(&mut stdout) => match line {
                Some(line) => {
                    log_failed |= log.write_line(&line).await.is_err();
                    report.observe(&line);
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
                if waiting_since.is_some() && unreachable.is_none() && !stopped && !cancelled && exit.is_none() => {
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
        stderr_tail,
        report,
        unshipped,
    }
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

fn cost_request(context: &Context, task_id: Option<TaskId>, report: &RunReport) -> SessionCostRequest {
    SessionCostRequest {
        session_id: context.config.session_id.clone(),
        agent_id: context.config.agent_id,
        // Codex reports tokens, not money.
        total_cost_usd: report.cost_usd.unwrap_or(0.0).max(0.0),
        task_id,
        input_tokens: report.input_tokens,
        output_tokens: report.output_tokens,
        cache_read_tokens: report.cache_read_tokens,
        cache_write_tokens: report.cache_write_tokens,
        duration_ms: report.duration_ms,
        num_turns: report.num_turns,
        model: report.model.clone(),
        is_error: report.is_error,
    }
}

/// Delivers the agent's unread mail for a CLI that has no hooks to do it (Codex): the same
/// call and text as Claude Code's `UserPromptSubmit` hook (`swarm hook`), so the mail is
/// marked read once it is in the prompt. `None` when there is none, or the hub failed (the
/// mail then waits for the next run, or `read-mail`).
async fn deliver_mail(context: &Context) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Delivered {
        mail: Vec<swarm_domain::mail::Mail>,
    }
    // Names first: once the hub has marked the mail read, nothing may stand between the
    // answer and the prompt.
    let agents: serde_json::Value = context.client.get_json("/api/agents", &[]).await.unwrap_or_default();
    let names = agents["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|agent| {
            let id = swarm_domain::id::AgentId::parse(agent["id"].as_str()?).ok()?;
            let name = agent["name"].as_str()?;
            let name = if agent["isLead"] == true { format!("{name} (the lead)") } else { name.to_string() };
            Some((id, name))
        })
        .collect();
    let body = json!({"limit": swarm_domain::prompts::MAIL_PER_PROMPT});
    match context.client.post_json::<_, Delivered>("/api/mail/read", &body).await {
        Ok(delivered) if !delivered.mail.is_empty() => {
            context.view.info(
                "mail_delivered",
                &format!("{} unread mail put into the prompt", delivered.mail.len()),
                &[("count", json!(delivered.mail.len()))],
            );
            Some(swarm_domain::prompts::mail_delivery(&delivered.mail, &names))
        }
        Ok(_) => None,
        Err(err) => {
            context.view.warn("mail_failed", &format!("cannot read the agent's mail: {err}"), &[]);
            None
        }
    }
}
