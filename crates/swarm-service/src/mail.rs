//! Agent mail: sending (to an agent by id or name, or to the coordinator: the lead),
//! replying, listing, delivering (which is what reading and the `UserPromptSubmit` hook
//! do) and the counts. The state machine is `swarm_domain::mail`.

use swarm_domain::{
    agent::Agent,
    id::{AgentId, MailId},
    mail::{
        COORDINATOR_ALIASES, Mail, MailBox, MailCounts, MailDelivery, MailDraft, MailPriority, MailQuery,
        MailStatus, MailType, NewMail,
    },
    poll::Wake,
};

use crate::{Caller, Change, Service, ServiceError, ServiceResult};

/// The most mail one page or one delivery returns.
pub const MAIL_PAGE_MAX: i64 = 200;
const MAIL_PAGE_DEFAULT: i64 = 50;
/// What a delivery hands over when not told otherwise: a hook's context stays short.
const DELIVERY_DEFAULT: i64 = 20;

#[derive(Debug, Clone)]
pub struct SendMail {
    /// An agent id, an agent name, or `coordinator` / `lead`.
    pub to: String,
    /// `question` when not given.
    pub mail_type: Option<MailType>,
    pub subject: String,
    pub body: String,
    /// `normal` when not given.
    pub priority: Option<MailPriority>,
    pub awaiting_response: bool,
}

#[derive(Debug, Clone)]
pub struct ReplyMail {
    pub body: String,
    /// `Re: <subject>` when not given.
    pub subject: Option<String>,
    /// `response` when not given.
    pub mail_type: Option<MailType>,
    /// The replied-to mail's priority when not given: an urgent question gets an urgent
    /// answer, which wakes the asker through its poll.
    pub priority: Option<MailPriority>,
    pub awaiting_response: bool,
}

#[derive(Debug, Clone, Default)]
pub struct ListMail {
    /// Whose mail; the caller's when not given. The operator may list anyone's, or all.
    pub agent: Option<AgentId>,
    pub mailbox: MailBox,
    pub unread_only: bool,
    pub priorities: Vec<MailPriority>,
    pub pending_only: bool,
    pub oldest_first: bool,
    pub after: Option<MailId>,
    pub limit: Option<i64>,
}

#[derive(Debug, Clone, Default)]
pub struct DeliverMail {
    /// These pieces only; otherwise the oldest undelivered, urgent first.
    pub ids: Vec<MailId>,
    /// `low` mail is delivered only when asked for.
    pub include_low: bool,
    pub limit: Option<i64>,
}

impl Service {
    pub async fn mail_send(&self, caller: Caller, request: SendMail) -> ServiceResult<Mail> {
        let from = self.mail_sender(caller).await?;
        let to = self.mail_recipient(&request.to).await?;
        let draft = MailDraft {
            mail_type: request.mail_type.unwrap_or(MailType::Question),
            subject: request.subject,
            body: request.body,
            priority: request.priority.unwrap_or(MailPriority::Normal),
            awaiting_response: request.awaiting_response,
            in_reply_to: None,
        };
        self.append_mail(NewMail::parse(from.id, to.id, draft)?, false).await
    }

