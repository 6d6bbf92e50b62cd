//! The runner fixture: a real `swarm worker` or `swarm lead` process (`Runner`, started
//! from a `RunnerSetup`) driving the stand-in agent, what the stand-in recorded of its
//! runs, and the hub reads the runner tests (here and in other modules) check.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex},
};

use serde_json::Value;

use crate::hub::{Hub, SWARM};
use crate::support::child_exit_within;
pub(crate) use crate::support::{WITHIN, eventually};

pub(super) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A runner process (`swarm worker` or `swarm lead`) driving the stand-in agent.
pub(crate) struct Runner {
    pub(super) child: Child,
    pub(crate) agent_id: String,
    /// Its terminal lines so far.
    lines: Arc<Mutex<Vec<String>>>,
    /// Reads them; done once the runner has exited and its stderr is drained.
    reader: Option<std::thread::JoinHandle<()>>,
}

/// A runner's settings beyond the defaults.
pub(crate) struct RunnerSetup<'a> {
    pub role: &'a str,
    pub agent_id: String,
    /// Where the stand-in records its runs; also holds `logs/`.
    pub dir: &'a Path,
    pub env: Vec<(&'a str, String)>,
    pub flags: Vec<&'a str>,
    /// `claude` or `codex`: the runner's own harness for that CLI, with the stand-in on
    /// `PATH` under that name. Otherwise `--harness cmd` with the stand-in.
    pub harness: Option<&'a str>,
    /// The runner's (and so its agents') working directory: the project.
    pub cwd: Option<&'a Path>,
    /// `--harness-cmd` instead of the stand-in (still given `stand-in-agent` after `--`).
    pub harness_cmd: Option<String>,
}

impl<'a> RunnerSetup<'a> {
    pub(crate) fn worker(dir: &'a Path) -> Self {
        RunnerSetup {
            role: "worker",
            agent_id: new_id(),
            dir,
            env: Vec::new(),
            flags: Vec::new(),
            harness: None,
            cwd: None,
            harness_cmd: None,
        }
    }

    pub(crate) fn env(mut self, name: &'a str, value: impl Into<String>) -> Self {
        self.env.push((name, value.into()));
        self
    }
}

impl Runner {
    pub(crate) fn start(hub: &Hub, setup: RunnerSetup<'_>) -> Runner {
        let records = records_dir(setup.dir);
        std::fs::create_dir_all(&records).unwrap();
        let mut command = Command::new(SWARM);
        command.arg(setup.role);
        match setup.harness {
            None => {
                command.args([
                    "--harness",
                    "cmd",
                    "--harness-cmd",
                    setup.harness_cmd.as_deref().unwrap_or(SWARM),
                ]);
            }
            Some(cli) => {
                command.args(["--harness", cli]).env("PATH", path_with_stand_in_as(cli, setup.dir));
                // What the runner checks before taking work: tests run as root (as in a
                // container), and the CLI must find the hub's MCP entry.
                let project = setup.cwd.unwrap_or(setup.dir);
                let mcp = project.join(".mcp.json");
                if !mcp.exists() {
                    std::fs::write(
                        &mcp,
                        r#"{"mcpServers":{"agent-swarm":{"type":"http","url":"http://x/mcp"}}}"#,
                    )
                    .unwrap();
                }
                std::fs::create_dir_all(setup.dir.join("codex")).unwrap();
                std::fs::write(
                    setup.dir.join("codex/config.toml"),
                    "[mcp_servers.agent-swarm]\nurl = \"x\"\n",
                )
                .unwrap();
            }
        }
        command
            .args(["--session-id", "test-session"])
            .arg("--log-dir")
            .arg(setup.dir.join("logs"))
            .args(&setup.flags);
        if setup.harness.is_none() {
            command.args(["--", "stand-in-agent"]);
        }
        // Never the test's own directory: it is in swarm's repository, where a runner
        // with several slots would make git worktrees.
        command.current_dir(setup.cwd.unwrap_or(setup.dir));
        command
            .env("MCP_BASE_URL", &hub.base_url)
            .env("AGENT_ID", &setup.agent_id)
            .env("STAND_IN_RECORD_DIR", &records)
            .env("RUST_LOG", "warn");
        for name in [
            "API_KEY",
            "AGENT_TOKEN",
            "ACCEPT_READABLE_HUB_FILES",
            "AGENT_NAME",
            "YOLO",
            "AI_LOOP",
            "MAX_CONCURRENT_TASKS",
            "SHUTDOWN_TIMEOUT",
            "SYSTEM_PROMPT",
            "SYSTEM_PROMPT_FILE",
            "HARNESS",
            "HARNESS_CMD",
            "TASK_ID",
            "STAND_IN_BEHAVIOUR",
            "STAND_IN_EXIT_CODE",
            "STAND_IN_SLEEP_MS",
            "STAND_IN_INBOX_MCP",
            "STAND_IN_HOLD_UNTIL",
            "STAND_IN_HOLD_ONLY",
            "IS_SANDBOX",
            "CODEX_HOME",
            "SKIP_PREFLIGHT",
            "QUICK_EXIT_MS",
            "ENV_FAILURE_LIMIT",
            "WORKTREE",
        ] {
            command.env_remove(name);
        }
        if setup.harness.is_some() {
            command.env("IS_SANDBOX", "1").env("CODEX_HOME", setup.dir.join("codex"));
        }
        // Token mode (SWARM_TEST_AGENT_AUTH=token): the operator registers the agent and
        // hands its runner the token, as a deployment would.
        if uuid::Uuid::parse_str(&setup.agent_id).is_ok() {
            let name =
                setup.env.iter().find(|(name, _)| *name == "AGENT_NAME").map(|(_, value)| value.clone());
            let name = name.unwrap_or_else(|| format!("{}-{}", setup.role, &setup.agent_id[..8]));
            let slots = setup.env.iter().find(|(name, _)| *name == "MAX_CONCURRENT_TASKS");
            let slots = slots.and_then(|(_, value)| value.parse().ok()).unwrap_or(1);
            if let Some(token) = hub.register_for_token(&setup.agent_id, &name, setup.role == "lead", slots) {
                // The test's runner is the hub's OS user, which can read the hub's files:
                // what `trust_tokens` checks is refused; here the token's rules are tested.
                command.env("AGENT_TOKEN", token).env("ACCEPT_READABLE_HUB_FILES", "1");
            }
        }
        for (name, value) in &setup.env {
            command.env(name, value);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the runner starts");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[runner] {line}");
                sink.lock().unwrap().push(line);
            }
        });
        Runner { child, agent_id: setup.agent_id, lines, reader: Some(reader) }
    }

    pub(crate) fn output(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then wait for the runner to end.
    pub(crate) fn terminate(&mut self) -> ExitStatus {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        self.wait()
    }

    pub(crate) fn wait(&mut self) -> ExitStatus {
        let Some(status) = child_exit_within(&mut self.child, WITHIN) else {
            panic!("the runner did not end within {WITHIN:?}:\n{}", self.output());
        };
        // Its last lines may still be in the pipe, and they are what the caller checks
        // next. Only the runner holds the pipe (its agents write to pipes of its own).
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        status
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `PATH` with a folder in front holding an executable `cli` (`claude`, `codex`) that is
/// the stand-in speaking as that CLI.
fn path_with_stand_in_as(cli: &str, dir: &Path) -> std::ffi::OsString {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let shim = bin.join(cli);
    // The stand-in refuses any command line but the agent's; the runner asks for the version first.
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo '9.9.9 (stand-in {cli})'; exit 0; }}\n\
             exec '{SWARM}' stand-in-agent --as {cli} -- \"$@\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut path = bin.into_os_string();
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    path
}

