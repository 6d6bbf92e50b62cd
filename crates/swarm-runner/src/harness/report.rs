//! What the runner reads from an agent CLI's output: [`RunReport`], filled line by line by
//! the parser of the harness's [`StreamFormat`] (each in its CLI's file).

use serde::Deserialize;
use serde_json::Value;

/// How an agent CLI's standard output reads: one of the formats the runner has a parser for.
/// A harness file names one (`output = "codex-jsonl"`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamFormat {
    /// Claude Code's `--output-format stream-json`.
    ClaudeStreamJson,
    /// Codex's `exec --json` events, whose token counts are the thread's so far.
    CodexJsonl,
    /// pi's `--mode json` events, each model request's usage on its own.
    PiJson,
    /// The Gemini CLI's `--output-format stream-json`.
    GeminiStreamJson,
    /// opencode's `run --format json` events.
    OpencodeJson,
    /// Plain text: any line printed counts as the agent at work; nothing else is read.
    Text,
    /// Lines in Claude Code's or Codex's shape are read like theirs, any other line is
    /// activity: what a `--harness-cmd` program may print.
    #[default]
    Auto,
}

impl StreamFormat {
    /// Takes in one output line. Lines that are not JSON, or not a kind the format has,
    /// change nothing but `activity`.
    pub(crate) fn observe(self, report: &mut RunReport, line: &str) {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            // A program that prints plain text is doing something.
            if !line.trim().is_empty() && matches!(self, StreamFormat::Text | StreamFormat::Auto) {
                report.activity = true;
            }
            return;
        };
        match self {
            StreamFormat::ClaudeStreamJson => super::claude::observe(report, &event),
            StreamFormat::CodexJsonl => super::codex::observe(report, &event),
            StreamFormat::PiJson => super::pi::observe(report, &event),
            StreamFormat::GeminiStreamJson => super::gemini::observe(report, &event),
            StreamFormat::OpencodeJson => super::opencode::observe(report, &event),
            StreamFormat::Text => report.activity = true,
            StreamFormat::Auto => {
                super::claude::observe(report, &event);
                super::codex::observe(report, &event);
            }
        }
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
    /// The model refused the CLI's key or account (HTTP 401 or 403: never transient), in the
    /// CLI's words; the runner then stops the run at once and hands its task back, whatever
    /// the CLI would do next (Claude Code retries a 401 for minutes). Each format's parser sets
    /// it from what its CLI prints, with `crate::stall::{refusal_in, refusing_status}`.
    pub model_refused: Option<String>,
    /// The agent's tool calls, for noticing a loop: each format's parser reports every tool
    /// call its CLI starts, in order (`crate::stall::ToolLoop::called`).
    pub tool_loop: crate::stall::ToolLoop,
}

impl RunReport {
    /// Whether there is anything worth sending to `POST /api/session-costs`.
    pub fn has_usage(&self) -> bool {
        self.cost_usd.is_some() || self.input_tokens.is_some() || self.output_tokens.is_some()
    }

    /// Takes in one output line of a `--harness-cmd` program ([`StreamFormat::Auto`]).
    #[cfg(test)]
    pub fn observe(&mut self, line: &str) {
        StreamFormat::Auto.observe(self, line);
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
