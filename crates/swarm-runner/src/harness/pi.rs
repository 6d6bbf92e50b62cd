//! pi: its harness file (`pi.toml`) and what the runner reads of `pi --mode json`
//! (docs/real-agent-clis.md, "pi").
//!
//! The first line is the session header `{"type":"session","id"}`; then the agent's events.
//! Each model answer ends in a `message_end` whose assistant message carries that request's
//! `usage` (`input`, `output`, `cacheRead`, `cacheWrite`, `cost.total` in dollars, from the
//! prices pi knows for the model), so the run's counts are their sum, a resumed session's
//! earlier requests not included. A model that fails is an assistant message with
//! `stopReason: "error"` and pi's `errorMessage` (`"401 {...body}"`, `"Connection error."`),
//! and pi still exits 0.

use serde_json::Value;

use super::report::RunReport;

/// The built-in harness, as data.
pub(crate) const SPEC: &str = include_str!("pi.toml");

/// Takes in one `--mode json` event.
pub(crate) fn observe(report: &mut RunReport, event: &Value) {
    let kind = event.get("type").and_then(Value::as_str);
    match kind {
        Some("session") => {
            if let Some(id) = event.get("id").and_then(Value::as_str) {
                report.session_id = Some(id.to_string());
            }
        }
        Some("message_end") => {
            let message = &event["message"];
            if message["role"] == "assistant" {
                assistant_message(report, message);
            }
        }
        Some("tool_execution_start") => {
            report.activity = true;
            let name = event.get("toolName").and_then(Value::as_str).unwrap_or_default();
            report.tool_loop.called(name, event.get("args").unwrap_or(&Value::Null));
        }
        // pi retries a model it cannot reach or that is overloaded (three times over 14 s
        // by default, `retry` in its settings).
        Some("auto_retry_start") => {
            let said = event.get("errorMessage").and_then(Value::as_str).unwrap_or_default();
            report.waiting_for_model = Some(format!(
                "retry {} of {}: {said}",
                event.get("attempt").map(Value::to_string).unwrap_or_default(),
                event.get("maxAttempts").map(Value::to_string).unwrap_or_default(),
            ));
        }
        Some("auto_retry_end") if event["success"] == Value::Bool(false) => {
            report.is_error = true;
            if let Some(said) = event.get("finalError").and_then(Value::as_str) {
                report.error_text = Some(said.to_string());
            }
        }
        _ => {}
    }
}

