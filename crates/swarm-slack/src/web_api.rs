//! Slack's Web API over HTTP (reqwest): the few methods the bridge and the tools call.
//! Every method is `POST {api_url}/{method}` with the bot token; Slack answers 200 with
//! `{"ok": false, "error": ...}` when it refuses, which becomes a [`SlackApiError`].

use async_trait::async_trait;
use serde_json::{Value, json};
use swarm_service::slack_api::{
    SlackApi, SlackApiError, SlackChannelView, SlackFileView, SlackMessageView, SlackPost, SlackUpdate,
    SlackUpload,
};

/// Slack's file host: the only place the bot token is sent to besides the API.
const SLACK_FILE_HOST: &str = "https://files.slack.com";
/// How many times a call Slack rate-limits (429) is sent again.
const RATE_LIMITED_ATTEMPTS: u32 = 5;
/// The longest `Retry-After` honoured as given: a longer one is waited in this much.
const RETRY_AFTER_MAX: std::time::Duration = std::time::Duration::from_secs(60);

/// Slack's `Retry-After` (seconds); one second when absent or unreadable.
fn retry_after(headers: &reqwest::header::HeaderMap) -> std::time::Duration {
    let seconds = headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok())
        .unwrap_or(1);
    std::time::Duration::from_secs(seconds).min(RETRY_AFTER_MAX)
}

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
        self.send(method, || self.http.post(&url).bearer_auth(token).json(body)).await
    }

    /// Call `method` with its arguments as query parameters: the file methods take no
    /// JSON body.
    async fn call_query(&self, method: &str, arguments: &[(&str, String)]) -> Result<Value, SlackApiError> {
        let url = format!("{}/{method}", self.api_url);
        self.send(method, || self.http.post(&url).bearer_auth(&self.bot_token).query(arguments)).await
    }

    /// Send the request `build` makes; when Slack answers 429 (rate limited), wait the
    /// `Retry-After` it gives and send it again, a few times.
    async fn send(
        &self,
        method: &str,
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<Value, SlackApiError> {
        let mut attempt = 0;
        loop {
            let response = build()
                .send()
                .await
                .map_err(|error| SlackApiError(format!("{method}: cannot reach Slack: {error}")))?;
            let status = response.status();
            if status == reqwest::StatusCode::TOO_MANY_REQUESTS && attempt < RATE_LIMITED_ATTEMPTS {
                attempt += 1;
                let wait = retry_after(response.headers());
                tracing::info!(
                    method,
                    ?wait,
                    attempt,
                    "Slack rate-limited a call; retrying after Retry-After"
                );
                tokio::time::sleep(wait).await;
                continue;
            }
            let answer: Value = response.json().await.map_err(|error| {
                SlackApiError(format!("{method}: HTTP {status}, unreadable answer: {error}"))
            })?;
            if answer.get("ok").and_then(Value::as_bool) == Some(true) {
                return Ok(answer);
            }
            return Err(refusal(method, &answer));
        }
    }

    /// Whether `url` is on Slack's file host or this API's own host (a proxy, a test's
    /// stand-in): the bot token goes nowhere else.
    fn is_file_url(&self, url: &str) -> bool {
        let origin = |text: &str| {
            let parsed = reqwest::Url::parse(text).ok()?;
            Some((
                parsed.scheme().to_string(),
                parsed.host_str()?.to_string(),
                parsed.port_or_known_default(),
            ))
        };
        let Some(target) = origin(url) else { return false };
        [SLACK_FILE_HOST, self.api_url.as_str()]
            .iter()
            .any(|allowed| origin(allowed).as_ref() == Some(&target))
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

/// Slack's refusal, with what to do when the app lacks a scope.
fn refusal(method: &str, answer: &Value) -> SlackApiError {
    let error = answer.get("error").and_then(Value::as_str).unwrap_or("unknown error");
    if error == "missing_scope" {
        let needed = answer.get("needed").and_then(Value::as_str).unwrap_or("a scope it has not got");
        return SlackApiError(format!(
            "{method}: missing_scope: the Slack app needs the {needed} scope; add it under OAuth & \
             Permissions in the app's settings and reinstall the app to the workspace"
        ));
    }
    SlackApiError(format!("{method}: {error}"))
}

fn file_view(file: &Value) -> SlackFileView {
    let text = |key: &str| file.get(key).and_then(Value::as_str).map(str::to_string);
    let mut shared_in = Vec::new();
    for kind in ["public", "private"] {
        let Some(channels) = file.pointer(&format!("/shares/{kind}")).and_then(Value::as_object) else {
            continue;
        };
        for (channel, shares) in channels {
            for share in shares.as_array().into_iter().flatten() {
                let ts = share.get("thread_ts").or_else(|| share.get("ts")).and_then(Value::as_str);
                if let Some(ts) = ts {
                    shared_in.push((channel.clone(), ts.to_string()));
                }
            }
        }
    }
    SlackFileView {
        id: text("id").unwrap_or_default(),
        name: text("name").unwrap_or_default(),
        title: text("title"),
        mimetype: text("mimetype"),
        size: file.get("size").and_then(Value::as_u64).unwrap_or(0),
        url_private_download: text("url_private_download").or_else(|| text("url_private")),
        shared_in,
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

    async fn post_blocks(&self, post: &SlackPost, blocks: &Value) -> Result<String, SlackApiError> {
        let mut body = json!({
            "channel": post.channel, "text": post.text, "blocks": blocks,
            "unfurl_links": false, "unfurl_media": false,
        });
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

    async fn update_message(&self, update: &SlackUpdate) -> Result<(), SlackApiError> {
        let mut body = json!({
            "channel": update.channel, "ts": update.ts, "text": update.text,
            "unfurl_links": false, "unfurl_media": false,
        });
        if let Some(blocks) = &update.blocks {
            body["blocks"] = blocks.clone();
        }
        self.call("chat.update", &body).await.map(drop)
    }

    async fn delete_message(&self, channel: &str, ts: &str) -> Result<(), SlackApiError> {
        self.call("chat.delete", &json!({ "channel": channel, "ts": ts })).await.map(drop)
    }

    async fn add_reaction(&self, channel: &str, ts: &str, name: &str) -> Result<(), SlackApiError> {
        let body = json!({ "channel": channel, "timestamp": ts, "name": name });
        match self.call("reactions.add", &body).await {
            Err(SlackApiError(error)) if error.ends_with("already_reacted") => Ok(()),
            other => other.map(drop),
        }
    }

    async fn create_channel(&self, name: &str, is_private: bool) -> Result<SlackChannelView, SlackApiError> {
        let answer =
            self.call("conversations.create", &json!({ "name": name, "is_private": is_private })).await?;
        let text = |key: &str| answer.pointer(&format!("/channel/{key}")).and_then(Value::as_str);
        Ok(SlackChannelView {
            id: text("id").unwrap_or_default().to_string(),
            name: text("name").unwrap_or(name).to_string(),
            is_private,
            is_member: true,
        })
    }

    async fn invite_to_channel(&self, channel: &str, users: &str) -> Result<(), SlackApiError> {
        self.call("conversations.invite", &json!({ "channel": channel, "users": users })).await.map(drop)
    }

    async fn archive_channel(&self, channel: &str) -> Result<(), SlackApiError> {
        self.call("conversations.archive", &json!({ "channel": channel })).await.map(drop)
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

    async fn upload_file(&self, upload: &SlackUpload) -> Result<String, SlackApiError> {
        let reserved = self
            .call_query(
                "files.getUploadURLExternal",
                &[("filename", upload.filename.clone()), ("length", upload.bytes.len().to_string())],
            )
            .await?;
        let (Some(upload_url), Some(file_id)) = (
            reserved.get("upload_url").and_then(Value::as_str),
            reserved.get("file_id").and_then(Value::as_str),
        ) else {
            return Err(SlackApiError("files.getUploadURLExternal: no upload_url or file_id".into()));
        };
        // The upload URL is signed: it needs no token, so none is sent.
        let response = self
            .http
            .post(upload_url)
            .body(upload.bytes.clone())
            .send()
            .await
            .map_err(|error| SlackApiError(format!("file upload: cannot reach Slack: {error}")))?;
        if !response.status().is_success() {
            return Err(SlackApiError(format!("file upload: HTTP {}", response.status())));
        }
        let title = upload.title.clone().unwrap_or_else(|| upload.filename.clone());
        let mut arguments = vec![
            ("files", json!([{ "id": file_id, "title": title }]).to_string()),
            ("channel_id", upload.channel.clone()),
        ];
        if let Some(thread) = &upload.thread_ts {
            arguments.push(("thread_ts", thread.clone()));
        }
        if let Some(comment) = &upload.initial_comment {
            arguments.push(("initial_comment", comment.clone()));
        }
        self.call_query("files.completeUploadExternal", &arguments).await?;
        Ok(file_id.to_string())
    }

    async fn file_info(&self, file_id: &str) -> Result<SlackFileView, SlackApiError> {
        let answer = self.call_query("files.info", &[("file", file_id.to_string())]).await?;
        let file =
            answer.get("file").ok_or_else(|| SlackApiError("files.info: no file in the answer".into()))?;
        Ok(file_view(file))
    }

    async fn download_file(&self, url: &str, max_bytes: u64) -> Result<Vec<u8>, SlackApiError> {
        if !self.is_file_url(url) {
            return Err(SlackApiError(format!(
                "{url} is not on Slack's file host: the bot token is not sent there"
            )));
        }
        let response = self
            .http
            .get(url)
            .bearer_auth(&self.bot_token)
            .send()
            .await
            .map_err(|error| SlackApiError(format!("download: cannot reach Slack: {error}")))?;
        let status = response.status();
        if !status.is_success() {
            return Err(SlackApiError(format!("download: HTTP {status}")));
        }
        // Without files:read Slack answers its sign-in page instead of the file.
        let html = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|kind| kind.starts_with("text/html"));
        if html {
            return Err(SlackApiError(
                "download: Slack answered a sign-in page, not the file: the Slack app needs the files:read \
                 scope (add it under OAuth & Permissions and reinstall the app)"
                    .into(),
            ));
        }
        if response.content_length().is_some_and(|length| length > max_bytes) {
            return Err(SlackApiError(format!("download: the file is larger than {max_bytes} bytes")));
        }
        let mut response = response;
        let mut bytes = Vec::new();
        while let Some(chunk) =
            response.chunk().await.map_err(|error| SlackApiError(format!("download: {error}")))?
        {
            bytes.extend_from_slice(&chunk);
            if bytes.len() as u64 > max_bytes {
                return Err(SlackApiError(format!("download: the file is larger than {max_bytes} bytes")));
            }
        }
        Ok(bytes)
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
