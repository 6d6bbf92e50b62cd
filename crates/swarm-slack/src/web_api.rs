//! Slack's Web API over HTTP (reqwest): the few methods the bridge and the tools call.
//! Every method is `POST {api_url}/{method}` with the bot token; Slack answers 200 with
//! `{"ok": false, "error": ...}` when it refuses, which becomes a [`SlackApiError`].

use async_trait::async_trait;
use serde_json::{Value, json};
use swarm_service::slack_api::{SlackApi, SlackApiError, SlackChannelView, SlackMessageView, SlackPost};

pub struct WebApi {
    http: reqwest::Client,
    api_url: String,
    bot_token: String,
}

impl WebApi {
    /// `api_url` without a trailing slash (`https://slack.com/api`).
    pub fn new(api_url: &str, bot_token: &str) -> WebApi {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(15))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        WebApi { http, api_url: api_url.trim_end_matches('/').to_string(), bot_token: bot_token.to_string() }
    }

    /// Call `method` with a JSON body and the given token; the answer when `ok`.
    pub(crate) async fn call_with(
        &self,
        token: &str,
        method: &str,
        body: &Value,
    ) -> Result<Value, SlackApiError> {
        let url = format!("{}/{method}", self.api_url);
        let response = self
            .http
            .post(&url)
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .map_err(|error| SlackApiError(format!("{method}: cannot reach Slack: {error}")))?;
        let status = response.status();
        let answer: Value = response
            .json()
            .await
            .map_err(|error| SlackApiError(format!("{method}: HTTP {status}, unreadable answer: {error}")))?;
        if answer.get("ok").and_then(Value::as_bool) == Some(true) {
            return Ok(answer);
        }
        let error = answer.get("error").and_then(Value::as_str).unwrap_or("unknown error");
        Err(SlackApiError(format!("{method}: {error}")))
    }

    pub(crate) async fn call(&self, method: &str, body: &Value) -> Result<Value, SlackApiError> {
        self.call_with(&self.bot_token, method, body).await
    }

    /// The bot's own user id (`auth.test`), to recognise mentions of it.
    pub async fn bot_user_id(&self) -> Result<String, SlackApiError> {
        let answer = self.call("auth.test", &json!({})).await?;
        answer
            .get("user_id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| SlackApiError("auth.test: no user_id in the answer".into()))
    }

    /// A user's e-mail address (`users.info`, needs `users:read.email`).
    pub async fn user_email(&self, user: &str) -> Result<Option<String>, SlackApiError> {
        let answer = self.call("users.info", &json!({ "user": user })).await?;
        Ok(answer.pointer("/user/profile/email").and_then(Value::as_str).map(str::to_string))
    }
}

fn messages(answer: &Value) -> Vec<SlackMessageView> {
    let text = |message: &Value, key: &str| message.get(key).and_then(Value::as_str).map(str::to_string);
    answer
        .get("messages")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|message| SlackMessageView {
                    ts: text(message, "ts").unwrap_or_default(),
                    user: text(message, "user"),
                    bot_id: text(message, "bot_id"),
                    username: text(message, "username"),
                    text: text(message, "text").unwrap_or_default(),
                    thread_ts: text(message, "thread_ts"),
                })
                .collect()
        })
        .unwrap_or_default()
}

#[async_trait]
impl SlackApi for WebApi {
    async fn post_message(&self, post: &SlackPost) -> Result<String, SlackApiError> {
        let mut body = json!({ "channel": post.channel, "text": post.text, "unfurl_links": false });
        if let Some(thread) = &post.thread_ts {
            body["thread_ts"] = json!(thread);
        }
        if let Some(persona) = &post.persona {
            body["username"] = json!(persona.username);
            body["icon_emoji"] = json!(persona.icon_emoji);
        }
        let answer = self.call("chat.postMessage", &body).await?;
        Ok(answer.get("ts").and_then(Value::as_str).unwrap_or_default().to_string())
    }

    async fn thread_history(
        &self,
        channel: &str,
        thread_ts: &str,
        limit: u32,
    ) -> Result<Vec<SlackMessageView>, SlackApiError> {
        let answer = self
            .call("conversations.replies", &json!({ "channel": channel, "ts": thread_ts, "limit": limit }))
            .await?;
        Ok(messages(&answer))
    }

    async fn channel_history(
        &self,
        channel: &str,
        limit: u32,
    ) -> Result<Vec<SlackMessageView>, SlackApiError> {
        let answer =
            self.call("conversations.history", &json!({ "channel": channel, "limit": limit })).await?;
        // Slack answers newest first; threads and tools read oldest first.
        let mut list = messages(&answer);
        list.reverse();
        Ok(list)
    }

    async fn list_channels(&self) -> Result<Vec<SlackChannelView>, SlackApiError> {
        let answer = self
            .call("conversations.list", &json!({ "types": "public_channel,private_channel", "limit": 200 }))
            .await?;
        let channels = answer.get("channels").and_then(Value::as_array).cloned().unwrap_or_default();
        Ok(channels
            .iter()
            .map(|channel| SlackChannelView {
                id: channel.get("id").and_then(Value::as_str).unwrap_or_default().to_string(),
                name: channel.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                is_private: channel.get("is_private").and_then(Value::as_bool).unwrap_or(false),
                is_member: channel.get("is_member").and_then(Value::as_bool).unwrap_or(false),
            })
            .collect())
    }
}
