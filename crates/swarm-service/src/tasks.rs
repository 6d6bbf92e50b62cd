//! Tasks: creation, listing, and every transition of the state machine in
//! `swarm_domain::task` with the permissions around it.

use swarm_domain::{
    event::Event,
    handback::HandBackTo,
    id::{AgentId, TaskId},
    task::{
        FinishOutcome, NewTask, Refusal, Task, TaskAction, TaskDraft, TaskStatus, parse_note, parse_task_text,
    },
};
use swarm_store::{Applied, EventFilter, TaskFilter};

use crate::{Caller, Change, Service, ServiceError, ServiceResult};

pub const TASK_PAGE_DEFAULT: i64 = 100;
pub const TASK_PAGE_MAX: i64 = 1000;
/// How far back `GET /cancelled-tasks` looks without a task id.
const RECENTLY_CANCELLED_MILLIS: i64 = 5 * 60 * 1000;
const TASK_HISTORY_LIMIT: i64 = 500;

/// What an adapter asks to do to a task. The service turns it into a
/// [`TaskAction`] with the right guard for the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskRequest {
    Claim,
    /// An agent gives back its own task; the operator or the lead hands on the work of
    /// an agent that is gone (to the pool).
    Release,
    /// The operator or the lead gives a gone agent's task (or a pool or backlog task)
    /// to another agent.
    Reassign {
        agent_id: AgentId,
        /// The operator confirmed taking it from a holder that is online (the dashboard
        /// asks first): its run is not stopped, and its finish will be refused.
        even_if_online: bool,
    },
    Accept,
    Reject {
        reason: Option<String>,
    },
    Start,
    Pause,
    Resume,
    Finish {
        status: TaskStatus,
        output: Option<String>,
        failure_reason: Option<String>,
    },
    Cancel {
        reason: Option<String>,
    },
    /// Cancel only if no agent has started it (Inbox-MCP's `task_cancel`).
    CancelUnstarted {
        reason: Option<String>,
    },
    ToBacklog,
    FromBacklog,
    Progress {
        progress: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionOutcome {
    pub task: Task,
    /// A finish or cancel that found the task already finished: nothing changed.
    pub already_finished: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskDetail {
    pub task: Task,
    /// The task's history, newest first.
    pub logs: Vec<Event>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskListQuery {
    pub statuses: Vec<TaskStatus>,
    pub agent_id: Option<AgentId>,
    pub search: Option<String>,
    pub source: Option<String>,
    pub task_type: Option<String>,
    pub tags: Vec<String>,
    pub creator_agent_id: Option<AgentId>,
    pub offered_to: Option<AgentId>,
    /// Only tasks whose dependencies are all completed.
    pub ready_only: bool,
    pub limit: Option<i64>,
    pub offset: Option<i64>,
}

impl Service {
    pub async fn task_create(&self, caller: Caller, draft: TaskDraft) -> ServiceResult<Task> {
        let creator = self.caller_agent(caller).await?.map(|agent| agent.id);
        let new_task = NewTask::parse(draft, creator)?;
        let task = self.timed("task_create", self.store.task_create(&new_task, self.clock.now())).await?;
        self.task_changed(&task, None).await;
        Ok(task)
    }

    pub async fn task_get(&self, id: TaskId) -> ServiceResult<Task> {
        self.store.task_get(id).await?.ok_or_else(|| unknown_task(id))
    }

    pub async fn task_detail(&self, id: TaskId) -> ServiceResult<TaskDetail> {
        let task = self.task_get(id).await?;
        let filter = EventFilter { task_id: Some(id), limit: TASK_HISTORY_LIMIT, ..EventFilter::default() };
        let logs = self.store.event_list(&filter).await?;
        Ok(TaskDetail { task, logs })
    }

    pub async fn task_list(&self, query: TaskListQuery) -> ServiceResult<(Vec<Task>, i64)> {
        let limit = query.limit.unwrap_or(TASK_PAGE_DEFAULT);
        if !(1..=TASK_PAGE_MAX).contains(&limit) {
            return Err(ServiceError::Invalid(format!("limit must be between 1 and {TASK_PAGE_MAX}")));
        }
        let offset = query.offset.unwrap_or(0);
        if offset < 0 {
            return Err(ServiceError::Invalid("offset must not be negative".into()));
        }
        let filter = TaskFilter {
            statuses: query.statuses,
            agent_id: query.agent_id,
            source: query.source,
            task_type: query.task_type,
            tags: query.tags,
            search: query.search.filter(|text| !text.trim().is_empty()),
            creator_agent_id: query.creator_agent_id,
            offered_to: query.offered_to,
            ready_only: query.ready_only,
            limit,
            offset,
            ..TaskFilter::default()
        };
        Ok(self.store.task_list(&filter).await?)
    }

    /// The caller's paused tasks, so a restarted runner can resume them.
    pub async fn tasks_paused(&self, caller: Caller) -> ServiceResult<Vec<Task>> {
        let agent = caller.require_agent()?;
        let filter = TaskFilter {
            statuses: vec![TaskStatus::Paused],
            agent_id: Some(agent),
            limit: TASK_PAGE_MAX,
            ..TaskFilter::default()
        };
        Ok(self.store.task_list(&filter).await?.0)
    }

    /// That task if it is cancelled; else the caller's tasks cancelled in the last five
    /// minutes, so a runner can stop work that was withdrawn.
    pub async fn tasks_cancelled(&self, caller: Caller, task_id: Option<TaskId>) -> ServiceResult<Vec<Task>> {
        if let Some(id) = task_id {
            let task = self.task_get(id).await?;
            return Ok(if task.status == TaskStatus::Cancelled { vec![task] } else { vec![] });
        }
        let agent = caller.require_agent()?;
        let filter = TaskFilter {
            statuses: vec![TaskStatus::Cancelled],
            agent_id: Some(agent),
            finished_since: Some(self.clock.now().minus_millis(RECENTLY_CANCELLED_MILLIS)),
            limit: TASK_PAGE_MAX,
            ..TaskFilter::default()
        };
        Ok(self.store.task_list(&filter).await?.0)
    }

    /// Change a task's text while nobody has taken it up (backlog, pool, offered,
    /// pending), as its creator, the lead or an operator.
    pub async fn task_edit(&self, caller: Caller, id: TaskId, text: &str) -> ServiceResult<Task> {
        let text = parse_task_text(text)?;
        let caller_agent = self.caller_agent(caller).await?;
        let task = self.task_get(id).await?;
        let privileged = caller_agent.as_ref().is_none_or(|agent| agent.is_lead);
        let is_creator = caller.agent_id().is_some() && task.creator_agent_id == caller.agent_id();
        if !privileged && !is_creator {
            return Err(ServiceError::Forbidden("only the lead or the task's creator may edit it".into()));
        }
        match self.store.task_edit_text(id, &text, caller.agent_id(), self.clock.now()).await? {
            Applied::Changed { after, .. } => {
                self.publish(Change::Task { task_id: id });
                Ok(after)
            }
            Applied::NotFound => Err(unknown_task(id)),
            Applied::Refused { current } => {
                let editable: Vec<&str> = TaskStatus::EDITABLE.iter().map(TaskStatus::as_str).collect();
                Err(ServiceError::Conflict(format!(
                    "cannot edit task: it is {}; only a task nobody has taken up ({}) can be edited",
                    current.status,
                    editable.join(", ")
                )))
            }
        }
    }

    /// Set a task's priority (0..=100) until it is finished, as its creator, the lead or
    /// an operator: the pool and the poll take higher priorities first.
    pub async fn task_set_priority(&self, caller: Caller, id: TaskId, priority: i64) -> ServiceResult<Task> {
        let priority =
            i32::try_from(priority).ok().filter(|priority| (0..=100).contains(priority)).ok_or_else(
                || ServiceError::Invalid(format!("priority must be between 0 and 100, got {priority}")),
            )?;
        let caller_agent = self.caller_agent(caller).await?;
        let task = self.task_get(id).await?;
        let privileged = caller_agent.as_ref().is_none_or(|agent| agent.is_lead);
        let is_creator = caller.agent_id().is_some() && task.creator_agent_id == caller.agent_id();
        if !privileged && !is_creator {
            return Err(ServiceError::Forbidden(
                "only the lead or the task's creator may change its priority".into(),
            ));
        }
        match self.store.task_set_priority(id, priority, caller.agent_id(), self.clock.now()).await? {
            Applied::Changed { after, .. } => {
                self.publish(Change::Task { task_id: id });
                Ok(after)
            }
            Applied::NotFound => Err(unknown_task(id)),
            Applied::Refused { current } => Err(ServiceError::Conflict(format!(
                "cannot change the priority: the task is {} (finished)",
                current.status
            ))),
        }
    }

    /// Perform one task action for the caller: the one entry point of every REST task
    /// action and its MCP twin.
    pub async fn task_act(
        &self,
        caller: Caller,
        id: TaskId,
        request: TaskRequest,
    ) -> ServiceResult<ActionOutcome> {
        if let Some(outcome) = self.finish_own_task(caller, id, &request).await? {
            return Ok(outcome);
        }
        let caller_agent = self.caller_agent(caller).await?;
        let is_lead = caller_agent.as_ref().is_some_and(|agent| agent.is_lead);
        let privileged = caller_agent.is_none() || is_lead;
        let task = self.task_get(id).await?;

        let unstarted_only = matches!(request, TaskRequest::CancelUnstarted { .. });
        let pausing = matches!(request, TaskRequest::Pause);
        let action = match request {
            TaskRequest::Progress { progress } => {
                return self.task_progress(caller, &task, progress, privileged).await;
            }
            TaskRequest::Finish { status, output, failure_reason } => {
                let outcome = finish_outcome(status, output, failure_reason)?;
                // The reference's rule: a task nobody holds yet (an offer under review)
                // is no one else's, so no 403.
                if !privileged && task.agent_id.is_some() && task.agent_id != caller.agent_id() {
                    return Err(ServiceError::Forbidden("task belongs to another agent".into()));
                }
                // Only work in progress can end. The reference's runner finishes every
                // run's task, an offer it just accepted (`pending`) included: that answers
                // `alreadyFinished` and changes nothing, so work never started is never
                // completed. The guarded UPDATE below keeps the same rule under a race.
                if task.status != TaskStatus::InProgress {
                    return Ok(ActionOutcome { task, already_finished: true });
                }
                let assignee = if privileged { None } else { caller.agent_id() };
                TaskAction::Finish { assignee, outcome }
            }
            TaskRequest::Cancel { reason } | TaskRequest::CancelUnstarted { reason } => {
                let is_creator = caller.agent_id().is_some() && task.creator_agent_id == caller.agent_id();
                if !privileged && !is_creator {
                    return Err(ServiceError::Forbidden(
                        "only the lead or the task's creator may cancel it".into(),
                    ));
                }
                if task.status == TaskStatus::Cancelled {
                    return Ok(ActionOutcome { task, already_finished: true });
                }
                TaskAction::Cancel { reason: parse_note("reason", reason)?, unstarted_only }
            }
            TaskRequest::ToBacklog | TaskRequest::FromBacklog
                if !privileged && task.creator_agent_id != caller.agent_id() =>
            {
                return Err(ServiceError::Forbidden(
                    "only the lead or the task's creator may move it to or from the backlog".into(),
                ));
            }
            TaskRequest::ToBacklog => TaskAction::ToBacklog,
            TaskRequest::FromBacklog => TaskAction::FromBacklog,
            TaskRequest::Claim => TaskAction::Claim { agent: caller.require_agent()? },
            // Not its own task: the operator or the lead hands on a gone agent's work.
            TaskRequest::Release if privileged && task.agent_id != caller.agent_id() => {
                return self.task_hand_back(caller, &task, HandBackTo::Pool).await;
            }
            TaskRequest::Reassign { agent_id, even_if_online } => {
                if !privileged {
                    return Err(ServiceError::Forbidden(
                        "only the operator or the lead may reassign a task".into(),
                    ));
                }
                let to = HandBackTo::Agent(agent_id);
                return self.task_hand_back_checked(caller, &task, to, !even_if_online).await;
            }
            TaskRequest::Release => TaskAction::Release { agent: caller.require_agent()? },
            TaskRequest::Accept => TaskAction::Accept { agent: caller.require_agent()? },
            TaskRequest::Reject { reason } => {
                TaskAction::Reject { agent: caller.require_agent()?, reason: parse_note("reason", reason)? }
            }
            TaskRequest::Start => TaskAction::Start { agent: caller.require_agent()? },
            // The operator or the lead pauses or resumes the holder's task, as the
            // reference lets a caller without `X-Agent-ID` do; the guard names the holder.
            TaskRequest::Pause | TaskRequest::Resume if privileged && task.agent_id != caller.agent_id() => {
                let Some(agent) = task.agent_id else {
                    return Err(ServiceError::Invalid(format!(
                        "cannot {} task: it is {} and held by no agent",
                        if pausing { "pause" } else { "resume" },
                        task.status
                    )));
                };
                if pausing { TaskAction::Pause { agent } } else { TaskAction::Resume { agent } }
            }
            TaskRequest::Pause => TaskAction::Pause { agent: caller.require_agent()? },
            TaskRequest::Resume => TaskAction::Resume { agent: caller.require_agent()? },
        };
        let outcome = self.task_apply(caller, id, &action).await?;
        if matches!(action, TaskAction::Cancel { .. }) && outcome.task.status == TaskStatus::Cancelled {
            self.steering_after_cancel(&outcome.task).await;
        }
        Ok(outcome)
    }

    /// An agent finishing its own task, the most frequent action, needs no read before
    /// its write: the guarded `UPDATE` checks that the task is the caller's and not
    /// finished. Anything else (no such task, another's task, already finished, a bad
    /// request) is left to the general path (`None`), which reads first and explains.
    async fn finish_own_task(
        &self,
        caller: Caller,
        id: TaskId,
        request: &TaskRequest,
    ) -> ServiceResult<Option<ActionOutcome>> {
        let (Some(agent), TaskRequest::Finish { status, output, failure_reason }) =
            (caller.agent_id(), request)
        else {
            return Ok(None);
        };
        let Ok(outcome) = finish_outcome(*status, output.clone(), failure_reason.clone()) else {
            return Ok(None);
        };
        let now = self.clock.now();
        let action = TaskAction::Finish { assignee: Some(agent), outcome };
        let change = action.change().with_lease(self.lease_until(now));
        match self
            .timed("task_apply", self.store.task_apply_with_waiters(id, &change, Some(agent), now))
            .await?
        {
            (Applied::Changed { before, after }, waiters) => {
                let mail_pending = waiters.as_ref().is_some_and(|waiters| waiters.assignee_mail_pending);
                self.task_changed_with(&after, before.agent_id, waiters).await;
                // Its work is done: whoever delegated it hears of mail it left pending.
                if mail_pending {
                    self.stopped_after_finish(agent).await;
                }
                self.activity.run_reported(after.status.as_str());
                Ok(Some(ActionOutcome { task: after, already_finished: false }))
            }
            (Applied::NotFound | Applied::Refused { .. }, _) => Ok(None),
        }
    }

    async fn task_apply(
        &self,
        caller: Caller,
        id: TaskId,
        action: &TaskAction,
    ) -> ServiceResult<ActionOutcome> {
        let now = self.clock.now();
        let change = action.change().with_lease(self.lease_until(now));
        match self
            .timed("task_apply", self.store.task_apply_with_waiters(id, &change, caller.agent_id(), now))
            .await?
        {
            (Applied::Changed { before, after }, waiters) => {
                self.task_changed_with(&after, before.agent_id, waiters).await;
                Ok(ActionOutcome { task: after, already_finished: false })
            }
            (Applied::NotFound, _) => Err(unknown_task(id)),
            (Applied::Refused { current }, _) => {
                // A finish or cancel that lost a race to another finish (or, for a
                // finish, to anything that took the task out of progress) is not an error.
                let lost_race_to_same_end = match action {
                    TaskAction::Finish { .. } => current.status != TaskStatus::InProgress,
                    TaskAction::Cancel { .. } => current.status == TaskStatus::Cancelled,
                    _ => false,
                };
                if lost_race_to_same_end {
                    return Ok(ActionOutcome { task: current, already_finished: true });
                }
                let refusal = self.explain_refusal(&change, &current).await?;
                Err(refusal_error(action, &refusal))
            }
        }
    }

    async fn task_progress(
        &self,
        caller: Caller,
        task: &Task,
        progress: String,
        privileged: bool,
    ) -> ServiceResult<ActionOutcome> {
        let progress = parse_note("progress", Some(progress))?.unwrap_or_default();
        if progress.trim().is_empty() {
            return Err(ServiceError::Invalid("progress must not be empty".into()));
        }
        if !privileged && task.agent_id != caller.agent_id() {
            return Err(ServiceError::Forbidden(
                "only the task's assignee or the lead may report progress".into(),
            ));
        }
        let assignee = if privileged { None } else { caller.agent_id() };
        let applied = self
            .store
            .task_set_progress(task.id, &progress, assignee, caller.agent_id(), self.clock.now())
            .await?;
        match applied {
            Applied::Changed { after, .. } => {
                self.tracker_evidence_record(&after).await;
                self.publish(Change::Task { task_id: task.id });
                Ok(ActionOutcome { task: after, already_finished: false })
            }
            Applied::NotFound => Err(unknown_task(task.id)),
            Applied::Refused { current } if current.status.is_finished() => Err(ServiceError::Conflict(
                format!("task is {}: a finished task takes no more progress", current.status),
            )),
            Applied::Refused { .. } => Err(ServiceError::Forbidden(
                "only the task's assignee or the lead may report progress".into(),
            )),
        }
    }

    /// Why a guard was false, read after the fact: the row explains most refusals;
    /// dependencies and capacity need a look at other rows.
    async fn explain_refusal(
        &self,
        change: &swarm_domain::task::TaskChange,
        current: &Task,
    ) -> ServiceResult<Refusal> {
        if let Some(refusal) = change.refusal_from_row(current) {
            return Ok(refusal);
        }
        if change.guard.dependencies_completed {
            let waiting_on = self.store.task_unfinished_dependencies(current.id).await?;
            if !waiting_on.is_empty() {
                return Ok(Refusal::DependenciesNotCompleted { waiting_on });
            }
        }
        if let Some(agent_id) = change.guard.capacity_of {
            let agent = self.agent_get(agent_id).await?;
            return Ok(Refusal::NoCapacity {
                in_progress: agent.capacity.current,
                max_tasks: agent.max_tasks,
            });
        }
        // The row changed between the guard and this read; report what we see now.
        Ok(Refusal::WrongStatus { current: current.status, allowed: change.from })
    }
}

fn finish_outcome(
    status: TaskStatus,
    output: Option<String>,
    failure_reason: Option<String>,
) -> ServiceResult<FinishOutcome> {
    match status {
        TaskStatus::Completed => Ok(FinishOutcome::Completed { output: parse_note("output", output)? }),
        TaskStatus::Failed => {
            Ok(FinishOutcome::Failed { failure_reason: parse_note("failureReason", failure_reason)? })
        }
        other => Err(ServiceError::Invalid(format!("status must be completed or failed, got {other}"))),
    }
}

fn refusal_error(action: &TaskAction, refusal: &Refusal) -> ServiceError {
    let message = format!("cannot {} task: {refusal}", action.name().replace('_', " "));
    match refusal {
        Refusal::NotAssignee | Refusal::NotOfferedToYou => ServiceError::Forbidden(message),
        // The reference answers 400 to a pause or resume of a task in the wrong state.
        Refusal::WrongStatus { .. }
            if matches!(action, TaskAction::Pause { .. } | TaskAction::Resume { .. }) =>
        {
            ServiceError::Invalid(message)
        }
        Refusal::WrongStatus { .. }
        | Refusal::DependenciesNotCompleted { .. }
        | Refusal::NoCapacity { .. }
        | Refusal::HolderNotGone => ServiceError::Conflict(message),
    }
}

pub(crate) fn unknown_task(id: TaskId) -> ServiceError {
    ServiceError::NotFound(format!("task {id} not found"))
}
