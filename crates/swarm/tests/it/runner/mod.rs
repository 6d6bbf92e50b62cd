//! `swarm worker` and `swarm lead` against the real hub, with real child processes: the
//! agent CLI is `swarm stand-in-agent`, a scripted agent that acts through the hub's MCP
//! endpoint and records each of its runs in a folder (see `crates/swarm/src/stand_in.rs`).

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::hub::{Hub, SWARM, sqlite_file};
pub(crate) use crate::support::{WITHIN, eventually};

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A runner process (`swarm worker` or `swarm lead`) driving the stand-in agent.
pub(crate) struct Runner {
    child: Child,
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
                command.env("AGENT_TOKEN", token);
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
        let deadline = Instant::now() + WITHIN;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Its last lines may still be in the pipe, and they are what the caller
                // checks next. Only the runner holds the pipe (its agents write to pipes of its own).
                if let Some(reader) = self.reader.take() {
                    let _ = reader.join();
                }
                return status;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the runner did not end within {WITHIN:?}:\n{}", self.output());
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
    task_id_env: Option<String>,
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
fn max_overlap(records: &[Record]) -> usize {
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

#[tokio::test]
async fn a_worker_runner_completes_an_assigned_task_and_logs_it() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    // YOLO=0, as the reference's deployments write it, is no error and means no --yolo.
    let mut runner = Runner::start(&hub, RunnerSetup::worker(dir.path()).env("YOLO", "0"));
    let registered = registered(&hub, &runner).await;
    assert_eq!(registered["isLead"], false);
    assert_eq!(registered["name"], format!("worker-{}", &runner.agent_id[..8]), "AGENT_NAME's default");

    let id = create(&hub, json!({"task": "Write the release notes", "agentId": runner.agent_id})).await;
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["output"], "stand-in finished: Write the release notes");

