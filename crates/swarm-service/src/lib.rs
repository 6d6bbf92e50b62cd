//! The operations of swarm. This is the only layer that changes state: REST handlers,
//! MCP tools and every other adapter call these functions and nothing below them.
//!
//! Each operation checks who may do it, calls one guarded store operation, and
//! publishes a [`Change`] after it committed, so long-polls and live views can wake.

mod agents;
mod error;
mod poll;
mod sessions;
mod tasks;

use std::sync::Arc;

use swarm_domain::id::{AgentId, TaskId};
use swarm_store::Store;
use tokio::sync::broadcast;

pub use agents::{InboxSummary, RegisterInput};
pub use error::{ServiceError, ServiceResult};
pub use poll::{POLL_WAIT_MAX, PollRequest};
pub use tasks::{ActionOutcome, TaskDetail, TaskListQuery, TaskRequest};

/// Who is asking. `Agent` comes from `X-Agent-ID`; `Operator` is a person or script
/// holding the API key without naming an agent (the CLI, the dashboard). An operator
/// may do what the lead may do, except act as an agent (claim, accept, start ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    Agent(AgentId),
    Operator,
}

impl Caller {
    pub fn agent_id(&self) -> Option<AgentId> {
        match self {
            Caller::Agent(id) => Some(*id),
            Caller::Operator => None,
        }
    }

    fn require_agent(&self) -> ServiceResult<AgentId> {
        self.agent_id().ok_or_else(|| {
            ServiceError::Invalid(
                "this action is done by an agent: send its id in the X-Agent-ID header".into(),
            )
        })
    }
}

/// What changed, published after the change committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Task { task_id: TaskId },
    Agent { agent_id: AgentId },
}

#[derive(Clone)]
pub struct Service {
    store: Arc<dyn Store>,
    changes: broadcast::Sender<Change>,
}

impl Service {
    pub fn new(store: Arc<dyn Store>) -> Self {
        let (changes, _) = broadcast::channel(1024);
        Service { store, changes }
    }

    pub fn backend_name(&self) -> &'static str {
        self.store.backend_name()
    }

    /// Changes committed through this process, newest last. A lagging receiver misses
    /// changes (it is told so by `RecvError::Lagged`) and must re-read the state.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    fn publish(&self, change: Change) {
        // No receiver is fine: nobody is waiting.
        let _ = self.changes.send(change);
    }
}
