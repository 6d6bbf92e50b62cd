//! One Slack event, from either transport, into the swarm: deduplicated by event id
//! (durably), filtered (bots, allowed users, rate limit), routed, turned into an inbox
//! message (the lead) or a task (a worker), and acknowledged in its thread. A reply in the
//! thread of a Slack task goes to that task instead (`thread_replies.rs`).

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::Value;
use swarm_domain::{
    agent::AgentStatus,
    inbox::{SlackContext, SlackMark},
    task::{TaskDraft, TaskOrigin},
};
use swarm_service::{
    Caller, Service,
    slack_api::{SlackApi, SlackPost},
};

use crate::{
    SlackConfig,
    routing::{self, Candidate, Target},
    thread_replies,
    web_api::WebApi,
};

/// The reference's limit: 10 routed messages per user per minute.
const RATE_LIMIT: usize = 10;
const RATE_WINDOW: Duration = Duration::from_secs(60);
const THREAD_HISTORY_LIMIT: u32 = 20;

pub struct Bridge {
    pub(crate) service: Service,
    pub(crate) api: Arc<WebApi>,
    pub(crate) config: SlackConfig,
    bot_user_id: Option<String>,
    /// Per process: a limit, not a record; a restart forgetting it is harmless.
    recent: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl Bridge {
    pub fn new(service: Service, api: Arc<WebApi>, config: SlackConfig, bot_user_id: Option<String>) -> Self {
        Bridge { service, api, config, bot_user_id, recent: Mutex::default() }
    }

    /// An Events API `event_callback` payload (the HTTP body, or Socket Mode's
    /// `payload`). Errors are logged: Slack has been answered already.
    pub async fn handle_callback(&self, payload: &Value) {
        let Some(event) = payload.get("event") else { return };
        self.service.note_inbound("slack", "received");
        let event_id = payload.get("event_id").and_then(Value::as_str);
        if let Err(error) = self.handle_event(event_id, event).await {
            tracing::error!(%error, event_id, "a Slack event could not be handled");
        }
    }

    async fn handle_event(&self, event_id: Option<&str>, event: &Value) -> Result<(), String> {
        let text_of = |key: &str| event.get(key).and_then(Value::as_str);
        let kind = text_of("type").unwrap_or_default();
        if kind != "app_mention" && kind != "message" {
            return Ok(());
        }
        // Edits, joins, the bot's own posts and other bots are not requests.
        if text_of("subtype").is_some() || text_of("bot_id").is_some() {
            return Ok(());
        }
        let (Some(user), Some(channel), Some(ts)) = (text_of("user"), text_of("channel"), text_of("ts"))
        else {
            return Ok(());
        };
        if self.bot_user_id.as_deref() == Some(user) {
            return Ok(());
        }
        let text = text_of("text").unwrap_or_default();
        let bot_mention = self.bot_user_id.as_ref().map(|bot| format!("<@{bot}>"));
        let mentions_bot =
            kind == "app_mention" || bot_mention.as_ref().is_some_and(|m| text.contains(m.as_str()));
        let direct_message = text_of("channel_type") == Some("im");
        // A mention arrives twice when both events are subscribed: `app_mention` handles it.
        if kind == "message" && mentions_bot && !direct_message {
            return Ok(());
        }
        // Durable: a retry, a duplicate delivery or another replica finds the mark taken.
        if let Some(event_id) = event_id
            && !self.service.slack_mark_once(SlackMark::Event, event_id).await.map_err(|e| e.to_string())?
        {
            self.service.note_inbound("slack", "duplicate");
            tracing::debug!(event_id, "duplicate Slack event ignored");
            return Ok(());
        }
        if !self.user_allowed(user).await {
            self.service.note_inbound("slack", "ignored");
            tracing::info!(user, "Slack message from a user who is not allowed; ignored");
            return Ok(());
        }
        let thread_ts = text_of("thread_ts").filter(|thread| *thread != ts);
        let reply_ts = thread_ts.unwrap_or(ts).to_string();
        let clean_text = match &bot_mention {
            Some(mention) => text.replace(mention.as_str(), "").trim().to_string(),
            None => text.trim().to_string(),
        };
        // A reply in the thread of a Slack task is for that task (`thread_replies.rs`).
        if let Some(thread) = thread_ts
            && !clean_text.is_empty()
            && !thread_replies::names_a_target(&clean_text)
            && let Some(task) = self.thread_task(channel, thread).await?
        {
            if !self.within_rate_limit(user) {
                self.acknowledge(
                    channel,
                    &reply_ts,
                    "Too many requests: at most 10 a minute. Please wait a moment.",
                )
                .await;
                return Ok(());
            }
            let reply = thread_replies::Reply { channel, thread_ts: thread, ts, user, text: &clean_text };
            return self.thread_reply(task, &reply).await;
        }
        let candidates = self.candidates().await?;
        let message =
            routing::Message { text: &clean_text, mentions_bot, direct_message, thread_agent: None };
        let targets = routing::route(&message, &candidates);
        if targets.is_empty() {
            if mentions_bot || direct_message {
                self.acknowledge(channel, &reply_ts, "No lead is online to take this; try again later.")
                    .await;
            }
            return Ok(());
        }
        if !self.within_rate_limit(user) {
            self.acknowledge(
                channel,
                &reply_ts,
                "Too many requests: at most 10 a minute. Please wait a moment.",
            )
            .await;
            return Ok(());
        }
        let history = match thread_ts {
            Some(thread) => self.thread_history(channel, thread, ts).await,
            None => None,
        };
        let content = match history {
            Some(history) => format!("{clean_text}\n\nThread history:\n{history}"),
            None => clean_text.clone(),
        };
        let slack = SlackContext {
            slack_channel_id: Some(channel.to_string()),
            slack_thread_ts: Some(reply_ts.clone()),
            slack_user_id: Some(user.to_string()),
        };
        let mut routed = Vec::new();
        for target in targets {
            let name = candidates.iter().find(|c| c.id == target.agent).map_or("?", |c| c.name.as_str());
            match self.deliver(&target, &content, &slack).await {
                Ok(what) => routed.push(format!("*{name}* ({what})")),
                Err(error) => {
                    tracing::warn!(%error, agent = %target.agent, "could not route a Slack message");
                    routed.push(format!("`{name}` (failed)"));
                }
            }
        }
        self.acknowledge(channel, &reply_ts, &format!("Got it: routed to {}.", routed.join(", "))).await;
        Ok(())
    }

    async fn deliver(
        &self,
        target: &Target,
        content: &str,
        slack: &SlackContext,
    ) -> Result<&'static str, String> {
        if target.is_lead {
            let matched = Some(target.matched_text.clone());
            self.service
                .inbox_receive(target.agent, content, slack.clone(), matched)
                .await
                .map_err(|e| e.to_string())?;
            return Ok("inbox");
        }
        let draft = TaskDraft {
            task: swarm_domain::untrusted::fence("slack", slack.slack_user_id.as_deref(), content),
            agent_id: Some(target.agent),
            source: Some("slack".into()),
            origin: TaskOrigin {
                slack_channel_id: slack.slack_channel_id.clone(),
                slack_thread_ts: slack.slack_thread_ts.clone(),
                slack_user_id: slack.slack_user_id.clone(),
                ..TaskOrigin::default()
            },
            ..TaskDraft::default()
        };
        self.service.task_create(Caller::Operator, draft).await.map_err(|e| e.to_string())?;
        Ok("task")
    }

