//! The real, pinned Claude Code and Codex (`scripts/install-agent-clis`) started by the real
//! `swarm worker` / `swarm lead`, in a project set up by `swarm connect`, with a fresh `HOME`
//! and `CODEX_HOME`, against a hub served from the test. Only the model is replaced, by
//! [`ScriptedModel`]: the CLIs, their MCP clients, hooks and session files are the real ones.
//!
//! Every scenario runs once per CLI (`real_cli::<area>::claude::<name>` and
//! `real_cli::<area>::codex::<name>`). A missing CLI fails the test naming
//! `scripts/install-agent-clis`; nothing here skips.

mod failures;
mod handback;
mod lead_stories;
mod mail;
mod models;
mod prompts;
mod sessions;
mod slack_steering;
mod stalls;
mod steering;
mod tasks;
mod tool_weight;
mod versions;

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::{Value, json};
use swarm_scripted_model::{
    Conversation, Script, ScriptedModel,
    clis::{self, CODEX_KEY_ENV},
};

use swarm_hub::HubOptions;

use crate::hub::{Hub, SWARM, sqlite_file};

/// How long a real CLI run may take to show what a test waits for. Generous for two shared
/// cores; a passing test never waits for it.
pub const LIMIT: Duration = Duration::from_secs(120);

/// Which real CLI a scenario drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cli {
    Claude,
    Codex,
    Pi,
    Gemini,
    Opencode,
}

impl Cli {
    pub fn name(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
            Cli::Pi => "pi",
            Cli::Gemini => "gemini",
            Cli::Opencode => "opencode",
        }
    }

    /// The pinned CLI's folder of programs, put first on the runner's `PATH`.
    fn bin_dir(self) -> PathBuf {
        let bin = match self {
            Cli::Claude => clis::claude_bin(),
            Cli::Codex => clis::codex_bin(),
            Cli::Pi => clis::pi_bin(),
            Cli::Gemini => clis::gemini_bin(),
            Cli::Opencode => clis::opencode_bin(),
        };
        let bin = bin.unwrap_or_else(|message| panic!("{message}"));
        bin.parent().unwrap().to_path_buf()
    }
}

/// Generates a test `<cli>::<name>` for each `async fn <name>(cli: Cli)` of the calling
/// module and each CLI listed here: a new CLI is one line (its module name and `Cli` variant),
/// once it has its variant in [`Cli`].
macro_rules! every_cli {
    ($($name:ident),* $(,)?) => {
        $crate::real_cli::cli_tests!(claude: Claude; $($name),*);
        $crate::real_cli::cli_tests!(codex: Codex; $($name),*);
        $crate::real_cli::cli_tests!(pi: Pi; $($name),*);
        $crate::real_cli::cli_tests!(gemini: Gemini; $($name),*);
        $crate::real_cli::cli_tests!(opencode: Opencode; $($name),*);
    };
}
pub(crate) use every_cli;

/// The tests of one CLI: `mod <cli> { async fn <name>() ... }`.
macro_rules! cli_tests {
    ($module:ident: $cli:ident; $($name:ident),*) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::real_cli::Cli::$cli).await;
                }
            )*
        }
    };
}
pub(crate) use cli_tests;

/// Waits for `probe` with the real CLIs' deadline, [`LIMIT`].
pub async fn within<T, F, Fut>(what: &str, probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    crate::support::eventually_within(LIMIT, what, probe).await
}

/// One scenario's world: a hub, the scripted model, and a project set up for the CLI with
/// `swarm connect`, in a temporary folder with its own `HOME`.
pub struct World {
    pub cli: Cli,
    pub dir: tempfile::TempDir,
    pub hub: Hub,
    pub model: ScriptedModel,
    pub home: PathBuf,
    pub project: PathBuf,
    pub codex_home: PathBuf,
}

impl World {
    pub async fn new(cli: Cli, script: Script) -> World {
        let model = ScriptedModel::start(script).await;
        let base_url = model.openai_base_url();
        World::with_model(cli, model, &base_url).await
    }

    /// With Codex's provider at `codex_base_url` (a model that is down: a closed port).
    pub async fn with_model(cli: Cli, model: ScriptedModel, codex_base_url: &str) -> World {
        World::with_hub(cli, model, codex_base_url, &[], HubOptions::default()).await
    }

    /// With `swarm serve` flags (a Slack bridge) and options (a test clock) for the hub.
    pub async fn with_hub(
        cli: Cli,
        model: ScriptedModel,
        codex_base_url: &str,
        flags: &[&str],
        options: HubOptions,
    ) -> World {
        let dir = tempfile::tempdir().unwrap();
        let hub = Hub::start_with_options(&sqlite_file(dir.path()), None, flags, options);
        let home = dir.path().join("home");
        let project = dir.path().join("project");
        let codex_home = home.join(".codex");
        std::fs::create_dir_all(&project).unwrap();
        // Each CLI's provider (Codex's in `$CODEX_HOME/config.toml`, where `swarm connect` adds
        // its MCP server and must keep the rest); `swarm connect` writes the project's files.
        clis::write_user_settings(&home, &model, codex_base_url).unwrap();
        let world = World { cli, dir, hub, model, home, project, codex_home };
        eprintln!("{}", versions::under_test(cli));
        world.connect();
        world
    }

