//! Turns what the hub holds into the demo's story: each time the demo looks, the
//! narrator compares every agent and task with what it saw last and says what changed,
//! stamped with when the hub recorded it (relative to the demo's start).

use std::{
    collections::{BTreeMap, HashMap},
    time::Duration,
};

use swarm_domain::{
    agent::Agent,
    id::{AgentId, TaskId},
    task::{Task, TaskStatus},
    time::Timestamp,
};

/// How much of a task's text or output a line quotes.
const QUOTE_CHARS: usize = 80;

/// One thing that happened.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Line {
    /// When the hub recorded it, from the demo's start.
    pub at: Duration,
    /// For machines: `task_offered`, `task_accepted`, `tasks_finished`, ...
    pub event: &'static str,
    pub task_id: Option<TaskId>,
    /// Who did it, when an agent did.
    pub agent: Option<String>,
    pub message: String,
}

pub(super) struct Narrator {
    started: Timestamp,
    names: HashMap<AgentId, String>,
    tasks: HashMap<TaskId, Task>,
}

impl Narrator {
    pub fn new(started: Timestamp) -> Narrator {
        Narrator { started, names: HashMap::new(), tasks: HashMap::new() }
    }

    pub fn knows_task(&self, id: TaskId) -> bool {
        self.tasks.contains_key(&id)
    }

    /// Agents that joined since the last look.
    pub fn agents(&mut self, agents: &[Agent]) -> Vec<Line> {
        let mut lines = Vec::new();
        for agent in agents {
            if self.names.insert(agent.id, agent.name.clone()).is_some() {
                continue;
            }
            let part = if agent.is_lead { "the lead" } else { "a worker" };
            lines.push(Line {
                at: self.since_start(agent.created_at),
                event: "agent_joined",
                task_id: None,
                agent: Some(agent.name.clone()),
                message: format!("{} joined as {part} (a runner with a stand-in agent CLI)", agent.name),
            });
        }
        lines.sort_by_key(|line| line.at);
        lines
    }

    /// What happened to the tasks since the last look. `created_as` holds the first
    /// status of tasks seen for the first time (from their `task_created` event), so a
    /// task that was claimed before the narrator first saw it is told from its start.
    pub fn tasks(&mut self, tasks: &[Task], created_as: &HashMap<TaskId, TaskStatus>) -> Vec<Line> {
        let mut lines = Vec::new();
        let mut notified: BTreeMap<i64, Vec<&Task>> = BTreeMap::new();
        for task in tasks {
            let previous = match self.tasks.get(&task.id) {
                Some(previous) => previous.clone(),
                None => {
                    let first = created_as.get(&task.id).copied().unwrap_or(task.status);
                    lines.push(self.creation(task, first));
                    Task { status: first, notified_at: None, ..task.clone() }
                }
            };
            if previous.status != task.status {
                lines.push(self.transition(&previous, task));
            }
            if previous.notified_at.is_none()
                && let Some(at) = task.notified_at
            {
                notified.entry(at.unix_millis()).or_default().push(task);
            }
            self.tasks.insert(task.id, task.clone());
        }
        // One `tasks_finished` trigger hands the lead several tasks, stamped alike.
        for (millis, group) in notified {
            let list: Vec<String> = group
                .iter()
                .map(|task| format!("{} ({})", quote(&task.task), task.status.as_str()))
                .collect();
            lines.push(Line {
                at: self.since_start(Timestamp::from_unix_millis(millis).unwrap_or(self.started)),
                event: "tasks_finished",
                task_id: None,
                agent: Some(super::story::LEAD.to_string()),
                message: format!(
                    "lead got a tasks_finished trigger ({} finished: {}) and reviews the results",
                    group.len(),
                    list.join(", ")
                ),
            });
        }
        lines.sort_by_key(|line| line.at);
        lines
    }

