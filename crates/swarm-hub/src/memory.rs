//! Keeping the hub's resident memory to what it uses.
//!
//! Two things made an idle hub, or one that had just served a burst, hold far more than
//! it used (BENCHMARKS.md, "Memory"):
//! - glibc's malloc gives each thread that allocates under contention an arena of its own
//!   (up to eight per core), and memory freed in one arena serves only that arena's
//!   threads; and it returns freed memory to the OS only from the top of an arena. Fewer
//!   arenas (`mallopt`) and `malloc_trim`, which hands every free page back, answer both.
//! - SQLite's page caches, which the quiet hub does not need.
//!
//! So every [`TRIM_EVERY`] the trimmer hands free heap pages back, and once the hub has
//! been quiet for [`QUIET_AFTER`] (no request begun or ended, probes of `/health` and
//! scrapes of `/metrics` aside, and no change to its state, such as the rescue pass
//! marking agents offline) it also empties the store's caches, once per quiet spell
//! (start-up is the first). Both are memory the process allocated and gives back.
//!
//! The program's own code and constants, mapped from its file, are not touched: the hub
//! used to unmap them when quiet, which lowered its VmRSS but not what it needs (those
//! pages are mapped back on the next request, and the kernel can reclaim clean file
//! pages by itself when memory is short).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

/// How often freed memory is handed back: well within the minute in which a burst of
/// parked polls should give its memory back, rarely enough to cost nothing.
const TRIM_EVERY: Duration = Duration::from_secs(10);
/// How long a hub must have begun and answered no request, and changed nothing, before it
/// empties the store's caches: long enough that a hub at work does not empty and refill
/// them again and again.
const QUIET_AFTER: Duration = Duration::from_secs(5);
/// How often the trimmer looks at the request count.
const QUIET_CHECK_EVERY: Duration = Duration::from_secs(1);
/// Arenas glibc may create: one per core of the machines this is measured on was as fast,
/// and kept the soak's memory flat (BENCHMARKS.md).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENAS: libc::c_int = 2;

/// Cap glibc's arenas. Call it first thing in `main`, before any thread starts: arenas
/// already created stay.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a parameter of the allocator; M_ARENA_MAX takes any count.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}

/// Hand free memory back to the OS now.
fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes the arenas' locks itself and frees nothing in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Trims every [`TRIM_EVERY`] until dropped, and empties the store's caches each time the
/// hub has been quiet for [`QUIET_AFTER`], the first time after start-up.
pub(crate) struct Trimmer(tokio::task::JoinHandle<()>);

impl Trimmer {
    pub(crate) fn start(service: swarm_service::Service, metrics: Arc<swarm_api::Metrics>) -> Trimmer {
        Trimmer(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(QUIET_CHECK_EVERY);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // Start-up counts as activity: what it and the background work's first passes
            // (which on a busy machine may run a while after the hub listens) allocated is
            // released once the hub has been quiet for a while, as after any request.
            let activity = || metrics.requests_begun_and_answered() + service.changes_published();
            let (mut seen, mut quiet_since, mut released) = (activity(), Instant::now(), false);
            let mut trimmed = Instant::now();
            loop {
                ticks.tick().await;
                let now_seen = activity();
                if now_seen != seen {
                    (seen, quiet_since, released) = (now_seen, Instant::now(), false);
                } else if !released && quiet_since.elapsed() >= QUIET_AFTER {
                    release(&service).await;
                    (released, trimmed) = (true, Instant::now());
                }
                if trimmed.elapsed() >= TRIM_EVERY {
                    trim();
                    trimmed = Instant::now();
                }
            }
        }))
    }
}

/// Everything a quiet hub can give back: the store's caches, then the heap they freed.
async fn release(service: &swarm_service::Service) {
    if let Err(error) = service.release_store_memory().await {
        tracing::warn!(%error, "the store could not release its caches");
    }
    // Trimming every arena takes a millisecond or two: not on a worker.
    let _ = tokio::task::spawn_blocking(trim).await;
    tracing::debug!("quiet: memory released");
}

impl Drop for Trimmer {
    fn drop(&mut self) {
        self.0.abort();
    }
}
