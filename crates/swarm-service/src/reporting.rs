//! Reporting on a task (`store-progress`): a progress note, a finish, or both, in the
//! order an agent means them.

use swarm_domain::{
    id::TaskId,
    task::{Task, TaskStatus},
};

use crate::{ActionOutcome, Caller, Service, ServiceError, ServiceResult, TaskRequest};

/// How a task ends when its report finishes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    pub status: TaskStatus,
    pub output: Option<String>,
    pub failure_reason: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskReport {
    pub progress: Option<String>,
    pub finish: Option<Finish>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportOutcome {
    pub task: Task,
    /// The report found the caller's task `pending` and started it first.
    pub started: bool,
    /// A finish that found the task already finished: nothing changed.
    pub already_finished: bool,
}

impl Service {
    /// Record progress and/or finish a task, as its assignee or the lead.
    ///
    /// An assignee reporting on its own `pending` task has evidently begun it, so the
    /// task is started first (a guarded `start`, which still needs a free slot and
    /// completed dependencies). Without that, an agent that accepted an offer over MCP
    /// could not finish it until a poll had started it.
    pub async fn task_report(
        &self,
        caller: Caller,
        id: TaskId,
        report: TaskReport,
    ) -> ServiceResult<ReportOutcome> {
        if report.progress.is_none() && report.finish.is_none() {
            return Err(ServiceError::Invalid(
                "give progress, or status completed or failed (or both)".into(),
            ));
        }
        let task = self.task_get(id).await?;
        let is_assignee = caller.agent_id().is_some() && task.agent_id == caller.agent_id();
        let mut started = false;
        if is_assignee && task.status == TaskStatus::Pending {
            self.task_act(caller, id, TaskRequest::Start).await?;
            started = true;
        }
        // A repeated finish is answered as already finished; its note is not an error.
        let skip_progress = task.status.is_finished() && report.finish.is_some();
        let mut outcome = ActionOutcome { task, already_finished: false };
        if let Some(progress) = report.progress.filter(|_| !skip_progress) {
            outcome = self.task_act(caller, id, TaskRequest::Progress { progress }).await?;
        }
        if let Some(finish) = report.finish {
            let request = TaskRequest::Finish {
                status: finish.status,
                output: finish.output,
                failure_reason: finish.failure_reason,
            };
            outcome = self.task_act(caller, id, request).await?;
        }
        Ok(ReportOutcome { task: outcome.task, started, already_finished: outcome.already_finished })
    }
}
