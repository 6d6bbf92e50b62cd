//! `swarm connect` and `swarm hook`, run as Claude Code and Codex would run them: the
//! files checked against the agent CLIs' documented shapes, re-runs that change
//! nothing, the MCP entry used to reach a real hub, and hooks against a real hub and
//! against none.

use std::{
    io::Write as _,
    path::Path,
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::hub::{Hub, SWARM, sqlite_file};

const KEY: &str = "connect-test-key";
const AGENT: &str = "0195f0a1-0000-7000-8000-00000000c0de";
const HOOK_EVENTS: [(&str, &str); 6] = [
    ("SessionStart", "session-start"),
    ("UserPromptSubmit", "user-prompt-submit"),
    ("PreToolUse", "pre-tool-use"),
    ("PostToolUse", "post-tool-use"),
    ("Stop", "stop"),
    ("SubagentStop", "subagent-stop"),
];
const COMMANDS: [&str; 6] =
    ["work-on-task", "review-offered-task", "task-result", "swarm-chat", "start-worker", "start-leader"];

/// `swarm` with none of the caller's hub settings, HOME in `home` (so nothing touches
/// the real ~/.codex), and `env` added.
fn swarm(home: &Path, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Output {
    let mut command = Command::new(SWARM);
    command.args(args).current_dir(home).env("HOME", home);
    for name in
        ["MCP_BASE_URL", "API_KEY", "AGENT_ID", "TASK_ID", "TASK_FILE", "CLAUDE_PROJECT_DIR", "CODEX_HOME"]
    {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("the swarm binary runs");
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}, stderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn connect(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> String {
    let dir_text = dir.to_str().unwrap();
    let mut args = vec!["connect", "--dir", dir_text, "--hook-command", SWARM];
    args.extend_from_slice(extra);
    ok(&swarm(dir, &args, env, None))
}

/// Our handlers of one event, across all its matcher groups.
fn our_handlers<'a>(settings: &'a Value, event: &str, argument: &str) -> Vec<&'a Value> {
    let suffix = format!(" hook {argument}");
    settings["hooks"][event]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|group| group["hooks"].as_array().unwrap())
        .filter(|handler| handler["command"].as_str().unwrap().ends_with(&suffix))
        .collect()
}

/// The shape Claude Code documents for `hooks`: event → list of `{matcher?, hooks:
/// [{type: "command", command, timeout?}]}`.
fn assert_documented_hooks_shape(settings: &Value) {
    for (event, groups) in settings["hooks"].as_object().expect("hooks is an object") {
        for group in groups.as_array().unwrap_or_else(|| panic!("{event}: a list of matcher groups")) {
            let group = group.as_object().unwrap();
            assert!(group.keys().all(|key| key == "matcher" || key == "hooks"), "{event}: {group:?}");
            if let Some(matcher) = group.get("matcher") {
                assert!(matcher.is_string(), "{event}: matcher is a string");
            }
            for handler in group["hooks"].as_array().unwrap() {
                assert_eq!(handler["type"], "command", "{event}: {handler}");
                assert!(handler["command"].is_string());
                assert!(handler.get("timeout").is_none_or(Value::is_u64), "{event}: timeout in seconds");
            }
        }
    }
}

#[test]
fn connect_writes_claude_code_files_and_reruns_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path();
    std::fs::create_dir_all(project.join(".claude")).unwrap();
    let user_settings = json!({
        "model": "opus",
        "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint.sh"}]}]},
    });
    std::fs::write(project.join(".claude/settings.json"), user_settings.to_string()).unwrap();
    std::fs::write(
        project.join(".mcp.json"),
        r#"{"mcpServers": {"docs": {"type": "http", "url": "http://docs/mcp"}}}"#,
    )
    .unwrap();

    let first = connect(project, &["--agent-id", AGENT, "--url", "http://hub.test:3013/"], &[]);
    assert!(first.contains("created") && first.contains("updated  "), "{first}");
    assert!(first.contains("API key is not written"), "says where the key comes from: {first}");

    let mcp = read_json(&project.join(".mcp.json"));
    assert_eq!(mcp["mcpServers"]["docs"]["url"], "http://docs/mcp", "other servers are kept");
    let server = &mcp["mcpServers"]["agent-swarm"];
    assert_eq!(server["type"], "http");
    assert_eq!(server["url"], "${MCP_BASE_URL:-http://hub.test:3013}/mcp");
    assert_eq!(server["headers"]["Authorization"], "Bearer ${API_KEY:-}", "the key is not written");
    assert_eq!(server["headers"]["X-Agent-ID"], format!("${{AGENT_ID:-{AGENT}}}"));
    assert!(server["headers"].as_object().unwrap().values().all(Value::is_string));

    let settings = read_json(&project.join(".claude/settings.json"));
    assert_documented_hooks_shape(&settings);
    assert_eq!(settings["model"], "opus", "user keys are kept");
    assert_eq!(settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"], "./lint.sh", "user hooks are kept");
    assert_eq!(settings["permissions"]["allow"], json!(["Bash(ls:*)", "mcp__agent-swarm__*"]));
    assert_eq!(settings["enabledMcpjsonServers"], json!(["agent-swarm"]));
    for (event, argument) in HOOK_EVENTS {
        let handlers = our_handlers(&settings, event, argument);
        assert_eq!(handlers.len(), 1, "{event}: {settings:#}");
        assert_eq!(handlers[0]["command"], format!("{SWARM} hook {argument}"));
    }
    let tool_groups = settings["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(tool_groups.last().unwrap()["matcher"], "*", "tool hooks match every tool");
    assert_eq!(
        settings["statusLine"],
        json!({"type": "command", "command": format!("{SWARM} hook status-line")})
    );

    for name in COMMANDS {
        let text = std::fs::read_to_string(project.join(format!(".claude/commands/{name}.md"))).unwrap();
        assert!(text.starts_with("---\ndescription: "), "{name}: front matter with a description");
        assert!(text.contains("mcp__agent-swarm__"), "{name}: names the swarm's tools");
    }
    for name in ["work-on-task", "review-offered-task"] {
        let text = std::fs::read_to_string(project.join(format!(".claude/commands/{name}.md"))).unwrap();
        assert!(text.contains("argument-hint: <task-id>") && text.contains("$ARGUMENTS"), "{name}");
    }

    // Again: nothing is touched, byte for byte.
    let snapshot = |path: &str| std::fs::read(project.join(path)).unwrap();
    let before: Vec<Vec<u8>> = [".mcp.json", ".claude/settings.json"].map(snapshot).to_vec();
    let second = connect(project, &["--agent-id", AGENT, "--url", "http://hub.test:3013"], &[]);
    assert!(!second.contains("created") && !second.contains("updated"), "{second}");
    assert_eq!(second.matches("unchanged").count(), 8, "{second}");
    assert_eq!([".mcp.json", ".claude/settings.json"].map(snapshot).to_vec(), before);

    // A different swarm binary: our hooks are replaced, not added.
    let moved = dir.path().join("bin/swarm");
    let third = ok(&swarm(project, &["connect", "--hook-command", moved.to_str().unwrap()], &[], None));
    assert!(third.contains("updated"), "{third}");
    let settings = read_json(&project.join(".claude/settings.json"));
    for (event, argument) in HOOK_EVENTS {
        let handlers = our_handlers(&settings, event, argument);
        assert_eq!(handlers.len(), 1, "{event}: {settings:#}");
        assert_eq!(handlers[0]["command"], format!("{} hook {argument}", moved.display()));
    }
    assert_eq!(settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"], "./lint.sh");
    assert_eq!(settings["permissions"]["allow"].as_array().unwrap().len(), 2, "no duplicate permission");
    let mcp = read_json(&project.join(".mcp.json"));
    assert_eq!(
        mcp["mcpServers"]["agent-swarm"]["headers"]["X-Agent-ID"], "${AGENT_ID:-}",
        "no agent id this time"
    );
}

#[test]
fn connect_keeps_a_foreign_status_line_and_refuses_broken_files() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path();
    std::fs::create_dir_all(project.join(".claude")).unwrap();
    let status_line = json!({"type": "command", "command": "~/bin/my-status"});
    std::fs::write(
        project.join(".claude/settings.local.json"),
        json!({"statusLine": status_line}).to_string(),
    )
    .unwrap();
    let out = connect(project, &["--local-settings"], &[]);
    assert!(out.contains("kept your statusLine"), "{out}");
    assert!(
        !project.join(".claude/settings.json").exists(),
        "--local-settings writes settings.local.json only"
    );
    let settings = read_json(&project.join(".claude/settings.local.json"));
    assert_eq!(settings["statusLine"], status_line);
    assert_eq!(our_handlers(&settings, "Stop", "stop").len(), 1);

    std::fs::write(project.join(".mcp.json"), "{ not json").unwrap();
    let broken = swarm(project, &["connect", "--dir", project.to_str().unwrap()], &[], None);
    assert!(!broken.status.success());
    let stderr = String::from_utf8_lossy(&broken.stderr);
    assert!(stderr.contains(".mcp.json") && stderr.contains("nothing was written"), "{stderr}");
    assert_eq!(std::fs::read_to_string(project.join(".mcp.json")).unwrap(), "{ not json");
    assert!(!project.join(".claude/settings.json").exists());
}

#[test]
fn connect_dry_run_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let codex = dir.path().join("codex/config.toml");
    let out = connect(
        dir.path(),
        &["--harness", "all", "--dry-run", "--codex-config", codex.to_str().unwrap()],
        &[],
    );
    assert!(out.starts_with("dry run: nothing was written"), "{out}");
    assert!(
        out.contains("would create")
            && out.contains("\"agent-swarm\"")
            && out.contains("[mcp_servers.agent-swarm]")
    );
    let entries = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(entries, 0, "nothing was created");
}

