//! Agent tools: `join-swarm`, `my-agent-info`, `update-profile`, `get-swarm`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use swarm_domain::{
    agent::{ProfileUpdate, Registration},
    id::AgentId,
    inbox::{INBOX_TRIGGER_MAX, InboxStatus},
};
use swarm_service::RegisterInput;

use super::NoArguments;
use crate::{
    context::ToolCall,
    registry::{Audience, ToolSpec},
    reply::{Answer, Outcome, Reply},
};

pub fn group() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "join-swarm",
            "Join the swarm as an agent (a worker, or the lead: one lead per swarm). The agent id is \
             requestedId, else your X-Agent-ID, else a new one; send it as X-Agent-ID from then on. \
             Joining again with the same id brings an offline agent back.",
            Audience::Anyone,
            join_swarm,
        ),
        ToolSpec::new(
            "my-agent-info",
            "Your agent: profile, status, capacity, and what waits for you (offered tasks, pool \
             tasks, tasks in progress).",
            Audience::Agents,
            my_agent_info,
        )
        .read_only(),
        ToolSpec::new(
            "update-profile",
            "Change your own name, description, role or capabilities (give at least one).",
            Audience::Agents,
            update_profile,
        ),
        ToolSpec::new(
            "get-swarm",
            "Every agent of the swarm with its status and capacity, ordered by name.",
            Audience::Anyone,
            get_swarm,
        )
        .read_only(),
    ]
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct JoinSwarmArguments {
    /// Your name in the swarm (1 to 100 characters, unique).
    name: String,
    /// Join as the lead, who delegates work. A swarm has one lead.
    #[serde(default)]
    lead: bool,
    description: Option<String>,
    /// What you do, e.g. "backend developer".
    role: Option<String>,
    /// Skills other agents can look for, e.g. ["rust", "sql"].
    capabilities: Option<Vec<String>>,
    /// The agent id to join as (a UUID), e.g. to take over a known identity.
    requested_id: Option<uuid::Uuid>,
    /// How many tasks you work on at once, 1 to 20 (default 1).
    #[schemars(range(min = 1, max = 20))]
    max_tasks: Option<i64>,
}

async fn join_swarm(call: ToolCall, args: JoinSwarmArguments) -> Outcome<JoinOutput> {
    let id = args.requested_id.map(AgentId::from_uuid).or(call.agent_id());
    let input = RegisterInput {
        name: args.name,
        is_lead: args.lead,
        description: args.description,
        role: args.role,
        capabilities: args.capabilities,
        max_tasks: args.max_tasks,
    };
    // Token mode: a token joins as its own agent only; the operator key joins new agents
    // only, and gets the new agent's first token.
    let (registration, token) = call.service.agent_register_as(call.caller.authenticated, id, input).await?;
    let (agent, created) = match registration {
        Registration::Created(agent) => (agent, true),
        Registration::Existing(agent) => (agent, false),
    };
    call.identity.adopt(agent.id);
    let verb = if created { "joined" } else { "is back in" };
    let role = if agent.is_lead { "the lead" } else { "a worker" };
    let how = if token.is_some() {
        " Send its token (shown this once) as Authorization: Bearer <token> with every request.".to_string()
    } else if call.caller.authenticated.mode == swarm_service::AgentAuth::Token {
        String::new()
    } else if call.identity.is_header() {
        format!(" Send X-Agent-ID: {} with every request.", agent.id)
    } else {
        String::new()
    };
    let message = format!("{} {verb} the swarm as {role} (agent id {}).{how}", agent.name, agent.id);
    let token = token.map(|token| NewToken { id: token.token.id.to_string(), token: token.secret });
    let id = agent.id;
    Ok(Answer::new(message, JoinOutput { created, agent, token }).for_agent(id))
}

