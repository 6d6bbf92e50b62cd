//! `swarm-bench tools`: what the hub adds to every model call an agent makes (issue 43). For
//! each role (a worker, the lead) on a hub with the default tool groups and on one that
//! offers every opt-in group (`CAPABILITIES`): the MCP `tools/list` answer that role gets
//! from a real hub over HTTP with rmcp's client, and the first model request of a task run by
//! the real, pinned agent CLIs (`tools_cli`), weighed as the CLI sent it.

use std::collections::HashMap;

use anyhow::Context;
use clap::Args;
use rmcp::{
    ServiceExt,
    model::ClientConfig,
    transport::{StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig},
};
use serde::Serialize;
use serde_json::json;

use crate::{
    hub::{Backend, Health, Http, SpawnedHub, Target},
    report::thousands,
    tools_cli::{AgentCli, FirstRequest},
};

/// The long help of `swarm-bench tools`.
pub const TOOLS_ABOUT: &str = "Measure what the hub adds to every model call: its tool definitions.\n\n\
    Starts two hubs (`swarm serve` on scratch SQLite files): one with the default tool groups, one \
    with every opt-in group offered (CAPABILITIES naming them all). On each, for a worker and for \
    the lead: the bytes of the MCP `tools/list` answer (the result as compact JSON, as rmcp's \
    client received it over Streamable HTTP), and, for each --cli, the first model request of a \
    task run: `swarm connect` sets up a project, `swarm worker` or `swarm lead` runs the real CLI \
    (tools/agent-clis, scripts/install-agent-clis) on a task assigned to the agent, against the \
    scripted model, which records the request. Reported: the whole request body, its tool \
    definitions, and swarm's among them (tools named `mcp__...`). A CLI that defers MCP tools \
    (tool search) sends their names only: those are counted as named, not weighed. Progress goes \
    to stderr, a Markdown table (or --json) to stdout.";

#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// The agent CLIs whose first model request is weighed (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "claude,codex")]
    cli: Vec<AgentCli>,
    /// Only the MCP `tools/list` answers: start no agent CLI.
    #[arg(long)]
    no_cli: bool,
    /// Print the report as JSON instead of Markdown.
    #[arg(long)]
    json: bool,
}

/// Which tool groups a hub offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
enum Groups {
    /// The role's own set: no `CAPABILITIES`.
    Default,
    /// `CAPABILITIES` naming every opt-in group.
    Every,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolsReport {
    /// The hub's version.
    version: String,
    /// The opt-in groups the `every` rows offer.
    capabilities: Vec<&'static str>,
    clis: Vec<CliVersion>,
    rows: Vec<RoleRow>,
}

/// A CLI and what its `--version` said.
#[derive(Debug, Serialize)]
struct CliVersion {
    cli: AgentCli,
    version: String,
}

/// One role on one hub.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RoleRow {
    /// `worker` or `lead`.
    role: &'static str,
    groups: Groups,
    /// Tools in the MCP `tools/list` answer.
    tools_list_tools: usize,
    /// That answer's result (`{"tools": [...]}`) as compact JSON.
    tools_list_bytes: usize,
    /// Of it, what a CLI passes on to its model: each tool's name, description and input
    /// schema (not its output schema or annotations), as compact JSON.
    tools_list_model_bytes: usize,
    first_requests: Vec<FirstRequest>,
}

pub async fn run(args: ToolsArgs) -> anyhow::Result<()> {
    let clis = if args.no_cli { Vec::new() } else { args.cli.clone() };
    let capabilities: Vec<&'static str> = swarm_mcp::CAPABILITIES.iter().map(|group| group.name).collect();
    let every = capabilities.join(",");
    let mut rows = Vec::new();
    let mut version = String::new();
    for (groups, env) in [(Groups::Default, vec![]), (Groups::Every, vec![("CAPABILITIES", every.as_str())])]
    {
        eprintln!("tools: starting a hub on a scratch SQLite database, tool groups: {groups:?}");
        let hub = SpawnedHub::start_with_env(&Backend::Sqlite, &env).await?;
        let outcome = measure_hub(hub.target(), groups, &clis).await;
        hub.stop().await;
        let (health, measured) = outcome?;
        version = health.version;
        rows.extend(measured);
    }
    let mut described = Vec::new();
    for cli in clis {
        described.push(CliVersion { cli, version: cli.version().await });
    }
    let report = ToolsReport { version, capabilities, clis: described, rows };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.markdown());
    }
    Ok(())
}

