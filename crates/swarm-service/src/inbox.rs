//! The lead's inbox and the Slack tools: messages routed to the lead, answered in
//! their thread (`slack-reply`) or handed to a worker (`inbox-delegate`), and what the
//! Slack bridge asks of the service (once-only marks, posting a task's outcome).

use swarm_domain::{
    agent::Agent,
    id::{AgentId, InboxMessageId, TaskId},
    inbox::{InboxChange, InboxMessage, InboxStatus, NewInboxMessage, SlackContext, SlackMark, parse_reply},
    poll::Wake,
    task::{NewTask, Task, TaskDraft, TaskOrigin, TaskStatus},
};
use swarm_store::Applied;

use crate::{
    Caller, Change, Service, ServiceError, ServiceResult,
    slack_api::{Persona, SlackApi, SlackChannelView, SlackMessageView, SlackPost},
};

const INBOX_PAGE_MAX: i64 = 100;
/// Outcomes older than this are not announced any more (a hub that was down for days
/// should not flood old threads).
const ANNOUNCE_WINDOW_MILLIS: i64 = 24 * 60 * 60 * 1000;

/// Where `slack-reply` posts: an inbox message's thread, or a task's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyTarget {
    InboxMessage(InboxMessageId),
    Task(TaskId),
}

#[derive(Debug, Clone)]
pub struct Delegate {
    pub inbox_message_id: InboxMessageId,
    pub agent_id: AgentId,
    pub task_description: Option<String>,
    pub offer: bool,
}

#[derive(Debug, Clone)]
pub struct Delegated {
    pub message: InboxMessage,
    pub task: Task,
    pub target: Agent,
}

impl Service {
    /// Give the service a Slack Web API client (the bridge does, when configured).
    pub fn with_slack(mut self, slack: std::sync::Arc<dyn SlackApi>) -> Self {
        self.slack = Some(slack);
        self
    }

    pub fn slack_configured(&self) -> bool {
        self.slack.is_some()
    }

    pub(crate) fn slack(&self) -> ServiceResult<&dyn SlackApi> {
        self.slack.as_deref().ok_or_else(|| {
            ServiceError::Conflict(
                "Slack is not configured on this hub: set SLACK_BOT_TOKEN (and SLACK_APP_TOKEN or \
                 SLACK_SIGNING_SECRET) and restart swarm serve"
                    .into(),
            )
        })
    }

    /// A Slack message routed to the lead becomes an inbox message (never a task); its
    /// lead's poll wakes.
    pub async fn inbox_receive(
        &self,
        lead: AgentId,
        content: &str,
        slack: SlackContext,
        matched_text: Option<String>,
    ) -> ServiceResult<InboxMessage> {
        let message = NewInboxMessage::parse(lead, content, slack, matched_text)?;
        let message = self.store.inbox_create(&message, self.clock.now()).await?;
        self.inbox_changed(lead);
        self.wake(&[Wake::Agent(lead)]).await;
        Ok(message)
    }

    /// The owner's message (or any, for the operator).
    pub async fn inbox_get(&self, caller: Caller, id: InboxMessageId) -> ServiceResult<InboxMessage> {
        let message = self.store.inbox_get(id).await?.ok_or_else(|| unknown_message(id))?;
        if let Caller::Agent(agent) = caller
            && agent != message.agent_id
        {
            return Err(ServiceError::Forbidden("this inbox message is not yours".into()));
        }
        Ok(message)
    }

    /// An inbox, oldest first: the caller's own (an agent may name only itself), or for
    /// the operator (the dashboard) the named agent's, by default the lead's.
    pub async fn inbox_list(
        &self,
        caller: Caller,
        agent: Option<AgentId>,
        statuses: Vec<InboxStatus>,
        limit: Option<i64>,
    ) -> ServiceResult<Vec<InboxMessage>> {
        let limit = limit.unwrap_or(25);
        if !(1..=INBOX_PAGE_MAX).contains(&limit) {
            return Err(ServiceError::Invalid(format!("limit must be between 1 and {INBOX_PAGE_MAX}")));
        }
        let owner = match (caller, agent) {
            (Caller::Agent(me), Some(named)) if named != me => {
                return Err(ServiceError::Forbidden("an agent reads only its own inbox".into()));
            }
            (Caller::Agent(me), _) => me,
            (Caller::Operator, Some(named)) => named,
            (Caller::Operator, None) => {
                match self.store.agent_list().await?.into_iter().find(|agent| agent.is_lead) {
                    Some(lead) => lead.id,
                    None => return Ok(Vec::new()),
                }
            }
        };
        Ok(self.store.inbox_list(owner, &statuses, limit).await?)
    }

