//! Claude Code's deferred tools (from 2.1.3xx): MCP tools are not offered to the model at first,
//! only named, one per line, in a `system` message ("... available via ToolSearch ..."). The model
//! loads a tool's schema with the `ToolSearch` tool (`{"query": "select:<name>,<name>"}`), whose
//! result holds `tool_reference` blocks (and a "Tool loaded." text beside it); from the next
//! request on, the tool is offered like any other (with `defer_loading: true`).
//!
//! Loading is not a script step: its call and result are left out of
//! [`Conversation::tool_results`] (and so of the step count), and its "Tool loaded." text is not a
//! prompt, so a script plays the same with deferred tools as without.

use serde_json::{Value, json};

use crate::conversation::{Action, Api, Conversation};

/// Claude Code's tool that loads deferred tools.
pub const CLAUDE_TOOL_SEARCH: &str = "ToolSearch";

impl Conversation {
    /// The `ToolSearch` call that loads the deferred tool whose name ends with `suffix` (`-` and
    /// `_` compared equal), when Claude Code offers `ToolSearch`, its system text names such a
    /// tool, and the model's last call was not already a `ToolSearch` (a load that did not make
    /// the tool appear ends in an error text, not a loop).
    pub(crate) fn claude_tool_search(&self, suffix: &str) -> Option<Action> {
        if self.api != Api::Anthropic || !self.offers_plain_tool(CLAUDE_TOOL_SEARCH) {
            return None;
        }
        if self.last_tool_call().is_some_and(|call| call["name"] == CLAUDE_TOOL_SEARCH) {
            return None;
        }
        let name = self.deferred_tool_names().into_iter().find(|name| ends_with(name, suffix))?;
        Some(Action::Tool {
            namespace: None,
            name: CLAUDE_TOOL_SEARCH.to_owned(),
            input: json!({"query": format!("select:{name}"), "max_results": 5}),
        })
    }

    /// The names of deferred tools in the system text: its words that name an MCP tool
    /// (`mcp__<server>__<tool>`).
    pub fn deferred_tool_names(&self) -> Vec<String> {
        let text = self.system_text();
        let mut names: Vec<String> = text
            .split(|c: char| c.is_whitespace() || matches!(c, ',' | '`' | '"' | '\''))
            .filter(|word| word.starts_with("mcp__") && word.len() > "mcp__".len())
            .map(str::to_owned)
            .collect();
        names.dedup();
        names
    }

    /// The ids of Claude Code `ToolSearch` calls in the conversation, whose results are not
    /// script steps.
    pub(crate) fn tool_search_call_ids(&self) -> Vec<String> {
        if self.api != Api::Anthropic {
            return Vec::new();
        }
        self.tool_use_blocks()
            .filter(|block| block["name"] == CLAUDE_TOOL_SEARCH)
            .filter_map(|block| block["id"].as_str().map(str::to_owned))
            .collect()
    }

    /// Whether this user message answers a `ToolSearch` call (its texts are Claude Code's
    /// "Tool loaded.", not prompts).
    pub(crate) fn answers_tool_search(&self, message: &Value, search_ids: &[String]) -> bool {
        message["content"].as_array().into_iter().flatten().any(|block| {
            block["type"] == "tool_result"
                && block["tool_use_id"].as_str().is_some_and(|id| search_ids.iter().any(|s| s == id))
        })
    }

    fn offers_plain_tool(&self, name: &str) -> bool {
        self.tools().iter().any(|tool| tool.namespace.is_none() && tool.name == name)
    }

    fn tool_use_blocks(&self) -> impl Iterator<Item = &Value> {
        self.items()
            .filter(|item| item["role"] == "assistant")
            .flat_map(|item| item["content"].as_array().into_iter().flatten())
            .filter(|block| block["type"] == "tool_use")
    }

    fn last_tool_call(&self) -> Option<&Value> {
        self.tool_use_blocks().last()
    }
}

