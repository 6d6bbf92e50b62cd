//! The runner's loop: register, pick up the agent's own unfinished work, long-poll for
//! triggers while a slot is free, start one agent run per trigger, heartbeat while
//! anything runs, and shut down gracefully.

use std::{
    collections::{HashMap, VecDeque},
    future::Future,
    pin::Pin,
    sync::{Arc, atomic::AtomicUsize},
    time::Duration,
};

use serde_json::json;
use swarm_client::{Client, ClientConfig, ClientError, Trigger};
use swarm_domain::id::RunnerId;
use tokio::{task::JoinSet, time::Instant};
use tokio_util::sync::CancellationToken;

use crate::{
    RunnerError, RunnerExit, Shutdown,
    agent_run::{self, RunEnd, RunResult},
    config::{MAX_CONCURRENT_TASKS_LIMIT, RunnerConfig},
    doctor,
    hub::{Backoff, report_retry, with_retry},
    presence::{FAREWELL_DEADLINE, heartbeat, held_work, pause_leftovers, register, tell_the_hub},
    run::{Context, Outcome},
    shipper,
    view::{View, human_duration},
    work::Work,
    worktree::Worktrees,
};

/// The hub's lease when it does not say (older hubs): `LEASE_SECONDS`' default.
const DEFAULT_LEASE: Duration = Duration::from_secs(45);
/// The shortest heartbeat interval, whatever the lease.
const MIN_HEARTBEAT: Duration = Duration::from_millis(100);
/// How often the view lists what is still running.
const STATUS_EVERY: Duration = Duration::from_secs(60);
/// How long queued output may take to reach the hub at shutdown.
const SHIPPER_DRAIN: Duration = Duration::from_secs(5);

type PollFuture = Pin<Box<dyn Future<Output = Result<Option<Trigger>, ClientError>> + Send>>;

/// Why the loop stopped taking work.
#[derive(Debug, Clone, PartialEq)]
enum StopReason {
    Signal,
    AgentFailed(String),
    EnvironmentFailed(String),
}

pub(crate) async fn run(config: RunnerConfig, shutdown: Shutdown) -> Result<RunnerExit, RunnerError> {
    if !(1..=MAX_CONCURRENT_TASKS_LIMIT).contains(&config.max_concurrent) {
        return Err(RunnerError::InvalidConfig(format!(
            "MAX_CONCURRENT_TASKS must be between 1 and {MAX_CONCURRENT_TASKS_LIMIT}, got {}",
            config.max_concurrent
        )));
    }
    let view = View::new(&config.agent_name, config.output);
    // Before the hub hears of this runner: a CLI that cannot run must not claim work
    // (not even the agent's own paused tasks) only to hand it back.
    if config.preflight {
        let checks = doctor::preflight(&config, &doctor::Environment::of_this_process()).await;
        if checks.iter().any(|check| !check.passed) {
            return Err(RunnerError::Preflight(checks));
        }
        let passed: Vec<String> =
            checks.iter().map(|check| format!("{}: {}", check.name, check.detail)).collect();
        view.info("preflight", &format!("checked: {}", passed.join("; ")), &[("checks", json!(passed))]);
    }
    // A new runner id per process: what this runner claims is held by it alone, so a
    // crashed runner's claims run out even while another runner of the agent lives.
    let runner_id = RunnerId::new_v7();
    let client = Client::new(ClientConfig {
        base_url: config.hub_url.clone(),
        api_key: config.api_key.clone(),
        agent_id: Some(config.agent_id),
    })
    .map_err(|source| RunnerError::Client { url: config.hub_url.clone(), source: Box::new(source) })?
    .with_runner_id(runner_id);
    let mode = if config.ai_loop {
        "ai-loop (legacy: the agent polls by itself)".to_string()
    } else {
        format!("runner-level polling, up to {} agent run(s) at once", config.max_concurrent)
    };
    view.info(
        "runner_started",
        &format!(
            "starting {} (agent id {}) for the hub at {}; agent CLI: {}; {mode}; logs in {}",
            config.role.as_str(),
            config.agent_id,
            config.hub_url,
            config.harness.name(),
            config.session_log_dir().display(),
        ),
        &[
            ("role", json!(config.role.as_str())),
            ("agentId", json!(config.agent_id)),
            ("hub", json!(config.hub_url)),
            ("sessionId", json!(config.session_id)),
        ],
    );

    let Some(health) = with_retry(&view, "reaching the hub", &shutdown.graceful, || client.health()).await
    else {
        return Ok(RunnerExit::Stopped);
    };
    let lease = health
        .map_err(|source| RunnerError::Hub { what: "/health", source: Box::new(source) })?
        .lease_seconds
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_LEASE);
    if config.holds_agent_token {
        crate::isolation::check(&client, &config, &view).await?;
    }
    if !register(&client, &config, &view, &shutdown.graceful).await? {
        return Ok(RunnerExit::Stopped);
    }
    crate::claims::release_previous_life(&client, &view, &config.log_dir, config.agent_id, runner_id).await;

    let (shipper, shipper_task) = shipper::start(
        client.clone(),
        config.session_id.clone(),
        config.harness.name().to_string(),
        view.clone(),
    );
    let active = Arc::new(AtomicUsize::new(0));
    let heartbeat_stop = CancellationToken::new();
    let heartbeat_every = (lease / 3).max(MIN_HEARTBEAT);
    let heartbeat = tokio::spawn(heartbeat(
        client.clone(),
        view.clone(),
        Arc::clone(&active),
        heartbeat_every,
        heartbeat_stop.clone(),
    ));
    let here = std::env::current_dir().map_err(|source| RunnerError::Io { path: ".".into(), source })?;
    let worktrees = Worktrees::for_runner(config.worktree, max_runs(&config), &here).await?;
    if let Some(worktrees) = &worktrees {
        view.info(
            "worktrees",
            &format!(
                "each task run works in a git worktree of its own under {} (--no-worktree: all in {})",
                worktrees.dir().display(),
                here.display()
            ),
            &[("dir", json!(worktrees.dir()))],
        );
    }
    let context = Arc::new(Context {
        system_prompt: config.full_system_prompt(),
        session_dir: config.session_log_dir(),
        config,
        client: client.clone(),
        view: view.clone(),
        shipper,
        active,
        worktrees,
    });

    let exit = work_loop(Arc::clone(&context), &shutdown).await;

    heartbeat_stop.cancel();
    let _ = heartbeat.await;
    drop(context);
    let unshipped = shipper_task.finish(SHIPPER_DRAIN).await;
    if unshipped > 0 {
        view.warn(
            "hub_logs_dropped",
            &format!("{unshipped} agent output lines never reached the hub; the log files have them all"),
            &[("lines", json!(unshipped))],
        );
    }
    match tokio::time::timeout(FAREWELL_DEADLINE, client.close()).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => view.warn("close_failed", &format!("could not mark the agent offline: {err}"), &[]),
        Err(_) => view.warn("close_failed", "could not mark the agent offline: the hub did not answer", &[]),
    }
    view.info("runner_stopped", "stopped; the agent is offline", &[]);
    Ok(exit)
}

