//! Channels (agent chat): listing and creating channels, posting with mentions (`@name`
//! resolved to agent ids) and `/task` messages, reading (which marks the channel read
//! and releases an `unread_mentions` claim), and threads. Direct channels are visible
//! only to their participants (and the operator).

use swarm_domain::{
    chat::{
        Channel, ChannelType, ChatMessage, MENTIONS_MAX, MessageQuery, NewChannel, NewChatMessage,
        mentioned_names, parse_content, task_command,
    },
    id::{AgentId, ChannelId, ChatMessageId},
    poll::Wake,
    task::{NewTask, TaskDraft, TaskOrigin},
    time::Timestamp,
};

use crate::{Caller, Change, Service, ServiceError, ServiceResult};

/// The most messages one read returns.
pub const MESSAGES_PAGE_MAX: i64 = 100;
const MESSAGES_PAGE_DEFAULT: i64 = 50;

#[derive(Debug, Clone, Default)]
pub struct CreateChannel {
    pub name: String,
    pub description: Option<String>,
    /// `public` when `None`.
    pub channel_type: Option<ChannelType>,
    pub participants: Vec<AgentId>,
}

#[derive(Debug, Clone, Default)]
pub struct PostMessage {
    pub content: String,
    pub reply_to_id: Option<ChatMessageId>,
    /// Agents mentioned by id, on top of the `@name`s in the text.
    pub mentions: Vec<AgentId>,
}

#[derive(Debug, Clone)]
pub struct ReadMessages {
    pub limit: Option<i64>,
    pub since: Option<Timestamp>,
    pub before: Option<Timestamp>,
    /// Only the messages that mention the caller.
    pub mentions_only: bool,
    /// Only the messages after the caller last read the channel.
    pub unread_only: bool,
    /// Mark the channel read (the default): clears unread mentions and the poll's claim.
    pub mark_as_read: bool,
}

impl Default for ReadMessages {
    fn default() -> Self {
        ReadMessages {
            limit: None,
            since: None,
            before: None,
            mentions_only: false,
            unread_only: false,
            mark_as_read: true,
        }
    }
}

impl Service {
    /// The channels the caller may see, by name.
    pub async fn channel_list(&self, caller: Caller) -> ServiceResult<Vec<Channel>> {
        let me = self.caller_agent(caller).await?.map(|agent| agent.id);
        let mut channels = self.store.channel_list().await?;
        channels.retain(|channel| channel.admits(me));
        Ok(channels)
    }

    /// A channel the caller may see; a dm it is not part of reads as not found.
    pub async fn channel_get(&self, caller: Caller, id: ChannelId) -> ServiceResult<Channel> {
        let me = self.caller_agent(caller).await?.map(|agent| agent.id);
        match self.store.channel_get(id).await? {
            Some(channel) if channel.admits(me) => Ok(channel),
            _ => Err(unknown_channel(id)),
        }
    }

    pub async fn channel_create(&self, caller: Caller, request: CreateChannel) -> ServiceResult<Channel> {
        let me = self.caller_agent(caller).await?.map(|agent| agent.id);
        let channel_type = request.channel_type.unwrap_or(ChannelType::Public);
        let channel =
            NewChannel::parse(&request.name, request.description, channel_type, me, request.participants)?;
        Ok(self.store.channel_create(&channel, self.clock.now()).await?)
    }

    /// Post in a channel. Mentions are the `@name`s of the text that name registered
    /// agents plus `request.mentions`, without the author. A `/task ` message creates one
    /// pending task per mentioned agent. Each mentioned agent's poll wakes.
    pub async fn chat_post(
        &self,
        caller: Caller,
        channel: ChannelId,
        request: PostMessage,
    ) -> ServiceResult<ChatMessage> {
        let author = self.caller_agent(caller).await?.map(|agent| agent.id);
        let channel = self.channel_get(caller, channel).await?;
        let content = parse_content(&request.content)?;
        if let Some(reply_to) = request.reply_to_id {
            match self.store.chat_message_get(reply_to).await? {
                Some(parent) if parent.channel_id == channel.id => {}
                _ => {
                    return Err(ServiceError::Invalid(format!(
                        "replyToId: message {reply_to} is not in this channel"
                    )));
                }
            }
        }
        let mut mentions: Vec<AgentId> = Vec::new();
        let names = mentioned_names(&content);
        if !names.is_empty() {
            let agents = self.store.agent_list().await?;
            for name in &names {
                if let Some(agent) = agents.iter().find(|agent| agent.name.eq_ignore_ascii_case(name)) {
                    mentions.push(agent.id);
                }
            }
        }
        for id in request.mentions {
            if !mentions.contains(&id) {
                mentions.push(id);
            }
        }
        mentions.retain(|id| Some(*id) != author);
        if mentions.len() > MENTIONS_MAX {
            return Err(ServiceError::Invalid(format!("at most {MENTIONS_MAX} agents may be mentioned")));
        }
        if let Some(unknown) = self.first_unknown_agent(&mentions).await? {
            return Err(ServiceError::Invalid(format!("mentions: agent {unknown} is not registered")));
        }
        if channel.channel_type == ChannelType::Dm
            && let Some(outsider) = mentions.iter().find(|id| !channel.participants.contains(id))
        {
            return Err(ServiceError::Invalid(format!(
                "mentions: agent {outsider} is not a participant of this direct channel"
            )));
        }
        let id = ChatMessageId::new_v7();
        let mut tasks = Vec::new();
        if let Some(text) = task_command(&content) {
            if mentions.is_empty() {
                return Err(ServiceError::Invalid(
                    "a /task message creates one task per mentioned agent: mention at least one \
                     (@name or mentions)"
                        .into(),
                ));
            }
            // The rule of send-task: the lead coordinates, it is never given work.
            for agent in &mentions {
                if self.store.agent_get(*agent).await?.is_some_and(|agent| agent.is_lead) {
                    return Err(ServiceError::Invalid(format!(
                        "a /task message gives work to workers: agent {agent} is the lead, which is never \
                         given tasks (mention it without /task to ask it something)"
                    )));
                }
            }
            for agent in &mentions {
                let draft = TaskDraft {
                    task: text.to_string(),
                    agent_id: Some(*agent),
                    source: Some("chat".into()),
                    origin: TaskOrigin {
                        mention_message_id: Some(id.to_string()),
                        mention_channel_id: Some(channel.id.to_string()),
                        ..TaskOrigin::default()
                    },
                    ..TaskDraft::default()
                };
                tasks.push(NewTask::parse(draft, author)?);
            }
        }
        let message = NewChatMessage {
            id,
            channel_id: channel.id,
            agent_id: author,
            content,
            reply_to_id: request.reply_to_id,
            mentions,
            tasks,
        };
        let posted = self.store.chat_post(&message, self.clock.now()).await?;
        self.publish(Change::ChannelMessage { channel_id: posted.channel_id, message_id: posted.id });
        // A `/task` task is pending for a mentioned agent: the wakes below cover it.
        for task in &message.tasks {
            self.publish(Change::Task { task_id: task.id });
        }
        let wakes: Vec<Wake> = posted.mentions.iter().copied().map(Wake::Agent).collect();
        for agent in &posted.mentions {
            self.publish(Change::Agent { agent_id: *agent });
        }
        self.wake(&wakes).await;
        Ok(posted)
    }

