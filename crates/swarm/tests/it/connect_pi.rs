//! `swarm connect --harness pi`: the extension and prompt templates it writes, re-runs that
//! change nothing, and an agent token kept private (0600) and masked. That pi loads the
//! extension and reaches the hub through it is shown by `real_cli::*::pi`.

use std::{os::unix::fs::PermissionsExt, path::Path, process::Command};

use crate::hub::SWARM;

const AGENT: &str = "0195f0a1-0000-7000-8000-00000000c0de";
const TOKEN: &str = "swt_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn connect(dir: &Path, extra: &[&str]) -> String {
    let output = Command::new(SWARM)
        .args(["connect", "--harness", "pi", "--url", "http://127.0.0.1:3913", "--hook-command", SWARM])
        .args(extra)
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("API_KEY")
        .env_remove("AGENT_ID")
        .env_remove("AGENT_TOKEN")
        .env_remove("MCP_BASE_URL")
        .output()
        .expect("the swarm binary runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn connect_writes_pis_extension_and_prompt_templates_and_reruns_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let said = connect(dir.path(), &["--agent-id", AGENT]);
    let extension = dir.path().join(".pi/extensions/agent-swarm.ts");
    let text = std::fs::read_to_string(&extension).unwrap();
    assert!(said.contains("created") && said.contains(".pi/extensions/agent-swarm.ts"), "{said}");
    // What connect was given, as the defaults the environment overrides when pi starts.
    assert!(text.contains("\"url\": \"http://127.0.0.1:3913\"") && text.contains(AGENT), "{text}");
    assert!(text.contains(&format!("\"hookCommand\": \"{SWARM}\"")), "{text}");
    assert!(text.contains("MCP_BASE_URL") && text.contains("tools/list"), "{text}");
    for name in ["work-on-task", "review-offered-task", "task-result", "swarm-chat", "start-worker"] {
        let template = std::fs::read_to_string(dir.path().join(format!(".pi/prompts/{name}.md"))).unwrap();
        assert!(template.starts_with("---\ndescription:"), "{name}: {template}");
    }
    let again = connect(dir.path(), &["--agent-id", AGENT]);
    assert!(!again.contains("created") && !again.contains("updated"), "{again}");
    assert_eq!(std::fs::read_to_string(&extension).unwrap(), text);
}

#[test]
fn an_agent_token_is_kept_private_and_masked() {
    let dir = tempfile::tempdir().unwrap();
    let said = connect(dir.path(), &["--agent-token", TOKEN]);
    assert!(!said.contains(TOKEN), "printed: {said}");
    let extension = dir.path().join(".pi/extensions/agent-swarm.ts");
    let text = std::fs::read_to_string(&extension).unwrap();
    assert!(text.contains(&format!("\"agentToken\": \"{TOKEN}\"")), "{text}");
    let mode = std::fs::metadata(&extension).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the file holding the token is the owner's only");
}
