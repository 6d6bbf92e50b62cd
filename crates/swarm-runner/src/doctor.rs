//! Checks that tell, before any work is claimed, whether an agent CLI can run here: the
//! runner stops on a failed [`preflight`] check, and `swarm doctor` prints them all
//! (with [`hub_checks`] and [`hooks_check`]). Every failed check says how to fix it.

use std::{
    ffi::OsString,
    fmt,
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use serde_json::Value;
use swarm_client::{Client, ClientConfig};

use crate::{
    config::RunnerConfig,
    harness::{Harness, McpConfig},
};

/// A CLI that takes longer than this to print its version is not going to run a task.
const VERSION_TIMEOUT: Duration = Duration::from_secs(15);
/// The MCP server name `swarm connect` writes.
pub const MCP_SERVER_NAME: &str = "agent-swarm";

/// One named check and its verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    pub passed: bool,
    /// What was found.
    pub detail: String,
    /// What to do about a failure.
    pub fix: Option<String>,
}

impl Check {
    pub fn pass(name: &str, detail: impl Into<String>) -> Check {
        Check { name: name.into(), passed: true, detail: detail.into(), fix: None }
    }

    pub fn fail(name: &str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check { name: name.into(), passed: false, detail: detail.into(), fix: Some(fix.into()) }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = if self.passed { "✓" } else { "✗" };
        write!(f, "{mark} {}: {}", self.name, self.detail)?;
        if let Some(fix) = &self.fix {
            write!(f, "\n    fix: {fix}")?;
        }
        Ok(())
    }
}

/// What the checks read from the process, so that tests can set it.
#[derive(Debug, Clone)]
pub struct Environment {
    pub path: Option<OsString>,
    pub euid: u32,
    pub is_sandbox: Option<String>,
    pub home: Option<PathBuf>,
    pub codex_home: Option<PathBuf>,
    /// The directory the agent CLI runs in (the project).
    pub cwd: PathBuf,
}

impl Environment {
    pub fn of_this_process() -> Environment {
        let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
        Environment {
            path: var("PATH"),
            euid: rustix::process::geteuid().as_raw(),
            is_sandbox: var("IS_SANDBOX").map(|value| value.to_string_lossy().into_owned()),
            home: var("HOME").map(PathBuf::from),
            codex_home: var("CODEX_HOME").map(PathBuf::from),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
        }
    }
}

/// The checks the runner makes before its first poll: the agent CLI is there and
/// answers, Claude Code will accept its flags as this user, and the MCP config it reads
/// names the hub's server.
pub async fn preflight(config: &RunnerConfig, env: &Environment) -> Vec<Check> {
    let mut checks = vec![cli_check(&config.harness, env).await];
    if config.harness.root_needs_sandbox() {
        checks.push(root_check(env));
    }
    if let Some(check) = mcp_check(&config.harness, &config.agent_args, env) {
        checks.push(check);
    }
    checks
}

