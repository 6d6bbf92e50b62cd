//! `swarm worker` and `swarm lead`: flags and environment (the reference runner's) turned
//! into a `swarm_runner::RunnerConfig`; the runner itself lives in `swarm-runner`.

use std::{path::PathBuf, time::Duration};

use anyhow::{Context, bail};
use clap::Args;
use swarm_domain::id::AgentId;
use swarm_runner::{
    Harness, OutputFormat, Role, RunnerConfig, RunnerExit, Shutdown, WorktreeMode,
    doctor::{self, Environment},
};

pub const LONG_ABOUT: &str = "Run an agent for a hub: register it, wait for work, and start the agent CLI \
    only when there is some.\n\n\
    The runner long-polls the hub (GET /api/poll). For each trigger (a task assigned or offered to \
    the agent, a pool task claimed for it, finished tasks for the lead, ...) it starts the agent CLI \
    with a prompt for that trigger, up to MAX_CONCURRENT_TASKS at once, and heartbeats while anything \
    runs. When an agent exits without reporting its task (store-progress), the task is failed with a \
    reason. Logs go to LOG_DIR/SESSION_ID/. On SIGINT or SIGTERM the runner takes no new work, gives \
    running agents SHUTDOWN_TIMEOUT to finish, then stops them and pauses their tasks; the next start \
    with the same AGENT_ID resumes them. A second signal stops the agents at once.\n\n\
    The agent CLI reaches the hub through MCP: each run gets MCP_BASE_URL, API_KEY, AGENT_ID, and \
    TASK_ID when it is about a task, in its environment. With AGENT_TOKEN (a hub with \
    AGENT_AUTH=token) the runner and its agent CLI send the agent's token, never the API key.\n\n\
    Before it takes any work the runner checks that the agent CLI can run here (on PATH and \
    answering --version, IS_SANDBOX=1 for Claude Code as root, the MCP entry `swarm connect` \
    writes) and stops with what to fix otherwise; `swarm doctor` shows the same checks. An agent \
    CLI that fails at once without doing anything (bad key, model unreachable, bad flag) gives its \
    task back to the queue; after ENV_FAILURE_LIMIT such failures in a row the runner stops.";

