//! Steering (issue 40): words for the agent working a task, sent while it works. The
//! operator, the lead or the task's creator records a message (`steer_task`); the run
//! working the task takes it into the agent once (`steering_deliver`: Claude Code's
//! hooks, or the runner resuming a CLI's session); when the run ends, what it saw is
//! `handled` and what it never saw becomes a follow-up task for the same agent
//! (`steering_settle`), so no message is lost.

use swarm_domain::{
    id::{AgentId, SteeringMessageId, TaskId},
    steering::{
        FOLLOW_UP_TASK_TYPE, NewSteeringMessage, OnUnsupported, SteerMode, SteerOutcome, SteerResult,
        SteeringMessage, SteeringStatus, parse_steering_source, parse_steering_text,
    },
    task::{NewTask, Task, TaskDraft, TaskStatus},
};
use swarm_store::SteeringRecorded;

use crate::{Caller, Change, Service, ServiceError, ServiceResult, tasks::unknown_task};

/// What settling a finished run's steering did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SteeringSettled {
    /// Messages the run had shown the agent, now `handled`.
    pub handled: u64,
    /// Messages the run never showed, each now a follow-up task: (message, task).
    pub promoted: Vec<(SteeringMessageId, TaskId)>,
}

impl Service {
    /// Record a steering message for the task's running agent, the one entry point of
    /// `POST /api/tasks/:id/steer`, the MCP tool `steer-task`, the CLI and Slack.
    ///
    /// Who may: the operator, the lead, the task's creator (403 otherwise). `steer` on a
    /// task not started yet is recorded as `queue` (`degradedFrom: steer`): there is no
    /// tool call to interrupt. A finished task takes no message: with
    /// [`OnUnsupported::Degrade`] the message becomes a follow-up task for the task's
    /// agent (`outcome: promoted`); with [`OnUnsupported::Fail`], 409. `source` says where
    /// it was written (`api`, `ui`, `mcp`, `cli`, `slack`).
    pub async fn steer_task(
        &self,
        caller: Caller,
        task_id: TaskId,
        message: &str,
        mode: SteerMode,
        on_unsupported: OnUnsupported,
        source: &str,
    ) -> ServiceResult<SteerResult> {
        let message = parse_steering_text(message)?;
        let source = parse_steering_source(Some(source))?;
        let caller_agent = self.caller_agent(caller).await?;
        let task = self.task_get(task_id).await?;
        let privileged = caller_agent.as_ref().is_none_or(|agent| agent.is_lead);
        let is_creator = caller.agent_id().is_some() && task.creator_agent_id == caller.agent_id();
        if !privileged && !is_creator {
            return Err(ServiceError::Forbidden(format!(
                "only the operator, the lead or the task's creator may steer task {task_id}"
            )));
        }
        let started = matches!(task.status, TaskStatus::InProgress | TaskStatus::Paused);
        let degraded_from =
            (mode == SteerMode::Steer && !started && !task.status.is_finished()).then_some(mode);
        let effective_mode = if degraded_from.is_some() { SteerMode::Queue } else { mode };
        let new = NewSteeringMessage {
            id: SteeringMessageId::new_v7(),
            task_id,
            message,
            mode: effective_mode,
            source,
            created_by_agent_id: caller.agent_id(),
        };
        let follow_up = match on_unsupported {
            OnUnsupported::Degrade => Some(follow_up_task(&task, &new)?),
            OnUnsupported::Fail => None,
        };
        let recorded = self.store.steering_record(&new, follow_up.as_ref(), self.clock.now()).await?;
        match recorded {
            SteeringRecorded::Pending(recorded) => {
                self.publish(Change::Task { task_id });
                let outcome = match effective_mode {
                    SteerMode::Steer => SteerOutcome::Steered,
                    SteerMode::Queue => SteerOutcome::Queued,
                };
                Ok(SteerResult {
                    outcome,
                    steering_message_id: Some(recorded.id),
                    promoted_task_id: None,
                    effective_mode,
                    degraded_from,
                })
            }
            SteeringRecorded::Promoted(recorded, created) => {
                self.publish(Change::Task { task_id });
                self.task_changed(&created, None).await;
                Ok(SteerResult {
                    outcome: SteerOutcome::Promoted,
                    steering_message_id: Some(recorded.id),
                    promoted_task_id: Some(created.id),
                    effective_mode,
                    degraded_from,
                })
            }
            SteeringRecorded::TaskFinished(None) => Err(unknown_task(task_id)),
            SteeringRecorded::TaskFinished(Some(finished)) => Err(ServiceError::Conflict(format!(
                "task {task_id} is {}: steering reaches only a task that is not finished; send \
                 onUnsupported: \"degrade\" to make the message a follow-up task for its agent",
                finished.status
            ))),
        }
    }

    /// The task's steering messages, oldest first (anyone who may read the task).
    pub async fn steering_messages(&self, task_id: TaskId) -> ServiceResult<Vec<SteeringMessage>> {
        self.task_get(task_id).await?;
        Ok(self.store.steering_list(task_id).await?)
    }