/// The agent CLI on `PATH` (or the `--harness-cmd` program) and, for Claude Code and
/// Codex, its `--version`. An arbitrary program is not run: `--version` may mean work.
pub async fn cli_check(harness: &Harness, env: &Environment) -> Check {
    let program = harness.program_path();
    let name = "agent CLI";
    let Some(found) = find_program(&program, env.path.as_deref()) else {
        let fix = match harness.install_hint() {
            Some(install) => format!(
                "install {} ({install}) or put `{}` on PATH; or choose another CLI with --harness / --harness-cmd",
                harness.name(),
                program.display()
            ),
            None => "check --harness-cmd (HARNESS_CMD) or the harness file's `program`: the program must \
                     exist and be executable"
                .to_string(),
        };
        return Check::fail(name, format!("{} is not found or not executable", program.display()), fix);
    };
    if !harness.checks_version() {
        return Check::pass(name, format!("{}", found.display()));
    }
    let mut command = tokio::process::Command::new(&found);
    command
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    match tokio::time::timeout(VERSION_TIMEOUT, command.output()).await {
        Ok(Ok(output)) if output.status.success() => {
            // pi prints its version on stderr.
            let said = if output.stdout.is_empty() { &output.stderr } else { &output.stdout };
            let version = String::from_utf8_lossy(said).lines().next().unwrap_or("").trim().to_string();
            Check::pass(name, format!("{} {version}", found.display()))
        }
        Ok(Ok(output)) => Check::fail(
            name,
            format!(
                "`{} --version` failed ({}): {}",
                found.display(),
                output.status,
                tail(&String::from_utf8_lossy(&output.stderr), 3)
            ),
            "reinstall the CLI, or run it by hand to see what it needs",
        ),
        Ok(Err(err)) => Check::fail(
            name,
            format!("cannot run {}: {err}", found.display()),
            "check the program's permissions and its interpreter",
        ),
        Err(_) => Check::fail(
            name,
            format!("`{} --version` did not answer within {}s", found.display(), VERSION_TIMEOUT.as_secs()),
            "run it by hand to see what it waits for",
        ),
    }
}

/// As root, Claude Code refuses `--dangerously-skip-permissions` unless told it runs in
/// a sandbox, and every run would fail at once.
pub fn root_check(env: &Environment) -> Check {
    let name = "root and sandbox";
    if env.euid != 0 {
        return Check::pass(name, "not root");
    }
    if env.is_sandbox.as_deref() == Some("1") {
        return Check::pass(name, "root, with IS_SANDBOX=1");
    }
    Check::fail(
        name,
        "running as root without IS_SANDBOX=1: Claude Code refuses --dangerously-skip-permissions as root",
        "set IS_SANDBOX=1 when this runs in a container or sandbox, or run the runner as a normal user",
    )
}

/// The MCP entry the CLI will read; `None` for a program the runner knows nothing of.
pub fn mcp_check(harness: &Harness, agent_args: &[String], env: &Environment) -> Option<Check> {
    let name = "MCP config";
    match harness.mcp() {
        McpConfig::Claude => {
            if agent_args.iter().any(|arg| arg.starts_with("--mcp-config")) {
                return Some(Check::pass(name, "given with --mcp-config"));
            }
            let project = env.cwd.join(".mcp.json");
            if has_server(read_json(&project).as_ref().and_then(|json| json.get("mcpServers"))) {
                return Some(Check::pass(name, format!("{} names {MCP_SERVER_NAME}", project.display())));
            }
            // User and local scopes live in ~/.claude.json.
            if let Some(user) = env.home.as_ref().map(|home| home.join(".claude.json"))
                && let Some(json) = read_json(&user)
            {
                let local = json
                    .get("projects")
                    .and_then(|projects| projects.get(env.cwd.to_string_lossy().as_ref()))
                    .and_then(|project| project.get("mcpServers"));
                if has_server(json.get("mcpServers")) || has_server(local) {
                    return Some(Check::pass(name, format!("{} names {MCP_SERVER_NAME}", user.display())));
                }
            }
            Some(Check::fail(
                name,
                format!("no {MCP_SERVER_NAME} server in {} (nor in ~/.claude.json)", project.display()),
                format!(
                    "run `swarm connect` in {} (where the runner starts), so Claude Code reaches the hub",
                    env.cwd.display()
                ),
            ))
        }
        McpConfig::Codex => {
            let file = match (&env.codex_home, &env.home) {
                (Some(codex_home), _) => codex_home.join("config.toml"),
                (None, Some(home)) => home.join(".codex").join("config.toml"),
                (None, None) => {
                    return Some(Check::fail(
                        name,
                        "HOME and CODEX_HOME are unset: Codex has no config.toml to read",
                        "set HOME or CODEX_HOME, then run `swarm connect --harness codex`",
                    ));
                }
            };
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            // The table header `swarm connect` writes, quoted or not.
            let found = text.lines().any(|line| {
                let line = line.trim().replace('"', "");
                line == format!("[mcp_servers.{MCP_SERVER_NAME}]")
            });
            Some(if found {
                Check::pass(name, format!("{} has [mcp_servers.{MCP_SERVER_NAME}]", file.display()))
            } else {
                Check::fail(
                    name,
                    format!("no [mcp_servers.{MCP_SERVER_NAME}] in {}", file.display()),
                    "run `swarm connect --harness codex`, so Codex reaches the hub",
                )
            })
        }
        McpConfig::Gemini => Some(gemini_mcp_check(env)),
        McpConfig::Opencode => Some(opencode_mcp_check(env)),
        McpConfig::Pi => Some(pi_extension_check(env)),
        McpConfig::None => None,
    }
}