    /// The line for a new task, as it was created: offered, assigned, or in the pool;
    /// by the demo, or sent by an agent (`send-task`).
    pub fn creation(&self, task: &Task, first: TaskStatus) -> Line {
        let text = quote(&task.task);
        let sender = task.creator_agent_id.map(|id| self.name(Some(id)));
        let (event, message) = match (&sender, first) {
            (Some(sender), TaskStatus::Unassigned) => {
                ("task_delegated", format!("{sender} delegated {text} to the pool (send-task)"))
            }
            (Some(sender), TaskStatus::Offered) => (
                "task_delegated",
                format!(
                    "{sender} delegated {text}, offering it to {} (send-task)",
                    self.name(task.offered_to)
                ),
            ),
            (Some(sender), _) => (
                "task_delegated",
                format!("{sender} delegated {text} to {} (send-task)", self.name(task.agent_id)),
            ),
            (None, TaskStatus::Offered) => {
                ("task_offered", format!("task {text} offered to {}", self.name(task.offered_to)))
            }
            (None, TaskStatus::Unassigned) => ("task_pooled", format!("task {text} put in the pool")),
            (None, _) => ("task_assigned", format!("task {text} assigned to {}", self.name(task.agent_id))),
        };
        Line { at: self.since_start(task.created_at), event, task_id: Some(task.id), agent: sender, message }
    }

    fn transition(&self, previous: &Task, task: &Task) -> Line {
        let text = quote(&task.task);
        let who = self.name(task.agent_id.or(task.offered_to).or(previous.offered_to));
        let mut at = task.last_updated_at;
        let (event, message) = match (previous.status, task.status) {
            (TaskStatus::Offered, TaskStatus::Reviewing) => (
                "offer_reviewing",
                format!("{who}'s runner claimed the offer of {text}; its agent reviews it"),
            ),
            (TaskStatus::Offered | TaskStatus::Reviewing, TaskStatus::Pending) => {
                at = task.accepted_at.unwrap_or(at);
                ("task_accepted", format!("{who} accepted {text}"))
            }
            (TaskStatus::Offered | TaskStatus::Reviewing, TaskStatus::InProgress) => {
                ("task_accepted", format!("{who} accepted {text} and started it"))
            }
            (TaskStatus::Offered | TaskStatus::Reviewing, TaskStatus::Unassigned) => {
                let reason = task.rejection_reason.as_deref().unwrap_or("no reason given");
                let who = self.name(previous.offered_to);
                ("task_rejected", format!("{who} rejected {text} ({reason}); it goes to the pool"))
            }
            (TaskStatus::Unassigned, TaskStatus::InProgress) => {
                ("task_claimed", format!("{who} claimed {text} from the pool and started it"))
            }
            (TaskStatus::Unassigned, TaskStatus::Pending) => {
                ("task_claimed", format!("{who} claimed {text} from the pool"))
            }
            (_, TaskStatus::InProgress) => ("task_started", format!("{who} started {text}")),
            (_, TaskStatus::Completed) => {
                at = task.finished_at.unwrap_or(at);
                let output = quote(task.output.as_deref().unwrap_or("no output"));
                ("task_completed", format!("{who} completed {text}: {output}"))
            }
            (_, TaskStatus::Failed) => {
                at = task.finished_at.unwrap_or(at);
                let reason = task.failure_reason.as_deref().unwrap_or("no reason given");
                ("task_failed", format!("{who} failed {text}: {reason}"))
            }
            (_, status) => ("task_status", format!("{text} is now {}", status.as_str())),
        };
        Line {
            at: self.since_start(at),
            event,
            task_id: Some(task.id),
            agent: Some(who).filter(|name| name != UNKNOWN_AGENT),
            message,
        }
    }

    pub fn name(&self, id: Option<AgentId>) -> String {
        id.and_then(|id| self.names.get(&id).cloned()).unwrap_or_else(|| UNKNOWN_AGENT.to_string())
    }

