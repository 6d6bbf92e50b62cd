//! Triggers: managing them, firing them (by the scheduler, a webhook or by hand), the
//! agent sessions of persistent triggers, and the tasks a trigger session awaits.

use std::time::Duration;

use swarm_domain::{
    id::{AgentId, TaskId, TriggerId},
    task::{NewTask, Task, TaskDraft},
    trigger::{
        Firing, PAYLOAD_MAX_CHARS, TaskAwait, TriggerDef, TriggerDraft, TriggerSession, TriggerTarget,
        TriggerType, parse_name, parse_session_id, parse_session_key, sender_identifier,
    },
};
use swarm_store::{DeliveryMark, FireGuard, FireOutcome, NewTaskAwait, TaskFilter};

use crate::{Background, Caller, Service, ServiceError, ServiceResult};

/// How often `swarm serve` looks for due triggers.
pub const SCHEDULER_TICK: Duration = Duration::from_secs(1);
/// The most an agent's payload may be, so that its fence stays whole inside
/// `{{payload}}`'s own limit.
const FENCED_PAYLOAD_MAX_CHARS: usize = PAYLOAD_MAX_CHARS - 1_000;
/// Due triggers fired per tick, at most.
const DUE_BATCH: i64 = 100;

/// A manual firing.
#[derive(Debug, Clone, Default)]
pub struct FireRequest {
    pub payload: Option<String>,
    pub session_key: Option<String>,
}

impl Service {
    pub async fn trigger_create(&self, caller: Caller, draft: TriggerDraft) -> ServiceResult<TriggerDef> {
        draft.check_new_secret()?;
        let creator = self.caller_agent(caller).await?;
        let trigger =
            draft.parse(TriggerId::new_v7(), creator.as_ref().map(|agent| agent.id), self.clock.now())?;
        let reaches_lead = self.target_reaches_lead(&trigger).await?;
        require_privilege_for(creator.as_ref(), &trigger, reaches_lead)?;
        Ok(self.open_trigger(self.store.trigger_create(&self.seal_trigger(trigger)).await?))
    }

    pub async fn trigger_get(&self, name: &str) -> ServiceResult<TriggerDef> {
        // Not a slug: no trigger has that name, and the database need not be asked.
        let Ok(slug) = parse_name(name) else { return Err(unknown_trigger(name)) };
        let trigger = self.store.trigger_get(&slug).await?.ok_or_else(|| unknown_trigger(name))?;
        Ok(self.open_trigger(trigger))
    }

    /// A trigger by name, or by id (the reference's schedules are addressed by id).
    pub async fn trigger_find(&self, name_or_id: &str) -> ServiceResult<TriggerDef> {
        if let Ok(id) = TriggerId::parse(name_or_id)
            && let Some(trigger) = self.store.trigger_get_by_id(id).await?
        {
            return Ok(self.open_trigger(trigger));
        }
        self.trigger_get(name_or_id).await
    }

    /// Every trigger by name, of the given types (all when empty).
    pub async fn trigger_list(&self, kinds: &[TriggerType]) -> ServiceResult<Vec<TriggerDef>> {
        let mut triggers = self.store.trigger_list().await?;
        triggers.retain(|trigger| kinds.is_empty() || kinds.contains(&trigger.kind));
        Ok(triggers.into_iter().map(|trigger| self.open_trigger(trigger)).collect())
    }

