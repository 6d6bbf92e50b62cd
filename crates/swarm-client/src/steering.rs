//! Steering (issue 40): `POST /api/tasks/:id/steer`, the task's messages, and the calls a
//! run makes to take them (Claude Code's hooks, the runner).

use serde::{Deserialize, Serialize};
use swarm_domain::{
    id::{SteeringMessageId, TaskId},
    steering::{OnUnsupported, SteerMode, SteerResult, SteeringMessage},
};

use crate::{Client, ClientError};

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SteerRequest<'a> {
    pub message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<SteerMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_unsupported: Option<OnUnsupported>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<&'a str>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SteeringMessages {
    pub messages: Vec<SteeringMessage>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromotedMessage {
    pub steering_message_id: SteeringMessageId,
    pub task_id: TaskId,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SteeringSettled {
    pub handled: u64,
    pub promoted: Vec<PromotedMessage>,
}

#[derive(Serialize)]
struct DeliverBody<'a> {
    modes: &'a [SteerMode],
}

impl Client {
    pub async fn steer_task(
        &self,
        id: TaskId,
        request: &SteerRequest<'_>,
    ) -> Result<SteerResult, ClientError> {
        self.post_json(&format!("/api/tasks/{id}/steer"), request).await
    }

    /// The task's messages, oldest first.
    pub async fn steering_messages(&self, id: TaskId) -> Result<Vec<SteeringMessage>, ClientError> {
        let list: SteeringMessages =
            self.get_json(&format!("/api/tasks/{id}/steering-messages"), &[]).await?;
        Ok(list.messages)
    }

    /// As the agent working the task: its messages of these modes not shown yet, now
    /// `delivered` (each is returned once).
    pub async fn steering_deliver(
        &self,
        id: TaskId,
        modes: &[SteerMode],
    ) -> Result<Vec<SteeringMessage>, ClientError> {
        let path = format!("/api/tasks/{id}/steering-messages/deliver");
        let list: SteeringMessages = self.post_json(&path, &DeliverBody { modes }).await?;
        Ok(list.messages)
    }

    /// When a run of the task ended: shown messages `handled`, the others follow-up tasks.
    pub async fn steering_settle(&self, id: TaskId) -> Result<SteeringSettled, ClientError> {
        self.post_json(&format!("/api/tasks/{id}/steering-messages/settle"), &serde_json::json!({})).await
    }
}
