//! Null polls answered without the database: the last poll view of an agent that had
//! nothing waiting, kept while nothing can have changed since it was read.
//!
//! Why it cannot hide work (ARCHITECTURE.md, "Waking", says the same for readers):
//!
//! - **Only "nothing" is kept.** A view with any candidate is never stored, and a claim
//!   never comes from here: every claim is the store's guarded transaction, so the cache
//!   cannot hand anything out, twice or at all.
//! - **This process's writes.** The generation is bumped after every store call that can
//!   write has returned (`PgStore::wrote`), so after its commit. A view is stored with the
//!   generation read *before* the database was read, and served only while the generation
//!   is unchanged: a write that committed after that read has bumped it. A client that
//!   wrote through this replica and then polls it reads the database.
//! - **Other processes' writes.** They reach this replica as `NOTIFY`s on the LISTEN
//!   connection, which bump the generation before they wake local polls. Without that
//!   connection (not started, or lost and not yet back) nothing is served from here;
//!   (re)connecting bumps the generation, since notifications may have been lost.
//!   Between another replica's commit and the arrival of its notification (the same delay
//!   a parked poll has, well under a millisecond on one machine) a null poll here may
//!   still answer nothing.
//! - **A bound on the rest.** A change made elsewhere without a notification (a process
//!   that died between its commit and its `NOTIFY`, or a write no poll is woken for)
//!   shows after [`VIEW_TTL`] at the latest: no view is served older than that.

use std::{
    collections::HashMap,
    sync::{
        Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use swarm_domain::id::AgentId;
use swarm_store::PollView;

/// The longest a view is served from memory.
pub(crate) const VIEW_TTL: Duration = Duration::from_secs(1);
/// Past this many agents the whole map is dropped rather than grown: a cache, not a registry.
const MAX_AGENTS: usize = 20_000;

#[derive(Default)]
pub(crate) struct PollCache {
    generation: AtomicU64,
    listening: AtomicBool,
    views: Mutex<HashMap<AgentId, Cached>>,
    served: AtomicU64,
}

struct Cached {
    generation: u64,
    read_at: Instant,
    view: PollView,
}

impl PollCache {
    /// Something may have changed: every stored view is stale.
    pub(crate) fn changed(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Read before the database is read; pass to [`PollCache::keep`].
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Whether other processes' changes reach this one. Either way the generation moves:
    /// what happened while nobody listened is unknown.
    pub(crate) fn set_listening(&self, listening: bool) {
        self.listening.store(listening, Ordering::SeqCst);
        self.changed();
    }

    /// The agent's view, when one with nothing waiting is still current.
    pub(crate) fn get(&self, agent: AgentId) -> Option<PollView> {
        if !self.listening.load(Ordering::SeqCst) {
            return None;
        }
        let generation = self.generation();
        let views = self.views.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let cached = views.get(&agent)?;
        let current = cached.generation == generation && cached.read_at.elapsed() < VIEW_TTL;
        if current {
            self.served.fetch_add(1, Ordering::Relaxed);
        }
        current.then(|| cached.view.clone())
    }

    /// Keep a view read from the database after `generation` was read, if it has nothing
    /// waiting.
    pub(crate) fn keep(&self, agent: AgentId, generation: u64, read_at: Instant, view: &PollView) {
        if !view.waiting.is_empty() || !self.listening.load(Ordering::SeqCst) {
            return;
        }
        let mut views = self.views.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if views.len() >= MAX_AGENTS && !views.contains_key(&agent) {
            views.clear();
        }
        views.insert(agent, Cached { generation, read_at, view: view.clone() });
    }

    /// Forget every view and the map's room for them: the hub has gone quiet, and a view
    /// outlives [`VIEW_TTL`] only as memory the map holds.
    pub(crate) fn release(&self) {
        *self.views.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = HashMap::new();
    }

    /// Views served from memory since the start, for tests and measurements.
    pub(crate) fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use swarm_domain::poll::TriggerKind;
    use swarm_store::testkit::idle_worker_view as view;

    use super::*;

    /// A cache that hears other processes' changes, holding a current view of one agent.
    fn listening_with_one_view() -> (PollCache, AgentId) {
        let cache = PollCache::default();
        cache.set_listening(true);
        let agent = AgentId::new_v7();
        cache.keep(agent, cache.generation(), Instant::now(), &view(Vec::new()));
        (cache, agent)
    }

    #[test]
    fn serves_nothing_while_not_listening() {
        let cache = PollCache::default();
        let agent = AgentId::new_v7();
        cache.keep(agent, cache.generation(), Instant::now(), &view(Vec::new()));
        assert_eq!(cache.get(agent), None);
    }

    #[test]
    fn a_change_after_the_read_makes_the_view_stale() {
        let cache = PollCache::default();
        cache.set_listening(true);
        let agent = AgentId::new_v7();
        let before_read = cache.generation();
        cache.keep(agent, before_read, Instant::now(), &view(Vec::new()));
        assert!(cache.get(agent).is_some());
        cache.changed();
        assert_eq!(cache.get(agent), None);
        // A view read before the change, stored after it, is stale too.
        cache.keep(agent, before_read, Instant::now(), &view(Vec::new()));
        assert_eq!(cache.get(agent), None);
    }

    #[test]
    fn keeps_only_views_with_nothing_waiting_and_not_for_long() {
        let cache = PollCache::default();
        cache.set_listening(true);
        let agent = AgentId::new_v7();
        cache.keep(agent, cache.generation(), Instant::now(), &view(vec![TriggerKind::PoolTask]));
        assert_eq!(cache.get(agent), None);
        let long_ago = Instant::now().checked_sub(VIEW_TTL).unwrap();
        cache.keep(agent, cache.generation(), long_ago, &view(Vec::new()));
        assert_eq!(cache.get(agent), None);
    }

    #[test]
    fn losing_the_listener_drops_every_view() {
        let (cache, agent) = listening_with_one_view();
        cache.set_listening(false);
        cache.set_listening(true);
        assert_eq!(cache.get(agent), None);
    }

    #[test]
    fn a_release_forgets_every_view_and_later_ones_are_kept_again() {
        let (cache, agent) = listening_with_one_view();
        assert!(cache.get(agent).is_some());
        cache.release();
        assert_eq!(cache.get(agent), None);
        cache.keep(agent, cache.generation(), Instant::now(), &view(Vec::new()));
        assert!(cache.get(agent).is_some());
    }
}
