//! Agent CLIs ("harnesses"): how each is started, and what the runner reads from its
//! output (session id, result, cost).

use std::{path::PathBuf, process::Stdio};

use serde_json::Value;

use crate::RunnerError;

/// Which agent CLI a runner starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Harness {
    /// Claude Code: `claude --verbose --output-format stream-json ... -p <prompt>`.
    Claude,
    /// OpenAI Codex: `codex exec --json ... <prompt>`.
    Codex,
    /// Any program, run as `<program> [args] [agent args] <prompt>`. Lines it prints in
    /// Claude's stream-json or Codex's JSONL shape are understood like theirs.
    Command { program: PathBuf, args: Vec<String> },
}

/// One agent run to start.
#[derive(Debug, Clone)]
pub(crate) struct Invocation<'a> {
    pub prompt: &'a str,
    pub system_prompt: &'a str,
    pub agent_args: &'a [String],
    /// The agent session to resume (a persistent trigger's conversation).
    pub resume: Option<&'a str>,
}

impl Harness {
    /// A program given as one command line (`--harness-cmd "python3 agent.py --fast"`),
    /// split into words as a POSIX shell would, quotes and escapes included.
    pub fn from_command_line(line: &str) -> Result<Harness, RunnerError> {
        let invalid = |reason: String| RunnerError::HarnessCommand { line: line.to_string(), reason };
        let mut words = shell_words::split(line).map_err(|err| invalid(err.to_string()))?.into_iter();
        let program = words
            .next()
            .filter(|word| !word.is_empty())
            .ok_or_else(|| invalid("it names no program".into()))?;
        Ok(Harness::Command { program: PathBuf::from(program), args: words.collect() })
    }

    /// The program this harness starts, as named (a bare name is looked up on `PATH`).
    pub fn program(&self) -> PathBuf {
        match self {
            Harness::Claude => PathBuf::from("claude"),
            Harness::Codex => PathBuf::from("codex"),
            Harness::Command { program, .. } => program.clone(),
        }
    }

    /// The name the hub's session logs record as `cli`.
    pub fn cli_name(&self) -> String {
        match self {
            Harness::Claude => "claude".into(),
            Harness::Codex => "codex".into(),
            Harness::Command { program, .. } => program
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_else(|| program.display().to_string()),
        }
    }

    /// The program to start and its arguments.
    pub(crate) fn command_line(&self, run: &Invocation<'_>) -> (PathBuf, Vec<String>) {
        let owned = |items: &[&str]| items.iter().map(|item| item.to_string()).collect::<Vec<_>>();
        match self {
            Harness::Claude => {
                // The reference's command line: extra arguments go
                // before the system prompt.
                let mut args = owned(&[
                    "--verbose",
                    "--output-format",
                    "stream-json",
                    "--dangerously-skip-permissions",
                    "--permission-mode",
                    "bypassPermissions",
                ]);
                // One argument: a session id can never be read as a flag of its own.
                if let Some(session) = run.resume {
                    args.push(format!("--resume={session}"));
                }
                args.push("-p".into());
                args.push(run.prompt.to_string());
                args.extend(run.agent_args.iter().cloned());
                args.push("--append-system-prompt".into());
                args.push(run.system_prompt.to_string());
                (PathBuf::from("claude"), args)
            }
            Harness::Codex => {
                // Approvals are bypassed for the same reason Claude's permissions are: no
                // one is there to answer them. `codex exec` refuses a directory outside a git
                // repository unless told, a check Claude Code does not make: the runner's
                // project is the user's choice.
                let mut args = owned(&["exec"]);
                if run.resume.is_some() {
                    args.push("resume".into());
                }
                args.extend(owned(&[
                    "--json",
                    "--dangerously-bypass-approvals-and-sandbox",
                    "--skip-git-repo-check",
                ]));
                args.extend(run.agent_args.iter().cloned());
                // Codex has no slash commands: the command's instructions, in full.
                let prompt =
                    swarm_domain::prompts::expand(run.prompt).unwrap_or_else(|| run.prompt.to_string());
                match run.resume {
                    // `codex exec resume <thread> <prompt>`: the thread holds the system prompt.
                    Some(thread) => {
                        args.push(thread.to_string());
                        args.push(prompt);
                    }
                    // `codex exec` has no system-prompt flag: the runner's prompt goes first.
                    None => args.push(format!("{}\n\n{prompt}", run.system_prompt)),
                }
                (PathBuf::from("codex"), args)
            }
            Harness::Command { program, args } => {
                let mut args = args.clone();
                args.extend(run.agent_args.iter().cloned());
                args.push(run.prompt.to_string());
                (program.clone(), args)
            }
        }
    }