/// Flags of `swarm worker` and `swarm lead`.
#[derive(Debug, Args)]
pub struct RunnerArgs {
    /// Default prompt: what the agent gets in --ai-loop mode, and the preamble for triggers the
    /// runner has no prompt of its own for [default: /start-worker or /start-leader]
    #[arg(short = 'm', long = "msg", value_name = "PROMPT")]
    msg: Option<String>,
    /// Keep going after a failed agent run (non-zero exit, or the agent CLI cannot be started).
    /// Without it the runner takes no new work after a failure, lets the other runs finish,
    /// and exits with status 1
    #[arg(long, env = "YOLO", value_parser = clap::builder::BoolishValueParser::new())]
    yolo: bool,
    /// Text appended to the system prompt of every agent run (wins over --system-prompt-file)
    #[arg(long, env = "SYSTEM_PROMPT", value_name = "TEXT")]
    system_prompt: Option<String>,
    /// File whose contents are appended to the system prompt of every agent run
    #[arg(long, env = "SYSTEM_PROMPT_FILE", value_name = "PATH")]
    system_prompt_file: Option<PathBuf>,
    /// Legacy mode: start the agent right away, again and again, with the default prompt, and let
    /// it wait for work itself through the poll-task tool
    #[arg(long, env = "AI_LOOP", value_parser = clap::builder::BoolishValueParser::new())]
    ai_loop: bool,
    /// Agent CLI to start: claude, codex, gemini, opencode, pi (built in), `cmd` (the program
    /// of --harness-cmd), or the name of a harness file <NAME>.toml in
    /// ~/.config/swarm/harnesses/ (or $XDG_CONFIG_HOME/swarm/harnesses/), which wins over a
    /// built-in of the same name [default: claude]
    #[arg(long, env = "HARNESS", value_name = "NAME")]
    harness: Option<String>,
    /// The command line for --harness cmd (implies it when given alone), split into words as
    /// a shell would, e.g. "python3 agent.py --fast"; it gets the extra arguments after `--`,
    /// then the prompt as its last argument
    #[arg(long, env = "HARNESS_CMD", value_name = "COMMAND")]
    harness_cmd: Option<String>,
    /// A harness file describing the agent CLI (program, argument templates, output format;
    /// docs/real-agent-clis.md, "Adding an agent CLI"); wins over --harness
    #[arg(long, env = "HARNESS_FILE", value_name = "PATH", conflicts_with = "harness_cmd")]
    harness_file: Option<PathBuf>,
    /// The model every run asks its agent CLI for (the CLI's own model flag), unless its
    /// task names one
    #[arg(long, env = "MODEL_OVERRIDE", value_name = "MODEL")]
    model: Option<String>,
    /// Take work without checking first that the agent CLI can run here
    #[arg(long, env = "SKIP_PREFLIGHT", value_parser = clap::builder::BoolishValueParser::new())]
    skip_preflight: bool,
    /// Agent CLI failures in a row, each at once and without doing anything, after which the
    /// runner stops taking work
    #[arg(long, env = "ENV_FAILURE_LIMIT", default_value_t = swarm_runner::DEFAULT_ENV_FAILURE_LIMIT,
        value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    env_failure_limit: u32,
    /// Milliseconds: an agent CLI that fails sooner than this without doing anything (no model
    /// answer, no tool call, no report) is taken to fail for the environment's sake, and its task
    /// goes back to the queue; 0 never takes it so
    #[arg(long, env = "QUICK_EXIT_MS", default_value_t = swarm_runner::DEFAULT_QUICK_EXIT.as_millis() as u64,
        value_name = "MS")]
    quick_exit_ms: u64,
    /// Give each task run a git worktree of its own (<repo>/.swarm/worktrees/, on a branch
    /// swarm/<id>-<slug> from HEAD) even with one run at a time. The default does so when
    /// MAX_CONCURRENT_TASKS is above 1 and the runner starts in a git repository. WORKTREE=0
    /// is --no-worktree
    #[arg(long, env = "WORKTREE", num_args = 0..=1, require_equals = true, default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new(), value_name = "BOOL")]
    worktree: Option<bool>,
    /// Every run works in the runner's directory, however many run at once (wins over
    /// --worktree)
    #[arg(long)]
    no_worktree: bool,
    /// Milliseconds an agent CLI may keep retrying a model it cannot reach, with no progress,
    /// before the runner stops it and gives its task back to the queue (Codex retries forever)
    #[arg(long, env = "MODEL_UNREACHABLE_MS",
        default_value_t = swarm_runner::DEFAULT_MODEL_UNREACHABLE.as_millis() as u64, value_name = "MS")]
    model_unreachable_ms: u64,
    /// Seconds a run may go without a sign of life (no output line from the agent CLI, no
    /// change of its task at the hub) before the runner stops it with its processes and hands
    /// its task back to the queue, the reason on the task and the agent; 0 never stops one
    #[arg(long, env = "STALL_SECONDS", default_value_t = swarm_runner::DEFAULT_STALL.as_secs(),
        value_name = "SECONDS")]
    stall_seconds: u64,
    /// Times in a row a run may make the same tool call with the same arguments before the
    /// runner stops it as a loop and hands its task back; 0 never stops one
    #[arg(long, env = "TOOL_LOOP_LIMIT", default_value_t = swarm_runner::DEFAULT_TOOL_LOOP_LIMIT,
        value_name = "N")]
    tool_loop_limit: u32,
    /// Print JSON log lines (one object per line) on stderr instead of lines for people
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    agent: AgentArgs,
    /// Extra arguments for the agent CLI, e.g. `-- --model opus`
    #[arg(last = true, value_name = "AGENT_ARGS")]
    agent_args: Vec<String>,
}

