//! Registration, profiles, heartbeats: the agent side of the service.

use swarm_domain::agent::Registration;
use swarm_domain::agent::parse_status_reason;
use swarm_domain::poll::Wake;
use swarm_domain::{
    agent::{Agent, NewAgent, ProfileUpdate, parse_name},
    id::{AgentId, RunnerId},
    task::Task,
};
use swarm_store::{Applied, TaskFilter};

use crate::{Caller, Change, Service, ServiceError, ServiceResult};

/// Tasks listed with an agent (`?include=tasks`): its most recent ones.
const AGENT_TASKS_LIMIT: i64 = 100;

#[derive(Debug, Clone, Default)]
pub struct RegisterInput {
    pub name: String,
    pub is_lead: bool,
    pub description: Option<String>,
    pub role: Option<String>,
    pub capabilities: Option<Vec<String>>,
    pub max_tasks: Option<i64>,
}

/// The counts of `GET /me?include=inbox`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboxSummary {
    /// The reference's unread channel message count; not kept (mentions are).
    pub unread_count: i64,
    /// Unread mentions across channels.
    pub mentions_count: i64,
    pub mail: swarm_domain::mail::MailCounts,
    pub offered_tasks_count: i64,
    pub pool_tasks_count: i64,
    pub in_progress_count: i64,
}

impl Service {
    /// `id` is the caller's `X-Agent-ID`, or a new id when none was sent.
    pub async fn agent_register(
        &self,
        id: Option<AgentId>,
        input: RegisterInput,
    ) -> ServiceResult<Registration> {
        let new_agent = NewAgent::parse(
            id.unwrap_or_else(AgentId::new_v7),
            &input.name,
            input.is_lead,
            input.description,
            input.role,
            input.capabilities,
            input.max_tasks,
        )?;
        let registration = self.store.agent_register(&new_agent, self.clock.now()).await?;
        self.agent_changed(new_agent.id).await;
        Ok(registration)
    }

    pub async fn agent_get(&self, id: AgentId) -> ServiceResult<Agent> {
        self.store.agent_get(id).await?.ok_or_else(|| unknown_agent(id))
    }

    pub async fn agent_list(&self) -> ServiceResult<Vec<Agent>> {
        Ok(self.store.agent_list().await?)
    }

    /// The agent's most recent tasks, newest first.
    pub async fn agent_tasks(&self, id: AgentId) -> ServiceResult<Vec<Task>> {
        let filter = TaskFilter { agent_id: Some(id), limit: AGENT_TASKS_LIMIT, ..TaskFilter::default() };
        Ok(self.store.task_list(&filter).await?.0)
    }

    pub async fn agent_rename(&self, caller: Caller, id: AgentId, name: &str) -> ServiceResult<Agent> {
        let name = parse_name(name)?;
        self.require_self_or_lead(caller, id, "rename").await?;
        let agent =
            self.store.agent_rename(id, &name, self.clock.now()).await?.ok_or_else(|| unknown_agent(id))?;
        self.publish(Change::Agent { agent_id: id });
        Ok(agent)
    }

    pub async fn agent_update_profile(
        &self,
        caller: Caller,
        id: AgentId,
        update: ProfileUpdate,
    ) -> ServiceResult<Agent> {
        self.require_self_or_lead(caller, id, "change the profile of").await?;
        let agent = self
            .store
            .agent_update_profile(id, &update, self.clock.now())
            .await?
            .ok_or_else(|| unknown_agent(id))?;
        self.publish(Change::Agent { agent_id: id });
        Ok(agent)
    }

    /// The caller and, when asked, what waits for it.
    pub async fn me(
        &self,
        caller: Caller,
        include_inbox: bool,
    ) -> ServiceResult<(Agent, Option<InboxSummary>)> {
        let id = caller.require_agent()?;
        let agent = self.agent_get(id).await?;
        if !include_inbox {
            return Ok((agent, None));
        }
        let counts = self.store.agent_work_counts(id).await?;
        let mentions = self.store.chat_unread_mentions(id).await?;
        let inbox = InboxSummary {
            mentions_count: mentions.iter().map(|(_, count)| count).sum(),
            mail: self.store.mail_counts(id).await?,
            offered_tasks_count: counts.offered_to_me,
            pool_tasks_count: counts.pool,
            in_progress_count: counts.in_progress,
            ..InboxSummary::default()
        };
        Ok((agent, Some(inbox)))
    }

