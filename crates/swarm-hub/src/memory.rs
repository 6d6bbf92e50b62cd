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
//! So every [`TRIM_EVERY`] the trimmer hands free heap pages back, and once the hub has
//! been quiet for [`QUIET_AFTER`] (no request begun or ended, probes of `/health` and
//! scrapes of `/metrics` aside, and no change to its state, such as the rescue pass
//! marking agents offline) it also releases the program's pages and the store's
//! caches, once per quiet spell (start-up is the first): an idle hub's own periodic work (rescue passes,
//! schedules, checkpoints) maps back the little code it runs, and repeating the release
//! would only make it fault that in again.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

/// How often freed memory is handed back: well within the minute in which a burst of
/// parked polls should give its memory back, rarely enough to cost nothing.
const TRIM_EVERY: Duration = Duration::from_secs(10);
/// How long a hub must have begun and answered no request, and changed nothing, before it
/// gives back what only serving needs: long enough that a hub at work does not fault its code in again and
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

/// Unmap the pages of this program's own code and constants (its segments that are not
/// writable, less its relocated read-only data), which the kernel maps back from the file
/// cache when they are next used. Returns the bytes of the ranges released (not all of
/// them were resident).
///
/// The ranges come from the program's headers, read with `dl_iterate_phdr`, and are
/// released inside its callback, where glibc holds the loader's lock: no library can be
/// mapped over a range between the moment it is chosen and the `madvise`. Those pages are
/// never written (a position-independent program has no text relocations; one with them
/// is left alone), so `MADV_DONTNEED` only drops their mapping, where on a page the
/// process wrote it would discard the only copy. A segment of a mapping that holds a
/// private page all the same (a debugger's breakpoint, a uprobe) is left alone too.
pub(crate) fn release_program_pages() -> u64 {
    #[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
    {
        let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
            return 0;
        };
        let mut release = program::Release { written: mappings_with_private_pages(&smaps), released: 0 };
        // SAFETY: the callback reads the headers glibc passes it and writes only `release`,
        // which outlives the call; it releases only ranges it may (see `program`).
        unsafe {
            libc::dl_iterate_phdr(Some(program::release_main_program), (&raw mut release).cast());
        }
        release.released
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64")))]
    0
}

/// The `(start, end)` of each mapping in `smaps` that holds a private page, in memory
/// (`Anonymous`) or swapped out (`Swap`).
fn mappings_with_private_pages(smaps: &str) -> Vec<(u64, u64)> {
    let mut written = Vec::new();
    let mut current: Option<(u64, u64)> = None;
    for line in smaps.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) = (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
        {
            // A mapping's header: `start-end perms offset dev inode [path]`.
            current = Some((start, end));
        } else if (first == "Anonymous:" || first == "Swap:")
            && fields.next().is_some_and(|kb| kb != "0")
            && let Some(mapping) = current
            && written.last() != Some(&mapping)
        {
            written.push(mapping);
        }
    }
    written
}

#[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
mod program {
    use libc::{Elf64_Phdr, PF_W, PT_DYNAMIC, PT_GNU_RELRO, PT_LOAD, c_int, c_void, dl_phdr_info, size_t};

    /// `dynamic` entries' tags that say the program's code is written at load time.
    const DT_NULL: i64 = 0;
    const DT_TEXTREL: i64 = 22;
    const DT_FLAGS: i64 = 30;
    const DF_TEXTREL: u64 = 0x4;

    pub(super) struct Release {
        /// Mappings that hold a private page: nothing in them is released.
        pub(super) written: Vec<(u64, u64)>,
        pub(super) released: u64,
    }

    /// An entry of the `dynamic` section (`Elf64_Dyn`).
    #[repr(C)]
    struct Dynamic {
        tag: i64,
        value: u64,
    }

