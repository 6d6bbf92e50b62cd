//! The first model request of a task run by a real agent CLI, weighed as the CLI sent it.
//! The setup is the real-CLI tests' (crates/swarm/tests/it/real_cli): a fresh `HOME` with each
//! CLI's settings pointed at the scripted model (`clis::write_user_settings`), a project set up
//! by `swarm connect`, and `swarm worker` / `swarm lead` (this build's `swarm`) running the
//! pinned CLI on a task assigned to its agent. Only the model is a stand-in; it answers one
//! sentence, so the run ends by itself.

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::{Value, json};
use swarm_scripted_model::{RecordedRequest, Script, ScriptedModel, clis};
use tokio::process::Command;

use crate::hub::{self, Http, Target};

/// How long a CLI run may take to reach its first model request, and to end. Generous for two
/// busy cores; a run that works takes seconds.
const LIMIT: Duration = Duration::from_secs(180);

/// A real agent CLI the bench can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentCli {
    Claude,
    Codex,
}

impl AgentCli {
    pub(crate) fn name(self) -> &'static str {
        match self {
            AgentCli::Claude => "claude",
            AgentCli::Codex => "codex",
        }
    }

    fn program(self) -> anyhow::Result<PathBuf> {
        let found = match self {
            AgentCli::Claude => clis::claude_bin(),
            AgentCli::Codex => clis::codex_bin(),
        };
        found.map_err(anyhow::Error::msg)
    }

    /// What points the CLI at the scripted model, besides the settings in `HOME`.
    fn model_env(self, model: &ScriptedModel) -> Vec<(&'static str, String)> {
        match self {
            AgentCli::Claude => clis::claude_env(model),
            AgentCli::Codex => vec![(clis::CODEX_KEY_ENV, "sk-scripted".to_owned())],
        }
    }

    /// Its `--version`, or why not.
    pub(crate) async fn version(self) -> String {
        let program = match self.program() {
            Ok(program) => program,
            Err(err) => return err.to_string(),
        };
        let output =
            Command::new(&program).arg("--version").env("PATH", search_path(&program)).output().await;
        match output {
            Ok(output) if output.status.success() => {
                String::from_utf8_lossy(&output.stdout).lines().next().unwrap_or("").trim().to_owned()
            }
            Ok(output) => format!("--version failed: {}", String::from_utf8_lossy(&output.stderr).trim()),
            Err(err) => format!("cannot run {}: {err}", program.display()),
        }
    }
}

/// The first model request of one CLI run, in bytes.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FirstRequest {
    pub cli: AgentCli,
    /// The whole request body.
    pub body_bytes: usize,
    /// Tool definitions sent (`tools`), the CLI's own and swarm's.
    pub tools: usize,
    pub tools_bytes: usize,
    /// swarm's tools (named `mcp__...`) sent in full.
    pub swarm_tools: usize,
    pub swarm_tools_bytes: usize,
    /// swarm's tools only named, for the model to load with tool search.
    pub swarm_tools_named_only: usize,
}