    let runs = records(dir.path());
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].prompt, format!("/work-on-task {id}"));
    assert_eq!(runs[0].task_id_env.as_deref(), Some(id.as_str()), "the agent gets TASK_ID");

    // The run's log file opens with its metadata line; its output went to the hub too.
    // The runner writes the file through a buffer flushed when the agent has exited, which
    // may come after the task is seen completed: wait for the agent's last line.
    let log_dir = dir.path().join("logs").join("test-session");
    let text = eventually("the run's log file, complete", || async {
        let path = std::fs::read_dir(&log_dir).ok()?.map_while(Result::ok).map(|entry| entry.path()).find(
            |path| path.file_name().unwrap().to_string_lossy().ends_with(&format!("-{}.jsonl", &id[..8])),
        )?;
        std::fs::read_to_string(path).ok().filter(|text| text.contains(r#""type":"result""#))
    })
    .await;
    let metadata: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(metadata["type"], "worker_metadata");
    assert_eq!(metadata["sessionId"], "test-session");
    assert_eq!(metadata["trigger"], "task_assigned");
    assert_eq!(metadata["yolo"], false);
    assert!(metadata["prompt"].as_str().unwrap().starts_with("/work-on-task "));
    assert!(
        text.lines().any(|line| line.contains(r#""type":"result""#)),
        "the agent's output follows:\n{text}"
    );
    let logs = eventually("session logs at the hub", || async {
        let (_, body) = hub.get(&format!("/api/tasks/{id}/session-logs"), None).await;
        let logs = body["logs"].as_array().cloned().unwrap_or_default();
        (logs.len() >= 2).then_some(logs)
    })
    .await;
    assert!(logs.iter().all(|log| log["sessionId"] == "test-session" && log["cli"] == "swarm"), "{logs:?}");
    let costs = eventually("the run's cost at the hub", || async {
        let (_, body) = hub.get(&format!("/api/session-costs?taskId={id}"), None).await;
        body["costs"].as_array().filter(|costs| !costs.is_empty()).cloned()
    })
    .await;
    assert_eq!(costs[0]["agentId"], runner.agent_id.as_str());

    assert!(runner.terminate().success(), "SIGTERM with nothing running is a clean stop");
    assert_eq!(
        agent(&hub, &runner.agent_id).await.unwrap()["status"],
        "offline",
        "POST /close on the way out"
    );
}

#[tokio::test]
async fn an_offered_task_is_reviewed_accepted_and_then_done() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let runner = Runner::start(&hub, RunnerSetup::worker(dir.path()));
    registered(&hub, &runner).await;

    let id = create(&hub, json!({"task": "Fix the flaky test", "offeredTo": runner.agent_id})).await;
    let done = task_in(&hub, &id, &["completed", "failed", "unassigned"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(event_types(&done).contains(&"task_accepted".to_string()), "{done}");

    let runs = records(dir.path());
    let prompts: Vec<&str> = runs.iter().map(|run| run.prompt.as_str()).collect();
    assert_eq!(prompts, [format!("/review-offered-task {id}"), format!("/work-on-task {id}")]);
    assert_eq!(runs[0].trigger.as_deref(), Some("task_offered"));
}

#[tokio::test]
async fn with_three_slots_each_of_twelve_tasks_runs_once_and_never_more_than_three_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let setup =
        RunnerSetup::worker(dir.path()).env("MAX_CONCURRENT_TASKS", "3").env("STAND_IN_SLEEP_MS", "200");
    let runner = Runner::start(&hub, setup);
    assert_eq!(
        registered(&hub, &runner).await["maxTasks"],
        3,
        "the agent's maxTasks is MAX_CONCURRENT_TASKS"
    );

    // Half assigned to the agent, half in the pool (claimed for it by its polls).
    let mut ids = Vec::new();
    for n in 0..12 {
        let body = if n % 2 == 0 {
            json!({"task": format!("task {n}"), "agentId": runner.agent_id})
        } else {
            json!({"task": format!("task {n}")})
        };
        ids.push(create(&hub, body).await);
    }
    for id in &ids {
        let done = task_in(&hub, id, &["completed", "failed"]).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["agentId"], runner.agent_id.as_str());
    }

    let runs = eventually("every run to record its end", || async {
        let runs = records(dir.path());
        runs.iter().all(|run| run.end.is_some()).then_some(runs)
    })
    .await;
    let mut prompts: Vec<String> = runs.iter().map(|run| run.prompt.clone()).collect();
    prompts.sort();
    let mut expected: Vec<String> = ids.iter().map(|id| format!("/work-on-task {id}")).collect();
    expected.sort();
    assert_eq!(prompts, expected, "each task ran exactly once");
    let most = max_overlap(&runs);
    assert!(most <= 3, "at most MAX_CONCURRENT_TASKS runs at once, saw {most}");
    eprintln!("most runs at once: {most}");
}

#[tokio::test]
async fn while_there_is_no_work_no_agent_is_started() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let runner = Runner::start(&hub, RunnerSetup::worker(dir.path()));
    registered(&hub, &runner).await;
    eventually("the runner to wait for work", || async {
        runner.output().contains("waiting for work").then_some(())
    })
    .await;

    // Parked at the hub: the runner asked for work, got none, and waits for it.
    hub.parked_polls(1).await;
    assert_eq!(records(dir.path()).len(), 0, "no work, no agent run");
    assert_eq!(agent(&hub, &runner.agent_id).await.unwrap()["status"], "idle");

    let id = create(&hub, json!({"task": "now there is work", "agentId": runner.agent_id})).await;
    task_in(&hub, &id, &["completed"]).await;
    assert_eq!(records(dir.path()).len(), 1, "one task, one run");
}

#[tokio::test]
async fn a_runner_killed_mid_task_loses_it_through_the_lease_and_another_runner_completes_it() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(
        &sqlite_file(dir.path()),
        None,
        &["--lease-seconds", "2", "--rescue-interval-seconds", "1"],
    );
    let first_dir = dir.path().join("first");
    let mut first = Runner::start(&hub, RunnerSetup::worker(&first_dir).env("STAND_IN_BEHAVIOUR", "hang"));
    registered(&hub, &first).await;

    let id = create(&hub, json!({"task": "survive a crash"})).await;
    let run = eventually("the first runner's agent to start", || async { records(&first_dir).pop() }).await;
    let held = task(&hub, &id).await;
    assert_eq!(
        (held["status"].as_str(), held["agentId"].as_str()),
        (Some("in_progress"), Some(first.agent_id.as_str()))
    );

    first.kill();
    // The agent does not outlive its runner (it would keep working on a task the hub
    // hands to someone else).
    eventually("the killed runner's agent to die too", || async { (!is_alive(run.pid)).then_some(()) }).await;

    let second_dir = dir.path().join("second");
    let second = Runner::start(&hub, RunnerSetup::worker(&second_dir));
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["agentId"], second.agent_id.as_str(), "the second runner did it");
    assert!(event_types(&done).contains(&"task_lease_expired".to_string()), "{done}");
    assert_eq!(records(&second_dir).len(), 1);
}

#[tokio::test]
async fn sigterm_pauses_the_running_task_and_the_next_start_resumes_and_completes_it() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let agent_id = new_id();
    let first_dir = dir.path().join("first");
    let setup = RunnerSetup { agent_id: agent_id.clone(), ..RunnerSetup::worker(&first_dir) }
        .env("STAND_IN_BEHAVIOUR", "hang")
        .env("SHUTDOWN_TIMEOUT", "200");
    let mut first = Runner::start(&hub, setup);
    registered(&hub, &first).await;
    let id = create(&hub, json!({"task": "long job", "agentId": agent_id})).await;
    eventually("the agent to start", || async { records(&first_dir).pop() }).await;

    assert!(first.terminate().success(), "a graceful stop:\n{}", first.output());
    let paused = task(&hub, &id).await;
    assert_eq!(paused["status"], "paused", "{paused}");
    assert_eq!(agent(&hub, &agent_id).await.unwrap()["status"], "offline");

    let second_dir = dir.path().join("second");
    let second =
        Runner::start(&hub, RunnerSetup { agent_id: agent_id.clone(), ..RunnerSetup::worker(&second_dir) });
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    let runs = records(&second_dir);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].trigger.as_deref(), Some("task_resumed"));
    drop(second);
}

