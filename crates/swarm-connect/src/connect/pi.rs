//! pi's files: `.pi/extensions/agent-swarm.ts` and `.pi/prompts/*.md`.
//!
//! pi has no MCP client by design (its README: "no MCP"), but loads TypeScript extensions
//! from `.pi/extensions/*.ts` in the project, and prompt templates from `.pi/prompts/*.md`
//! (`/name args`, `$ARGUMENTS` replaced, the same front matter as Claude Code's commands).
//! The extension (`pi_extension.ts`) is the MCP client: it lists the hub's tools when pi
//! starts and registers each as a pi tool named as Claude Code names them, and it runs
//! `swarm hook <event>` at pi's matching events. See docs/real-agent-clis.md, "pi".
//!
//! The extension is ours whole: it is rewritten on every run. What `swarm connect` was given
//! (URL, agent id, an embedded key or token, the hook command) is one JSON object in it; the
//! environment still wins when pi starts, as with Claude Code's `${VAR:-default}`.

use std::path::Path;

use serde_json::json;

use super::{Endpoint, FileChange, Plan, SERVER_NAME, read_optional};

const EXTENSION: &str = include_str!("pi_extension.ts");
const PLACEHOLDER: &str = "__SWARM_CONNECT__";

pub(super) fn plan(dir: &Path, endpoint: &Endpoint, hook_program: &str) -> anyhow::Result<Plan> {
    let mut plan = Plan::default();
    let path = dir.join(".pi").join("extensions").join(format!("{SERVER_NAME}.ts"));
    let before = read_optional(&path)?;
    let what = format!("pi extension: the {SERVER_NAME} tools at {}/mcp and the hooks", endpoint.base_url);
    plan.changes.push(FileChange::new(path, before, extension(endpoint, hook_program), what));
    for swarm_domain::prompts::Command { name, file: text } in swarm_domain::prompts::COMMANDS {
        let path = dir.join(".pi").join("prompts").join(format!("{name}.md"));
        let before = read_optional(&path)?;
        plan.changes.push(FileChange::new(
            path,
            before,
            text.to_string(),
            format!("prompt template /{name}"),
        ));
    }
    Ok(plan)
}

/// The extension's text, with what `swarm connect` was given as its `SWARM_CONNECT` object.
fn extension(endpoint: &Endpoint, hook_program: &str) -> String {
    let settings = json!({
        "server": SERVER_NAME,
        "url": endpoint.base_url,
        // A token is sent as it is, whatever API_KEY says (see claude.rs's `server_entry`).
        "agentToken": endpoint.agent_token.as_deref().unwrap_or_default(),
        "apiKey": if endpoint.agent_token.is_some() { "" } else { endpoint.embedded_api_key.as_deref().unwrap_or_default() },
        "agentId": endpoint.agent_id.map(|id| id.to_string()).unwrap_or_default(),
        "hookCommand": hook_program,
        "version": env!("CARGO_PKG_VERSION"),
    });
    let settings = serde_json::to_string_pretty(&settings).unwrap_or_default();
    EXTENSION.replace(PLACEHOLDER, &settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(agent_token: Option<&str>, embedded_api_key: Option<&str>) -> Endpoint {
        Endpoint {
            base_url: "http://127.0.0.1:3013".into(),
            embedded_api_key: agent_token.or(embedded_api_key).map(str::to_string),
            api_key_in_use: true,
            agent_id: None,
            agent_token: agent_token.map(str::to_string),
        }
    }

    fn settings(text: &str) -> serde_json::Value {
        let start = text.find("const SWARM_CONNECT = ").unwrap() + "const SWARM_CONNECT = ".len();
        let end = start + text[start..].find(";\n").unwrap();
        serde_json::from_str(&text[start..end]).unwrap()
    }

    #[test]
    fn the_extension_carries_what_connect_was_given() {
        let text = extension(&endpoint(None, Some("key-1234567890abcdef")), "/usr/bin/swarm");
        assert!(!text.contains(PLACEHOLDER));
        let given = settings(&text);
        assert_eq!(given["url"], "http://127.0.0.1:3013");
        assert_eq!(given["apiKey"], "key-1234567890abcdef");
        assert_eq!(given["agentToken"], "");
        assert_eq!(given["hookCommand"], "/usr/bin/swarm");
        assert_eq!(given["server"], SERVER_NAME);

        // A token is never the key's default: API_KEY from the environment must not replace it.
        let token = settings(&extension(&endpoint(Some("swt_abc"), None), "swarm"));
        assert_eq!((token["agentToken"].as_str(), token["apiKey"].as_str()), (Some("swt_abc"), Some("")));
    }

    #[test]
    fn writes_the_extension_and_the_prompt_templates() {
        let dir = tempfile::tempdir().unwrap();
        let plan = plan(dir.path(), &endpoint(None, None), "swarm").unwrap();
        let paths: Vec<String> =
            plan.changes.iter().map(|change| super::super::shown_path(&change.path, dir.path())).collect();
        assert_eq!(paths[0], ".pi/extensions/agent-swarm.ts");
        assert!(paths.contains(&".pi/prompts/work-on-task.md".to_string()), "{paths:?}");
        assert_eq!(paths.len(), 1 + swarm_domain::prompts::COMMANDS.len());
    }
}
