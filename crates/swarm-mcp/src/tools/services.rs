//! The services registry over MCP, with the reference's tool names:
//! `register-service`, `list-services`, `unregister-service`, `update-service-status`.
//! A service belongs to the agent that registers it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use swarm_domain::{
    id::AgentId,
    registry::{ServiceDraft, ServiceStatus},
};
use swarm_service::{ServiceFilter, ServiceRef};
use uuid::Uuid;

use crate::{
    context::ToolCall,
    registry::{Audience, ToolSpec},
    reply::{Answer, Outcome, Reply},
};

const STATUS_PATTERN: &str = "^(starting|healthy|unhealthy|stopped)$";

pub fn group() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "register-service",
            "Register a long-running service you started (e.g. a PM2 process) so others can find it and \
             a process manager can restart it: script (required), name (default: your agent id; unique \
             among your services), port (default 3000), healthCheckPath (default /health), cwd, \
             interpreter, args, env, metadata. Registering the same name again updates it. It starts \
             as starting: mark it healthy with update-service-status.",
            Audience::Agents,
            register_service,
        ),
        ToolSpec::new(
            "list-services",
            "Services agents registered; filter by agentId, name (part of it), status. includeOwn false \
             leaves out yours.",
            Audience::Anyone,
            list_services,
        )
        .read_only(),
        ToolSpec::new(
            "unregister-service",
            "Unregister one of your services (serviceId, or its name).",
            Audience::Agents,
            unregister_service,
        ),
        ToolSpec::new(
            "update-service-status",
            "Set the status of one of your services (serviceId, or its name): starting, healthy, \
             unhealthy or stopped.",
            Audience::Agents,
            update_service_status,
        ),
    ]
}

fn parse_status(text: &str) -> Result<ServiceStatus, Reply> {
    ServiceStatus::parse(text).map_err(|error| Reply::refused(error.0))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RegisterArguments {
    /// What a process manager runs to (re)start it.
    script: String,
    /// 1 to 50 characters, unique among your services; default: your agent id.
    name: Option<String>,
    /// Default 3000.
    #[schemars(range(min = 1, max = 65535))]
    port: Option<i64>,
    description: Option<String>,
    url: Option<String>,
    /// Default /health.
    health_check_path: Option<String>,
    cwd: Option<String>,
    /// e.g. node, bun, python3.
    interpreter: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    metadata: Option<serde_json::Map<String, Value>>,
}

async fn register_service(call: ToolCall, args: RegisterArguments) -> Outcome<ServiceOutput> {
    let draft = ServiceDraft {
        name: args.name,
        port: args.port,
        description: args.description,
        url: args.url,
        health_check_path: args.health_check_path,
        script: args.script,
        cwd: args.cwd,
        interpreter: args.interpreter,
        args: args.args,
        env: args.env,
        metadata: args.metadata.map(Value::Object),
    };
    let service = call.service.service_register(call.caller(), draft).await?;
    let message = format!(
        "registered service {:?} on port {}; status {}: use update-service-status to mark it healthy",
        service.name,
        service.port,
        service.status.as_str()
    );
    Ok(Answer::new(message, ServiceOutput { service }))
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListArguments {
    agent_id: Option<Uuid>,
    /// Part of the name.
    name: Option<String>,
    #[schemars(regex(pattern = STATUS_PATTERN))]
    status: Option<String>,
    /// Default true.
    include_own: Option<bool>,
}

async fn list_services(call: ToolCall, args: ListArguments) -> Outcome<ServiceListOutput> {
    let filter = ServiceFilter {
        status: args.status.as_deref().map(parse_status).transpose()?,
        agent_id: args.agent_id.map(AgentId::from_uuid),
        name: args.name,
    };
    let mut services = call.service.service_list(call.caller(), filter).await?;
    if args.include_own == Some(false)
        && let Some(me) = call.agent_id()
    {
        services.retain(|service| service.agent_id != me);
    }
    Ok(Answer::new(format!("{} service(s)", services.len()), ServiceListOutput { services }))
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ServiceRefArguments {
    service_id: Option<Uuid>,
    /// The name of one of your services (instead of serviceId).
    name: Option<String>,
}

impl ServiceRefArguments {
    fn reference(&self) -> ServiceRef {
        ServiceRef { id: self.service_id.map(|id| id.to_string()), name: self.name.clone() }
    }
}

async fn unregister_service(call: ToolCall, args: ServiceRefArguments) -> Outcome<ServiceOutput> {
    let service = call.service.service_unregister(call.caller(), &args.reference()).await?;
    Ok(Answer::new(format!("unregistered service {:?}", service.name), ServiceOutput { service }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StatusArguments {
    service_id: Option<Uuid>,
    /// The name of one of your services (instead of serviceId).
    name: Option<String>,
    #[schemars(regex(pattern = STATUS_PATTERN))]
    status: String,
}

async fn update_service_status(call: ToolCall, args: StatusArguments) -> Outcome<ServiceOutput> {
    let status = parse_status(&args.status)?;
    let which = ServiceRef { id: args.service_id.map(|id| id.to_string()), name: args.name };
    let service = call.service.service_set_status(call.caller(), &which, status).await?;
    let message = format!("service {:?} is {}", service.name, service.status.as_str());
    Ok(Answer::new(message, ServiceOutput { service }))
}

// The result fields of the service tools, for their output schemas.
#[derive(Serialize, utoipa::ToSchema)]
struct ServiceOutput {
    service: swarm_domain::registry::RegisteredService,
}

#[derive(Serialize, utoipa::ToSchema)]
struct ServiceListOutput {
    services: Vec<swarm_domain::registry::RegisteredService>,
}