    /// `dl_iterate_phdr`'s callback: the first object it is given is the main program;
    /// returning 1 stops after it.
    pub(super) unsafe extern "C" fn release_main_program(
        info: *mut dl_phdr_info,
        _size: size_t,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: glibc passes a valid `dl_phdr_info` whose headers are `dlpi_phnum` long,
        // and `data` is the `Release` that `release_program_pages` passed.
        let (info, release) = unsafe { (&*info, &mut *data.cast::<Release>()) };
        let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
        let base = info.dlpi_addr;
        // SAFETY: the program's `dynamic` segment is mapped while the program runs.
        if unsafe { has_text_relocations(base, headers) } {
            return 1;
        }
        let page = page_size();
        let relro = headers.iter().find(|header| header.p_type == PT_GNU_RELRO).map(|header| {
            let start = base + header.p_vaddr;
            (start / page * page, (start + header.p_memsz).div_ceil(page) * page)
        });
        for header in headers.iter().filter(|header| header.p_type == PT_LOAD && header.p_flags & PF_W == 0) {
            let start = base + header.p_vaddr;
            // Whole pages of the segment only: a page it shares with its neighbour may be
            // the neighbour's.
            let (start, end) = (start.div_ceil(page) * page, (start + header.p_memsz) / page * page);
            let overlaps = |(from, to): (u64, u64)| from < end && start < to;
            if start >= end || relro.is_some_and(overlaps) || release.written.iter().copied().any(overlaps) {
                continue;
            }
            let length = (end - start) as usize;
            // SAFETY: whole pages of a read-only segment of the program, never written (no
            // text relocations, no private page in its mapping), mapped for as long as the
            // program runs; dropping their mapping loses nothing.
            if unsafe { libc::madvise(start as *mut c_void, length, libc::MADV_DONTNEED) } == 0 {
                release.released += end - start;
            }
        }
        1
    }

    /// Whether the object's `dynamic` section asks for its code to be relocated.
    ///
    /// # Safety
    /// `base` and `headers` must be a loaded object's, as `dl_iterate_phdr` gives them.
    unsafe fn has_text_relocations(base: u64, headers: &[Elf64_Phdr]) -> bool {
        let Some(dynamic) = headers.iter().find(|header| header.p_type == PT_DYNAMIC) else {
            return false;
        };
        let mut entry = (base + dynamic.p_vaddr) as *const Dynamic;
        loop {
            // SAFETY: the loader read this same array, which ends with `DT_NULL`.
            let Dynamic { tag, value } = unsafe { entry.read() };
            match tag {
                DT_NULL => return false,
                DT_TEXTREL => return true,
                DT_FLAGS if value & DF_TEXTREL != 0 => return true,
                _ => {}
            }
            entry = unsafe { entry.add(1) };
        }
    }

    fn page_size() -> u64 {
        // SAFETY: sysconf reads a constant of the system.
        u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(1)
    }
}

/// Trims every [`TRIM_EVERY`] until dropped, and releases the program's pages and the
/// store's caches each time the hub has been quiet for [`QUIET_AFTER`], the first time
/// after start-up (whose code is not needed again).
pub(crate) struct Trimmer(tokio::task::JoinHandle<()>);

impl Trimmer {
    pub(crate) fn start(service: swarm_service::Service, metrics: Arc<swarm_api::Metrics>) -> Trimmer {
        Trimmer(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(QUIET_CHECK_EVERY);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // Start-up counts as activity: its code, and the background work's first passes
            // (which on a busy machine may run a while after the hub listens), are released
            // once the hub has been quiet for a while, as after any request.
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

/// Everything a quiet hub can give back.
async fn release(service: &swarm_service::Service) {
    if let Err(error) = service.release_store_memory().await {
        tracing::warn!(%error, "the store could not release its caches");
    }
    // Reading `smaps` and trimming every arena take a millisecond or two: not on a worker.
    let released = tokio::task::spawn_blocking(|| {
        trim();
        release_program_pages()
    })
    .await;
    tracing::debug!(program_bytes = released.unwrap_or(0), "quiet: memory released");
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
Swap:                  0 kB
55ddf55b0000-55ddf7091000 r-xp 00788000 08:01 123 /usr/bin/swarm
Rss:                3788 kB
Anonymous:             4 kB
Swap:                  0 kB
55ddf7091000-55ddf7240000 r--p 02268000 08:01 123 /usr/bin/swarm
Rss:                   0 kB
Anonymous:             0 kB
Swap:               1708 kB
7f0000200000-7f0000300000 rw-p 00000000 00:00 0 
Anonymous:           512 kB
Swap:                 64 kB
";

    #[test]
    fn a_mapping_with_a_private_page_in_memory_or_in_swap_counts_as_written() {
        assert_eq!(
            mappings_with_private_pages(SMAPS),
            vec![
                (0x55dd_f55b_0000, 0x55dd_f709_1000),
                (0x55dd_f709_1000, 0x55dd_f724_0000),
                (0x7f00_0020_0000, 0x7f00_0030_0000),
            ],
            "code with a breakpoint's copy, relocated data swapped out, the heap (once)"
        );
    }

    #[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
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
