//! `steer-task`: words for the agent working a task, the MCP twin of
//! `POST /api/tasks/{id}/steer` (issue 40).

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use swarm_domain::{
    id::TaskId,
    steering::{OnUnsupported, SteerMode, SteerOutcome, SteerResult},
};
use uuid::Uuid;

use crate::{
    context::ToolCall,
    registry::{Audience, ToolSpec},
    reply::{Answer, Outcome, Reply},
};

/// Where steering sent over MCP says it came from.
const MCP_SOURCE: &str = "mcp";

pub fn group() -> Vec<ToolSpec> {
    vec![ToolSpec::new(
        "steer-task",
        "Send words to the agent working a task while it works: mode steer (at its next tool call) \
         or queue (default: when its turn ends). The lead may steer any task, a worker only tasks it \
         created. A finished task takes no steering: with onUnsupported degrade (default) the message \
         becomes a follow-up task for the same agent, with fail the call is refused.",
        Audience::Agents,
        steer_task,
    )]
}

fn mode_schema(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = SteerMode::ALL.iter().map(SteerMode::as_str).collect();
    json_schema!({ "type": "string", "enum": names })
}

fn on_unsupported_schema(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = OnUnsupported::ALL.iter().map(OnUnsupported::as_str).collect();
    json_schema!({ "type": "string", "enum": names })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SteerTaskArguments {
    task_id: Uuid,
    /// What the agent should hear (at most 20,000 characters).
    message: String,
    /// steer or queue (default queue).
    #[serde(default)]
    #[schemars(schema_with = "mode_schema")]
    mode: Option<String>,
    /// degrade (default) or fail.
    #[serde(default)]
    #[schemars(schema_with = "on_unsupported_schema")]
    on_unsupported: Option<String>,
}

async fn steer_task(call: ToolCall, args: SteerTaskArguments) -> Outcome<SteerResult> {
    let refused = |error: swarm_domain::Invalid| Reply::refused(error.0);
    let mode = args.mode.as_deref().map(SteerMode::parse).transpose().map_err(refused)?;
    let on_unsupported =
        args.on_unsupported.as_deref().map(OnUnsupported::parse).transpose().map_err(refused)?;
    let task_id = TaskId::from_uuid(args.task_id);
    let result = call
        .service
        .steer_task(
            call.caller(),
            task_id,
            &args.message,
            mode.unwrap_or(SteerMode::Queue),
            on_unsupported.unwrap_or(OnUnsupported::Degrade),
            MCP_SOURCE,
        )
        .await?;
    let message = match (result.outcome, result.promoted_task_id) {
        (SteerOutcome::Promoted, Some(follow_up)) => {
            format!("task {task_id} is finished: the message became the follow-up task {follow_up}")
        }
        (SteerOutcome::Steered, _) => {
            "steering recorded: the agent sees it at its next tool call".to_string()
        }
        _ => "steering recorded: the agent sees it when its current turn ends".to_string(),
    };
    Ok(Answer::new(message, result))
}