    /// `swarm connect` as a user would run it in the project, hooks calling this build's
    /// `swarm`.
    fn connect(&self) {
        let mut command = Command::new(SWARM);
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("CODEX_HOME", &self.codex_home)
            .current_dir(&self.project)
            .args(["connect", "--harness", self.cli.name(), "--url", &self.hub.base_url])
            .args(["--hook-command", SWARM]);
        // As its operator would: with the hub's key at hand (so Codex is told to send one).
        if let Some(key) = &self.hub.api_key {
            command.env("API_KEY", key);
        }
        let output = command.output().expect("swarm connect runs");
        assert!(
            output.status.success(),
            "swarm connect failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        if self.cli == Cli::Codex {
            let config = std::fs::read_to_string(self.codex_home.join("config.toml")).unwrap();
            assert!(
                config.contains("model_provider = \"scripted\"")
                    && config.contains("[mcp_servers.agent-swarm]"),
                "the provider and the MCP server share config.toml:\n{config}"
            );
        }
    }

    /// The environment every runner of this world gets, and so its CLIs: nothing of the
    /// machine's but `PATH` (after `SWARM_TEST_NODE_DIR` and the CLI's folder; Codex's
    /// launcher needs `node`).
    pub fn runner_env(&self) -> Vec<(&'static str, String)> {
        let path = versions::search_path(&self.cli.bin_dir());
        let mut env = vec![
            ("PATH", path.to_string_lossy().into_owned()),
            ("HOME", self.home.display().to_string()),
            ("CODEX_HOME", self.codex_home.display().to_string()),
            ("MCP_BASE_URL", self.hub.base_url.clone()),
            ("RUST_LOG", "warn".to_owned()),
        ];
        match self.cli {
            Cli::Claude => env.extend(clis::claude_env(&self.model)),
            Cli::Codex => env.push((CODEX_KEY_ENV, "sk-scripted".to_owned())),
            Cli::Pi => env.extend(clis::pi_env()),
            Cli::Gemini => env.extend(clis::gemini_env(&self.model)),
            Cli::Opencode => env.extend(clis::opencode_env()),
        }
        env
    }

    /// pi's provider at `base_url` instead of the scripted model (a model that is down).
    pub fn point_pi_at(&self, base_url: &str) {
        std::fs::write(self.home.join(".pi/agent/models.json"), clis::pi_models_json(base_url)).unwrap();
    }

    /// opencode's provider at `base_url` instead of the scripted model (a model that is down).
    pub fn point_opencode_at(&self, base_url: &str) {
        let config = self.home.join(".config/opencode/opencode.json");
        std::fs::write(config, clis::opencode_config_json(base_url)).unwrap();
    }

