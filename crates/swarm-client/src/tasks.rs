//! Tasks: `POST /api/tasks`, the listings, and each transition's endpoint
//! (`/api/tasks/:id/<action>`).

use serde::{Deserialize, Serialize};
use swarm_domain::{
    event::Event,
    id::{AgentId, IdSuffix, TaskId},
    task::{Task, TaskStatus},
};

use crate::{Client, ClientError};

pub use swarm_domain::wire::{CreateTaskRequest, InitialStatus};

/// Filters of `GET /api/tasks`; empty fields are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskQuery {
    /// Any of these statuses (sent as a comma-separated list).
    pub status: Vec<TaskStatus>,
    pub agent_id: Option<AgentId>,
    /// Text the task contains (case-insensitive).
    pub search: Option<String>,
    pub source: Option<String>,
    pub task_type: Option<String>,
    /// Tags the task must all carry.
    pub tags: Vec<String>,
    /// At most this many tasks (the hub allows 1 to 1000, default 100).
    pub limit: Option<u32>,
    pub offset: Option<u32>,
}

impl TaskQuery {
    fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = Vec::new();
        if !self.status.is_empty() {
            let statuses: Vec<&str> = self.status.iter().map(TaskStatus::as_str).collect();
            pairs.push(("status", statuses.join(",")));
        }
        if let Some(agent_id) = self.agent_id {
            pairs.push(("agentId", agent_id.to_string()));
        }
        if let Some(search) = &self.search {
            pairs.push(("search", search.clone()));
        }
        if let Some(source) = &self.source {
            pairs.push(("source", source.clone()));
        }
        if let Some(task_type) = &self.task_type {
            pairs.push(("taskType", task_type.clone()));
        }
        if !self.tags.is_empty() {
            pairs.push(("tags", self.tags.join(",")));
        }
        if let Some(limit) = self.limit {
            pairs.push(("limit", limit.to_string()));
        }
        if let Some(offset) = self.offset {
            pairs.push(("offset", offset.to_string()));
        }
        pairs
    }
}

/// `GET /api/tasks`: one page of tasks, and how many match in all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskList {
    pub tasks: Vec<Task>,
    pub total: i64,
}

/// `GET /api/tasks/:id`: the task and its history, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskDetail {
    #[serde(flatten)]
    pub task: Task,
    #[serde(default)]
    pub logs: Vec<Event>,
}

/// How a task ends in `finish_task`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishStatus {
    Completed,
    Failed,
}

/// `finish` and `cancel`: `already_finished` says the task was finished before this
/// call, and `task` is then returned unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinishResponse {
    pub success: bool,
    #[serde(default)]
    pub already_finished: bool,
    pub task: Task,
}

/// The other task actions (claim, accept, start, progress...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionResponse {
    pub success: bool,
    pub task: Task,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FinishBody<'a> {
    status: FinishStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure_reason: Option<&'a str>,
}

#[derive(Serialize)]
struct ReasonBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

#[derive(Serialize)]
struct ProgressBody<'a> {
    progress: &'a str,
}

impl Client {
    pub async fn create_task(&self, request: &CreateTaskRequest) -> Result<Task, ClientError> {
        self.post_json("/api/tasks", request).await
    }

    pub async fn list_tasks(&self, query: &TaskQuery) -> Result<TaskList, ClientError> {
        self.get_json("/api/tasks", &query.pairs()).await
    }

    /// `GET /api/task-ids/:suffix`: the one task whose id ends with `suffix` (as lists
    /// show ids); 404 when none does, 409 (naming them) when several do.
    pub async fn resolve_task_id(&self, suffix: &IdSuffix) -> Result<TaskId, ClientError> {
        #[derive(Deserialize)]
        struct Found {
            id: TaskId,
        }
        let found: Found = self.get_json(&format!("/api/task-ids/{}", suffix.as_str()), &[]).await?;
        Ok(found.id)
    }

    pub async fn get_task(&self, id: TaskId) -> Result<TaskDetail, ClientError> {
        self.get_json(&format!("/api/tasks/{id}"), &[]).await
    }

    /// `POST /api/tasks/:id/finish`; finishing twice returns `already_finished: true`.
    pub async fn finish_task(
        &self,
        id: TaskId,
        status: FinishStatus,
        output: Option<&str>,
        failure_reason: Option<&str>,
    ) -> Result<FinishResponse, ClientError> {
        let body = FinishBody { status, output, failure_reason };
        self.post_json(&format!("/api/tasks/{id}/finish"), &body).await
    }

