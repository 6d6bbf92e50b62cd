//! `swarm doctor` as a user runs it: in a project set up by `swarm connect` for Claude
//! Code, against a real hub, with a `claude` on `PATH` that answers `--version`. Every
//! check passes on a working setup; a stopped hub or a wrong key is named with its fix
//! and a non-zero exit.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use serde_json::json;

use crate::hub::{Hub, SWARM, sqlite_file};

const KEY: &str = "doctor-test-key-0123456789";
const AGENT: &str = "0195f0a1-0000-7000-8000-00000000d0c7";

/// A folder for `PATH` with a `claude` that only tells its version and the `swarm`
/// the hooks call.
fn bin(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    std::fs::write(
        &claude,
        "#!/bin/sh\n[ \"$1\" = --version ] && { echo '2.0.14 (Claude Code)'; exit 0; }\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(SWARM, bin.join("swarm")).unwrap();
    bin
}

fn swarm(dir: &Path, project: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", dir.join("bin").display());
    let mut command = Command::new(SWARM);
    command.args(args).current_dir(project).env("HOME", dir.join("home")).env("PATH", path);
    for name in ["MCP_BASE_URL", "API_KEY", "AGENT_ID", "HARNESS", "HARNESS_CMD", "CODEX_HOME", "IS_SANDBOX"]
    {
        command.env_remove(name);
    }
    // Tests run as root, as in a container: Claude Code needs to be told it is sandboxed.
    command.env("IS_SANDBOX", "1");
    command.envs(env.iter().copied());
    command.output().expect("the swarm binary runs")
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// The printed check named `name`: its line and, for a failure, its fix.
fn check(output: &str, name: &str) -> String {
    let mut lines = output.lines().skip_while(|line| {
        !(line.starts_with(&format!("✓ {name}:")) || line.starts_with(&format!("✗ {name}:")))
    });
    let first = lines.next().unwrap_or_else(|| panic!("no check {name:?} in:\n{output}"));
    let fix = lines.next().filter(|line| line.trim_start().starts_with("fix:")).unwrap_or("");
    format!("{first}\n{fix}")
}

#[tokio::test]
async fn doctor_passes_a_connected_project_and_names_a_stopped_hub_or_a_wrong_key_with_its_fix() {
    let dir = tempfile::tempdir().unwrap();
    bin(dir.path());
    std::fs::create_dir_all(dir.path().join("home")).unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let (status, body) = hub.post("/api/agents", Some(AGENT), json!({"name": "doc"})).await;
    assert_eq!(status, 201, "{body}");
    let connected =
        swarm(dir.path(), &project, &["connect", "--url", &hub.base_url, "--agent-id", AGENT], &[]);
    assert!(connected.status.success(), "{}", text(&connected));

    let url = hub.base_url.clone();
    let env = [("MCP_BASE_URL", url.as_str()), ("API_KEY", KEY), ("AGENT_ID", AGENT)];
    let healthy = swarm(dir.path(), &project, &["doctor"], &env);
    let output = text(&healthy);
    assert!(healthy.status.success(), "{output}");
    for (name, says) in [
        ("hub", "answers"),
        ("API key", "accepted"),
        ("agent", "doc"),
        ("agent CLI", "2.0.14 (Claude Code)"),
        ("root and sandbox", ""),
        ("MCP config", "agent-swarm"),
        ("MCP endpoint", "answers"),
        ("hooks", "swarm hook"),
        ("swarm on PATH (for hooks)", "swarm"),
    ] {
        let line = check(&output, name);
        assert!(line.starts_with('✓') && line.contains(says), "{name}: {line}\n{output}");
    }
    assert!(!output.contains('✗') && output.contains("checks passed"), "{output}");

    let wrong = [("MCP_BASE_URL", url.as_str()), ("API_KEY", "not-the-key"), ("AGENT_ID", AGENT)];
    let refused = swarm(dir.path(), &project, &["doctor"], &wrong);
    let output = text(&refused);
    assert!(!refused.status.success(), "{output}");
    let line = check(&output, "API key");
    assert!(line.starts_with('✗') && line.contains("fix: set API_KEY"), "{line}\n{output}");
    assert!(check(&output, "agent CLI").starts_with('✓'), "the other checks still run:\n{output}");

    hub.kill();
    let stopped = swarm(dir.path(), &project, &["doctor"], &env);
    let output = text(&stopped);
    assert!(!stopped.status.success(), "{output}");
    let line = check(&output, "hub");
    assert!(
        line.starts_with('✗') && line.contains(&url) && line.contains("fix: start the hub"),
        "{line}\n{output}"
    );
    assert!(output.contains("checks failed"), "{output}");
}

/// The README's order: `swarm connect`, `swarm doctor`, then `swarm worker`. Before the
/// first worker there is no agent: doctor passes and says what the worker will do, with
/// AGENT_ID unset (a new agent, and how to keep it) and with one not registered yet.
#[tokio::test]
async fn doctor_before_the_first_worker_passes_and_says_what_the_worker_will_do() {
    let dir = tempfile::tempdir().unwrap();
    bin(dir.path());
    std::fs::create_dir_all(dir.path().join("home")).unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let connected = swarm(dir.path(), &project, &["connect", "--url", &hub.base_url], &[("API_KEY", KEY)]);
    assert!(connected.status.success(), "{}", text(&connected));
    let url = hub.base_url.clone();

    let without_id = swarm(dir.path(), &project, &["doctor"], &[("MCP_BASE_URL", &url), ("API_KEY", KEY)]);
    let output = text(&without_id);
    assert!(without_id.status.success(), "{output}");
    let line = check(&output, "agent");
    assert!(
        line.starts_with('✓') && line.contains("no AGENT_ID") && line.contains("swarm worker"),
        "{line}\n{output}"
    );
    assert!(line.contains("set AGENT_ID"), "how to keep the agent the worker makes: {line}");
    assert!(
        !output.contains("note: no AGENT_ID given"),
        "no made-up id is offered as the agent's:\n{output}"
    );
    assert!(check(&output, "API key").starts_with('✓'), "{output}");

    let env = [("MCP_BASE_URL", url.as_str()), ("API_KEY", KEY), ("AGENT_ID", AGENT)];
    let not_yet = swarm(dir.path(), &project, &["doctor"], &env);
    let output = text(&not_yet);
    assert!(not_yet.status.success(), "{output}");
    let line = check(&output, "agent");
    assert!(
        line.starts_with('✓') && line.contains(AGENT) && line.contains("not registered yet"),
        "{line}\n{output}"
    );
    assert!(line.contains("registers it on its first start"), "{line}");
    assert!(!output.contains('✗') && output.contains("checks passed"), "{output}");
}
