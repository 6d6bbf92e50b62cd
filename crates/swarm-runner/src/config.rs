//! What a runner is told at start: one typed [`RunnerConfig`], built by the caller (the
//! `swarm worker` / `swarm lead` commands from flags and environment, or `swarm demo`
//! in code).

use std::{path::PathBuf, time::Duration};

use swarm_domain::id::AgentId;

use crate::harness::Harness;

/// How long a long-poll is held open at the hub before it is asked again.
pub const DEFAULT_POLL_WAIT: Duration = Duration::from_secs(30);
/// `SHUTDOWN_TIMEOUT` default: how long running agents get to finish after SIGINT/SIGTERM.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_millis(30_000);
/// A run that fails sooner than this without doing anything is the environment's
/// failure (bad key, model unreachable, bad flag), not the task's.
pub const DEFAULT_QUICK_EXIT: Duration = Duration::from_secs(10);
/// How long an agent CLI may keep saying it cannot reach the model, with no progress, before
/// the runner stops it: Codex retries an unreachable model forever.
pub const DEFAULT_MODEL_UNREACHABLE: Duration = Duration::from_secs(120);
/// Environment failures in a row after which the runner stops taking work.
pub const DEFAULT_ENV_FAILURE_LIMIT: u32 = 3;
/// The hub refuses `maxTasks` above this.
pub const MAX_CONCURRENT_TASKS_LIMIT: u32 = 20;

/// Which side of the crew the runner plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Worker,
    Lead,
}

impl Role {
    pub fn as_str(&self) -> &'static str {
        match self {
            Role::Worker => "worker",
            Role::Lead => "lead",
        }
    }

    /// The prompt of `--ai-loop` mode, where the agent polls for work by itself.
    pub fn ai_loop_prompt(&self) -> &'static str {
        match self {
            Role::Worker => "/start-worker",
            Role::Lead => "/start-leader",
        }
    }

    /// `AGENT_NAME` when none is given: `<role>-<first 8 of id>`.
    pub fn default_agent_name(&self, id: AgentId) -> String {
        let id = id.to_string();
        format!("{}-{}", self.as_str(), &id[..8])
    }
}

/// How the terminal view writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// Lines for people, on stderr.
    #[default]
    Text,
    /// One JSON object per line (tracing's JSON format), for machines.
    Json,
    /// Lines for people, warnings only: for a runner embedded in a program that shows
    /// the crew's work its own way (`swarm demo`).
    WarningsOnly,
}

/// Whether task runs get a git worktree each ([`crate::worktree`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorktreeMode {
    /// When more than one run may be under way at once, in a git repository.
    Auto,
    /// Always (`--worktree`); the runner refuses to start outside a git repository.
    On,
    /// Never (`--no-worktree`): every run works in the runner's directory.
    #[default]
    Off,
}

/// Everything a runner needs. Build it with [`RunnerConfig::new`] and adjust the fields.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    pub role: Role,
    /// The hub's base URL (`MCP_BASE_URL`).
    pub hub_url: String,
    /// `API_KEY`, or the agent's token (`AGENT_TOKEN`, for a hub with `AGENT_AUTH=token`):
    /// sent to the hub and passed on to the agent CLI as its `API_KEY`.
    pub api_key: Option<String>,
    /// The agent this runner speaks for; reuse it across restarts to keep the agent's
    /// identity and resume its paused work.
    pub agent_id: AgentId,
    pub agent_name: String,
    pub harness: Harness,
    /// Extra arguments for the agent CLI (after `--` on the command line).
    pub agent_args: Vec<String>,
    /// The model runs ask the agent CLI for when their task names none (`--model`,
    /// `MODEL_OVERRIDE`); `None`: the CLI's own default.
    pub model: Option<String>,
    /// Text appended to the runner's own system prompt (`--system-prompt`, or the
    /// contents of `--system-prompt-file`).
    pub system_prompt: Option<String>,
    /// `--ai-loop` mode's prompt, and the preamble for triggers the runner has no
    /// prompt of its own for (`-m/--msg`; default `/start-worker` or `/start-leader`).
    pub default_prompt: String,
    /// Keep going after a failed agent run (non-zero exit, or the agent CLI could not be
    /// started). Without it the runner stops taking work and exits non-zero.
    pub yolo: bool,
    /// Legacy mode: start the agent right away, again and again, and let it poll for
    /// work itself through the `poll-task` tool.
    pub ai_loop: bool,
    /// At most this many agent runs at once (1 to 20); also the agent's `maxTasks`.
    pub max_concurrent: u32,
    /// Names this run's log folder and its session logs at the hub.
    pub session_id: String,
    /// Logs go to `<log_dir>/<session_id>/`.
    pub log_dir: PathBuf,
    /// How long running agents get to finish on shutdown before they are stopped.
    pub shutdown_timeout: Duration,
    /// How long one long-poll waits at the hub (at most 60 s).
    pub poll_wait: Duration,
    pub output: OutputFormat,
    /// Check the agent CLI, the sandbox and the MCP config before taking work
    /// ([`crate::doctor::preflight`]).
    pub preflight: bool,
    /// See [`DEFAULT_QUICK_EXIT`].
    pub quick_exit: Duration,
    /// See [`DEFAULT_ENV_FAILURE_LIMIT`].
    pub env_failure_limit: u32,
    /// Off unless set: a runner embedded in another program (`swarm demo`) should not
    /// add worktrees to whatever repository that program runs in.
    pub worktree: WorktreeMode,
    /// See [`DEFAULT_MODEL_UNREACHABLE`].
    pub model_unreachable: Duration,
    /// A run with no sign of life for this long is stopped and its task handed back
    /// ([`crate::DEFAULT_STALL`]); zero never stops one.
    pub stall: Duration,
    /// A run that makes the same tool call this many times in a row is stopped and its
    /// task handed back ([`crate::DEFAULT_TOOL_LOOP_LIMIT`]); 0 never stops one.
    pub tool_loop_limit: u32,
    /// `api_key` is the agent's own token (`AGENT_TOKEN`), not the operator key: the
    /// runner then checks that its agents cannot read the hub's key or database.
    pub holds_agent_token: bool,
    /// Start even when an agent holding a token could read the hub's private files
    /// (`--accept-readable-hub-files`), with a warning instead of a refusal.
    pub accept_readable_hub_files: bool,
}

