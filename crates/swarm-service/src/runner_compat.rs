//! The newest reference runner's bookkeeping (issue 48): its credential status, a task's
//! provider session and context usage, its event log, its active sessions and an agent's
//! profile files. Each is kept as the runner sends it ([`RunnerRecord`]) and read back;
//! who may write: an agent for itself (its own tasks), the operator for any.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use swarm_domain::{
    agent::Agent,
    id::{AgentId, TaskId},
};
use swarm_store::{NewWorkerEvent, RecordArea, RunnerRecord, WorkerEvent, WorkerEventFilter};

use crate::{
    Caller, Change, InboxSummary, Service, ServiceError, ServiceResult, TaskDetail, agents::unknown_agent,
    tasks::unknown_task,
};

/// The profile files a runner keeps on the hub (`PUT /api/agents/:id/profile`).
pub const PROFILE_FILES: [&str; 6] =
    ["claudeMd", "soulMd", "identityMd", "toolsMd", "setupScript", "heartbeatMd"];
/// At most this many bytes per profile file.
pub const PROFILE_FILE_MAX: usize = 256 * 1024;
/// At most this many events in one batch (the reference's limit).
pub const EVENT_BATCH_MAX: usize = 500;
/// Rows a list of records or events answers at most.
pub const RECORDS_PAGE_MAX: i64 = 1000;
/// Context snapshots shown with a task, newest first.
pub const TASK_CONTEXT_SHOWN: i64 = 20;

/// A task's detail with what its runner reported: its provider session and context usage.
#[derive(Debug, Clone)]
pub struct TaskDetailReported {
    pub detail: TaskDetail,
    pub session: Option<Value>,
    pub context: Vec<Value>,
}

fn forbidden_unless_self(caller: Caller, agent: AgentId, verb: &str) -> ServiceResult<()> {
    match caller {
        Caller::Operator => Ok(()),
        Caller::Agent(id) if id == agent => Ok(()),
        Caller::Agent(_) => Err(ServiceError::Forbidden(format!(
            "only the operator or the agent itself may {verb} agent {agent}"
        ))),
    }
}

fn check_files(files: &BTreeMap<String, String>) -> ServiceResult<()> {
    for (name, content) in files {
        if !PROFILE_FILES.contains(&name.as_str()) {
            return Err(ServiceError::Invalid(format!("{name}: not a profile file")));
        }
        if content.len() > PROFILE_FILE_MAX {
            return Err(ServiceError::Invalid(format!("{name}: at most {PROFILE_FILE_MAX} bytes")));
        }
        if content.contains('\0') {
            return Err(ServiceError::Invalid(format!("{name}: no NUL characters")));
        }
    }
    Ok(())
}

impl Service {
    /// The service's clock, for stamps an adapter writes into what it keeps.
    pub fn now(&self) -> swarm_domain::time::Timestamp {
        self.clock.now()
    }

    async fn record(&self, area: RecordArea, owner: String, name: String, body: Value) -> ServiceResult<()> {
        let record = RunnerRecord { area, owner_id: owner, name, body, updated_at: self.clock.now() };
        Ok(self.store.record_put(&record).await?)
    }

    async fn known_agent(&self, id: AgentId) -> ServiceResult<Agent> {
        self.store.agent_get(id).await?.ok_or_else(|| unknown_agent(id))
    }

    /// Keep the credential readiness an agent's runner reported (`report`: the body as sent,
    /// validated by the adapter), merged over the last one: a `latest_model` report alone
    /// keeps readiness.
    pub async fn credential_status_report(
        &self,
        caller: Caller,
        agent: AgentId,
        report: Value,
    ) -> ServiceResult<Agent> {
        forbidden_unless_self(caller, agent, "report the credential status of")?;
        let found = self.known_agent(agent).await?;
        let owner = agent.to_string();
        let last = self.store.record_list(RecordArea::CredentialStatus, Some(&owner), 1).await?;
        let mut merged = last.into_iter().next().map(|record| record.body).unwrap_or_else(|| json!({}));
        if let (Some(merged), Some(report)) = (merged.as_object_mut(), report.as_object()) {
            for (key, value) in report {
                merged.insert(key.clone(), value.clone());
            }
        }
        self.record(RecordArea::CredentialStatus, owner, String::new(), merged).await?;
        self.publish(Change::Agent { agent_id: agent });
        Ok(found)
    }

    /// The reference's activity mark (`PUT /api/agents/:id/activity`, sent by its Claude
    /// Code hooks on every tool use): from the agent itself, a heartbeat like `POST /ping`
    /// (its leases run on); from the operator, nothing to mark, the agent must exist.
    pub async fn agent_activity(&self, caller: Caller, agent: AgentId) -> ServiceResult<Agent> {
        forbidden_unless_self(caller, agent, "mark the activity of")?;
        match caller {
            Caller::Agent(_) => self.heartbeat(agent, None, false).await?,
            Caller::Operator => {}
        }
        self.known_agent(agent).await
    }

