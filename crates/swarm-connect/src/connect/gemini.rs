//! The Gemini CLI's file: the project's `.gemini/settings.json`.
//!
//! Formats, as the Gemini CLI (0.61) reads them:
//! - `mcpServers`: `{"<name>": {"httpUrl", "headers", "trust"}}` for a Streamable HTTP server;
//!   `trust: true` runs its tools without asking. Strings anywhere in the settings have
//!   `$VAR`, `${VAR}` and `${VAR:-default}` expanded from the environment when the CLI
//!   starts, so the entry is Claude Code's, placeholders and all. The tools are offered as
//!   `mcp_<server>_<tool>` (`mcp_agent-swarm_store-progress`).
//! - `hooks`: `{"<Event>": [{"matcher": "*", "hooks": [{"type": "command", "command",
//!   "timeout": <milliseconds>}]}]}`, `matcher` for tool events only. Events: `SessionStart`,
//!   `BeforeAgent` (a prompt is submitted), `BeforeTool`, `AfterTool`, `AfterAgent` (the turn
//!   ends), and others we do not use. A hook gets the event's JSON on stdin (`session_id`,
//!   `cwd`, `hook_event_name`, `tool_name`, ...), as Claude Code's do; the
//!   `hookSpecificOutput.additionalContext` it prints reaches the model (after the prompt for
//!   `BeforeAgent`, after the tool's output for `AfterTool`), and exit code 2 blocks the tool
//!   call or prompt with stderr as the reason. So `swarm hook` answers both CLIs alike.
//!
//! A project's settings (and so its hooks and servers) are read only in a trusted folder:
//! the runner passes `--skip-trust`; a person trusts the folder once when Gemini asks.

use std::path::Path;

use anyhow::Context as _;
use serde_json::{Value, json};

use super::claude::{
    array_entry, ensure_handler, hook_command, json_change, object_entry, parse_json_object, server_entry,
};
use super::{Endpoint, FileChange, Plan, SERVER_NAME, read_optional};

/// The most a hook may take before the Gemini CLI gives up on it, in milliseconds. Ours answer
/// within about two seconds even when the hub is down.
const HOOK_TIMEOUT_MS: u64 = 10_000;

/// The Gemini CLI's events, the `swarm hook` argument each runs, and the matcher (tool
/// events only: `*` is every tool).
const HOOKS: [(&str, &str, Option<&str>); 5] = [
    ("SessionStart", "session-start", None),
    ("BeforeAgent", "user-prompt-submit", None),
    ("BeforeTool", "pre-tool-use", Some("*")),
    ("AfterTool", "post-tool-use", Some("*")),
    ("AfterAgent", "stop", None),
];

pub(super) fn plan(dir: &Path, endpoint: &Endpoint, hook_program: &str) -> anyhow::Result<Plan> {
    let path = dir.join(".gemini").join("settings.json");
    let before = read_optional(&path)?;
    let mut root = parse_json_object(&path, before.as_deref())?;
    let original = Value::Object(root.clone());

    let entry = gemini_server_entry(endpoint)?;
    let url = entry["httpUrl"].as_str().unwrap_or_default().to_string();
    object_entry(&mut root, "mcpServers", &path)?.insert(SERVER_NAME.to_string(), entry);

    let hooks = object_entry(&mut root, "hooks", &path)?;
    for (event, argument, matcher) in HOOKS {
        let handler = json!({
            "type": "command",
            "command": hook_command(hook_program, argument),
            "timeout": HOOK_TIMEOUT_MS,
        });
        ensure_handler(array_entry(hooks, event, &path)?, matcher, handler, hook_program, argument);
    }
    let change: FileChange =
        json_change(path, before, original, root, format!("MCP server {SERVER_NAME} at {url}, hooks"));
    Ok(Plan { changes: vec![change], notes: Vec::new() })
}

/// Claude Code's entry (the same placeholders), as the Gemini CLI names its fields.
fn gemini_server_entry(endpoint: &Endpoint) -> anyhow::Result<Value> {
    let mut entry = server_entry(endpoint);
    let object = entry.as_object_mut().context("the server entry is a JSON object")?;
    object.remove("type");
    let url = object.remove("url").unwrap_or_default();
    object.insert("httpUrl".to_string(), url);
    object.insert("trust".to_string(), Value::Bool(true));
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint() -> Endpoint {
        Endpoint {
            base_url: "http://hub:3013".into(),
            embedded_api_key: None,
            api_key_in_use: true,
            agent_id: None,
            agent_token: None,
        }
    }

    #[test]
    fn writes_the_server_and_hooks_and_keeps_the_users_settings() {
        let dir = tempfile::tempdir().unwrap();
        let settings = dir.path().join(".gemini/settings.json");
        std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
        std::fs::write(
            &settings,
            r#"{"general": {"vimMode": true}, "hooks": {"BeforeTool": [{"matcher": "write_file", "hooks": [{"type": "command", "command": "lint.sh"}]}]}}"#,
        )
        .unwrap();

        let plan = plan(dir.path(), &endpoint(), "swarm").unwrap();
        let written: Value = serde_json::from_str(&plan.changes[0].after).unwrap();

        assert_eq!(written["general"]["vimMode"], true);
        let server = &written["mcpServers"][SERVER_NAME];
        assert_eq!(server["httpUrl"], "${MCP_BASE_URL:-http://hub:3013}/mcp");
        assert_eq!(server["headers"]["X-Agent-ID"], "${AGENT_ID:-}");
        assert_eq!(server["trust"], true);
        assert!(server.get("url").is_none() && server.get("type").is_none(), "{server}");
        let before_tool = written["hooks"]["BeforeTool"].as_array().unwrap();
        assert_eq!(before_tool[0]["hooks"][0]["command"], "lint.sh");
        assert_eq!(before_tool[1]["matcher"], "*");
        assert_eq!(before_tool[1]["hooks"][0]["command"], "swarm hook pre-tool-use");
        assert_eq!(before_tool[1]["hooks"][0]["timeout"], HOOK_TIMEOUT_MS);
        assert_eq!(
            written["hooks"]["BeforeAgent"][0]["hooks"][0]["command"],
            "swarm hook user-prompt-submit"
        );
        assert!(written["hooks"]["BeforeAgent"][0].get("matcher").is_none());

        // A second run over what the first wrote changes nothing.
        std::fs::write(&settings, &plan.changes[0].after).unwrap();
        let again = super::plan(dir.path(), &endpoint(), "swarm").unwrap();
        assert!(again.changes[0].unchanged);
    }
}