    /// Change the fields `changes` sets; the schedule's next slot is recomputed from now
    /// when the timing or `enabled` changed.
    pub async fn trigger_update(
        &self,
        caller: Caller,
        name_or_id: &str,
        changes: TriggerDraft,
    ) -> ServiceResult<TriggerDef> {
        changes.check_new_secret()?;
        let current = self.trigger_find(name_or_id).await?;
        self.require_trigger_owner(caller, &current, "change").await?;
        // A trigger's name and type are what it is: giving other ones is a mistake to say,
        // not a change to ignore.
        if !changes.kind.trim().is_empty() && changes.kind.trim() != current.kind.as_str() {
            return Err(ServiceError::Invalid(format!(
                "type: {} is a {} trigger and stays one; delete it and create another to change its type",
                current.name,
                current.kind.as_str()
            )));
        }
        if !changes.name.trim().is_empty() && changes.name.trim() != current.name {
            return Err(ServiceError::Invalid(format!(
                "name: a trigger keeps its name ({}); delete it and create another to rename it",
                current.name
            )));
        }
        let now = self.clock.now();
        let mut updated = changes.apply_to(&current).parse(current.id, current.created_by, now)?;
        let reaches_lead = self.target_reaches_lead(&updated).await?;
        require_privilege_for(self.caller_agent(caller).await?.as_ref(), &updated, reaches_lead)?;
        let timing_same = updated.schedule == current.schedule
            && updated.timezone == current.timezone
            && updated.interval_ms == current.interval_ms
            && updated.run_at == current.run_at
            && updated.enabled == current.enabled;
        updated.created_at = current.created_at;
        updated.run_count = current.run_count;
        updated.last_run_at = current.last_run_at;
        updated.next_run_at = match (timing_same, updated.kind) {
            _ if !updated.enabled => None,
            (true, _) => current.next_run_at,
            (false, TriggerType::Once) => {
                updated.next_run_after(now).or(updated.run_at.filter(|_| current.run_count == 0))
            }
            (false, _) => updated.next_run_after(now),
        };
        let stored = self.store.trigger_update(&self.seal_trigger(updated)).await?;
        stored.map(|trigger| self.open_trigger(trigger)).ok_or_else(|| unknown_trigger(name_or_id))
    }

    pub async fn trigger_delete(&self, caller: Caller, name_or_id: &str) -> ServiceResult<TriggerDef> {
        let current = self.trigger_find(name_or_id).await?;
        self.require_trigger_owner(caller, &current, "delete").await?;
        if !self.store.trigger_delete(current.id).await? {
            return Err(unknown_trigger(name_or_id));
        }
        Ok(current)
    }

    /// Fire a trigger by hand (`swarm trigger fire`, `run-schedule-now`): works on any
    /// type, enabled or not, and leaves the schedule alone. For the operator, the lead,
    /// the trigger's creator or its target; the task's creator is the agent that fired
    /// it, and the payload an agent gives is fenced as outside text (it may carry what
    /// an injected prompt wrote).
    pub async fn trigger_fire(
        &self,
        caller: Caller,
        name_or_id: &str,
        request: FireRequest,
    ) -> ServiceResult<Task> {
        let trigger = self.trigger_find(name_or_id).await?;
        let firer = self.caller_agent(caller).await?;
        if let Some(agent) = &firer
            && !agent.is_lead
            && trigger.created_by != Some(agent.id)
            && trigger.target != TriggerTarget::Agent(agent.id)
        {
            return Err(ServiceError::Forbidden(format!(
                "only the operator, the lead, the creator of trigger {} or its target may fire it; \
                 ask the lead, or create a trigger of your own",
                trigger.name
            )));
        }
        let session_key = request.session_key.as_deref().map(parse_session_key).transpose()?;
        let payload = request.payload.unwrap_or_default();
        let max = if firer.is_some() { FENCED_PAYLOAD_MAX_CHARS } else { PAYLOAD_MAX_CHARS };
        if payload.chars().count() > max {
            return Err(ServiceError::Invalid(format!("payload must be at most {max} characters")));
        }
        let (sender, payload) = match &firer {
            None => ("operator".to_string(), payload),
            Some(agent) => {
                // `{{sender}}` is an identifier: the agent's name when it is one, else its id.
                let sender = sender_identifier(&agent.name)
                    .map(str::to_string)
                    .unwrap_or_else(|| agent.id.to_string());
                let payload = if payload.trim().is_empty() {
                    payload
                } else {
                    swarm_domain::untrusted::fence("agent", Some(&sender), &payload)
                };
                (sender, payload)
            }
        };
        let firing = Firing {
            payload,
            sender: Some(sender),
            channel: "manual".into(),
            session_key,
            fired_by: firer.as_ref().map(|agent| agent.id),
            ..Firing::default()
        };
        match self.fire(&trigger, &firing, FireGuard::Event { require_enabled: false }, None).await? {
            FireOutcome::Fired(task) => Ok(*task),
            _ => Err(unknown_trigger(name_or_id)),
        }
    }

