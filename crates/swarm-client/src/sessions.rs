//! What runners report about agent sessions: `POST /api/session-logs` and
//! `POST /api/session-costs`.

use serde::Deserialize;
use swarm_domain::session::SessionCost;

use crate::{Client, ClientError};

pub use swarm_domain::wire::{SessionCostRequest, SessionLogsRequest, SessionStartRequest};

#[derive(Deserialize)]
struct StartRecorded {}

#[derive(Deserialize)]
struct LogsCreated {
    count: u64,
}

#[derive(Debug, Deserialize)]
struct CostCreated {
    cost: SessionCost,
}

impl Client {
    /// Append output lines of an agent run; answers how many lines the hub stored.
    pub async fn append_session_logs(&self, request: &SessionLogsRequest) -> Result<u64, ClientError> {
        Ok(self.post_json::<_, LogsCreated>("/api/session-logs", request).await?.count)
    }

    /// Tell the hub whether the agent CLI started (counted in its metrics).
    pub async fn report_session_start(&self, request: &SessionStartRequest) -> Result<(), ClientError> {
        self.post_json::<_, StartRecorded>("/api/session-starts", request).await.map(|_| ())
    }

    /// Record what an agent run cost.
    pub async fn record_session_cost(
        &self,
        request: &SessionCostRequest,
    ) -> Result<SessionCost, ClientError> {
        Ok(self.post_json::<_, CostCreated>("/api/session-costs", request).await?.cost)
    }
}
