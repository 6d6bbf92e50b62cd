//! The Gemini API as the Gemini CLI uses it (`GOOGLE_GEMINI_BASE_URL` with `GEMINI_API_KEY`):
//! `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` for the agent's turns,
//! `POST /v1beta/models/{model}:generateContent` for the CLI's own side questions (JSON answers:
//! next speaker, loop detection, summaries), `POST /v1beta/models/{model}:countTokens`.

use serde_json::{Value, json};

use crate::conversation::{Action, Conversation, OfferedTool, collect_strings};
use crate::script::Usage;

/// Which Gemini method a path names, and for which model:
/// `/v1beta/models/scripted-model:streamGenerateContent` is `("scripted-model", "streamGenerateContent")`.
pub(crate) fn method(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/v1beta/models/").or_else(|| path.strip_prefix("/v1/models/"))?;
    rest.split_once(':')
}

/// Whether a `generateContent` request is one of the CLI's side questions, asked with a JSON
/// schema for the answer rather than as a turn of the agent's conversation.
pub(crate) fn is_side_question(body: &Value) -> bool {
    let config = &body["generationConfig"];
    config["responseMimeType"] == "application/json"
        || !config["responseJsonSchema"].is_null()
        || !config["responseSchema"].is_null()
}

/// The answer to a side question: the least that lets the agent's turn go on as the script
/// says (the model does not speak next, sees no loop, and has nothing to summarize).
pub(crate) fn side_answer(model: &str, usage: Usage) -> Value {
    let answer = json!({
        "next_speaker": "user",
        "reasoning": "The scripted model decides every turn itself.",
        "unproductive_state_confidence": 0.0,
        "unproductive_state_analysis": "The scripted model plays a fixed script.",
        "summary": "",
    });
    candidate(json!([{"text": answer.to_string()}]), model, usage)
}

/// The body of a `streamGenerateContent` answer (server-sent events when `stream`, one
/// `data:` event holding the whole answer) or a `generateContent` one (the JSON object).
pub(crate) fn response(action: &Action, model: &str, usage: Usage, stream: bool) -> (String, String) {
    let parts = match action {
        Action::Text(text) => json!([{"text": text}]),
        Action::ToolSearch { query } => {
            // Never decided for this API (only Codex offers a `tool_search` tool).
            json!([{"text": format!("scripted model: cannot search tools for {query:?}")}])
        }
        Action::Tool { name, input, .. } => json!([{"functionCall": {"name": name, "args": input}}]),
    };
    let body = candidate(parts, model, usage);
    if stream {
        ("text/event-stream".to_owned(), format!("data: {body}\r\n\r\n"))
    } else {
        ("application/json".to_owned(), body.to_string())
    }
}

fn candidate(parts: Value, model: &str, usage: Usage) -> Value {
    json!({
        "candidates": [{
            "content": {"role": "model", "parts": parts},
            "finishReason": "STOP",
            "index": 0
        }],
        "usageMetadata": {
            "promptTokenCount": usage.input_tokens,
            "candidatesTokenCount": usage.output_tokens,
            "totalTokenCount": usage.input_tokens + usage.output_tokens
        },
        "modelVersion": model,
        "responseId": "scripted"
    })
}

/// `POST …:countTokens`: about four characters a token.
pub(crate) fn count_tokens(body: &[u8]) -> Value {
    json!({"totalTokens": body.len() / 4})
}