async fn measure_hub(
    target: &Target,
    groups: Groups,
    clis: &[AgentCli],
) -> anyhow::Result<(Health, Vec<RoleRow>)> {
    let health: Health = Http::new(target).get("/health", None).await.context("GET /health")?;
    let mut rows = Vec::new();
    for role in ["worker", "lead"] {
        // One agent per role, which each CLI's runner then runs as: a hub has one lead.
        let agent = uuid::Uuid::new_v4().to_string();
        eprintln!("tools [{groups:?}]: {role}: MCP tools/list");
        let ToolsList {
            tools: tools_list_tools,
            bytes: tools_list_bytes,
            model_bytes: tools_list_model_bytes,
        } = tools_list(target, &agent, role == "lead")
            .await
            .with_context(|| format!("the {role}'s tools/list"))?;
        let mut first_requests = Vec::new();
        for &cli in clis {
            eprintln!("tools [{groups:?}]: {role}: the first model request of a {} run", cli.name());
            let request = crate::tools_cli::first_request(target, cli, role, &agent)
                .await
                .with_context(|| format!("the first model request of the {role}'s {} run", cli.name()))?;
            first_requests.push(request);
        }
        rows.push(RoleRow {
            role,
            groups,
            tools_list_tools,
            tools_list_bytes,
            tools_list_model_bytes,
            first_requests,
        });
    }
    Ok((health, rows))
}

/// What `tools/list` offers one agent.
struct ToolsList {
    tools: usize,
    /// The answer's result as compact JSON.
    bytes: usize,
    /// Each tool's name, description and input schema.
    model_bytes: usize,
}

/// The tools `tools/list` offers `agent`, registered as a worker or the lead.
async fn tools_list(target: &Target, agent: &str, is_lead: bool) -> anyhow::Result<ToolsList> {
    let name = format!("tools-{}", &agent[..8]);
    let _: serde_json::Value = Http::new(target)
        .post("/api/agents", Some(agent), &json!({"name": name, "isLead": is_lead}))
        .await
        .context("registering the agent")?;
    let mut headers = HashMap::new();
    headers.insert(
        reqwest::header::HeaderName::from_static("x-agent-id"),
        reqwest::header::HeaderValue::from_str(agent)?,
    );
    let url = format!("{}/mcp", target.base_url());
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone()).custom_headers(headers);
    if let Some(key) = target.api_key() {
        config = config.auth_header(key.to_string());
    }
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    let client = ClientConfig::default().serve(transport).await.with_context(|| format!("MCP to {url}"))?;
    let tools = client.list_all_tools().await;
    let _ = client.cancel().await;
    let tools = tools.context("tools/list")?;
    let bytes = json!({"tools": tools}).to_string().len();
    let model_bytes = tools
        .iter()
        .map(|tool| {
            let offered =
                json!({"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema});
            offered.to_string().len()
        })
        .sum();
    Ok(ToolsList { tools: tools.len(), bytes, model_bytes })
}

impl ToolsReport {
    pub(crate) fn markdown(&self) -> String {
        let mut out = format!(
            "## What the hub adds to every model call (swarm {})\n\n`every`: CAPABILITIES={}\n",
            self.version,
            self.capabilities.join(",")
        );
        for CliVersion { cli, version } in &self.clis {
            out.push_str(&format!("{}: {version}\n", cli.name()));
        }
        out.push_str("\n| role | groups | MCP `tools/list` |");
        let mut rule = String::from("\n|---|---|---|");
        for CliVersion { cli, .. } in &self.clis {
            out.push_str(&format!(
                " {0}: first request | {0}: its tool definitions | {0}: swarm's (`mcp__`) |",
                cli.name()
            ));
            rule.push_str("---|---|---|");
        }
        out.push_str(&rule);
        out.push('\n');
        for row in &self.rows {
            let groups = match row.groups {
                Groups::Default => "default",
                Groups::Every => "every",
            };
            out.push_str(&format!(
                "| {} | {groups} | {} tools, {} bytes ({} without output schemas) |",
                row.role,
                row.tools_list_tools,
                thousands(row.tools_list_bytes as f64),
                thousands(row.tools_list_model_bytes as f64)
            ));
            for request in &row.first_requests {
                out.push_str(&format!(
                    " {} bytes | {} tools, {} bytes | {} tools, {} bytes{} |",
                    thousands(request.body_bytes as f64),
                    request.tools,
                    thousands(request.tools_bytes as f64),
                    request.swarm_tools,
                    thousands(request.swarm_tools_bytes as f64),
                    match request.swarm_tools_named_only {
                        0 => String::new(),
                        named => format!("; {named} named only (deferred)"),
                    }
                ));
            }
            out.push('\n');
        }
        for CliVersion { cli, .. } in &self.clis {
            let requests = self.rows.iter().flat_map(|row| &row.first_requests);
            let mut requests = requests.filter(|request| request.cli == *cli);
            if requests.all(|request| request.swarm_tools + request.swarm_tools_named_only == 0) {
                out.push_str(&format!(
                    "\n{}: its first request holds neither swarm's tool definitions nor their names; \
                     its tool search loads them when the model asks.\n",
                    cli.name()
                ));
            }
        }
        out
    }
}