    /// Post in the thread of an inbox message (its owner) or of a task (its assignee or
    /// creator, or the lead), under the caller's persona. An open inbox message becomes
    /// `responded`.
    pub async fn slack_reply(
        &self,
        caller: Caller,
        target: ReplyTarget,
        text: &str,
    ) -> ServiceResult<String> {
        let text = parse_reply(text)?;
        let me = self.caller_agent(caller).await?;
        let (channel, thread) = match target {
            ReplyTarget::InboxMessage(id) => {
                let message = self.inbox_get(caller, id).await?;
                if let Some(task) = message.delegated_to_task_id {
                    self.refuse_second_answer(&self.task_get(task).await?)?;
                }
                (message.slack.slack_channel_id, message.slack.slack_thread_ts)
            }
            ReplyTarget::Task(id) => {
                let task = self.task_get(id).await?;
                if let Some(agent) = &me {
                    let involved = task.agent_id == Some(agent.id)
                        || task.creator_agent_id == Some(agent.id)
                        || task.offered_to == Some(agent.id);
                    if !involved && !agent.is_lead {
                        return Err(ServiceError::Forbidden(
                            "you are neither the assignee nor the creator of this task".into(),
                        ));
                    }
                }
                self.refuse_second_answer(&task)?;
                (task.origin.slack_channel_id, task.origin.slack_thread_ts)
            }
        };
        let (Some(channel), Some(thread)) = (channel, thread) else {
            return Err(ServiceError::Conflict("no Slack thread is attached to it".into()));
        };
        let persona = me.as_ref().map(|agent| Persona::of(&agent.name, agent.is_lead));
        let post = SlackPost { channel, thread_ts: Some(thread), text: text.clone(), persona };
        let ts = self
            .slack()?
            .post_message(&post)
            .await
            .map_err(|error| ServiceError::Conflict(format!("Slack refused the reply: {error}")))?;
        if let ReplyTarget::InboxMessage(id) = target {
            let change = InboxChange::Responded { response_text: text };
            // A second reply to an answered message still posts; its status stays.
            if let Applied::Changed { after, .. } =
                self.store.inbox_apply(id, &change, self.clock.now()).await?
            {
                self.inbox_changed(after.agent_id);
            }
        }
        Ok(ts)
    }

    /// One answer per Slack thread per finished delegation: the bridge posts the outcome
    /// of every finished task that has a thread (`announce.rs`), so a reply about it by
    /// the lead or the worker would be the thread's second answer.
    fn refuse_second_answer(&self, task: &Task) -> ServiceResult<()> {
        let announced = matches!(task.status, TaskStatus::Completed | TaskStatus::Failed)
            && task.origin.slack_thread_ts.is_some()
            && self.slack.is_some();
        if announced {
            return Err(ServiceError::Conflict(format!(
                "task {} is {} and the Slack bridge posts its outcome in the thread itself: do not \
                 answer it again (send a follow-up task with send-task if more work is needed)",
                task.id, task.status
            )));
        }
        Ok(())
    }

    /// Hand an inbox message to a worker as a task carrying its Slack thread; the message
    /// becomes `delegated`, in the same transaction.
    pub async fn inbox_delegate(&self, caller: Caller, request: Delegate) -> ServiceResult<Delegated> {
        let lead = self.caller_agent(caller).await?.ok_or_else(|| {
            ServiceError::Invalid("inbox-delegate is done by the lead: send its X-Agent-ID".into())
        })?;
        if !lead.is_lead {
            return Err(ServiceError::Forbidden("only the lead delegates inbox messages".into()));
        }
        let message = self.inbox_get(caller, request.inbox_message_id).await?;
        let target = self.agent_get(request.agent_id).await?;
        if target.is_lead {
            return Err(ServiceError::Forbidden(format!("{} is a lead: delegate to a worker", target.name)));
        }
        let (agent_id, offered_to) =
            if request.offer { (None, Some(target.id)) } else { (Some(target.id), None) };
        let draft = TaskDraft {
            // The lead's own words, or the Slack message itself, fenced as outside text.
            task: request.task_description.unwrap_or_else(|| {
                swarm_domain::untrusted::fence(
                    "slack",
                    message.slack.slack_user_id.as_deref(),
                    &message.content,
                )
            }),
            agent_id,
            offered_to,
            source: Some("slack".into()),
            origin: TaskOrigin {
                slack_channel_id: message.slack.slack_channel_id.clone(),
                slack_thread_ts: message.slack.slack_thread_ts.clone(),
                slack_user_id: message.slack.slack_user_id.clone(),
                ..TaskOrigin::default()
            },
            ..TaskDraft::default()
        };
        let new_task = NewTask::parse(draft, Some(lead.id))?;
        let now = self.clock.now();
        let message = match self.store.inbox_delegate(message.id, lead.id, &new_task, now).await? {
            Applied::Changed { after, .. } => after,
            Applied::Refused { current } => {
                return Err(ServiceError::Conflict(format!(
                    "this inbox message is already {}: nothing was delegated",
                    current.status
                )));
            }
            Applied::NotFound => return Err(unknown_message(request.inbox_message_id)),
        };
        self.inbox_changed(message.agent_id);
        let task = self.task_get(new_task.id).await?;
        self.task_changed(&task, None).await;
        Ok(Delegated { message, task, target })
    }

