//! A read-only view of one model request, the same for both APIs.

use serde_json::{Value, json};

/// What the model answers to one request, in terms both APIs can express.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Action {
    Tool {
        namespace: Option<String>,
        name: String,
        input: Value,
    },
    /// Codex defers MCP tools behind its `tool_search` tool: search first, call next turn.
    ToolSearch {
        query: String,
    },
    Text(String),
}

/// Which API a request came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// Anthropic Messages (`POST /v1/messages`): Claude Code.
    Anthropic,
    /// OpenAI Responses (`POST /v1/responses`): Codex.
    OpenAi,
    /// Gemini (`POST /v1beta/models/{model}:streamGenerateContent`): the Gemini CLI. The path
    /// names the model; the server adds it to the body as `model` for [`Conversation::model`].
    Gemini,
}

/// A tool the CLI offers the model. Codex groups MCP tools in namespaces (`mcp__agent_swarm`)
/// and the call names both; Claude Code flattens them (`mcp__agent-swarm__store-progress`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OfferedTool {
    pub namespace: Option<String>,
    pub name: String,
}

impl OfferedTool {
    /// `namespace__name` when namespaced (Codex's MCP tools), else the name.
    pub fn full_name(&self) -> String {
        match &self.namespace {
            Some(namespace) if !namespace.ends_with("__") => format!("{namespace}__{}", self.name),
            Some(namespace) => format!("{namespace}{}", self.name),
            None => self.name.clone(),
        }
    }
}

/// The conversation a CLI sent in one request: the whole history, since both CLIs resend it
/// every turn.
#[derive(Clone, Debug)]
pub struct Conversation {
    pub api: Api,
    /// The request body as sent.
    pub body: Value,
}

impl Conversation {
    pub fn new(api: Api, body: Value) -> Conversation {
        Conversation { api, body }
    }

    /// The model the CLI asked for.
    pub fn model(&self) -> &str {
        self.body["model"].as_str().unwrap_or("")
    }

    /// The system prompt: Anthropic's `system` (and mid-conversation `system` messages);
    /// Responses' `instructions` and `developer` messages.
    pub fn system_text(&self) -> String {
        let mut parts = Vec::new();
        match self.api {
            Api::Anthropic => {
                collect_text(&self.body["system"], &mut parts);
                for message in self.items() {
                    if message["role"] == "system" {
                        collect_text(&message["content"], &mut parts);
                    }
                }
            }
            Api::OpenAi => {
                collect_text(&self.body["instructions"], &mut parts);
                for item in self.items() {
                    if item["type"] == "message" && item["role"] == "developer" {
                        collect_text(&item["content"], &mut parts);
                    }
                }
            }
            Api::Gemini => collect_text(&self.body["systemInstruction"]["parts"], &mut parts),
        }
        parts.join("\n")
    }

    /// Every text block the user side sent, in order (tool results excluded). The CLIs add
    /// their own context blocks here too (Claude Code's `<system-reminder>`, Codex's
    /// `<environment_context>`); [`Conversation::prompt`] skips those.
    pub fn user_texts(&self) -> Vec<String> {
        if self.api == Api::Gemini {
            return self.gemini_user_texts();
        }
        let mut texts = Vec::new();
        let searches = self.tool_search_call_ids();
        for item in self.items() {
            if item["role"] != "user" || (self.api == Api::OpenAi && item["type"] != "message") {
                continue;
            }
            if self.answers_tool_search(item, &searches) {
                continue;
            }
            match &item["content"] {
                Value::String(text) => texts.push(text.clone()),
                Value::Array(blocks) => {
                    for block in blocks {
                        if matches!(block["type"].as_str(), Some("text" | "input_text"))
                            && let Some(text) = block["text"].as_str()
                        {
                            texts.push(text.to_owned());
                        }
                    }
                }
                _ => {}
            }
        }
        texts
    }

    /// The first prompt the user (or the runner) gave: the first user text that is not a
    /// context block the CLI added itself (one starting with `<system-reminder>`,
    /// `<environment_context>`, `<user_instructions>`, `# AGENTS.md` or `<session_context>`).
    pub fn prompt(&self) -> String {
        self.prompts().into_iter().next().unwrap_or_default()
    }