fn ends_with(name: &str, suffix: &str) -> bool {
    name.replace('-', "_").ends_with(&suffix.replace('-', "_"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFERRED: &str = "The following deferred tools are now available via ToolSearch. Their schemas \
        are NOT loaded:\nCronCreate\nWebFetch\nmcp__agent-swarm__get-swarm\nmcp__agent-swarm__store-progress\n";

    fn tools(extra: &[&str]) -> Value {
        let mut tools = vec![
            json!({"name": "Bash", "input_schema": {}}),
            json!({"name": "ToolSearch", "input_schema": {}}),
            json!({"name": "DeferredToolPlaceholder", "input_schema": {}, "defer_loading": true}),
        ];
        tools.extend(
            extra.iter().map(|name| json!({"name": name, "input_schema": {}, "defer_loading": true})),
        );
        Value::Array(tools)
    }

    fn first_request() -> Value {
        json!({"tools": tools(&[]), "messages": [
            {"role": "user", "content": [{"type": "text", "text": "do task 3f1e2d4c-1a2b-4c3d-8e9f-0a1b2c3d4e5f"}]},
            {"role": "system", "content": DEFERRED}
        ]})
    }

    fn after_search() -> Value {
        let mut body = first_request();
        body["tools"] = tools(&["mcp__agent-swarm__store-progress"]);
        let messages = body["messages"].as_array_mut().unwrap();
        messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "ToolSearch",
            "input": {"query": "select:mcp__agent-swarm__store-progress"}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "tool_reference", "tool_name": "mcp__agent-swarm__store-progress"}]},
            {"type": "text", "text": "Tool loaded."}
        ]}));
        body
    }

    #[test]
    fn a_deferred_tool_is_loaded_with_tool_search_first() {
        let conversation = Conversation::new(Api::Anthropic, first_request());
        assert_eq!(
            conversation.deferred_tool_names(),
            ["mcp__agent-swarm__get-swarm", "mcp__agent-swarm__store-progress"]
        );
        assert_eq!(conversation.find_tool("store-progress"), None);
        let Some(Action::Tool { name, input, .. }) = conversation.claude_tool_search("store_progress") else {
            panic!("expected a ToolSearch call")
        };
        assert_eq!(name, "ToolSearch");
        assert_eq!(input["query"], "select:mcp__agent-swarm__store-progress");
        assert_eq!(conversation.claude_tool_search("not-deferred"), None);
    }

    #[test]
    fn the_load_is_not_a_step_and_its_text_not_a_prompt() {
        let conversation = Conversation::new(Api::Anthropic, after_search());
        assert!(conversation.find_tool("store-progress").is_some());
        assert_eq!(conversation.steps_done(), 0);
        assert!(conversation.tool_results().is_empty());
        assert_eq!(conversation.latest_prompt(), "do task 3f1e2d4c-1a2b-4c3d-8e9f-0a1b2c3d4e5f");
        // Loaded but not offered (a search that found nothing): no second search.
        let mut body = after_search();
        body["tools"] = tools(&[]);
        assert_eq!(Conversation::new(Api::Anthropic, body).claude_tool_search("store-progress"), None);
    }

    #[test]
    fn a_script_step_loads_its_tool_then_calls_it() {
        let script = crate::Script::new().call_tool("store-progress", |c| json!({"taskId": c.prompt_uuid()}));
        let Action::Tool { name, .. } = script.decide(&Conversation::new(Api::Anthropic, first_request()))
        else {
            panic!("expected a tool call")
        };
        assert_eq!(name, "ToolSearch");
        let Action::Tool { name, input, .. } =
            script.decide(&Conversation::new(Api::Anthropic, after_search()))
        else {
            panic!("expected a tool call")
        };
        assert_eq!(name, "mcp__agent-swarm__store-progress");
        assert_eq!(input["taskId"], "3f1e2d4c-1a2b-4c3d-8e9f-0a1b2c3d4e5f");
    }

    #[test]
    fn without_tool_search_or_for_codex_nothing_is_loaded() {
        let mut body = first_request();
        body["tools"] = json!([{"name": "Bash", "input_schema": {}}]);
        assert_eq!(Conversation::new(Api::Anthropic, body).claude_tool_search("store-progress"), None);
        assert_eq!(
            Conversation::new(Api::OpenAi, first_request()).claude_tool_search("store-progress"),
            None
        );
    }
}