/// The Gemini CLI reads `mcpServers` from the project's `.gemini/settings.json` (what `swarm
/// connect --harness gemini` writes; the runner trusts the project with `--skip-trust`) or
/// from `~/.gemini/settings.json`.
fn gemini_mcp_check(env: &Environment) -> Check {
    let name = "MCP config";
    let project = env.cwd.join(".gemini/settings.json");
    let user = env.home.as_ref().map(|home| home.join(".gemini/settings.json"));
    for file in std::iter::once(&project).chain(user.as_ref()) {
        if has_server(read_json(file).as_ref().and_then(|json| json.get("mcpServers"))) {
            return Check::pass(name, format!("{} names {MCP_SERVER_NAME}", file.display()));
        }
    }
    Check::fail(
        name,
        format!("no {MCP_SERVER_NAME} server in the mcpServers of {}", project.display()),
        format!(
            "run `swarm connect --harness gemini` in {}, so the Gemini CLI reaches the hub",
            env.cwd.display()
        ),
    )
}

/// pi has no MCP client: the hub's tools come from the extension `swarm connect --harness pi`
/// writes into the project (`.pi/extensions/agent-swarm.ts`), or one in `~/.pi/agent/extensions`.
fn pi_extension_check(env: &Environment) -> Check {
    let name = "MCP config";
    let file = "extensions/agent-swarm.ts";
    let project = env.cwd.join(".pi").join(file);
    let user = env.home.as_ref().map(|home| home.join(".pi/agent").join(file));
    for path in std::iter::once(&project).chain(user.as_ref()) {
        if std::fs::read_to_string(path).is_ok_and(|text| text.contains("tools/list")) {
            return Check::pass(name, format!("{} gives pi the {MCP_SERVER_NAME} tools", path.display()));
        }
    }
    Check::fail(
        name,
        format!("no {MCP_SERVER_NAME} extension at {} (pi has no MCP client)", project.display()),
        format!("run `swarm connect --harness pi` in {}, so pi gets the hub's tools", env.cwd.display()),
    )
}

/// opencode reads its MCP servers from `opencode.json` in the project (what `swarm connect
/// --harness opencode` writes) or from `~/.config/opencode/opencode.json`.
fn opencode_mcp_check(env: &Environment) -> Check {
    let name = "MCP config";
    let project = env.cwd.join("opencode.json");
    let global = env.home.as_ref().map(|home| home.join(".config/opencode/opencode.json"));
    for file in std::iter::once(&project).chain(global.as_ref()) {
        if has_server(read_json(file).as_ref().and_then(|json| json.get("mcp"))) {
            return Check::pass(name, format!("{} names {MCP_SERVER_NAME}", file.display()));
        }
    }
    Check::fail(
        name,
        format!("no {MCP_SERVER_NAME} server in the `mcp` section of {}", project.display()),
        format!(
            "run `swarm connect --harness opencode` in {}, so opencode reaches the hub",
            env.cwd.display()
        ),
    )
}

