//! The services registry: an agent registers the long-running services it starts,
//! changes their status and unregisters them; everyone may list them, but a service's
//! `env` values only its agent, the lead and the operator read (others see the names,
//! each value `<redacted>`; they are sealed at rest, `secrets.rs`); a process manager
//! reads an agent's as PM2's ecosystem (`GET /ecosystem`).

use swarm_domain::{
    id::{AgentId, ServiceId},
    registry::{EcosystemApp, RegisteredService, ServiceDraft, ServiceStatus},
};
use swarm_store::{Applied, ServiceFilter};

use crate::{Caller, Change, Service, ServiceError, ServiceResult};

/// How a request names a service: by id, or by the name its agent gave it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceRef {
    pub id: Option<String>,
    pub name: Option<String>,
}

impl Service {
    /// Register a service of the calling agent, or update the one it has by that name.
    pub async fn service_register(
        &self,
        caller: Caller,
        draft: ServiceDraft,
    ) -> ServiceResult<RegisteredService> {
        let agent = self.registry_agent(caller).await?;
        let service = self.seal_service(draft.parse(agent)?);
        let stored = self.store.service_upsert(&service, self.clock.now()).await?;
        self.publish(Change::Service { service_id: stored.id });
        Ok(self.open_service(stored, true))
    }

    /// Every service the filter names; `env` values in clear only for the services the
    /// caller may read them of (its own; all for the lead and the operator).
    pub async fn service_list(
        &self,
        caller: Caller,
        filter: ServiceFilter,
    ) -> ServiceResult<Vec<RegisteredService>> {
        let filter = ServiceFilter { name: filter.name.filter(|name| !name.trim().is_empty()), ..filter };
        let reads_all = match caller {
            Caller::Operator => true,
            // An unregistered id may list (as before) but reads no one's values.
            Caller::Agent(id) => self.store.agent_get(id).await?.is_some_and(|agent| agent.is_lead),
        };
        let services = self.store.service_list(&filter).await?;
        Ok(services
            .into_iter()
            .map(|service| {
                let readable = reads_all || caller.agent_id() == Some(service.agent_id);
                self.open_service(service, readable)
            })
            .collect())
    }

    /// The caller's services as PM2 apps: those with a script.
    pub async fn ecosystem(&self, caller: Caller) -> ServiceResult<Vec<EcosystemApp>> {
        let Some(agent) = caller.agent_id() else {
            return Err(ServiceError::Invalid(
                "Missing X-Agent-ID header: the ecosystem lists one agent's services".into(),
            ));
        };
        let filter = ServiceFilter { agent_id: Some(agent), ..ServiceFilter::default() };
        let services = self.store.service_list(&filter).await?;
        Ok(services
            .into_iter()
            .filter_map(|service| self.open_service(service, true).ecosystem_app())
            .collect())
    }

    pub async fn service_set_status(
        &self,
        caller: Caller,
        which: &ServiceRef,
        status: ServiceStatus,
    ) -> ServiceResult<RegisteredService> {
        let service = self.owned_service(caller, which, "change the status of").await?;
        if service.status == status {
            return Ok(self.open_service(service, true));
        }
        let now = self.clock.now();
        match self
            .store
            .service_set_status(service.id, service.status, status, caller.agent_id(), now)
            .await?
        {
            Applied::Changed { after, .. } => {
                self.publish(Change::Service { service_id: after.id });
                Ok(self.open_service(after, true))
            }
            Applied::Refused { current } => Err(ServiceError::Conflict(format!(
                "service {} changed meanwhile (now {}): read it again and retry",
                current.name,
                current.status.as_str()
            ))),
            Applied::NotFound => Err(unknown_service(which)),
        }
    }

    pub async fn service_unregister(
        &self,
        caller: Caller,
        which: &ServiceRef,
    ) -> ServiceResult<RegisteredService> {
        let service = self.owned_service(caller, which, "unregister").await?;
        let removed = self
            .store
            .service_delete(service.id, caller.agent_id(), self.clock.now())
            .await?
            .ok_or_else(|| unknown_service(which))?;
        self.publish(Change::Service { service_id: removed.id });
        Ok(self.open_service(removed, true))
    }

    /// The service `which` names, if the caller may change it: its agent, the lead or
    /// the operator. A name is looked up among the caller's own services.
    async fn owned_service(
        &self,
        caller: Caller,
        which: &ServiceRef,
        verb: &str,
    ) -> ServiceResult<RegisteredService> {
        let agent = self.caller_agent(caller).await?;
        let service = if let Some(id) = which.id.as_deref().map(str::trim).filter(|id| !id.is_empty()) {
            let id = ServiceId::parse(id)?;
            self.store.service_get(id).await?.ok_or_else(|| unknown_service(which))?
        } else if let Some(name) = which.name.as_deref().map(str::trim).filter(|name| !name.is_empty()) {
            let owner = agent.as_ref().map(|agent| agent.id).ok_or_else(|| {
                ServiceError::Invalid(
                    "name a service by serviceId, or send X-Agent-ID to name your own".into(),
                )
            })?;
            let filter = ServiceFilter { agent_id: Some(owner), ..ServiceFilter::default() };
            let services = self.store.service_list(&filter).await?;
            services.into_iter().find(|service| service.name == name).ok_or_else(|| unknown_service(which))?
        } else {
            return Err(ServiceError::Invalid("give serviceId or name".into()));
        };
        match agent {
            Some(agent) if !agent.is_lead && agent.id != service.agent_id => {
                Err(ServiceError::Forbidden(format!(
                    "service {} belongs to agent {}: only it, the lead or the operator may {verb} it",
                    service.name, service.agent_id
                )))
            }
            _ => Ok(service),
        }
    }

    /// Services belong to an agent: the caller must be a registered one.
    async fn registry_agent(&self, caller: Caller) -> ServiceResult<AgentId> {
        let agent = caller.require_agent()?;
        self.caller_agent(caller).await?;
        Ok(agent)
    }
}

fn unknown_service(which: &ServiceRef) -> ServiceError {
    let named = which.id.clone().or_else(|| which.name.clone()).unwrap_or_default();
    ServiceError::NotFound(format!("service {named:?} not found"))
}