    /// Answer mail sent to the caller; the answer goes to its sender, and the original
    /// is delivered and, when its sender waited, answered (which ends the waiting).
    pub async fn mail_reply(&self, caller: Caller, id: MailId, request: ReplyMail) -> ServiceResult<Mail> {
        let me = self.mail_sender(caller).await?;
        let original = self.store.mail_get(id).await?.ok_or_else(|| unknown_mail(id))?;
        if original.to_agent_id != me.id {
            return Err(if original.from_agent_id == me.id {
                ServiceError::Forbidden(format!(
                    "mail {id} is yours: only its recipient replies to it (send new mail instead)"
                ))
            } else {
                unknown_mail(id)
            });
        }
        let subject = request.subject.unwrap_or_else(|| match original.subject.starts_with("Re: ") {
            true => original.subject.clone(),
            false => format!("Re: {}", original.subject),
        });
        let draft = MailDraft {
            mail_type: request.mail_type.unwrap_or(MailType::Response),
            subject: clip_chars(&subject, swarm_domain::mail::SUBJECT_MAX_CHARS),
            body: request.body,
            priority: request.priority.unwrap_or(original.priority),
            awaiting_response: request.awaiting_response,
            in_reply_to: Some(original.id),
        };
        // The waiting pattern: the answer wakes a sender that awaits it, whatever its
        // priority (the store marks it `wakes` by the same rule).
        let wakes_sender = original.awaiting_response;
        let reply =
            self.append_mail(NewMail::parse(me.id, original.from_agent_id, draft)?, wakes_sender).await?;
        // The original was delivered and answered in the same transaction.
        self.publish(Change::Mail { mail_id: original.id });
        self.publish(Change::Agent { agent_id: me.id });
        Ok(reply)
    }

    /// One piece of mail: its sender, its recipient and the operator may read it (this
    /// does not deliver it).
    pub async fn mail_get(&self, caller: Caller, id: MailId) -> ServiceResult<Mail> {
        let me = self.caller_agent(caller).await?.map(|agent| agent.id);
        match self.store.mail_get(id).await? {
            Some(mail) if me.is_none_or(|me| mail.from_agent_id == me || mail.to_agent_id == me) => Ok(mail),
            _ => Err(unknown_mail(id)),
        }
    }

    /// A page of mail; listing does not deliver. An agent lists its own mail only.
    pub async fn mail_list(&self, caller: Caller, request: ListMail) -> ServiceResult<Vec<Mail>> {
        let me = self.caller_agent(caller).await?;
        let agent = match (&me, request.agent) {
            (Some(me), Some(asked)) if asked != me.id => {
                return Err(ServiceError::Forbidden("an agent lists its own mail only".into()));
            }
            (Some(me), _) => Some(me.id),
            (None, asked) => asked,
        };
        if let Some(agent) = agent
            && me.is_none()
        {
            self.agent_get(agent).await?;
        }
        let limit = page_limit(request.limit, MAIL_PAGE_DEFAULT)?;
        let query = MailQuery {
            agent,
            mailbox: request.mailbox,
            statuses: if request.unread_only { MailStatus::UNDELIVERED.to_vec() } else { Vec::new() },
            priorities: request.priorities,
            pending_only: request.pending_only,
            oldest_first: request.oldest_first,
            after: request.after,
            limit,
        };
        Ok(self.store.mail_list(&query).await?)
    }

    /// Deliver the caller's undelivered mail (what reading it and the
    /// `UserPromptSubmit` hook do): urgent first, then oldest; `low` only when asked.
    /// Each piece is delivered once, however many readers race.
    pub async fn mail_deliver(&self, caller: Caller, request: DeliverMail) -> ServiceResult<Vec<Mail>> {
        let me = self.mail_sender(caller).await?;
        let limit = page_limit(request.limit, DELIVERY_DEFAULT)?;
        if request.ids.len() > MAIL_PAGE_MAX as usize {
            return Err(ServiceError::Invalid(format!("mailIds: at most {MAIL_PAGE_MAX} ids at once")));
        }
        let priorities = match (request.include_low, request.ids.is_empty()) {
            // Asking for pieces by id is asking for them, whatever their priority.
            (true, _) | (false, false) => Vec::new(),
            (false, true) => vec![MailPriority::Urgent, MailPriority::Normal],
        };
        // A reply the agent waits for is delivered whatever its priority.
        let include_waking = !priorities.is_empty();
        let asked = request.ids.clone();
        let delivery = MailDelivery { ids: request.ids, priorities, include_waking, limit };
        let mut delivered = self.store.mail_deliver(me.id, &delivery, self.clock.now()).await?;
        for mail in &delivered {
            self.publish(Change::Mail { mail_id: mail.id });
        }
        if !delivered.is_empty() {
            self.publish(Change::Agent { agent_id: me.id });
        }
        // Pieces asked for by id are returned even when already read (a prompt or hook may
        // have delivered them): the agent asked to see them (issue 43).
        for id in asked {
            if delivered.iter().any(|mail| mail.id == id) {
                continue;
            }
            if let Some(mail) = self.store.mail_get(id).await?
                && mail.to_agent_id == me.id
            {
                delivered.push(mail);
            }
        }
        Ok(delivered)
    }