    /// `slack-read`: a thread when `thread_ts` is given, else the channel's latest messages.
    /// The lead and the operator read anything the bot sees; a worker only the thread of a
    /// task it was given, so a prompt-injected worker cannot read the workspace.
    pub async fn slack_read(
        &self,
        caller: Caller,
        channel: &str,
        thread_ts: Option<&str>,
        limit: u32,
    ) -> ServiceResult<Vec<SlackMessageView>> {
        if let Some(worker) = self.caller_agent(caller).await?.filter(|agent| !agent.is_lead) {
            let own_thread = match thread_ts {
                Some(thread) => self.works_thread(worker.id, channel, thread).await?,
                None => false,
            };
            if !own_thread {
                return Err(ServiceError::Forbidden(
                    "a worker reads only the Slack thread of one of its tasks (channelId and threadTs); \
                     the lead reads the rest"
                        .into(),
                ));
            }
        }
        let slack = self.slack()?;
        let read = match thread_ts {
            Some(thread) => slack.thread_history(channel, thread, limit).await,
            None => slack.channel_history(channel, limit).await,
        };
        read.map_err(|error| ServiceError::Conflict(format!("Slack refused the read: {error}")))
    }

    /// `slack-post`: a new message in a channel (or a thread), the lead only.
    pub async fn slack_post(
        &self,
        caller: Caller,
        channel: &str,
        thread_ts: Option<String>,
        text: &str,
    ) -> ServiceResult<String> {
        let text = parse_reply(text)?;
        let me = self.caller_agent(caller).await?;
        if me.as_ref().is_some_and(|agent| !agent.is_lead) {
            return Err(ServiceError::Forbidden("only the lead posts new Slack messages".into()));
        }
        let persona = me.as_ref().map(|agent| Persona::of(&agent.name, agent.is_lead));
        let post = SlackPost { channel: channel.to_string(), thread_ts, text, persona };
        self.slack()?
            .post_message(&post)
            .await
            .map_err(|error| ServiceError::Conflict(format!("Slack refused the post: {error}")))
    }

    /// The lead's and the operator's: a worker has no business browsing the workspace.
    pub async fn slack_list_channels(&self, caller: Caller) -> ServiceResult<Vec<SlackChannelView>> {
        if self.caller_agent(caller).await?.is_some_and(|agent| !agent.is_lead) {
            return Err(ServiceError::Forbidden("only the lead lists the Slack channels".into()));
        }
        self.slack()?
            .list_channels()
            .await
            .map_err(|error| ServiceError::Conflict(format!("Slack refused the listing: {error}")))
    }

    /// Whether one of the agent's newest tasks came from this Slack thread.
    pub(crate) async fn works_thread(
        &self,
        agent: AgentId,
        channel: &str,
        thread: &str,
    ) -> ServiceResult<bool> {
        let filter = swarm_store::TaskFilter { agent_id: Some(agent), limit: 100, ..Default::default() };
        let (tasks, _) = self.store.task_list(&filter).await?;
        Ok(tasks.iter().any(|task| {
            task.origin.slack_channel_id.as_deref() == Some(channel)
                && task.origin.slack_thread_ts.as_deref() == Some(thread)
        }))
    }

    /// Take a once-only mark (a Slack event id handled, an outcome posted): `true` for
    /// the one caller that took it, across restarts and replicas.
    pub async fn slack_mark_once(&self, kind: SlackMark, key: &str) -> ServiceResult<bool> {
        Ok(self.store.slack_mark_once(kind, key, self.clock.now()).await?)
    }

    /// Finished Slack tasks whose outcome was not posted yet.
    pub async fn slack_outcomes_unannounced(&self, limit: i64) -> ServiceResult<Vec<Task>> {
        let since = self.clock.now().minus_millis(ANNOUNCE_WINDOW_MILLIS);
        Ok(self.store.slack_outcomes_unannounced(since, limit).await?)
    }

    /// Post in a task's thread under its assignee's persona (the bridge's announcements).
    pub async fn slack_post_for_task(&self, task: &Task, text: &str) -> ServiceResult<String> {
        let (Some(channel), Some(thread)) = (&task.origin.slack_channel_id, &task.origin.slack_thread_ts)
        else {
            return Err(ServiceError::Conflict("the task has no Slack thread".into()));
        };
        let persona = match task.agent_id {
            Some(agent) => {
                self.store.agent_get(agent).await?.map(|agent| Persona::of(&agent.name, agent.is_lead))
            }
            None => None,
        };
        let post = SlackPost {
            channel: channel.clone(),
            thread_ts: Some(thread.clone()),
            text: text.to_string(),
            persona,
        };
        self.slack()?
            .post_message(&post)
            .await
            .map_err(|error| ServiceError::Conflict(format!("Slack refused the post: {error}")))
    }

    /// The bridge's own Slack client, for its acknowledgements and lookups.
    pub fn slack_api(&self) -> Option<std::sync::Arc<dyn SlackApi>> {
        self.slack.clone()
    }

    pub(crate) fn inbox_changed(&self, lead: AgentId) {
        self.publish(Change::Inbox { agent_id: lead });
    }
}

fn unknown_message(id: InboxMessageId) -> ServiceError {
    ServiceError::NotFound(format!("inbox message {id} not found"))
}
