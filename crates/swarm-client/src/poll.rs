//! `GET /api/poll`: the runner's question "is there work for me?".

use std::time::Duration;

use reqwest::Method;
use serde::Deserialize;
use serde_json::Value;
use swarm_domain::task::Task;

use crate::{Client, ClientError};

/// What a poll handed the caller, already claimed for it by the hub (docs/api.md, The
/// poll). Kinds this client does not know yet (a newer hub's, e.g. `slack_inbox_message`)
/// arrive as [`Trigger::Other`] rather than as an error, so an older runner keeps working.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// `task_offered`: the task is now `reviewing` for the caller, who accepts or rejects it.
    TaskOffered { task: Task },
    /// `task_assigned`: the task is now `in_progress` for the caller (an assigned task,
    /// or a pool task the hub claimed for it).
    TaskAssigned { task: Task },
    /// `tasks_finished` (leads): finished worker tasks the lead had not been told about.
    TasksFinished { tasks: Vec<Task> },
    /// `task_result` (ours): a task created from one of the caller's trigger sessions
    /// finished; resume that session (`session_id`) with the result, then say so.
    TaskResult {
        task: Task,
        parent_task_id: swarm_domain::id::TaskId,
        trigger_name: String,
        session_key: String,
        session_id: Option<String>,
    },
    /// `pool_tasks_available` (workers asking `?pool=notify`): nothing was claimed.
    PoolTasksAvailable { count: i64 },
    /// `budget_refused`: work waits, but a daily budget is reached; nothing was claimed.
    BudgetRefused(BudgetRefused),
    /// Any other kind: its `type` and the whole trigger object.
    Other { kind: String, body: Value },
}

/// Why a poll started nothing (the reference's `budget_refused` fields, issue 40): the
/// budget reached (`cause`: `global` or `agent`), the day's figures of the budgets set,
/// and when the day's spend starts again from zero.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetRefused {
    pub cause: String,
    pub agent_spend: Option<f64>,
    pub agent_budget: Option<f64>,
    pub global_spend: Option<f64>,
    pub global_budget: Option<f64>,
    pub reset_at: Option<String>,
}

impl BudgetRefused {
    /// One line for a person: which budget, spent against it, when it resets.
    pub fn describe(&self) -> String {
        let (spend, budget) = match self.cause.as_str() {
            "global" => (self.global_spend, self.global_budget),
            _ => (self.agent_spend, self.agent_budget),
        };
        let figures = match (spend, budget) {
            (Some(spend), Some(budget)) => format!(": ${spend:.2} spent of ${budget:.2} today"),
            _ => String::new(),
        };
        let reset = self.reset_at.as_deref().map(|at| format!(" (resets {at})")).unwrap_or_default();
        format!("the {} daily budget is reached{figures}{reset}", self.cause)
    }
}

impl Trigger {
    /// The wire name of the kind (`task_assigned`, ...).
    pub fn kind(&self) -> &str {
        match self {
            Trigger::TaskOffered { .. } => "task_offered",
            Trigger::TaskAssigned { .. } => "task_assigned",
            Trigger::TasksFinished { .. } => "tasks_finished",
            Trigger::TaskResult { .. } => "task_result",
            Trigger::PoolTasksAvailable { .. } => "pool_tasks_available",
            Trigger::BudgetRefused(_) => "budget_refused",
            Trigger::Other { kind, .. } => kind,
        }
    }

    /// The one task this trigger is about, if it is about one.
    pub fn task(&self) -> Option<&Task> {
        match self {
            Trigger::TaskOffered { task } | Trigger::TaskAssigned { task } => Some(task),
            _ => None,
        }
    }

