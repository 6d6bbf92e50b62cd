//! `swarm agent list|show` and `swarm stats`.

use std::collections::HashMap;

use anyhow::Context;
use clap::{Args, Subcommand};
use swarm_domain::{agent::Agent, id::AgentId, stats::Stats};

use super::{
    AgentShowArgs, HubArgs, JSON_HELP, hub_failure,
    output::{self, TASK_HEADERS},
    resolve_agent,
    tokens::TokenCommand,
};

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// List the registered agents, by name
    ///
    /// Shows id, name, status, lead or worker, tasks in progress out of the most it
    /// may run at once, and role. --json prints `{agents}`.
    List(AgentListArgs),
    /// Show an agent's profile and its tasks
    Show(AgentShowArgs),
    /// Agent tokens, for a hub with AGENT_AUTH=token: create (shown once), list, revoke
    #[command(subcommand)]
    Token(TokenCommand),
}

#[derive(Debug, Args)]
pub struct AgentListArgs {
    /// Include each agent's tasks in the --json output (the table stays the same)
    #[arg(long)]
    tasks: bool,
    #[arg(long, help = JSON_HELP)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) hub: HubArgs,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    #[arg(long, help = JSON_HELP)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) hub: HubArgs,
}

pub async fn run_agent(command: AgentCommand) -> anyhow::Result<()> {
    match command {
        AgentCommand::List(args) => agent_list(args).await,
        AgentCommand::Show(args) => agent_show(args).await,
        AgentCommand::Token(command) => super::tokens::run(command).await,
    }
}

pub async fn run_stats(args: StatsArgs) -> anyhow::Result<()> {
    let client = args.hub.connect()?;
    let stats = client.stats().await.context("cannot read the hub's stats")?;
    if args.json {
        return output::print_json(&stats);
    }
    output::emit(&stats_summary(&stats))
}

async fn agent_list(args: AgentListArgs) -> anyhow::Result<()> {
    let client = args.hub.connect()?;
    let list = client.list_agents(args.tasks).await.context("cannot list agents")?;
    if args.json {
        return output::print_json(&list);
    }
    if list.agents.is_empty() {
        return output::emit("no agents registered\n");
    }
    let rows: Vec<Vec<String>> = list.agents.iter().map(|view| agent_row(&view.agent)).collect();
    output::emit(&output::table(&["ID", "NAME", "STATUS", "KIND", "TASKS", "ROLE"], &rows))
}

async fn agent_show(args: AgentShowArgs) -> anyhow::Result<()> {
    let client = args.hub.connect()?;
    let id = resolve_agent(&client, &args.agent).await?;
    let view = client.get_agent(id, true).await.map_err(|err| {
        let tip =
            |status| (status == 404).then(|| "see the registered agents with `swarm agent list`".to_string());
        hub_failure(format!("cannot show agent {}", args.agent.trim()), err, tip)
    })?;
    if args.json {
        return output::print_json(&view);
    }
    let mut text = agent_fields(&view.agent);
    let tasks = view.tasks.unwrap_or_default();
    if !tasks.is_empty() {
        let names: HashMap<AgentId, String> = HashMap::from([(view.agent.id, view.agent.name.clone())]);
        text.push_str("\ntasks:\n");
        text.push_str(&output::table(&TASK_HEADERS, &output::task_rows(&tasks, &names)));
    }
    output::emit(&text)
}

fn agent_kind(agent: &Agent) -> &'static str {
    if agent.is_lead { "lead" } else { "worker" }
}

fn agent_row(agent: &Agent) -> Vec<String> {
    vec![
        agent.id.to_string(),
        output::excerpt(&agent.name, 30),
        agent.status.as_str().to_string(),
        agent_kind(agent).to_string(),
        format!("{}/{}", agent.capacity.current, agent.capacity.max),
        output::excerpt(agent.role.as_deref().unwrap_or_default(), 40),
    ]
}

fn agent_fields(agent: &Agent) -> String {
    let capacity = &agent.capacity;
    output::fields(&[
        ("id", agent.id.to_string()),
        ("name", agent.name.clone()),
        ("kind", agent_kind(agent).to_string()),
        ("status", agent.status.as_str().to_string()),
        (
            "capacity",
            format!("{} in progress of {} ({} free)", capacity.current, capacity.max, capacity.available),
        ),
        ("role", agent.role.clone().unwrap_or_default()),
        ("capabilities", agent.capabilities.join(", ")),
        ("registered", agent.created_at.to_string()),
        ("updated", agent.last_updated_at.to_string()),
        ("description", agent.description.clone().unwrap_or_default()),
    ])
}

fn stats_summary(stats: &Stats) -> String {
    let agents = &stats.agents;
    let tasks = &stats.tasks;
    let task_counts = [
        ("backlog", tasks.backlog),
        ("unassigned", tasks.unassigned),
        ("offered", tasks.offered),
        ("reviewing", tasks.reviewing),
        ("pending", tasks.pending),
        ("in_progress", tasks.in_progress),
        ("paused", tasks.paused),
        ("completed", tasks.completed),
        ("failed", tasks.failed),
        ("cancelled", tasks.cancelled),
    ];
    let task_counts: Vec<String> = task_counts.iter().map(|(status, n)| format!("{status} {n}")).collect();
    format!(
        "agents  {} (idle {}, busy {}, offline {})\ntasks   {} ({})\n",
        agents.total,
        agents.idle,
        agents.busy,
        agents.offline,
        tasks.total,
        task_counts.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_summary_names_every_status() {
        let text = stats_summary(&Stats::default());
        for status in swarm_domain::task::TaskStatus::ALL {
            assert!(text.contains(status.as_str()), "{status} missing from {text}");
        }
        assert!(text.starts_with("agents  0 (idle 0, busy 0, offline 0)\n"));
    }
}
