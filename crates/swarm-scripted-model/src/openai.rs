//! The OpenAI Responses API as Codex uses it: `POST /v1/responses` with `stream: true`, and
//! `GET /v1/models`.

use serde_json::{Value, json};

use crate::{conversation::Action, script::Usage};

/// The body of a `/v1/responses` answer: server-sent events when `stream`, else the response
/// object. Codex acts on `response.output_item.done` and `response.completed`; the other
/// events are there because the real API sends them.
pub(crate) fn response(
    action: &Action,
    model: &str,
    usage: Usage,
    turn: usize,
    stream: bool,
) -> (String, String) {
    let response_id = format!("resp_scripted_{turn}");
    let item = match action {
        Action::Text(text) => json!({
            "type": "message", "id": format!("msg_scripted_{turn}"), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]
        }),
        Action::ToolSearch { query } => json!({
            "type": "tool_search_call", "id": format!("ts_scripted_{turn}"), "call_id": format!("search_scripted_{turn}"),
            "execution": "client", "status": "completed", "arguments": {"query": query}
        }),
        Action::Tool { namespace, name, input } => {
            let mut item = json!({
                "type": "function_call", "id": format!("fc_scripted_{turn}"), "call_id": format!("call_scripted_{turn}"),
                "name": name, "arguments": input.to_string(), "status": "completed"
            });
            if let Some(namespace) = namespace {
                item["namespace"] = json!(namespace);
            }
            item
        }
    };
    let usage = json!({
        "input_tokens": usage.input_tokens, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": usage.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input_tokens + usage.output_tokens
    });
    let completed = json!({
        "id": response_id, "object": "response", "status": "completed", "model": model,
        "output": [item.clone()], "usage": usage
    });
    if !stream {
        return ("application/json".to_owned(), completed.to_string());
    }

    let mut events = String::new();
    let mut event = |data: Value| {
        events.push_str(&format!("event: {}\ndata: {data}\n\n", data["type"].as_str().unwrap_or_default()));
    };
    event(json!({"type": "response.created", "response": {
        "id": response_id, "object": "response", "status": "in_progress", "model": model, "output": []
    }}));
    let mut added = item.clone();
    added["status"] = json!("in_progress");
    if let Action::Text(text) = action {
        added["content"] = json!([]);
        event(json!({"type": "response.output_item.added", "output_index": 0, "item": added}));
        event(json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
                     "item_id": item["id"], "delta": text}));
    } else if let Action::ToolSearch { .. } = action {
        event(json!({"type": "response.output_item.added", "output_index": 0, "item": added}));
    } else {
        added["arguments"] = json!("");
        event(json!({"type": "response.output_item.added", "output_index": 0, "item": added}));
        event(json!({"type": "response.function_call_arguments.delta", "output_index": 0,
                     "item_id": item["id"], "delta": item["arguments"]}));
    }
    event(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    event(json!({"type": "response.completed", "response": completed}));
    ("text/event-stream".to_owned(), events)
}

/// `GET /v1/models`: the one model there is.
pub(crate) fn models() -> Value {
    json!({"object": "list", "data": [{"id": crate::MODEL_NAME, "object": "model", "owned_by": "swarm"}]})
}

/// The error body for `status`, as the OpenAI APIs shape it.
pub(crate) fn error(status: u16) -> Value {
    let (kind, code, message) = match status {
        401 => ("invalid_request_error", "invalid_api_key", "Incorrect API key provided"),
        404 => ("invalid_request_error", "not_found", "not found"),
        429 => ("rate_limit_error", "rate_limit_exceeded", "rate limited"),
        _ => ("server_error", "server_error", "scripted failure"),
    };
    json!({"error": {"message": message, "type": kind, "code": code, "param": null}})
}
