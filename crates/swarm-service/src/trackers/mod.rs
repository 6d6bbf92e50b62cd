//! Issue trackers (GitLab, Linear, Jira: issue 47): a verified delivery becomes a task
//! linked to its tracker item, and the task's ending goes back to that item once.
//!
//! A provider is an adapter crate (`swarm-gitlab`, `swarm-linear`, `swarm-jira`): it
//! verifies and reads its webhook, fences the outside words into a [`TaskDraft`] and
//! calls [`Service::tracker_task_create`]; for the way back it implements
//! [`TrackerReporter`] and hands it to [`Service::start_tracker_reporter`]. Everything
//! that must happen once is a database mark: the delivery (in the task's transaction),
//! the report (a lease, then `reported_at`), each state move (`last_synced_status`).
//!
//! Reported once across a crash: the report row is marked after the provider posted,
//! so a hub that dies between the two leaves it due. Before posting, a provider looks
//! for the task's [`marker`] among the item's comments and skips the comment when it is
//! there; the mark then follows.

mod reporter;

use std::sync::Arc;

use swarm_domain::{
    evidence,
    id::TaskId,
    task::{NewTask, Task, TaskDraft},
};
use swarm_store::TrackerTaskCreated;
pub use swarm_store::{TrackerLink, TrackerSync};

use crate::{Service, ServiceError, ServiceResult};

pub use reporter::{REPORT_ATTEMPTS_MAX, REPORT_EVERY, REPORT_LEASE, TrackerReporter};

/// The line that marks a task's report among its item's comments (an HTML comment: the
/// trackers that render Markdown hide it). A provider whose comments are not Markdown
/// may use its own, as long as it finds it again.
pub fn marker(task: TaskId) -> String {
    format!("<!-- swarm-task:{task} -->")
}

/// The pull and merge request URLs a task's output and progress name now (those it named
/// before are recorded: [`Service::task_pull_requests`]).
pub fn task_evidence(task: &Task) -> Vec<String> {
    let text = [task.output.as_deref(), task.progress.as_deref()].into_iter().flatten().collect::<Vec<_>>();
    evidence::pull_request_urls(&text.join("\n"))
}

/// The comment a finished task leaves on its item, in Markdown: the marker, the outcome,
/// the output or the failure (cut), and the evidence.
pub fn report_markdown(task: &Task, evidence: &[String]) -> String {
    use swarm_domain::task::TaskStatus;
    const DETAIL_MAX_CHARS: usize = 4_000;
    let mut comment = marker(task.id);
    comment.push('\n');
    comment.push_str(match task.status {
        TaskStatus::Completed => "✅ **swarm finished this task.**",
        TaskStatus::Failed => "❌ **swarm could not finish this task.**",
        _ => "⛔ **swarm's task was cancelled.**",
    });
    comment.push_str(&format!(" (task `{}`)", task.id));
    let detail = match task.status {
        TaskStatus::Completed => task.output.as_deref(),
        _ => task.failure_reason.as_deref().or(task.output.as_deref()),
    };
    if let Some(detail) = detail.map(str::trim).filter(|detail| !detail.is_empty()) {
        let mut cut: String = detail.chars().take(DETAIL_MAX_CHARS).collect();
        if detail.chars().count() > DETAIL_MAX_CHARS {
            cut.push('…');
        }
        comment.push_str("\n\n");
        comment.push_str(&cut);
    }
    if !evidence.is_empty() {
        comment.push_str("\n\n**Pull requests:**");
        for url in evidence {
            comment.push_str(&format!("\n- {url}"));
        }
    }
    comment
}

impl Service {
    /// Create the task a tracker delivery asks for, linked to its item, with the
    /// delivery marked in the same transaction: `None` when the delivery was received
    /// before (nothing changed). The draft's text is the adapter's, outside words fenced
    /// (`swarm_domain::untrusted::fence`), who and where outside the fence.
    pub async fn tracker_task_create(
        &self,
        draft: TaskDraft,
        link: TrackerLink,
        delivery_id: &str,
    ) -> ServiceResult<Option<Task>> {
        let delivery_id = delivery_id.trim();
        if delivery_id.is_empty() {
            return Err(ServiceError::Invalid("a tracker delivery needs its delivery id".into()));
        }
        if link.provider.trim().is_empty() || link.external_id.trim().is_empty() {
            return Err(ServiceError::Invalid("a tracker task needs its provider and item".into()));
        }
        let new_task = NewTask::parse(draft, None)?;
        let created = self
            .timed(
                "tracker_task_create",
                self.store.tracker_task_create(&new_task, &link, delivery_id, self.clock.now()),
            )
            .await?;
        match created {
            TrackerTaskCreated::Created(task) => {
                self.task_changed(&task, None).await;
                Ok(Some(*task))
            }
            TrackerTaskCreated::Duplicate => Ok(None),
        }
    }

