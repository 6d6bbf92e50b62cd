//! Sending work to another agent (`send-task`): the rules that say to whom a task may
//! go, on top of plain task creation.

use swarm_domain::{
    id::{AgentId, TaskId},
    task::{Task, TaskDraft, TaskOrigin},
};

use crate::{Caller, Service, ServiceError, ServiceResult};

/// A task one agent hands to another, or to the pool when `to` is `None`.
#[derive(Debug, Clone, Default)]
pub struct SendTask {
    pub task: String,
    pub to: Option<AgentId>,
    /// Offer the task (the target accepts or rejects it) instead of assigning it.
    pub offer: bool,
    pub source: Option<String>,
    pub task_type: Option<String>,
    pub tags: Vec<String>,
    pub priority: Option<i64>,
    pub depends_on: Vec<TaskId>,
    /// The trigger session the sender is in (its run's task), which then awaits the result.
    pub session_task: Option<TaskId>,
    /// The model the target's agent CLI runs the task with.
    pub model: Option<String>,
}

impl Service {
    /// Create a task for another agent: never for a lead, never for the sender itself;
    /// a direct assignment needs a free slot on the target (an offer does not, since
    /// the target decides). Without a target the task goes to the pool.
    pub async fn task_send(&self, caller: Caller, request: SendTask) -> ServiceResult<Task> {
        let sender = self.caller_agent(caller).await?;
        if let Some(to) = request.to {
            if sender.as_ref().is_some_and(|sender| sender.id == to) {
                return Err(ServiceError::Invalid(
                    "a task cannot be sent to yourself: claim it from the pool or create it unassigned"
                        .into(),
                ));
            }
            let target = self.agent_get(to).await?;
            if target.is_lead {
                return Err(ServiceError::Forbidden(format!(
                    "{} is the lead: tasks go to workers, never to the lead",
                    target.name
                )));
            }
            if !request.offer && target.capacity.available == 0 {
                return Err(ServiceError::Conflict(format!(
                    "{} is at capacity ({} of {} tasks in progress): offer the task instead \
                     (offerMode) or send it to the pool",
                    target.name, target.capacity.current, target.capacity.max
                )));
            }
        } else if request.offer {
            return Err(ServiceError::Invalid("an offer needs the agent to offer it to (agentId)".into()));
        }
        let (agent_id, offered_to) = match (request.to, request.offer) {
            (Some(to), true) => (None, Some(to)),
            (to, _) => (to, None),
        };
        let draft = TaskDraft {
            task: request.task,
            agent_id,
            offered_to,
            backlog: false,
            source: request.source,
            task_type: request.task_type,
            tags: request.tags,
            priority: request.priority,
            depends_on: request.depends_on,
            origin: TaskOrigin { model: request.model, ..TaskOrigin::default() },
            epic_id: None,
        };
        // From a trigger session, the session awaits the result.
        self.task_create_from_session(caller, draft, request.session_task).await
    }
}