/// The CLI's hooks (Claude Code's, the Gemini CLI's), which deliver mail and stop tools of a
/// cancelled task.
pub fn hooks_check(harness: &Harness, env: &Environment) -> Check {
    let name = "hooks";
    let (dir, files): (_, &[&str]) = match harness.mcp() {
        McpConfig::Gemini => (env.cwd.join(".gemini"), &["settings.json"]),
        // pi's hooks are the extension's.
        McpConfig::Pi => (env.cwd.join(".pi/extensions"), &["agent-swarm.ts"]),
        _ => (env.cwd.join(".claude"), &["settings.json", "settings.local.json"]),
    };
    for file in files {
        let path = dir.join(file);
        if std::fs::read_to_string(&path).is_ok_and(|text| text.contains("swarm hook")) {
            return Check::pass(name, format!("{} calls `swarm hook`", path.display()));
        }
    }
    Check::fail(
        name,
        format!("no `swarm hook` in {}/{}", dir.display(), files[0]),
        format!("run `swarm connect --harness {}` in {}", harness.name(), env.cwd.display()),
    )
}

/// The hub answers, takes the key, and knows the agent. `agent_id_given` says whether
/// `config.agent_id` is the user's (AGENT_ID) or one made up for this check, which no
/// runner will use: then the check says what `swarm worker` will do instead of looking it
/// up. An agent not registered yet passes too: `swarm worker` registers it on its first
/// start, so the README's order (connect, doctor, worker) works.
pub async fn hub_checks(config: &RunnerConfig, agent_id_given: bool) -> Vec<Check> {
    let client = match Client::new(ClientConfig {
        base_url: config.hub_url.clone(),
        api_key: config.api_key.clone(),
        agent_id: Some(config.agent_id),
    }) {
        Ok(client) => client,
        Err(err) => return vec![Check::fail("hub", err.to_string(), "check MCP_BASE_URL (--url)")],
    };
    let mut checks = Vec::new();
    match client.health().await {
        Ok(health) => checks
            .push(Check::pass("hub", format!("{} answers (version {})", config.hub_url, health.version))),
        Err(err) => {
            checks.push(Check::fail(
                "hub",
                err.to_string(),
                "start the hub (`swarm serve`) or point MCP_BASE_URL (--url) at it",
            ));
            return checks;
        }
    }
    match client.get_agent(config.agent_id, false).await {
        // The lookup of a made-up id only tells whether the key is accepted.
        Ok(_) if !agent_id_given => {
            checks.push(Check::pass("API key", "accepted"));
            checks.push(no_agent_id_check());
        }
        Err(err) if !agent_id_given && err.status().is_some_and(|status| status.as_u16() == 404) => {
            checks.push(Check::pass("API key", "accepted"));
            checks.push(no_agent_id_check());
        }
        Ok(agent) => {
            checks.push(Check::pass("API key", "accepted"));
            checks.push(Check::pass(
                "agent",
                format!(
                    "{} ({}) is registered, {}",
                    agent.agent.name,
                    config.agent_id,
                    agent.agent.status.as_str()
                ),
            ));
        }
        Err(err) if err.status().is_some_and(|status| status.as_u16() == 404) => {
            checks.push(Check::pass("API key", "accepted"));
            checks.push(Check::pass(
                "agent",
                format!(
                    "{} is not registered yet: `swarm worker` (or `swarm lead`) registers it on its first start",
                    config.agent_id
                ),
            ));
        }
        Err(err) => checks.push(Check::fail(
            "API key",
            err.to_string(),
            "set API_KEY to the hub's key (`swarm serve` prints where it keeps it)",
        )),
    }
    checks.push(mcp_endpoint_check(config).await);
    checks
}

/// Without AGENT_ID there is no agent to look up: what the runner will do, and how to keep
/// the agent it makes.
fn no_agent_id_check() -> Check {
    Check::pass(
        "agent",
        "no AGENT_ID: `swarm worker` (or `swarm lead`) makes a new agent on its first start and prints \
         its id; set AGENT_ID to that id to keep the same agent (and resume its paused tasks) across restarts",
    )
}