    /// The latest prompt: after `claude --resume` or `codex exec resume`, the one that resumed
    /// the session (e.g. a relayed task result).
    pub fn latest_prompt(&self) -> String {
        self.prompts().pop().unwrap_or_default()
    }

    /// The user texts that are prompts, not context blocks the CLI added (see [`Conversation::prompt`]).
    pub fn prompts(&self) -> Vec<String> {
        const ADDED_BY_CLI: [&str; 5] = [
            "<system-reminder>",
            "<environment_context>",
            "<user_instructions>",
            "# AGENTS.md",
            "<session_context>",
        ];
        self.user_texts()
            .into_iter()
            .filter(|text| !ADDED_BY_CLI.iter().any(|prefix| text.trim_start().starts_with(prefix)))
            .collect()
    }

    /// The outputs of the tool calls so far, in order, as text (not those of Claude Code's
    /// `ToolSearch`, which loads tools and is no script step).
    pub fn tool_results(&self) -> Vec<String> {
        if self.api == Api::Gemini {
            return self.gemini_tool_results();
        }
        let mut results = Vec::new();
        let searches = self.tool_search_call_ids();
        for item in self.items() {
            match self.api {
                Api::Anthropic => {
                    for block in item["content"].as_array().into_iter().flatten() {
                        let search =
                            block["tool_use_id"].as_str().is_some_and(|id| searches.iter().any(|s| s == id));
                        if block["type"] == "tool_result" && !search {
                            let mut parts = Vec::new();
                            collect_text(&block["content"], &mut parts);
                            results.push(parts.join("\n"));
                        }
                    }
                }
                Api::OpenAi => {
                    if item["type"].as_str().is_some_and(|kind| kind.ends_with("call_output")) {
                        let mut parts = Vec::new();
                        collect_text(&item["output"], &mut parts);
                        results.push(parts.join("\n"));
                    }
                }
                // Read above, in gemini.rs.
                Api::Gemini => {}
            }
        }
        results
    }

    /// The output of the last tool call, if any.
    pub fn last_tool_result(&self) -> Option<String> {
        self.tool_results().pop()
    }

    /// Assistant messages that ended a turn with text (no tool call).
    pub fn final_replies(&self) -> Vec<String> {
        if self.api == Api::Gemini {
            return self.gemini_final_replies();
        }
        let mut replies = Vec::new();
        for item in self.items() {
            if item["role"] != "assistant" {
                continue;
            }
            let calls_tool = item["content"]
                .as_array()
                .is_some_and(|blocks| blocks.iter().any(|block| block["type"] == "tool_use"));
            if self.api == Api::OpenAi && item["type"] != "message" || calls_tool {
                continue;
            }
            let mut parts = Vec::new();
            collect_text(&item["content"], &mut parts);
            let reply = parts.join("\n");
            if !REPLIES_WRITTEN_BY_CLI.contains(&reply.as_str()) {
                replies.push(reply);
            }
        }
        replies
    }

    /// How many script steps this conversation already shows: tool results plus final replies.
    pub fn steps_done(&self) -> usize {
        self.tool_results().len() + self.final_replies().len()
    }

    /// The tools offered, Codex's namespaces flattened, including those Codex's code mode
    /// offers in an `additional_tools` input item and those its `tool_search` found (in
    /// `tool_search_output` items).
    pub fn tools(&self) -> Vec<OfferedTool> {
        if self.api == Api::Gemini {
            return self.gemini_tools();
        }
        let mut tools = Vec::new();
        let additional = self
            .items()
            .filter(|item| matches!(item["type"].as_str(), Some("additional_tools" | "tool_search_output")));
        let offered = self.body["tools"].as_array().into_iter().flatten();
        for tool in offered.chain(additional.flat_map(|item| item["tools"].as_array().into_iter().flatten()))
        {
            let Some(name) = tool["name"].as_str() else { continue };
            if tool["type"] == "namespace" {
                for inner in tool["tools"].as_array().into_iter().flatten() {
                    if let Some(inner_name) = inner["name"].as_str() {
                        tools.push(OfferedTool {
                            namespace: Some(name.to_owned()),
                            name: inner_name.to_owned(),
                        });
                    }
                }
            } else {
                tools.push(OfferedTool { namespace: None, name: name.to_owned() });
            }
        }
        tools
    }