impl RunnerConfig {
    /// A runner for `agent_id` at `hub_url` with every other setting at its default.
    pub fn new(role: Role, hub_url: impl Into<String>, agent_id: AgentId, harness: Harness) -> RunnerConfig {
        let session = uuid::Uuid::new_v4().simple().to_string();
        RunnerConfig {
            role,
            hub_url: hub_url.into(),
            api_key: None,
            agent_id,
            agent_name: role.default_agent_name(agent_id),
            harness,
            agent_args: Vec::new(),
            model: None,
            system_prompt: None,
            default_prompt: role.ai_loop_prompt().to_string(),
            yolo: false,
            ai_loop: false,
            max_concurrent: 1,
            session_id: session[..8].to_string(),
            log_dir: PathBuf::from("./logs"),
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            poll_wait: DEFAULT_POLL_WAIT,
            output: OutputFormat::Text,
            preflight: true,
            quick_exit: DEFAULT_QUICK_EXIT,
            env_failure_limit: DEFAULT_ENV_FAILURE_LIMIT,
            worktree: WorktreeMode::Off,
            model_unreachable: DEFAULT_MODEL_UNREACHABLE,
            stall: crate::DEFAULT_STALL,
            tool_loop_limit: crate::DEFAULT_TOOL_LOOP_LIMIT,
            holds_agent_token: false,
            accept_readable_hub_files: false,
        }
    }

    /// Where this session's log files go.
    pub fn session_log_dir(&self) -> PathBuf {
        self.log_dir.join(&self.session_id)
    }

    /// The system prompt every agent run gets (the lead's with [`LEAD_RULES`]): who it is and how it reports, then the
    /// user's own text.
    pub fn full_system_prompt(&self) -> String {
        let part = match self.role {
            Role::Lead => "the lead",
            Role::Worker => "a worker",
        };
        let mut prompt = format!(
            "You are {name} (agent id {id}), {part} of an agent swarm coordinated by the hub at {url}. \
             Use the swarm MCP tools to act on tasks and talk to the crew. Report the outcome of every \
             task you work on with store-progress (status \"completed\" with an output, or \"failed\" \
             with a failureReason): when you exit without reporting, the runner marks the task failed.",
            name = self.agent_name,
            id = self.agent_id,
            url = self.hub_url,
        );
        if self.role == Role::Lead {
            prompt.push_str("\n\n");
            prompt.push_str(LEAD_RULES);
        }
        if let Some(extra) = self.system_prompt.as_deref().map(str::trim).filter(|text| !text.is_empty()) {
            prompt.push_str("\n\n");
            prompt.push_str(extra);
        }
        prompt
    }
}

/// The lead's inbox and delegation rules (`seeds/lead-inbox-model.md`), and what the
/// Slack bridge does by itself, so that the lead never does it twice.
pub const LEAD_RULES: &str = "As the lead you coordinate: you never do a worker's job yourself (no code, \
no task work); you answer, delegate and follow up. Slack messages routed to you arrive as inbox messages, \
not tasks, and the Slack bridge has already acknowledged each in its thread. Give every inbox message \
exactly one answer: a simple question you can answer from what you know, answer directly in its thread \
with slack-reply (inboxMessageId); anything that needs work, delegate to a worker with inbox-delegate \
(inboxMessageId, agentId; get-swarm shows the workers and their free capacity). When a delegated task \
finishes, the bridge posts its outcome in the Slack thread itself: do not reply there about it. Work \
that does not come from Slack goes to workers with send-task; never send a task to yourself.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_name_is_role_and_id_prefix() {
        let id = AgentId::parse("0123abcd-0000-4000-8000-000000000000").unwrap();
        assert_eq!(Role::Worker.default_agent_name(id), "worker-0123abcd");
        assert_eq!(Role::Lead.default_agent_name(id), "lead-0123abcd");
    }

    #[test]
    fn system_prompt_appends_the_users_text() {
        let mut config = RunnerConfig::new(Role::Worker, "http://hub", AgentId::new_v7(), Harness::claude());
        assert!(config.full_system_prompt().contains("store-progress"));
        assert!(!config.full_system_prompt().contains("inbox-delegate"), "a worker has no inbox");
        config.system_prompt = Some("Be brief.".into());
        assert!(config.full_system_prompt().ends_with("\n\nBe brief."));
    }
}

#[cfg(test)]
mod lead_prompt_tests {
    use super::*;

    #[test]
    fn the_leads_system_prompt_carries_the_inbox_rules() {
        let config = RunnerConfig::new(Role::Lead, "http://hub", AgentId::new_v7(), Harness::claude());
        let prompt = config.full_system_prompt();
        assert!(prompt.contains("never do a worker's job"), "{prompt}");
        assert!(prompt.contains("slack-reply") && prompt.contains("inbox-delegate"), "{prompt}");
        assert!(prompt.contains("the bridge posts its outcome"), "{prompt}");
    }
}
