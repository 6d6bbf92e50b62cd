//! What one model request weighs (issue 43: what the hub adds to every model call): its body,
//! its tool definitions, and the part of those that is MCP servers' tools, as the CLI sent
//! them. Both CLIs name MCP tools `mcp__<server>__<tool>` (Codex groups them in `mcp__<server>`
//! namespaces); Claude Code's and Codex's tool search may leave them out of `tools`, only named.

use serde_json::Value;

use crate::{Api, RecordedRequest};

/// The bytes of a model request, as received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestWeight {
    /// The whole request body.
    pub body_bytes: usize,
    /// Every tool definition in `tools` (each as compact JSON, as the CLIs send them).
    pub tools_bytes: usize,
    pub tools: usize,
    /// The MCP tools among them, sent in full.
    pub mcp_tools_bytes: usize,
    pub mcp_tools: usize,
    /// MCP tools only named, their definitions not sent (Claude Code's deferred tools, which
    /// the model loads with `ToolSearch`).
    pub deferred_mcp_tools: usize,
}

impl RecordedRequest {
    /// The weight of a model request (`None` for any other request).
    pub fn weight(&self) -> Option<RequestWeight> {
        let conversation = self.conversation()?;
        let mut weight = RequestWeight { body_bytes: self.body.len(), ..RequestWeight::default() };
        for tool in conversation.body["tools"].as_array().into_iter().flatten() {
            let bytes = tool.to_string().len();
            weight.tools_bytes += bytes;
            weight.tools += 1;
            if tool["name"].as_str().is_some_and(|name| name.starts_with("mcp__")) {
                weight.mcp_tools_bytes += bytes;
                weight.mcp_tools += inner_tools(tool).unwrap_or(1);
            }
        }
        if conversation.api == Api::Anthropic {
            weight.deferred_mcp_tools = conversation.deferred_tool_names().len();
        }
        Some(weight)
    }
}

/// The tools of a Codex namespace.
fn inner_tools(tool: &Value) -> Option<usize> {
    (tool["type"] == "namespace").then(|| tool["tools"].as_array().map_or(0, Vec::len))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(path: &str, body: Value) -> RecordedRequest {
        RecordedRequest {
            method: "POST".into(),
            path: path.into(),
            headers: Vec::new(),
            body: body.to_string(),
        }
    }

    #[test]
    fn mcp_tools_are_weighed_apart_from_the_clis_own() {
        let bash = json!({"name": "Bash", "description": "Runs a command.", "input_schema": {}});
        let swarm = json!({"name": "mcp__agent-swarm__store-progress", "description": "Reports.", "input_schema": {"type": "object"}});
        let body =
            json!({"model": "m", "tools": [bash, swarm], "messages": [{"role": "user", "content": "hi"}]});
        let weight = request("/v1/messages?beta=true", body.clone()).weight().unwrap();
        assert_eq!(weight.body_bytes, body.to_string().len());
        assert_eq!(weight.tools, 2);
        assert_eq!(weight.tools_bytes, bash.to_string().len() + swarm.to_string().len());
        assert_eq!((weight.mcp_tools, weight.mcp_tools_bytes), (1, swarm.to_string().len()));
        assert_eq!(weight.deferred_mcp_tools, 0);
    }

    #[test]
    fn a_codex_namespace_counts_its_tools_and_deferred_names_are_counted_not_weighed() {
        let namespace =
            json!({"type": "namespace", "name": "mcp__agent_swarm", "tools": [{"name": "a"}, {"name": "b"}]});
        let body = json!({"model": "m", "tools": [namespace], "input": []});
        let weight = request("/v1/responses", body).weight().unwrap();
        assert_eq!((weight.mcp_tools, weight.mcp_tools_bytes), (2, namespace.to_string().len()));

        let system =
            "deferred tools are now available via ToolSearch:\nmcp__agent-swarm__get-swarm\nWebFetch\n";
        let body = json!({"model": "m", "tools": [{"name": "ToolSearch"}],
            "messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": system}]});
        let weight = request("/v1/messages", body).weight().unwrap();
        assert_eq!((weight.mcp_tools, weight.mcp_tools_bytes, weight.deferred_mcp_tools), (0, 0, 1));
        assert_eq!(request("/v1/models", json!({})).weight(), None);
    }
}
