//! The tool registry: every tool with its input schema (generated from its Rust
//! argument type), the audience that may see and call it, and its handler.
//!
//! A feature adds its tools by writing one module under `tools/` whose `group()`
//! returns its [`ToolSpec`]s, and adding that group in `tools::hub_groups` (or the
//! stdio-only list). Nothing else changes: listing by role, argument parsing, refusals
//! and the result shape are done here and in `server`.

use std::{future::Future, pin::Pin, sync::Arc};

use rmcp::{
    handler::server::common::schema_for_input,
    model::{Tool, ToolAnnotations},
};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{
    context::ToolCall,
    reply::{Outcome, Reply},
};

/// Who a caller is, as far as tools are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// No agent id, or one that is not registered yet.
    Unregistered,
    Worker,
    Lead,
}

/// Who may see and call a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// Everyone, unregistered callers included: registration and read-only tools.
    Anyone,
    /// Any registered agent.
    Agents,
    #[allow(dead_code, reason = "the lead's own tools (inbox-delegate, slack-post) come with the Slack inbox")]
    LeadOnly,
    WorkerOnly,
}

impl Audience {
    pub fn admits(&self, role: Role) -> bool {
        match self {
            Audience::Anyone => true,
            Audience::Agents => role != Role::Unregistered,
            Audience::LeadOnly => role == Role::Lead,
            Audience::WorkerOnly => role == Role::Worker,
        }
    }

    /// Why `role` may not call the tool `name`.
    pub fn refusal(&self, name: &str, role: Role) -> String {
        if role == Role::Unregistered {
            return format!(
                "{name} needs a registered agent: call join-swarm first, then send your agent id \
                 as the X-Agent-ID header (swarm mcp: --agent-id or AGENT_ID)"
            );
        }
        match self {
            Audience::LeadOnly => format!("{name} is for the lead only"),
            Audience::WorkerOnly => format!(
                "{name} is for workers: the lead gets its work through its inbox and the \
                 tasks_finished notices of the poll"
            ),
            Audience::Anyone | Audience::Agents => format!("{name} is not available to you"),
        }
    }
}

type ToolFuture = Pin<Box<dyn Future<Output = Reply> + Send>>;
type Handler = Arc<dyn Fn(ToolCall, Value) -> ToolFuture + Send + Sync>;

/// One tool: what `tools/list` shows, who may use it, and what it does.
#[derive(Clone)]
pub struct ToolSpec {
    pub tool: Tool,
    pub audience: Audience,
    handler: Handler,
}

impl ToolSpec {
    /// A tool whose arguments are `A`: its input schema is generated from `A`, and a call
    /// whose arguments do not deserialize into `A` is answered with a refusal that names
    /// the offending field, before `handler` runs.
    pub fn new<A, F, Fut>(name: &'static str, description: &'static str, audience: Audience, handler: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(ToolCall, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        // The argument types are ours and always objects; a failure here is a bug in
        // a tool definition, caught by the registry's tests.
        let schema = schema_for_input::<A>()
            .unwrap_or_else(|err| panic!("the arguments of tool {name} have a bad schema: {err}"));
        let handler = Arc::new(handler);
        let erased: Handler = Arc::new(move |call: ToolCall, arguments: Value| {
            let handler = Arc::clone(&handler);
            Box::pin(async move {
                match parse_arguments::<A>(arguments) {
                    Ok(args) => handler(call, args).await.unwrap_or_else(|refusal| refusal),
                    Err(message) => Reply::refused(format!("invalid arguments for {name}: {message}")),
                }
            }) as ToolFuture
        });
        ToolSpec { tool: Tool::new(name, description, schema), audience, handler: erased }
    }

    pub fn read_only(mut self) -> Self {
        self.tool.annotations = Some(ToolAnnotations::new().read_only(true));
        self
    }

    pub fn name(&self) -> &str {
        &self.tool.name
    }

    pub async fn call(&self, call: ToolCall, arguments: Value) -> Reply {
        (self.handler)(call, arguments).await
    }
}

/// The tools one server offers, in listing order.
#[derive(Clone, Default)]
pub struct Registry {
    tools: Vec<ToolSpec>,
}

impl Registry {
    pub fn new(groups: impl IntoIterator<Item = Vec<ToolSpec>>) -> Self {
        let tools: Vec<ToolSpec> = groups.into_iter().flatten().collect();
        for (i, tool) in tools.iter().enumerate() {
            assert!(
                tools[..i].iter().all(|earlier| earlier.name() != tool.name()),
                "tool {} is registered twice",
                tool.name()
            );
        }
        Registry { tools }
    }