    /// A ready-to-spawn command: own process group, pipes for stdout and stderr, no stdin.
    pub(crate) fn command(&self, run: &Invocation<'_>) -> tokio::process::Command {
        let (program, args) = self.command_line(run);
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Harness::Command { .. } = self {
            // A program has no flag for it; it may read it here.
            command.env("SWARM_SYSTEM_PROMPT", run.system_prompt);
            // Nor for a session to resume.
            match run.resume {
                Some(session) => command.env("SWARM_RESUME_SESSION", session),
                None => command.env_remove("SWARM_RESUME_SESSION"),
            };
        }
        crate::process::detach_and_bind(&mut command);
        command
    }
}

/// What the runner learned from an agent run's output. Fields stay `None` when the
/// agent CLI did not say.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RunReport {
    pub session_id: Option<String>,
    pub model: Option<String>,
    pub cost_usd: Option<f64>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cache_read_tokens: Option<i64>,
    pub cache_write_tokens: Option<i64>,
    pub duration_ms: Option<i64>,
    pub num_turns: Option<i64>,
    pub is_error: bool,
    /// The agent's final answer (Claude's `result`, Codex's last agent message).
    pub result: Option<String>,
    /// The model answered or a tool ran: the run did something. A CLI that fails before
    /// that (bad key, model unreachable, bad flag) only prints its own error.
    pub activity: bool,
    /// The last text the model wrote, for a reason when the run ends unreported.
    pub last_text: Option<String>,
    /// What the CLI said of its own failure: Claude Code's `result` with `is_error`, Codex's
    /// last `error` event or failed turn.
    pub error_text: Option<String>,
    /// The CLI said it cannot reach the model and keeps retrying (Codex's "Reconnecting...",
    /// Claude Code's `api_retry`), with no progress since: what it said.
    pub waiting_for_model: Option<String>,
}

impl RunReport {
    /// Whether there is anything worth sending to `POST /api/session-costs`.
    pub fn has_usage(&self) -> bool {
        self.cost_usd.is_some() || self.input_tokens.is_some() || self.output_tokens.is_some()
    }

