//! `slack-upload-file` and `slack-download-file`, with the reference's names and inputs.
//! Over `/mcp` the tools run in the hub, which reads and writes no file of its own for
//! an agent: the bytes travel inline, base64 (`content`). Over stdio the process runs
//! where the agent works, so `filePath` and `savePath` are read and written there.

use base64::{Engine, engine::general_purpose::STANDARD};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use swarm_domain::id::{InboxMessageId, TaskId};
use swarm_service::{FilePlace, FileUpload, SLACK_FILE_INLINE_MAX_BYTES};
use uuid::Uuid;

use crate::{
    context::ToolCall,
    registry::{Audience, ToolSpec},
    reply::{Answer, Outcome, Reply},
};

pub fn group() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "slack-upload-file",
            "Share a file in a Slack thread: inboxMessageId (your inbox message's thread) or taskId \
             (the thread of a task you work on or created), or channelId (and threadTs) for the lead. \
             Give content (base64) and filename; filePath works over stdio only (swarm mcp), where \
             the file is. At most 2 MiB.",
            Audience::Agents,
            upload,
        ),
        ToolSpec::new(
            "slack-download-file",
            "Download a file shared in Slack (fileId): the lead any file, another agent one shared in \
             the thread of its task. Answers the bytes as content (base64) with the file's name, \
             type and size; over stdio (swarm mcp) savePath writes it there instead. At most 2 MiB.",
            Audience::Agents,
            download,
        )
        .read_only(),
    ]
}

// The result fields of the file tools, for their output schemas.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct Uploaded {
    /// The Slack file id.
    file_id: String,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct Downloaded {
    file: swarm_service::slack_api::SlackFileView,
    /// The bytes, base64 (without savePath).
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<String>,
    /// Where the file was written (stdio, with savePath).
    #[serde(skip_serializing_if = "Option::is_none")]
    saved_path: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UploadArguments {
    /// The inbox message whose thread gets the file (leads).
    inbox_message_id: Option<Uuid>,
    /// The task whose Slack thread gets the file.
    task_id: Option<Uuid>,
    /// A channel id (the lead only).
    channel_id: Option<String>,
    /// With channelId: the thread.
    thread_ts: Option<String>,
    /// The file to send (stdio only: where `swarm mcp` runs).
    file_path: Option<String>,
    /// The file's bytes, base64.
    content: Option<String>,
    /// The file's name in Slack (required with content).
    filename: Option<String>,
    /// A message posted with the file (at most 4000 characters).
    initial_comment: Option<String>,
}

async fn upload(call: ToolCall, args: UploadArguments) -> Outcome<Uploaded> {
    let place = match (args.inbox_message_id, args.task_id, args.channel_id) {
        (Some(id), None, None) => FilePlace::InboxMessage(InboxMessageId::from_uuid(id)),
        (None, Some(id), None) => FilePlace::Task(TaskId::from_uuid(id)),
        (None, None, Some(channel)) => FilePlace::Channel { channel, thread_ts: args.thread_ts },
        _ => return Err(Reply::refused("give inboxMessageId, taskId or channelId, exactly one")),
    };
    let (bytes, filename) = match (args.file_path, args.content) {
        (Some(_), Some(_)) => return Err(Reply::refused("give filePath or content, not both")),
        (None, None) => return Err(Reply::refused("give content (base64) and filename, or filePath")),
        (None, Some(content)) => {
            let Some(filename) = args.filename else {
                return Err(Reply::refused("filename is required with content"));
            };
            if content.len() > SLACK_FILE_INLINE_MAX_BYTES / 3 * 4 + 4 {
                return Err(Reply::refused(format!(
                    "content is too large: at most {SLACK_FILE_INLINE_MAX_BYTES} bytes (2 MiB) once decoded"
                )));
            }
            let bytes = STANDARD
                .decode(content.trim())
                .map_err(|error| Reply::refused(format!("content is not valid base64: {error}")))?;
            (bytes, filename)
        }
        (Some(path), None) => {
            if call.identity.is_header() {
                return Err(Reply::refused(
                    "filePath names a file on the hub's machine, which the hub does not read for \
                     agents: send the file as content (base64) with filename",
                ));
            }
            let bytes = read_local(&path).await?;
            let filename = args.filename.unwrap_or_else(|| {
                std::path::Path::new(&path)
                    .file_name()
                    .map_or("file".into(), |name| name.to_string_lossy().into())
            });
            (bytes, filename)
        }
    };
    let upload = FileUpload { filename, bytes, initial_comment: args.initial_comment };
    let file_id = call.service.slack_upload_file(call.caller(), place, upload).await?;
    Ok(Answer::new(format!("File uploaded to Slack ({file_id})."), Uploaded { file_id }))
}

async fn read_local(path: &str) -> Result<Vec<u8>, Reply> {
    let metadata = tokio::fs::metadata(path)
        .await
        .map_err(|error| Reply::refused(format!("cannot read {path}: {error}")))?;
    if metadata.len() > SLACK_FILE_INLINE_MAX_BYTES as u64 {
        return Err(Reply::refused(format!(
            "{path} is {} bytes; at most {SLACK_FILE_INLINE_MAX_BYTES} (2 MiB)",
            metadata.len()
        )));
    }
    tokio::fs::read(path).await.map_err(|error| Reply::refused(format!("cannot read {path}: {error}")))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DownloadArguments {
    /// The Slack file id (e.g. F0RDC39U1).
    file_id: Option<String>,
    /// Not taken: the bot token is sent only for a file Slack describes by its id.
    url: Option<String>,
    /// Stdio only: where to write it (a directory keeps the file's name).
    save_path: Option<String>,
    /// With a directory savePath: the name to write it under.
    filename: Option<String>,
}

async fn download(call: ToolCall, args: DownloadArguments) -> Outcome<Downloaded> {
    let Some(file_id) = args.file_id else {
        let why = if args.url.is_some() {
            "a url alone is not taken (the bot token goes to files Slack names); "
        } else {
            ""
        };
        return Err(Reply::refused(format!("{why}give fileId, the Slack file's id")));
    };
    let downloaded = call.service.slack_download_file(call.caller(), &file_id).await?;
    let (file, bytes) = (downloaded.file, downloaded.bytes);
    let summary = format!("{} ({} bytes)", file.name, bytes.len());
    match args.save_path {
        Some(_) if call.identity.is_header() => Err(Reply::refused(
            "savePath would write on the hub's machine, which the hub does not do for agents: leave it \
             out and write the returned content (base64) yourself",
        )),
        Some(path) => {
            let mut target = std::path::PathBuf::from(&path);
            if tokio::fs::metadata(&target).await.is_ok_and(|meta| meta.is_dir()) {
                let name = args.filename.unwrap_or_else(|| file.name.clone());
                let name = std::path::Path::new(&name).file_name().map_or("file".into(), |n| n.to_owned());
                target.push(name);
            }
            tokio::fs::write(&target, &bytes)
                .await
                .map_err(|error| Reply::refused(format!("cannot write {}: {error}", target.display())))?;
            let saved = target.display().to_string();
            let message = format!("Downloaded {summary} to {saved}.");
            Ok(Answer::new(message, Downloaded { file, content: None, saved_path: Some(saved) }))
        }
        None => {
            let content = Some(STANDARD.encode(&bytes));
            Ok(Answer::new(format!("Downloaded {summary}."), Downloaded { file, content, saved_path: None }))
        }
    }
}