fn assistant_message(report: &mut RunReport, message: &Value) {
    let number = |key: &str| message["usage"].get(key).and_then(Value::as_i64);
    let add = |total: Option<i64>, more: Option<i64>| match (total, more) {
        (None, None) => None,
        (total, more) => Some(total.unwrap_or(0) + more.unwrap_or(0)),
    };
    if let Some(model) = message.get("model").and_then(Value::as_str) {
        report.model = Some(model.to_string());
    }
    if message["stopReason"] == "error" {
        report.is_error = true;
        let said = message.get("errorMessage").and_then(Value::as_str).unwrap_or("the model failed");
        report.error_text = Some(said.to_string());
        // pi's words for an HTTP error are "<status> <body>".
        let status = said.split_whitespace().next().unwrap_or_default();
        if crate::stall::refusing_status(&Value::String(status.to_string())) || crate::stall::refusal_in(said)
        {
            report.model_refused = Some(format!("the model answered {said}"));
        }
        // pi's own report of a failed request: no sign of the model at work.
        return;
    }
    report.activity = true;
    report.waiting_for_model = None;
    report.num_turns = Some(report.num_turns.unwrap_or(0) + 1);
    report.input_tokens = add(report.input_tokens, number("input"));
    report.output_tokens = add(report.output_tokens, number("output"));
    report.cache_read_tokens = add(report.cache_read_tokens, number("cacheRead"));
    report.cache_write_tokens = add(report.cache_write_tokens, number("cacheWrite"));
    if let Some(cost) = message["usage"].pointer("/cost/total").and_then(Value::as_f64) {
        report.cost_usd = Some(report.cost_usd.unwrap_or(0.0) + cost);
    }
    let texts: Vec<&str> = message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect();
    if !texts.is_empty() {
        report.last_text = Some(texts.join("\n"));
        // The answer that ends the run is the one that calls no tool.
        if message["stopReason"] == "stop" {
            report.result = report.last_text.clone();
        }
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

    // Lines as pi 0.73.1 printed them against the scripted model (shortened).
    const SESSION: &str = r#"{"type":"session","version":3,"id":"01a2222a-83c9","cwd":"/p"}"#;
    const TOOL_CALL: &str = r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"toolCall","id":"t1","name":"bash","arguments":{"command":"ls"}}],"model":"scripted-model","usage":{"input":100,"output":20,"cacheRead":0,"cacheWrite":0,"cost":{"total":0.001}},"stopReason":"toolUse"}}"#;
    const TOOL_START: &str =
        r#"{"type":"tool_execution_start","toolCallId":"t1","toolName":"bash","args":{"command":"ls"}}"#;
    const ANSWER: &str = r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"All done."}],"model":"scripted-model","usage":{"input":100,"output":20,"cacheRead":5,"cacheWrite":0,"cost":{"total":0.001}},"stopReason":"stop"}}"#;

    #[test]
    fn the_command_line_asks_for_json_events_and_resumes_by_session_id() {
        use super::super::{Harness, Invocation};
        let pi = Harness::built_in("pi").unwrap();
        let run = Invocation {
            prompt: "/work-on-task 1",
            system_prompt: "be good",
            agent_args: &[],
            resume: None,
            model: Some("anthropic/claude-x"),
        };
        let (program, args) = pi.command_line(&run);
        assert_eq!(program, std::path::PathBuf::from("pi"));
        assert_eq!(
            args,
            [
                "--mode",
                "json",
                "--model",
                "anthropic/claude-x",
                "--append-system-prompt",
                "be good",
                "/work-on-task 1"
            ]
        );
        let (_, resumed) = pi.command_line(&Invocation { resume: Some("s-1"), model: None, ..run });
        assert_eq!(
            resumed,
            ["--mode", "json", "--session", "s-1", "--append-system-prompt", "be good", "/work-on-task 1"]
        );
        assert!(pi.can_resume() && pi.supports_hooks() && pi.can_choose_model());
        assert_eq!(pi.output(), super::super::StreamFormat::PiJson);
    }

    #[test]
    fn sums_each_requests_usage_and_takes_the_last_answer() {
        let report = read(&[SESSION, TOOL_CALL, TOOL_START, ANSWER]);
        assert_eq!(report.session_id.as_deref(), Some("01a2222a-83c9"));
        assert_eq!(report.model.as_deref(), Some("scripted-model"));
        assert_eq!((report.input_tokens, report.output_tokens), (Some(200), Some(40)));
        assert_eq!((report.cache_read_tokens, report.cache_write_tokens), (Some(5), Some(0)));
        assert!((report.cost_usd.unwrap() - 0.002).abs() < 1e-12);
        assert_eq!(report.num_turns, Some(2));
        assert_eq!(report.result.as_deref(), Some("All done."));
        assert!(report.activity && !report.is_error && report.has_usage());
        assert!(report.tool_loop.looping(1).is_some() && report.tool_loop.looping(2).is_none());
    }

    #[test]
    fn a_refused_key_is_pis_own_failure_not_the_model_at_work() {
        let refused = read(&[
            SESSION,
            r#"{"type":"message_end","message":{"role":"assistant","content":[],"usage":{"input":0,"output":0,"cost":{"total":0}},"stopReason":"error","errorMessage":"401 {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"invalid x-api-key\"}}"}}"#,
        ]);
        assert!(refused.is_error && !refused.activity);
        assert!(
            refused.model_refused.as_deref().unwrap().starts_with("the model answered 401 "),
            "{refused:?}"
        );
        assert_eq!(refused.input_tokens, None);

        let overloaded = read(&[
            r#"{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"overloaded\"}}"}}"#,
        ]);
        assert!(overloaded.is_error && overloaded.model_refused.is_none(), "{overloaded:?}");

        let down = read(&[
            r#"{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"Connection error."}}"#,
            r#"{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"Connection error."}"#,
        ]);
        assert_eq!(down.waiting_for_model.as_deref(), Some("retry 1 of 3: Connection error."));
        assert_eq!(down.error_text.as_deref(), Some("Connection error."));
        assert!(down.model_refused.is_none() && !down.activity);
        let gave_up = read(&[
            r#"{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"Connection error."}"#,
        ]);
        assert!(gave_up.is_error);
    }
}