    /// The last credential status of each agent that reported one, newest first; or one agent's.
    pub async fn credential_statuses(&self, agent: Option<AgentId>) -> ServiceResult<Vec<RunnerRecord>> {
        if let Some(agent) = agent {
            self.known_agent(agent).await?;
        }
        let owner = agent.map(|agent| agent.to_string());
        Ok(self.store.record_list(RecordArea::CredentialStatus, owner.as_deref(), RECORDS_PAGE_MAX).await?)
    }

    async fn require_task_runner(&self, caller: Caller, task: TaskId, verb: &str) -> ServiceResult<()> {
        let found = self.store.task_get(task).await?.ok_or_else(|| unknown_task(task))?;
        match caller {
            Caller::Operator => Ok(()),
            Caller::Agent(id) if found.agent_id == Some(id) => Ok(()),
            Caller::Agent(_) => Err(ServiceError::Forbidden(format!(
                "only the operator or the task's assignee may {verb} task {task}"
            ))),
        }
    }

    /// Keep the provider session a runner started for a task (merged over the last one).
    pub async fn task_session_report(
        &self,
        caller: Caller,
        task: TaskId,
        session: Value,
    ) -> ServiceResult<Value> {
        self.require_task_runner(caller, task, "report the session of").await?;
        let owner = task.to_string();
        let last = self.store.record_list(RecordArea::TaskSession, Some(&owner), 1).await?;
        let mut merged = last.into_iter().next().map(|record| record.body).unwrap_or_else(|| json!({}));
        if let (Some(merged), Some(session)) = (merged.as_object_mut(), session.as_object()) {
            for (key, value) in session {
                merged.insert(key.clone(), value.clone());
            }
        }
        self.record(RecordArea::TaskSession, owner, String::new(), merged.clone()).await?;
        self.publish(Change::Task { task_id: task });
        Ok(merged)
    }

    /// Keep one context-usage snapshot of a task's session.
    pub async fn task_context_report(
        &self,
        caller: Caller,
        task: TaskId,
        snapshot: Value,
    ) -> ServiceResult<()> {
        self.require_task_runner(caller, task, "report the context usage of").await?;
        let name = uuid::Uuid::now_v7().to_string();
        self.record(RecordArea::TaskContext, task.to_string(), name, snapshot).await?;
        self.publish(Change::Task { task_id: task });
        Ok(())
    }

    /// A task's detail with its reported session and latest context snapshots.
    pub async fn task_detail_reported(&self, task: TaskId) -> ServiceResult<TaskDetailReported> {
        let detail = self.task_detail(task).await?;
        let owner = task.to_string();
        let session = self.store.record_list(RecordArea::TaskSession, Some(&owner), 1).await?;
        let context =
            self.store.record_list(RecordArea::TaskContext, Some(&owner), TASK_CONTEXT_SHOWN).await?;
        Ok(TaskDetailReported {
            detail,
            session: session.into_iter().next().map(|record| record.body),
            context: context.into_iter().map(|record| record.body).collect(),
        })
    }

    /// Append a runner's events to the reference's event log. An agent's events are its
    /// own: one naming no agent is stamped with the caller, one naming another is refused.
    pub async fn worker_events_add(
        &self,
        caller: Caller,
        mut events: Vec<NewWorkerEvent>,
    ) -> ServiceResult<u64> {
        if events.is_empty() || events.len() > EVENT_BATCH_MAX {
            return Err(ServiceError::Invalid(format!("events: from 1 to {EVENT_BATCH_MAX} events")));
        }
        if let Caller::Agent(id) = caller {
            let me = id.to_string();
            for event in &mut events {
                match &event.agent_id {
                    None => event.agent_id = Some(me.clone()),
                    Some(named) if *named == me => {}
                    Some(named) => {
                        return Err(ServiceError::Forbidden(format!(
                            "agent {me} may not log events for agent {named}"
                        )));
                    }
                }
            }
        }
        Ok(self.store.worker_events_append(&events, self.clock.now()).await?)
    }

    pub async fn worker_events_query(
        &self,
        mut filter: WorkerEventFilter,
    ) -> ServiceResult<Vec<WorkerEvent>> {
        if !(1..=RECORDS_PAGE_MAX).contains(&filter.limit) {
            return Err(ServiceError::Invalid(format!("limit: from 1 to {RECORDS_PAGE_MAX}")));
        }
        filter.limit = filter.limit.min(RECORDS_PAGE_MAX);
        Ok(self.store.worker_event_list(&filter).await?)
    }