/// The agent the runner speaks for, and where its hub is.
#[derive(Debug, Args)]
#[command(next_help_heading = "Agent and hub")]
struct AgentArgs {
    /// The hub (its URL and key are also given to the agent CLI, unless AGENT_TOKEN
    /// replaces the key)
    #[command(flatten)]
    hub: swarm_client::HubFlags,
    /// The agent's own token, for a hub with AGENT_AUTH=token (`swarm agent token create`).
    /// Used instead of the API key for everything: the runner's requests and the agent CLI
    /// it starts (as its API_KEY), so the agent never holds the operator key. Needs AGENT_ID
    #[arg(long, env = "AGENT_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    agent_token: Option<String>,
    /// The agent's id. Keep it across restarts: the agent keeps its identity and the runner
    /// resumes its paused work. A new one is made (and printed) when unset
    #[arg(long, env = "AGENT_ID", value_name = "UUID")]
    agent_id: Option<String>,
    /// The agent's name when it registers [default: <role>-<first 8 characters of its id>]
    #[arg(long, env = "AGENT_NAME", value_name = "NAME")]
    agent_name: Option<String>,
    /// Agent runs at once (1 to 20); also the agent's maxTasks at the hub
    #[arg(long, env = "MAX_CONCURRENT_TASKS", default_value_t = 1, value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..=20))]
    max_concurrent_tasks: u32,
    /// Names this run's log folder and its session logs at the hub [default: 8 random characters]
    #[arg(long, env = "SESSION_ID", value_name = "ID")]
    session_id: Option<String>,
    /// Start even when this process (and so the agents it starts) can read the hub's key
    /// or database while holding an agent token, which then isolates nothing: the
    /// runner warns instead of refusing. For one-user set-ups that accept it
    #[arg(long, env = "ACCEPT_READABLE_HUB_FILES", value_parser = clap::builder::BoolishValueParser::new())]
    accept_readable_hub_files: bool,
    /// Folder for the logs: one sub-folder per session
    #[arg(long, env = "LOG_DIR", default_value = "./logs", value_name = "PATH")]
    log_dir: PathBuf,
    /// Milliseconds running agents get to finish after SIGINT/SIGTERM before they are stopped
    #[arg(long, env = "SHUTDOWN_TIMEOUT", default_value_t = 30_000, value_name = "MS")]
    shutdown_timeout: u64,
}

pub async fn run(role: Role, args: RunnerArgs) -> anyhow::Result<()> {
    let config = config(role, args)?;
    init_logging(config.output);
    let shutdown = Shutdown::on_signals().context("cannot listen for SIGINT and SIGTERM")?;
    match swarm_runner::run(config, shutdown).await? {
        RunnerExit::Stopped => Ok(()),
        RunnerExit::AgentFailed(end) => {
            bail!("an agent run failed ({end}); the runner stopped. Pass --yolo (YOLO=true) to keep going")
        }
        RunnerExit::EnvironmentFailed(reason) => {
            bail!(
                "{reason}; the runner stopped. Fix the environment (`swarm doctor` lists what it checks) and start it again"
            )
        }
    }
}

/// `swarm doctor`: the runner's start-up checks and the hub's, for this directory and
/// agent, each with its fix.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    runner: RunnerArgs,
}

pub async fn doctor(mut args: DoctorArgs) -> anyhow::Result<()> {
    // Without AGENT_ID the runner makes an agent of its own on its first start. An id made
    // here would name no agent at all: the checks use one to reach the hub, and say what the
    // runner will do instead of looking it up.
    let agent_id_given = non_empty(args.runner.agent.agent_id.clone()).is_some();
    if !agent_id_given {
        args.runner.agent.agent_id = Some(AgentId::from_uuid(uuid::Uuid::new_v4()).to_string());
    }
    let config = config(Role::Worker, args.runner)?;
    let env = Environment::of_this_process();
    let mut checks = doctor::hub_checks(&config, agent_id_given).await;
    checks.extend(doctor::preflight(&config, &env).await);
    if config.harness.supports_hooks() {
        checks.push(doctor::hooks_check(&config.harness, &env));
    }
    let swarm_on_path = doctor::cli_check(&Harness::from_command_line("swarm")?, &env).await;
    let fix = (!swarm_on_path.passed).then(|| {
        "install it: cargo install --locked --path crates/swarm (the hooks `swarm connect` writes call `swarm`)".into()
    });
    checks.push(doctor::Check { name: "swarm on PATH (for hooks)".into(), fix, ..swarm_on_path });
    for check in &checks {
        println!("{check}");
    }
    let failed = checks.iter().filter(|check| !check.passed).count();
    if failed > 0 {
        bail!("{failed} of {} checks failed", checks.len());
    }
    println!("all {} checks passed", checks.len());
    Ok(())
}

/// The agent CLI: a harness file, a `--harness-cmd` program, or a harness by name.
fn harness(name: Option<String>, command: Option<String>, file: Option<PathBuf>) -> anyhow::Result<Harness> {
    if let Some(file) = file {
        return Ok(Harness::from_file(&file)?);
    }
    Ok(match (name.as_deref(), command) {
        // HARNESS=claude is the default a user may have set before choosing a program.
        (None | Some("cmd" | "claude"), Some(line)) => Harness::from_command_line(&line)?,
        (Some("cmd"), None) => {
            bail!("--harness cmd needs the program: pass --harness-cmd or set HARNESS_CMD")
        }
        (Some(name), Some(_)) => bail!("--harness-cmd is for --harness cmd, not {name}"),
        (name, None) => Harness::named(name.unwrap_or("claude"), Harness::user_dir().as_deref())?,
    })
}

