//! What the runner reads of Codex's own files: a thread's token counts so far, because
//! Codex reports a resumed thread's counts including the turns before (docs/real-agent-clis.md),
//! and the hub wants each run's own.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::TokenCounts;

/// `$CODEX_HOME`, else `~/.codex`: where Codex keeps its sessions.
fn codex_home() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    var("CODEX_HOME").or_else(|| var("HOME").map(|home| home.join(".codex")))
}

/// The thread's counts as its session file last recorded them (`token_count` events'
/// `total_token_usage`); `None` when there is no file or no count, and the run's counts are
/// then taken as they come.
pub(crate) fn thread_usage(thread_id: &str) -> Option<TokenCounts> {
    usage_in(&codex_home()?.join("sessions"), thread_id)
}

fn usage_in(sessions: &Path, thread_id: &str) -> Option<TokenCounts> {
    let file = find_rollout(sessions, thread_id)?;
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().rev().find_map(|line| {
        if !line.contains("\"token_count\"") {
            return None;
        }
        let event: Value = serde_json::from_str(line).ok()?;
        let total = event.pointer("/payload/info/total_token_usage")?;
        let count = |key: &str| total.get(key).and_then(Value::as_i64).unwrap_or(0);
        Some(TokenCounts {
            input: count("input_tokens"),
            cached: count("cached_input_tokens"),
            output: count("output_tokens"),
        })
    })
}

/// `sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`, searched for rather than built:
/// the date is the thread's start, not today.
fn find_rollout(dir: &Path, thread_id: &str) -> Option<PathBuf> {
    let suffix = format!("-{thread_id}.jsonl");
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).ok()?.map_while(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.file_name().is_some_and(|name| name.to_string_lossy().ends_with(&suffix)) {
                return Some(path);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_threads_last_total() {
        let dir = tempfile::tempdir().unwrap();
        let day = dir.path().join("2026/11/25");
        std::fs::create_dir_all(&day).unwrap();
        let total = |input: i64| {
            format!(
                r#"{{"type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{input},"cached_input_tokens":3,"output_tokens":20}}}}}}}}"#
            )
        };
        std::fs::write(
            day.join("rollout-2026-11-25T10-00-00-th-1.jsonl"),
            format!("{}\n{{\"type\":\"other\"}}\n{}\n", total(100), total(200)),
        )
        .unwrap();
        let file = find_rollout(dir.path(), "th-1").unwrap();
        assert!(file.ends_with("rollout-2026-11-25T10-00-00-th-1.jsonl"));
        assert_eq!(find_rollout(dir.path(), "th-2"), None);
        assert_eq!(usage_in(dir.path(), "th-1"), Some(TokenCounts { input: 200, cached: 3, output: 20 }));
    }
}
