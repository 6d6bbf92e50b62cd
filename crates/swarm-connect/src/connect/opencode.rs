//! opencode's file: the project's `opencode.json`.
//!
//! The format, as opencode (1.18) reads it: `mcp` is `{"<name>": {"type": "remote", "url",
//! "headers", "oauth"}}` for a Streamable HTTP server; `oauth: false` keeps opencode from
//! trying OAuth discovery on a hub that answers 401. Strings hold `{env:VAR}`, replaced by
//! the variable's value (or nothing) when opencode starts; there is no default value, so the
//! URL is written as it is (as for Codex) and the agent id, when given, too. The tools are
//! offered as `<server>_<tool>` (`agent-swarm_store-progress`). Everything else in the file
//! (providers, models, agents) is kept.

use std::path::Path;

use serde_json::{Value, json};

use super::claude::{json_change, object_entry, parse_json_object};
use super::{Endpoint, FileChange, Plan, SERVER_NAME, read_optional};

pub(super) fn plan(dir: &Path, endpoint: &Endpoint) -> anyhow::Result<Plan> {
    let path = dir.join("opencode.json");
    let before = read_optional(&path)?;
    let mut root = parse_json_object(&path, before.as_deref())?;
    let original = Value::Object(root.clone());
    root.entry("$schema").or_insert_with(|| json!("https://opencode.ai/config.json"));
    let entry = server_entry(endpoint);
    let url = entry["url"].as_str().unwrap_or_default().to_string();
    object_entry(&mut root, "mcp", &path)?.insert(SERVER_NAME.to_string(), entry);
    let change: FileChange =
        json_change(path, before, original, root, format!("MCP server {SERVER_NAME} at {url}"));
    Ok(Plan { changes: vec![change], notes: Vec::new() })
}

/// Claude Code's entry in opencode's words: the same headers, `{env:VAR}` for `${VAR:-}`.
fn server_entry(endpoint: &Endpoint) -> Value {
    // A token is written as it is (the operator key cannot act as the agent); an embedded
    // key too, since opencode has no default for a variable.
    let authorization = match (&endpoint.agent_token, &endpoint.embedded_api_key) {
        (Some(token), _) => format!("Bearer {token}"),
        (None, Some(key)) => format!("Bearer {key}"),
        (None, None) => "Bearer {env:API_KEY}".to_string(),
    };
    let agent = endpoint.agent_id.map(|id| id.to_string()).unwrap_or_else(|| "{env:AGENT_ID}".into());
    json!({
        "type": "remote",
        "url": format!("{}/mcp", endpoint.base_url),
        "headers": {
            "Authorization": authorization,
            "X-Agent-ID": agent,
            // The trigger session a runner's run continues; empty outside one.
            "X-Task-ID": "{env:SWARM_SESSION_TASK_ID}",
        },
        "oauth": false,
    })
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
    fn writes_the_server_and_keeps_the_users_providers() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("opencode.json");
        std::fs::write(&file, r#"{"model": "anthropic/x", "provider": {"anthropic": {"options": {}}}}"#)
            .unwrap();

        let plan = plan(dir.path(), &endpoint()).unwrap();
        let written: Value = serde_json::from_str(&plan.changes[0].after).unwrap();
        assert_eq!(written["model"], "anthropic/x");
        assert!(written["provider"]["anthropic"].is_object());
        let server = &written["mcp"][SERVER_NAME];
        assert_eq!(server["type"], "remote");
        assert_eq!(server["url"], "http://hub:3013/mcp");
        assert_eq!(server["headers"]["Authorization"], "Bearer {env:API_KEY}");
        assert_eq!(server["headers"]["X-Agent-ID"], "{env:AGENT_ID}");
        assert_eq!(server["oauth"], false);

        std::fs::write(&file, &plan.changes[0].after).unwrap();
        assert!(super::plan(dir.path(), &endpoint()).unwrap().changes[0].unchanged);

        let token = Endpoint { agent_token: Some("tok".into()), ..endpoint() };
        let written: Value = serde_json::from_str(&plan_after(dir.path(), &token)).unwrap();
        assert_eq!(written["mcp"][SERVER_NAME]["headers"]["Authorization"], "Bearer tok");
    }

    fn plan_after(dir: &Path, endpoint: &Endpoint) -> String {
        plan(dir, endpoint).unwrap().changes.remove(0).after
    }
}