fn config(role: Role, args: RunnerArgs) -> anyhow::Result<RunnerConfig> {
    let agent = args.agent;
    let agent_token = non_empty(agent.agent_token);
    if agent_token.is_some() && non_empty(agent.agent_id.clone()).is_none() {
        bail!(
            "--agent-token (AGENT_TOKEN) needs AGENT_ID (--agent-id): the id of the agent the token belongs to"
        );
    }
    let agent_id = match non_empty(agent.agent_id) {
        Some(text) => AgentId::parse(&text).context("AGENT_ID (or --agent-id) must be a UUID")?,
        None => {
            let id = AgentId::from_uuid(uuid::Uuid::new_v4());
            eprintln!(
                "note: no AGENT_ID given; this agent is {id}. Set AGENT_ID={id} to keep it across restarts."
            );
            id
        }
    };
    let harness =
        harness(non_empty(args.harness), non_empty(args.harness_cmd), non_empty_path(args.harness_file))?;
    let system_prompt = match (non_empty(args.system_prompt), non_empty_path(args.system_prompt_file)) {
        (Some(text), _) => Some(text),
        (None, Some(path)) => Some(std::fs::read_to_string(&path).with_context(|| {
            format!("cannot read the system prompt file {} (SYSTEM_PROMPT_FILE)", path.display())
        })?),
        (None, None) => None,
    };
    let mut config = RunnerConfig::new(role, agent.hub.base_url().to_string(), agent_id, harness);
    // A token replaces the operator key everywhere, so the agent CLI never gets the key.
    // Without either, a hub on this machine is reached with the key it generated.
    config.holds_agent_token = agent_token.is_some();
    config.accept_readable_hub_files = agent.accept_readable_hub_files;
    config.api_key = agent_token.or_else(|| agent.hub.key_or_local());
    if let Some(name) = non_empty(agent.agent_name) {
        config.agent_name = name;
    }
    config.agent_args = args.agent_args;
    config.model = non_empty(args.model);
    config.system_prompt = system_prompt;
    if let Some(prompt) = non_empty(args.msg) {
        config.default_prompt = prompt;
    }
    config.yolo = args.yolo;
    config.ai_loop = args.ai_loop;
    config.max_concurrent = agent.max_concurrent_tasks;
    if let Some(session_id) = non_empty(agent.session_id) {
        config.session_id = session_id;
    }
    config.log_dir = agent.log_dir;
    config.shutdown_timeout = Duration::from_millis(agent.shutdown_timeout);
    config.output = if args.json { OutputFormat::Json } else { OutputFormat::Text };
    config.preflight = !args.skip_preflight;
    config.env_failure_limit = args.env_failure_limit;
    config.quick_exit = Duration::from_millis(args.quick_exit_ms);
    config.worktree = match (args.no_worktree, args.worktree) {
        (true, _) | (false, Some(false)) => WorktreeMode::Off,
        (false, Some(true)) => WorktreeMode::On,
        (false, None) => WorktreeMode::Auto,
    };
    config.model_unreachable = Duration::from_millis(args.model_unreachable_ms);
    config.stall = Duration::from_secs(args.stall_seconds);
    config.tool_loop_limit = args.tool_loop_limit;
    Ok(config)
}

/// Empty environment variables count as unset.
fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|text| text.trim().to_string()).filter(|text| !text.is_empty())
}

fn non_empty_path(value: Option<PathBuf>) -> Option<PathBuf> {
    value.filter(|path| !path.as_os_str().is_empty())
}

