//! What a hook keeps on disk: the log of why it said nothing (a hook never fails the
//! agent, so its failures are written here instead of shown), and each agent's mail
//! counts (`inbox_count.json`, the seed's quick unread check).
//!
//! The directory is `SWARM_HOOK_DIR`, else `~/.swarm/hooks`, else the temporary
//! directory's `swarm-hooks`. Writing here must never fail the hook either: errors are
//! ignored.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};
use serde_json::json;
use swarm_domain::{id::AgentId, time::Timestamp};

/// `GET /api/mail/unread-count`, and the seed's `inbox_count.json`.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct Counts {
    pub unread: i64,
    pub urgent: i64,
    pub waiting_for_response: bool,
}

const LOG_FILE: &str = "hook.log";
const COUNTS_FILE: &str = "inbox_count.json";
/// The log is cut back to nothing past this size: it is for the last few failures.
const LOG_MAX_BYTES: u64 = 1 << 20;

pub(super) fn dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SWARM_HOOK_DIR").filter(|dir| !dir.is_empty()) {
        return PathBuf::from(dir);
    }
    match std::env::var_os("HOME").filter(|home| !home.is_empty()) {
        Some(home) => Path::new(&home).join(".swarm").join("hooks"),
        None => std::env::temp_dir().join("swarm-hooks"),
    }
}

/// Record why the hook said nothing (or less than it would have).
pub(super) fn why(event: &str, reason: &str) {
    let dir = dir();
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(LOG_FILE);
    if std::fs::metadata(&path).is_ok_and(|meta| meta.len() > LOG_MAX_BYTES) {
        let _ = std::fs::remove_file(&path);
    }
    let line = json!({
        "at": Timestamp::now(),
        "event": event,
        "agentId": std::env::var("AGENT_ID").ok(),
        "reason": reason,
    });
    if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(&path) {
        let _ = writeln!(file, "{line}");
    }
}

fn counts_path(agent: AgentId) -> PathBuf {
    dir().join(agent.to_string()).join(COUNTS_FILE)
}

pub(super) fn read_counts(agent: AgentId) -> Option<Counts> {
    let text = std::fs::read_to_string(counts_path(agent)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Replace the file whole (write, then rename), so a concurrent reader never sees half.
pub(super) fn write_counts(agent: AgentId, counts: &Counts, now: Timestamp) {
    let path = counts_path(agent);
    let Some(parent) = path.parent() else { return };
    let _ = std::fs::create_dir_all(parent);
    let mut value = serde_json::to_value(counts).unwrap_or_default();
    value["last_checked"] = json!(now);
    let temporary = parent.join(format!("{COUNTS_FILE}.{}", std::process::id()));
    if std::fs::write(&temporary, value.to_string()).is_ok() {
        let _ = std::fs::rename(&temporary, &path);
    }
}
