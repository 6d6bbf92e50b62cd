//! Keeping the hub's resident memory to what it uses.
//!
//! Three things made an idle hub, or one that had just served a burst, hold far more than
//! it used (BENCHMARKS.md, "Memory"):
//! - glibc's malloc gives each thread that allocates under contention an arena of its own
//!   (up to eight per core), and memory freed in one arena serves only that arena's
//!   threads; and it returns freed memory to the OS only from the top of an arena. Fewer
//!   arenas (`mallopt`) and `malloc_trim`, which hands every free page back, answer both.
//! - The program's own code and read-only data are mapped from its file, and the kernel
//!   maps 64 kB around every page the program touches. Start-up runs code of nearly every
//!   crate once (the command line's parser, the API's router and description, the MCP
//!   tools' schemas), and a burst of requests brings in the code of every route it used;
//!   those pages stayed in the hub's resident set for good, about 17 MB of a 26 MB idle
//!   hub. Once the hub is quiet, [`release_program_pages`] unmaps them: they stay in the
//!   file cache, where the kernel can reclaim them, and a page needed again is mapped
//!   back with a minor fault (no disk read while the cache has it).
//! - SQLite's page caches, which the quiet hub does not need either.
//!
//! So every [`TRIM_EVERY`] the trimmer hands free heap pages back, and once no request has
//! begun or ended for [`QUIET_AFTER`] it also releases the program's pages and the store's
//! caches, once per quiet spell: an idle hub's own periodic work (rescue passes,
//! schedules, checkpoints) maps back the little code it runs, and repeating the release
//! would only make it fault that in again.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

/// How often freed memory is handed back: well within the minute in which a burst of
/// parked polls should give its memory back, rarely enough to cost nothing.
const TRIM_EVERY: Duration = Duration::from_secs(10);
/// How long a hub must have begun and answered no request before it gives back what only
/// serving needs: long enough that a hub at work does not fault its code in again and
/// again (a request now and then costs a few hundred minor faults after a release).
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

/// Unmap the pages of this process's read-only file mappings (its program and shared
/// libraries' code and constants) that were never written: the kernel maps them back
/// from the file cache when they are next used. Returns the bytes of the mappings
/// released (not all of them were resident).
///
/// Only mappings that are private, not writable and hold no anonymous page qualify: for
/// them `MADV_DONTNEED` only drops the mapping of file pages, whereas a page the process
/// (or the loader, relocating `.data.rel.ro`) wrote is a private copy that it would
/// discard.
pub(crate) fn release_program_pages() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
            return 0;
        };
        let mut released = 0;
        for (start, end) in clean_file_mappings(&smaps) {
            // SAFETY: the range is one whole mapping of this process, read-only and with no
            // private copy of a page, so dropping its pages loses nothing: the next access
            // maps the file's page again, as on first use.
            let dropped =
                unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
            if dropped == 0 {
                released += (end - start) as u64;
            }
        }
        released
    }
    #[cfg(not(target_os = "linux"))]
    0
}

/// The `(start, end)` of each mapping in `smaps` that [`release_program_pages`] may release.
fn clean_file_mappings(smaps: &str) -> Vec<(usize, usize)> {
    let mut clean = Vec::new();
    let mut current: Option<(usize, usize)> = None;
    for line in smaps.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) = (usize::from_str_radix(start, 16), usize::from_str_radix(end, 16))
        {
            // A mapping's header: `start-end perms offset dev inode [path]`.
            let perms = fields.next().unwrap_or("");
            let path = fields.nth(3).unwrap_or("");
            current = (perms.len() == 4
                && perms.starts_with('r')
                && !perms.contains('w')
                && perms.ends_with('p')
                && path.starts_with('/'))
            .then_some((start, end));
        } else if first == "Anonymous:"
            && let Some(mapping) = current.take()
            && fields.next() == Some("0")
        {
            clean.push(mapping);
        }
    }
    clean
}

/// Trims every [`TRIM_EVERY`] until dropped, and releases the program's pages and the
/// store's caches at once (start-up's code is not needed again) and then each time the
/// hub has been quiet for [`QUIET_AFTER`].
pub(crate) struct Trimmer(tokio::task::JoinHandle<()>);

impl Trimmer {
    pub(crate) fn start(service: swarm_service::Service, metrics: Arc<swarm_api::Metrics>) -> Trimmer {
        Trimmer(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(QUIET_CHECK_EVERY);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await;
            release(&service).await;
            let (mut seen, mut quiet_since, mut released) =
                (metrics.requests_begun_and_answered(), Instant::now(), true);
            let mut trimmed = Instant::now();
            loop {
                ticks.tick().await;
                let requests = metrics.requests_begun_and_answered();
                if requests != seen {
                    (seen, quiet_since, released) = (requests, Instant::now(), false);
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

/// Everything a quiet hub can give back.
async fn release(service: &swarm_service::Service) {
    if let Err(error) = service.release_store_memory().await {
        tracing::warn!(%error, "the store could not release its caches");
    }
    trim();
    let bytes = release_program_pages();
    tracing::debug!(released_mappings_bytes = bytes, "quiet: memory released");
}

impl Drop for Trimmer {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55ddf4e28000-55ddf55b0000 r--p 00000000 08:01 123 /usr/bin/swarm
Rss:                 828 kB
Anonymous:             0 kB
55ddf55b0000-55ddf7091000 r-xp 00788000 08:01 123 /usr/bin/swarm
Rss:                3788 kB
Anonymous:             0 kB
55ddf7091000-55ddf7240000 r--p 02268000 08:01 123 /usr/bin/swarm
Rss:                1708 kB
Anonymous:          1708 kB
55ddf7240000-55ddf7247000 rw-p 02417000 08:01 123 /usr/bin/swarm
Anonymous:            28 kB
7f0000000000-7f0000100000 r--s 00000000 08:01 456 /data/swarm.db
Anonymous:             0 kB
7f0000200000-7f0000300000 rw-p 00000000 00:00 0 
Anonymous:           512 kB
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
Anonymous:             0 kB
";

    #[test]
    fn only_read_only_private_file_mappings_without_a_written_page_are_released() {
        assert_eq!(
            clean_file_mappings(SMAPS),
            vec![(0x55dd_f4e2_8000, 0x55dd_f55b_0000), (0x55dd_f55b_0000, 0x55dd_f709_1000)],
            "the program's constants and code; not its relocated data, its data, a shared \
             mapping, the heap or the vdso"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn releasing_the_program_s_pages_shrinks_the_resident_set_and_the_program_still_runs() {
        fn program_rss_kb() -> u64 {
            let exe = std::fs::read_link("/proc/self/exe").unwrap();
            let exe = exe.to_str().unwrap();
            let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
            let (mut total, mut ours) = (0, false);
            for line in smaps.lines() {
                if line.split_ascii_whitespace().next().is_some_and(|first| first.contains('-')) {
                    ours = line.ends_with(exe);
                } else if ours && let Some(kb) = line.strip_prefix("Rss:") {
                    total += kb.trim().trim_end_matches(" kB").parse::<u64>().unwrap();
                }
            }
            total
        }
        let before = program_rss_kb();
        assert!(release_program_pages() > 0, "the test program has clean file mappings");
        let after = program_rss_kb();
        assert!(after < before, "the program's resident pages went from {before} kB to {after} kB");
        // Code and constants come back on use: formatting and parsing still work.
        let words: Vec<String> = "quiet hub".split(' ').map(str::to_uppercase).collect();
        assert_eq!(words.join("-"), "QUIET-HUB");
    }
}
