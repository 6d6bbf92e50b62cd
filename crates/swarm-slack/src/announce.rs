//! Progress and outcomes of Slack tasks, posted to their thread under the assignee's
//! persona, each once: a mark is taken in the database before posting, so restarts and
//! replicas never post it twice (a crash between the mark and the post loses that one
//! post instead: at most once, by design). Any process may have changed the task (a
//! replica, `swarm mcp`), so both are found by a periodic sweep; this process's own
//! changes are announced at once, from its change stream.

use std::{collections::HashSet, sync::Arc, time::Duration};

use swarm_domain::{
    inbox::SlackMark,
    task::{Task, TaskStatus},
};
use swarm_service::{Change, Service, TaskListQuery};
use tokio::sync::broadcast::error::RecvError;

use crate::mrkdwn;

const SWEEP_EVERY: Duration = Duration::from_secs(2);
const SWEEP_BATCH: i64 = 20;
/// Slack tasks under way whose progress notes a sweep looks at (newest first).
const PROGRESS_SWEEP_BATCH: i64 = 100;
const OUTPUT_MAX_CHARS: usize = 3500;

pub async fn run(service: Service) {
    let service = Arc::new(service);
    let mut announced = Announced::default();
    let mut changes = service.subscribe();
    let mut ticks = tokio::time::interval(SWEEP_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            change = changes.recv() => match change {
                Ok(Change::Task { task_id }) => {
                    if let Ok(task) = service.task_get(task_id).await {
                        announce_progress(&service, &task, &mut announced).await;
                    }
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            },
        }
        sweep_outcomes(&service).await;
        sweep_progress(&service, &mut announced).await;
        service.note_slack_sweep();
    }
}

/// Progress marks this process has taken or found taken: a note is marked once per
/// process, not once per sweep.
#[derive(Default)]
struct Announced(HashSet<String>);

async fn sweep_progress(service: &Service, announced: &mut Announced) {
    let query = TaskListQuery {
        statuses: vec![TaskStatus::InProgress],
        source: Some("slack".to_string()),
        limit: Some(PROGRESS_SWEEP_BATCH),
        ..TaskListQuery::default()
    };
    match service.task_list(query).await {
        Ok((tasks, _)) => {
            for task in tasks {
                announce_progress(service, &task, announced).await;
            }
        }
        Err(error) => tracing::warn!(%error, "cannot look for Slack task progress to post"),
    }
}

async fn sweep_outcomes(service: &Service) {
    let tasks = match service.slack_outcomes_unannounced(SWEEP_BATCH).await {
        Ok(tasks) => tasks,
        Err(error) => {
            tracing::warn!(%error, "cannot look for Slack task outcomes to post");
            return;
        }
    };
    for task in tasks {
        match service.slack_mark_once(SlackMark::TaskOutcome, &task.id.to_string()).await {
            Ok(true) => post(service, &task, &outcome_text(&task)).await,
            Ok(false) => {}
            Err(error) => tracing::warn!(%error, task = %task.id, "cannot mark a Slack outcome"),
        }
    }
}

async fn announce_progress(service: &Service, task: &Task, announced: &mut Announced) {
    let (Some(progress), Some(_)) = (&task.progress, &task.origin.slack_thread_ts) else { return };
    if task.status.is_finished() {
        return;
    }
    let key = format!("{}:{:016x}", task.id, fnv1a(progress));
    if announced.0.contains(&key) {
        return;
    }
    match service.slack_mark_once(SlackMark::TaskProgress, &key).await {
        Ok(first) => {
            announced.0.insert(key);
            if first {
                let text = format!(":hourglass_flowing_sand: {}", mrkdwn::from_markdown(progress));
                post(service, task, &text).await;
            }
        }
        Err(error) => tracing::warn!(%error, task = %task.id, "cannot mark a Slack progress note"),
    }
}

async fn post(service: &Service, task: &Task, text: &str) {
    if let Err(error) = service.slack_post_for_task(task, text).await {
        tracing::warn!(%error, task = %task.id, "could not post to a Slack thread");
    }
}

fn outcome_text(task: &Task) -> String {
    match task.status {
        TaskStatus::Completed => {
            let output = task.output.as_deref().unwrap_or("(no output)");
            let output: String = output.chars().take(OUTPUT_MAX_CHARS).collect();
            format!(":white_check_mark: Done.\n{}", mrkdwn::from_markdown(&output))
        }
        _ => format!(":x: Failed: {}", task.failure_reason.as_deref().unwrap_or("no reason given")),
    }
}

/// A stable digest of a progress note, for its mark's key (std's hasher may change
/// between Rust releases; marks outlive the binary).
fn fnv1a(text: &str) -> u64 {
    text.bytes()
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}
