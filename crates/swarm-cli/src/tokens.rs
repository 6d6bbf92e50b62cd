//! `swarm agent token create|list|revoke`.

use anyhow::Context;
use swarm_domain::id::AgentTokenId;

use super::{
    agent::{TokenArgs, TokenCommand, TokenRevokeArgs},
    output, resolve_agent,
};

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
