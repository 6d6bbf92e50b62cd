//! What GitLab hears of a task: when it ends, one note on its issue or merge request
//! with the outcome and the evidence, marked with the task's id so that a note posted
//! just before a crash is found and not posted again.

use async_trait::async_trait;
use swarm_domain::task::Task;
use swarm_service::trackers::{self, TrackerReporter, TrackerSync};

use crate::{PROVIDER, api::GitLabApi, event::ItemKind};

pub(crate) struct GitLabReporter {
    pub(crate) api: GitLabApi,
}

/// `<project id>/<issues|merge_requests>/<iid>`, as the link stored it.
fn parse_external_id(external_id: &str) -> Option<(i64, ItemKind, i64)> {
    let mut parts = external_id.split('/');
    let project_id = parts.next()?.parse().ok()?;
    let kind = match parts.next()? {
        "issues" => ItemKind::Issue,
        "merge_requests" => ItemKind::MergeRequest,
        _ => return None,
    };
    let iid = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((project_id, kind, iid))
}

#[async_trait]
impl TrackerReporter for GitLabReporter {
    fn provider(&self) -> &'static str {
        PROVIDER
    }

    async fn report_end(&self, link: &TrackerSync, task: &Task, evidence: &[String]) -> Result<(), String> {
        let Some((project_id, kind, iid)) = parse_external_id(&link.external_id) else {
            return Err(format!(
                "the link {} does not name a GitLab issue or merge request",
                link.external_id
            ));
        };
        let marker = trackers::marker(task.id);
        let notes = self.api.note_bodies(project_id, kind, iid).await.map_err(|error| error.to_string())?;
        if notes.iter().any(|body| body.contains(&marker)) {
            tracing::info!(task = %task.id, item = %link.external_id, "gitlab: the report was posted before; not again");
            return Ok(());
        }
        let body = trackers::report_markdown(task, evidence);
        self.api.note_create(project_id, kind, iid, &body).await.map_err(|error| error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_name_their_item() {
        assert_eq!(parse_external_id("7/issues/12"), Some((7, ItemKind::Issue, 12)));
        assert_eq!(parse_external_id("7/merge_requests/3"), Some((7, ItemKind::MergeRequest, 3)));
        assert_eq!(parse_external_id("7/pipelines/3"), None);
        assert_eq!(parse_external_id("7/issues/12/x"), None);
    }
}