    /// Takes in one output line. Lines that are not JSON, or not a kind the runner
    /// reads, change nothing.
    pub fn observe(&mut self, line: &str) {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            // A program of --harness-cmd that prints plain text is doing something.
            if !line.trim().is_empty() {
                self.activity = true;
            }
            return;
        };
        let text = |key: &str| event.get(key).and_then(Value::as_str).map(str::to_string);
        let number = |value: Option<&Value>| value.and_then(Value::as_i64);
        let kind = event.get("type").and_then(Value::as_str);
        // The model answered or a tool ran (not a CLI's report of its own failure).
        let progressed = matches!(kind, Some("assistant" | "user" | "item.started" | "item.completed"));
        match kind {
            // Claude Code retries a model it cannot reach (or that refuses it) with backoff,
            // for minutes unless CLAUDE_CODE_MAX_RETRIES says otherwise.
            Some("system") if text("subtype").as_deref() == Some("api_retry") => {
                let status = event.get("error_status").map(Value::to_string).unwrap_or_else(|| "none".into());
                self.waiting_for_model = Some(format!(
                    "API retry {} of {} (status {status})",
                    event.get("attempt").map(Value::to_string).unwrap_or_default(),
                    event.get("max_retries").map(Value::to_string).unwrap_or_default(),
                ));
            }
            // Claude Code stream-json.
            Some("system") => {
                if let Some(id) = text("session_id") {
                    self.session_id = Some(id);
                }
                if let Some(model) = text("model") {
                    self.model = Some(model);
                }
            }
            // Claude Code reports its own failures (bad key, no credit) as a "<synthetic>"
            // assistant message: that is no sign of the model at work.
            Some("assistant") => {
                let message = event.get("message");
                if message.and_then(|message| message.get("model")).and_then(Value::as_str)
                    != Some("<synthetic>")
                {
                    self.activity = true;
                }
                let blocks = message.and_then(|message| message.get("content")).and_then(Value::as_array);
                let texts: Vec<&str> = blocks
                    .into_iter()
                    .flatten()
                    .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|block| block.get("text").and_then(Value::as_str))
                    .collect();
                if !texts.is_empty() {
                    self.last_text = Some(texts.join("\n"));
                }
            }
            Some("user") => self.activity = true,
            Some("result") => {
                self.session_id = text("session_id").or(self.session_id.take());
                self.cost_usd = event.get("total_cost_usd").and_then(Value::as_f64).or(self.cost_usd);
                self.duration_ms = number(event.get("duration_ms")).or(self.duration_ms);
                self.num_turns = number(event.get("num_turns")).or(self.num_turns);
                let failed = event.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                self.is_error |= failed;
                self.result = text("result").or(self.result.take());
                if failed {
                    self.error_text = self.result.clone();
                }
                if let Some(usage) = event.get("usage") {
                    self.input_tokens = number(usage.get("input_tokens")).or(self.input_tokens);
                    self.output_tokens = number(usage.get("output_tokens")).or(self.output_tokens);
                    self.cache_read_tokens =
                        number(usage.get("cache_read_input_tokens")).or(self.cache_read_tokens);
                    self.cache_write_tokens =
                        number(usage.get("cache_creation_input_tokens")).or(self.cache_write_tokens);
                }
            }
            // Codex `exec --json`.
            Some("thread.started") => self.session_id = text("thread_id").or(self.session_id.take()),
            Some("session.created") => self.session_id = text("session_id").or(self.session_id.take()),
            Some("turn.completed") | Some("turn.failed") => {
                if event.get("type").and_then(Value::as_str) == Some("turn.failed") {
                    self.is_error = true;
                    let message = event.pointer("/error/message").and_then(Value::as_str);
                    self.error_text = message.map(str::to_string).or(self.error_text.take());
                }
                self.num_turns = Some(self.num_turns.unwrap_or(0) + 1);
                // Codex counts the whole thread so far, earlier invocations included: the
                // latest count replaces the previous one (see `subtract`).
                if let Some(usage) = event.get("usage") {
                    self.input_tokens = number(usage.get("input_tokens")).or(self.input_tokens);
                    self.cache_read_tokens =
                        number(usage.get("cached_input_tokens")).or(self.cache_read_tokens);
                    self.output_tokens = number(usage.get("output_tokens")).or(self.output_tokens);
                }
                self.waiting_for_model = None;
            }
            Some(kind @ ("item.started" | "item.completed")) => {
                let item = event.get("item");
                let item_kind = item
                    .and_then(|item| item.get("type").or_else(|| item.get("item_type")))
                    .and_then(Value::as_str);
                if item_kind.is_some_and(|item_kind| item_kind != "error") {
                    self.activity = true;
                }
                if kind == "item.completed"
                    && item_kind == Some("agent_message")
                    && let Some(message) = item.and_then(|item| item.get("text")).and_then(Value::as_str)
                {
                    self.result = Some(message.to_string());
                    self.last_text = Some(message.to_string());
                }
            }
            Some("error") => {
                self.is_error = true;
                // Codex does not give up on a model it cannot reach: it says so and retries
                // forever (docs/real-agent-clis.md).
                let message = text("message").unwrap_or_default();
                if message.starts_with("Reconnecting") {
                    self.waiting_for_model = Some(message.clone());
                }
                self.error_text = Some(message);
            }
            _ => {}
        }
        if progressed {
            self.waiting_for_model = None;
        }
    }

    /// Takes away what a resumed Codex thread had counted before this run (Codex's counts
    /// are the thread's, not the invocation's).
    pub fn subtract(&mut self, before: &TokenCounts) {
        let less = |count: Option<i64>, earlier: i64| count.map(|count| (count - earlier).max(0));
        self.input_tokens = less(self.input_tokens, before.input);
        self.cache_read_tokens = less(self.cache_read_tokens, before.cached);
        self.output_tokens = less(self.output_tokens, before.output);
    }
}