    pub fn visible_to(&self, role: Role) -> impl Iterator<Item = &ToolSpec> {
        self.tools.iter().filter(move |spec| spec.audience.admits(role))
    }

    pub fn find(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|spec| spec.name() == name)
    }

    #[cfg(test)]
    pub fn all(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.iter()
    }
}

/// Missing arguments are an empty object, so tools without required fields can be
/// called bare. Errors name the field: `taskId: invalid type: integer, expected a UUID`.
fn parse_arguments<A: DeserializeOwned>(arguments: Value) -> Result<A, String> {
    let arguments = if arguments.is_null() { Value::Object(Default::default()) } else { arguments };
    serde_path_to_error::deserialize(arguments).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." { inner.to_string() } else { format!("{path}: {inner}") }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audiences_follow_roles() {
        let check = |audience: Audience, expected: [bool; 3]| {
            let admitted = [Role::Unregistered, Role::Worker, Role::Lead].map(|role| audience.admits(role));
            assert_eq!(admitted, expected, "{audience:?}");
        };
        check(Audience::Anyone, [true, true, true]);
        check(Audience::Agents, [false, true, true]);
        check(Audience::LeadOnly, [false, false, true]);
        check(Audience::WorkerOnly, [false, true, false]);
    }

    #[derive(serde::Deserialize, JsonSchema)]
    struct Empty {}

    #[test]
    fn tools_are_listed_by_role() {
        let spec = |name: &'static str, audience| {
            ToolSpec::new(name, "a tool", audience, |_, _: Empty| async { Ok(Reply::ok("done")) })
        };
        let registry = Registry::new([
            vec![spec("open", Audience::Anyone), spec("member", Audience::Agents)],
            vec![spec("lead-tool", Audience::LeadOnly), spec("worker-tool", Audience::WorkerOnly)],
        ]);
        let names = |role| registry.visible_to(role).map(ToolSpec::name).collect::<Vec<_>>();
        assert_eq!(names(Role::Unregistered), ["open"]);
        assert_eq!(names(Role::Worker), ["open", "member", "worker-tool"]);
        assert_eq!(names(Role::Lead), ["open", "member", "lead-tool"]);
        assert!(registry.find("lead-tool").is_some() && registry.find("nope").is_none());
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    struct Sample {
        task_id: uuid::Uuid,
        limit: Option<i64>,
    }

    #[test]
    fn bad_arguments_name_the_field() {
        let err = parse_arguments::<Sample>(serde_json::json!({"taskId": 5})).err().unwrap();
        assert!(err.starts_with("taskId: invalid type"), "{err}");
        let err = parse_arguments::<Sample>(serde_json::json!({})).err().unwrap();
        assert!(err.contains("missing field `taskId`"), "{err}");
        let err = parse_arguments::<Sample>(serde_json::json!({"taskId": uuid::Uuid::nil(), "lim": 1}))
            .err()
            .unwrap();
        assert!(err.contains("unknown field `lim`"), "{err}");
        let err = parse_arguments::<Sample>(serde_json::json!("text")).err().unwrap();
        assert!(err.contains("invalid type"), "{err}");
    }
}