/// Agent runs at once: `--ai-loop` runs one agent that polls by itself.
fn max_runs(config: &RunnerConfig) -> u32 {
    if config.ai_loop { 1 } else { config.max_concurrent }
}

/// A run under way, for the view.
struct Running {
    label: String,
    started: Instant,
}

/// Takes work and starts runs until told to stop, then winds the runs down.
async fn work_loop(context: Arc<Context>, shutdown: &Shutdown) -> RunnerExit {
    let config = &context.config;
    let view = &context.view;
    let max_runs = max_runs(config) as usize;
    let stop_runs = CancellationToken::new();
    let mut runs: JoinSet<RunResult> = JoinSet::new();
    let mut running: HashMap<tokio::task::Id, Running> = HashMap::new();
    let mut iteration: u64 = 0;
    let mut backlog: VecDeque<Work> =
        if config.ai_loop { VecDeque::new() } else { held_work(&context, shutdown, max_runs).await };
    let mut poll: Option<PollFuture> = None;
    let mut backoff = Backoff::default();
    let mut budget_wait = crate::budget_wait::BudgetWait::default();
    // Environment failures in a row, and their own backoff: polling again at once would
    // only claim the next task for a CLI that cannot run.
    let mut env_failures: u32 = 0;
    let mut env_backoff = Backoff::default();
    let mut retry_at: Option<Instant> = None;
    let mut stop_reason: Option<StopReason> = None;
    let mut waiting_shown = false;
    let mut status = tokio::time::interval_at(Instant::now() + STATUS_EVERY, STATUS_EVERY);

    let mut start = |work: Work, runs: &mut JoinSet<RunResult>, running: &mut HashMap<_, _>| {
        iteration += 1;
        let label = work.label();
        let handle =
            runs.spawn(agent_run::run(Arc::clone(&context), work, iteration, stop_runs.child_token()));
        running.insert(handle.id(), Running { label, started: Instant::now() });
    };

    while stop_reason.is_none() {
        while runs.len() < max_runs
            && let Some(work) = backlog.pop_front()
        {
            start(work, &mut runs, &mut running);
        }
        let retry_due = retry_at.is_none_or(|at| at <= Instant::now());
        if runs.len() < max_runs && backlog.is_empty() && poll.is_none() && retry_due {
            retry_at = None;
            if config.ai_loop {
                start(Work::Loop, &mut runs, &mut running);
                continue;
            }
            if !waiting_shown {
                waiting_shown = true;
                view.info(
                    "waiting",
                    &format!("waiting for work ({}/{max_runs} running)", runs.len()),
                    &[("running", json!(runs.len()))],
                );
            }
            let client = context.client.clone();
            let wait = config.poll_wait;
            poll = Some(Box::pin(async move { client.poll(wait).await }));
        }

        tokio::select! {
            _ = shutdown.graceful.cancelled() => stop_reason = Some(StopReason::Signal),
            Some(joined) = runs.join_next_with_id(), if !runs.is_empty() => {
                let Some(result) = finished_run(view, &mut running, joined) else { continue };
                waiting_shown = false;
                if let Some(reason) = &result.env_failure {
                    env_failures += 1;
                    if env_failures >= config.env_failure_limit {
                        stop_reason = Some(StopReason::EnvironmentFailed(format!(
                            "the agent CLI could not work {env_failures} times in a row (it failed at once, or went nowhere); last: {reason}"
                        )));
                    } else {
                        let delay = env_backoff.next_delay();
                        view.warn(
                            "env_backoff",
                            &format!(
                                "the agent CLI cannot work here ({env_failures} of {} failures in a row before the runner stops); \
                                 its work went back to the queue; taking work again in {}",
                                config.env_failure_limit,
                                human_duration(delay)
                            ),
                            &[("failures", json!(env_failures)), ("retryInMs", json!(delay.as_millis() as u64))],
                        );
                        retry_at = Some(retry_at.map_or(Instant::now() + delay, |at| at.max(Instant::now() + delay)));
                    }
                    continue;
                }
                if !matches!(result.end, RunEnd::Skipped(_)) {
                    env_failures = 0;
                    env_backoff.reset();
                }
                if result.agent_failed() {
                    if !config.yolo {
                        stop_reason = Some(StopReason::AgentFailed(end_text(&result.end)));
                    } else if config.ai_loop {
                        // Do not restart a crashing agent in a tight loop.
                        retry_at = Some(Instant::now() + backoff.next_delay());
                    }
                } else if config.ai_loop {
                    backoff.reset();
                }
            }
            polled = async { poll.as_mut().expect("polled only when set").await }, if poll.is_some() => {
                poll = None;
                if polled.is_ok() && backoff.failures() > 0 {
                    view.info("hub_back", "the hub answers again", &[]);
                }
                match polled {
                    Ok(Some(swarm_client::Trigger::BudgetRefused(refused))) => {
                        backoff.reset();
                        retry_at = Some(Instant::now() + budget_wait.refused(view, &refused));
                    }
                    Ok(Some(trigger)) => {
                        backoff.reset();
                        budget_wait.reset();
                        waiting_shown = false;
                        start(Work::from_trigger(trigger, &config.default_prompt), &mut runs, &mut running);
                    }
                    Ok(None) => backoff.reset(),
                    Err(err) if err.status().is_some_and(|status| status.as_u16() == 404) => {
                        // The hub forgot the agent (a new database): register again.
                        view.warn("agent_unknown", &format!("the hub does not know this agent ({err}); registering again"), &[]);
                        match register(&context.client, config, view, &shutdown.graceful).await {
                            Ok(true) => {}
                            Ok(false) => stop_reason = Some(StopReason::Signal),
                            Err(err) => {
                                view.warn("register_failed", &err.to_string(), &[]);
                                retry_at = Some(Instant::now() + backoff.next_delay());
                            }
                        }
                    }
                    Err(err) => {
                        let delay = backoff.next_delay();
                        report_retry(view, "polling for work", &err, delay, backoff.failures());
                        retry_at = Some(Instant::now() + delay);
                    }
                }
            }
            _ = tokio::time::sleep_until(retry_at.unwrap_or_else(Instant::now)), if retry_at.is_some() && poll.is_none() => {}
            _ = status.tick(), if !running.is_empty() => {
                let now = Instant::now();
                let list: Vec<String> = running
                    .values()
                    .map(|run| format!("{} ({})", run.label, human_duration(now - run.started)))
                    .collect();
                view.info("running", &format!("running: {}", list.join(", ")), &[("runs", json!(list))]);
            }
        }
    }

    // Stop taking work. A poll in flight is abandoned; what it may have claimed is paused below.
    drop(poll);
    let stop_reason = stop_reason.unwrap_or(StopReason::Signal);
    wind_down(&context, shutdown, &stop_reason, &mut runs, &mut running, &stop_runs).await;
    pause_leftovers(&context).await;
    if let StopReason::EnvironmentFailed(reason) = &stop_reason {
        tell_the_hub(&context, reason).await;
    }
    match stop_reason {
        StopReason::Signal => RunnerExit::Stopped,
        StopReason::AgentFailed(reason) => RunnerExit::AgentFailed(reason),
        StopReason::EnvironmentFailed(reason) => RunnerExit::EnvironmentFailed(reason),
    }
}