    /// A heartbeat: an `offline` agent becomes `idle`, and the leases of everything the
    /// agent holds run for another lease period.
    /// `runner`: the runner process pinging (`X-Runner-ID`), whose lead-side claims are
    /// extended (another runner's of the same agent are not).
    pub async fn agent_ping(&self, caller: Caller, runner: Option<RunnerId>) -> ServiceResult<()> {
        let id = caller.require_agent()?;
        self.heartbeat(id, runner, false).await
    }

    /// Why the agent stopped taking work (its runner says, e.g. after its agent CLI
    /// failed at once again and again), or `None` to clear it. The agent itself, the
    /// lead or the operator may set it; a poll that hands the agent work clears it.
    pub async fn agent_set_status_reason(
        &self,
        caller: Caller,
        id: AgentId,
        reason: Option<&str>,
    ) -> ServiceResult<Agent> {
        let reason = parse_status_reason(reason)?;
        self.require_self_or_lead(caller, id, "set the status reason of").await?;
        let agent = match self.store.agent_set_status_reason(id, reason.as_deref(), self.clock.now()).await? {
            Applied::Changed { after, .. } => after,
            // Already so: setting it again is not an error.
            Applied::Refused { current } => return Ok(current),
            Applied::NotFound => return Err(unknown_agent(id)),
        };
        self.publish(Change::Agent { agent_id: id });
        Ok(agent)
    }

    /// A request of the agent's own live session reached the hub (MCP over HTTP or
    /// stdio): an agent driven by a person, with no runner polling for it, is present as
    /// long as its session talks to the hub within the lease. Written at most every
    /// quarter lease period per process (remembered here: losing it costs one write).
    pub async fn agent_seen(&self, agent: &Agent) {
        // On the service's clock, like the `last_seen_at` it keeps fresh.
        let now = self.clock.unix_millis();
        let every = self.lease.period_millis() / 4;
        let due = {
            let mut seen = self.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let due = agent.status == swarm_domain::agent::AgentStatus::Offline
                || seen.get(&agent.id).is_none_or(|last| now.saturating_sub(*last) >= every);
            if due {
                seen.insert(agent.id, now);
            }
            due
        };
        if due
            && let Err(error) = self
                .heartbeat(agent.id, None, agent.status == swarm_domain::agent::AgentStatus::Offline)
                .await
        {
            tracing::warn!(%error, agent = %agent.id, "could not record an MCP session's sign of life");
        }
    }

    /// Capacity or presence may have changed: the agent's parked polls re-check.
    async fn agent_changed(&self, id: AgentId) {
        self.publish(Change::Agent { agent_id: id });
        self.wake(&[Wake::Agent(id)]).await;
    }

    pub async fn agent_close(&self, caller: Caller) -> ServiceResult<Agent> {
        let id = caller.require_agent()?;
        let agent = self.store.agent_close(id, self.clock.now()).await?.ok_or_else(|| unknown_agent(id))?;
        self.heartbeats.forget(id);
        self.publish(Change::Agent { agent_id: id });
        Ok(agent)
    }

    /// The registered agent behind a caller; an unknown id is told how to register.
    pub(crate) async fn caller_agent(&self, caller: Caller) -> ServiceResult<Option<Agent>> {
        match caller {
            Caller::Operator => Ok(None),
            Caller::Agent(id) => self.store.agent_get(id).await?.map(Some).ok_or_else(|| {
                ServiceError::NotFound(format!(
                    "agent {id} (X-Agent-ID) is not registered: register it with POST /api/agents first"
                ))
            }),
        }
    }

    async fn require_self_or_lead(&self, caller: Caller, target: AgentId, verb: &str) -> ServiceResult<()> {
        match self.caller_agent(caller).await? {
            None => Ok(()),
            Some(agent) if agent.id == target || agent.is_lead => Ok(()),
            Some(_) => Err(ServiceError::Forbidden(format!(
                "only the agent itself or the lead may {verb} agent {target}"
            ))),
        }
    }
}

pub(crate) fn unknown_agent(id: AgentId) -> ServiceError {
    ServiceError::NotFound(format!("agent {id} not found"))
}