/// The runner writes its own lines (text or JSON); `tracing` carries warnings of the
/// libraries underneath, in the same format.
fn init_logging(output: OutputFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = match output {
        OutputFormat::Json => builder.json().flatten_event(true).with_current_span(false).try_init(),
        OutputFormat::Text | OutputFormat::WarningsOnly => {
            builder.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).try_init()
        }
    };
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Command {
        #[command(flatten)]
        args: RunnerArgs,
    }

    fn parse(args: &[&str]) -> anyhow::Result<RunnerConfig> {
        let id = "0190abcd-0000-7000-8000-000000000001";
        let mut line = vec!["worker", "--agent-id", id];
        line.extend(args);
        config(Role::Worker, Command::try_parse_from(line)?.args)
    }

    #[test]
    fn a_program_with_its_arguments_is_the_cmd_harness() {
        let config = parse(&["--harness-cmd", "/bin/agent", "--", "stand-in-agent", "--fast"]).unwrap();
        assert_eq!(config.harness, Harness::program("/bin/agent", Vec::new()));
        assert_eq!(config.agent_args, ["stand-in-agent", "--fast"]);
        assert_eq!(config.agent_name, "worker-0190abcd");
        assert_eq!(config.default_prompt, "/start-worker");
    }

    #[test]
    fn a_harness_command_line_is_split_into_words_and_a_broken_one_refused() {
        let config = parse(&["--harness-cmd", "python3 'my agent.py' --fast", "--", "--model", "x"]).unwrap();
        let args = ["my agent.py", "--fast"].map(String::from).to_vec();
        assert_eq!(config.harness, Harness::program("python3", args));
        assert_eq!(config.agent_args, ["--model", "x"]);
        let err = parse(&["--harness-cmd", "python3 'agent.py"]).unwrap_err().to_string();
        assert!(err.contains("HARNESS_CMD") && err.contains("not a valid command line"), "{err}");
    }

    #[test]
    fn a_harness_by_name_or_file_and_a_default_model() {
        let config = parse(&["--harness", "opencode", "--model", "anthropic/claude-x"]).unwrap();
        assert_eq!(config.harness.name(), "opencode");
        assert_eq!(config.model.as_deref(), Some("anthropic/claude-x"));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mine.toml");
        std::fs::write(&file, "program = 'my-agent'\nargs = ['{prompt}']\noutput = 'text'\n").unwrap();
        let config = parse(&["--harness-file", file.to_str().unwrap()]).unwrap();
        assert_eq!((config.harness.name(), config.model), ("mine", None));
        let err = parse(&["--harness", "no-such-cli"]).unwrap_err().to_string();
        assert!(err.contains("no agent CLI named \"no-such-cli\"") && err.contains("opencode"), "{err}");
    }

    #[test]
    fn settings_that_cannot_work_are_refused_with_what_to_do() {
        let err = parse(&["--harness", "cmd"]).unwrap_err().to_string();
        assert!(err.contains("HARNESS_CMD"), "{err}");
        let err =
            config(Role::Lead, Command::try_parse_from(["lead", "--agent-id", "not-a-uuid"]).unwrap().args)
                .unwrap_err();
        assert!(format!("{err:#}").contains("AGENT_ID"), "{err:#}");
        assert!(parse(&["--max-concurrent-tasks", "21"]).is_err());
        assert!(parse(&["--system-prompt-file", "/no/such/file"]).is_err());
    }

    #[test]
    fn worktrees_are_automatic_unless_forced_or_refused() {
        assert_eq!(parse(&[]).unwrap().worktree, WorktreeMode::Auto);
        assert_eq!(parse(&["--worktree"]).unwrap().worktree, WorktreeMode::On);
        assert_eq!(parse(&["--worktree=0"]).unwrap().worktree, WorktreeMode::Off);
        assert_eq!(parse(&["--no-worktree"]).unwrap().worktree, WorktreeMode::Off);
        assert_eq!(parse(&["--worktree", "--no-worktree"]).unwrap().worktree, WorktreeMode::Off);
        // `--worktree` takes no separate value: what follows is the next flag.
        let config = parse(&["--worktree", "--yolo"]).unwrap();
        assert!(config.yolo && config.worktree == WorktreeMode::On);
    }

    #[test]
    fn flags_reach_the_config() {
        let config = parse(&[
            "--yolo",
            "--ai-loop",
            "-m",
            "go",
            "--max-concurrent-tasks",
            "3",
            "--shutdown-timeout",
            "500",
            "--session-id",
            "s1",
            "--system-prompt",
            "be brief",
            "--json",
            "--quick-exit-ms",
            "0",
            "--env-failure-limit",
            "5",
            "--skip-preflight",
        ])
        .unwrap();
        assert!(config.yolo && config.ai_loop);
        assert_eq!((config.default_prompt.as_str(), config.max_concurrent), ("go", 3));
        assert_eq!(config.shutdown_timeout, Duration::from_millis(500));
        assert_eq!(config.session_id, "s1");
        assert_eq!(config.system_prompt.as_deref(), Some("be brief"));
        assert_eq!(config.output, OutputFormat::Json);
        assert_eq!(
            (config.quick_exit, config.env_failure_limit, config.preflight),
            (Duration::ZERO, 5, false)
        );
    }
}
