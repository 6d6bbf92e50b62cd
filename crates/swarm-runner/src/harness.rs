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
                // The reference's command line (CONTRACT.md, Runner): extra arguments go
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
                // `codex exec` has no system-prompt flag: the runner's prompt goes first.
                // Approvals are bypassed for the same reason Claude's permissions are: no
                // one is there to answer them.
                let mut args = owned(&["exec", "--json", "--dangerously-bypass-approvals-and-sandbox"]);
                args.extend(run.agent_args.iter().cloned());
                args.push(format!("{}\n\n{}", run.system_prompt, run.prompt));
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
        match event.get("type").and_then(Value::as_str) {
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
                self.is_error |= event.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                self.result = text("result").or(self.result.take());
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
                }
                self.num_turns = Some(self.num_turns.unwrap_or(0) + 1);
                if let Some(usage) = event.get("usage") {
                    let add = |total: Option<i64>, key: &str| match number(usage.get(key)) {
                        Some(count) => Some(total.unwrap_or(0) + count),
                        None => total,
                    };
                    self.input_tokens = add(self.input_tokens, "input_tokens");
                    self.cache_read_tokens = add(self.cache_read_tokens, "cached_input_tokens");
                    self.output_tokens = add(self.output_tokens, "output_tokens");
                }
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
            Some("error") => self.is_error = true,
            _ => {}
        }
    }
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
        assert_eq!(codex.last().unwrap(), "be good\n\n/work-on-task 1");
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
        assert_eq!(claude.last_text.as_deref(), Some("Invalid API key"));
        claude.observe(r#"{"type":"assistant","message":{"model":"claude-x","content":[{"type":"text","text":"On it"}]}}"#);
        assert!(claude.activity);
        assert_eq!(claude.last_text.as_deref(), Some("On it"));

        let mut codex = RunReport::default();
        codex.observe(r#"{"type":"thread.started","thread_id":"t"}"#);
        codex.observe(r#"{"type":"error","message":"401 Unauthorized"}"#);
        codex.observe(r#"{"type":"turn.failed","error":{"message":"401"}}"#);
        assert!(!codex.activity);
        codex.observe(r#"{"type":"item.started","item":{"id":"1","type":"mcp_tool_call"}}"#);
        assert!(codex.activity);

        let mut program = RunReport::default();
        program.observe("   ");
        assert!(!program.activity);
        program.observe("working on it");
        assert!(program.activity);
    }

    #[test]
    fn reads_codex_jsonl_and_sums_turns() {
        let mut report = RunReport::default();
        for line in [
            r#"{"type":"thread.started","thread_id":"th-9"}"#,
            r#"{"type":"turn.started"}"#,
            r#"{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"all done"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":9}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}}"#,
        ] {
            report.observe(line);
        }
        assert_eq!(report.session_id.as_deref(), Some("th-9"));
        assert_eq!(
            (report.input_tokens, report.cache_read_tokens, report.output_tokens),
            (Some(101), Some(40), Some(10))
        );
        assert_eq!(report.num_turns, Some(2));
        assert_eq!(report.result.as_deref(), Some("all done"));
        assert!(!report.is_error && report.cost_usd.is_none() && report.has_usage());
        report.observe(r#"{"type":"turn.failed","error":{"message":"boom"}}"#);
        assert!(report.is_error);
    }
}
