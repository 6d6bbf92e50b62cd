//! The event log, session logs and costs reported by runners, and stats.

use swarm_domain::{
    event::Event,
    id::{AgentId, TaskId},
    session::{NewSessionCost, NewSessionLogs, SessionCost, SessionLog},
    stats::Stats,
};
use swarm_store::{EventFilter, SessionCostFilter};

use crate::{Caller, Change, Service, ServiceError, ServiceResult};

pub const LIST_LIMIT_DEFAULT: i64 = 100;
pub const LIST_LIMIT_MAX: i64 = 1000;

fn bounded_limit(limit: Option<i64>) -> ServiceResult<i64> {
    let limit = limit.unwrap_or(LIST_LIMIT_DEFAULT);
    if (1..=LIST_LIMIT_MAX).contains(&limit) {
        Ok(limit)
    } else {
        Err(ServiceError::Invalid(format!("limit must be between 1 and {LIST_LIMIT_MAX}")))
    }
}

impl Service {
    pub async fn event_list(
        &self,
        agent_id: Option<AgentId>,
        limit: Option<i64>,
    ) -> ServiceResult<Vec<Event>> {
        let filter = EventFilter { agent_id, task_id: None, limit: bounded_limit(limit)? };
        Ok(self.store.event_list(&filter).await?)
    }

    /// Appends a run's output lines. An agent writes only for a task it holds or held
    /// (the operator for any): a log is evidence a person reads, so nobody else's run
    /// may be written into it.
    pub async fn session_logs_append(&self, caller: Caller, logs: NewSessionLogs) -> ServiceResult<u64> {
        if let Some(task_id) = logs.task_id {
            self.require_worked_on(caller, task_id, "write session logs for").await?;
        }
        let stored = self
            .timed("session_logs_append", self.store.session_logs_append(&logs, self.clock.now()))
            .await?;
        if let Some(task_id) = logs.task_id {
            self.publish(Change::SessionOutput { task_id });
        }
        Ok(stored)
    }

    /// The task, when `caller` may report on it: the operator always; an agent when it
    /// holds the task now or its history shows the agent on it (a runner's last lines
    /// may arrive after the task was handed on).
    async fn require_worked_on(&self, caller: Caller, task_id: TaskId, what: &str) -> ServiceResult<()> {
        let task = self.task_get(task_id).await?;
        let Caller::Agent(agent) = caller else {
            return Ok(());
        };
        if task.agent_id == Some(agent) {
            return Ok(());
        }
        let history = EventFilter { agent_id: Some(agent), task_id: Some(task_id), limit: 1 };
        if !self.store.event_list(&history).await?.is_empty() {
            return Ok(());
        }
        Err(ServiceError::Forbidden(format!(
            "agent {agent} never held task {task_id}: an agent may {what} its own tasks only"
        )))
    }

    pub async fn session_logs_for_task(&self, task_id: TaskId) -> ServiceResult<Vec<SessionLog>> {
        self.task_get(task_id).await?;
        Ok(self.store.session_logs_for_task(task_id).await?)
    }

    /// Records what a run cost. An agent records only its own runs (`agentId` is the
    /// caller) on tasks it holds or held; the operator records for anyone.
    pub async fn session_cost_record(
        &self,
        caller: Caller,
        cost: NewSessionCost,
    ) -> ServiceResult<SessionCost> {
        let cost = cost.validate()?;
        if let Caller::Agent(agent) = caller
            && agent != cost.agent_id
        {
            return Err(ServiceError::Forbidden(format!(
                "agent {agent} cannot record a cost for agent {}: agentId must be the caller",
                cost.agent_id
            )));
        }
        self.agent_get(cost.agent_id).await?;
        if let Some(task_id) = cost.task_id {
            self.require_worked_on(caller, task_id, "record costs for").await?;
        }
        let recorded = self.store.session_cost_insert(&cost, self.clock.now()).await?;
        self.activity.run_reported(if recorded.is_error { "session_error" } else { "session_ok" });
        if let Some(task_id) = cost.task_id {
            self.publish(Change::SessionOutput { task_id });
        }
        Ok(recorded)
    }

    /// A runner tells whether it could start the agent CLI for a run (ours: the
    /// reference's runners do not report it). Counted for `/metrics`, nothing stored: a
    /// run that did start reports its end through `session_cost_record`, and one that did
    /// not gives its task back with the reason as a progress note.
    pub async fn session_start_report(&self, caller: Caller, cli: &str, started: bool) -> ServiceResult<()> {
        let agent_id = caller.require_agent()?;
        if cli.is_empty() || cli.chars().count() > 200 {
            return Err(ServiceError::Invalid("cli must name the agent CLI in 1 to 200 characters".into()));
        }
        self.agent_get(agent_id).await?;
        self.activity.runner_spawned(cli, started);
        Ok(())
    }

    pub async fn session_cost_list(
        &self,
        task_id: Option<TaskId>,
        agent_id: Option<AgentId>,
        limit: Option<i64>,
    ) -> ServiceResult<Vec<SessionCost>> {
        let filter = SessionCostFilter { task_id, agent_id, limit: bounded_limit(limit)? };
        Ok(self.store.session_cost_list(&filter).await?)
    }

    pub async fn stats(&self) -> ServiceResult<Stats> {
        Ok(self.store.stats().await?)
    }
}
