//! The poll's view, remembered while the database stays the same.
//!
//! An idle runner polls again and again and finds nothing: each poll read the same
//! fourteen index probes to learn what the last one learned. A view (`poll::view`) is a
//! function of the database's contents and the agent alone (it reads no clock), so while
//! no transaction commits it cannot change, and the last view of the agent is the answer.
//!
//! What proves that nothing committed is the database's version, the wal-index header
//! (`wal_index.rs`): every commit of any connection, this store's writer or another
//! process's on the same file (a second hub, `swarm mcp`), writes a header not seen
//! before, and a read transaction begun after a header was read sees every commit before
//! it. A view is kept only if the version was the same before and after the view's read,
//! so it is exactly the database at that version, and it is served only while the version
//! is still that one; any other version replaces what was kept. Nothing here can hide
//! work: the worst case, a version that changes without a commit (the WAL starting over),
//! costs a read; a header caught mid-commit gives no version, and the poll reads the
//! database and keeps nothing. Where SQLite has no wal-index mapped, the version is
//! `PRAGMA data_version`, read on a connection of this store that never writes.

use std::{
    collections::HashMap,
    path::Path,
    sync::{Mutex, MutexGuard, PoisonError},
};

use rusqlite::Connection;
use swarm_domain::id::AgentId;
use swarm_store::{PollView, StoreResult};

use crate::{
    error::db,
    wal_index::{Header, WalIndex},
};

/// A committed state of the database: equal versions, the same contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Version {
    Header(Header),
    DataVersion(i64),
}

pub(crate) struct ViewCache {
    /// Open until the store closes; it keeps SQLite's mapping of the wal-index alive,
    /// and reads `data_version` where there is none.
    watcher: Mutex<Option<Connection>>,
    /// One lock for the views and the wal-index, so that a poll takes one lock, and the
    /// index is taken away (before the watcher closes) while no poll reads it.
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    /// SQLite's wal-index as mapped for `watcher`.
    wal_index: Option<WalIndex>,
    version: Option<Version>,
    views: HashMap<AgentId, PollView>,
    /// Views served from memory since the store opened.
    served: u64,
}

/// What a poll finds kept: the agent's view at the current version, or, when there is
/// none, the version to read the view under (none: read, and keep nothing).
pub(crate) enum Lookup {
    Kept(PollView),
    Read(Option<Version>),
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ViewCache {
    pub(crate) fn open(path: &Path) -> StoreResult<ViewCache> {
        let watcher = Connection::open(path).map_err(db)?;
        watcher.busy_timeout(crate::database::BUSY_TIMEOUT).map_err(db)?;
        watcher.pragma_update(None, "query_only", true).map_err(db)?;
        // A read in WAL mode maps the wal-index for this connection.
        let _: i64 = watcher.query_row("PRAGMA data_version", [], |row| row.get(0)).map_err(db)?;
        // SAFETY: the watcher stays open, in WAL mode, until `close`, which takes the
        // index away first, under the lock that every read of it holds.
        let wal_index = unsafe { WalIndex::of(&watcher) };
        Ok(ViewCache {
            watcher: Mutex::new(Some(watcher)),
            kept: Mutex::new(Kept { wal_index, ..Kept::default() }),
        })
    }

    /// The agent's view if one is kept at the database's current version.
    pub(crate) fn lookup(&self, agent: AgentId) -> StoreResult<Lookup> {
        let mut kept = lock(&self.kept);
        let version = match &kept.wal_index {
            Some(wal_index) => wal_index.header().map(Version::Header),
            None => {
                drop(kept);
                let version = self.data_version()?;
                kept = lock(&self.kept);
                version
            }
        };
        if version.is_none() || version != kept.version {
            return Ok(Lookup::Read(version));
        }
        match kept.views.get(&agent).cloned() {
            Some(view) => {
                kept.served += 1;
                Ok(Lookup::Kept(view))
            }
            None => Ok(Lookup::Read(version)),
        }
    }

    /// The database's version now; none once closed, or while a commit is rewriting the
    /// header.
    pub(crate) fn version(&self) -> StoreResult<Option<Version>> {
        if let Some(wal_index) = &lock(&self.kept).wal_index {
            return Ok(wal_index.header().map(Version::Header));
        }
        self.data_version()
    }

    fn data_version(&self) -> StoreResult<Option<Version>> {
        let watcher = lock(&self.watcher);
        let Some(watcher) = watcher.as_ref() else { return Ok(None) };
        let mut statement = watcher.prepare_cached("PRAGMA data_version").map_err(db)?;
        statement
            .query_row([], |row| row.get(0))
            .map(|version| Some(Version::DataVersion(version)))
            .map_err(db)
    }

    /// Close the watcher's connection; views are read afresh from then on.
    pub(crate) fn close(&self) {
        {
            let mut kept = lock(&self.kept);
            kept.wal_index = None;
            kept.views.clear();
        }
        lock(&self.watcher).take();
    }

    /// Forget every kept view and the map's room for them (the hub has gone quiet); the
    /// next poll of each agent reads the database.
    pub(crate) fn release(&self) {
        lock(&self.kept).views = HashMap::new();
    }

    /// Views served from memory since the store opened.
    pub(crate) fn served(&self) -> u64 {
        lock(&self.kept).served
    }

    /// Keep `view`, read while the version was `version` from before its read to after
    /// it; any other version kept before is dropped with its views.
    pub(crate) fn keep(&self, version: Version, agent: AgentId, view: &PollView) {
        let mut kept = lock(&self.kept);
        if kept.version != Some(version) {
            kept.version = Some(version);
            kept.views.clear();
        }
        kept.views.insert(agent, view.clone());
    }
}

#[cfg(test)]
mod tests {
    use swarm_store::testkit::idle_worker_view;

