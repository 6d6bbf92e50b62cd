//! The tool groups. Each module is one feature's tools, each tool a thin adapter over
//! the service function its REST twin calls.

mod agents;
mod chat;
mod epics;
mod inbox;
mod mail;
mod poll;
mod services;
mod slack;
mod slack_files;
mod tasks;
mod triggers;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use swarm_domain::task::TaskStatus;

use crate::registry::ToolSpec;

pub use inbox::InboxRole;

/// The tools of the hub, served over HTTP and stdio alike.
pub fn hub_groups() -> Vec<Vec<ToolSpec>> {
    vec![
        agents::group(),
        tasks::group(),
        poll::group(),
        slack::group(),
        slack_files::group(),
        chat::group(),
        mail::group(),
        triggers::schedule_group(),
        epics::group(),
        services::group(),
    ]
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

/// A task status, as a JSON Schema enum of CONTRACT.md's names.
fn task_status_schema(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = TaskStatus::ALL.iter().map(TaskStatus::as_str).collect();
    json_schema!({ "type": "string", "enum": names })
}

fn parse_status(text: &str) -> Result<TaskStatus, crate::reply::Reply> {
    TaskStatus::parse(text).map_err(|err| crate::reply::Reply::refused(err.0))
}

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
    fn status_schema_lists_every_status() {
        let mut generator = SchemaGenerator::default();
        let schema = task_status_schema(&mut generator);
        let names = schema.get("enum").and_then(|names| names.as_array()).map(Vec::len);
        assert_eq!(names, Some(TaskStatus::ALL.len()));
    }
}