#[test]
fn connect_edits_codex_config_and_keeps_the_rest() {
    let home = tempfile::tempdir().unwrap();
    let codex_home = home.path().join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let config = codex_home.join("config.toml");
    let original = "# my Codex settings\nmodel = \"gpt-5-codex\" # the good one\n\n[mcp_servers.docs]\nurl = \"http://docs/mcp\"\n";
    std::fs::write(&config, original).unwrap();
    let env = [("API_KEY", KEY), ("AGENT_ID", AGENT)];
    let out = connect(home.path(), &["--harness", "codex", "--url", "http://hub.test:3013"], &env);
    assert!(out.contains("updated") && out.contains("config.toml"), "{out}");

    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.starts_with(original), "the user's file is kept as it was, comments included: {text}");
    assert!(!text.contains(KEY), "the key itself is not written");
    let document: toml_edit::DocumentMut = text.parse().expect("valid TOML");
    let server = &document["mcp_servers"]["agent-swarm"];
    assert_eq!(server["url"].as_str(), Some("http://hub.test:3013/mcp"));
    assert_eq!(server["bearer_token_env_var"].as_str(), Some("API_KEY"));
    assert_eq!(server["http_headers"]["X-Agent-ID"].as_str(), Some(AGENT));
    assert_eq!(server["env_http_headers"]["X-Agent-ID"].as_str(), Some("AGENT_ID"));
    assert!(server.get("command").is_none(), "a Streamable HTTP server, not stdio");
    assert_eq!(document["mcp_servers"]["docs"]["url"].as_str(), Some("http://docs/mcp"));

    let again = connect(home.path(), &["--harness", "codex", "--url", "http://hub.test:3013"], &env);
    assert!(again.contains("unchanged") && !again.contains("updated"), "{again}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), text);
}

