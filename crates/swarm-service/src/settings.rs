//! What every process on one database must agree on, and so reads from the database
//! rather than from its own flags: the identity mode (`AGENT_AUTH`) and the lease and
//! hand-back policy. The hub writes them at start ([`Service::hub_settings_publish`]);
//! `swarm mcp`, which opens the database with no hub flags, builds its service from them
//! ([`Service::from_hub_settings`]) and rescues nothing: only hubs run the rescuer, on
//! the policy they were given.

use std::{sync::Arc, time::Duration};

use serde::{Deserialize, Serialize};
use swarm_domain::lease::LeasePolicy;
use swarm_store::Store;

use crate::{AgentAuth, Service, ServiceError, ServiceResult};

const AGENT_AUTH: &str = "agent_auth";
const LEASE: &str = "lease";

/// The hub's settings as the database holds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HubSettings {
    pub agent_auth: AgentAuth,
    pub lease: LeasePolicy,
}

/// The lease policy as stored: milliseconds, so a change of unit never misreads a row.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredLease {
    period_ms: u64,
    max_losses: i32,
    max_deliveries: i32,
    result_handoff_ms: u64,
    reassign_after_ms: u64,
}

impl From<LeasePolicy> for StoredLease {
    fn from(lease: LeasePolicy) -> Self {
        let millis = |duration: Duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        StoredLease {
            period_ms: millis(lease.period),
            max_losses: lease.max_losses,
            max_deliveries: lease.max_deliveries,
            result_handoff_ms: millis(lease.result_handoff),
            reassign_after_ms: millis(lease.reassign_after),
        }
    }
}

impl From<StoredLease> for LeasePolicy {
    fn from(stored: StoredLease) -> Self {
        LeasePolicy {
            period: Duration::from_millis(stored.period_ms),
            max_losses: stored.max_losses,
            max_deliveries: stored.max_deliveries,
            result_handoff: Duration::from_millis(stored.result_handoff_ms),
            reassign_after: Duration::from_millis(stored.reassign_after_ms),
        }
    }
}

/// What a hub last wrote, `None` when no hub has run on this database yet.
pub async fn read_hub_settings(store: &Arc<dyn Store>) -> ServiceResult<Option<HubSettings>> {
    let stored = store.hub_settings().await?;
    let value = |name: &str| stored.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str());
    let (Some(agent_auth), Some(lease)) = (value(AGENT_AUTH), value(LEASE)) else {
        return Ok(None);
    };
    let corrupt = |what: &str, error: String| {
        ServiceError::Unavailable(format!(
            "the hub's stored {what} cannot be read ({error}): start the hub once to write it again"
        ))
    };
    let agent_auth = AgentAuth::parse(agent_auth).map_err(|error| corrupt("identity mode", error))?;
    let lease: StoredLease =
        serde_json::from_str(lease).map_err(|error| corrupt("lease policy", error.to_string()))?;
    Ok(Some(HubSettings { agent_auth, lease: lease.into() }))
}

impl Service {
    /// Writes this hub's identity mode and lease policy for every process on its
    /// database. Replicas given other flags overwrite each other: the last one started
    /// wins, and `swarm serve` says so in its docs (replicas share their flags).
    pub async fn hub_settings_publish(&self) -> ServiceResult<()> {
        let lease = serde_json::to_string(&StoredLease::from(self.lease)).expect("plain numbers are JSON");
        self.store.hub_settings_put(&[(AGENT_AUTH, self.agent_auth.as_str()), (LEASE, &lease)]).await?;
        Ok(())
    }

    /// A service on `store` with the settings its hub wrote (the defaults when no hub
    /// has run on it yet), for a process that serves agents without being a hub.
    pub async fn from_hub_settings(store: Arc<dyn Store>) -> ServiceResult<(Service, Option<HubSettings>)> {
        let settings = read_hub_settings(&store).await?;
        let service = match settings {
            Some(settings) => {
                Service::with_lease_policy(store, settings.lease).with_agent_auth(settings.agent_auth)
            }
            None => Service::new(store),
        };
        Ok((service, settings))
    }
}