    /// One pass of the scheduler: every enabled trigger whose slot has come fires once,
    /// and its next slot is the first after now (missed slots collapse into this one).
    /// Returns the tasks this process created; a slot another hub took is skipped.
    pub async fn scheduler_tick(&self) -> ServiceResult<Vec<Task>> {
        let now = self.clock.now();
        let mut fired = Vec::new();
        for trigger in self.store.triggers_due(now, DUE_BATCH).await? {
            let Some(expected) = trigger.next_run_at else { continue };
            let next = trigger.next_run_after(now);
            let firing =
                Firing { channel: "schedule".into(), sender: Some("scheduler".into()), ..Firing::default() };
            match self.fire(&trigger, &firing, FireGuard::Slot { expected, next }, None).await {
                Ok(FireOutcome::Fired(task)) => {
                    tracing::info!(trigger = %trigger.name, task = %task.id, slot = %expected, "trigger fired");
                    fired.push(*task);
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::error!(trigger = %trigger.name, %error, "could not fire a due trigger")
                }
            }
        }
        Ok(fired)
    }

    /// Run the scheduler every `tick` until the returned handle is dropped. The first
    /// pass runs at once, so slots missed while the hub was down fire at start-up.
    pub fn start_scheduler(&self, tick: Duration) -> Background {
        let service = self.clone();
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(tick);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let pass = service.scheduler_tick().await;
                service.activity.scheduler_passed();
                if let Err(error) = pass {
                    tracing::error!(%error, "the scheduler's pass failed; retrying at the next tick");
                }
            }
        });
        Background { tasks: vec![task] }
    }

    /// Turn one event into the trigger's task, in the transaction that claims the
    /// firing, then wake whoever may take it.
    pub(crate) async fn fire(
        &self,
        trigger: &TriggerDef,
        firing: &Firing,
        guard: FireGuard,
        delivery: Option<&DeliveryMark>,
    ) -> ServiceResult<FireOutcome> {
        let new_task = self.firing_task(trigger, firing).await?;
        let outcome = self
            .store
            .trigger_fire(trigger.id, guard, delivery, &new_task, self.clock.now(), self.clock.now())
            .await?;
        if let FireOutcome::Fired(task) = &outcome {
            self.task_changed(task, None).await;
        }
        Ok(outcome)
    }

    async fn firing_task(&self, trigger: &TriggerDef, firing: &Firing) -> ServiceResult<NewTask> {
        let agent_id = match trigger.target {
            TriggerTarget::Pool => None,
            TriggerTarget::Agent(id) if self.reaches_lead_sideways(trigger, id).await? => {
                tracing::warn!(
                    trigger = %trigger.name,
                    target = %id,
                    "a worker's trigger aims at an agent that is now the lead: its task goes to the pool"
                );
                None
            }
            TriggerTarget::Agent(id) => Some(id),
            // The lead of the moment; without one the work goes to the pool, not nowhere.
            TriggerTarget::Lead => {
                self.store.agent_list().await?.into_iter().find(|agent| agent.is_lead).map(|agent| agent.id)
            }
        };
        let mut origin = firing.origin.clone();
        origin.trigger_name = Some(trigger.name.clone());
        let draft = TaskDraft {
            task: trigger.render(firing),
            agent_id,
            source: Some(trigger.task_source().into()),
            task_type: trigger.task_type.clone(),
            tags: trigger.tags.clone(),
            priority: Some(i64::from(trigger.priority)),
            origin,
            ..TaskDraft::default()
        };
        let mut new_task = NewTask::parse(draft, firing.fired_by.or(trigger.created_by))?;
        new_task.origin.session_key = Some(trigger.session_key(firing, new_task.id));
        Ok(new_task)
    }

    /// Whether the trigger's task would go to a lead: the word `lead`, or the id of an
    /// agent that is the lead. The target is resolved before any privilege is checked,
    /// so naming the lead by its id is naming the lead. An unknown agent is refused.
    async fn target_reaches_lead(&self, trigger: &TriggerDef) -> ServiceResult<bool> {
        match trigger.target {
            TriggerTarget::Pool => Ok(false),
            TriggerTarget::Lead => Ok(true),
            TriggerTarget::Agent(id) => match self.store.agent_get(id).await? {
                Some(agent) => Ok(agent.is_lead),
                None => Err(ServiceError::Invalid(format!(
                    "target: agent {id} does not exist (give pool, lead, or a registered agent's id)"
                ))),
            },
        }
    }

    /// At fire time: the trigger names agent `target` by id, `target` is a lead now, and
    /// the trigger is a worker's (its creator is not a lead now, or is gone). Such a task
    /// is not delivered to the lead: an agent promoted after the trigger was made would
    /// otherwise receive a worker's outside text. Triggers aimed at the word `lead` are
    /// checked when they are created or changed (only the operator or the lead may).
    async fn reaches_lead_sideways(&self, trigger: &TriggerDef, target: AgentId) -> ServiceResult<bool> {
        let Some(creator) = trigger.created_by else { return Ok(false) };
        if !self.store.agent_get(target).await?.is_some_and(|agent| agent.is_lead) {
            return Ok(false);
        }
        Ok(!self.store.agent_get(creator).await?.is_some_and(|agent| agent.is_lead))
    }

    /// Changes are for the trigger's creator, the lead and the operator.
    async fn require_trigger_owner(
        &self,
        caller: Caller,
        trigger: &TriggerDef,
        verb: &str,
    ) -> ServiceResult<()> {
        match self.caller_agent(caller).await? {
            None => Ok(()),
            Some(agent) if agent.is_lead || trigger.created_by == Some(agent.id) => Ok(()),
            Some(_) => Err(ServiceError::Forbidden(format!(
                "only the creator of trigger {} or the lead may {verb} it",
                trigger.name
            ))),
        }
    }

    // ----- sessions of persistent triggers -----

    pub async fn trigger_session_get(&self, name: &str, key: &str) -> ServiceResult<TriggerSession> {
        let key = parse_session_key(key)?;
        let trigger = self.trigger_get(name).await?;
        self.store.trigger_session_get(&trigger.name, &key).await?.ok_or_else(|| {
            ServiceError::NotFound(format!("no session recorded for trigger {name:?}, key {key:?}"))
        })
    }

    /// Record the agent session a run of this conversation used, so the next firing
    /// with the same key resumes it.
    /// The session's owner sets it: the operator, the lead, the trigger's creator or
    /// target, or an agent that worked a task of that conversation. Anyone else could
    /// make the next firing resume a session of their choosing.
    pub async fn trigger_session_set(
        &self,
        caller: Caller,
        name: &str,
        key: &str,
        session_id: &str,
    ) -> ServiceResult<TriggerSession> {
        let key = parse_session_key(key)?;
        let session_id = parse_session_id(session_id)?;
        let trigger = self.trigger_get(name).await?;
        if let Some(agent) = self.caller_agent(caller).await?
            && !agent.is_lead
            && trigger.created_by != Some(agent.id)
            && trigger.target != TriggerTarget::Agent(agent.id)
            && !self.worked_conversation(agent.id, &trigger.name, &key).await?
        {
            return Err(ServiceError::Forbidden(format!(
                "only an agent that worked conversation {key:?} of trigger {}, its creator or the lead \
                 may record its session",
                trigger.name
            )));
        }
        Ok(self.store.trigger_session_set(&trigger.name, &key, &session_id, self.clock.now()).await?)
    }

    /// Whether `agent` holds or held one of the newest tasks of this conversation.
    async fn worked_conversation(&self, agent: AgentId, trigger: &str, key: &str) -> ServiceResult<bool> {
        let filter = TaskFilter { agent_id: Some(agent), limit: 100, ..TaskFilter::default() };
        let (tasks, _) = self.store.task_list(&filter).await?;
        Ok(tasks.iter().any(|task| {
            task.origin.trigger_name.as_deref() == Some(trigger)
                && task.origin.session_key.as_deref() == Some(key)
        }))
    }

    // ----- tasks awaited by trigger sessions -----

    /// The trigger session the caller is in, named by its environment: the task its run
    /// is about (`TASK_ID`, which the runner gives a trigger task's run; `X-Task-ID` over
    /// HTTP MCP). A task the caller creates now is awaited by that session. `None` when
    /// no session is named, or the task named is not a trigger's task of the caller (a
    /// stale `TASK_ID` is no reason to refuse the new task).
    pub(crate) async fn awaiting_session(
        &self,
        caller: Caller,
        session_task: Option<TaskId>,
    ) -> ServiceResult<Option<NewTaskAwait>> {
        let (Some(agent), Some(task_id)) = (caller.agent_id(), session_task) else { return Ok(None) };
        let Some(task) = self.store.task_get(task_id).await? else { return Ok(None) };
        if task.agent_id != Some(agent) {
            return Ok(None);
        }
        // Any status: a session resumed with a result names its (finished) trigger task.
        let Some(trigger_name) = task.origin.trigger_name.clone() else { return Ok(None) };
        let session_key = task.origin.session_key.clone().unwrap_or_else(|| format!("task:{}", task.id));
        Ok(Some(NewTaskAwait { agent_id: agent, parent_task_id: task.id, trigger_name, session_key }))
    }

    /// Create a task; when the caller names the trigger session it is in
    /// (`session_task`), that session awaits it.
    pub async fn task_create_from_session(
        &self,
        caller: Caller,
        draft: TaskDraft,
        session_task: Option<TaskId>,
    ) -> ServiceResult<Task> {
        let Some(awaiting) = self.awaiting_session(caller, session_task).await? else {
            return self.task_create(caller, draft).await;
        };
        let new_task = NewTask::parse(draft, Some(awaiting.agent_id))?;
        let task = self.store.task_create_awaited(&new_task, &awaiting, self.clock.now()).await?;
        self.task_changed(&task, None).await;
        Ok(task)
    }

    pub async fn task_await_get(&self, task_id: TaskId) -> ServiceResult<Option<TaskAwait>> {
        Ok(self.store.task_await_get(task_id).await?)
    }

    /// The runner resumed the awaiting session with the task's result.
    pub async fn task_result_delivered(&self, caller: Caller, task_id: TaskId) -> ServiceResult<TaskAwait> {
        let agent: AgentId = caller.require_agent()?;
        let awaiting = self
            .store
            .task_await_get(task_id)
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("nobody awaits task {task_id}")))?;
        if awaiting.agent_id != agent {
            return Err(ServiceError::Forbidden(format!("task {task_id} is awaited by another agent")));
        }
        self.store.task_await_deliver(task_id, agent, self.clock.now()).await?;
        Ok(self.store.task_await_get(task_id).await?.unwrap_or(awaiting))
    }
}

/// A public webhook is a lasting way in without any key, and a trigger aimed at the
/// lead puts outside text in front of the agent that speaks for the swarm: both are for
/// the operator or the lead to set up, never a worker (whose prompt may be injected).
fn require_privilege_for(
    caller: Option<&swarm_domain::agent::Agent>,
    trigger: &TriggerDef,
    reaches_lead: bool,
) -> ServiceResult<()> {
    let Some(agent) = caller else { return Ok(()) };
    if agent.is_lead {
        return Ok(());
    }
    if trigger.webhook_public {
        return Err(ServiceError::Forbidden(
            "only the operator or the lead may create or change a public (unsigned) webhook trigger".into(),
        ));
    }
    if reaches_lead {
        return Err(ServiceError::Forbidden(
            "only the operator or the lead may create or change a trigger that targets the lead \
             (by the word lead or by the lead's id); aim it at pool or at a worker instead"
                .into(),
        ));
    }
    Ok(())
}

fn unknown_trigger(name: &str) -> ServiceError {
    ServiceError::NotFound(format!("no trigger named {name:?}"))
}
