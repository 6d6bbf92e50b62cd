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
    /// The agent's own waiter; one per agent that ever polled, kept for reuse.
    pub(crate) fn agent(&self, id: AgentId) -> Arc<Notify> {
        let mut agents = self.agents.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        agents.entry(id).or_default().clone()
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
