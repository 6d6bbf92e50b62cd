//! The tool registry: every tool with its input schema (generated from its Rust
//! argument type), the audience that may see and call it, and its handler.
//!
//! A feature adds its tools by writing one module under `tools/` whose `group()`
//! returns its [`ToolSpec`]s, and adding that group in `tools::hub_groups` (or the
//! stdio-only list). Nothing else changes: listing by role, argument parsing, refusals
//! and the result shape are done here and in `server`.

use std::{future::Future, pin::Pin, sync::Arc};

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::{JsonSchema, generate::SchemaSettings};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

pub use crate::context::Role;
use crate::{
    context::ToolCall,
    reply::{Outcome, Reply},
};

/// Who may see and call a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// Everyone, unregistered callers included: registration and read-only tools.
    Anyone,
    /// Any registered agent.
    Agents,
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

/// A group of tools a model is offered only when asked for (issue 43: every tool offered
/// costs bytes in every model call): by the agent (its `capabilities` name it) or by the hub
/// (`CAPABILITIES`, the reference's variable). Calls to them are accepted either way; only
/// the offer in `tools/list` is gated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    pub name: &'static str,
    /// The lead is offered the group without asking (epics are the lead's planning tool).
    pub lead_has_it: bool,
}

/// The opt-in groups, by the names agents and the hub use for them.
pub const SCHEDULING: Capability = Capability { name: "scheduling", lead_has_it: false };
pub const SERVICES: Capability = Capability { name: "services", lead_has_it: false };
pub const EPICS: Capability = Capability { name: "epics", lead_has_it: true };
pub const SLACK_FILES: Capability = Capability { name: "slack-files", lead_has_it: false };
pub const CHANNELS_ADMIN: Capability = Capability { name: "channels-admin", lead_has_it: false };
/// Reading and answering Slack: the lead's inbox work; a worker's task reports itself there.
pub const SLACK: Capability = Capability { name: "slack", lead_has_it: true };
/// Steering other agents' running tasks: the lead's, or whoever asks.
pub const STEERING: Capability = Capability { name: "steering", lead_has_it: true };
/// The mailbox beyond reading and answering: history and counts (the hooks give counts).
pub const MAIL_HISTORY: Capability = Capability { name: "mail-history", lead_has_it: true };
/// Cancelling tasks: the lead's (and a creator's) decision, not a worker's on a task.
pub const TASK_ADMIN: Capability = Capability { name: "task-admin", lead_has_it: true };
/// Changing one's own profile, which `swarm worker` sets at registration.
pub const PROFILE: Capability = Capability { name: "profile", lead_has_it: false };
/// Every opt-in group (`swarm-bench tools` offers them all for its "every group" rows).
pub const CAPABILITIES: [Capability; 10] = [
    SCHEDULING,
    SERVICES,
    EPICS,
    SLACK_FILES,
    CHANNELS_ADMIN,
    SLACK,
    STEERING,
    MAIL_HISTORY,
    TASK_ADMIN,
    PROFILE,
];

/// One tool: what `tools/list` shows, who may use it, and what it does.
#[derive(Clone)]
pub struct ToolSpec {
    pub tool: Tool,
    pub audience: Audience,
    /// `None`: offered to its whole audience.
    pub capability: Option<Capability>,
    /// Offered only to callers not registered yet (`join-swarm`; registered agents may
    /// still call it).
    pub before_joining_only: bool,
    handler: Handler,
}