#[tokio::test]
async fn an_agent_that_exits_without_reporting_leaves_its_task_failed_with_that_reason() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);

    // With YOLO=1 (the reference's spelling of --yolo) the runner keeps going after the
    // failed run.
    let yolo_dir = dir.path().join("yolo");
    let mut setup =
        RunnerSetup::worker(&yolo_dir).env("STAND_IN_BEHAVIOUR", "silent").env("STAND_IN_EXIT_CODE", "3");
    // A silent agent failing at once looks like a broken environment (runner_env.rs);
    // here every exit counts as the task's.
    setup.env.push(("QUICK_EXIT_MS", "0".into()));
    setup.env.push(("YOLO", "1".into()));
    let mut yolo = Runner::start(&hub, setup);
    registered(&hub, &yolo).await;
    for text in ["first", "second"] {
        let id = create(&hub, json!({"task": text, "agentId": yolo.agent_id})).await;
        let failed = task_in(&hub, &id, &["completed", "failed"]).await;
        assert_eq!(failed["status"], "failed", "{failed}");
        let reason = failed["failureReason"].as_str().unwrap();
        assert!(reason.contains("without reporting") && reason.contains("exit code 3"), "{reason}");
    }
    let errors = std::fs::read_to_string(yolo_dir.join("logs/test-session/errors.jsonl")).unwrap();
    let errors: Vec<Value> = errors.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(errors.len(), 2);
    assert!(errors.iter().all(|error| error["exitCode"] == 3 && error["error"] == true), "{errors:?}");
    assert!(yolo.child.try_wait().unwrap().is_none(), "still running");
    assert!(yolo.terminate().success());

    // Without it, the runner stops after the failed run and says how to keep going.
    let strict_dir = dir.path().join("strict");
    let setup = RunnerSetup::worker(&strict_dir)
        .env("STAND_IN_BEHAVIOUR", "silent")
        .env("STAND_IN_EXIT_CODE", "3")
        .env("QUICK_EXIT_MS", "0");
    let mut strict = Runner::start(&hub, setup);
    registered(&hub, &strict).await;
    let id = create(&hub, json!({"task": "third", "agentId": strict.agent_id})).await;
    assert_eq!(task_in(&hub, &id, &["completed", "failed"]).await["status"], "failed");
    let status = strict.wait();
    assert_eq!(status.code(), Some(1), "{}", strict.output());
    assert!(strict.output().contains("--yolo"), "{}", strict.output());
    assert_eq!(agent(&hub, &strict.agent_id).await.unwrap()["status"], "offline");
}

