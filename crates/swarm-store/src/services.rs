//! The storage of the services registry, beside [`crate::Store`] (every store is also a
//! [`ServiceRegistry`]).

use async_trait::async_trait;
use swarm_domain::{
    id::{AgentId, ServiceId},
    registry::{NewService, RegisteredService, ServiceStatus},
    time::Timestamp,
};

use crate::{Applied, StoreResult};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceFilter {
    pub status: Option<ServiceStatus>,
    pub agent_id: Option<AgentId>,
    /// Case-insensitive part of the name.
    pub name: Option<String>,
}

#[async_trait]
pub trait ServiceRegistry: Send + Sync {
    /// Insert the service, or, when its agent has one by that name, update it (its id,
    /// status and creation are kept), as one upsert; logged as `service_registered`.
    /// An agent that does not exist is `MissingReference`.
    async fn service_upsert(&self, service: &NewService, now: Timestamp) -> StoreResult<RegisteredService>;
    async fn service_get(&self, id: ServiceId) -> StoreResult<Option<RegisteredService>>;
    /// By agent, then name.
    async fn service_list(&self, filter: &ServiceFilter) -> StoreResult<Vec<RegisteredService>>;
    /// Set the status, guarded by the status being `from`; logged as
    /// `service_status_change` by `actor`.
    async fn service_set_status(
        &self,
        id: ServiceId,
        from: ServiceStatus,
        to: ServiceStatus,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<RegisteredService>>;
    /// Delete the service; logged as `service_unregistered` by `actor`. `None` when it
    /// did not exist.
    async fn service_delete(
        &self,
        id: ServiceId,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Option<RegisteredService>>;
}