    /// Reads a trigger object `{type, ...}`. A known kind whose fields do not match its
    /// shape is an error; an unknown kind is [`Trigger::Other`].
    pub fn from_json(body: Value) -> Result<Trigger, String> {
        #[derive(Deserialize)]
        struct TaskFields {
            task: Task,
        }
        #[derive(Deserialize)]
        struct FinishedFields {
            tasks: Vec<Task>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct ResultFields {
            task: Task,
            parent_task_id: swarm_domain::id::TaskId,
            trigger_name: String,
            session_key: String,
            session_id: Option<String>,
        }
        #[derive(Deserialize)]
        struct CountFields {
            count: i64,
        }
        let kind = body.get("type").and_then(Value::as_str).ok_or("the trigger has no \"type\"")?.to_string();
        let fields =
            |what: &str, err: serde_json::Error| format!("a {what} trigger that cannot be read: {err}");
        Ok(match kind.as_str() {
            "task_offered" => Trigger::TaskOffered {
                task: TaskFields::deserialize(&body).map_err(|err| fields(&kind, err))?.task,
            },
            // `pool_task` is how some hubs name a pool task claimed for the caller; ours
            // reports it as `task_assigned`. Both mean the same to a runner.
            "task_assigned" | "pool_task" => Trigger::TaskAssigned {
                task: TaskFields::deserialize(&body).map_err(|err| fields(&kind, err))?.task,
            },
            "tasks_finished" => Trigger::TasksFinished {
                tasks: FinishedFields::deserialize(&body).map_err(|err| fields(&kind, err))?.tasks,
            },
            "task_result" => {
                let fields = ResultFields::deserialize(&body).map_err(|err| fields(&kind, err))?;
                Trigger::TaskResult {
                    task: fields.task,
                    parent_task_id: fields.parent_task_id,
                    trigger_name: fields.trigger_name,
                    session_key: fields.session_key,
                    session_id: fields.session_id,
                }
            }
            "pool_tasks_available" => Trigger::PoolTasksAvailable {
                count: CountFields::deserialize(&body).map_err(|err| fields(&kind, err))?.count,
            },
            "budget_refused" => {
                Trigger::BudgetRefused(BudgetRefused::deserialize(&body).map_err(|err| fields(&kind, err))?)
            }
            _ => Trigger::Other { kind, body },
        })
    }
}

#[derive(Deserialize)]
struct PollResponse {
    trigger: Option<Value>,
}

impl Client {
    /// `GET /api/poll?wait=<seconds>` as the client's agent: holds the request open up to
    /// `wait` (at most 60 s) until a trigger exists. `None` when the wait ended empty.
    /// A poll counts as a heartbeat.
    pub async fn poll(&self, wait: Duration) -> Result<Option<Trigger>, ClientError> {
        let path = "/api/poll";
        let query = [("wait", format!("{:.3}", wait.as_secs_f64()))];
        let response: PollResponse = self.get_json(path, &query).await?;
        let Some(body) = response.trigger.filter(|trigger| !trigger.is_null()) else {
            return Ok(None);
        };
        Trigger::from_json(body).map(Some).map_err(|reason| ClientError::BadResponse {
            url: self.base_url().to_string(),
            method: Method::GET,
            path: path.to_string(),
            reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unknown_kinds_are_kept_not_refused() {
        let body = json!({"type": "slack_inbox_message", "count": 1, "messages": []});
        let trigger = Trigger::from_json(body.clone()).unwrap();
        assert_eq!(trigger, Trigger::Other { kind: "slack_inbox_message".into(), body });
        assert_eq!(trigger.kind(), "slack_inbox_message");
        assert!(trigger.task().is_none());
    }

    #[test]
    fn known_kinds_with_the_wrong_shape_are_errors() {
        assert!(Trigger::from_json(json!({"type": "task_assigned"})).is_err());
        assert!(Trigger::from_json(json!({"count": 3})).is_err());
        let count = Trigger::from_json(json!({"type": "pool_tasks_available", "count": 3})).unwrap();
        assert_eq!(count, Trigger::PoolTasksAvailable { count: 3 });
    }

    #[test]
    fn a_budget_refusal_is_read_and_said_in_one_line() {
        let body = json!({"type": "budget_refused", "cause": "agent", "agentSpend": 2.5, "agentBudget": 2,
                          "resetAt": "2026-01-02T00:00:00.000Z"});
        let Trigger::BudgetRefused(refused) = Trigger::from_json(body).unwrap() else {
            panic!("not read as a refusal");
        };
        assert_eq!(
            refused.describe(),
            "the agent daily budget is reached: $2.50 spent of $2.00 today (resets 2026-01-02T00:00:00.000Z)"
        );
        assert!(Trigger::from_json(json!({"type": "budget_refused"})).is_err(), "a refusal names its cause");
    }
}
