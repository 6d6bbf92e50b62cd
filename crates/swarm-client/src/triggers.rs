//! Triggers: what `swarm trigger` and the runner ask of a hub (listing, creating,
//! firing, disabling; the agent session of a persistent trigger's conversation; a
//! task result delivered to the session that awaited it).

use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};
use swarm_domain::{id::TaskId, task::Task};

use crate::{Client, ClientError};

#[derive(Debug, Deserialize)]
struct SessionResponse {
    session: SessionFields,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionFields {
    session_id: String,
}

#[derive(Debug, Deserialize)]
struct FireResponse {
    task: Task,
}

impl Client {
    /// `GET /api/triggers[?type=]`: the trigger objects as the hub shows them.
    pub async fn list_triggers(&self, kind: Option<&str>) -> Result<Vec<Value>, ClientError> {
        let query: Vec<(&str, String)> = kind.map(|kind| ("type", kind.to_string())).into_iter().collect();
        let body: Value = self.get_json("/api/triggers", &query).await?;
        Ok(body["triggers"].as_array().cloned().unwrap_or_default())
    }

    /// `POST /api/triggers` with the trigger's fields; the created trigger.
    pub async fn create_trigger(&self, fields: &Value) -> Result<Value, ClientError> {
        let body: Value = self.post_json("/api/triggers", fields).await?;
        Ok(body["trigger"].clone())
    }

    /// `PATCH /api/triggers/<name>` with the fields to change; the updated trigger.
    pub async fn update_trigger(&self, name: &str, fields: &Value) -> Result<Value, ClientError> {
        let path = format!("/api/triggers/{}", segment(name));
        let answer = self.send(Method::PATCH, &path, &[], Some(fields)).await?;
        let body: Value = self.decode(Method::PATCH, &path, &answer)?;
        Ok(body["trigger"].clone())
    }

    /// `POST /api/triggers/<name>/fire`: the task the firing created.
    pub async fn fire_trigger(
        &self,
        name: &str,
        payload: Option<&str>,
        session_key: Option<&str>,
    ) -> Result<Task, ClientError> {
        let body = json!({"payload": payload, "sessionKey": session_key});
        let response: FireResponse =
            self.post_json(&format!("/api/triggers/{}/fire", segment(name)), &body).await?;
        Ok(response.task)
    }

    /// The agent session recorded for one conversation of a trigger, `None` when there
    /// is none yet.
    pub async fn trigger_session(&self, name: &str, key: &str) -> Result<Option<String>, ClientError> {
        let path = format!("/api/triggers/{}/session", segment(name));
        match self.get_json::<SessionResponse>(&path, &[("key", key.to_string())]).await {
            Ok(response) => Ok(Some(response.session.session_id)),
            Err(ClientError::Status { status: StatusCode::NOT_FOUND, .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Record the agent session a run of this conversation used.
    pub async fn set_trigger_session(
        &self,
        name: &str,
        key: &str,
        session_id: &str,
    ) -> Result<(), ClientError> {
        let path = format!("/api/triggers/{}/session", segment(name));
        let body = json!({"sessionKey": key, "sessionId": session_id});
        self.send(Method::PUT, &path, &[], Some(&body)).await.map(drop)
    }

    /// The awaiting session was resumed with this task's result.
    pub async fn task_result_delivered(&self, task_id: TaskId) -> Result<(), ClientError> {
        let _: Value = self.post_json(&format!("/api/tasks/{task_id}/result-delivered"), &json!({})).await?;
        Ok(())
    }
}

/// A trigger name as one path segment (names are slugs; anything else is escaped).
fn segment(name: &str) -> String {
    name.bytes()
        .map(|byte| match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (byte as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}
