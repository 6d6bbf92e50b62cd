//! The Anthropic Messages API as Claude Code uses it: `POST /v1/messages` (streaming and
//! not), `POST /v1/messages/count_tokens`.

use serde_json::{Value, json};

use crate::{conversation::Action, script::Usage};

/// The body of a `/v1/messages` answer: server-sent events when `stream`, else one JSON message.
/// `turn` numbers ids so each is unique within a conversation.
pub(crate) fn message(
    action: &Action,
    model: &str,
    usage: Usage,
    turn: usize,
    stream: bool,
) -> (String, String) {
    let id = format!("msg_scripted_{turn}");
    let (block, stop_reason) = match action {
        Action::Text(text) => (json!({"type": "text", "text": text}), "end_turn"),
        Action::ToolSearch { query } => {
            // Never decided for this API (only Codex offers a `tool_search` tool).
            (
                json!({"type": "text", "text": format!("scripted model: cannot search tools for {query:?}")}),
                "end_turn",
            )
        }
        Action::Tool { name, input, .. } => (
            json!({"type": "tool_use", "id": format!("toolu_scripted_{turn}"), "name": name, "input": input}),
            "tool_use",
        ),
    };
    if !stream {
        let body = json!({
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": [block], "stop_reason": stop_reason, "stop_sequence": null,
            "usage": {
                "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0
            }
        });
        return ("application/json".to_owned(), body.to_string());
    }

    let mut events = String::new();
    let mut event = |name: &str, data: Value| {
        events.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {
                "input_tokens": usage.input_tokens, "output_tokens": 1,
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0
            }
        }}),
    );
    match action {
        Action::Text(_) | Action::ToolSearch { .. } => {
            let text = block["text"].as_str().unwrap_or_default();
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            );
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            );
        }
        Action::Tool { input, .. } => {
            let mut start = block.clone();
            start["input"] = json!({});
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": start}),
            );
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
            );
        }
    }
    event("content_block_stop", json!({"type": "content_block_stop", "index": 0}));
    event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": usage.output_tokens}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    ("text/event-stream".to_owned(), events)
}

/// `POST /v1/messages/count_tokens`: about four characters a token, like the real thing's order
/// of magnitude.
pub(crate) fn count_tokens(body: &[u8]) -> Value {
    json!({"input_tokens": body.len() / 4})
}

/// The error body for `status`, as the Messages API shapes it.
pub(crate) fn error(status: u16) -> Value {
    let (kind, message) = match status {
        401 => ("authentication_error", "invalid x-api-key"),
        404 => ("not_found_error", "not found"),
        429 => ("rate_limit_error", "rate limited"),
        529 => ("overloaded_error", "overloaded"),
        _ => ("api_error", "scripted failure"),
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}
