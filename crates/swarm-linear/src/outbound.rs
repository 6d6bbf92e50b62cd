//! What Linear hears of a task, as the service's tracker reporter asks: when it starts,
//! the issue moves to its team's first `started` state; when it ends, one comment (the
//! service's report, in Markdown, which Linear renders) unless a report cut short by a
//! crash left it already, and a move to the state its ending calls for (completed →
//! `completed`, cancelled → `canceled`, failed → back to `unstarted`, where people look
//! for work not done).

use async_trait::async_trait;
use swarm_domain::task::{Task, TaskStatus};
use swarm_service::trackers::{TrackerReporter, TrackerSync, marker, report_markdown};

use crate::{
    PROVIDER,
    client::{LinearApi, LinearError},
};

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

/// Whether `body` is this task's report: its marker, or (should Linear drop the HTML
/// comment) the visible task id the report names.
fn is_report_of(body: &str, task: &Task) -> bool {
    body.contains(&marker(task.id)) || body.contains(&format!("(task `{}`)", task.id))
}

/// The task ended: the comment (unless a report before a crash left it), then the
/// state. Safe to repeat: neither is done twice.
pub async fn report_end(
    api: &LinearApi,
    issue_id: &str,
    task: &Task,
    evidence: &[String],
) -> Result<(), LinearError> {
    let posted = api.comment_bodies(issue_id).await?.iter().any(|body| is_report_of(body, task));
    if !posted {
        api.comment_create(issue_id, &report_markdown(task, evidence)).await?;
    }
    if let Some(kind) = state_kind(task.status) {
        api.move_to_state_of_kind(issue_id, kind).await?;
    }
    Ok(())
}

/// The reporter's provider for Linear.
pub(crate) struct LinearReporter {
    pub(crate) api: LinearApi,
}

#[async_trait]
impl TrackerReporter for LinearReporter {
    fn provider(&self) -> &'static str {
        PROVIDER
    }

    async fn report_end(&self, link: &TrackerSync, task: &Task, evidence: &[String]) -> Result<(), String> {
        report_end(&self.api, &link.external_id, task, evidence).await.map_err(|error| error.to_string())
    }

    async fn report_start(&self, link: &TrackerSync, _task: &Task) -> Result<(), String> {
        self.api
            .move_to_state_of_kind(&link.external_id, "started")
            .await
            .map(drop)
            .map_err(|error| error.to_string())
    }
}
