//! One agent run: start the agent CLI for a piece of [`Work`] (in its worktree, resuming
//! its session), have it supervised (`supervise.rs`: output, stopping), ship its cost and
//! settle what it leaves behind (`settle.rs`): a task the agent did not report on is
//! failed with a reason, never silently "completed".

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use serde_json::json;
use swarm_client::SessionCostRequest;
use swarm_domain::id::TaskId;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::{
    harness::{Invocation, MailDelivery, RunReport},
    logs::{RunLog, RunMetadata, append_error},
    process::ChildExit,
    run::{Context, Outcome},
    settle::{give_back, hand_back, settle},
    shipper::RunKey,
    supervise::supervise,
    view::human_duration,
    work::Work,
    worktree::{self},
};

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
    if config.harness.mail() == MailDelivery::Prompt
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
        // A task whose run was cut short goes on in its session.
        (_, None) => crate::resume::session_to_resume(&context, &work).await,
    };
    // Codex counts a resumed thread's tokens from its start: what it had counted before.
    let resumed_from = resume.clone();
    let counted_before = resume.as_deref().and_then(|session| config.harness.counted_before(session));
    let worktree = worktree::enter(&context.run_place(), &work, &label).await;
    let cwd =
        worktree.as_ref().ok().and_then(|worktree| worktree.as_ref().map(|worktree| worktree.cwd.clone()));
    let key = RunKey { iteration, task_id };
    let spawned = match (RunLog::create(&context.session_dir, &metadata).await, worktree) {
        (Ok(log), Ok(worktree)) => {
            match spawn_agent(&context, &work, &prompt, resume.as_deref(), cwd.as_deref()) {
                Ok(child) => Ok((log, child, worktree)),
                Err(reason) => {
                    if let Some(worktree) = worktree {
                        worktree::leave(&context.run_place(), worktree, &work, &key, &label).await;
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
        && supervised.nowhere.is_none()
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
        if let Err(err) = append_error(
            &context.session_dir,
            iteration,
            Some(exit),
            work.kind(),
            metadata.task_id.clone(),
            &message,
        )
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
    // A CLI that does not name its model (Codex, opencode) ran the one it was asked for.
    if supervised.report.model.is_none() {
        supervised.report.model = work.model().or(config.model.as_deref()).map(str::to_string);
    }
    if supervised.report.has_usage() {
        context.shipper.cost(cost_request(&context, task_id, &supervised.report));
    }

    // A CLI without hooks takes waiting steering by resuming its session, before settling.
    let place =
        crate::steering::ResumePlace { key: &key, stop: &stop, metadata: &metadata, cwd: cwd.as_deref() };
    let supervised = crate::steering::resume_for_steering(&context, &work, &place, supervised).await;
    let exit = supervised.exit;

    // Before settling: the task may still take a note of what its worktree holds.
    if let Some(worktree) = worktree {
        worktree::leave(&context.run_place(), worktree, &work, &key, &label).await;
    }
    // A CLI that gave up on a model it could not reach (opencode retries for about 70 s
    // itself) failed for the environment's sake, however long it tried.
    let gave_up_on_model = supervised.report.waiting_for_model.is_some();
    let quick = started.elapsed() < config.quick_exit || gave_up_on_model;
    let unreachable = supervised.unreachable.as_ref().map(|said| {
        format!(
            "the agent CLI could not reach the model for {}, and the runner stopped it: {said}",
            human_duration(config.model_unreachable)
        )
    });
    // A run going nowhere (stalled, looping, refused by its model) is handed back like one
    // that could not work: the task was never the problem.
    let env_failure = unreachable.or_else(|| supervised.nowhere.clone()).or_else(|| {
        (!supervised.stopped
            && !supervised.cancelled
            // pi exits 0 when the model fails it, and says so in its output.
            && (!exit.success() || supervised.report.is_error)
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
                let when = if gave_up_on_model { "unable to reach the model" } else { "at once" };
                format!("the agent CLI ended with {exit} {when}, without doing anything: {said}")
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
        let outcome = give_back(&context, &work, reason).await;
        if supervised.nowhere.is_some() {
            crate::stall::note_on_agent(&context, reason).await;
        }
        outcome
    } else {
        settle(&context, &work, exit, &supervised).await
    };
    crate::steering::settle_after_run(&context, &work, &outcome, &label).await;
    let end = match (supervised.stopped, supervised.cancelled) {
        (_, true) => RunEnd::Cancelled(exit),
        (true, false) => RunEnd::Stopped(exit),
        (false, false) => RunEnd::Exited(exit),
    };
    // The agent may have reported before failing: that is no environment failure.
    let env_failure = env_failure.filter(|_| outcome == Outcome::Released || work.task_id().is_none());
    result(end, outcome, env_failure)
}

pub(crate) fn spawn_agent(
    context: &Context,
    work: &Work,
    prompt: &str,
    resume: Option<&str>,
    cwd: Option<&std::path::Path>,
) -> Result<tokio::process::Child, String> {
    let config = &context.config;
    let invocation = Invocation {
        prompt,
        system_prompt: &context.system_prompt,
        agent_args: &config.agent_args,
        resume,
        model: work.model().or(config.model.as_deref()),
    };
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
    // Its hooks take the task's steering only where they pass it on to the agent.
    match config.harness.steering() {
        crate::harness::SteeringDelivery::Hooks => command.env(swarm_domain::steering::STEERING_ENV, "hooks"),
        _ => command.env_remove(swarm_domain::steering::STEERING_ENV),
    };
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
    let mut child = command.spawn().map_err(|err| {
        format!(
            "cannot start the agent CLI {}: {err}; install it, or choose another with --harness / --harness-cmd",
            program.display()
        )
    })?;
    if let (Some(text), Some(mut stdin)) = (config.harness.input(&invocation), child.stdin.take()) {
        // Written beside the run: a CLI that fails before reading it all must not hold it up.
        // Closed once written, so the CLI's read ends.
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt as _;
            let _ = stdin.write_all(text.as_bytes()).await;
        });
    }
    Ok(child)
}

pub(crate) fn cost_request(
    context: &Context,
    task_id: Option<TaskId>,
    report: &RunReport,
) -> SessionCostRequest {
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
