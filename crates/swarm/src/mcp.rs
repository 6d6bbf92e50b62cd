//! `swarm mcp`: the MCP tools over stdio, for an agent CLI to start as its MCP server.
//! It opens the same database as `swarm serve` (both may run at once) and needs no hub.

use std::time::Duration;

use anyhow::Context;
use clap::Args;
use swarm_domain::id::{AgentId, TaskId};
use swarm_mcp::{InboxRole, StdioOptions};
use swarm_service::Service;

use swarm_hub::{DatabaseArgs, init_logging, open_store, shutdown_signal};

/// How often the rescuer runs: `swarm serve`'s default.
const RESCUE_INTERVAL: Duration = Duration::from_secs(5);

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// The agent this process speaks for, as X-Agent-ID does over HTTP. Without it,
    /// join-swarm registers a new agent and the process speaks for that one.
    #[arg(long, env = "AGENT_ID", value_name = "UUID")]
    agent_id: Option<String>,
    /// Serve the Inbox-MCP tools of the trigger session NAME (task_create, task_get,
    /// task_update, task_cancel) instead of the worker's (get_next_task, task_complete,
    /// task_list, task_get, inbox_stats).
    #[arg(long, env = "ATLAS_TRIGGER", value_name = "NAME")]
    trigger: Option<String>,
    /// The task whose run started this process: a trigger session's tasks created here
    /// are awaited by it, and its result resumes that session. The runner sets
    /// SWARM_SESSION_TASK_ID (and TASK_ID for a task's run, read when the former is unset).
    #[arg(long, env = "SWARM_SESSION_TASK_ID", value_name = "UUID")]
    session_task: Option<String>,
    /// Log format on stderr (stdout carries the protocol): text or json. The level is
    /// set with RUST_LOG (default info, rmcp's session chatter at warn).
    #[arg(long, env = "LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// The hub's URL as webhook senders reach it, for the absolute webhook_url that
    /// trigger_create answers (the runner sets MCP_BASE_URL for its agents)
    #[arg(long, env = "MCP_BASE_URL", default_value = "http://localhost:3013", value_name = "URL")]
    hub_url: String,
}

pub async fn run(args: McpArgs) -> anyhow::Result<()> {
    // rmcp logs every session's start and end at info: noise in an agent CLI's log.
    init_logging(&args.log_format, "info,rmcp=warn,sqlx=warn");
    let agent_id = match args.agent_id.as_deref().map(str::trim).filter(|id| !id.is_empty()) {
        Some(id) => Some(AgentId::parse(id).context("--agent-id (AGENT_ID) must be an agent's UUID")?),
        None => None,
    };
    let inbox_role = match args.trigger.filter(|name| !name.trim().is_empty()) {
        Some(name) => InboxRole::Trigger { name: name.trim().to_string() },
        None => InboxRole::Worker,
    };
    let session_task = args
        .session_task
        .or_else(|| std::env::var("TASK_ID").ok())
        .filter(|id| !id.trim().is_empty())
        .map(|id| TaskId::parse(id.trim()).context("SWARM_SESSION_TASK_ID (TASK_ID) must be a task's UUID"))
        .transpose()?;
    let (store, description) = open_store(&args.database).await?;
    tracing::info!(database = %description, agent = ?agent_id, role = ?inbox_role, "serving MCP on stdio");
    let service = Service::new(store);
    // With no hub running, this process returns expired claims itself; and a waiting
    // poll-task wakes when another process (the hub, another `swarm mcp`) adds work.
    let _background = service.start_background(RESCUE_INTERVAL);
    let options = StdioOptions { agent_id, inbox_role, session_task, hub_url: args.hub_url };
    tokio::select! {
        served = swarm_mcp::serve_stdio(service, options) => served.context("the MCP stdio transport failed")?,
        () = shutdown_signal() => {},
    }
    Ok(())
}
