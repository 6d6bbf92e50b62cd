//! The tool groups. Each module is one feature's tools, each tool a thin adapter over
//! the service function its REST twin calls.

mod agents;
mod chat;
mod epics;
mod inbox;
mod mail;
pub mod poll;
mod services;
mod slack;
mod slack_files;
mod slack_lead;
mod steering;
mod tasks;
mod triggers;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use swarm_domain::task::TaskStatus;

use crate::registry::{
    CHANNELS_ADMIN, Capability, EPICS, MAIL_HISTORY, PROFILE, SCHEDULING, SERVICES, SLACK, SLACK_FILES,
    STEERING, TASK_ADMIN, ToolSpec,
};

pub use inbox::InboxRole;

/// The tools of the hub, served over HTTP and stdio alike.
pub fn hub_groups() -> Vec<Vec<ToolSpec>> {
    vec![
        agents::group()
            .into_iter()
            .map(|spec| match spec.name() {
                "join-swarm" => spec.before_joining(),
                "update-profile" => spec.opt_in(PROFILE),
                _ => spec,
            })
            .collect(),
        opt_in_named(tasks::group(), &["cancel-task"], TASK_ADMIN),
        opt_in(steering::group(), STEERING),
        poll::group(),
        opt_in_named(slack::group(), &["slack-reply", "slack-read", "get-inbox-message"], SLACK),
        opt_in_named(slack_lead::group(), &CHANNELS_ADMIN_TOOLS, CHANNELS_ADMIN),
        opt_in(slack_files::group(), SLACK_FILES),
        opt_in_named(chat::group(), &CHANNELS_ADMIN_TOOLS, CHANNELS_ADMIN),
        opt_in_named(mail::group(), &["list-mail", "unread-mail-count"], MAIL_HISTORY),
        opt_in(triggers::schedule_group(), SCHEDULING),
        opt_in(epics::group(), EPICS),
        opt_in(services::group(), SERVICES),
    ]
}

/// Tools that make or change channels: few agents need them on a given run.
const CHANNELS_ADMIN_TOOLS: [&str; 4] =
    ["create-channel", "slack-create-channel", "slack-invite-to-channel", "slack-archive-channel"];

fn opt_in(group: Vec<ToolSpec>, capability: Capability) -> Vec<ToolSpec> {
    group.into_iter().map(|spec| spec.opt_in(capability)).collect()
}

fn opt_in_named(group: Vec<ToolSpec>, names: &[&str], capability: Capability) -> Vec<ToolSpec> {
    group
        .into_iter()
        .map(|spec| if names.contains(&spec.name()) { spec.opt_in(capability) } else { spec })
        .collect()
}

/// The opt-in tool groups `swarm mcp` offers everyone (`CAPABILITIES`, comma-separated names
/// as in `registry`, like the hub's `--capabilities`): none by default.
pub fn hub_capabilities() -> String {
    std::env::var("CAPABILITIES").unwrap_or_default()
}

/// The hub's tools plus the Inbox-MCP names for one session role (stdio only).
pub fn stdio_groups(inbox_role: &InboxRole) -> Vec<Vec<ToolSpec>> {
    let mut groups = hub_groups();
    groups.push(inbox::group(inbox_role));
    groups.push(triggers::inbox_group());
    groups
}

/// For tools that take no arguments: anything but an empty object is refused.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArguments {}

/// A task status, as a JSON Schema enum of the wire's names (the reference's).
fn task_status_schema(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = TaskStatus::ALL.iter().map(TaskStatus::as_str).collect();
    json_schema!({ "type": "string", "enum": names })
}

fn parse_status(text: &str) -> Result<TaskStatus, crate::reply::Reply> {
    TaskStatus::parse(text).map_err(|err| crate::reply::Reply::refused(err.0))
}

#[cfg(test)]
mod offer_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn every_group_registers_without_clashes_and_with_object_schemas() {
        let roles = [InboxRole::Worker, InboxRole::Trigger { name: "nightly".into() }];
        for role in roles {
            let registry = Registry::new(stdio_groups(&role));
            for spec in registry.all() {
                let schema = &spec.tool.input_schema;
                assert_eq!(schema.get("type"), Some(&serde_json::json!("object")), "{}", spec.name());
                assert!(spec.tool.description.as_deref().is_some_and(|text| !text.is_empty()));
            }
        }
    }

    #[test]
    fn every_tool_has_an_output_schema_whose_references_resolve() {
        fn references(value: &serde_json::Value, found: &mut Vec<String>) {
            match value {
                serde_json::Value::Object(fields) => {
                    if let Some(serde_json::Value::String(reference)) = fields.get("$ref") {
                        found.push(reference.clone());
                    }
                    fields.values().for_each(|value| references(value, found));
                }
                serde_json::Value::Array(items) => items.iter().for_each(|value| references(value, found)),
                _ => {}
            }
        }
        let trigger_session = Registry::new(stdio_groups(&InboxRole::Trigger { name: "nightly".into() }));
        let registry = Registry::new(stdio_groups(&InboxRole::Worker));
        for spec in registry.all().chain(trigger_session.all()) {
            let schema =
                spec.tool.output_schema.as_ref().unwrap_or_else(|| panic!("{} has none", spec.name()));
            let schema = serde_json::Value::Object(schema.as_ref().clone());
            assert_eq!(schema["required"], serde_json::json!(["yourAgentId", "success", "message"]));
            let mut found = Vec::new();
            references(&schema, &mut found);
            for reference in found {
                let name = reference.strip_prefix("#/$defs/").unwrap_or_else(|| panic!("{reference}"));
                assert!(schema["$defs"].get(name).is_some(), "{}: {reference} is not defined", spec.name());
            }
            // Every tool declares its result: a closed object, so an undeclared field fails.
            assert_eq!(schema["additionalProperties"], false, "{} does not declare its result", spec.name());
            // JSON Schema 2020-12, not OpenAPI: `examples`, never utoipa's `example`.
            let text = serde_json::to_string(&schema).unwrap();
            assert!(!text.contains("\"example\":"), "{}: {text}", spec.name());
        }
        let details = registry.find("get-task-details").unwrap().tool.output_schema.clone().unwrap();
        assert!(details["properties"]["task"].get("$ref").is_some(), "{details:?}");
    }

    #[test]
    fn status_schema_lists_every_status() {
        let mut generator = SchemaGenerator::default();
        let schema = task_status_schema(&mut generator);
        let names = schema.get("enum").and_then(|names| names.as_array()).map(Vec::len);
        assert_eq!(names, Some(TaskStatus::ALL.len()));
    }
}
