//! Settling what a run leaves behind: the task's outcome as the agent reported it, a
//! task failed or an offer rejected when it did not, work given back to the queue when
//! the agent CLI could not work, a task paused when the runner stopped its run.

use std::time::Duration;

use swarm_client::{ClientError, FinishStatus};
use swarm_domain::{
    id::TaskId,
    task::{Task, TaskStatus},
};
use tokio_util::sync::CancellationToken;

use crate::{
    hub::with_retry,
    process::ChildExit,
    run::{Context, Outcome, clip_chars},
    supervise::Supervised,
    view::human_duration,
    work::Work,
};

/// How long the runner keeps trying to settle a run's task while the hub is away.
const SETTLE_DEADLINE: Duration = Duration::from_secs(60);
/// The same for pausing a stopped run's task: shutdown should not hang on an absent hub
/// (the lease hands the task back anyway).
const PAUSE_DEADLINE: Duration = Duration::from_secs(10);

/// Hands the work of a run that could not work (or went nowhere) back to the queue, saying
/// why on the task and to the lead: a task goes back to the pool (`give-back`), for this
/// runner after its backoff or another one; an offer under review returns to `offered` through its lease. A task
/// the agent did report on is settled as reported.
pub(crate) async fn give_back(context: &Context, work: &Work, reason: &str) -> Outcome {
    let task_id = match work {
        Work::Task { task, .. } | Work::Resume { task } => task.id,
        Work::Offer { .. } => return Outcome::Left(TaskStatus::Reviewing),
        Work::Notice { .. } | Work::TaskResult { .. } | Work::Loop => return Outcome::NoTask,
    };
    let note = format!("runner: {}", clip_chars(reason, 2_000));
    if let Err(err) = context.client.store_progress(task_id, &note).await {
        context.view.warn("progress_failed", &format!("cannot note why on the task: {err}"), &[]);
    }
    // With the reason, so that the lead hears of it (`tasks_handed_back`).
    let release = || context.client.give_back_task(task_id, &note);
    match hub_call(context, "giving the task back", SETTLE_DEADLINE, release).await {
        Ok(_) => Outcome::Released,
        Err(reason) => match context.client.get_task(task_id).await {
            Ok(detail) if detail.task.status.is_finished() => finished(&detail.task),
            Ok(detail) => Outcome::Left(detail.task.status),
            Err(_) => Outcome::Unsettled(reason),
        },
    }
}

/// Gives back the work of a run that was stopped or could not start: a task is paused
/// for the next runner start; an offer under review goes back to `offered` through its
/// lease.
pub(crate) async fn hand_back(context: &Context, work: &Work) -> Outcome {
    match work {
        Work::Task { task, .. } | Work::Resume { task } => pause_task(context, task.id).await,
        Work::Offer { .. } => Outcome::Left(TaskStatus::Reviewing),
        Work::Notice { .. } | Work::TaskResult { .. } | Work::Loop => Outcome::NoTask,
    }
}

/// After the agent exited by itself: the task's outcome is what the agent reported. A
/// task still `in_progress` for this agent is failed, an offer still under review is
/// rejected, each with a reason that says the agent exited without reporting.
pub(crate) async fn settle(
    context: &Context,
    work: &Work,
    exit: ChildExit,
    supervised: &Supervised,
) -> Outcome {
    let Some(task_id) = work.task_id() else {
        return Outcome::NoTask;
    };
    let read = || context.client.get_task(task_id);
    let task = match hub_call(context, "reading the task after its run", SETTLE_DEADLINE, read).await {
        Ok(detail) => detail.task,
        Err(reason) => return Outcome::Unsettled(reason),
    };
    let me = context.config.agent_id;
    match task.status {
        TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled => finished(&task),
        TaskStatus::InProgress if task.agent_id == Some(me) && !matches!(work, Work::Offer { .. }) => {
            let mut reason = format!(
                "the agent exited ({exit}) without reporting the task's outcome \
                 (store-progress with status completed or failed)"
            );
            if let Some(text) = &supervised.report.last_text {
                reason.push_str(&format!("; its last words: {}", clip_chars(text, 1_000)));
            }
            if !supervised.stderr_tail.is_empty() {
                reason.push_str(&format!("; its stderr ended with: {}", supervised.stderr_tail));
            }
            let finish = || context.client.finish_task(task_id, FinishStatus::Failed, None, Some(&reason));
            match hub_call(context, "failing the unreported task", SETTLE_DEADLINE, finish).await {
                Ok(response) if response.task.status.is_finished() && response.already_finished => {
                    finished(&response.task)
                }
                // Out of progress meanwhile (its lease ran out, it was paused): left as it is.
                Ok(response) if response.already_finished => Outcome::Left(response.task.status),
                Ok(_) => Outcome::FailedByRunner(reason),
                Err(err) => Outcome::Unsettled(err),
            }
        }
        TaskStatus::Reviewing if task.offered_to == Some(me) => {
            let reason = format!("the agent exited ({exit}) without accepting or rejecting the offer");
            let reject = || context.client.reject_task(task_id, Some(&reason));
            match hub_call(context, "rejecting the undecided offer", SETTLE_DEADLINE, reject).await {
                Ok(_) => Outcome::RejectedByRunner(reason),
                Err(err) => Outcome::Unsettled(err),
            }
        }
        status => Outcome::Left(status),
    }
}

pub(crate) fn finished(task: &Task) -> Outcome {
    let detail = match task.status {
        TaskStatus::Completed => task.output.clone(),
        _ => task.failure_reason.clone(),
    };
    Outcome::Finished { status: task.status, detail }
}

/// Pauses a task this agent holds `in_progress`, so the next runner start resumes it.
pub(crate) async fn pause_task(context: &Context, task_id: TaskId) -> Outcome {
    let pause = || context.client.pause_task(task_id);
    match hub_call(context, "pausing the task", PAUSE_DEADLINE, pause).await {
        Ok(_) => Outcome::Paused,
        // Not in progress any more (finished meanwhile, or returned by its lease).
        Err(reason) => match context.client.get_task(task_id).await {
            Ok(detail) if detail.task.status.is_finished() => finished(&detail.task),
            Ok(detail) => Outcome::Left(detail.task.status),
            Err(_) => Outcome::Unsettled(reason),
        },
    }
}

/// One call to the hub, retried while the hub is away, for at most `deadline`.
pub(crate) async fn hub_call<T, F, Fut>(
    context: &Context,
    what: &str,
    deadline: Duration,
    call: F,
) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let give_up = CancellationToken::new();
    let attempt = with_retry(&context.view, what, &give_up, call);
    match tokio::time::timeout(deadline, attempt).await {
        Ok(Some(Ok(value))) => Ok(value),
        Ok(Some(Err(err))) => Err(err.to_string()),
        Ok(None) | Err(_) => Err(format!("the hub did not answer within {}", human_duration(deadline))),
    }
}