/// Waits for the runs still under way: after a signal, up to `SHUTDOWN_TIMEOUT` (or
/// until a second signal), then stops them; after a failed agent run, until they end by
/// themselves unless a signal comes.
async fn wind_down(
    context: &Context,
    shutdown: &Shutdown,
    reason: &StopReason,
    runs: &mut JoinSet<RunResult>,
    running: &mut HashMap<tokio::task::Id, Running>,
    stop_runs: &CancellationToken,
) {
    let view = &context.view;
    let timeout = context.config.shutdown_timeout;
    let waiting = match runs.len() {
        0 => String::new(),
        n => format!("; waiting up to {} for {n} agent run(s)", human_duration(timeout)),
    };
    let mut deadline = match reason {
        StopReason::Signal => {
            view.info(
                "stopping",
                &format!("stopping: no new work{waiting}"),
                &[("running", json!(runs.len()))],
            );
            Some(Instant::now() + timeout)
        }
        StopReason::EnvironmentFailed(reason) => {
            view.warn(
                "stopping",
                &format!("stopping: taking no more work, {reason}. Fix the environment (`swarm doctor`), then start the runner again"),
                &[("reason", json!(reason))],
            );
            None
        }
        StopReason::AgentFailed(end) => {
            let waiting = if runs.is_empty() {
                String::new()
            } else {
                format!("; waiting for {} agent run(s) to end", runs.len())
            };
            view.warn(
                "stopping",
                &format!("stopping after a failed agent run ({end}); pass --yolo to keep going{waiting}"),
                &[("reason", json!(end))],
            );
            None
        }
    };
    while !runs.is_empty() {
        tokio::select! {
            Some(joined) = runs.join_next_with_id() => {
                finished_run(view, running, joined);
            }
            _ = shutdown.graceful.cancelled(), if deadline.is_none() && !stop_runs.is_cancelled() => {
                deadline = Some(Instant::now() + timeout);
            }
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() && !stop_runs.is_cancelled() => {
                view.info("stopping_runs", &format!("stopping {} agent run(s) and pausing their tasks", runs.len()), &[]);
                stop_runs.cancel();
            }
            _ = shutdown.immediate.cancelled(), if !stop_runs.is_cancelled() => {
                view.info("stopping_runs", &format!("stopping {} agent run(s) now and pausing their tasks", runs.len()), &[]);
                stop_runs.cancel();
            }
        }
    }
}