/// The hub's `/mcp`, as the agent CLI reaches it when the runner starts it (the runner
/// gives it `MCP_BASE_URL`, `API_KEY` and `AGENT_ID`): an MCP `initialize` answered. A
/// hub whose HTTP API works may still refuse MCP (a proxy that drops `/mcp` or its
/// event streams), and then every tool call of the agent fails.
pub async fn mcp_endpoint_check(config: &RunnerConfig) -> Check {
    let name = "MCP endpoint";
    let url = format!("{}/mcp", config.hub_url.trim_end_matches('/'));
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "swarm-doctor", "version": env!("CARGO_PKG_VERSION")},
        },
    });
    let http = reqwest::Client::new();
    let mut request = http
        .post(&url)
        .header("Accept", "application/json, text/event-stream")
        .header("X-Agent-ID", config.agent_id.to_string())
        .json(&initialize);
    if let Some(key) = &config.api_key {
        request = request.bearer_auth(key);
    }
    let exchange = async {
        let response = request.send().await?;
        let (status, session) = (response.status(), response.headers().get("mcp-session-id").cloned());
        Ok::<_, reqwest::Error>((status, session, response.text().await?))
    };
    let fix = "serve the hub with /mcp reachable at MCP_BASE_URL (a proxy in front must pass /mcp and its \
               event streams), and set API_KEY to the hub's key";
    match tokio::time::timeout(VERSION_TIMEOUT, exchange).await {
        Ok(Ok((status, session, body))) if status.is_success() && body.contains("serverInfo") => {
            // The check's session is of no further use: end it rather than let it linger.
            if let Some(session) = session {
                let _ = http.delete(&url).header("mcp-session-id", session).send().await;
            }
            Check::pass(name, format!("{url} answers MCP initialize"))
        }
        Ok(Ok((status, _, body))) => {
            Check::fail(name, format!("{url} answered {status} to MCP initialize: {}", tail(&body, 3)), fix)
        }
        Ok(Err(err)) => Check::fail(name, format!("{url}: {err}"), fix),
        Err(_) => {
            Check::fail(name, format!("{url} did not answer within {}s", VERSION_TIMEOUT.as_secs()), fix)
        }
    }
}

/// `program` as the OS would start it: a path as given, a bare name from `PATH`.
fn find_program(program: &Path, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return is_executable(program).then(|| program.to_path_buf());
    }
    std::env::split_paths(path?).map(|dir| dir.join(program)).find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn has_server(servers: Option<&Value>) -> bool {
    servers.and_then(|servers| servers.get(MCP_SERVER_NAME)).is_some()
}

