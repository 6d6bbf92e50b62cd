//! Agent CLIs ("harnesses"). What differs between CLIs is data, one [`Harness`] each: the
//! program, its argument templates for a prompt, a resume, a model and the system prompt,
//! its environment, which MCP configuration `swarm connect` writes for it, how its output
//! reads ([`StreamFormat`]) and what it can do (resume sessions, hooks). The built-in ones
//! are TOML files embedded here (`claude.toml`, `codex.toml`, ...); a user adds a CLI with a
//! file of the same shape (`--harness-file`, or `~/.config/swarm/harnesses/<name>.toml`
//! for `--harness <name>`). Code is left for what cannot be data: each output format's
//! parser, in its CLI's file, and the prompts' expansion.

pub(crate) mod claude;
pub(crate) mod codex;
pub(crate) mod gemini;
pub(crate) mod opencode;
pub(crate) mod pi;
mod report;
mod spec;

use std::{
    path::{Path, PathBuf},
    process::Stdio,
};

use self::spec::HarnessSpec;
pub use self::{
    report::StreamFormat,
    spec::{MailDelivery, McpConfig, Prompts, SteeringDelivery},
};
pub(crate) use self::{
    report::{RunReport, TokenCounts},
    spec::Values,
};
use crate::RunnerError;

/// The built-in harnesses: name and file.
const BUILT_IN: &[(&str, &str)] = &[
    ("claude", claude::SPEC),
    ("codex", codex::SPEC),
    ("pi", pi::SPEC),
    ("gemini", gemini::SPEC),
    ("opencode", opencode::SPEC),
];

/// An agent CLI the runner starts, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct Harness {
    spec: HarnessSpec,
}

/// One agent run to start.
#[derive(Debug, Clone)]
pub(crate) struct Invocation<'a> {
    pub prompt: &'a str,
    pub system_prompt: &'a str,
    pub agent_args: &'a [String],
    /// The agent session to resume (a persistent trigger's conversation).
    pub resume: Option<&'a str>,
    /// The model the run asks for (the task's, else the runner's `--model`).
    pub model: Option<&'a str>,
}

