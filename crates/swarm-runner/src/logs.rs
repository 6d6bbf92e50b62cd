//! Local log files, where the reference's runner keeps them: `<LOG_DIR>/<SESSION_ID>/<timestamp>-<task8>.jsonl`
//! per agent run, a metadata line first and the agent's output after it; failed runs are
//! appended to `errors.jsonl` in the same folder.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::{
    fs::{File, OpenOptions},
    io::{AsyncWriteExt, BufWriter},
};

use crate::{RunnerError, process::ChildExit, work::short_id};

fn at(path: &Path) -> impl FnOnce(std::io::Error) -> RunnerError + '_ {
    move |source| RunnerError::Io { path: path.to_path_buf(), source }
}

/// The metadata line that opens every run's log.
#[derive(Debug, Clone)]
pub(crate) struct RunMetadata<'a> {
    /// `worker` or `lead`: the line's `type` is `worker_metadata` or `lead_metadata`, as
    /// the reference writes it.
    pub role: &'a str,
    pub session_id: &'a str,
    pub iteration: u64,
    pub prompt: &'a str,
    pub trigger: &'a str,
    pub task_id: Option<String>,
    pub yolo: bool,
}

/// The metadata line as written: the reference's fields in the reference's order, then ours.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MetadataLine<'a> {
    #[serde(rename = "type")]
    kind: String,
    session_id: &'a str,
    iteration: u64,
    timestamp: String,
    prompt: &'a str,
    trigger: &'a str,
    yolo: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    task_id: Option<&'a str>,
}

/// One run's log file, written line by line.
pub(crate) struct RunLog {
    path: PathBuf,
    file: BufWriter<File>,
}

impl RunLog {
    /// Creates the file (and its folder) and writes the metadata line.
    pub async fn create(session_dir: &Path, metadata: &RunMetadata<'_>) -> Result<RunLog, RunnerError> {
        tokio::fs::create_dir_all(session_dir).await.map_err(at(session_dir))?;
        let now = chrono::Utc::now();
        let stamp = now.format("%Y-%m-%dT%H-%M-%S-%3fZ");
        let task = metadata.task_id.as_deref().map(short_id).unwrap_or("notask");
        let path = session_dir.join(format!("{stamp}-{task}.jsonl"));
        let file = File::create(&path).await.map_err(at(&path))?;
        let mut log = RunLog { path, file: BufWriter::new(file) };
        let line = MetadataLine {
            kind: format!("{}_metadata", metadata.role),
            session_id: metadata.session_id,
            iteration: metadata.iteration,
            timestamp: now.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
            prompt: metadata.prompt,
            trigger: metadata.trigger,
            yolo: metadata.yolo,
            task_id: metadata.task_id.as_deref(),
        };
        let line = serde_json::to_string(&line).map_err(|err| at(&log.path)(err.into()))?;
        log.write_line(&line).await.map_err(at(&log.path))?;
        Ok(log)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// One line of the agent's standard output, as it came.
    pub async fn write_line(&mut self, line: &str) -> std::io::Result<()> {
        self.file.write_all(line.as_bytes()).await?;
        self.file.write_all(b"\n").await?;
        Ok(())
    }

    /// One line of the agent's standard error, wrapped so the file stays JSONL.
    pub async fn write_stderr(&mut self, line: &str) -> std::io::Result<()> {
        let wrapped = json!({"type": "stderr", "content": line, "timestamp": now_iso()});
        self.write_line(&wrapped.to_string()).await
    }

    pub async fn finish(mut self) -> std::io::Result<()> {
        self.file.flush().await?;
        Ok(())
    }
}

/// Appends a failed run to `<session_dir>/errors.jsonl`.
pub(crate) async fn append_error(
    session_dir: &Path,
    iteration: u64,
    exit: Option<ChildExit>,
    trigger: &str,
    task_id: Option<String>,
    message: &str,
) -> Result<(), RunnerError> {
    let path = session_dir.join("errors.jsonl");
    let mut record = json!({
        "timestamp": now_iso(),
        "iteration": iteration,
        "exitCode": exit.map(|exit| exit.code()),
        "trigger": trigger,
        "error": true,
        "message": message,
    });
    if let Some(task_id) = task_id {
        record["taskId"] = Value::String(task_id);
    }
    tokio::fs::create_dir_all(session_dir).await.map_err(at(session_dir))?;
    let mut file = OpenOptions::new().create(true).append(true).open(&path).await.map_err(at(&path))?;
    file.write_all(format!("{record}\n").as_bytes()).await.map_err(at(&path))?;
    // tokio writes in the background: without a flush the line may land after we return.
    file.flush().await.map_err(at(&path))?;
    Ok(())
}

fn now_iso() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_run_log_opens_with_its_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s1");
        let metadata = RunMetadata {
            role: "worker",
            session_id: "s1",
            iteration: 2,
            prompt: "/work-on-task x",
            trigger: "task_assigned",
            task_id: Some("0190abcd-0000-7000-8000-000000000001".into()),
            yolo: true,
        };
        let mut log = RunLog::create(&session, &metadata).await.unwrap();
        log.write_line(r#"{"type":"result"}"#).await.unwrap();
        log.write_stderr("oops").await.unwrap();
        let path = log.path().to_path_buf();
        log.finish().await.unwrap();
        assert!(path.file_name().unwrap().to_string_lossy().ends_with("-0190abcd.jsonl"));

        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(r#"{"type":"worker_metadata","sessionId":"s1","iteration":2,"#), "{text}");
        let lines: Vec<Value> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
        assert_eq!(lines[0]["type"], "worker_metadata");
        assert_eq!((lines[0]["sessionId"].as_str(), lines[0]["iteration"].as_u64()), (Some("s1"), Some(2)));
        assert_eq!(
            (lines[0]["trigger"].as_str(), lines[0]["yolo"].as_bool()),
            (Some("task_assigned"), Some(true))
        );
        assert_eq!(lines[1]["type"], "result");
        assert_eq!((lines[2]["type"].as_str(), lines[2]["content"].as_str()), (Some("stderr"), Some("oops")));

        append_error(&session, 2, Some(ChildExit::Code(3)), "task_assigned", None, "boom").await.unwrap();
        let errors = std::fs::read_to_string(session.join("errors.jsonl")).unwrap();
        let record: Value = serde_json::from_str(errors.trim()).expect(&errors);
        assert_eq!((record["exitCode"].as_i64(), record["error"].as_bool()), (Some(3), Some(true)));
    }
}