impl ToolSpec {
    /// A tool whose arguments are `A` and whose own result fields are `O`.
    ///
    /// The input schema is generated from `A`, and a call whose arguments do not
    /// deserialize into `A` is answered with a refusal that names the offending field,
    /// before `handler` runs.
    ///
    /// The output schema is generated from `O` (beside `yourAgentId`, `success`,
    /// `message`), the struct the handler answers with (`Answer<O>`), serialized with serde:
    /// `O` derives `Serialize` and `utoipa::ToSchema`, as the REST API's types do (the
    /// domain types inside it included). Its fields are listed, not required: a refusal
    /// carries none of them. The schema is closed (`additionalProperties: false`).
    pub fn new<A, O, F, Fut>(
        name: &'static str,
        description: &'static str,
        audience: Audience,
        handler: F,
    ) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: Serialize + utoipa::ToSchema + 'static,
        F: Fn(ToolCall, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome<O>> + Send + 'static,
    {
        let schema = Arc::new(input_schema::<A>(name));
        let handler = Arc::new(handler);
        let erased: Handler = Arc::new(move |call: ToolCall, arguments: Value| {
            let handler = Arc::clone(&handler);
            Box::pin(async move {
                match parse_arguments::<A>(arguments) {
                    Ok(args) => match handler(call, args).await {
                        Ok(answer) => answer.into_reply(),
                        Err(refusal) => refusal,
                    },
                    Err(message) => Reply::refused(format!("invalid arguments for {name}: {message}")),
                }
            }) as ToolFuture
        });
        let mut tool = Tool::new(name, description, schema);
        tool.output_schema = Some(Arc::new(output_schema(own_fields::<O>(name))));
        ToolSpec { tool, audience, capability: None, before_joining_only: false, handler: erased }
    }

    pub fn read_only(mut self) -> Self {
        self.tool.annotations = Some(ToolAnnotations::new().read_only(true));
        self
    }

    /// Offered only to callers that asked for `capability`.
    pub fn opt_in(mut self, capability: Capability) -> Self {
        self.capability = Some(capability);
        self
    }

    /// Offered only until the caller has joined.
    pub fn before_joining(mut self) -> Self {
        self.before_joining_only = true;
        self
    }

    pub fn name(&self) -> &str {
        &self.tool.name
    }

    /// Whether `tools/list` offers it to a caller of `role` whose agent names
    /// `agent_capabilities`, on a hub that enables `hub_capabilities`.
    pub fn offered_to(&self, role: Role, agent_capabilities: &[String], hub_capabilities: &[String]) -> bool {
        if !self.audience.admits(role) || (self.before_joining_only && role != Role::Unregistered) {
            return false;
        }
        match self.capability {
            None => true,
            Some(capability) => {
                (capability.lead_has_it && role == Role::Lead)
                    || agent_capabilities.iter().chain(hub_capabilities).any(|name| name == capability.name)
            }
        }
    }

    pub async fn call(&self, call: ToolCall, arguments: Value) -> Reply {
        (self.handler)(call, arguments).await
    }
}

/// The tools one server offers, in listing order.
#[derive(Clone, Default)]
pub struct Registry {
    tools: Vec<ToolSpec>,
    /// The opt-in groups the hub offers to everyone who may use them.
    enabled: Vec<String>,
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
        Registry { tools, enabled: Vec::new() }
    }

    /// With the opt-in groups named in `names` (comma-separated, as in `CAPABILITIES`)
    /// offered to all.
    pub fn with_capabilities(mut self, names: &str) -> Self {
        self.enabled =
            names.split(',').map(str::trim).filter(|name| !name.is_empty()).map(String::from).collect();
        self
    }

    /// What `tools/list` offers a caller of `role` whose agent names `agent_capabilities`.
    pub fn offered_to<'a>(
        &'a self,
        role: Role,
        agent_capabilities: &'a [String],
    ) -> impl Iterator<Item = &'a ToolSpec> {
        self.tools.iter().filter(move |spec| spec.offered_to(role, agent_capabilities, &self.enabled))
    }

    #[cfg(test)]
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

/// The JSON Schema (2020-12) of a tool's arguments, written for portability: subschemas
/// inlined (no `$ref`), and an optional argument typed as its value (`"type": "string"`,
/// not `["string", "null"]`), which single-type dialects such as Gemini's accept.
/// Arguments stay optional by being left out of `required`.
fn input_schema<A: JsonSchema>(name: &str) -> JsonObject {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    let schema = settings.into_generator().into_root_schema_for::<A>();
    let Ok(Value::Object(mut schema)) = serde_json::to_value(schema) else {
        panic!("the arguments of tool {name} do not have an object schema");
    };
    // The argument types are ours; a non-object one is a bug caught by the tests.
    assert_eq!(
        schema.get("type"),
        Some(&Value::from("object")),
        "the arguments of tool {name} are not an object"
    );
    // The type's own name and doc comment are noise to a model.
    schema.remove("title");
    schema.remove("description");
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for property in properties.values_mut() {
            if let Value::Object(property) = property {
                drop_null_branch(property);
            }
        }
    }
    schema
}

