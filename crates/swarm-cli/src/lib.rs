//! Client commands (`swarm task`, `swarm agent`, `swarm mail`, `swarm stats`): they speak only HTTP
//! to a hub, through `swarm-client`, like any third-party client would.
//!
//! Every command takes the connection flags of [`HubArgs`] and `--json`, which prints
//! the hub's answer as pretty JSON for scripts instead of the human summary.

mod agent;
mod mail;
mod output;
mod steer;
mod task;
mod tokens;
mod trigger;

use std::collections::HashMap;

use anyhow::{Context, anyhow, bail};
use swarm_client::{Client, ClientConfig, ClientError, HubFlags};
use swarm_domain::id::AgentId;

pub use agent::{AgentCommand, StatsArgs, run_agent, run_stats};
pub use mail::{MailCommand, run_mail};
pub use task::{TaskCommand, run_task};
pub use trigger::{TriggerCommand, run_trigger};

/// Help line of every command's `--json` flag.
const JSON_HELP: &str = "Print the hub's answer as pretty JSON (for scripts) instead of a summary";

/// How to reach the hub, and as whom, for every client command.
#[derive(Debug, Clone, clap::Args)]
pub struct HubArgs {
    #[command(flatten)]
    hub: HubFlags,
    /// Act as this agent (sent as X-Agent-ID): the hub checks that agent's rights, e.g.
    /// to finish a task assigned to it, and records it as the creator of new tasks
    #[arg(long, env = "AGENT_ID", value_name = "UUID", help_heading = "Hub connection")]
    agent_id: Option<String>,
}

impl HubArgs {
    /// The client these flags describe. Empty environment variables count as unset.
    fn connect(&self) -> anyhow::Result<Client> {
        let agent_id = match self.agent_id.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => Some(
                AgentId::parse(text)
                    .context("--agent-id (or AGENT_ID) must be the UUID of a registered agent")?,
            ),
        };
        let config = ClientConfig {
            base_url: self.hub.base_url().to_string(),
            api_key: self.hub.key_or_local(),
            agent_id,
        };
        Ok(Client::new(config)?)
    }
}

/// One agent by name or id: `swarm agent show` and `swarm agent token create|list`.
#[derive(Debug, clap::Args)]
pub struct AgentShowArgs {
    /// The agent's name or id
    #[arg(value_name = "AGENT")]
    pub(crate) agent: String,
    #[arg(long, help = JSON_HELP)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) hub: HubArgs,
}

/// An agent named by UUID or by name. A UUID is passed on as is (the hub says if it
/// is unknown); a name is looked up among the registered agents.
async fn resolve_agent(client: &Client, name_or_id: &str) -> anyhow::Result<AgentId> {
    let name_or_id = name_or_id.trim();
    if let Ok(id) = AgentId::parse(name_or_id) {
        return Ok(id);
    }
    let agents =
        client.list_agents(false).await.with_context(|| format!("cannot look up agent {name_or_id:?}"))?;
    let exact: Vec<AgentId> =
        agents.agents.iter().filter(|view| view.agent.name == name_or_id).map(|view| view.agent.id).collect();
    if let [id] = exact[..] {
        return Ok(id);
    }
    let folded: Vec<AgentId> = agents
        .agents
        .iter()
        .filter(|view| view.agent.name.eq_ignore_ascii_case(name_or_id))
        .map(|view| view.agent.id)
        .collect();
    match folded[..] {
        [id] => Ok(id),
        [] => bail!("no agent is named {name_or_id:?}; see the names and ids with `swarm agent list`"),
        _ => bail!("several agents are named {name_or_id:?}; give the agent's id (see `swarm agent list`)"),
    }
}

/// Names of the registered agents, to show names rather than ids. Purely cosmetic:
/// when the hub does not answer, ids are shown instead.
async fn agent_names(client: &Client) -> HashMap<AgentId, String> {
    match client.list_agents(false).await {
        Ok(list) => list.agents.into_iter().map(|view| (view.agent.id, view.agent.name)).collect(),
        Err(_) => HashMap::new(),
    }
}

/// A failed hub call as a message that says what was being done, what the hub said
/// and, for refusals the user can act on, what to do next.
fn hub_failure(action: String, err: ClientError, tip: impl FnOnce(u16) -> Option<String>) -> anyhow::Error {
    match err.status().and_then(|status| tip(status.as_u16())) {
        Some(tip) => anyhow!("{action}: {err}; {tip}"),
        None => anyhow::Error::new(err).context(action),
    }
}