#[tokio::test]
async fn a_lead_runner_reviews_finished_tasks_in_a_run_that_is_about_no_task() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let lead = Runner::start(&hub, RunnerSetup { role: "lead", ..RunnerSetup::worker(dir.path()) });
    assert_eq!(registered(&hub, &lead).await["isLead"], true);

    let worker = new_id();
    let (status, _) = hub.post("/api/agents", Some(&worker), json!({"name": "plain-worker"})).await;
    assert_eq!(status, 201);
    let id = create(&hub, json!({"task": "done by hand", "agentId": worker})).await;
    let (status, body) = hub.post(&format!("/api/tasks/{id}/start"), Some(&worker), json!({})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = hub
        .post(
            &format!("/api/tasks/{id}/finish"),
            Some(&worker),
            json!({"status": "completed", "output": "ok"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    let run = eventually("the lead's run", || async { records(dir.path()).pop() }).await;
    assert_eq!(run.prompt, "1 task(s) finished:");
    assert_eq!(run.trigger.as_deref(), Some("tasks_finished"));
    assert_eq!(run.task_id_env, None, "a trigger that is not a task gets no TASK_ID");
}

#[tokio::test]
async fn a_runner_restarted_after_a_crash_picks_up_the_task_it_still_holds() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let agent_id = new_id();
    let first_dir = dir.path().join("first");
    let setup = RunnerSetup { agent_id: agent_id.clone(), ..RunnerSetup::worker(&first_dir) }
        .env("STAND_IN_BEHAVIOUR", "hang");
    let mut first = Runner::start(&hub, setup);
    registered(&hub, &first).await;
    let id = create(&hub, json!({"task": "interrupted", "agentId": agent_id})).await;
    eventually("the agent to start", || async { records(&first_dir).pop() }).await;
    first.kill();

    // Its lease (45 s by default) has not run out: the task is still in_progress for the
    // agent, and the same agent's next runner takes it up again at once.
    assert_eq!(task(&hub, &id).await["status"], "in_progress");
    let second_dir = dir.path().join("second");
    let _second =
        Runner::start(&hub, RunnerSetup { agent_id: agent_id.clone(), ..RunnerSetup::worker(&second_dir) });
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(records(&second_dir)[0].trigger.as_deref(), Some("task_held"));
}

#[tokio::test]
async fn ai_loop_mode_starts_the_agent_right_away_with_the_default_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let mut setup = RunnerSetup::worker(dir.path()).env("AI_LOOP", "1").env("STAND_IN_SLEEP_MS", "100");
    setup.flags.extend(["-m", "/start-worker please"]);
    let mut runner = Runner::start(&hub, setup);
    registered(&hub, &runner).await;

    // No work exists, yet the agent runs, again and again: it polls by itself.
    let runs = eventually("two agent runs", || async {
        let runs = records(dir.path());
        (runs.len() >= 2).then_some(runs)
    })
    .await;
    assert!(
        runs.iter().all(|run| run.prompt == "/start-worker please" && run.task_id_env.is_none()),
        "{runs:?}"
    );
    assert_eq!(runs[0].trigger.as_deref(), Some("ai_loop"));
    assert!(runner.terminate().success());
}

#[tokio::test]
async fn a_runner_rides_out_a_hub_restart_and_takes_work_from_the_new_hub() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    // A port of our own, so that the restarted hub is where the runner looks for it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let hub = Hub::start_with(&database, None, &["--port", &port]);
    let runner = Runner::start(&hub, RunnerSetup::worker(dir.path()));
    registered(&hub, &runner).await;

    hub.kill();
    eventually("the runner reporting that the hub is gone", || async {
        runner.output().contains("retrying in").then_some(())
    })
    .await;

    let hub = Hub::start_with(&database, None, &["--port", &port]);
    let id = create(&hub, json!({"task": "Work after the outage", "agentId": runner.agent_id})).await;
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    assert!(runner.output().contains("the hub answers again"), "{}", runner.output());
}

/// The `claude` harness itself: the stand-in named `claude` refuses any other command
/// line than the one the reference uses, and answers in stream-json, whose session id,
/// model, cost and tokens reach the hub.
#[tokio::test]
async fn the_claude_harness_runs_claude_with_its_command_line_and_reads_its_stream_json() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let setup = RunnerSetup { harness: Some("claude"), ..RunnerSetup::worker(dir.path()) };
    let runner = Runner::start(&hub, setup);
    registered(&hub, &runner).await;
    let id = create(&hub, json!({"task": "Tidy the changelog", "agentId": runner.agent_id})).await;
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    assert_eq!(done["output"], "stand-in finished: Tidy the changelog");
    let runs = records(dir.path());
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].prompt, format!("/work-on-task {id}"), "the prompt was found after -p");

    let costs = eventually("the run's cost at the hub", || async {
        let (_, body) = hub.get(&format!("/api/session-costs?taskId={id}"), None).await;
        body["costs"].as_array().filter(|costs| !costs.is_empty()).cloned()
    })
    .await;
    assert_eq!(costs[0]["totalCostUsd"], 0.0125, "{costs:?}");
    assert_eq!(costs[0]["inputTokens"], 120);
    assert_eq!(costs[0]["outputTokens"], 45);
    assert_eq!(costs[0]["cacheReadTokens"], 7);
    assert_eq!(costs[0]["model"], "stand-in");
}

/// The `codex` harness: `codex exec --json` with the system prompt in front of the
/// runner's prompt, and Codex's JSONL events read for the answer and the tokens.
#[tokio::test]
async fn the_codex_harness_runs_codex_exec_and_reads_its_json_events() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let setup = RunnerSetup { harness: Some("codex"), ..RunnerSetup::worker(dir.path()) };
    let runner = Runner::start(&hub, setup);
    registered(&hub, &runner).await;
    let id = create(&hub, json!({"task": "Bump the version", "agentId": runner.agent_id})).await;
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    assert_eq!(done["output"], "stand-in finished: Bump the version");

    let costs = eventually("the run's tokens at the hub", || async {
        let (_, body) = hub.get(&format!("/api/session-costs?taskId={id}"), None).await;
        body["costs"].as_array().filter(|costs| !costs.is_empty()).cloned()
    })
    .await;
    assert_eq!(costs[0]["inputTokens"], 200, "{costs:?}");
    assert_eq!(costs[0]["cacheReadTokens"], 50);
    assert_eq!(costs[0]["outputTokens"], 30);
    assert_eq!(costs[0]["numTurns"], 1);
}
