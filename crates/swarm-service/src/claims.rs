//! A lead-side claim belongs to the agent run that took it (issue 20). When the run
//! ends, its runner gives back what the run did not finish (`POST /api/poll/release`),
//! so the items are offered again at once instead of when a lease runs out; a runner
//! that restarts gives back what its previous life held. An item handed over
//! `MAX_DELIVERIES` times becomes a dead letter, which an operator puts back.

use swarm_domain::{
    id::{InboxMessageId, RunnerId},
    inbox::InboxMessage,
    poll::Wake,
};
use swarm_store::{Applied, HeldItems, Released};

use crate::{Caller, Service, ServiceError, ServiceResult};

/// What a runner gives back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReleaseRequest {
    /// The items of a trigger whose run ended, held by the calling runner (`X-Runner-ID`).
    pub items: HeldItems,
    /// A previous life of the calling runner: everything it still holds for the agent.
    pub previous_runner: Option<RunnerId>,
}

impl Service {
    /// Give back the caller's claims that `runner` (the caller's runner, for
    /// `request.items`) or `request.previous_runner` (everything) still holds; items
    /// finished meanwhile or held by another runner are left alone. Wakes the agent's
    /// poll when anything came back.
    pub async fn claims_release(
        &self,
        caller: Caller,
        runner: Option<RunnerId>,
        request: ReleaseRequest,
    ) -> ServiceResult<Released> {
        let agent = caller.require_agent()?;
        if request.items.is_empty() && request.previous_runner.is_none() {
            return Err(ServiceError::Invalid(
                "name what to release: inboxMessageIds, channelIds, mailIds, taskIds, or previousRunnerId"
                    .into(),
            ));
        }
        let max_deliveries = self.lease.max_deliveries;
        let now = self.clock.now();
        let mut released = Released::default();
        if !request.items.is_empty() {
            let Some(runner) = runner else {
                return Err(ServiceError::Invalid(
                    "claims are held by a runner: send its id in the X-Runner-ID header".into(),
                ));
            };
            released =
                self.store.claims_release(agent, runner, Some(&request.items), max_deliveries, now).await?;
        }
        if let Some(previous) = request.previous_runner {
            if Some(previous) == runner {
                return Err(ServiceError::Invalid(
                    "previousRunnerId is this runner's own id: a restarted runner uses a new one".into(),
                ));
            }
            let before = self.store.claims_release(agent, previous, None, max_deliveries, now).await?;
            released.returned += before.returned;
            released.dead_lettered += before.dead_lettered;
        }
        if released.returned + released.dead_lettered > 0 {
            tracing::info!(
                %agent,
                returned = released.returned,
                dead_lettered = released.dead_lettered,
                "a runner gave back claims its agent run left unfinished"
            );
            // Inbox pages and the poll re-read: something is unread or dead again.
            self.inbox_changed(agent);
            self.wake(&[Wake::Agent(agent)]).await;
        }
        Ok(released)
    }

    /// Put a dead letter back in the lead's inbox (`dead_letter` → `unread`) with a fresh
    /// delivery count. For the operator and the message's owner.
    pub async fn inbox_requeue(&self, caller: Caller, id: InboxMessageId) -> ServiceResult<InboxMessage> {
        let message = self
            .store
            .inbox_get(id)
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("inbox message {id} not found")))?;
        if let Some(agent) = caller.agent_id()
            && agent != message.agent_id
        {
            return Err(ServiceError::Forbidden(format!("inbox message {id} belongs to another agent")));
        }
        match self.store.inbox_requeue(id, self.clock.now()).await? {
            Applied::Changed { after, .. } => {
                self.inbox_changed(after.agent_id);
                self.wake(&[Wake::Agent(after.agent_id)]).await;
                Ok(after)
            }
            Applied::Refused { current } => Err(ServiceError::Conflict(format!(
                "inbox message {id} is {}, not a dead letter: only dead letters are requeued",
                current.status
            ))),
            Applied::NotFound => Err(ServiceError::NotFound(format!("inbox message {id} not found"))),
        }
    }
}