impl Harness {
    /// The names `--harness` knows without a file.
    pub fn built_in_names() -> impl Iterator<Item = &'static str> {
        BUILT_IN.iter().map(|(name, _)| *name)
    }

    /// A built-in harness by name.
    pub fn built_in(name: &str) -> Option<Harness> {
        let (_, text) = BUILT_IN.iter().find(|(known, _)| *known == name)?;
        let spec = HarnessSpec::from_toml(text, name).expect("the built-in harness files are valid");
        Some(Harness { spec })
    }

    /// Claude Code.
    pub fn claude() -> Harness {
        Harness::built_in("claude").expect("claude is built in")
    }

    /// OpenAI Codex.
    pub fn codex() -> Harness {
        Harness::built_in("codex").expect("codex is built in")
    }

    /// Any program, run as `<program> [args] [agent args] <prompt>`, with the system
    /// prompt in `SWARM_SYSTEM_PROMPT`, a session to resume in `SWARM_RESUME_SESSION` and
    /// the model in `SWARM_MODEL`. Lines it prints in Claude's stream-json or Codex's JSONL
    /// shape are understood like theirs.
    pub fn program(program: impl Into<PathBuf>, args: Vec<String>) -> Harness {
        let program: PathBuf = program.into();
        let name = program
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| program.display().to_string());
        let mut template = args;
        template.extend(["{agent_args}".to_string(), "{prompt}".to_string()]);
        let env = [
            ("SWARM_SYSTEM_PROMPT", "{system_prompt}"),
            ("SWARM_RESUME_SESSION", "{session}"),
            ("SWARM_MODEL", "{model}"),
        ];
        let spec = HarnessSpec {
            name,
            program: program.to_string_lossy().into_owned(),
            args: template,
            resume_args: None,
            model_args: Vec::new(),
            stdin: None,
            resume_stdin: None,
            env: env.into_iter().map(|(name, value)| (name.to_string(), value.to_string())).collect(),
            output: StreamFormat::Auto,
            prompts: Prompts::Slash,
            mail: MailDelivery::None,
            hooks: false,
            // Resuming would start the program again with the messages as its prompt.
            steering: Some(SteeringDelivery::None),
            mcp: McpConfig::None,
            install: None,
            check_version: false,
            root_needs_sandbox: false,
        };
        Harness { spec }
    }

    /// A program given as one command line (`--harness-cmd "python3 agent.py --fast"`),
    /// split into words as a POSIX shell would, quotes and escapes included.
    pub fn from_command_line(line: &str) -> Result<Harness, RunnerError> {
        let invalid = |reason: String| RunnerError::HarnessCommand { line: line.to_string(), reason };
        let mut words = shell_words::split(line).map_err(|err| invalid(err.to_string()))?.into_iter();
        let program = words
            .next()
            .filter(|word| !word.is_empty())
            .ok_or_else(|| invalid("it names no program".into()))?;
        Ok(Harness::program(program, words.collect()))
    }

    /// A harness file's text (`origin` names it in errors and is its default name).
    pub fn from_toml(text: &str, origin: &str) -> Result<Harness, RunnerError> {
        let spec = HarnessSpec::from_toml(text, origin)
            .map_err(|reason| RunnerError::HarnessFile { origin: origin.to_string(), reason })?;
        Ok(Harness { spec })
    }

    /// A harness file (`--harness-file`); its name defaults to the file's stem.
    pub fn from_file(path: &Path) -> Result<Harness, RunnerError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| RunnerError::Io { path: path.to_path_buf(), source })?;
        let stem = path.file_stem().map(|stem| stem.to_string_lossy().into_owned()).unwrap_or_default();
        Harness::from_toml(&text, &stem).map_err(|err| match err {
            RunnerError::HarnessFile { reason, .. } => {
                RunnerError::HarnessFile { origin: path.display().to_string(), reason }
            }
            other => other,
        })
    }

    /// `--harness <name>`: `<dir>/<name>.toml` in the user's harness folder when there is
    /// one (so a user may change a built-in CLI's flags), else the built-in harness.
    pub fn named(name: &str, user_dir: Option<&Path>) -> Result<Harness, RunnerError> {
        if let Some(file) = user_dir.map(|dir| dir.join(format!("{name}.toml")))
            && file.is_file()
        {
            return Harness::from_file(&file);
        }
        Harness::built_in(name).ok_or_else(|| {
            let known: Vec<&str> = Harness::built_in_names().collect();
            let place = user_dir
                .map(|dir| format!(" nor {}", dir.join(format!("{name}.toml")).display()))
                .unwrap_or_default();
            RunnerError::InvalidConfig(format!(
                "no agent CLI named {name:?}: not built in ({}){place}; write a harness file \
                 (docs/real-agent-clis.md, \"Adding an agent CLI\") or use --harness-cmd",
                known.join(", ")
            ))
        })
    }

    /// The user's harness folder: `$XDG_CONFIG_HOME/swarm/harnesses`, else
    /// `~/.config/swarm/harnesses`.
    pub fn user_dir() -> Option<PathBuf> {
        let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from);
        let config = var("XDG_CONFIG_HOME").or_else(|| var("HOME").map(|home| home.join(".config")))?;
        Some(config.join("swarm").join("harnesses"))
    }

    /// The name the hub's session logs record as `cli`.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The program this harness starts, as named (a bare name is looked up on `PATH`).
    pub fn program_path(&self) -> PathBuf {
        PathBuf::from(&self.spec.program)
    }

    pub fn output(&self) -> StreamFormat {
        self.spec.output
    }

    pub fn mcp(&self) -> McpConfig {
        self.spec.mcp
    }

    pub fn mail(&self) -> MailDelivery {
        self.spec.mail
    }

    /// Whether the CLI runs `swarm hook` on its own events (mail, cancel, steering).
    pub fn supports_hooks(&self) -> bool {
        self.spec.hooks
    }

    /// How steering reaches its running agent (the file's `steering`, else `resume` when
    /// it resumes sessions, else `none`).
    pub fn steering(&self) -> SteeringDelivery {
        self.spec.steering.unwrap_or(if self.can_resume() {
            SteeringDelivery::Resume
        } else {
            SteeringDelivery::None
        })
    }

    /// Whether it can continue an earlier session (a trigger's conversation).
    pub fn can_resume(&self) -> bool {
        self.spec.can_resume()
    }

    /// Whether a run can choose its model.
    pub fn can_choose_model(&self) -> bool {
        !self.spec.model_args.is_empty() || self.spec.env.values().any(|value| value.contains("{model}"))
    }

    /// How to install it, for `swarm doctor`.
    pub fn install_hint(&self) -> Option<&str> {
        self.spec.install.as_deref()
    }

    /// Whether `swarm doctor` may run `<program> --version`.
    pub fn checks_version(&self) -> bool {
        self.spec.check_version
    }

    pub fn root_needs_sandbox(&self) -> bool {
        self.spec.root_needs_sandbox
    }

    /// The program to start and its arguments.
    pub(crate) fn command_line(&self, run: &Invocation<'_>) -> (PathBuf, Vec<String>) {
        let prompt = self.prompt(run);
        let args = self.spec.arguments(&self.values(run, &prompt));
        (self.program_path(), args)
    }

    /// The prompt as this CLI gets it.
    fn prompt(&self, run: &Invocation<'_>) -> String {
        match self.spec.prompts {
            Prompts::Slash => run.prompt.to_string(),
            // No slash commands: the command's instructions, in full.
            Prompts::Expanded => {
                swarm_domain::prompts::expand(run.prompt).unwrap_or_else(|| run.prompt.to_string())
            }
        }
    }

    fn values<'a>(&self, run: &Invocation<'a>, prompt: &'a str) -> Values<'a> {
        Values {
            prompt,
            system_prompt: run.system_prompt,
            session: run.resume,
            model: run.model,
            agent_args: run.agent_args,
        }
    }

    /// What the runner writes to the CLI's standard input (then closes it), if anything.
    pub(crate) fn input(&self, run: &Invocation<'_>) -> Option<String> {
        let prompt = self.prompt(run);
        self.spec.input(&self.values(run, &prompt))
    }

    /// A ready-to-spawn command: own process group, pipes for stdout and stderr, a pipe for
    /// stdin when the harness writes to it ([`Harness::input`]), else none.
    pub(crate) fn command(&self, run: &Invocation<'_>) -> tokio::process::Command {
        let (program, args) = self.command_line(run);
        let mut command = tokio::process::Command::new(program);
        let stdin = if self.spec.stdin.is_some() { Stdio::piped() } else { Stdio::null() };
        command.args(args).stdin(stdin).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        for (name, value) in self.spec.environment(&self.values(run, run.prompt)) {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        crate::process::detach_and_bind(&mut command);
        command
    }

    /// What a resumed session had counted before this run, when the CLI's counts are the
    /// session's rather than the run's (Codex).
    pub(crate) fn counted_before(&self, session: &str) -> Option<TokenCounts> {
        match self.spec.output {
            StreamFormat::CodexJsonl => codex::thread_usage(session),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