    /// Whether the model may ask Codex's `tool_search` for a tool it does not see: it is
    /// offered, and no search has answered since the last tool result (so a search that finds
    /// nothing ends in an error text, not a loop).
    pub(crate) fn may_search_tools(&self) -> bool {
        let offered =
            self.body["tools"].as_array().into_iter().flatten().any(|tool| tool["type"] == "tool_search");
        let searched_since_last_result = self
            .items()
            .rev()
            .take_while(|item| !item["type"].as_str().is_some_and(|kind| kind.ends_with("call_output")))
            .any(|item| item["type"] == "tool_search_output");
        offered && !searched_since_last_result
    }

    /// The full names of the tools offered (see [`OfferedTool::full_name`]).
    pub fn tool_names(&self) -> Vec<String> {
        self.tools().iter().map(OfferedTool::full_name).collect()
    }

    /// The first offered tool whose full name ends with `suffix`, `-` and `_` compared equal.
    pub fn find_tool(&self, suffix: &str) -> Option<OfferedTool> {
        let suffix = suffix.replace('-', "_");
        self.tools().into_iter().find(|tool| tool.full_name().replace('-', "_").ends_with(&suffix))
    }

    /// Whether any text in the conversation (system prompt, messages, tool results; not the
    /// tool definitions) contains `needle`.
    pub fn contains(&self, needle: &str) -> bool {
        let mut strings = Vec::new();
        collect_strings(&self.body["system"], &mut strings);
        collect_strings(&self.body["instructions"], &mut strings);
        collect_strings(&self.body["systemInstruction"], &mut strings);
        collect_strings(&self.body[self.items_key()], &mut strings);
        strings.iter().any(|text| text.contains(needle))
    }

    /// The first UUID (8-4-4-4-12 hex digits) in the prompt, e.g. a task id.
    pub fn prompt_uuid(&self) -> Option<String> {
        find_uuid(&self.prompt())
    }

    fn items_key(&self) -> &'static str {
        match self.api {
            Api::Anthropic => "messages",
            Api::OpenAi => "input",
            Api::Gemini => "contents",
        }
    }

    pub(crate) fn items(&self) -> impl DoubleEndedIterator<Item = &Value> {
        self.body[self.items_key()].as_array().into_iter().flatten()
    }

    /// The call that runs `command` with this CLI's shell tool.
    pub(crate) fn shell_call(&self, command: &str) -> Option<Action> {
        let tools = self.tools();
        let offered = |name: &str| tools.iter().any(|tool| tool.namespace.is_none() && tool.name == name);
        let (name, input) = match self.api {
            Api::Anthropic if offered("Bash") => {
                ("Bash", json!({"command": command, "description": "Run the scripted command"}))
            }
            // opencode's (and pi's) shell tool.
            Api::Anthropic if offered("bash") => {
                ("bash", json!({"command": command, "description": "Run the scripted command"}))
            }
            Api::OpenAi if offered("exec_command") => ("exec_command", json!({"cmd": command})),
            Api::OpenAi if offered("shell_command") => ("shell_command", json!({"command": command})),
            Api::OpenAi if offered("shell") => ("shell", json!({"command": ["bash", "-lc", command]})),
            Api::Gemini if offered("run_shell_command") => {
                ("run_shell_command", json!({"command": command, "description": "Run the scripted command"}))
            }
            _ => return None,
        };
        Some(Action::Tool { namespace: None, name: name.to_owned(), input })
    }
}

/// Assistant texts a CLI writes into the history itself, never the model's, so no script step:
/// Claude Code 2.1.3xx closes a turn cut short (a session resumed after its run was stopped in
/// a tool call, whose result it records as "[Tool call interrupted ...]") with this one.
const REPLIES_WRITTEN_BY_CLI: [&str; 1] = ["No response requested."];

/// The first UUID (8-4-4-4-12 hex digits, either case) in `text`.
pub fn find_uuid(text: &str) -> Option<String> {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let bytes = text.as_bytes();
    let is_uuid_at = |start: usize| {
        let mut at = start;
        for (index, len) in GROUPS.iter().enumerate() {
            if index > 0 {
                if bytes.get(at) != Some(&b'-') {
                    return false;
                }
                at += 1;
            }
            if at + len > bytes.len() || !bytes[at..at + len].iter().all(u8::is_ascii_hexdigit) {
                return false;
            }
            at += len;
        }
        // Not part of a longer hex run on either side.
        let clean_before = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
        let clean_after = bytes.get(at).is_none_or(|byte| !byte.is_ascii_alphanumeric());
        clean_before && clean_after
    };
    (0..bytes.len()).find(|&start| is_uuid_at(start)).map(|start| text[start..start + 36].to_owned())
}