    pub async fn cancel_task(&self, id: TaskId, reason: Option<&str>) -> Result<FinishResponse, ClientError> {
        self.post_json(&format!("/api/tasks/{id}/cancel"), &ReasonBody { reason }).await
    }

    /// `unassigned` → `pending`, assigned to the caller.
    pub async fn claim_task(&self, id: TaskId) -> Result<ActionResponse, ClientError> {
        self.task_action(id, "claim").await
    }

    /// `pending` → `unassigned`: give the caller's task back to the pool.
    pub async fn release_task(&self, id: TaskId) -> Result<ActionResponse, ClientError> {
        self.task_action(id, "release").await
    }

    /// `pending`/`in_progress` → `unassigned`: give the caller's task back to the pool,
    /// saying why; the lead is told.
    pub async fn give_back_task(&self, id: TaskId, reason: &str) -> Result<ActionResponse, ClientError> {
        self.post_json(&format!("/api/tasks/{id}/give-back"), &serde_json::json!({ "reason": reason })).await
    }

    /// As the operator or the lead: give a gone agent's task (or a pool or backlog
    /// task) to `agent`, as `pending`.
    pub async fn reassign_task(&self, id: TaskId, agent: AgentId) -> Result<ActionResponse, ClientError> {
        self.post_json(&format!("/api/tasks/{id}/reassign"), &serde_json::json!({ "agentId": agent })).await
    }

    /// `offered`/`reviewing` → `pending`, for the agent the task was offered to.
    pub async fn accept_task(&self, id: TaskId) -> Result<ActionResponse, ClientError> {
        self.task_action(id, "accept").await
    }

    /// `offered`/`reviewing` → `unassigned`, with an optional reason.
    pub async fn reject_task(&self, id: TaskId, reason: Option<&str>) -> Result<ActionResponse, ClientError> {
        self.post_json(&format!("/api/tasks/{id}/reject"), &ReasonBody { reason }).await
    }

    /// `pending` → `in_progress`.
    pub async fn start_task(&self, id: TaskId) -> Result<ActionResponse, ClientError> {
        self.task_action(id, "start").await
    }

    /// `in_progress` → `paused`.
    pub async fn pause_task(&self, id: TaskId) -> Result<ActionResponse, ClientError> {
        self.task_action(id, "pause").await
    }

    /// `paused` → `in_progress`.
    pub async fn resume_task(&self, id: TaskId) -> Result<ActionResponse, ClientError> {
        self.task_action(id, "resume").await
    }

    /// Record a progress note on an unfinished task.
    pub async fn store_progress(&self, id: TaskId, progress: &str) -> Result<ActionResponse, ClientError> {
        self.post_json(&format!("/api/tasks/{id}/progress"), &ProgressBody { progress }).await
    }

    /// `unassigned` → `backlog`: park a pool task.
    pub async fn to_backlog(&self, id: TaskId) -> Result<ActionResponse, ClientError> {
        self.task_action(id, "to-backlog").await
    }

    /// `backlog` → `unassigned`: put a parked task in the pool.
    pub async fn from_backlog(&self, id: TaskId) -> Result<ActionResponse, ClientError> {
        self.task_action(id, "from-backlog").await
    }

    /// `GET /api/paused-tasks`: the caller's paused tasks.
    pub async fn paused_tasks(&self) -> Result<Vec<Task>, ClientError> {
        #[derive(Deserialize)]
        struct Tasks {
            tasks: Vec<Task>,
        }
        Ok(self.get_json::<Tasks>("/api/paused-tasks", &[]).await?.tasks)
    }

    async fn task_action(&self, id: TaskId, action: &str) -> Result<ActionResponse, ClientError> {
        // An empty object rather than no body, so that a handler expecting JSON accepts it.
        self.post_json(&format!("/api/tasks/{id}/{action}"), &serde_json::json!({})).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_query_leaves_out_empty_filters() {
        assert!(TaskQuery::default().pairs().is_empty());
        let query = TaskQuery {
            status: vec![TaskStatus::Pending, TaskStatus::InProgress],
            limit: Some(10),
            ..TaskQuery::default()
        };
        assert_eq!(
            query.pairs(),
            vec![("status", "pending,in_progress".to_string()), ("limit", "10".to_string())]
        );
    }

    #[test]
    fn create_request_sends_only_what_is_set() {
        let request = CreateTaskRequest {
            task: "x".into(),
            status: Some(InitialStatus::Backlog),
            ..CreateTaskRequest::default()
        };
        let json = serde_json::to_value(&request).unwrap();
        assert_eq!(json, serde_json::json!({"task": "x", "status": "backlog"}));
    }
}