    use super::*;

    #[test]
    fn a_release_forgets_the_kept_views() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ViewCache::open(&dir.path().join("views.db")).unwrap();
        let agent = AgentId::new_v7();
        let view = idle_worker_view(Vec::new());
        let kept = |cache: &ViewCache| match cache.lookup(agent).unwrap() {
            Lookup::Kept(view) => Some(view),
            Lookup::Read(_) => None,
        };
        let version = cache.version().unwrap().unwrap();
        cache.keep(version, agent, &view);
        assert_eq!(kept(&cache), Some(view.clone()));
        assert_eq!(cache.served(), 1);
        cache.release();
        assert_eq!(kept(&cache), None, "the next poll reads the database");
        cache.keep(version, agent, &view);
        assert_eq!(kept(&cache), Some(view));
        cache.keep(
            Version::DataVersion(-1),
            agent,
            &PollView { max_tasks: 2, ..idle_worker_view(Vec::new()) },
        );
        assert_eq!(kept(&cache), None, "kept at another version: not served");
    }

    /// A WAL database with a table, another connection to it, and a cache on it.
    fn cache_beside_another_connection() -> (tempfile::TempDir, Connection, ViewCache) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("views.db");
        let other = Connection::open(&path).unwrap();
        other.pragma_update(None, "journal_mode", "WAL").unwrap();
        other.execute_batch("CREATE TABLE notes (text TEXT)").unwrap();
        let cache = ViewCache::open(&path).unwrap();
        (dir, other, cache)
    }

    #[test]
    fn the_version_holds_while_nothing_commits_and_moves_with_another_connection_s_commit() {
        let (_dir, other, cache) = cache_beside_another_connection();
        let version = cache.version().unwrap().unwrap();
        assert!(matches!(version, Version::Header(_)), "read from the wal-index, not with a lock");
        assert_eq!(cache.version().unwrap(), Some(version));
        other.execute("INSERT INTO notes VALUES ('a')", []).unwrap();
        let next = cache.version().unwrap().unwrap();
        assert_ne!(next, version);
        cache.close();
        assert_eq!(cache.version().unwrap(), None, "closed: every poll reads");
    }

    /// Closing any descriptor of a file drops every POSIX lock the process holds on it:
    /// the cache must read the wal-index without opening `-shm` itself, or SQLite's lock
    /// that tells other processes the wal-index is in use would be gone.
    #[cfg(target_os = "linux")]
    #[test]
    fn opening_the_cache_leaves_sqlite_s_locks_on_the_wal_index_in_place() {
        use std::os::fd::IntoRawFd;
        let (dir, other, cache) = cache_beside_another_connection();
        assert!(matches!(cache.version().unwrap(), Some(Version::Header(_))));

        // Never closed, for the reason above.
        let probe = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.path().join("views.db-shm"))
            .unwrap()
            .into_raw_fd();
        // SAFETY: a zeroed `flock` is a valid value of this plain C struct.
        let mut lock: libc::flock = unsafe { std::mem::zeroed() };
        lock.l_type = libc::F_WRLCK as _;
        lock.l_whence = libc::SEEK_SET as _;
        // SQLite's "DMS" byte of the wal-index (os_unix.c), read-locked while open.
        lock.l_start = 128;
        lock.l_len = 1;
        // SAFETY: an open descriptor and a valid `flock` the kernel writes into.
        assert_eq!(unsafe { libc::fcntl(probe, libc::F_OFD_GETLK, &mut lock) }, 0);
        assert_eq!(i32::from(lock.l_type), libc::F_RDLCK, "SQLite's lock on the wal-index is held");
        drop(other);
    }
}