pub(crate) fn records_dir(dir: &Path) -> PathBuf {
    dir.join("records")
}

/// One stand-in run as it recorded itself.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub(crate) pid: u64,
    start: u128,
    pub(crate) end: Option<u128>,
    pub(crate) prompt: String,
    pub(super) task_id_env: Option<String>,
    pub(crate) trigger: Option<String>,
}

pub(crate) fn records(dir: &Path) -> Vec<Record> {
    let dir = records_dir(dir);
    let read =
        |path: PathBuf| -> Option<Value> { serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok() };
    let mut records = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap().map_while(Result::ok) {
        let path = entry.path();
        if path.extension().is_none_or(|extension| extension != "start") {
            continue;
        }
        let Some(start) = read(path.clone()) else { continue };
        let end = read(path.with_extension("end"));
        let at = |value: &Value| value["at"].as_str().unwrap().parse::<u128>().unwrap();
        records.push(Record {
            pid: start["pid"].as_u64().unwrap(),
            start: at(&start),
            end: end.as_ref().map(at),
            prompt: start["prompt"].as_str().unwrap().to_string(),
            task_id_env: start["taskIdEnv"].as_str().map(str::to_string),
            trigger: start["trigger"].as_str().map(str::to_string),
        });
    }
    records.sort_by_key(|record| record.start);
    records
}

pub(crate) async fn task(hub: &Hub, id: &str) -> Value {
    let (status, body) = hub.get(&format!("/api/tasks/{id}"), None).await;
    assert_eq!(status, 200, "{body}");
    body
}

pub(crate) async fn task_in(hub: &Hub, id: &str, statuses: &[&str]) -> Value {
    eventually(&format!("task {id} to be {statuses:?}"), || async {
        let seen = task(hub, id).await;
        statuses.contains(&seen["status"].as_str().unwrap()).then_some(seen)
    })
    .await
}

pub(crate) async fn create(hub: &Hub, body: Value) -> String {
    let (status, task) = hub.post("/api/tasks", None, body).await;
    assert_eq!(status, 201, "{task}");
    task["id"].as_str().unwrap().to_string()
}

pub(crate) async fn agent(hub: &Hub, id: &str) -> Option<Value> {
    let (status, body) = hub.get(&format!("/api/agents/{id}"), None).await;
    (status == 200).then_some(body)
}

/// Waits until the runner's agent is registered and its poll is parked (idle).
pub(crate) async fn registered(hub: &Hub, runner: &Runner) -> Value {
    eventually("the runner to register its agent", || agent(hub, &runner.agent_id)).await
}

pub(crate) fn event_types(task: &Value) -> Vec<String> {
    task["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["eventType"].as_str().unwrap().to_string())
        .collect()
}

/// Whether a process runs: a zombie (dead, waiting for its new parent to reap it) does not.
pub(crate) fn is_alive(pid: u64) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state ...`: the state follows the last parenthesis.
    let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start()).and_then(|rest| rest.chars().next());
    !matches!(state, Some('Z' | 'X'))
}

/// The most runs that were under way at one moment.
pub(super) fn max_overlap(records: &[Record]) -> usize {
    let mut edges: Vec<(u128, i32)> = Vec::new();
    for record in records {
        edges.push((record.start, 1));
        edges.push((record.end.expect("every run ended"), -1));
    }
    // At one instant, an end comes before a start.
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    most as usize
}
