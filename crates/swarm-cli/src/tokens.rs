//! `swarm agent token create|list|revoke`.

use anyhow::Context;
use swarm_domain::id::AgentTokenId;

use clap::{Args, Subcommand};

use super::{HubArgs, JSON_HELP, output, resolve_agent};

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token for an agent (operator key); the token is printed this once
    ///
    /// Give it to the agent's runner as AGENT_TOKEN (or `swarm connect --agent-token`).
    Create(TokenArgs),
    /// List an agent's tokens: ids and dates, never the tokens
    List(TokenArgs),
    /// Revoke a token: the next request with it is refused (401)
    Revoke(TokenRevokeArgs),
}

/// `swarm agent token create|list` name one agent, as `swarm agent show` does.
pub type TokenArgs = crate::AgentShowArgs;

#[derive(Debug, Args)]
pub struct TokenRevokeArgs {
    /// The agent's name or id
    #[arg(value_name = "AGENT")]
    pub(crate) agent: String,
    /// The token's id (from `swarm agent token list`)
    #[arg(value_name = "TOKEN_ID")]
    pub(crate) token_id: String,
    #[arg(long, help = JSON_HELP)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) hub: HubArgs,
}

pub async fn run(command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create(args) => create(args).await,
        TokenCommand::List(args) => list(args).await,
        TokenCommand::Revoke(args) => revoke(args).await,
    }
}

async fn create(args: TokenArgs) -> anyhow::Result<()> {
    let client = args.hub.connect()?;
    let agent = resolve_agent(&client, &args.agent).await?;
    let token =
        client.create_token(agent).await.with_context(|| format!("cannot create a token for {agent}"))?;
    if args.json {
        return output::print_json(&token);
    }
    output::emit(&format!(
        "{}\n\ntoken {} for agent {agent}: shown this once, the hub keeps only its hash.\n\
         Give it to the agent's runner as AGENT_TOKEN={}... with AGENT_ID={agent}, or write it with \
         `swarm connect --agent-token`.\n",
        token.token,
        token.id,
        &token.token[..token.token.len().min(8)],
    ))
}

async fn list(args: TokenArgs) -> anyhow::Result<()> {
    let client = args.hub.connect()?;
    let agent = resolve_agent(&client, &args.agent).await?;
    let list =
        client.list_tokens(agent).await.with_context(|| format!("cannot list the tokens of {agent}"))?;
    if args.json {
        return output::print_json(&list);
    }
    if list.tokens.is_empty() {
        return output::emit(&format!("agent {agent} has no tokens\n"));
    }
    let rows: Vec<Vec<String>> = list
        .tokens
        .iter()
        .map(|token| {
            vec![
                token.id.to_string(),
                token.created_at.clone(),
                token.revoked_at.clone().unwrap_or("-".into()),
            ]
        })
        .collect();
    output::emit(&output::table(&["ID", "CREATED", "REVOKED"], &rows))
}

async fn revoke(args: TokenRevokeArgs) -> anyhow::Result<()> {
    let client = args.hub.connect()?;
    let agent = resolve_agent(&client, &args.agent).await?;
    let id = AgentTokenId::parse(&args.token_id).map_err(|invalid| anyhow::anyhow!(invalid.0))?;
    let revoked =
        client.revoke_token(agent, id).await.with_context(|| format!("cannot revoke token {id}"))?;
    if args.json {
        return output::print_json(&revoked);
    }
    output::emit(&format!("token {id} of agent {agent} revoked: the next request with it is refused\n"))
}