async fn my_agent_info(call: ToolCall, _: NoArguments) -> Outcome<MyAgentOutput> {
    let (agent, inbox) = call.service.me(call.caller(), true).await?;
    let inbox = inbox.unwrap_or_default();
    // A lead with no runner (a person's session, MCP only) has no poll to hand it its
    // Slack messages: this is where it finds them, ids included, to answer or delegate.
    let slack_inbox = if agent.is_lead {
        call.service
            .inbox_list(call.caller(), None, InboxStatus::OPEN.to_vec(), Some(INBOX_TRIGGER_MAX))
            .await?
    } else {
        Vec::new()
    };
    let mut message = format!(
        "You are {} ({}), {}: {} of {} task slots in use; {} offered to you, {} in the pool.",
        agent.name,
        if agent.is_lead { "the lead" } else { "a worker" },
        agent.status.as_str(),
        agent.capacity.current,
        agent.capacity.max,
        inbox.offered_tasks_count,
        inbox.pool_tasks_count,
    );
    let waiting = WaitingCounts {
        offered_tasks_count: inbox.offered_tasks_count,
        pool_tasks_count: inbox.pool_tasks_count,
        in_progress_count: inbox.in_progress_count,
        unread_count: inbox.unread_count,
        mentions_count: inbox.mentions_count,
    };
    if !slack_inbox.is_empty() {
        message.push_str(&format!(
            " {} Slack inbox message(s) wait for you (slackInbox): answer each with slack-reply or hand it \
             to a worker with inbox-delegate (inboxMessageId).",
            slack_inbox.len()
        ));
    }
    Ok(Answer::new(message, MyAgentOutput { agent, inbox: waiting, slack_inbox }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UpdateProfileArguments {
    /// A new name (unique in the swarm).
    name: Option<String>,
    description: Option<String>,
    role: Option<String>,
    capabilities: Option<Vec<String>>,
}

async fn update_profile(call: ToolCall, args: UpdateProfileArguments) -> Outcome<AgentOutput> {
    let Some(me) = call.agent_id() else {
        return Err(Reply::refused("update-profile needs your agent id (X-Agent-ID)"));
    };
    let has_profile = args.description.is_some() || args.role.is_some() || args.capabilities.is_some();
    if args.name.is_none() && !has_profile {
        return Err(Reply::refused("give at least one of name, description, role, capabilities"));
    }
    // Validate the profile before renaming, so a bad field changes nothing.
    let profile = if has_profile {
        Some(
            ProfileUpdate::parse(args.description, args.role, args.capabilities)
                .map_err(|err| Reply::refused(err.0))?,
        )
    } else {
        None
    };
    let renamed = match args.name {
        Some(name) => Some(call.service.agent_rename(call.caller(), me, &name).await?),
        None => None,
    };
    let agent = match (profile, renamed) {
        (Some(profile), _) => call.service.agent_update_profile(call.caller(), me, profile).await?,
        (None, Some(agent)) => agent,
        (None, None) => unreachable!("refused above: neither a name nor a profile"),
    };
    Ok(Answer::new("profile updated", AgentOutput { agent }))
}

async fn get_swarm(call: ToolCall, _: NoArguments) -> Outcome<SwarmOutput> {
    let agents = call.service.agent_list().await?;
    let n_leads = agents.iter().filter(|agent| agent.is_lead).count();
    let message = format!("{} agents ({} lead, {} workers)", agents.len(), n_leads, agents.len() - n_leads);
    Ok(Answer::new(message, SwarmOutput { agents }))
}

// The result fields of the agent tools, for their output schemas.
#[derive(Serialize, utoipa::ToSchema)]
struct SwarmOutput {
    agents: Vec<swarm_domain::agent::Agent>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct AgentOutput {
    agent: swarm_domain::agent::Agent,
}

#[derive(Serialize, utoipa::ToSchema)]
struct JoinOutput {
    /// Whether this call registered the agent (false: it was registered already).
    created: bool,
    agent: swarm_domain::agent::Agent,
    /// The agent's own token, shown once (`AGENT_AUTH=token`).
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<NewToken>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct NewToken {
    id: String,
    token: String,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct MyAgentOutput {
    agent: swarm_domain::agent::Agent,
    inbox: WaitingCounts,
    /// A lead's open Slack inbox messages (empty for a worker).
    slack_inbox: Vec<swarm_domain::inbox::InboxMessage>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct WaitingCounts {
    offered_tasks_count: i64,
    pool_tasks_count: i64,
    in_progress_count: i64,
    unread_count: i64,
    mentions_count: i64,
}
