//! MCP resources: the caller's view of the swarm as readable documents. Each resource is
//! the result of one read-only tool (the same adapter, the same audience rule), so a
//! resource never says more than the tool would: `swarm://tasks/{id}` is
//! `get-task-details`, `swarm://mail/unread` is `unread-mail-count`, and so on.

use rmcp::model::{Resource, ResourceTemplate};
use serde_json::{Value, json};

/// One resource: its URI, what it is, and the tool call that reads it.
struct Entry {
    uri: &'static str,
    name: &'static str,
    description: &'static str,
    tool: &'static str,
    arguments: fn() -> Value,
    /// Only a registered agent has one (its own tasks).
    needs_agent: bool,
}

const ENTRIES: [Entry; 6] = [
    Entry {
        uri: "swarm://me",
        name: "my-agent",
        description: "Your agent: profile, status, what waits for you (offers, the pool, a lead's Slack inbox).",
        tool: "my-agent-info",
        arguments: || json!({}),
        needs_agent: false,
    },
    Entry {
        uri: "swarm://tasks",
        name: "my-tasks",
        description: "Your tasks, newest first.",
        tool: "get-tasks",
        arguments: || json!({"mineOnly": true, "limit": 100}),
        needs_agent: true,
    },
    Entry {
        uri: "swarm://mail",
        name: "inbox",
        description: "Your mail inbox, newest first (reading it marks nothing read).",
        tool: "list-mail",
        arguments: || json!({}),
        needs_agent: false,
    },
    Entry {
        uri: "swarm://mail/unread",
        name: "unread-mail",
        description: "Your unread mail counted by priority, and whether you wait for a response.",
        tool: "unread-mail-count",
        arguments: || json!({}),
        needs_agent: false,
    },
    Entry {
        uri: "swarm://channels",
        name: "channels",
        description: "The chat channels you can see, with unread counts.",
        tool: "list-channels",
        arguments: || json!({}),
        needs_agent: false,
    },
    Entry {
        uri: "swarm://agents",
        name: "roster",
        description: "Every agent of the swarm with its status and capacity.",
        tool: "get-swarm",
        arguments: || json!({}),
        needs_agent: false,
    },
];

pub const TASK_TEMPLATE: &str = "swarm://tasks/{id}";
const TASK_PREFIX: &str = "swarm://tasks/";
pub const MIME_TYPE: &str = "application/json";

/// The resources a caller may read whose tools `may_call` (`registered`: a known agent).
pub fn list(registered: bool, may_call: impl Fn(&str) -> bool) -> Vec<Resource> {
    ENTRIES
        .iter()
        .filter(|entry| may_call(entry.tool) && (registered || !entry.needs_agent))
        .map(|entry| {
            Resource::new(entry.uri, entry.name).with_description(entry.description).with_mime_type(MIME_TYPE)
        })
        .collect()
}

pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(TASK_TEMPLATE, "task")
            .with_description("One task with its history (newest first).")
            .with_mime_type(MIME_TYPE),
    ]
}

/// The tool call that reads `uri`, or `None` for a URI that names no resource.
pub fn tool_call(uri: &str) -> Option<(&'static str, Value)> {
    if let Some(entry) = ENTRIES.iter().find(|entry| entry.uri == uri) {
        return Some((entry.tool, (entry.arguments)()));
    }
    let id = uri.strip_prefix(TASK_PREFIX)?;
    let id = uuid::Uuid::parse_str(id).ok()?;
    Some(("get-task-details", json!({"taskId": id})))
}

/// What a resource shows of a tool's result: the result without the envelope every tool
/// result has (`yourAgentId`, `success`, `message`), which says nothing about the resource.
pub fn document(mut result: Value) -> String {
    if let Value::Object(fields) = &mut result {
        fields.remove("success");
        fields.remove("message");
        fields.remove("yourAgentId");
    }
    serde_json::to_string_pretty(&result).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_map_to_read_only_tools() {
        assert_eq!(tool_call("swarm://agents").unwrap().0, "get-swarm");
        let id = uuid::Uuid::nil();
        let (tool, arguments) = tool_call(&format!("swarm://tasks/{id}")).unwrap();
        assert_eq!((tool, arguments), ("get-task-details", json!({"taskId": id})));
        assert!(tool_call("swarm://tasks/not-a-uuid").is_none());
        assert!(tool_call("test://static-text").is_none());
        assert_eq!(list(true, |tool| tool == "get-swarm").len(), 1);
        assert_eq!(list(true, |tool| tool == "get-tasks").len(), 1);
        assert!(list(false, |tool| tool == "get-tasks").is_empty());
    }
}