/// The schema of every result, `{yourAgentId, success, message}`, with a tool's own fields
/// (`properties` and `$defs`), closed: a field the tool does not declare fails it.
fn output_schema(own: JsonObject) -> JsonObject {
    let mut schema = serde_json::json!({
        "type": "object",
        "properties": {
            "yourAgentId": {"type": ["string", "null"], "description": "The caller's agent id."},
            "success": {"type": "boolean"},
            "message": {"type": "string"},
        },
        "required": ["yourAgentId", "success", "message"],
        "additionalProperties": false,
    });
    if let (Some(Value::Object(properties)), Some(Value::Object(own_properties))) =
        (schema.get_mut("properties"), own.get("properties"))
    {
        for (key, value) in own_properties {
            properties.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    if let Some(defs) = own.get("$defs") {
        schema["$defs"] = defs.clone();
    }
    match schema {
        Value::Object(schema) => schema,
        _ => unreachable!("the output schema is an object"),
    }
}

/// `O`'s utoipa schema as JSON Schema 2020-12: `properties`, and the types it names
/// under `$defs` (utoipa's `#/components/schemas/` references pointed there).
fn own_fields<O: utoipa::ToSchema>(name: &str) -> JsonObject {
    let mut defs = Vec::new();
    O::schemas(&mut defs);
    let mut document = serde_json::json!({
        "root": <O as utoipa::PartialSchema>::schema(),
        "defs": defs
            .into_iter()
            .map(|(key, schema)| (key, serde_json::to_value(schema).unwrap_or(Value::Null)))
            .collect::<serde_json::Map<String, Value>>(),
    });
    rewrite_refs(&mut document);
    let Value::Object(mut root) = document["root"].take() else {
        panic!("the output of tool {name} does not have an object schema");
    };
    if let Value::Object(defs) = document["defs"].take()
        && !defs.is_empty()
    {
        root.insert("$defs".into(), Value::Object(defs));
    }
    let mut root = Value::Object(root);
    examples_for_example(&mut root);
    let Value::Object(root) = root else { unreachable!("still an object") };
    root
}

/// OpenAPI's `example: v` (which utoipa writes) as JSON Schema 2020-12's `examples: [v]`,
/// in a schema and every subschema, so the output schema uses only 2020-12 keywords.
fn examples_for_example(schema: &mut Value) {
    let Value::Object(keywords) = schema else { return };
    if let Some(example) = keywords.remove("example") {
        keywords.entry("examples").or_insert_with(|| Value::Array(vec![example]));
    }
    for (keyword, value) in keywords.iter_mut() {
        match keyword.as_str() {
            "$defs" | "properties" | "patternProperties" | "dependentSchemas" => {
                if let Value::Object(named) = value {
                    named.values_mut().for_each(examples_for_example);
                }
            }
            "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                if let Value::Array(list) = value {
                    list.iter_mut().for_each(examples_for_example);
                }
            }
            "not"
            | "if"
            | "then"
            | "else"
            | "items"
            | "contains"
            | "additionalProperties"
            | "propertyNames"
            | "unevaluatedItems"
            | "unevaluatedProperties" => examples_for_example(value),
            _ => {}
        }
    }
}

fn rewrite_refs(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            if let Some(Value::String(reference)) = fields.get_mut("$ref")
                && let Some(name) = reference.strip_prefix("#/components/schemas/")
            {
                *reference = format!("#/$defs/{name}");
            }
            fields.values_mut().for_each(rewrite_refs);
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

/// `{"type": ["string", "null"]}` → `{"type": "string"}`; `{"anyOf": [S, {"type": "null"}]}`
/// → `S` (keeping the property's description); `null` leaves an `enum` too.
fn drop_null_branch(property: &mut JsonObject) {
    let is_null = |value: &Value| value == "null" || value.get("type").is_some_and(|kind| kind == "null");
    if property.get("default").is_some_and(Value::is_null) {
        property.remove("default");
    }
    if let Some(Value::Array(values)) = property.get_mut("enum") {
        values.retain(|value| !value.is_null());
    }
    if let Some(Value::Array(types)) = property.get_mut("type") {
        types.retain(|kind| kind != "null");
        if types.len() == 1 {
            let single = types.remove(0);
            property.insert("type".into(), single);
        }
    }
    let branches = match property.get("anyOf") {
        Some(Value::Array(branches)) if branches.len() == 2 && branches.iter().any(is_null) => {
            branches.clone()
        }
        _ => return,
    };
    property.remove("anyOf");
    if let Some(Value::Object(kept)) = branches.into_iter().find(|branch| !is_null(branch)) {
        for (key, value) in kept {
            property.entry(key).or_insert(value);
        }
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
    use crate::reply::Answer;

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
            ToolSpec::new(name, "a tool", audience, |_, _: Empty| async { Ok(Answer::done("done")) })
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

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Optional {
        /// A note.
        note: Option<String>,
        kind: Option<Kind>,
        required: Kind,
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code)]
    enum Kind {
        A,
        B,
    }

    #[test]
    fn input_schemas_are_portable() {
        let schema = input_schema::<Optional>("sample");
        let properties = &schema["properties"];
        assert_eq!(properties["note"], serde_json::json!({"type": "string", "description": "A note."}));
        assert_eq!(properties["kind"]["enum"], serde_json::json!(["A", "B"]));
        assert_eq!(properties["required"]["enum"], serde_json::json!(["A", "B"]));
        assert_eq!(schema["required"], serde_json::json!(["required"]));
        let text = serde_json::to_string(&schema).unwrap();
        assert!(!text.contains("null") && !text.contains("$ref"), "{text}");
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
