//! Who is calling, and what a tool handler gets to work with.
//!
//! Over HTTP the caller is the `X-Agent-ID` header of each request, never the transport
//! session, so any replica can answer any request. Over stdio the process speaks for
//! one agent: `--agent-id`, or the agent it joined as.

use std::sync::{Arc, RwLock};

use swarm_domain::{
    agent::Agent,
    id::{AgentId, TaskId},
};
use swarm_service::{Authenticated, Caller, Service, ServiceError, ServiceResult};

/// The stdio process's hub URL (one process, one hub), for the tools that show URLs.
static HUB_URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Set once by the stdio server from `swarm mcp`'s `--hub-url`.
pub(crate) fn set_hub_url(url: &str) {
    let _ = HUB_URL.set(url.trim_end_matches('/').to_string());
}

/// Where a sender calls this hub: `swarm mcp`'s `--hub-url`; the default port on this
/// machine when the process serves no stdio (over HTTP the Inbox-MCP tools are absent).
pub(crate) fn hub_url() -> &'static str {
    HUB_URL.get().map_or("http://localhost:3013", String::as_str)
}

/// Who a caller is, as far as tools are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// No agent id, or one that is not registered yet.
    Unregistered,
    Worker,
    Lead,
}

pub const AGENT_ID_HEADER: &str = "x-agent-id";
/// The task whose run the caller is in (the runner's `TASK_ID`, or for a session resumed
/// with a result the session's trigger task): a task created now is awaited by that
/// trigger session. `swarm connect` writes it into the MCP config from the environment.
pub const TASK_ID_HEADER: &str = "x-task-id";

/// Where the caller's agent id comes from.
#[derive(Clone)]
pub enum Identity {
    /// The `X-Agent-ID` header of each HTTP request.
    Header,
    /// The agent this stdio process speaks for; `join-swarm` sets it when it was unset.
    /// The task whose run started the process, from its environment. And what the
    /// process proved at start: in token mode, the token of its agent.
    Process(Arc<RwLock<Option<AgentId>>>, Option<TaskId>, Authenticated),
}

impl Identity {
    pub fn process(agent_id: Option<AgentId>, session_task: Option<TaskId>, proved: Authenticated) -> Self {
        Identity::Process(Arc::new(RwLock::new(agent_id)), session_task, proved)
    }

    /// The task whose run the caller is in: `X-Task-ID` over HTTP (absent or empty:
    /// none), the process's over stdio. `Err` carries a message for a header that is not
    /// a UUID.
    pub fn session_task(&self, parts: Option<&http::request::Parts>) -> Result<Option<TaskId>, String> {
        match self {
            Identity::Process(_, task, _) => Ok(*task),
            Identity::Header => {
                let Some(value) = parts.and_then(|parts| parts.headers.get(TASK_ID_HEADER)) else {
                    return Ok(None);
                };
                let text = value.to_str().map_err(|_| "X-Task-ID must be a UUID".to_string())?.trim();
                if text.is_empty() {
                    return Ok(None);
                }
                TaskId::parse(text).map(Some).map_err(|_| format!("X-Task-ID must be a UUID, got {text:?}"))
            }
        }
    }

    /// The caller's agent id. `Err` carries a message for a header that is not a UUID.
    pub fn agent_id(&self, parts: Option<&http::request::Parts>) -> Result<Option<AgentId>, String> {
        match self {
            Identity::Process(id, _, _) => Ok(*id.read().unwrap_or_else(|poisoned| poisoned.into_inner())),
            Identity::Header => {
                let named = named_agent(parts)?;
                // Token mode: the request's token decides, and `X-Agent-ID` must agree
                // (the same rule as REST's, from the credential the edge attached).
                let caller = authenticated(parts)?.caller(named).map_err(|refusal| refusal.to_string())?;
                Ok(caller.agent_id())
            }
        }
    }

