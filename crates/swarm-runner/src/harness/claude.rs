//! Claude Code: its harness file (`claude.toml`) and what the runner reads of its
//! `--output-format stream-json`.

use serde_json::Value;

use super::report::RunReport;

/// The built-in harness, as data.
pub(crate) const SPEC: &str = include_str!("claude.toml");

/// Takes in one stream-json event.
pub(crate) fn observe(report: &mut RunReport, event: &Value) {
    let text = |key: &str| event.get(key).and_then(Value::as_str).map(str::to_string);
    let number = |value: Option<&Value>| value.and_then(Value::as_i64);
    let kind = event.get("type").and_then(Value::as_str);
    match kind {
        // Claude Code retries a model it cannot reach (or that refuses it) with backoff,
        // for minutes unless CLAUDE_CODE_MAX_RETRIES says otherwise.
        Some("system") if text("subtype").as_deref() == Some("api_retry") => {
            let status = event.get("error_status").map(Value::to_string).unwrap_or_else(|| "none".into());
            report.waiting_for_model = Some(format!(
                "API retry {} of {} (status {status})",
                event.get("attempt").map(Value::to_string).unwrap_or_default(),
                event.get("max_retries").map(Value::to_string).unwrap_or_default(),
            ));
            // A refused key is retried like an overloaded model, but never gets better.
            if event.get("error_status").is_some_and(crate::stall::refusing_status) {
                let said = text("error").map(|error| format!(": {error}")).unwrap_or_default();
                report.model_refused = Some(format!("the model answered {status}{said}"));
            }
        }
        Some("system") => {
            if let Some(id) = text("session_id") {
                report.session_id = Some(id);
            }
            if let Some(model) = text("model") {
                report.model = Some(model);
            }
        }
        // Claude Code reports its own failures (bad key, no credit) as a "<synthetic>"
        // assistant message: that is no sign of the model at work.
        Some("assistant") => {
            let message = event.get("message");
            if message.and_then(|message| message.get("model")).and_then(Value::as_str) != Some("<synthetic>")
            {
                report.activity = true;
            }
            let blocks = message.and_then(|message| message.get("content")).and_then(Value::as_array);
            let texts: Vec<&str> = blocks
                .into_iter()
                .flatten()
                .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|block| block.get("text").and_then(Value::as_str))
                .collect();
            if !texts.is_empty() {
                report.last_text = Some(texts.join("\n"));
                let synthetic = message.and_then(|message| message.get("model")).and_then(Value::as_str)
                    == Some("<synthetic>");
                if synthetic && crate::stall::refusal_in(&texts.join("\n")) {
                    report.model_refused = Some(texts.join("\n"));
                }
            }
            let tool_uses = blocks.into_iter().flatten().filter(|block| block["type"] == "tool_use");
            for tool_use in tool_uses {
                let name = tool_use.get("name").and_then(Value::as_str).unwrap_or_default();
                report.tool_loop.called(name, tool_use.get("input").unwrap_or(&Value::Null));
            }
        }
        Some("user") => report.activity = true,
        Some("result") => {
            report.session_id = text("session_id").or(report.session_id.take());
            report.cost_usd = event.get("total_cost_usd").and_then(Value::as_f64).or(report.cost_usd);
            report.duration_ms = number(event.get("duration_ms")).or(report.duration_ms);
            report.num_turns = number(event.get("num_turns")).or(report.num_turns);
            let failed = event.get("is_error").and_then(Value::as_bool).unwrap_or(false);
            report.is_error |= failed;
            report.result = text("result").or(report.result.take());
            if failed {
                report.error_text = report.result.clone();
                if let Some(said) = report.result.as_deref().filter(|said| crate::stall::refusal_in(said)) {
                    report.model_refused = Some(said.to_string());
                }
            }
            if let Some(usage) = event.get("usage") {
                report.input_tokens = number(usage.get("input_tokens")).or(report.input_tokens);
                report.output_tokens = number(usage.get("output_tokens")).or(report.output_tokens);
                report.cache_read_tokens =
                    number(usage.get("cache_read_input_tokens")).or(report.cache_read_tokens);
                report.cache_write_tokens =
                    number(usage.get("cache_creation_input_tokens")).or(report.cache_write_tokens);
            }
        }
        _ => {}
    }
    // The model answered or a tool ran (not a CLI's report of its own failure).
    if matches!(kind, Some("assistant" | "user")) {
        report.waiting_for_model = None;
    }
}