    /// Record that an agent's runner started a session (for a task, named by `key`).
    pub async fn active_session_start(
        &self,
        caller: Caller,
        agent: AgentId,
        key: String,
        session: Value,
    ) -> ServiceResult<RunnerRecord> {
        forbidden_unless_self(caller, agent, "record the sessions of")?;
        self.known_agent(agent).await?;
        let record = RunnerRecord {
            area: RecordArea::ActiveSession,
            owner_id: agent.to_string(),
            name: key,
            body: session,
            updated_at: self.clock.now(),
        };
        self.store.record_put(&record).await?;
        Ok(record)
    }

    /// The active sessions of one agent, or of all; newest first.
    pub async fn active_sessions(&self, agent: Option<AgentId>) -> ServiceResult<Vec<RunnerRecord>> {
        let owner = agent.map(|agent| agent.to_string());
        Ok(self.store.record_list(RecordArea::ActiveSession, owner.as_deref(), RECORDS_PAGE_MAX).await?)
    }

    /// The caller's session for `key` (the operator's: anyone's).
    async fn active_session_find(&self, caller: Caller, key: &str) -> ServiceResult<Option<RunnerRecord>> {
        let sessions = self.active_sessions(caller.agent_id()).await?;
        Ok(sessions.into_iter().find(|record| record.name == key))
    }

    /// End the session for `key`; whether there was one.
    pub async fn active_session_end(&self, caller: Caller, key: &str) -> ServiceResult<bool> {
        let Some(found) = self.active_session_find(caller, key).await? else { return Ok(false) };
        Ok(self.store.record_delete(RecordArea::ActiveSession, &found.owner_id, Some(key)).await? > 0)
    }

    /// Mark the session for `key` alive, with the provider's session id when given;
    /// whether there was one.
    pub async fn active_session_touch(
        &self,
        caller: Caller,
        key: &str,
        provider_session: Option<String>,
    ) -> ServiceResult<bool> {
        let Some(mut found) = self.active_session_find(caller, key).await? else { return Ok(false) };
        if let (Some(id), Some(body)) = (provider_session, found.body.as_object_mut()) {
            body.insert("providerSessionId".into(), Value::String(id));
        }
        found.updated_at = self.clock.now();
        self.store.record_put(&found).await?;
        Ok(true)
    }

    /// Forget every session of an agent (its runner starting afresh); how many.
    pub async fn active_sessions_clear(&self, caller: Caller, agent: AgentId) -> ServiceResult<u64> {
        forbidden_unless_self(caller, agent, "clear the sessions of")?;
        Ok(self.store.record_delete(RecordArea::ActiveSession, &agent.to_string(), None).await?)
    }

    /// Keep an agent's profile files (`files`: name → content, names from [`PROFILE_FILES`]).
    pub async fn profile_files_set(
        &self,
        caller: Caller,
        agent: AgentId,
        files: BTreeMap<String, String>,
    ) -> ServiceResult<Agent> {
        if let Some(by) = self.caller_agent(caller).await?
            && by.id != agent
            && !by.is_lead
        {
            return Err(ServiceError::Forbidden(format!(
                "only the agent itself or the lead may change the profile of agent {agent}"
            )));
        }
        check_files(&files)?;
        let found = self.known_agent(agent).await?;
        for (name, content) in files {
            self.record(RecordArea::ProfileFile, agent.to_string(), name, Value::String(content)).await?;
        }
        self.publish(Change::Agent { agent_id: agent });
        Ok(found)
    }

    /// `PUT /api/agents/:id/profile`: the profile fields (`update`) and the files, checked
    /// before either is written.
    pub async fn agent_profile_with_files(
        &self,
        caller: Caller,
        agent: AgentId,
        update: Option<swarm_domain::agent::ProfileUpdate>,
        files: BTreeMap<String, String>,
    ) -> ServiceResult<Agent> {
        check_files(&files)?;
        let Some(update) = update else { return self.profile_files_set(caller, agent, files).await };
        let updated = self.agent_update_profile(caller, agent, update).await?;
        if files.is_empty() {
            return Ok(updated);
        }
        self.profile_files_set(caller, agent, files).await?;
        Ok(updated)
    }

    /// An agent's profile files, by name.
    pub async fn profile_files(&self, agent: AgentId) -> ServiceResult<BTreeMap<String, String>> {
        let owner = agent.to_string();
        let records = self.store.record_list(RecordArea::ProfileFile, Some(&owner), RECORDS_PAGE_MAX).await?;
        Ok(records
            .into_iter()
            .filter_map(|record| match record.body {
                Value::String(content) => Some((record.name, content)),
                _ => None,
            })
            .collect())
    }

    /// `/me` with the caller's profile files.
    pub async fn me_with_files(
        &self,
        caller: Caller,
        include_inbox: bool,
    ) -> ServiceResult<(Agent, Option<InboxSummary>, BTreeMap<String, String>)> {
        let (agent, inbox) = self.me(caller, include_inbox).await?;
        let files = self.profile_files(agent.id).await?;
        Ok((agent, inbox, files))
    }
}