/// Reports a run that ended; `None` when its task panicked (reported too).
fn finished_run(
    view: &View,
    running: &mut HashMap<tokio::task::Id, Running>,
    joined: Result<(tokio::task::Id, RunResult), tokio::task::JoinError>,
) -> Option<RunResult> {
    let result = match joined {
        Ok((id, result)) => {
            running.remove(&id);
            result
        }
        Err(err) => {
            running.remove(&err.id());
            view.warn("run_crashed", &format!("an agent run's supervisor failed: {err}"), &[]);
            return None;
        }
    };
    let message = format!(
        "■ {}: {} after {}; {}",
        result.label,
        end_text(&result.end),
        human_duration(result.elapsed),
        result.outcome
    );
    let fields = [
        ("end", json!(end_text(&result.end))),
        ("outcome", json!(result.outcome.to_string())),
        ("elapsedMs", json!(result.elapsed.as_millis() as u64)),
    ];
    let troubled = result.agent_failed()
        || result.env_failure.is_some()
        || matches!(
            result.outcome,
            Outcome::FailedByRunner(_) | Outcome::RejectedByRunner(_) | Outcome::Unsettled(_)
        );
    if troubled {
        view.warn("run_finished", &message, &fields);
    } else {
        view.info("run_finished", &message, &fields);
    }
    Some(result)
}

fn end_text(end: &RunEnd) -> String {
    match end {
        RunEnd::Exited(exit) if exit.success() => "done".to_string(),
        RunEnd::Exited(exit) => format!("the agent ended with {exit}"),
        RunEnd::Stopped(exit) => format!("stopped by the runner ({exit})"),
        RunEnd::Cancelled(exit) => format!("stopped: its task was cancelled ({exit})"),
        RunEnd::NotStarted(reason) => format!("not started: {reason}"),
        RunEnd::Skipped(reason) => format!("skipped: {reason}"),
    }
}