    /// Record the pull and merge requests a task's output and progress name as its
    /// evidence (bookkeeping after its change committed: the reporter and the task's JSON
    /// read it; a URL lost to a crash here is still in the text it came from).
    pub(crate) async fn tracker_evidence_record(&self, task: &Task) {
        let urls = task_evidence(task);
        if urls.is_empty() {
            return;
        }
        if let Err(error) = self.store.task_pull_requests_record(task.id, &urls, self.clock.now()).await {
            tracing::warn!(task = %task.id, %error, "could not record a task's pull requests");
        }
    }

    /// The pull and merge request URLs a task reported, each once, in the order first
    /// seen (the task's `pullRequestUrls`).
    pub async fn task_pull_requests(&self, task: TaskId) -> ServiceResult<Vec<String>> {
        Ok(self.store.task_pull_requests(task).await?)
    }

    /// Mark a delivery that creates no task (a comment that steers one): `false` when it
    /// was received before, and the caller must then do nothing.
    pub async fn tracker_delivery_mark(&self, provider: &str, delivery_id: &str) -> ServiceResult<bool> {
        Ok(self.store.tracker_delivery_mark(provider, delivery_id.trim(), self.clock.now()).await?)
    }

    /// The tasks linked to one tracker item, newest first.
    pub async fn tracker_links(&self, provider: &str, external_id: &str) -> ServiceResult<Vec<TrackerSync>> {
        Ok(self.store.tracker_sync_by_external(provider, external_id).await?)
    }

    /// A task's link to `provider`'s item, if it came from one.
    pub async fn tracker_link_of(&self, provider: &str, task: TaskId) -> ServiceResult<Option<TrackerSync>> {
        Ok(self.store.tracker_sync_get(provider, task).await?)
    }

    /// Record that the item now is in tracker state `to`, only while the last one
    /// recorded is `from`: `true` for the one caller that should move it.
    pub async fn tracker_status_synced(
        &self,
        provider: &str,
        task: TaskId,
        from: Option<&str>,
        to: &str,
    ) -> ServiceResult<bool> {
        Ok(self.store.tracker_status_synced(provider, task, from, to, self.clock.now()).await?)
    }

    /// Name the holder of the tracker reports this hub takes: unique among the hubs on
    /// one database and the same across a restart (the hub's host and port), so a hub
    /// restarted after a crash takes back at once what it held. Without a name, each
    /// service is its own holder and a crashed one's reports wait for their lease.
    pub fn name_tracker_reporter(&self, name: &str) {
        if let Ok(mut holder) = self.tracker_holder.write() {
            *holder = format!("hub:{name}");
        }
    }

    pub(crate) fn tracker_holder(&self) -> String {
        self.tracker_holder.read().map(|holder| holder.clone()).unwrap_or_default()
    }

    /// Start reporting finished tracker tasks to their items through `reporters` (one
    /// per configured provider): at once, every `every`, and whenever a task changes here.
    pub fn start_tracker_reporter(
        &self,
        reporters: Vec<Arc<dyn TrackerReporter>>,
        every: std::time::Duration,
    ) -> crate::Background {
        reporter::start(self.clone(), reporters, every)
    }

    /// One pass of the reporter over `reporter`'s due reports; how many were reported.
    /// For the loop and for tests that drive it.
    pub async fn tracker_report_pass(&self, reporter: &dyn TrackerReporter) -> ServiceResult<usize> {
        reporter::pass(self, reporter).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_carries_its_marker_outcome_and_evidence() {
        let mut task: Task = serde_json::from_value(serde_json::json!({
            "id": "0190c2a4-0000-7000-8000-000000000001", "task": "t", "status": "completed",
            "source": "gitlab", "tags": [], "priority": 50, "dependsOn": [],
            "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z",
            "leaseLosses": 0, "output": "Done: https://gitlab.com/g/p/-/merge_requests/3"
        }))
        .expect("a task");
        let evidence = task_evidence(&task);
        assert_eq!(evidence, vec!["https://gitlab.com/g/p/-/merge_requests/3"]);
        let comment = report_markdown(&task, &evidence);
        assert!(comment.starts_with(&marker(task.id)));
        assert!(
            comment.contains("finished") && comment.contains("- https://gitlab.com/g/p/-/merge_requests/3")
        );
        task.status = swarm_domain::task::TaskStatus::Failed;
        task.failure_reason = Some("tests fail".into());
        assert!(report_markdown(&task, &[]).contains("tests fail"));
    }
}
