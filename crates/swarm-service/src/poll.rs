//! The poll: hand an agent its next trigger, claimed, optionally waiting for one.

use std::time::Duration;

use swarm_domain::poll::{PoolMode, Trigger};

use crate::{Caller, Service, ServiceResult};

/// The longest a poll may wait for a trigger.
pub const POLL_WAIT_MAX: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollRequest {
    /// How long to wait for a trigger when there is none yet (zero: answer at once).
    pub wait: Duration,
    pub pool: PoolMode,
}

impl Service {
    /// The caller's next trigger, claimed for it, or `None` when nothing came within
    /// `request.wait`.
    pub async fn poll(&self, caller: Caller, request: PollRequest) -> ServiceResult<Option<Trigger>> {
        let _ = (caller, request);
        Ok(None)
    }
}
