//! The waiting pattern of `seeds/agent-mailbox.md`, coordinator side: an agent that
//! stops (its Claude Code `Stop`/`SubagentStop` hook, or a finished task that leaves it
//! idle) while mail is pending (it waits for a response, or mail it must see is unread)
//! tells the agent that delegated its work to it. A hook's `systemMessage` reaches only
//! the agent's own session; this reaches the coordinator, as urgent mail: its poll wakes
//! (a runner starts a run), or its next hook injects it (an interactive session).

use swarm_domain::{
    agent::Agent,
    id::AgentId,
    mail::{Mail, MailBox, MailDraft, MailPriority, MailQuery, MailStatus, MailType, NewMail},
    poll::Wake,
};
use swarm_store::TaskFilter;

use crate::{Caller, Change, Service, ServiceResult};

/// The most pending pieces an alert lists.
const ALERT_LIST_MAX: i64 = 20;

impl Service {
    /// The caller stopped: tell its coordinator about its pending mail, once per set of
    /// pending mail. `None` when nothing is pending, there is no one to tell, or it was
    /// told already.
    pub async fn agent_stopped(&self, caller: Caller) -> ServiceResult<Option<Mail>> {
        let id = caller.require_agent()?;
        let me = self.agent_get(id).await?;
        self.tell_coordinator(&me).await
    }

    /// After a finish by its assignee with mail pending (the finish's transaction read
    /// [`swarm_store::TaskWaiters::assignee_mail_pending`]): the same alert, best effort
    /// (the finish stands).
    pub(crate) async fn stopped_after_finish(&self, agent: AgentId) {
        let outcome = match self.store.agent_get(agent).await {
            Ok(Some(me)) => self.tell_coordinator(&me).await,
            Ok(None) => Ok(None),
            Err(error) => Err(error.into()),
        };
        if let Err(error) = outcome {
            tracing::warn!(%error, %agent, "could not tell a coordinator that its worker stopped");
        }
    }

    async fn tell_coordinator(&self, me: &Agent) -> ServiceResult<Option<Mail>> {
        let page = |mailbox, statuses: Vec<MailStatus>, pending_only| MailQuery {
            agent: Some(me.id),
            mailbox,
            statuses,
            pending_only,
            oldest_first: true,
            limit: ALERT_LIST_MAX,
            ..MailQuery::default()
        };
        // What it waits on, and what waits on it: unread mail whose sender waits, or urgent.
        let mut waiting_on = self.store.mail_list(&page(MailBox::Outbox, Vec::new(), true)).await?;
        // Its own earlier alerts are urgent and may be unread: they are news, not waiting.
        waiting_on.retain(|mail| mail.mail_type != MailType::StatusUpdate);
        let unread =
            self.store.mail_list(&page(MailBox::Inbox, MailStatus::UNDELIVERED.to_vec(), false)).await?;
        let must_see: Vec<&Mail> = unread
            .iter()
            .filter(|mail| {
                mail.awaiting_response || mail.priority == MailPriority::Urgent || mail.in_reply_to.is_some()
            })
            .collect();
        if waiting_on.is_empty() && must_see.is_empty() {
            return Ok(None);
        }
        let Some(coordinator) = self.coordinator_of(me).await? else {
            return Ok(None);
        };
        let mut lines = Vec::new();
        for mail in &waiting_on {
            let state = if mail.is_waiting() { "awaiting a response" } else { "urgent, not read yet" };
            lines.push(format!(
                "- sent {} \"{}\" ({state}; mailId {})",
                mail.mail_type, mail.subject, mail.id
            ));
        }
        for mail in &must_see {
            let waits = if mail.awaiting_response { ", its sender waits for a response" } else { "" };
            lines.push(format!(
                "- unread {} {} \"{}\" (mailId {}{waits})",
                mail.priority, mail.mail_type, mail.subject, mail.id
            ));
        }
        let headline = if waiting_on.iter().any(|mail| mail.is_waiting()) {
            "stopped, waiting for a response"
        } else {
            "went idle with mail it has not seen"
        };
        let body = format!(
            "{} {headline}:\n{}\n\nAnswer what waits for you with reply-mail; give it work again with \
             send-task, or tell whoever waits on it.",
            me.name,
            lines.join("\n")
        );
        let draft = MailDraft {
            mail_type: MailType::StatusUpdate,
            subject: format!("{} {headline}", me.name),
            body,
            priority: MailPriority::Urgent,
            awaiting_response: false,
            in_reply_to: None,
        };
        let alert = NewMail::parse(me.id, coordinator.id, draft)?;
        let mut ids: Vec<String> = waiting_on
            .iter()
            .map(|mail| mail.id.to_string())
            .chain(must_see.iter().map(|mail| mail.id.to_string()))
            .collect();
        ids.sort();
        let key = format!("{}:{}", coordinator.id, ids.join(","));
        let Some(sent) = self.store.mail_stop_alert(me.id, &key, &alert, self.clock.now()).await? else {
            return Ok(None);
        };
        self.publish(Change::Mail { mail_id: sent.id });
        self.publish(Change::Agent { agent_id: coordinator.id });
        self.wake(&[Wake::Agent(coordinator.id)]).await;
        Ok(Some(sent))
    }

    /// Who delegated the agent's work: the creator of its latest task, else the lead;
    /// never itself.
    async fn coordinator_of(&self, me: &Agent) -> ServiceResult<Option<Agent>> {
        let filter = TaskFilter { agent_id: Some(me.id), limit: 1, ..TaskFilter::default() };
        let (latest, _) = self.store.task_list(&filter).await?;
        if let Some(creator) = latest.first().and_then(|task| task.creator_agent_id).filter(|id| *id != me.id)
            && let Some(agent) = self.store.agent_get(creator).await?
        {
            return Ok(Some(agent));
        }
        let lead = self.store.agent_list().await?.into_iter().find(|agent| agent.is_lead);
        Ok(lead.filter(|lead| lead.id != me.id))
    }
}