/// The error body for `status`, as Google APIs shape it.
pub(crate) fn error(status: u16) -> Value {
    let (kind, message) = match status {
        400 => ("INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."),
        401 => ("UNAUTHENTICATED", "API key not valid. Please pass a valid API key."),
        403 => ("PERMISSION_DENIED", "The caller does not have permission"),
        404 => ("NOT_FOUND", "not found"),
        429 => ("RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
        503 => ("UNAVAILABLE", "The model is overloaded. Please try again later."),
        _ => ("INTERNAL", "scripted failure"),
    };
    json!({"error": {"code": status, "message": message, "status": kind}})
}

/// Reading a Gemini conversation: `contents` of `{role: user|model, parts}`, where a part is
/// `text` (a `thought` when so marked), `functionCall` or `functionResponse`.
impl Conversation {
    /// The user's texts, without the context blocks the CLI puts before a prompt in the
    /// prompt's own part (see `without_cli_context`); [`Conversation::contains`] still sees them.
    pub(crate) fn gemini_user_texts(&self) -> Vec<String> {
        self.gemini_parts("user")
            .filter_map(|part| part["text"].as_str())
            .map(without_cli_context)
            .filter(|text| !text.is_empty())
            .map(str::to_owned)
            .collect()
    }

    pub(crate) fn gemini_tool_results(&self) -> Vec<String> {
        self.gemini_parts("user")
            .filter(|part| part["functionResponse"].is_object())
            .map(|part| {
                let mut strings = Vec::new();
                collect_strings(&part["functionResponse"]["response"], &mut strings);
                strings.join("\n")
            })
            .collect()
    }

    /// Model turns that ended with text and called no tool. Thoughts are not replies (the
    /// scripted model sends none, but a resumed session may hold a real model's).
    pub(crate) fn gemini_final_replies(&self) -> Vec<String> {
        let mut replies = Vec::new();
        for turn in self.items().filter(|turn| turn["role"] == "model") {
            let parts = turn["parts"].as_array().map(Vec::as_slice).unwrap_or_default();
            if parts.iter().any(|part| part["functionCall"].is_object()) {
                continue;
            }
            let text: String = parts
                .iter()
                .filter(|part| part["thought"] != true)
                .filter_map(|part| part["text"].as_str())
                .collect();
            if !text.is_empty() {
                replies.push(text);
            }
        }
        replies
    }

    pub(crate) fn gemini_tools(&self) -> Vec<OfferedTool> {
        let declarations = self.body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|tool| tool["functionDeclarations"].as_array().into_iter().flatten());
        declarations
            .filter_map(|declaration| declaration["name"].as_str())
            .map(|name| OfferedTool { namespace: None, name: name.to_owned() })
            .collect()
    }

    fn gemini_parts(&self, role: &'static str) -> impl Iterator<Item = &Value> {
        self.items()
            .filter(move |turn| turn["role"] == role)
            .flat_map(|turn| turn["parts"].as_array().into_iter().flatten())
    }
}

/// `text` without the blocks the CLI puts before a prompt: `<session_context>` (what it tells
/// the model of the machine; a resumed session's history has it in the first prompt's own
/// text) and `<hook_context>`, with the blank lines after them.
fn without_cli_context(mut text: &str) -> &str {
    for tag in ["session_context", "hook_context"] {
        let close = format!("</{tag}>");
        if text.starts_with(&format!("<{tag}>"))
            && let Some(end) = text.find(&close)
        {
            text = text[end + close.len()..].trim_start();
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Api;

    #[test]
    fn a_gemini_conversation_counts_function_responses_and_text_turns() {
        let body = json!({
            "systemInstruction": {"parts": [{"text": "You are Gemini CLI"}]},
            "tools": [{"functionDeclarations": [{"name": "run_shell_command"}, {"name": "mcp_agent-swarm_store-progress"}]}],
            "contents": [
                {"role": "user", "parts": [{"text": "<session_context>\nx\n</session_context>"}, {"text": "do it"}]},
                {"role": "user", "parts": [{"text": "<session_context>\ny\n</session_context>\n<hook_context>z</hook_context>\n\nand this"}]},
                {"role": "model", "parts": [{"text": "thinking", "thought": true}, {"functionCall": {"name": "run_shell_command", "args": {}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command", "response": {"output": "ok"}}}]},
                {"role": "model", "parts": [{"text": "done"}]},
                {"role": "user", "parts": [{"text": "<hook_context>You have mail (MAIL-1).</hook_context>\n\nagain"}]}
            ]
        });
        let conversation = Conversation::new(Api::Gemini, body);
        assert_eq!(conversation.prompt(), "do it");
        assert_eq!(conversation.prompts()[1], "and this");
        assert_eq!(conversation.latest_prompt(), "again");
        assert_eq!(conversation.system_text(), "You are Gemini CLI");
        assert_eq!(conversation.tool_results(), ["ok"]);
        assert_eq!(conversation.final_replies(), ["done"]);
        assert_eq!(conversation.steps_done(), 2);
        assert_eq!(conversation.find_tool("store-progress").unwrap().name, "mcp_agent-swarm_store-progress");
        assert!(conversation.contains("again") && conversation.contains("MAIL-1"));
    }

    #[test]
    fn gemini_paths_name_model_and_method() {
        assert_eq!(
            method("/v1beta/models/scripted-model:streamGenerateContent"),
            Some(("scripted-model", "streamGenerateContent"))
        );
        assert_eq!(method("/v1/messages"), None);
    }
}
