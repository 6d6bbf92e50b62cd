//! The Gemini CLI: its harness file (`gemini.toml`) and what the runner reads of its
//! `--output-format stream-json` (docs/real-agent-clis.md, "Gemini CLI").
//!
//! Events, one JSON object a line: `init` (`session_id`, `model`), `message` (the user's prompt
//! echoed, then the model's text as `role: "assistant"` chunks with `delta: true`), `tool_use`
//! (`tool_name`, `parameters`), `tool_result`, `error` (a warning or a failure the CLI goes on
//! after), and one `result` at the end: `status` `success` or `error` (with `error.message`,
//! e.g. `[API Error: {"error":{"code":401,...}}]`) and `stats` with this invocation's token
//! counts (a resumed session's earlier requests not included). It reports no cost.

use serde_json::Value;

use super::report::RunReport;

/// The built-in harness, as data.
pub(crate) const SPEC: &str = include_str!("gemini.toml");

/// Takes in one stream-json event.
pub(crate) fn observe(report: &mut RunReport, event: &Value) {
    let text = |key: &str| event.get(key).and_then(Value::as_str).map(str::to_string);
    let number = |value: Option<&Value>| value.and_then(Value::as_i64);
    match event.get("type").and_then(Value::as_str) {
        Some("init") => {
            report.session_id = text("session_id").or(report.session_id.take());
            report.model = text("model").or(report.model.take());
        }
        Some("message") if event["role"] == "assistant" => {
            report.activity = true;
            report.waiting_for_model = None;
            // The answer since the last tool call, in the chunks it came in.
            let chunk = text("content").unwrap_or_default();
            let answer = match (report.result.take(), event["delta"] == true) {
                (Some(before), true) => before + &chunk,
                _ => chunk,
            };
            report.last_text = Some(answer.clone());
            report.result = Some(answer);
        }
        Some("tool_use") => {
            report.activity = true;
            report.waiting_for_model = None;
            report.result = None;
            let name = text("tool_name").unwrap_or_default();
            report.tool_loop.called(&name, event.get("parameters").unwrap_or(&Value::Null));
        }
        Some("tool_result") => report.activity = true,
        Some("error") => {
            if let Some(message) = text("message") {
                report.error_text = Some(message);
            }
        }
        Some("result") => {
            let stats = event.get("stats");
            let stat = |key: &str| number(stats.and_then(|stats| stats.get(key)));
            report.input_tokens = stat("input_tokens").or(report.input_tokens);
            report.output_tokens = stat("output_tokens").or(report.output_tokens);
            report.cache_read_tokens = stat("cached").or(report.cache_read_tokens);
            report.duration_ms = stat("duration_ms").or(report.duration_ms);
            if event["status"] != "success" {
                report.is_error = true;
                let said =
                    event.pointer("/error/message").and_then(Value::as_str).unwrap_or("the run failed");
                report.error_text = Some(said.to_string());
                // "[API Error: {\"error\":{\"code\":401,...,\"status\":\"UNAUTHENTICATED\"}}]"
                if crate::stall::refusal_in(said) || said.contains("UNAUTHENTICATED") {
                    report.model_refused = Some(said.to_string());
                }
                // It retries a model it cannot reach (`general.maxAttempts`, ten by default,
                // backing off up to 30 s) without a word, then gives up with this.
                if said.contains("fetch failed") {
                    report.waiting_for_model = Some(said.to_string());
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(lines: &[&str]) -> RunReport {
        let mut report = RunReport::default();
        for line in lines {
            observe(&mut report, &serde_json::from_str(line).unwrap());
        }
        report
    }

    // Lines as Gemini CLI 0.61.0 printed them against the scripted model.
    const INIT: &str = r#"{"type":"init","timestamp":"2026-11-28T12:43:24.669Z","session_id":"a97cc266-5062-41e8-ade4-116dcfb72e35","model":"scripted-model"}"#;
    const PROMPT: &str =
        r#"{"type":"message","timestamp":"2026-11-28T12:43:24.670Z","role":"user","content":"write hi"}"#;
    const TOOL_USE: &str = r#"{"type":"tool_use","timestamp":"2026-11-28T12:43:24.771Z","tool_name":"run_shell_command","tool_id":"run_shell_command_1","parameters":{"command":"echo hi > hi.txt"}}"#;
    const TOOL_RESULT: &str = r#"{"type":"tool_result","timestamp":"2026-11-28T12:43:24.896Z","tool_id":"run_shell_command_1","status":"success","output":""}"#;
    const SUCCESS: &str = r#"{"type":"result","timestamp":"2026-11-28T12:43:24.906Z","status":"success","stats":{"total_tokens":240,"input_tokens":200,"output_tokens":40,"cached":5,"input":195,"duration_ms":237,"tool_calls":1}}"#;

    #[test]
    fn reads_the_session_the_answer_after_the_last_tool_and_the_tokens() {
        let report = read(&[
            INIT,
            PROMPT,
            r#"{"type":"message","role":"assistant","content":"Let me look.","delta":true}"#,
            TOOL_USE,
            TOOL_RESULT,
            r#"{"type":"message","role":"assistant","content":"All ","delta":true}"#,
            r#"{"type":"message","role":"assistant","content":"done.","delta":true}"#,
            SUCCESS,
        ]);
        assert_eq!(report.session_id.as_deref(), Some("a97cc266-5062-41e8-ade4-116dcfb72e35"));
        assert_eq!(report.model.as_deref(), Some("scripted-model"));
        assert_eq!(report.result.as_deref(), Some("All done."));
        assert_eq!(
            (report.input_tokens, report.output_tokens, report.cache_read_tokens),
            (Some(200), Some(40), Some(5))
        );
        assert_eq!(report.duration_ms, Some(237));
        assert_eq!(report.cost_usd, None);
        assert!(report.activity && !report.is_error && report.has_usage());
        assert!(report.tool_loop.looping(1).is_some() && report.tool_loop.looping(2).is_none());
    }

    #[test]
    fn the_command_line_puts_the_system_prompt_first_and_resumes_by_session_id() {
        use super::super::{Harness, Invocation, McpConfig, StreamFormat};
        let gemini = Harness::built_in("gemini").unwrap();
        let run = Invocation {
            prompt: "/work-on-task 0190a1b2-0000-7000-8000-000000000001",
            system_prompt: "be good",
            agent_args: &[],
            resume: None,
            model: Some("gemini-2.5-pro"),
        };
        let (program, args) = gemini.command_line(&run);
        assert_eq!(program, std::path::PathBuf::from("gemini"));
        assert_eq!(
            args[..6],
            ["--output-format", "stream-json", "--yolo", "--skip-trust", "--model", "gemini-2.5-pro"]
        );
        // No slash commands: the command's instructions in full, after the system prompt.
        let prompt = args[6].strip_prefix("--prompt=be good\n\n").expect("the system prompt first");
        assert!(
            prompt.contains("0190a1b2-0000-7000-8000-000000000001") && !prompt.starts_with('/'),
            "{prompt}"
        );
        let (_, resumed) = gemini.command_line(&Invocation { resume: Some("s-1"), model: None, ..run });
        assert_eq!(
            resumed[..5],
            ["--output-format", "stream-json", "--yolo", "--skip-trust", "--resume=s-1"]
        );
        assert!(resumed[5].starts_with("--prompt=") && !resumed[5].contains("be good"), "{resumed:?}");
        assert!(gemini.can_resume() && gemini.supports_hooks() && gemini.can_choose_model());
        assert_eq!((gemini.output(), gemini.mcp()), (StreamFormat::GeminiStreamJson, McpConfig::Gemini));
        assert!(!gemini.root_needs_sandbox());
    }

    #[test]
    fn a_refused_key_is_the_clis_own_failure_not_the_model_at_work() {
        for code in [401, 403] {
            let result = format!(
                r#"{{"type":"result","status":"error","error":{{"type":"unknown","message":"[API Error: {{\"error\":{{\"code\":{code},\"message\":\"API key not valid.\",\"status\":\"UNAUTHENTICATED\"}}}}]"}},"stats":{{"total_tokens":0,"input_tokens":0,"output_tokens":0,"cached":0,"duration_ms":0,"tool_calls":0}}}}"#
            );
            let report = read(&[INIT, PROMPT, &result]);
            assert!(report.is_error && !report.activity, "{report:?}");
            assert!(report.model_refused.as_deref().is_some_and(|said| said.contains(&code.to_string())));
        }
        let overloaded = read(&[
            INIT,
            r#"{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: {\"error\":{\"code\":500,\"message\":\"scripted failure\",\"status\":\"INTERNAL\"}}]"},"stats":{}}"#,
        ]);
        assert!(overloaded.is_error && overloaded.model_refused.is_none(), "{overloaded:?}");
        assert!(overloaded.error_text.as_deref().is_some_and(|said| said.contains("500")));

        let down = read(&[
            INIT,
            r#"{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: exception TypeError: fetch failed sending request]"},"stats":{}}"#,
        ]);
        assert!(down.is_error && !down.activity && down.model_refused.is_none(), "{down:?}");
        assert!(down.waiting_for_model.as_deref().is_some_and(|said| said.contains("fetch failed")));
    }
}
