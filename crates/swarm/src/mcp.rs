//! `swarm mcp`: the MCP tools over stdio, for an agent CLI to start as its MCP server.
//! It opens the same database as `swarm serve` (both may run at once) and needs no hub.

use anyhow::{Context, bail};
use clap::Args;
use swarm_domain::id::{AgentId, TaskId};
use swarm_mcp::{InboxRole, StdioOptions};
use swarm_service::{AgentAuth, Service};

use swarm_hub::{DatabaseArgs, init_logging, open_store, shutdown_signal};

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// The agent this process speaks for, as X-Agent-ID does over HTTP. Without it,
    /// join-swarm registers a new agent and the process speaks for that one.
    #[arg(long, env = "AGENT_ID", value_name = "UUID")]
    agent_id: Option<String>,
    /// The agent's own token, needed when the database's hub runs with AGENT_AUTH=token:
    /// this process then speaks for the token's agent only (`swarm agent token create`)
    #[arg(long, env = "AGENT_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    agent_token: Option<String>,
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
    // The hub's identity mode and lease policy, not this process's defaults.
    let (service, settings) = Service::from_hub_settings(store)
        .await
        .context("cannot read the hub's settings from its database")?;
    let agent_id = match service.agent_auth() {
        AgentAuth::Header => agent_id,
        AgentAuth::Token => Some(token_agent(&service, args.agent_token.as_deref(), agent_id).await?),
    };
    if settings.is_none() {
        tracing::info!("no hub has run on this database yet: header mode, and expired claims wait for a hub");
    }
    tracing::info!(database = %description, agent = ?agent_id, role = ?inbox_role, "serving MCP on stdio");
    // A waiting poll-task wakes when another process (the hub, another `swarm mcp`) adds
    // work. Expired claims are the hub's to return, on the policy it was given.
    let _watching = service.start_watching_other_processes();
    let options = StdioOptions { agent_id, inbox_role, session_task, hub_url: args.hub_url };
    tokio::select! {
        served = swarm_mcp::serve_stdio(service, options) => served.context("the MCP stdio transport failed")?,
        () = shutdown_signal() => {},
    }
    Ok(())
}

/// In token mode the stdio caller is whoever its token proves, as over HTTP: a process
/// that can open the database is not thereby any agent it names.
async fn token_agent(
    service: &Service,
    token: Option<&str>,
    named: Option<AgentId>,
) -> anyhow::Result<AgentId> {
    let Some(token) = token.map(str::trim).filter(|token| !token.is_empty()) else {
        bail!(
            "this database's hub runs with AGENT_AUTH=token: `swarm mcp` needs the agent's token in \
             AGENT_TOKEN (or --agent-token), created with `swarm agent token create <agent>`"
        );
    };
    let Some(own) = service.agent_token_verify(token).await.context("cannot check AGENT_TOKEN")? else {
        bail!(
            "AGENT_TOKEN is not a live agent token of this hub (revoked, or another hub's): create one with `swarm agent token create <agent>`"
        );
    };
    match named {
        Some(named) if named != own => {
            bail!(
                "AGENT_TOKEN belongs to agent {own}, not to AGENT_ID {named}: give the token of {named}, or unset AGENT_ID"
            )
        }
        _ => Ok(own),
    }
}