    async fn candidates(&self) -> Result<Vec<Candidate>, String> {
        let agents = self.service.agent_list().await.map_err(|e| e.to_string())?;
        Ok(agents
            .into_iter()
            .filter(|agent| agent.status != AgentStatus::Offline)
            .map(|agent| Candidate { id: agent.id, name: agent.name, is_lead: agent.is_lead })
            .collect())
    }

    pub(crate) async fn thread_history(
        &self,
        channel: &str,
        thread: &str,
        current_ts: &str,
    ) -> Option<String> {
        let messages = match self.api.thread_history(channel, thread, THREAD_HISTORY_LIMIT).await {
            Ok(messages) => messages,
            Err(error) => {
                tracing::warn!(%error, "could not read the Slack thread's history");
                return None;
            }
        };
        let mut lines = Vec::new();
        let mut allowed: HashMap<String, bool> = HashMap::new();
        for message in messages.iter().filter(|message| message.ts != current_ts) {
            if !self.history_author_allowed(message, &mut allowed).await {
                continue;
            }
            let who = message.username.clone().or_else(|| message.user.as_ref().map(|u| format!("<@{u}>")));
            lines.push(format!("{}: {}", who.unwrap_or_else(|| "bot".into()), message.text));
        }
        (!lines.is_empty()).then(|| lines.join("\n"))
    }

    /// Whether an earlier message of a thread may reach the agent: the same allowlist as
    /// a request (whoever may not ask the swarm may not speak to it through a thread
    /// either), and this bot's own posts. Other bots count as outsiders when a list is set.
    async fn history_author_allowed(
        &self,
        message: &swarm_service::slack_api::SlackMessageView,
        seen: &mut HashMap<String, bool>,
    ) -> bool {
        let restricted =
            !self.config.allowed_user_ids.is_empty() || !self.config.allowed_email_domains.is_empty();
        if !restricted {
            return true;
        }
        let Some(user) = message.user.as_deref() else { return false };
        if self.bot_user_id.as_deref() == Some(user) {
            return true;
        }
        if message.bot_id.is_some() {
            return false;
        }
        if let Some(known) = seen.get(user) {
            return *known;
        }
        let verdict = self.user_allowed(user).await;
        seen.insert(user.to_string(), verdict);
        verdict
    }

    pub(crate) async fn user_allowed(&self, user: &str) -> bool {
        if !self.config.allowed_user_ids.is_empty() {
            return self.config.allowed_user_ids.iter().any(|allowed| allowed == user);
        }
        if self.config.allowed_email_domains.is_empty() {
            return true;
        }
        match self.api.user_email(user).await {
            Ok(Some(email)) => {
                let domain = email.rsplit('@').next().unwrap_or_default().to_lowercase();
                self.config.allowed_email_domains.iter().any(|allowed| allowed.to_lowercase() == domain)
            }
            Ok(None) => false,
            Err(error) => {
                tracing::warn!(%error, user, "cannot look up a Slack user's e-mail; not allowed");
                false
            }
        }
    }

    pub(crate) fn within_rate_limit(&self, user: &str) -> bool {
        let now = Instant::now();
        let mut recent = self.recent.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let times = recent.entry(user.to_string()).or_default();
        while times.front().is_some_and(|at| now.duration_since(*at) > RATE_WINDOW) {
            times.pop_front();
        }
        if times.len() >= RATE_LIMIT {
            return false;
        }
        times.push_back(now);
        true
    }

    pub(crate) async fn acknowledge(&self, channel: &str, thread_ts: &str, text: &str) {
        let post = SlackPost {
            channel: channel.to_string(),
            thread_ts: Some(thread_ts.to_string()),
            text: text.to_string(),
            persona: None,
        };
        if let Err(error) = self.api.post_message(&post).await {
            tracing::warn!(%error, "could not acknowledge a Slack message");
        }
    }
}
