//! Steering a running task (issue 40), the runner's part: a CLI whose hooks carry steering
//! (Claude Code) gets it from `swarm hook` during the run; a CLI that resumes sessions
//! (Codex) gets it here, by resuming its session with the messages each time a turn ends
//! with messages waiting; and when a run ends, the hub settles what is left: messages it
//! showed are handled, messages of a finished task that no run showed become follow-up
//! tasks for the same agent.

use serde_json::json;
use swarm_domain::steering::{SteerMode, steering_prompt};
use tokio_util::sync::CancellationToken;

use crate::{
    agent_run::{cost_request, spawn_agent},
    harness::SteeringDelivery,
    logs::{RunLog, RunMetadata},
    run::{Context, Outcome},
    shipper::RunKey,
    supervise::{Supervised, supervise},
    work::Work,
};

/// At most this many resumes of one run for steering: each needs new messages, so only a
/// steady stream of them would reach it.
const RESUMES_PER_RUN_MAX: usize = 20;

/// What a resume for steering starts from: the run's place and its log's metadata.
pub(crate) struct ResumePlace<'a> {
    pub key: &'a RunKey,
    pub stop: &'a CancellationToken,
    pub metadata: &'a RunMetadata<'a>,
    pub cwd: Option<&'a std::path::Path>,
}

/// For a CLI that resumes sessions: while the task's run ended its turn cleanly and
/// steering messages wait, resume the same session with them. Returns the last run's
/// account; the cost of each resumed run is shipped here, so the returned one carries none.
pub(crate) async fn resume_for_steering(
    context: &Context,
    work: &Work,
    place: &ResumePlace<'_>,
    first: Supervised,
) -> Supervised {
    // An offer's review is not the task's work: its steering waits for the run that does it.
    let Some(task_id) = work.task_id().filter(|_| !matches!(work, Work::Offer { .. })) else {
        return first;
    };
    if context.config.harness.steering() != SteeringDelivery::Resume {
        return first;
    }
    let mut supervised = first;
    let mut shipped_last = false;
    for _ in 0..RESUMES_PER_RUN_MAX {
        let clean = !supervised.stopped
            && !supervised.cancelled
            && supervised.nowhere.is_none()
            && supervised.unreachable.is_none()
            && supervised.exit.success();
        let Some(session) = supervised.report.session_id.clone().filter(|_| clean) else { break };
        let messages = match context.client.steering_deliver(task_id, SteerMode::ALL).await {
            Ok(messages) if messages.is_empty() => break,
            Ok(messages) => messages,
            Err(err) => {
                context.view.warn(
                    "steering_failed",
                    &format!("task {task_id}: cannot take its steering messages: {err}"),
                    &[],
                );
                break;
            }
        };
        context.view.info(
            "steering_resume",
            &format!(
                "task {task_id}: resuming session {session} with {} steering message(s)",
                messages.len()
            ),
            &[("taskId", json!(task_id)), ("sessionId", json!(session)), ("count", json!(messages.len()))],
        );
        let prompt = steering_prompt(task_id, &messages);
        let metadata =
            RunMetadata { prompt: &prompt, task_id: place.metadata.task_id.clone(), ..*place.metadata };
        // Codex counts a resumed thread's tokens from its start.
        let counted_before = context.config.harness.counted_before(&session);
        let log = match RunLog::create(&context.session_dir, &metadata).await {
            Ok(log) => log,
            Err(err) => {
                context.view.warn("steering_failed", &format!("task {task_id}: {err:#}"), &[]);
                break;
            }
        };
        let child = match spawn_agent(context, work, &prompt, Some(&session), place.cwd) {
            Ok(child) => child,
            Err(reason) => {
                context.view.warn("steering_failed", &format!("task {task_id}: {reason}"), &[]);
                break;
            }
        };
        context.shipper.start(true);
        let mut next = supervise(context, child, log, place.key, place.stop).await;
        if let Some(before) = &counted_before {
            next.report.subtract(before);
        }
        if next.report.has_usage() {
            context.shipper.cost(cost_request(context, Some(task_id), &next.report));
        }
        shipped_last = true;
        supervised = next;
    }
    if shipped_last {
        supervised.report.cost_usd = None;
        supervised.report.input_tokens = None;
        supervised.report.output_tokens = None;
    }
    supervised
}

/// When a task's run ended with the task finished: the hub marks what the run showed
/// handled, and turns what no run showed into follow-up tasks for the same agent. A task that
/// goes on (paused, handed back) keeps its messages for its next run, which takes them.
pub(crate) async fn settle_after_run(context: &Context, work: &Work, outcome: &Outcome, label: &str) {
    let finished = match outcome {
        Outcome::Finished { .. } | Outcome::FailedByRunner(_) => true,
        Outcome::Left(status) => status.is_finished(),
        _ => false,
    };
    let Some(task_id) = work.task_id().filter(|_| finished) else { return };
    match context.client.steering_settle(task_id).await {
        Ok(settled) => {
            for promoted in &settled.promoted {
                context.view.info(
                    "steering_follow_up",
                    &format!(
                        "{label}: a steering message the run did not take is now the follow-up task {}",
                        promoted.task_id
                    ),
                    &[("taskId", json!(task_id)), ("followUpTaskId", json!(promoted.task_id))],
                );
            }
        }
        Err(err) => context.view.warn(
            "steering_failed",
            &format!("{label}: cannot settle its steering messages: {err}"),
            &[],
        ),
    }
}

#[cfg(test)]
mod tests {
    use crate::harness::{Harness, SteeringDelivery};

    #[test]
    fn each_harness_says_how_steering_reaches_its_agent() {
        // What docs/running-agents.md's steering table says of each built-in CLI.
        for (name, expected) in [
            ("claude", SteeringDelivery::Hooks),
            ("gemini", SteeringDelivery::Hooks),
            ("codex", SteeringDelivery::Resume),
            ("opencode", SteeringDelivery::Resume),
            ("pi", SteeringDelivery::Resume),
        ] {
            assert_eq!(Harness::built_in(name).unwrap().steering(), expected, "{name}");
        }
        assert_eq!(Harness::built_in_names().count(), 5, "a new built-in CLI belongs in the list above");
        // A CLI file that resumes sessions and says nothing of steering: resumed with the messages.
        let silent = "program = \"x\"\nargs = [\"{prompt}\"]\nresume_args = [\"{session}\", \"{prompt}\"]\n";
        assert_eq!(Harness::from_toml(silent, "x").unwrap().steering(), SteeringDelivery::Resume);
        assert_eq!(Harness::from_command_line("my-agent --fast").unwrap().steering(), SteeringDelivery::None);
        let said = "program = \"x\"\nargs = [\"{prompt}\"]\nresume_args = [\"{session}\", \"{prompt}\"]\nsteering = \"none\"\n";
        assert_eq!(Harness::from_toml(said, "x").unwrap().steering(), SteeringDelivery::None);
        let unknown = "program = \"x\"\nargs = [\"{prompt}\"]\nsteering = \"telepathy\"\n";
        assert!(Harness::from_toml(unknown, "x").is_err());
    }
}
