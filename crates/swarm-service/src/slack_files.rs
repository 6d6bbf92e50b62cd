//! Slack files (`slack-upload-file`, `slack-download-file`): shared in, or fetched
//! from, a thread the caller may answer in. The rule is `slack-reply`'s: the lead
//! anywhere, an agent in the thread of its own inbox message or of a task it works on
//! or created. Bytes travel inline (base64 over MCP), so they are capped.

use swarm_domain::{
    agent::Agent,
    id::{InboxMessageId, TaskId},
};

use crate::{
    Caller, Service, ServiceError, ServiceResult,
    slack_api::{SlackFileView, SlackUpload},
};

/// The most a file may weigh to travel inline through a tool call (base64 in JSON,
/// under the hub's 4 MiB request limit once encoded).
pub const SLACK_FILE_INLINE_MAX_BYTES: usize = 2 * 1024 * 1024;
const FILENAME_MAX_CHARS: usize = 255;
const COMMENT_MAX_CHARS: usize = 4_000;

/// Where a file is shared: the thread of an inbox message or of a task, or (the lead)
/// a channel, optionally a thread in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilePlace {
    InboxMessage(InboxMessageId),
    Task(TaskId),
    Channel { channel: String, thread_ts: Option<String> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileUpload {
    pub filename: String,
    pub bytes: Vec<u8>,
    pub initial_comment: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDownload {
    pub file: SlackFileView,
    pub bytes: Vec<u8>,
}

impl Service {
    /// Share a file where `place` says; returns its Slack file id.
    pub async fn slack_upload_file(
        &self,
        caller: Caller,
        place: FilePlace,
        upload: FileUpload,
    ) -> ServiceResult<String> {
        let filename = upload.filename.trim().to_string();
        if filename.is_empty()
            || filename.chars().count() > FILENAME_MAX_CHARS
            || filename.contains(['/', '\0'])
        {
            return Err(ServiceError::Invalid(format!(
                "filename must be 1 to {FILENAME_MAX_CHARS} characters without / (a name, not a path)"
            )));
        }
        if upload.bytes.is_empty() {
            return Err(ServiceError::Invalid("the file is empty: Slack takes no empty file".into()));
        }
        if upload.bytes.len() > SLACK_FILE_INLINE_MAX_BYTES {
            return Err(too_large(upload.bytes.len()));
        }
        let comment = upload.initial_comment.filter(|text| !text.trim().is_empty());
        if comment.as_ref().is_some_and(|text| text.chars().count() > COMMENT_MAX_CHARS) {
            return Err(ServiceError::Invalid(format!(
                "initialComment must be at most {COMMENT_MAX_CHARS} characters"
            )));
        }
        let (channel, thread_ts) = self.file_place(caller, place).await?;
        let upload = SlackUpload {
            channel,
            thread_ts,
            title: Some(filename.clone()),
            filename,
            initial_comment: comment,
            bytes: upload.bytes,
        };
        self.slack()?
            .upload_file(&upload)
            .await
            .map_err(|error| ServiceError::Conflict(format!("Slack refused the upload: {error}")))
    }

    /// A file shared in Slack, read with the bot's token: the lead any file; another
    /// agent one shared in the thread of a task it works on or created.
    pub async fn slack_download_file(&self, caller: Caller, file_id: &str) -> ServiceResult<FileDownload> {
        let file_id = file_id.trim();
        if file_id.is_empty() || file_id.len() > 64 || !file_id.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(ServiceError::Invalid(format!(
                "fileId must be a Slack file id such as F0123ABCD, got {file_id:?}"
            )));
        }
        let me = self.caller_agent(caller).await?;
        let slack = self.slack()?;
        let file = slack
            .file_info(file_id)
            .await
            .map_err(|error| ServiceError::Conflict(format!("Slack refused files.info: {error}")))?;
        if let Some(agent) = me.as_ref().filter(|agent| !agent.is_lead) {
            self.require_file_in_own_thread(agent, &file).await?;
        }
        if file.size > SLACK_FILE_INLINE_MAX_BYTES as u64 {
            return Err(too_large(usize::try_from(file.size).unwrap_or(usize::MAX)));
        }
        let Some(url) = file.url_private_download.clone() else {
            return Err(ServiceError::Conflict(format!("Slack gives no download URL for file {file_id}")));
        };
        let bytes = slack.download_file(&url, SLACK_FILE_INLINE_MAX_BYTES as u64).await.map_err(|error| {
            ServiceError::Conflict(format!("cannot download the file from Slack: {error}"))
        })?;
        Ok(FileDownload { file, bytes })
    }

    async fn require_file_in_own_thread(&self, agent: &Agent, file: &SlackFileView) -> ServiceResult<()> {
        for (channel, ts) in &file.shared_in {
            if self.works_thread(agent.id, channel, ts).await? {
                return Ok(());
            }
        }
        Err(ServiceError::Forbidden(
            "an agent downloads only files shared in the Slack thread of one of its tasks; the lead \
             downloads the rest"
                .into(),
        ))
    }

    /// The channel and thread of `place`, if the caller may post there.
    async fn file_place(&self, caller: Caller, place: FilePlace) -> ServiceResult<(String, Option<String>)> {
        let me = self.caller_agent(caller).await?;
        let (channel, thread) = match place {
            FilePlace::InboxMessage(id) => {
                let message = self.inbox_get(caller, id).await?;
                (message.slack.slack_channel_id, message.slack.slack_thread_ts)
            }
            FilePlace::Task(id) => {
                let task = self.task_get(id).await?;
                if let Some(agent) = me.as_ref().filter(|agent| !agent.is_lead) {
                    let involved = task.agent_id == Some(agent.id)
                        || task.creator_agent_id == Some(agent.id)
                        || task.offered_to == Some(agent.id);
                    if !involved {
                        return Err(ServiceError::Forbidden(
                            "you are neither the assignee nor the creator of this task".into(),
                        ));
                    }
                }
                (task.origin.slack_channel_id, task.origin.slack_thread_ts)
            }
            FilePlace::Channel { channel, thread_ts } => {
                if me.as_ref().is_some_and(|agent| !agent.is_lead) {
                    return Err(ServiceError::Forbidden(
                        "only the lead shares files in a channel by its id; give your task's taskId".into(),
                    ));
                }
                let channel = channel.trim().to_string();
                if channel.is_empty() || !channel.chars().all(|c| c.is_ascii_alphanumeric()) {
                    return Err(ServiceError::Invalid(format!(
                        "channelId must be a Slack channel id, got {channel:?}"
                    )));
                }
                return Ok((channel, thread_ts.filter(|ts| !ts.trim().is_empty())));
            }
        };
        match (channel, thread) {
            (Some(channel), thread) => Ok((channel, thread)),
            (None, _) => Err(ServiceError::Conflict("no Slack thread is attached to it".into())),
        }
    }
}

fn too_large(size: usize) -> ServiceError {
    ServiceError::Invalid(format!(
        "the file is {size} bytes; files travel inline (base64) through the tools, at most \
         {SLACK_FILE_INLINE_MAX_BYTES} bytes (2 MiB)"
    ))
}