    /// Starts `swarm <role> --harness <cli>` in the project.
    pub fn runner(&self, role: &str, extra: &[(&'static str, String)]) -> RunnerProcess {
        self.runner_as(role, &uuid::Uuid::new_v4().to_string(), extra)
    }

    /// Starts `swarm <role>` for a known agent id (one a script must name in advance).
    pub fn runner_as(&self, role: &str, agent_id: &str, extra: &[(&'static str, String)]) -> RunnerProcess {
        let agent_id = agent_id.to_string();
        let mut command = Command::new(SWARM);
        command
            .env_clear()
            .envs(self.runner_env())
            .env("AGENT_ID", &agent_id)
            .envs(self.token_env(role, &agent_id, extra))
            .envs(extra.iter().map(|(name, value)| (*name, value)))
            .current_dir(&self.project)
            .args([role, "--harness", self.cli.name(), "--session-id", "e2e"])
            .arg("--log-dir")
            .arg(self.dir.path().join("logs"));
        RunnerProcess::spawn(command, agent_id)
    }

    /// Token mode (SWARM_TEST_AGENT_AUTH=token): the agent registered by the operator,
    /// and its token for the runner (`AGENT_TOKEN`), which hands it to the CLI.
    fn token_env(
        &self,
        role: &str,
        agent_id: &str,
        extra: &[(&'static str, String)],
    ) -> Vec<(&'static str, String)> {
        let name = extra.iter().find(|(name, _)| *name == "AGENT_NAME").map(|(_, value)| value.clone());
        let name = name.unwrap_or_else(|| format!("{role}-{}", &agent_id[..8]));
        let slots = extra.iter().find(|(name, _)| *name == "MAX_CONCURRENT_TASKS");
        let slots = slots.and_then(|(_, value)| value.parse().ok()).unwrap_or(1);
        let token = self.hub.register_for_token(agent_id, &name, role == "lead", slots);
        // The runner is the hub's OS user here (see `trust_tokens` for the refusal).
        token
            .map(|token| vec![("AGENT_TOKEN", token), ("ACCEPT_READABLE_HUB_FILES", "1".to_string())])
            .unwrap_or_default()
    }

    pub async fn create(&self, body: Value) -> String {
        let (status, task) = self.hub.post("/api/tasks", None, body).await;
        assert_eq!(status, 201, "{task}");
        task["id"].as_str().unwrap().to_string()
    }

    pub async fn task(&self, id: &str) -> Value {
        let (status, body) = self.hub.get(&format!("/api/tasks/{id}"), None).await;
        assert_eq!(status, 200, "{body}");
        body
    }

    pub async fn task_in(&self, id: &str, statuses: &[&str], runner: &RunnerProcess) -> Value {
        let what = format!("task {id} to be {statuses:?}");
        let last = std::sync::Mutex::new(Value::Null);
        let show = || {
            format!(
                "last seen: {}\n{}\n{}",
                last.lock().unwrap(),
                runner.output(),
                versions::under_test(self.cli)
            )
        };
        crate::support::eventually_showing(LIMIT, &what, show, || async {
            let seen = self.task(id).await;
            let done = statuses.contains(&seen["status"].as_str().unwrap());
            *last.lock().unwrap() = seen.clone();
            done.then_some(seen)
        })
        .await
    }

    pub async fn registered(&self, runner: &RunnerProcess) -> Value {
        within("the runner to register its agent", || async {
            let (status, body) = self.hub.get(&format!("/api/agents/{}", runner.agent_id), None).await;
            (status == 200).then_some(body)
        })
        .await
    }

    /// The model requests whose conversation is about `task_id`.
    pub fn conversations_about(&self, task_id: &str) -> Vec<Conversation> {
        self.model
            .conversations()
            .into_iter()
            .filter(|c| c.prompts().iter().any(|p| p.contains(task_id)))
            .collect()
    }
}

/// The first request of a CLI run: the model has not said anything in it yet.
pub fn first_request(conversation: &Conversation) -> bool {
    let items = conversation.body["messages"]
        .as_array()
        .or(conversation.body["input"].as_array())
        .or(conversation.body["contents"].as_array());
    !items.into_iter().flatten().any(|item| {
        matches!(item["role"].as_str(), Some("assistant" | "model"))
            || item["type"].as_str().is_some_and(|kind| kind.ends_with("_call"))
    })
}

/// The task a run is about: the first id in its first prompt that is not the agent's (Codex's
/// prompt starts with the runner's system prompt, which names the agent).
pub fn task_id_in(conversation: &Conversation) -> Option<String> {
    let prompt = conversation.prompts().join("\n");
    let mut rest = prompt.as_str();
    while let Some(id) = swarm_scripted_model::find_uuid(rest) {
        if !prompt.contains(&format!("agent id {id}")) {
            return Some(id);
        }
        rest = &rest[rest.find(&id).unwrap() + id.len()..];
    }
    None
}

/// `store-progress` completing the run's task.
pub fn complete(conversation: &Conversation) -> Value {
    let id = task_id_in(conversation).unwrap_or_default();
    json!({"taskId": id, "status": "completed", "output": format!("scripted output for {id}")})
}

/// A `swarm worker` / `swarm lead` process and its terminal lines.
pub struct RunnerProcess {
    child: Child,
    pub agent_id: String,
    lines: Arc<Mutex<Vec<String>>>,
    /// The thread reading its stderr into `lines`, finished once the pipe closes.
    reader: std::thread::JoinHandle<()>,
}

impl RunnerProcess {
    fn spawn(mut command: Command, agent_id: String) -> RunnerProcess {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("swarm runs");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[runner] {line}");
                sink.lock().unwrap().push(line);
            }
        });
        RunnerProcess { child, agent_id, lines, reader }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn output(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Waits for the runner to end by itself, and for its last words: its stderr read to the
    /// end (the reading thread may lag behind the exit).
    pub async fn exited(&mut self) -> ExitStatus {
        let lines = Arc::clone(&self.lines);
        let show = move || lines.lock().unwrap().join("\n");
        let child = &mut self.child;
        let status = crate::support::eventually_showing(LIMIT, "the runner to end", show, || {
            let status = child.try_wait().unwrap();
            async move { status }
        })
        .await;
        let reader = &self.reader;
        within("the runner's stderr to be read to its end", || {
            let done = reader.is_finished();
            async move { done.then_some(()) }
        })
        .await;
        status
    }
}

impl Drop for RunnerProcess {
    fn drop(&mut self) {
        // SIGKILL: the runner's CLIs die with it (parent-death signal).
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Processes (other than `except`) whose working directory is `dir`: a CLI run and all it
/// started, which run in the project.
pub fn processes_in(dir: &Path, except: u32) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().map_while(Result::ok) {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        if pid == except || !crate::runner::is_alive(u64::from(pid)) {
            continue;
        }
        if std::fs::read_link(entry.path().join("cwd")).is_ok_and(|cwd| cwd == dir) {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ").trim().to_string();
            found.push((pid, cmdline));
        }
    }
    found
}