/// What Claude Code does with `.mcp.json` placeholders: a set variable gives its
/// value, else the default after `:-`.
fn expand(text: &str, env: &[(&str, &str)]) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').unwrap() + start;
        let inner = &rest[start + 2..end];
        let (name, default) = inner.split_once(":-").unwrap_or((inner, ""));
        let value = env.iter().find(|(key, _)| *key == name).map(|(_, value)| *value);
        out.push_str(value.unwrap_or(default));
        rest = &rest[end + 1..];
    }
    out + rest
}

async fn tools_list(url: &str, headers: &Value) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#);
    for (name, value) in headers.as_object().unwrap() {
        request = request.header(name, value.as_str().unwrap());
    }
    crate::hub::send(request).await
}

#[tokio::test]
async fn the_mcp_entry_written_for_claude_code_reaches_the_hub() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let (status, _) = hub.post("/api/agents", Some(AGENT), json!({"name": "mcp-entry-worker"})).await;
    assert_eq!(status, 201);
    let project = tempfile::tempdir().unwrap();
    connect(project.path(), &["--url", &hub.base_url, "--agent-id", AGENT], &[]);
    let server = read_json(&project.path().join(".mcp.json"))["mcpServers"]["agent-swarm"].clone();

    // As a runner starts Claude Code: API_KEY set, the rest from the file's defaults.
    let env = [("API_KEY", KEY)];
    let url = expand(server["url"].as_str().unwrap(), &env);
    let headers: serde_json::Map<String, Value> = server["headers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, value)| (name.clone(), json!(expand(value.as_str().unwrap(), &env))))
        .collect();
    let (status, body) = tools_list(&url, &Value::Object(headers.clone())).await;
    assert_eq!(status, 200, "{body}");
    let names: Vec<&str> = body["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"store-progress") && names.contains(&"poll-task"), "a worker's tools: {names:?}");

    // Without API_KEY in the environment the hub refuses: the key comes from there.
    let mut no_key = headers;
    no_key.insert(
        "Authorization".into(),
        json!(expand(server["headers"]["Authorization"].as_str().unwrap(), &[])),
    );
    let (status, _) = tools_list(&url, &Value::Object(no_key)).await;
    assert_eq!(status, 401);
}

fn hook(dir: &Path, event: &str, env: &[(&str, &str)], stdin: &str) -> (Output, Duration) {
    let started = Instant::now();
    let output = swarm(dir, &["hook", event], env, Some(stdin));
    (output, started.elapsed())
}

fn event_json(event: &str) -> String {
    json!({"session_id": "s1", "hook_event_name": event, "tool_name": "Bash", "tool_input": {"command": "ls"}})
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_report_to_the_agent_and_block_a_cancelled_task() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let (status, _) =
        hub.post("/api/agents", Some(AGENT), json!({"name": "hook-worker", "maxTasks": 2})).await;
    assert_eq!(status, 201);
    let create = |body: Value| hub.post("/api/tasks", None, body);
    let (_, working) = create(json!({"task": "Refactor the parser", "agentId": AGENT})).await;
    let working = working["id"].as_str().unwrap().to_string();
    let (status, _) = hub.post(&format!("/api/tasks/{working}/start"), Some(AGENT), json!({})).await;
    assert_eq!(status, 200);
    let (_, doomed) = create(json!({"task": "Rewrite it in COBOL", "agentId": AGENT})).await;
    let doomed = doomed["id"].as_str().unwrap().to_string();
    let (status, _) =
        hub.post(&format!("/api/tasks/{doomed}/cancel"), None, json!({"reason": "not wanted"})).await;
    assert_eq!(status, 200);
    create(json!({"task": "Review the docs", "offeredTo": AGENT})).await;
    create(json!({"task": "Anyone: fix the build"})).await;

    let project = tempfile::tempdir().unwrap();
    let base = [("MCP_BASE_URL", hub.base_url.as_str()), ("API_KEY", KEY), ("AGENT_ID", AGENT)];
    let with_task = |task: &str| -> Vec<(&str, String)> {
        base.iter().map(|(k, v)| (*k, v.to_string())).chain([("TASK_ID", task.to_string())]).collect()
    };
    let env_of =
        |pairs: &[(&'static str, String)]| pairs.iter().map(|(k, v)| (*k, v.clone())).collect::<Vec<_>>();

    let (output, _) = hook(project.path(), "status-line", &base, "{}");
    let line = ok(&output);
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(
        line.contains("hook-worker") && line.contains("1 offered") && line.contains("1 in pool"),
        "{line}"
    );

    let pairs = env_of(&with_task(&working));
    let env: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (output, _) = hook(project.path(), "pre-tool-use", &env, &event_json("PreToolUse"));
    assert_eq!(ok(&output), "", "a task in progress: the tool runs, nothing is said");
    let (output, _) = hook(project.path(), "status-line", &env, "{}");
    assert!(ok(&output).contains(&format!("task {} in_progress", &working[..8])));
    let (output, _) = hook(project.path(), "session-start", &env, &event_json("SessionStart"));
    let context: Value = serde_json::from_str(&ok(&output)).expect("JSON output");
    assert_eq!(context["hookSpecificOutput"]["hookEventName"], "SessionStart");
    let text = context["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
    assert!(
        text.contains("hook-worker") && text.contains(&working) && text.contains("Refactor the parser"),
        "{text}"
    );
    assert!(text.contains("1 task(s) offered"), "{text}");

    let pairs = env_of(&with_task(&doomed));
    let env: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (output, _) = hook(project.path(), "pre-tool-use", &env, &event_json("PreToolUse"));
    assert_eq!(output.status.code(), Some(2), "exit 2 blocks the tool call");
    let reason = String::from_utf8_lossy(&output.stderr);
    assert!(
        reason.contains(&doomed) && reason.contains("cancelled") && reason.contains("not wanted"),
        "{reason}"
    );
    let (output, _) = hook(project.path(), "user-prompt-submit", &env, &event_json("UserPromptSubmit"));
    assert_eq!(output.status.code(), Some(2), "a cancelled task's prompt is blocked too");

    // The reference's runner exports no TASK_ID: it names a JSON file with the run's task.
    let task_file = project.path().join("task-4242.json");
    let write_task_file = |task: &str| {
        let content = json!({"taskId": task, "agentId": AGENT, "startedAt": "2026-01-20T10:00:00.000Z"});
        std::fs::write(&task_file, content.to_string()).unwrap();
    };
    let task_file_path = task_file.to_str().unwrap().to_string();
    let env: Vec<(&str, &str)> =
        base.iter().copied().chain([("TASK_FILE", task_file_path.as_str())]).collect();
    write_task_file(&doomed);
    let (output, _) = hook(project.path(), "pre-tool-use", &env, &event_json("PreToolUse"));
    assert_eq!(output.status.code(), Some(2), "TASK_FILE's cancelled task blocks the tool call");
    assert!(String::from_utf8_lossy(&output.stderr).contains(&doomed));
    write_task_file(&working);
    let (output, _) = hook(project.path(), "pre-tool-use", &env, &event_json("PreToolUse"));
    assert_eq!(ok(&output), "", "TASK_FILE's task in progress: the tool runs");

    // No environment at all: the hook finds the hub and the agent in .mcp.json, as the
    // MCP tools do (here with the key embedded, as --embed-api-key writes it).
    connect(
        project.path(),
        &["--url", &hub.base_url, "--agent-id", AGENT, "--api-key", KEY, "--embed-api-key"],
        &[],
    );
    let project_dir = project.path().to_str().unwrap();
    let (output, _) = hook(project.path(), "status-line", &[("CLAUDE_PROJECT_DIR", project_dir)], "{}");
    assert!(ok(&output).contains("hook-worker"));
}

#[test]
fn hooks_never_fail_the_agent_when_the_hub_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("MCP_BASE_URL", "http://127.0.0.1:9"),
        ("API_KEY", KEY),
        ("AGENT_ID", AGENT),
        ("TASK_ID", "0195f0a1-0000-7000-8000-00000000beef"),
    ];
    for event in [
        "session-start",
        "user-prompt-submit",
        "pre-tool-use",
        "post-tool-use",
        "stop",
        "subagent-stop",
        "status-line",
        "no-such-event",
    ] {
        for stdin in [event_json("PreToolUse"), "not json".to_string(), String::new()] {
            let (output, elapsed) = hook(dir.path(), event, &env, &stdin);
            assert_eq!(output.status.code(), Some(0), "{event}: {}", String::from_utf8_lossy(&output.stderr));
            assert!(elapsed < Duration::from_secs(5), "{event} took {elapsed:?}");
            let stdout = String::from_utf8_lossy(&output.stdout);
            if event == "status-line" {
                assert!(stdout.contains("hub unreachable"), "{stdout}");
            } else {
                assert_eq!(stdout, "", "{event}");
            }
        }
    }
    // Each silence is explained in the hook log (HOME is the test's directory).
    let log = std::fs::read_to_string(dir.path().join(".swarm/hooks/hook.log")).expect("the hook log");
    let reasons: Vec<Value> =
        log.lines().map(|line| serde_json::from_str(line).expect("JSON lines")).collect();
    let said = |event: &str, words: &str| {
        reasons.iter().any(|line| line["event"] == event && line["reason"].as_str().unwrap().contains(words))
    };
    assert!(said("user-prompt-submit", "could not read the agent's mail"), "{log}");
    assert!(said("subagent-stop", "could not list the agent's pending mail"), "{log}");
    assert!(said("no-such-event", "not an event swarm answers"), "{log}");
    assert!(said("stop", "no JSON event on stdin"), "{log}");
    let (output, _) =
        hook(dir.path(), "pre-tool-use", &[("AGENT_ID", "not-a-uuid"), ("TASK_ID", "nope")], "{}");
    assert_eq!(output.status.code(), Some(0));
    for args in [&["hook", "pre-tool-use", "--from-a-newer-swarm"][..], &["hook", "--flag-first"], &["hook"]]
    {
        let output = swarm(dir.path(), args, &env, Some("{}"));
        assert_eq!(output.status.code(), Some(0), "{args:?}: unknown arguments are ignored, never exit 2");
    }
}

#[test]
fn connect_and_hook_help_list_their_flags() {
    let help = Command::new(SWARM).args(["connect", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--dir",
        "--harness",
        "--url",
        "--api-key",
        "--embed-api-key",
        "--agent-id",
        "--local-settings",
        "--hook-command",
        "--codex-config",
        "--dry-run",
        "--json",
    ] {
        assert!(text.contains(flag), "connect --help lists {flag}");
    }
    let help = Command::new(SWARM).args(["hook", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("status-line") && text.contains("pre-tool-use"), "{text}");
}

/// Finding 8: files holding the key are the user's alone (0600), and a dry run shows
/// what it would write without the key in it.
#[test]
fn an_embedded_key_is_written_0600_and_masked_in_a_dry_run() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let codex = dir.path().join("codex.toml");
    let secret = "embedded-secret-key-1234";
    let args = [
        "--harness",
        "all",
        "--api-key",
        secret,
        "--embed-api-key",
        "--codex-config",
        codex.to_str().unwrap(),
    ];
    let mut dry = args.to_vec();
    dry.push("--dry-run");
    let out = connect(dir.path(), &dry, &[]);
    assert!(out.contains("would create"), "{out}");
    assert!(!out.contains(secret), "a dry run prints no key: {out}");
    assert!(out.contains("********"), "{out}");

    let out = connect(dir.path(), &args, &[]);
    assert!(!out.contains(secret), "{out}");
    for path in [dir.path().join(".mcp.json"), codex] {
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(secret), "{} holds the key", path.display());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} is readable by its owner only", path.display());
    }
    let settings = std::fs::metadata(dir.path().join(".claude/settings.json")).unwrap();
    assert_ne!(settings.permissions().mode() & 0o077, 0, "a file without the key keeps the usual mode");
}
