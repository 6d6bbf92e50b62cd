//! What Linear hears of a task: when it starts, the issue moves to the team's first
//! `started` state; when it ends, one comment with the outcome (marked with the task's
//! id, so a report cut short by a crash is not posted twice) and a move to the state
//! its ending calls for (completed → `completed`, cancelled → `canceled`, failed → back
//! to `unstarted`, where people look for work not done).

use swarm_domain::task::{Task, TaskStatus};

use crate::client::{LinearApi, LinearError};

/// The output is cut to this in the comment.
const OUTPUT_MAX_CHARS: usize = 4_000;

/// The line that marks a task's report among the issue's comments.
pub fn marker(task: &Task) -> String {
    format!("swarm task {}", task.id)
}

/// The workflow-state type a task's status moves its issue to.
pub fn state_kind(status: TaskStatus) -> Option<&'static str> {
    match status {
        TaskStatus::InProgress => Some("started"),
        TaskStatus::Completed => Some("completed"),
        TaskStatus::Cancelled => Some("canceled"),
        TaskStatus::Failed => Some("unstarted"),
        _ => None,
    }
}

/// The comment a finished task leaves: the marker, the outcome, the output or the
/// reason, and the evidence (pull request URLs) when there is any.
pub fn end_comment(task: &Task, evidence: &[String]) -> String {
    let cut = |text: &str| {
        let mut cut: String = text.trim().chars().take(OUTPUT_MAX_CHARS).collect();
        if text.trim().chars().count() > OUTPUT_MAX_CHARS {
            cut.push('…');
        }
        cut
    };
    let mut comment = match task.status {
        TaskStatus::Completed => format!("✅ The {} completed.", marker(task)),
        TaskStatus::Failed => format!("❌ The {} failed.", marker(task)),
        _ => format!("⛔ The {} was cancelled.", marker(task)),
    };
    let detail = match task.status {
        TaskStatus::Completed => task.output.as_deref(),
        _ => task.failure_reason.as_deref().or(task.output.as_deref()),
    };
    if let Some(detail) = detail.filter(|detail| !detail.trim().is_empty()) {
        comment.push_str("\n\n");
        comment.push_str(&cut(detail));
    }
    for url in evidence {
        comment.push_str(&format!("\n\nPull request: {url}"));
    }
    comment
}

/// The task ended: the comment (unless a report before a crash left it), then the
/// state. Safe to repeat: neither is done twice.
pub async fn report_end(
    api: &LinearApi,
    issue_id: &str,
    task: &Task,
    evidence: &[String],
) -> Result<(), LinearError> {
    let marker = marker(task);
    let posted = api.comment_bodies(issue_id).await?.iter().any(|body| body.contains(&marker));
    if !posted {
        api.comment_create(issue_id, &end_comment(task, evidence)).await?;
    }
    if let Some(kind) = state_kind(task.status) {
        api.move_to_state_of_kind(issue_id, kind).await?;
    }
    Ok(())
}

/// The task started: the issue moves to `started` (no comment: the ending says it all).
pub async fn report_start(api: &LinearApi, issue_id: &str) -> Result<Option<String>, LinearError> {
    api.move_to_state_of_kind(issue_id, "started").await
}