/// Token counts of a Codex thread so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TokenCounts {
    pub input: i64,
    pub cached: i64,
    pub output: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run<'a>(agent_args: &'a [String]) -> Invocation<'a> {
        Invocation { prompt: "/work-on-task 1", system_prompt: "be good", agent_args, resume: None }
    }

    #[test]
    fn claude_command_line_is_the_references() {
        let extra = vec!["--model".to_string(), "opus".to_string()];
        let (program, args) = Harness::Claude.command_line(&run(&extra));
        assert_eq!(program, PathBuf::from("claude"));
        assert_eq!(
            args,
            [
                "--verbose",
                "--output-format",
                "stream-json",
                "--dangerously-skip-permissions",
                "--permission-mode",
                "bypassPermissions",
                "-p",
                "/work-on-task 1",
                "--model",
                "opus",
                "--append-system-prompt",
                "be good"
            ]
        );
    }

    #[test]
    fn a_program_gets_the_prompt_last() {
        let extra = vec!["stand-in-agent".to_string()];
        let harness = Harness::Command { program: PathBuf::from("/bin/swarm"), args: Vec::new() };
        let (program, args) = harness.command_line(&run(&extra));
        assert_eq!(program, PathBuf::from("/bin/swarm"));
        assert_eq!(args, ["stand-in-agent", "/work-on-task 1"]);
        assert_eq!(harness.cli_name(), "swarm");
        let (_, codex) = Harness::Codex.command_line(&run(&[]));
        assert_eq!(
            codex[..4],
            ["exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check"]
        );
        let prompt = codex.last().unwrap();
        assert!(
            prompt.starts_with("be good\n\n# Work on swarm task 1\n"),
            "Codex gets the instructions: {prompt}"
        );
        let resume = Invocation { resume: Some("th-1"), ..run(&[]) };
        let (_, codex) = Harness::Codex.command_line(&resume);
        assert_eq!(codex[..2], ["exec", "resume"]);
        assert_eq!(codex[codex.len() - 2], "th-1");
        assert!(codex.last().unwrap().starts_with("# Work on swarm task 1\n"), "{codex:?}");
    }

    #[test]
    fn a_command_line_is_split_into_shell_words() {
        let harness = Harness::from_command_line(r#"python3 'my agent.py' --name "a b" \\x"#).unwrap();
        let extra = vec!["--fast".to_string()];
        let (program, args) = harness.command_line(&run(&extra));
        assert_eq!(program, PathBuf::from("python3"));
        assert_eq!(args, ["my agent.py", "--name", "a b", "\\x", "--fast", "/work-on-task 1"]);
        assert_eq!(harness.cli_name(), "python3");

        for bad in ["python3 'agent.py", "run \"half", "", "   "] {
            let err = Harness::from_command_line(bad).unwrap_err().to_string();
            assert!(err.contains("--harness-cmd") && err.contains("not a valid command line"), "{err}");
        }
    }

    #[test]
    fn reads_claude_stream_json() {
        let mut report = RunReport::default();
        report.observe(r#"{"type":"system","subtype":"init","session_id":"s-1","model":"claude-x"}"#);
        report.observe("not json at all");
        report.observe(r#"{"type":"assistant","message":{}}"#);
        report.observe(
            r#"{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s-1",
                "total_cost_usd":0.25,"duration_ms":1200,"num_turns":3,
                "usage":{"input_tokens":10,"output_tokens":20,"cache_read_input_tokens":5,"cache_creation_input_tokens":7}}"#
                .replace('\n', " ")
                .as_str(),
        );
        assert_eq!(
            report,
            RunReport {
                session_id: Some("s-1".into()),
                model: Some("claude-x".into()),
                cost_usd: Some(0.25),
                input_tokens: Some(10),
                output_tokens: Some(20),
                cache_read_tokens: Some(5),
                cache_write_tokens: Some(7),
                duration_ms: Some(1200),
                num_turns: Some(3),
                is_error: false,
                result: Some("done".into()),
                activity: true,
                last_text: None,
                error_text: None,
                waiting_for_model: None,
            }
        );
        assert!(report.has_usage());
    }

    #[test]
    fn a_cli_that_only_reports_its_own_failure_did_nothing() {
        let mut claude = RunReport::default();
        claude.observe(r#"{"type":"system","subtype":"init","session_id":"s"}"#);
        claude.observe(
            r#"{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"Invalid API key"}]}}"#,
        );
        claude.observe(r#"{"type":"result","is_error":true,"result":"Invalid API key"}"#);
        assert!(!claude.activity && claude.is_error);
        assert_eq!(claude.error_text.as_deref(), Some("Invalid API key"));
        assert_eq!(claude.last_text.as_deref(), Some("Invalid API key"));
        claude.observe(r#"{"type":"assistant","message":{"model":"claude-x","content":[{"type":"text","text":"On it"}]}}"#);
        assert!(claude.activity);
        assert_eq!(claude.last_text.as_deref(), Some("On it"));

        let mut codex = RunReport::default();
        codex.observe(r#"{"type":"thread.started","thread_id":"t"}"#);
        codex.observe(r#"{"type":"error","message":"401 Unauthorized"}"#);
        codex.observe(r#"{"type":"turn.failed","error":{"message":"401"}}"#);
        assert!(!codex.activity);
        assert_eq!(codex.error_text.as_deref(), Some("401"));
        codex.observe(r#"{"type":"item.started","item":{"id":"1","type":"mcp_tool_call"}}"#);
        assert!(codex.activity);

        let mut unreachable = RunReport::default();
        unreachable.observe(r#"{"type":"error","message":"Reconnecting... 2/5 (Connection failed)"}"#);
        assert_eq!(unreachable.waiting_for_model.as_deref(), Some("Reconnecting... 2/5 (Connection failed)"));
        unreachable
            .observe(r#"{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"back"}}"#);
        assert_eq!(unreachable.waiting_for_model, None, "the model answered again");
        unreachable.observe(
            r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"error_status":529}"#,
        );
        assert_eq!(unreachable.waiting_for_model.as_deref(), Some("API retry 1 of 10 (status 529)"));

        let mut program = RunReport::default();
        program.observe("   ");
        assert!(!program.activity);
        program.observe("working on it");
        assert!(program.activity);
    }

    #[test]
    fn reads_codex_jsonl_whose_counts_are_the_threads() {
        let mut report = RunReport::default();
        for line in [
            r#"{"type":"thread.started","thread_id":"th-9"}"#,
            r#"{"type":"turn.started"}"#,
            r#"{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"all done"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":9}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":101,"cached_input_tokens":40,"output_tokens":10}}"#,
        ] {
            report.observe(line);
        }
        assert_eq!(report.session_id.as_deref(), Some("th-9"));
        assert_eq!(
            (report.input_tokens, report.cache_read_tokens, report.output_tokens),
            (Some(101), Some(40), Some(10))
        );
        assert_eq!(report.num_turns, Some(2));
        // A resumed thread: what it counted before this run is taken away.
        let mut resumed = report.clone();
        resumed.subtract(&TokenCounts { input: 60, cached: 40, output: 4 });
        assert_eq!(
            (resumed.input_tokens, resumed.cache_read_tokens, resumed.output_tokens),
            (Some(41), Some(0), Some(6))
        );
        assert_eq!(report.result.as_deref(), Some("all done"));
        assert!(!report.is_error && report.cost_usd.is_none() && report.has_usage());
        report.observe(r#"{"type":"turn.failed","error":{"message":"boom"}}"#);
        assert!(report.is_error);
    }
}