    pub fn since_start(&self, at: Timestamp) -> Duration {
        let millis = at.unix_millis() - self.started.unix_millis();
        Duration::from_millis(u64::try_from(millis).unwrap_or(0))
    }
}

const UNKNOWN_AGENT: &str = "an agent";

/// `'text'`, cut to [`QUOTE_CHARS`] characters on one line.
pub(super) fn quote(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(QUOTE_CHARS) {
        Some((cut, _)) => format!("'{}...'", &line[..cut]),
        None => format!("'{line}'"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn task(status: &str, extra: serde_json::Value) -> Task {
        let mut value = json!({
            "id": "0190abcd-0000-7000-8000-000000000001", "agentId": null, "creatorAgentId": null,
            "task": "Write the README", "status": status, "source": "api", "taskType": null, "tags": [],
            "priority": 50, "dependsOn": [], "offeredTo": null, "offeredAt": null, "acceptedAt": null,
            "rejectionReason": null, "createdAt": "2026-01-20T10:00:00.500Z",
            "lastUpdatedAt": "2026-01-20T10:00:01.000Z", "finishedAt": null, "failureReason": null,
            "output": null, "progress": null, "notifiedAt": null, "leaseExpiresAt": null, "leaseLosses": 0
        });
        for (key, extra) in extra.as_object().unwrap() {
            value[key] = extra.clone();
        }
        serde_json::from_value(value).unwrap()
    }

    fn narrator() -> (Narrator, AgentId) {
        let started = Timestamp::from_datetime("2026-01-20T10:00:00.000Z".parse().unwrap());
        let mut narrator = Narrator::new(started);
        let worker = AgentId::parse("0190ffff-0000-7000-8000-000000000002").unwrap();
        narrator.names.insert(worker, "worker-1".into());
        (narrator, worker)
    }

    #[test]
    fn an_offer_is_told_from_creation_to_completion() {
        let (mut narrator, worker) = narrator();
        let offered = task("offered", json!({"offeredTo": worker}));
        let lines = narrator.tasks(&[offered], &HashMap::new());
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].message, "task 'Write the README' offered to worker-1");
        assert_eq!(lines[0].at, Duration::from_millis(500));

        let accepted = task(
            "pending",
            json!({"offeredTo": worker, "agentId": worker, "acceptedAt": "2026-01-20T10:00:01.200Z"}),
        );
        let lines = narrator.tasks(&[accepted], &HashMap::new());
        assert_eq!(lines[0].message, "worker-1 accepted 'Write the README'");
        assert_eq!(lines[0].at, Duration::from_millis(1200));

        let done = task(
            "completed",
            json!({"agentId": worker, "output": "done", "finishedAt": "2026-01-20T10:00:02.000Z",
                   "notifiedAt": "2026-01-20T10:00:02.100Z"}),
        );
        let lines = narrator.tasks(&[done], &HashMap::new());
        let messages: Vec<&str> = lines.iter().map(|line| line.message.as_str()).collect();
        assert_eq!(messages[0], "worker-1 completed 'Write the README': 'done'");
        assert!(messages[1].starts_with("lead got a tasks_finished trigger (1 finished"), "{messages:?}");
    }

    #[test]
    fn a_task_first_seen_late_is_told_from_how_it_was_created() {
        let (mut narrator, worker) = narrator();
        let claimed = task("in_progress", json!({"agentId": worker}));
        let created_as = HashMap::from([(claimed.id, TaskStatus::Unassigned)]);
        let lines = narrator.tasks(&[claimed], &created_as);
        let messages: Vec<&str> = lines.iter().map(|line| line.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "task 'Write the README' put in the pool",
                "worker-1 claimed 'Write the README' from the pool and started it"
            ]
        );
    }

    #[test]
    fn quotes_are_one_short_line() {
        assert_eq!(quote("a\nb"), "'a'");
        assert_eq!(quote(&"x".repeat(90)), format!("'{}...'", "x".repeat(80)));
    }
}