    /// For the run working the task (its assignee): the messages of these modes not yet
    /// shown, now `delivered`, oldest first; a message is returned once. The messages shown
    /// before become `handled` (the agent has acted since). A finished task gets none:
    /// its run ends, and [`Service::steering_settle`] makes them follow-up tasks.
    pub async fn steering_deliver(
        &self,
        caller: Caller,
        task_id: TaskId,
        modes: &[SteerMode],
    ) -> ServiceResult<Vec<SteeringMessage>> {
        let task = self.steering_task_of_assignee(caller, task_id).await?;
        let modes = if task.status.is_finished() { &[][..] } else { modes };
        let delivered = self.store.steering_deliver(task_id, modes, self.clock.now()).await?;
        if !delivered.is_empty() {
            self.publish(Change::Task { task_id });
        }
        Ok(delivered)
    }

    /// When a run of the task ended (its assignee's runner, the lead or the operator): what
    /// it showed the agent is `handled`. When the task is finished, what no run showed
    /// becomes a follow-up task for the task's agent, each message at most once however
    /// often this is called; a task that goes on (paused, handed back) keeps it `pending`
    /// for its next run.
    pub async fn steering_settle(&self, caller: Caller, task_id: TaskId) -> ServiceResult<SteeringSettled> {
        let caller_agent = self.caller_agent(caller).await?;
        let task = self.task_get(task_id).await?;
        let privileged = caller_agent.as_ref().is_none_or(|agent| agent.is_lead);
        if !privileged && task.agent_id != caller.agent_id() {
            return Err(ServiceError::Forbidden(format!(
                "only the agent working task {task_id} (or the lead) settles its steering"
            )));
        }
        let handled = self.store.steering_mark_handled(task_id, self.clock.now()).await?;
        let promoted =
            if task.status.is_finished() { self.promote_pending(&task).await? } else { Vec::new() };
        let settled = SteeringSettled { handled, promoted };
        if settled.handled > 0 || !settled.promoted.is_empty() {
            self.publish(Change::Task { task_id });
        }
        Ok(settled)
    }

    /// A task cancelled at the hub, run or not: its messages still `pending` become
    /// follow-up tasks (the reference's rule for a task that reached its end). A failure is
    /// logged: the cancel itself stands.
    pub(crate) async fn steering_after_cancel(&self, task: &Task) {
        match self.promote_pending(task).await {
            Ok(promoted) if !promoted.is_empty() => self.publish(Change::Task { task_id: task.id }),
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, task_id = %task.id, "could not turn a cancelled task's steering into follow-ups")
            }
        }
    }

    /// Each `pending` message of the finished `task` as a follow-up task, once.
    async fn promote_pending(&self, task: &Task) -> ServiceResult<Vec<(SteeringMessageId, TaskId)>> {
        let mut promoted = Vec::new();
        let messages = self.store.steering_list(task.id).await?;
        for message in messages.iter().filter(|message| message.status == SteeringStatus::Pending) {
            let new = NewSteeringMessage {
                id: message.id,
                task_id: task.id,
                message: message.message.clone(),
                mode: message.mode,
                source: message.source.clone(),
                created_by_agent_id: message.created_by_agent_id,
            };
            let follow_up = follow_up_task(task, &new)?;
            if let Some(created) =
                self.store.steering_promote(message.id, &follow_up, self.clock.now()).await?
            {
                self.task_changed(&created, None).await;
                promoted.push((message.id, created.id));
            }
        }
        Ok(promoted)
    }

    async fn steering_task_of_assignee(&self, caller: Caller, task_id: TaskId) -> ServiceResult<Task> {
        let agent: AgentId = caller.require_agent()?;
        let task = self.task_get(task_id).await?;
        if task.agent_id != Some(agent) {
            return Err(ServiceError::Forbidden(format!(
                "task {task_id} is not yours: only the agent working it takes its steering messages"
            )));
        }
        Ok(task)
    }
}

/// A message no run of `task` can take, as a task of its own for the same agent (the
/// pool's when it had none), from the same place (its Slack thread, its trigger's session).
fn follow_up_task(task: &Task, message: &NewSteeringMessage) -> ServiceResult<NewTask> {
    let text = format!(
        "Follow-up to task {} (\"{}\"), sent as steering after its run could take no more:\n\n{}",
        task.id,
        swarm_domain::prompts::excerpt(&task.task, 200),
        message.message
    );
    let draft = TaskDraft {
        task: text,
        agent_id: task.agent_id,
        source: Some(task.source.clone()),
        task_type: Some(FOLLOW_UP_TASK_TYPE.into()),
        priority: Some(i64::from(task.priority)),
        epic_id: task.epic_id,
        origin: task.origin.clone(),
        ..TaskDraft::default()
    };
    Ok(NewTask::parse(draft, message.created_by_agent_id)?)
}
