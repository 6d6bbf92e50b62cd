//! opencode: its harness file (`opencode.toml`; the prompt goes on standard input) and what
//! the runner reads of `opencode run --format json` (docs/real-agent-clis.md, "opencode").
//!
//! Every event carries the session (`sessionID`). A model request is a step: `step_start`,
//! then `text` and `tool_use` parts (a tool's only when it has finished), then `step_finish`
//! with that request's `tokens` (`input`, `output`, `reasoning`, `cache.read`,
//! `cache.write`) and `cost` in dollars, from the prices its provider configuration gives:
//! the run's counts are their sum, a resumed session's earlier steps not included. A model
//! that fails ends the run with one `error` event (`error.data.message`, `statusCode`,
//! `isRetryable`) and exit status 1, after opencode's own five retries (about 70 s) when
//! the error is retryable (a model down, a 5xx).

use serde_json::Value;

use super::report::RunReport;

/// The built-in harness, as data.
pub(crate) const SPEC: &str = include_str!("opencode.toml");

/// Takes in one `--format json` event.
pub(crate) fn observe(report: &mut RunReport, event: &Value) {
    if let Some(session) = event.get("sessionID").and_then(Value::as_str) {
        report.session_id = Some(session.to_string());
    }
    let part = &event["part"];
    match event.get("type").and_then(Value::as_str) {
        Some("text") => {
            report.activity = true;
            if let Some(text) = part.get("text").and_then(Value::as_str).filter(|text| !text.is_empty()) {
                report.last_text = Some(text.to_string());
                report.result = Some(text.to_string());
            }
        }
        Some("tool_use") => {
            report.activity = true;
            let name = part.get("tool").and_then(Value::as_str).unwrap_or_default();
            report.tool_loop.called(name, part.pointer("/state/input").unwrap_or(&Value::Null));
        }
        Some("step_finish") => {
            report.activity = true;
            report.waiting_for_model = None;
            let tokens = &part["tokens"];
            let add = |count: Option<i64>, value: Option<i64>| match (count, value) {
                (None, None) => None,
                (count, value) => Some(count.unwrap_or(0) + value.unwrap_or(0)),
            };
            let count = |pointer: &str| tokens.pointer(pointer).and_then(Value::as_i64);
            report.input_tokens = add(report.input_tokens, count("/input"));
            // Reasoning is output the model was paid for, as Claude Code counts thinking.
            report.output_tokens = add(add(report.output_tokens, count("/output")), count("/reasoning"));
            report.cache_read_tokens = add(report.cache_read_tokens, count("/cache/read"));
            report.cache_write_tokens = add(report.cache_write_tokens, count("/cache/write"));
            if let Some(cost) = part.get("cost").and_then(Value::as_f64) {
                report.cost_usd = Some(report.cost_usd.unwrap_or(0.0) + cost);
            }
            report.num_turns = Some(report.num_turns.unwrap_or(0) + 1);
        }
        Some("error") => {
            report.is_error = true;
            let error = &event["error"];
            let data = &error["data"];
            let said = data
                .get("message")
                .or_else(|| error.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("an error without a message")
                .to_string();
            let status = data.get("statusCode");
            if status.is_some_and(crate::stall::refusing_status) {
                let status = status.map(Value::to_string).unwrap_or_default();
                report.model_refused = Some(format!("the model answered {status}: {said}"));
            } else if data.get("isRetryable") == Some(&Value::Bool(true)) {
                // Retried already, and given up: the model could not be reached.
                report.waiting_for_model = Some(said.clone());
            }
            report.error_text = Some(match data.get("statusCode") {
                Some(status) => format!("{said} (status {status})"),
                None => said,
            });
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
            super::super::StreamFormat::OpencodeJson.observe(&mut report, line);
        }
        report
    }

    #[test]
    fn a_new_run_gets_the_instructions_and_a_resumed_one_its_session() {
        use super::super::{Harness, Invocation};
        let opencode = Harness::built_in("opencode").unwrap();
        let run = Invocation {
            prompt: "/work-on-task 1",
            system_prompt: "be good",
            agent_args: &[],
            resume: None,
            model: Some("scripted/m"),
        };
        let (program, args) = opencode.command_line(&run);
        assert_eq!(program, std::path::PathBuf::from("opencode"));
        assert_eq!(args, ["run", "--format", "json", "--auto", "--model", "scripted/m"]);
        let input = opencode.input(&run).unwrap();
        assert!(input.starts_with("be good\n\n# Work on swarm task 1\n"), "{input}");
        let resumed = Invocation { resume: Some("ses_9"), model: None, ..run };
        let (_, args) = opencode.command_line(&resumed);
        assert_eq!(args, ["run", "--format", "json", "--auto", "--session", "ses_9"]);
        assert!(opencode.input(&resumed).unwrap().starts_with("# Work on swarm task 1\n"));
        assert_eq!(Harness::claude().input(&run), None);
        assert_eq!(opencode.output(), super::super::StreamFormat::OpencodeJson);
        assert!(!opencode.supports_hooks() && opencode.can_resume());
    }

    #[test]
    fn steps_add_up_and_the_last_text_is_the_result() {
        let report = read(&[
            r#"{"type":"step_start","sessionID":"ses_1","part":{"type":"step-start"}}"#,
            r#"{"type":"tool_use","sessionID":"ses_1","part":{"type":"tool","tool":"bash","state":{"status":"completed","input":{"command":"ls"}}}}"#,
            r#"{"type":"step_finish","sessionID":"ses_1","part":{"type":"step-finish","tokens":{"input":100,"output":20,"reasoning":5,"cache":{"read":40,"write":7}},"cost":0.001}}"#,
            r#"{"type":"text","sessionID":"ses_1","part":{"type":"text","text":"Done."}}"#,
            r#"{"type":"step_finish","sessionID":"ses_1","part":{"type":"step-finish","tokens":{"input":110,"output":2,"reasoning":0,"cache":{"read":0,"write":0}},"cost":0.002}}"#,
        ]);
        assert_eq!(report.session_id.as_deref(), Some("ses_1"));
        assert_eq!(report.result.as_deref(), Some("Done."));
        assert_eq!(
            (report.input_tokens, report.output_tokens, report.cache_read_tokens, report.cache_write_tokens),
            (Some(210), Some(27), Some(40), Some(7))
        );
        assert!(report.cost_usd.is_some_and(|cost| (cost - 0.003).abs() < 1e-9), "{report:?}");
        assert_eq!(report.num_turns, Some(2));
        assert!(report.activity && !report.is_error && report.has_usage());
        assert!(report.tool_loop.looping(1).is_some_and(|said| said.contains("bash")), "{report:?}");
    }

    #[test]
    fn a_refused_key_and_a_model_down_read_apart() {
        let refused = read(&[
            r#"{"type":"error","sessionID":"ses_2","error":{"name":"APIError","data":{"message":"invalid x-api-key","statusCode":401,"isRetryable":false}}}"#,
        ]);
        assert!(refused.is_error && !refused.activity);
        assert_eq!(refused.model_refused.as_deref(), Some("the model answered 401: invalid x-api-key"));
        assert_eq!(refused.error_text.as_deref(), Some("invalid x-api-key (status 401)"));
        assert_eq!(refused.waiting_for_model, None);

        let down = read(&[
            r#"{"type":"error","sessionID":"ses_3","error":{"name":"APIError","data":{"message":"Cannot connect to API: Unable to connect.","isRetryable":true}}}"#,
        ]);
        assert!(down.is_error && down.model_refused.is_none() && !down.activity);
        assert_eq!(down.waiting_for_model.as_deref(), Some("Cannot connect to API: Unable to connect."));
        assert_eq!(down.error_text.as_deref(), Some("Cannot connect to API: Unable to connect."));

        // Not opencode's shape: plain text or another CLI's events change nothing.
        let other = read(&["working", r#"{"type":"turn.completed","usage":{"input_tokens":1}}"#]);
        assert_eq!(other, RunReport::default());
    }
}
