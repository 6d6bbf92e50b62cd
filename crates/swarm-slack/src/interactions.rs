//! The buttons of a Slack task's living message (issue 42): `POST /slack/interactivity`
//! (and `POST /slack/events`, where Bolt apps send both), signed like events, or Socket
//! Mode's `interactive` envelopes. Each button acts through the same service call as its
//! REST twin: cancel (`task_act` Cancel), pause and resume (as the task's assignee, whose
//! transitions they are), ask the lead (an inbox message about the task). The user
//! allowlist applies as for messages; the living message then follows the task by itself.

use serde_json::Value;
use swarm_domain::{agent::AgentStatus, id::TaskId, inbox::SlackContext, task::Task};
use swarm_service::{Caller, TaskRequest};

use crate::{
    blocks::{ASK_LEAD_ACTION, CANCEL_ACTION, PAUSE_ACTION, RESUME_ACTION},
    bridge::Bridge,
};

/// The JSON of a form-encoded interaction body (`payload=...`), if it is one.
pub fn form_payload(body: &[u8]) -> Option<Value> {
    let body = std::str::from_utf8(body).ok()?;
    if !body.starts_with("payload=") {
        return None;
    }
    // The form's own decoding (`+` is a space), without a crate of its own.
    let parsed = reqwest::Url::parse(&format!("http://form.invalid/?{body}")).ok()?;
    let (_, payload) = parsed.query_pairs().find(|(key, _)| key == "payload")?;
    serde_json::from_str(&payload).ok()
}

impl Bridge {
    /// A `block_actions` payload. Errors are told in the task's thread: Slack has been
    /// answered already.
    pub async fn handle_interaction(&self, payload: &Value) {
        if payload.get("type").and_then(Value::as_str) != Some("block_actions") {
            return;
        }
        self.service.note_inbound("slack", "received");
        let Some(user) = payload.pointer("/user/id").and_then(Value::as_str) else { return };
        if !self.user_allowed(user).await {
            self.service.note_inbound("slack", "ignored");
            tracing::info!(user, "Slack button pressed by a user who is not allowed; ignored");
            return;
        }
        for action in payload.get("actions").and_then(Value::as_array).into_iter().flatten() {
            let action_id = action.get("action_id").and_then(Value::as_str).unwrap_or_default();
            let Some(task_id) =
                action.get("value").and_then(Value::as_str).and_then(|v| TaskId::parse(v).ok())
            else {
                continue;
            };
            let task = match self.service.task_get(task_id).await {
                Ok(task) => task,
                Err(error) => {
                    tracing::warn!(%error, "a Slack button named an unknown task");
                    continue;
                }
            };
            if let Err(error) = self.act(action_id, &task, user).await {
                tracing::info!(%error, action_id, task = %task.id, "a Slack button's action was refused");
                if let (Some(channel), Some(thread)) =
                    (&task.origin.slack_channel_id, &task.origin.slack_thread_ts)
                {
                    self.acknowledge(channel, thread, &format!("<@{user}>: that did not work: {error}"))
                        .await;
                }
            }
        }
    }

    async fn act(&self, action_id: &str, task: &Task, user: &str) -> Result<(), String> {
        let request = match action_id {
            CANCEL_ACTION => {
                let reason = Some(format!("cancelled from Slack by {user}"));
                self.service.task_act(Caller::Operator, task.id, TaskRequest::Cancel { reason }).await
            }
            PAUSE_ACTION | RESUME_ACTION => {
                let Some(assignee) = task.agent_id else { return Err("nobody holds this task".into()) };
                let request =
                    if action_id == PAUSE_ACTION { TaskRequest::Pause } else { TaskRequest::Resume };
                self.service.task_act(Caller::Agent(assignee), task.id, request).await
            }
            ASK_LEAD_ACTION => return self.ask_lead(task, user).await,
            _ => return Ok(()),
        };
        let outcome = request.map_err(|e| e.to_string())?;
        if outcome.already_finished {
            return Err(format!("the task is already {}", outcome.task.status));
        }
        Ok(())
    }

    async fn ask_lead(&self, task: &Task, user: &str) -> Result<(), String> {
        let agents = self.service.agent_list().await.map_err(|e| e.to_string())?;
        let lead = agents
            .iter()
            .find(|agent| agent.is_lead && agent.status != AgentStatus::Offline)
            .ok_or("no lead is online")?;
        let progress = task.progress.as_deref().unwrap_or("(no progress reported)");
        let content = format!(
            "<@{user}> pressed \"Ask the lead\" on task {} ({}): please look at it and answer in its thread.\n\
             Task: {}\nLatest progress: {progress}",
            task.id,
            task.status,
            swarm_domain::prompts::excerpt(&task.task, 400),
        );
        let slack = SlackContext {
            slack_channel_id: task.origin.slack_channel_id.clone(),
            slack_thread_ts: task.origin.slack_thread_ts.clone(),
            slack_user_id: Some(user.to_string()),
        };
        let why = Some(format!("ask the lead: task {}", task.id));
        self.service.inbox_receive(lead.id, &content, slack, why).await.map_err(|e| e.to_string())?;
        if let (Some(channel), Some(thread)) = (&task.origin.slack_channel_id, &task.origin.slack_thread_ts) {
            self.acknowledge(
                channel,
                thread,
                &format!(":speech_balloon: Asked *{}* to look at this.", lead.name),
            )
            .await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_encoded_payloads_are_read() {
        let body = b"payload=%7B%22type%22%3A%22block_actions%22%2C%22text%22%3A%22a+b%22%7D";
        let payload = form_payload(body).expect("a payload");
        assert_eq!(payload["type"], "block_actions");
        assert_eq!(payload["text"], "a b");
        assert!(form_payload(br#"{"type":"event_callback"}"#).is_none());
    }
}
