//! What Jira hears of a task: when it starts, a transition to an `indeterminate` (In
//! Progress) status; when it ends, one comment (ADF) with the outcome, marked with the
//! task's id so a report cut short by a crash is not posted twice, and a transition to
//! a `done` status (completed, cancelled) or back to a `new` one (failed: work not done).

use swarm_domain::task::{Task, TaskStatus};

use crate::client::{JiraApi, JiraError};

/// The output is cut to this in the comment.
const OUTPUT_MAX_CHARS: usize = 4_000;

/// The line that marks a task's report among the comments.
pub fn marker(task: &Task) -> String {
    format!("swarm task {}", task.id)
}

/// The status category a task's status moves its issue to.
pub fn status_category(status: TaskStatus) -> Option<&'static str> {
    match status {
        TaskStatus::InProgress => Some("indeterminate"),
        TaskStatus::Completed | TaskStatus::Cancelled => Some("done"),
        TaskStatus::Failed => Some("new"),
        _ => None,
    }
}

pub fn end_comment(task: &Task, evidence: &[String]) -> String {
    let mut comment = match task.status {
        TaskStatus::Completed => format!("✅ The {} completed.", marker(task)),
        TaskStatus::Failed => format!("❌ The {} failed.", marker(task)),
        _ => format!("⛔ The {} was cancelled.", marker(task)),
    };
    let detail = match task.status {
        TaskStatus::Completed => task.output.as_deref(),
        _ => task.failure_reason.as_deref().or(task.output.as_deref()),
    };
    if let Some(detail) = detail.map(str::trim).filter(|detail| !detail.is_empty()) {
        let mut cut: String = detail.chars().take(OUTPUT_MAX_CHARS).collect();
        if detail.chars().count() > OUTPUT_MAX_CHARS {
            cut.push('…');
        }
        comment.push_str("\n\n");
        comment.push_str(&cut);
    }
    for url in evidence {
        comment.push_str(&format!("\n\nPull request: {url}"));
    }
    comment
}

/// The task ended: the comment (unless a report before a crash left it), then the
/// transition. Safe to repeat: neither is done twice.
pub async fn report_end(api: &JiraApi, key: &str, task: &Task, evidence: &[String]) -> Result<(), JiraError> {
    let marker = marker(task);
    let posted = api.comment_texts(key).await?.iter().any(|text| text.contains(&marker));
    if !posted {
        api.comment_create(key, &end_comment(task, evidence)).await?;
    }
    if let Some(category) = status_category(task.status) {
        api.transition_to_category(key, category).await?;
    }
    Ok(())
}

/// The task started: the issue goes to In Progress.
async fn report_start(api: &JiraApi, key: &str) -> Result<Option<String>, JiraError> {
    api.transition_to_category(key, "indeterminate").await
}

/// The reporter's provider for Jira (the link's external id is the key).
pub(crate) struct JiraReporter {
    pub(crate) api: JiraApi,
}

#[async_trait::async_trait]
impl swarm_service::trackers::TrackerReporter for JiraReporter {
    fn provider(&self) -> &'static str {
        crate::PROVIDER
    }

    async fn report_end(
        &self,
        link: &swarm_service::trackers::TrackerSync,
        task: &Task,
        evidence: &[String],
    ) -> Result<(), String> {
        report_end(&self.api, &link.external_id, task, evidence).await.map_err(|error| error.to_string())
    }

    async fn report_start(
        &self,
        link: &swarm_service::trackers::TrackerSync,
        _task: &Task,
    ) -> Result<(), String> {
        report_start(&self.api, &link.external_id).await.map(drop).map_err(|error| error.to_string())
    }
}
