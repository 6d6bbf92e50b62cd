//! MCP over stdio, for `swarm mcp`: the process speaks for one agent and opens the
//! store itself, so it works with no hub running.

use std::sync::Arc;

use rmcp::{ServiceExt, service::ServerInitializeError, transport::stdio};
use swarm_domain::id::{AgentId, TaskId};
use swarm_service::{AgentAuth, Authenticated, Credential, Service};

use crate::{
    context::Identity,
    registry::Registry,
    server::McpServer,
    tools::{self, InboxRole},
};

#[derive(Debug, Clone)]
pub struct StdioOptions {
    /// The agent this process speaks for; without one, `join-swarm` picks it.
    pub agent_id: Option<AgentId>,
    pub inbox_role: InboxRole,
    /// The task whose run started this process (the runner's `SWARM_SESSION_TASK_ID` or
    /// `TASK_ID`): a trigger session's tasks created here are awaited by it.
    pub session_task: Option<TaskId>,
    /// The hub's URL as a webhook's sender reaches it: `trigger_create` answers the
    /// absolute `webhook_url` under it.
    pub hub_url: String,
}

/// Serve MCP on stdin/stdout until the client closes stdin.
pub async fn serve_stdio(service: Service, options: StdioOptions) -> std::io::Result<()> {
    crate::context::set_hub_url(&options.hub_url);
    let registry = Arc::new(
        Registry::new(tools::stdio_groups(&options.inbox_role)).with_capabilities(&tools::hub_capabilities()),
    );
    // Token mode: the caller's `swarm mcp` checked its token before serving (it names
    // the agent); header mode trusts the process, as it trusts `X-Agent-ID`.
    let proved = match (service.agent_auth(), options.agent_id) {
        (AgentAuth::Token, Some(agent)) => {
            Authenticated { mode: AgentAuth::Token, credential: Credential::Agent(agent) }
        }
        (AgentAuth::Header, _) => Authenticated { mode: AgentAuth::Header, credential: Credential::Operator },
        (AgentAuth::Token, None) => {
            return Err(std::io::Error::other(
                "the hub runs with AGENT_AUTH=token: a stdio process speaks only for the agent whose token it checked",
            ));
        }
    };
    let identity = Identity::process(options.agent_id, options.session_task, proved);
    let server = McpServer::new(service, identity, registry);
    let running = match server.serve(stdio()).await {
        Ok(running) => running,
        // The client went away before choosing a lifecycle (after `server/discover`, a
        // `ping`, or nothing at all): a normal end, not a failure.
        Err(ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
        Err(err) => return Err(std::io::Error::other(err)),
    };
    running.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}
