//! The living Slack message of a task (issue 42): what the Slack bridge asks of the
//! service to post one status message per Slack task and edit it as the task moves. The
//! store's guards make each step happen once across restarts and replicas: the claim to
//! post, the message's `ts`, the rendering of the ending.

use swarm_domain::{
    id::TaskId,
    task::{Task, TaskStatus},
};
pub use swarm_store::SlackStatusMessage;

use crate::{
    Service, ServiceError, ServiceResult,
    slack_api::{Persona, SlackPost, SlackUpdate},
};

/// Endings older than this are not rendered any more (a hub that was down for days
/// should not edit old threads).
const ENDING_WINDOW_MILLIS: i64 = 24 * 60 * 60 * 1000;

impl Service {
    /// Claim the posting of a Slack task's status message: `true` for the one caller
    /// that posts it; `false` when it has one, or no Slack thread.
    pub async fn slack_status_claim(&self, task: &Task) -> ServiceResult<bool> {
        let Some(channel) = slack_channel(task) else { return Ok(false) };
        Ok(self.store.slack_status_claim(task.id, channel, self.clock.now()).await?)
    }

    /// Record the status message's `ts`: `false` when another process recorded one first
    /// (its message is the task's; this one is to be deleted).
    pub async fn slack_status_posted(&self, task: TaskId, message_ts: &str) -> ServiceResult<bool> {
        Ok(self.store.slack_status_posted(task, message_ts).await?)
    }

    pub async fn slack_status_get(&self, task: TaskId) -> ServiceResult<Option<SlackStatusMessage>> {
        Ok(self.store.slack_status_get(task).await?)
    }

    /// Claim the rendering of a finished Slack task's ending: `true` for the one caller
    /// that renders it.
    pub async fn slack_status_finalize(&self, task: &Task) -> ServiceResult<bool> {
        let Some(channel) = slack_channel(task).filter(|_| task.status.is_finished()) else {
            return Ok(false);
        };
        Ok(self.store.slack_status_finalize(task.id, channel, self.clock.now()).await?)
    }

    /// Finished Slack tasks whose ending is not rendered yet, oldest first.
    pub async fn slack_status_unfinalized(&self, limit: i64) -> ServiceResult<Vec<Task>> {
        let since = self.clock.now().minus_millis(ENDING_WINDOW_MILLIS);
        Ok(self.store.slack_status_unfinalized(since, limit).await?)
    }

    /// What the task's agent runs have cost so far, in US dollars.
    pub async fn task_cost_usd(&self, task: TaskId) -> ServiceResult<f64> {
        let costs = self.session_cost_list(Some(task), None, Some(100)).await?;
        // A fold from +0.0: an empty `sum` of floats is -0.0, shown as "$-0.0000".
        Ok(costs.iter().fold(0.0, |total, cost| total + cost.total_cost_usd))
    }

    /// The name under which the task's assignee appears, if it has one.
    pub async fn task_assignee_name(&self, task: &Task) -> ServiceResult<Option<String>> {
        let Some(agent) = task.agent_id.or(task.offered_to) else { return Ok(None) };
        Ok(self.store.agent_get(agent).await?.map(|agent| agent.name))
    }

    /// Post Block Kit `blocks` in a task's thread under its assignee's persona; the new
    /// message's `ts`.
    pub async fn slack_post_blocks_for_task(
        &self,
        task: &Task,
        text: &str,
        blocks: &serde_json::Value,
    ) -> ServiceResult<String> {
        let (Some(channel), Some(thread)) = (&task.origin.slack_channel_id, &task.origin.slack_thread_ts)
        else {
            return Err(ServiceError::Conflict("the task has no Slack thread".into()));
        };
        let persona = match task.agent_id {
            Some(agent) => {
                self.store.agent_get(agent).await?.map(|agent| Persona::of(&agent.name, agent.is_lead))
            }
            None => None,
        };
        let post = SlackPost {
            channel: channel.clone(),
            thread_ts: Some(thread.clone()),
            text: text.to_string(),
            persona,
        };
        self.slack()?
            .post_blocks(&post, blocks)
            .await
            .map_err(|error| ServiceError::Conflict(format!("Slack refused the post: {error}")))
    }

    /// Edit a status message the bridge posted.
    pub async fn slack_status_update(&self, update: &SlackUpdate) -> ServiceResult<()> {
        self.slack()?
            .update_message(update)
            .await
            .map_err(|error| ServiceError::Conflict(format!("Slack refused the update: {error}")))
    }
}

fn slack_channel(task: &Task) -> Option<&str> {
    task.origin.slack_thread_ts.as_ref()?;
    task.origin.slack_channel_id.as_deref()
}

/// Whether the task is taken: its living message shows it from then on.
pub fn slack_status_shown(status: TaskStatus) -> bool {
    matches!(status, TaskStatus::InProgress | TaskStatus::Paused) || status.is_finished()
}
