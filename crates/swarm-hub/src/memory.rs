//! Keeping the hub's resident memory to what it uses, with glibc's allocator.
//!
//! Two habits of glibc's malloc made a long-running hub look like it leaked (BENCHMARKS.md,
//! "Memory"): it gives each thread that allocates under contention an arena of its own (up
//! to eight per core), and memory freed in one arena serves only the threads of that arena,
//! so work that moves between threads (tokio's workers, the blocking pool, SQLite's
//! connections) leaves every arena at its own high-water mark; and it returns freed memory
//! to the OS only from the top of an arena, so a thousand parked polls that end leave
//! their pages resident. Both have a switch: fewer arenas (`mallopt`), and `malloc_trim`,
//! which hands every free page of every arena back.

use std::time::Duration;

/// How often freed memory is handed back: well within the minute in which a burst of
/// parked polls should give its memory back, rarely enough to cost nothing.
const TRIM_EVERY: Duration = Duration::from_secs(10);
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

/// Trims at once (what building the hub freed) and then every [`TRIM_EVERY`], until
/// dropped.
pub(crate) struct Trimmer(tokio::task::JoinHandle<()>);

impl Trimmer {
    pub(crate) fn start() -> Trimmer {
        Trimmer(tokio::spawn(async {
            let mut ticks = tokio::time::interval(TRIM_EVERY);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                trim();
            }
        }))
    }
}

impl Drop for Trimmer {
    fn drop(&mut self) {
        self.0.abort();
    }
}