/// The last `lines` non-empty lines of `text`.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let kept: Vec<&str> = text.lines().filter(|line| !line.trim().is_empty()).collect();
    kept[kept.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(dir: &Path) -> Environment {
        Environment {
            path: Some(dir.join("bin").into_os_string()),
            euid: 1000,
            is_sandbox: None,
            home: Some(dir.join("home")),
            codex_home: None,
            cwd: dir.join("project"),
        }
    }

    fn script(dir: &Path, name: &str, body: &str) {
        use std::os::unix::fs::PermissionsExt;
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join(name), format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[tokio::test]
    async fn the_cli_must_be_on_path_and_answer_its_version() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let missing = cli_check(&Harness::claude(), &env).await;
        assert!(!missing.passed && missing.fix.as_deref().unwrap().contains("npm install"), "{missing}");

        script(dir.path(), "claude", "echo '2.0.14 (Claude Code)'");
        let found = cli_check(&Harness::claude(), &env).await;
        assert!(found.passed && found.detail.ends_with("2.0.14 (Claude Code)"), "{found}");

        script(dir.path(), "codex", "echo 'not logged in' >&2; exit 3");
        let broken = cli_check(&Harness::codex(), &env).await;
        assert!(!broken.passed && broken.detail.contains("not logged in"), "{broken}");

        let program = Harness::from_command_line("no-such-agent --fast").unwrap();
        assert!(!cli_check(&program, &env).await.passed);
    }

    #[test]
    fn root_needs_is_sandbox_for_claude() {
        let dir = tempfile::tempdir().unwrap();
        let mut env = env(dir.path());
        assert!(root_check(&env).passed);
        env.euid = 0;
        let refused = root_check(&env);
        assert!(!refused.passed && refused.fix.as_deref().unwrap().contains("IS_SANDBOX=1"), "{refused}");
        env.is_sandbox = Some("1".into());
        assert!(root_check(&env).passed);
    }

    #[test]
    fn the_mcp_entry_is_where_each_cli_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        std::fs::create_dir_all(&env.cwd).unwrap();
        let claude = mcp_check(&Harness::claude(), &[], &env).unwrap();
        assert!(!claude.passed && claude.fix.as_deref().unwrap().contains("swarm connect"), "{claude}");
        std::fs::write(env.cwd.join(".mcp.json"), r#"{"mcpServers":{"agent-swarm":{"type":"http"}}}"#)
            .unwrap();
        assert!(mcp_check(&Harness::claude(), &[], &env).unwrap().passed);

        assert!(!mcp_check(&Harness::codex(), &[], &env).unwrap().passed);
        let codex_dir = dir.path().join("home/.codex");
        std::fs::create_dir_all(&codex_dir).unwrap();
        std::fs::write(
            codex_dir.join("config.toml"),
            "[mcp_servers.agent-swarm]\nurl = \"http://hub/mcp\"\n",
        )
        .unwrap();
        assert!(mcp_check(&Harness::codex(), &[], &env).unwrap().passed);
        assert_eq!(mcp_check(&Harness::from_command_line("agent").unwrap(), &[], &env), None);

        let pi = Harness::built_in("pi").unwrap();
        let missing = mcp_check(&pi, &[], &env).unwrap();
        assert!(!missing.passed && missing.fix.as_deref().unwrap().contains("--harness pi"), "{missing}");
        assert!(!hooks_check(&pi, &env).passed);
        std::fs::create_dir_all(env.cwd.join(".pi/extensions")).unwrap();
        std::fs::write(
            env.cwd.join(".pi/extensions/agent-swarm.ts"),
            "// `swarm hook <event>`\nawait rpc(target, \"tools/list\", {});\n",
        )
        .unwrap();
        assert!(mcp_check(&pi, &[], &env).unwrap().passed && hooks_check(&pi, &env).passed);

        let gemini = Harness::built_in("gemini").unwrap();
        let missing = mcp_check(&gemini, &[], &env).unwrap();
        assert!(!missing.passed && missing.fix.as_deref().unwrap().contains("--harness gemini"), "{missing}");
        assert!(!hooks_check(&gemini, &env).passed);
        std::fs::create_dir_all(env.cwd.join(".gemini")).unwrap();
        std::fs::write(
            env.cwd.join(".gemini/settings.json"),
            r#"{"mcpServers":{"agent-swarm":{"httpUrl":"http://hub/mcp"}},"hooks":{"BeforeAgent":[{"hooks":[{"type":"command","command":"swarm hook user-prompt-submit"}]}]}}"#,
        )
        .unwrap();
        assert!(mcp_check(&gemini, &[], &env).unwrap().passed);
        assert!(hooks_check(&gemini, &env).passed);
        assert!(!hooks_check(&Harness::claude(), &env).passed, "Claude Code reads .claude, not .gemini");

        let opencode = Harness::built_in("opencode").unwrap();
        let missing = mcp_check(&opencode, &[], &env).unwrap();
        assert!(
            !missing.passed && missing.fix.as_deref().unwrap().contains("--harness opencode"),
            "{missing}"
        );
        std::fs::write(env.cwd.join("opencode.json"), r#"{"mcp":{"agent-swarm":{"type":"remote"}}}"#)
            .unwrap();
        assert!(mcp_check(&opencode, &[], &env).unwrap().passed);
    }
}