/// Runs `swarm <role> --harness <cli>` as `agent` against the hub at `target` on one task
/// assigned to it, and weighs the first model request of that run.
pub(crate) async fn first_request(
    target: &Target,
    cli: AgentCli,
    role: &str,
    agent: &str,
) -> anyhow::Result<FirstRequest> {
    let swarm = hub::swarm_program()?;
    let program = cli.program()?;
    let dir = tempfile::tempdir().context("a scratch folder for the CLI's HOME and project")?;
    let home = dir.path().join("home");
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project)?;
    let model = ScriptedModel::start(Script::new().reply("Weighed.")).await;
    clis::write_user_settings(&home, &model, &model.openai_base_url())?;
    let env = RunEnv { path: search_path(&program), home: home.clone(), api_key: target.api_key() };

    let connect = env
        .command(&swarm, &project)
        .args(["connect", "--harness", cli.name(), "--url", target.base_url(), "--hook-command"])
        .arg(&swarm)
        .output()
        .await
        .context("running `swarm connect`")?;
    if !connect.status.success() {
        bail!(
            "`swarm connect --harness {}` failed: {}{}",
            cli.name(),
            String::from_utf8_lossy(&connect.stdout),
            String::from_utf8_lossy(&connect.stderr)
        );
    }

    let log = dir.path().join("runner.log");
    let mut runner = env
        .command(&swarm, &project)
        .env("MCP_BASE_URL", target.base_url())
        .env("AGENT_ID", agent)
        .env("RUST_LOG", "warn")
        .envs(cli.model_env(&model))
        .args([role, "--harness", cli.name(), "--session-id", "bench", "--log-dir"])
        .arg(dir.path().join("logs"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        // The runner's CLI ends with it (its parent-death signal).
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting `{} {role}`", swarm.display()))?;
    let measured = async {
        let http = Http::new(target);
        let path = format!("/api/agents/{agent}");
        wait_for("the runner to register its agent", async || http.get::<Value>(&path, None).await.ok())
            .await?;
        let body = json!({"task": "Say one sentence.", "agentId": agent});
        let task: Value = http.post("/api/tasks", None, &body).await.context("creating the task")?;
        let task = task["id"].as_str().context("the created task has no id")?.to_owned();
        let request = wait_for("the CLI's first model request about the task", async || {
            model.requests().into_iter().find(|request| is_first_request_about(request, &task))
        })
        .await?;
        // Let the run end as a run does (the model answered it), so that no CLI is left behind.
        let path = format!("/api/tasks/{task}");
        wait_for("the task's run to end", async || {
            let task: Value = http.get(&path, None).await.ok()?;
            (!matches!(task["status"].as_str(), Some("pending" | "in_progress"))).then_some(())
        })
        .await?;
        anyhow::Ok(request)
    }
    .await;
    let _ = runner.start_kill();
    let _ = runner.wait().await;
    let request = measured.with_context(|| {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        format!("the runner said:\n{}", last_lines(&said, 30))
    })?;
    let weight = request.weight().context("not a model request")?;
    Ok(FirstRequest {
        cli,
        body_bytes: weight.body_bytes,
        tools: weight.tools,
        tools_bytes: weight.tools_bytes,
        swarm_tools: weight.mcp_tools,
        swarm_tools_bytes: weight.mcp_tools_bytes,
        swarm_tools_named_only: weight.deferred_mcp_tools,
    })
}

/// A model request that starts a conversation about `task`: it names the task and the model
/// has not answered in it yet.
fn is_first_request_about(request: &RecordedRequest, task: &str) -> bool {
    request
        .conversation()
        .is_some_and(|conversation| conversation.contains(task) && conversation.steps_done() == 0)
}

/// What every process of a run gets: nothing of the bench's environment but `PATH`.
struct RunEnv<'a> {
    path: OsString,
    home: PathBuf,
    api_key: Option<&'a str>,
}

impl RunEnv<'_> {
    fn command(&self, program: &Path, project: &Path) -> Command {
        let mut command = Command::new(program);
        command
            .env_clear()
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("CODEX_HOME", self.home.join(".codex"))
            .current_dir(project);
        if let Some(key) = self.api_key {
            command.env("API_KEY", key);
        }
        command
    }
}

/// The CLI's folder first (Codex's launcher finds its native part and `node` there or on
/// `PATH`), then the bench's `PATH`.
fn search_path(program: &Path) -> OsString {
    let mut dirs: Vec<PathBuf> = program.parent().into_iter().map(Path::to_path_buf).collect();
    dirs.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    std::env::join_paths(dirs).unwrap_or_default()
}

async fn wait_for<T>(what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> anyhow::Result<T> {
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        if let Some(found) = probe().await {
            return Ok(found);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("waited {} s for {what}", LIMIT.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn last_lines(text: &str, count: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(count)..].join("\n")
}
