//! The poll's view, remembered while the database stays the same.
//!
//! An idle runner polls again and again and finds nothing: each poll read the same
//! fourteen index probes to learn what the last one learned. A view (`poll::view`) is a
//! function of the database's contents and the agent alone (it reads no clock), so while
//! no transaction commits it cannot change, and the last view of the agent is the answer.
//!
//! What proves that nothing committed is SQLite's `PRAGMA data_version`, read on one
//! connection of this store that never writes: its value changes when any other
//! connection commits, this store's writer or another process's on the same file (a
//! second hub, `swarm mcp`), and it is read at the start of a read transaction, so it
//! sees every commit made before. Each view is kept with the version read *before* the
//! view's own read began: a commit in between makes that version stale, never the view
//! newer than its version says, so a view is only ever served while it is exact. A version
//! that changed drops every kept view. Nothing here can hide work: the worst case, a
//! version that changes without a commit (a checkpoint resetting the WAL), costs a read.

use std::{
    collections::HashMap,
    path::Path,
    sync::{Mutex, MutexGuard, PoisonError},
};

use rusqlite::Connection;
use swarm_domain::id::AgentId;
use swarm_store::{PollView, StoreResult};

use crate::error::db;

pub(crate) struct ViewCache {
    /// Only ever reads `data_version`; gone once the store is closed.
    watcher: Mutex<Option<Connection>>,
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    version: i64,
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
        Ok(ViewCache { watcher: Mutex::new(Some(watcher)), kept: Mutex::default() })
    }

    /// The database's version as this store's watcher sees it now; none once closed.
    pub(crate) fn version(&self) -> StoreResult<Option<i64>> {
        let watcher = lock(&self.watcher);
        let Some(watcher) = watcher.as_ref() else { return Ok(None) };
        let mut statement = watcher.prepare_cached("PRAGMA data_version").map_err(db)?;
        statement.query_row([], |row| row.get(0)).map(Some).map_err(db)
    }

    /// Close the watcher's connection; views are read afresh from then on.
    pub(crate) fn close(&self) {
        lock(&self.watcher).take();
        lock(&self.kept).views.clear();
    }

    /// Forget every kept view and the map's room for them (the hub has gone quiet); the
    /// next poll of each agent reads the database.
    pub(crate) fn release(&self) {
        lock(&self.kept).views = HashMap::new();
    }

    /// The agent's view kept at `version`, if that is still the version.
    pub(crate) fn get(&self, version: i64, agent: AgentId) -> Option<PollView> {
        let kept = lock(&self.kept);
        if kept.version != version {
            return None;
        }
        kept.views.get(&agent).cloned()
    }

    /// Keep `view`, read after `version` was: a later version drops what was kept; a view
    /// read under an earlier one than the kept is not kept (it may be stale already).
    pub(crate) fn keep(&self, version: i64, agent: AgentId, view: &PollView) {
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
}