/// The whitespace-delimited word after the first `marker` in `text`, trailing punctuation
/// (`.,;:)"'`) removed: `word_after("Task ID: abc.", "Task ID:")` is `Some("abc")`.
pub fn word_after(text: &str, marker: &str) -> Option<String> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let word = rest.split_whitespace().next()?;
    let word = word.trim_end_matches(['.', ',', ';', ':', ')', '"', '\'', '`']);
    (!word.is_empty()).then(|| word.to_owned())
}

/// Text of a content value: a string, or the `text` of each block (recursing into nested
/// `content`, as in tool results).
fn collect_text(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) => out.push(text.clone()),
        Value::Array(blocks) => blocks.iter().for_each(|block| collect_text(block, out)),
        Value::Object(block) => {
            if let Some(Value::String(text)) = block.get("text") {
                out.push(text.clone());
            }
            if let Some(content) = block.get("content") {
                collect_text(content, out);
            }
        }
        _ => {}
    }
}

pub(crate) fn collect_strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) => out.push(text.clone()),
        Value::Array(values) => values.iter().for_each(|value| collect_strings(value, out)),
        Value::Object(map) => map.values().for_each(|value| collect_strings(value, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_uuid_takes_the_first_whole_uuid() {
        let text =
            "Task 0123 ID: 3f1e2d4c-1a2b-4c3d-8e9f-0a1b2c3d4e5f, then 11111111-1111-1111-1111-111111111111";
        assert_eq!(find_uuid(text).as_deref(), Some("3f1e2d4c-1a2b-4c3d-8e9f-0a1b2c3d4e5f"));
        assert_eq!(find_uuid("x3f1e2d4c-1a2b-4c3d-8e9f-0a1b2c3d4e5f"), None);
        assert_eq!(find_uuid("3f1e2d4c-1a2b-4c3d-8e9f-0a1b2c3d4e5"), None);
    }

    #[test]
    fn word_after_trims_punctuation() {
        assert_eq!(word_after("Task ID: abc.", "Task ID:").as_deref(), Some("abc"));
        assert_eq!(word_after("nothing here", "Task ID:"), None);
    }

    #[test]
    fn codex_namespaced_tools_match_hyphenated_suffixes() {
        let body = json!({"tools": [
            {"type": "function", "name": "exec_command"},
            {"type": "namespace", "name": "mcp__agent_swarm", "tools": [{"type": "function", "name": "store_progress"}]}
        ]});
        let conversation = Conversation::new(Api::OpenAi, body);
        let tool = conversation.find_tool("store-progress").unwrap();
        assert_eq!(
            tool,
            OfferedTool { namespace: Some("mcp__agent_swarm".into()), name: "store_progress".into() }
        );
        assert_eq!(conversation.tool_names(), ["exec_command", "mcp__agent_swarm__store_progress"]);
    }

    #[test]
    fn a_turn_claude_code_closed_itself_is_no_step() {
        let body = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": "do it"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": true,
                "content": "[Tool call interrupted: the session ended before this call's result was recorded]"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "No response requested."}]},
            {"role": "user", "content": [{"type": "text", "text": "go on"}]}
        ]});
        let conversation = Conversation::new(Api::Anthropic, body);
        assert!(conversation.final_replies().is_empty());
        assert_eq!(conversation.steps_done(), 1);
    }

    #[test]
    fn steps_done_counts_tool_results_and_final_replies() {
        let body = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"}, {"type": "text", "text": "do it"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
            {"role": "user", "content": "again"}
        ]});
        let conversation = Conversation::new(Api::Anthropic, body);
        assert_eq!(conversation.prompt(), "do it");
        assert_eq!(conversation.latest_prompt(), "again");
        assert_eq!(conversation.tool_results(), ["ok"]);
        assert_eq!(conversation.final_replies(), ["done"]);
        assert_eq!(conversation.steps_done(), 2);
        assert!(conversation.contains("again"));
    }
}