    /// A channel's messages, oldest first. An agent's read marks the channel read up to
    /// the newest message returned, which clears its unread mentions there and releases
    /// an `unread_mentions` claim.
    pub async fn chat_read(
        &self,
        caller: Caller,
        channel: ChannelId,
        request: ReadMessages,
    ) -> ServiceResult<Vec<ChatMessage>> {
        let channel = self.channel_get(caller, channel).await?;
        let limit = request.limit.unwrap_or(MESSAGES_PAGE_DEFAULT);
        if !(1..=MESSAGES_PAGE_MAX).contains(&limit) {
            return Err(ServiceError::Invalid(format!("limit must be between 1 and {MESSAGES_PAGE_MAX}")));
        }
        if let (Some(since), Some(before)) = (request.since, request.before)
            && since >= before
        {
            return Err(ServiceError::Invalid("since must be earlier than before".into()));
        }
        let me = caller.agent_id();
        let mentioning = if request.mentions_only { Some(caller.require_agent()?) } else { None };
        let mut since = request.since;
        if request.unread_only {
            let agent = caller.require_agent()?;
            let last_read = self.store.chat_last_read(agent, channel.id).await?;
            since = since.max(last_read);
        }
        let query = MessageQuery { since, before: request.before, mentioning, limit };
        let messages = self.store.chat_messages(channel.id, &query).await?;
        if !request.mark_as_read {
            return Ok(messages);
        }
        if let (Some(agent), Some(newest)) = (me, messages.last()) {
            self.store.chat_mark_read(agent, channel.id, newest.created_at).await?;
            self.publish(Change::Agent { agent_id: agent });
        }
        Ok(messages)
    }

    /// A message and its replies, oldest first.
    pub async fn chat_thread(
        &self,
        caller: Caller,
        channel: ChannelId,
        root: ChatMessageId,
    ) -> ServiceResult<Vec<ChatMessage>> {
        let channel = self.channel_get(caller, channel).await?;
        match self.store.chat_message_get(root).await? {
            Some(message) if message.channel_id == channel.id => {}
            _ => return Err(ServiceError::NotFound(format!("message {root} not found in this channel"))),
        }
        Ok(self.store.chat_thread(root).await?)
    }

    /// A channel by id or by name (`general`, `#dev`), as the caller may see it.
    pub async fn channel_find(&self, caller: Caller, id_or_name: &str) -> ServiceResult<Channel> {
        if let Ok(id) = ChannelId::parse(id_or_name) {
            return self.channel_get(caller, id).await;
        }
        let name = swarm_domain::chat::parse_channel_name(id_or_name)?;
        self.channel_list(caller)
            .await?
            .into_iter()
            .find(|channel| channel.name == name)
            .ok_or_else(|| ServiceError::NotFound(format!("no channel named {name:?}")))
    }

    /// The caller's unread mention counts, per channel that has any.
    pub async fn chat_unread_mentions(&self, caller: Caller) -> ServiceResult<Vec<(ChannelId, i64)>> {
        let agent = caller.require_agent()?;
        self.caller_agent(caller).await?;
        Ok(self.store.chat_unread_mentions(agent).await?)
    }

    async fn first_unknown_agent(&self, ids: &[AgentId]) -> ServiceResult<Option<AgentId>> {
        for id in ids {
            if self.store.agent_get(*id).await?.is_none() {
                return Ok(Some(*id));
            }
        }
        Ok(None)
    }
}

fn unknown_channel(id: ChannelId) -> ServiceError {
    ServiceError::NotFound(format!("channel {id} not found"))
}
