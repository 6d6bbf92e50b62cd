//! An operator (or the lead) hands on the work of an agent that is gone (issue 25):
//! `release` puts it back in the pool, `reassign` gives it to another agent. The
//! rescuer does the same on its own after `REASSIGN_AFTER_SECONDS` (`rescue.rs`); the
//! rules and the guard are `swarm_domain::handback`.

use swarm_domain::{
    agent::AgentStatus,
    handback::{self, HandBackBy, HandBackTo},
    id::{AgentId, TaskId},
    poll::Wake,
    task::{Refusal, Task, TaskAction, TaskChange, TaskStatus, parse_note},
};
use swarm_store::Applied;

use crate::{Caller, Service, ServiceError, ServiceResult, tasks::ActionOutcome};

impl Service {
    /// An agent gives back a task it holds (`pending` or `in_progress`), saying why: its
    /// runner stopped a run going nowhere, or the agent CLI could not work (issue 40). The
    /// task returns to the pool, the reason is logged on it, and the lead is told
    /// (`tasks_handed_back`), as of work the rescuer hands on.
    pub async fn task_give_back(
        &self,
        caller: Caller,
        id: TaskId,
        reason: Option<String>,
    ) -> ServiceResult<ActionOutcome> {
        let agent = caller.require_agent()?;
        let reason =
            parse_note("reason", reason)?.filter(|reason| !reason.trim().is_empty()).ok_or_else(|| {
                ServiceError::Invalid("reason must not be empty: say why the task is given back".into())
            })?;
        let now = self.clock.now();
        let mut change = TaskAction::Release { agent }.change();
        // On the event too, where the dashboard's "Needs you" reads why (issue 49).
        change.event_metadata = Some(serde_json::json!({ "fromAgentId": agent, "reason": reason }));
        match self.store.task_give_back(id, &change, agent, &reason, now).await? {
            Applied::Changed { before, after } => {
                self.task_changed_with(&after, before.agent_id, None).await;
                self.wake(&[Wake::Leads]).await;
                Ok(ActionOutcome { task: after, already_finished: false })
            }
            Applied::NotFound => Err(crate::tasks::unknown_task(id)),
            Applied::Refused { current } if current.agent_id != Some(agent) => Err(ServiceError::Forbidden(
                "cannot give back task: it is not yours (only its assignee gives it back)".into(),
            )),
            Applied::Refused { current } => Err(ServiceError::Conflict(format!(
                "cannot give back task: it is {}; only a pending or in_progress task can be given back",
                current.status
            ))),
        }
    }

    /// Hand `task` on to `to` (the pool, or an agent). The task must be held by, or
    /// offered to, an agent that is offline; a task nobody holds (pool, backlog) may be
    /// reassigned too. `caller` is already known to be the operator or the lead.
    pub(crate) async fn task_hand_back(
        &self,
        caller: Caller,
        task: &Task,
        to: HandBackTo,
    ) -> ServiceResult<ActionOutcome> {
        self.task_hand_back_checked(caller, task, to, true).await
    }

    /// [`Self::task_hand_back`]; with `holder_must_be_gone` false, the operator takes the
    /// task from a holder that is online too (it confirmed that first).
    pub(crate) async fn task_hand_back_checked(
        &self,
        caller: Caller,
        task: &Task,
        to: HandBackTo,
        holder_must_be_gone: bool,
    ) -> ServiceResult<ActionOutcome> {
        let verb = if matches!(to, HandBackTo::Agent(_)) { "reassign" } else { "release" };
        if let HandBackTo::Agent(agent) = to {
            // Unknown agents are bad input, as in task creation.
            if self.store.agent_get(agent).await?.is_none() {
                return Err(ServiceError::Invalid(format!("agent {agent} does not exist")));
            }
        }
        let now = self.clock.now();
        let by = match caller {
            Caller::Operator => "the operator",
            Caller::Agent(_) => "the lead",
        };
        let change = match holder_of(task) {
            Some((holder, offer)) => {
                if to == HandBackTo::Agent(holder) {
                    return Err(ServiceError::Invalid("the task is already that agent's".into()));
                }
                let why = if holder_must_be_gone { "is gone (offline)" } else { "was online" };
                let reason = format!("{verb}d by {by}: its agent {holder} {why}");
                let mut change = handback::change(holder, offer, to, HandBackBy::Operator { now }, &reason);
                if !holder_must_be_gone {
                    change.guard.holder_gone = None;
                }
                change
            }
            None => match (to, task.status) {
                (HandBackTo::Agent(agent), TaskStatus::Unassigned | TaskStatus::Backlog) => {
                    handback::assign_unheld(agent, &format!("reassigned by {by} to {agent}"))
                }
                _ => {
                    return Err(ServiceError::Conflict(format!(
                        "cannot {verb} task: it is {} and held by no agent; {}",
                        task.status,
                        "release and reassign hand on the work of an agent that is gone \
                         (pending, in_progress, paused, offered, reviewing); a pool or backlog \
                         task can be reassigned"
                    )));
                }
            },
        };
        match self
            .timed("task_apply", self.store.task_apply_with_waiters(task.id, &change, caller.agent_id(), now))
            .await?
        {
            (Applied::Changed { before, after }, waiters) => {
                self.task_changed_with(&after, before.agent_id, waiters).await;
                Ok(ActionOutcome { task: after, already_finished: false })
            }
            (Applied::NotFound, _) => Err(crate::tasks::unknown_task(task.id)),
            (Applied::Refused { current }, _) => {
                let refusal = self.explain_hand_back_refusal(&change, &current).await?;
                let message = format!("cannot {verb} task: {refusal}");
                Err(match refusal {
                    Refusal::NotAssignee | Refusal::NotOfferedToYou => {
                        ServiceError::Conflict(format!("{message} (it changed hands meanwhile; re-read it)"))
                    }
                    _ => ServiceError::Conflict(message),
                })
            }
        }
    }

    async fn explain_hand_back_refusal(&self, change: &TaskChange, current: &Task) -> ServiceResult<Refusal> {
        if let Some(refusal) = change.refusal_from_row(current) {
            return Ok(refusal);
        }
        if let Some((holder, _)) = change.guard.holder_gone {
            let online =
                self.store.agent_get(holder).await?.is_some_and(|agent| agent.status != AgentStatus::Offline);
            if online {
                return Ok(Refusal::HolderNotGone);
            }
        }
        Ok(Refusal::WrongStatus { current: current.status, allowed: change.from })
    }
}

/// Who holds the task, and whether as an offer (`offered_to`) rather than `agent_id`.
fn holder_of(task: &Task) -> Option<(AgentId, bool)> {
    match task.status {
        TaskStatus::Offered | TaskStatus::Reviewing => task.offered_to.map(|agent| (agent, true)),
        TaskStatus::Pending | TaskStatus::InProgress | TaskStatus::Paused => {
            task.agent_id.map(|agent| (agent, false))
        }
        _ => None,
    }
}
