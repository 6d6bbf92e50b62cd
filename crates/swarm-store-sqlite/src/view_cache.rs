//! The poll's view, remembered while the database stays the same.
//!
//! An idle runner polls again and again and finds nothing: each poll read the same
//! fourteen index probes to learn what the last one learned. A view (`poll::view`) is a
//! function of the database's contents and the agent alone (it reads no clock), so while
//! no transaction commits it cannot change, and the last view of the agent is the answer.
//!
//! What proves that nothing committed is the database's committed state as the wal-index
//! header names it (`wal_index.rs`): it moves with every commit of any connection, this
//! store's writer or another process's on the same file (a second hub, `swarm mcp`), and
//! a read transaction begun after it was read sees every commit it counts. Each view is
//! kept with the version read *before* the view's own read began: a commit in between
//! makes that version stale, never the view newer than its version says, so a view is
//! only ever served while it is exact. A version that changed drops every kept view.
//! Nothing here can hide work: the worst case, a version that changes without a commit
//! (the WAL starting over), costs a read; a header caught mid-commit gives no version,
//! and the poll reads the database. Where the wal-index cannot be mapped, the version is
//! SQLite's `PRAGMA data_version`, read on a connection of this store that never writes.

use std::{
    collections::HashMap,
    path::Path,
    sync::{
        Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use rusqlite::Connection;
use swarm_domain::id::AgentId;
use swarm_store::{PollView, StoreResult};

use crate::{error::db, wal_index::WalIndex};

pub(crate) struct ViewCache {
    /// Only ever reads `data_version`; gone once the store is closed. Open as long as
    /// the store is, which keeps `wal_index`'s file in place (see there).
    watcher: Mutex<Option<Connection>>,
    /// The versions' source where the database has one to map.
    wal_index: Option<WalIndex>,
    closed: AtomicBool,
    kept: Mutex<Kept>,
    /// Views served from memory since the store opened.
    served: AtomicU64,
}

#[derive(Default)]
struct Kept {
    version: u64,
    views: HashMap<AgentId, PollView>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ViewCache {
    pub(crate) fn open(path: &Path) -> StoreResult<ViewCache> {
        let watcher = Connection::open(path).map_err(db)?;
        watcher.busy_timeout(crate::database::BUSY_TIMEOUT).map_err(db)?;
        watcher.pragma_update(None, "query_only", true).map_err(db)?;
        // A read in WAL mode opens the wal-index, so its file exists before it is mapped.
        let _: i64 = watcher.query_row("PRAGMA data_version", [], |row| row.get(0)).map_err(db)?;
        let wal_index = watcher.path().and_then(|path| WalIndex::map(Path::new(path)));
        Ok(ViewCache {
            watcher: Mutex::new(Some(watcher)),
            wal_index,
            closed: AtomicBool::new(false),
            kept: Mutex::default(),
            served: AtomicU64::new(0),
        })
    }

    /// The database's version now; none once closed, or while a commit is being
    /// published (the caller reads the database and keeps nothing).
    pub(crate) fn version(&self) -> StoreResult<Option<u64>> {
        if self.closed.load(Ordering::Acquire) {
            return Ok(None);
        }
        if let Some(wal_index) = &self.wal_index {
            return Ok(wal_index.committed_state());
        }
        let watcher = lock(&self.watcher);
        let Some(watcher) = watcher.as_ref() else { return Ok(None) };
        let mut statement = watcher.prepare_cached("PRAGMA data_version").map_err(db)?;
        statement.query_row([], |row| row.get::<_, i64>(0)).map(|version| Some(version as u64)).map_err(db)
    }

    /// Close the watcher's connection; views are read afresh from then on.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        lock(&self.watcher).take();
        lock(&self.kept).views.clear();
    }

    /// Forget every kept view and the map's room for them (the hub has gone quiet); the
    /// next poll of each agent reads the database.
    pub(crate) fn release(&self) {
        lock(&self.kept).views = HashMap::new();
    }

    /// The agent's view kept at `version`, if that is still the version.
    pub(crate) fn get(&self, version: u64, agent: AgentId) -> Option<PollView> {
        let kept = lock(&self.kept);
        if kept.version != version {
            return None;
        }
        let view = kept.views.get(&agent).cloned();
        if view.is_some() {
            self.served.fetch_add(1, Ordering::Relaxed);
        }
        view
    }

    /// Views served from memory since the store opened.
    pub(crate) fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// Keep `view`, read after `version` was: a later version drops what was kept; a view
    /// read under an earlier one than the kept is not kept (it may be stale already).
    pub(crate) fn keep(&self, version: u64, agent: AgentId, view: &PollView) {
        let mut kept = lock(&self.kept);
        if version > kept.version {
            kept.version = version;
            kept.views.clear();
        }
        if version == kept.version {
            kept.views.insert(agent, view.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use swarm_domain::{agent::AgentStatus, time::Timestamp};

    use super::*;

    #[test]
    fn a_release_forgets_the_kept_views() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ViewCache::open(&dir.path().join("views.db")).unwrap();
        let agent = AgentId::new_v7();
        let view = PollView {
            is_lead: false,
            status: AgentStatus::Idle,
            last_seen_at: Timestamp::now(),
            in_progress: 0,
            max_tasks: 1,
            waiting: Vec::new(),
        };
        cache.keep(7, agent, &view);
        assert_eq!(cache.get(7, agent), Some(view.clone()));
        cache.release();
        assert_eq!(cache.get(7, agent), None, "the next poll reads the database");
        cache.keep(7, agent, &view);
        assert_eq!(cache.get(7, agent), Some(view));
    }

    #[test]
    fn the_version_holds_while_nothing_commits_and_moves_with_another_connection_s_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("versions.db");
        let other = Connection::open(&path).unwrap();
        other.pragma_update(None, "journal_mode", "WAL").unwrap();
        other.execute_batch("CREATE TABLE notes (text TEXT)").unwrap();
        let cache = ViewCache::open(&path).unwrap();
        assert!(cache.wal_index.is_some(), "read from the wal-index, not with a lock");

        let version = cache.version().unwrap().unwrap();
        assert_eq!(cache.version().unwrap(), Some(version));
        other.execute("INSERT INTO notes VALUES ('a')", []).unwrap();
        let next = cache.version().unwrap().unwrap();
        assert!(next > version);
        cache.close();
        assert_eq!(cache.version().unwrap(), None, "closed: every poll reads");
    }
}