    /// An agent's counts (the caller's, or, for the operator, the one asked for).
    pub async fn mail_counts(&self, caller: Caller, agent: Option<AgentId>) -> ServiceResult<MailCounts> {
        let agent = match (self.caller_agent(caller).await?, agent) {
            (Some(me), Some(asked)) if asked != me.id => {
                return Err(ServiceError::Forbidden("an agent reads its own mail counts only".into()));
            }
            (Some(me), _) => me.id,
            (None, Some(asked)) => self.agent_get(asked).await?.id,
            (None, None) => {
                return Err(ServiceError::Invalid(
                    "whose mail? send X-Agent-ID, or agentId as the operator".into(),
                ));
            }
        };
        Ok(self.store.mail_counts(agent).await?)
    }

    async fn append_mail(&self, mail: NewMail, answers_a_wait: bool) -> ServiceResult<Mail> {
        let sent = self.store.mail_send(&mail, self.clock.now()).await?;
        self.publish(Change::Mail { mail_id: sent.id });
        self.publish(Change::Agent { agent_id: sent.to_agent_id });
        if sent.priority == MailPriority::Urgent || answers_a_wait {
            self.wake(&[Wake::Agent(sent.to_agent_id)]).await;
        }
        Ok(sent)
    }

    async fn mail_sender(&self, caller: Caller) -> ServiceResult<Agent> {
        let id = caller.require_agent()?;
        self.caller_agent(caller).await?.ok_or_else(|| crate::agents::unknown_agent(id))
    }

    /// `to`: an agent id, a registered name (any case), or the coordinator (the lead).
    async fn mail_recipient(&self, to: &str) -> ServiceResult<Agent> {
        let to = to.trim();
        if to.is_empty() {
            return Err(ServiceError::Invalid(
                "to must name an agent (id or name) or the coordinator".into(),
            ));
        }
        // By id: one lookup. Names and the coordinator need the list.
        if let Ok(id) = AgentId::parse(to) {
            return self
                .store
                .agent_get(id)
                .await?
                .ok_or_else(|| ServiceError::NotFound(format!("to: no agent with the id or name {to:?}")));
        }
        let agents = self.store.agent_list().await?;
        if COORDINATOR_ALIASES.iter().any(|alias| alias.eq_ignore_ascii_case(to)) {
            return agents.into_iter().find(|agent| agent.is_lead).ok_or_else(|| {
                ServiceError::NotFound("no lead has joined the swarm: there is no coordinator to mail".into())
            });
        }
        agents
            .into_iter()
            .find(|agent| agent.name.eq_ignore_ascii_case(to))
            .ok_or_else(|| ServiceError::NotFound(format!("to: no agent with the id or name {to:?}")))
    }
}

fn page_limit(limit: Option<i64>, default: i64) -> ServiceResult<i64> {
    let limit = limit.unwrap_or(default);
    if (1..=MAIL_PAGE_MAX).contains(&limit) {
        Ok(limit)
    } else {
        Err(ServiceError::Invalid(format!("limit must be between 1 and {MAIL_PAGE_MAX}")))
    }
}

fn clip_chars(text: &str, max_chars: usize) -> String {
    text.chars().take(max_chars).collect()
}

fn unknown_mail(id: MailId) -> ServiceError {
    ServiceError::NotFound(format!("mail {id} not found"))
}
