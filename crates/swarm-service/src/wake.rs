//! Waking parked polls. A poll arms its waiters (its agent's, and its role's) before
//! its final re-check of the database, so a change committed after that re-check always
//! finds it armed: no wake-up is lost between "nothing for me" and "going to sleep".

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use swarm_domain::{id::AgentId, poll::Wake};
use tokio::sync::Notify;

#[derive(Default)]
pub(crate) struct Waiters {
    agents: Mutex<HashMap<AgentId, Arc<Notify>>>,
    workers: Notify,
    leads: Notify,
}

impl Waiters {
    /// The agent's own waiter, shared by its polls in flight and dropped with the last of
    /// them: a waiter kept for every agent that ever polled grew with every agent ever
    /// registered, and each one, allocated amid a burst of polls, kept a page of the heap
    /// from going back to the OS after the burst (BENCHMARKS.md, "Memory").
    pub(crate) fn agent(&self, id: AgentId) -> AgentWaiter<'_> {
        let mut agents = self.agents.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let notify = agents.entry(id).or_default().clone();
        AgentWaiter { waiters: self, id, notify: Some(notify) }
    }

    /// Agents with a waiter: those with a poll in flight.
    #[cfg(test)]
    fn agents_waiting(&self) -> usize {
        self.agents.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).len()
    }

    pub(crate) fn role(&self, is_lead: bool) -> &Notify {
        if is_lead { &self.leads } else { &self.workers }
    }

    /// Wake the parked polls this change may concern. `notify_waiters` wakes only the
    /// polls armed right now, which is what we want: the others re-check anyway.
    ///
    /// A pool task is work for one worker, so `Workers` wakes one parked worker
    /// (`notify_one`, oldest first; a permit is kept when none is parked). A worker that
    /// then does not take the pool work passes the wake on (see `poll.rs`).
    pub(crate) fn wake(&self, wake: Wake) {
        match wake {
            Wake::Agent(id) => {
                let agents = self.agents.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                if let Some(notify) = agents.get(&id) {
                    notify.notify_waiters();
                }
            }
            Wake::Workers => self.workers.notify_one(),
            Wake::Leads => self.leads.notify_waiters(),
            // Every parked poll is armed on its role's waiter too.
            Wake::Everyone => {
                self.workers.notify_waiters();
                self.leads.notify_waiters();
            }
        }
    }
}

/// A poll's hold on its agent's waiter (see [`Waiters::agent`]).
pub(crate) struct AgentWaiter<'a> {
    waiters: &'a Waiters,
    id: AgentId,
    /// Always there until dropped, where it is let go of under the map's lock.
    notify: Option<Arc<Notify>>,
}

impl std::ops::Deref for AgentWaiter<'_> {
    type Target = Notify;

    fn deref(&self) -> &Notify {
        self.notify.as_ref().expect("an agent's waiter is held until dropped")
    }
}

impl Drop for AgentWaiter<'_> {
    fn drop(&mut self) {
        let mut agents = self.waiters.agents.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Every hold is taken and let go of under this lock, so the count is exact here:
        // the map's alone means no poll of the agent is in flight.
        drop(self.notify.take());
        if agents.get(&self.id).is_some_and(|kept| Arc::strong_count(kept) == 1) {
            agents.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_agent_s_waiter_lives_as_long_as_its_polls_and_still_wakes_them() {
        let waiters = Waiters::default();
        let agent = AgentId::new_v7();
        let first = waiters.agent(agent);
        let second = waiters.agent(agent);
        assert!(
            Arc::ptr_eq(first.notify.as_ref().unwrap(), second.notify.as_ref().unwrap()),
            "two polls of one agent share its waiter"
        );

        {
            let woken = second.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            drop(first);
            assert_eq!(waiters.agents_waiting(), 1, "a poll still in flight keeps the waiter");
            waiters.wake(Wake::Agent(agent));
            tokio::time::timeout(std::time::Duration::from_secs(5), woken)
                .await
                .expect("the remaining poll is woken");
        }
        drop(second);
        assert_eq!(waiters.agents_waiting(), 0, "the last poll's end drops the waiter");

        // Nothing parked: a wake finds no waiter and is no error; the next poll gets a new one.
        waiters.wake(Wake::Agent(agent));
        let again = waiters.agent(agent);
        assert_eq!(waiters.agents_waiting(), 1);
        drop(again);
        assert_eq!(waiters.agents_waiting(), 0);
    }
}