    /// The request's credential: the edge's over HTTP; what the stdio process proved at
    /// start (`swarm mcp` checks an agent token when the hub runs in token mode).
    pub fn authenticated(&self, parts: Option<&http::request::Parts>) -> Result<Authenticated, String> {
        match self {
            Identity::Process(_, _, proved) => Ok(*proved),
            Identity::Header => authenticated(parts),
        }
    }

    /// After `join-swarm`: a stdio process without an agent id becomes that agent.
    /// Returns whether the identity changed (so the tool list did too).
    pub fn adopt(&self, agent_id: AgentId) -> bool {
        match self {
            Identity::Header => false,
            Identity::Process(id, _, _) => {
                let mut id = id.write().unwrap_or_else(|poisoned| poisoned.into_inner());
                if id.is_none() {
                    *id = Some(agent_id);
                    true
                } else {
                    false
                }
            }
        }
    }

    pub fn is_header(&self) -> bool {
        matches!(self, Identity::Header)
    }
}

/// The credential the edge attached; none means no one (identity fails closed).
fn authenticated(parts: Option<&http::request::Parts>) -> Result<Authenticated, String> {
    parts.and_then(|parts| parts.extensions.get::<Authenticated>()).copied().ok_or_else(|| {
        "the request carries no credential: send Authorization: Bearer <API key or agent token>".to_string()
    })
}

/// The `X-Agent-ID` header, when present and not empty.
fn named_agent(parts: Option<&http::request::Parts>) -> Result<Option<AgentId>, String> {
    let Some(value) = parts.and_then(|parts| parts.headers.get(AGENT_ID_HEADER)) else {
        return Ok(None);
    };
    let text = value.to_str().map_err(|_| "X-Agent-ID must be a UUID".to_string())?.trim();
    if text.is_empty() {
        return Ok(None);
    }
    AgentId::parse(text).map(Some).map_err(|_| format!("X-Agent-ID must be a UUID, got {text:?}"))
}

/// The caller of one request: its id (if it sent one) and its agent (if registered).
#[derive(Debug, Clone)]
pub struct CallerInfo {
    pub id: Option<AgentId>,
    pub agent: Option<Agent>,
    /// The task whose run the caller is in ([`Identity::session_task`]).
    pub session_task: Option<TaskId>,
    /// What the request's credential proved ([`Identity::authenticated`]).
    pub authenticated: Authenticated,
}

impl CallerInfo {
    pub async fn resolve(
        service: &Service,
        id: Option<AgentId>,
        authenticated: Authenticated,
    ) -> ServiceResult<Self> {
        let agent = match id {
            None => None,
            Some(id) => match service.agent_get(id).await {
                Ok(agent) => Some(agent),
                Err(ServiceError::NotFound(_)) => None,
                Err(err) => return Err(err),
            },
        };
        Ok(CallerInfo { id, agent, session_task: None, authenticated })
    }

    pub fn role(&self) -> Role {
        match &self.agent {
            None => Role::Unregistered,
            Some(agent) if agent.is_lead => Role::Lead,
            Some(_) => Role::Worker,
        }
    }

    /// The caller as the service sees it: the agent, or the operator when no id was
    /// sent (only tools open to anyone get that far without an id).
    pub fn service_caller(&self) -> Caller {
        match self.id {
            Some(id) => Caller::Agent(id),
            None => Caller::Operator,
        }
    }
}

/// What a tool handler gets: the service, the caller, and how the caller is named.
#[derive(Clone)]
pub struct ToolCall {
    pub service: Service,
    pub caller: CallerInfo,
    pub identity: Identity,
}

impl ToolCall {
    pub fn caller(&self) -> Caller {
        self.caller.service_caller()
    }

    /// The trigger session the caller is in, named by its task; a task it creates is
    /// awaited by that session.
    pub fn session_task(&self) -> Option<TaskId> {
        self.caller.session_task
    }

    /// The caller's agent id; tools open only to agents can rely on it.
    pub fn agent_id(&self) -> Option<AgentId> {
        self.caller.id
    }
}
