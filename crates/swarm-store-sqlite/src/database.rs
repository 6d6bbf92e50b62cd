//! The connections of one store: a writer thread that owns the only connection that
//! writes (`writer.rs`), a pool of readers used on the caller's thread, and a
//! checkpointer.
//!
//! Reads need no lock (WAL): point reads run on the caller's thread, where they take
//! tens of microseconds; long listings go to tokio's blocking pool.
//!
//! The WAL is checkpointed by a thread of its own (`PRAGMA wal_checkpoint(PASSIVE)`),
//! never inside a request's `COMMIT`, so the `fsync`s of a checkpoint do not land on
//! whoever happened to cross SQLite's auto-checkpoint threshold. When the WAL has grown,
//! the writer copies the last few frames between two groups so that the WAL starts over
//! (see [`run_checkpointer`]): under steady writes it otherwise grew without end.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex, mpsc},
    thread,
    time::Duration,
};

use rusqlite::Connection;
use swarm_store::{StoreError, StoreResult};
use tokio::sync::oneshot;

use crate::{
    error::db,
    writer::{Command, Job, run_writer},
    writer_usage::WriterCounters,
};

/// How long a connection waits for another process's write lock before failing.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle reader connections kept open, at least.
const MIN_IDLE_READERS: usize = 8;
/// Snapshot reads (listings) running at once, at least; more wait for a turn.
const MIN_SNAPSHOT_READS: usize = 4;
/// How often the checkpointer copies the WAL back into the database file.
const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);
/// WAL size (in pages, 64 MiB) past which the writer finishes a checkpoint so that the WAL
/// starts over. Each time, the writer stops for two `fsync`s and the next commit pays a
/// third (5 to 20 ms on this VM's disk, every write queued behind them): at SQLite's own
/// threshold (1,000 pages) that came every second under the soak's mixed load. 16 times
/// the threshold, 16 times fewer stalls; the WAL file keeps its 64 MiB.
const WAL_RESTART_FRAMES: i64 = 16_384;
/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 64;
pub(crate) struct Database {
    path: PathBuf,
    writer: mpsc::Sender<Command>,
    readers: Mutex<Vec<Connection>>,
    /// Idle readers kept: as many as can be reading at once (see [`Database::open`]), so
    /// that none is opened and closed again under load.
    max_idle_readers: usize,
    /// Turns for snapshot reads on the blocking pool.
    snapshots: Arc<tokio::sync::Semaphore>,
    /// Dropping it stops the checkpointer.
    _checkpointer: mpsc::Sender<()>,
    writer_counters: Arc<WriterCounters>,
}

impl Database {
    /// Open the file (it must exist and be migrated) and start the writer and checkpointer;
    /// `wal_batching`: the writer opens it through the VFS of `wal_appends.rs`.
    pub(crate) fn open(path: &Path, wal_batching: bool) -> StoreResult<Database> {
        // SAFETY: sets a process-wide limit that SQLite reads under its own mutex; any value
        // is valid (the last store opened sets the same one).
        unsafe {
            rusqlite::ffi::sqlite3_soft_heap_limit64(SOFT_HEAP_LIMIT_BYTES);
        }
        let writer_connection = open_connection(path, Role::Writer { wal_batching }).map_err(db)?;
        let (writer, commands) = mpsc::channel();
        let writer_counters = Arc::new(WriterCounters::default());
        let counted = Arc::clone(&writer_counters);
        thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || run_writer(writer_connection, commands, &counted))
            .map_err(|error| StoreError::Backend(Box::new(error)))?;

        let checkpoint_connection = open_connection(path, Role::Checkpointer).map_err(db)?;
        let (checkpointer, stop) = mpsc::channel();
        let finish_on_writer = writer.clone();
        thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || run_checkpointer(checkpoint_connection, stop, finish_on_writer))
            .map_err(|error| StoreError::Backend(Box::new(error)))?;

        // Readers run on the runtime's worker threads (point reads, one per core) and on
        // blocking threads (snapshot reads, bounded here). Unbounded, the soak's listings on
        // a busy machine kept twenty blocking threads busy, each opening a reader past the
        // idle ones and closing it after: every open parses the schema and allocates a
        // page cache on whichever thread, and the hub's memory grew with the churn.
        let cores = thread::available_parallelism().map_or(2, usize::from);
        let snapshot_reads = cores.max(MIN_SNAPSHOT_READS);
        Ok(Database {
            path: path.to_path_buf(),
            writer,
            readers: Mutex::new(Vec::new()),
            max_idle_readers: (cores + snapshot_reads).max(MIN_IDLE_READERS),
            snapshots: Arc::new(tokio::sync::Semaphore::new(snapshot_reads)),
            _checkpointer: checkpointer,
            writer_counters,
        })
    }

    /// What the writer thread has done since it started.
    pub(crate) fn writer_usage(&self) -> swarm_store::WriterUsage {
        self.writer_counters.usage()
    }

    /// Run `work` as one write transaction (`BEGIN IMMEDIATE`) on the writer thread.
    /// An `Err` from `work` rolls back its changes; `Ok` is returned once committed.
    /// `work` may run more than once (only the last run's changes are kept), so it must
    /// act on the database alone.
    pub(crate) async fn write<T, F>(&self, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: Fn(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let (answer, answered) = oneshot::channel();
        let job = Box::new(Job { work, result: None, answer });
        self.writer.send(Command::Write(job)).map_err(|_| writer_gone())?;
        answered.await.map_err(|_| writer_gone())?
    }

    /// Run `work` on the writer's connection outside any transaction.
    pub(crate) async fn on_writer<T, F>(&self, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let (answer, answered) = oneshot::channel();
        let job = Box::new(move |connection: &Connection| {
            let _ = answer.send(work(connection));
        });
        self.writer.send(Command::Plain(job)).map_err(|_| writer_gone())?;
        answered.await.map_err(|_| writer_gone())?
    }

    /// Bring the index of events by agent up to date now (tests; the writer does it by
    /// itself a few times a second while writes go on).
    pub(crate) async fn index_agent_events(&self) -> StoreResult<()> {
        let (answer, answered) = oneshot::channel();
        self.writer.send(Command::IndexAgentEvents(answer)).map_err(|_| writer_gone())?;
        answered.await.map_err(|_| writer_gone())?
    }

    /// Empty every connection's page cache (`PRAGMA shrink_memory`): the writer's between
    /// two groups, and the idle readers'. A reader in use keeps its cache until next time.
    pub(crate) async fn release_memory(&self) -> StoreResult<()> {
        const SHRINK: &str = "PRAGMA shrink_memory";
        self.on_writer(|connection| connection.execute_batch(SHRINK).map_err(db)).await?;
        let idle = self.readers.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for connection in idle.iter() {
            if let Err(error) = connection.execute_batch(SHRINK) {
                tracing::warn!(%error, "a SQLite reader could not release its cache");
            }
        }
        Ok(())
    }

    /// Run a short read on the calling thread.
    pub(crate) fn read<T>(&self, work: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        let connection = self.take_reader()?;
        let result = work(&connection);
        self.return_reader(connection);
        result
    }

    /// Run a read that may take a while (a page of a listing) on tokio's blocking pool,
    /// inside one read transaction so that all of its statements see one snapshot.
    pub(crate) async fn read_snapshot<T, F>(self: &Arc<Self>, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let database = Arc::clone(self);
        let turn = Arc::clone(&self.snapshots)
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Backend("the store's snapshot reads were closed".into()))?;
        tokio::task::spawn_blocking(move || {
            // Held until the read is done, even when the caller stops waiting for it.
            let _turn = turn;
            database.read(|connection| {
                let snapshot = connection.unchecked_transaction().map_err(db)?;
                let result = work(&snapshot)?;
                snapshot.commit().map_err(db)?;
                Ok(result)
            })
        })
        .await
        .map_err(|error| StoreError::Backend(Box::new(error)))?
    }

    /// Stop the writer once the transactions already sent are done, and close every
    /// connection of this store.
    pub(crate) async fn close(&self) {
        let (stopped, on_stopped) = oneshot::channel();
        if self.writer.send(Command::Stop(stopped)).is_ok() {
            let _ = on_stopped.await;
        }
        self.readers.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clear();
    }

    fn take_reader(&self) -> StoreResult<Connection> {
        let idle = self.readers.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).pop();
        match idle {
            Some(connection) => Ok(connection),
            None => open_connection(&self.path, Role::Reader).map_err(db),
        }
    }

    fn return_reader(&self, connection: Connection) {
        let mut idle = self.readers.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if idle.len() < self.max_idle_readers {
            idle.push(connection);
        }
    }
}

fn writer_gone() -> StoreError {
    StoreError::Backend("the SQLite writer has stopped (the store was closed)".into())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Writer { wal_batching: bool },
    Reader,
    Checkpointer,
}

/// What SQLite may hold in this process, all connections together, before their page
/// caches give back pages rather than take new ones (`sqlite3_soft_heap_limit64`).
///
/// Each connection's `cache_size` bounds its own cache, but not how many connections
/// fill theirs: in the soak, SQLite's memory rose from 1 MB idle to 5.9 MB after a minute
/// and 8.1 MB after four as the writer's and each reader's cache filled with the growing
/// tables, and the hub's memory with it (BENCHMARKS.md, the soak). With one bound for the
/// process it stops at this, whatever the number of readers; at 6 MiB it still grew
/// through the soak's second minute. A page a cache gives up is read again from the OS's
/// file cache.
const SOFT_HEAP_LIMIT_BYTES: i64 = 4 * 1024 * 1024;

/// A reader's page cache, in KiB (a negative `cache_size` is KiB).
const READER_CACHE_KIB: i64 = -512;
/// The checkpointer copies WAL pages into the file: it needs hardly any cache.
const CHECKPOINTER_CACHE_KIB: i64 = -128;

fn open_connection(path: &Path, role: Role) -> rusqlite::Result<Connection> {
    let connection = match role {
        // One `write` per commit for the WAL's frames (see `wal_appends.rs`), when asked:
        // off by default (experimental; `scripts/power-loss` runs it on and off).
        Role::Writer { wal_batching: true } => crate::wal_appends::open_writer(path)?,
        Role::Writer { wal_batching: false } | Role::Reader | Role::Checkpointer => Connection::open(path)?,
    };
    connection.busy_timeout(BUSY_TIMEOUT)?;
    connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    connection.pragma_update(None, "foreign_keys", true)?;
    // WAL with FULL: the WAL is synced before a commit returns, so what the hub
    // acknowledged survives a power cut too (`scripts/power-loss`, docs/reliability.md).
    // NORMAL syncs only at checkpoints: a power cut took back up to the last second of
    // acknowledged writes. The writer commits a group of requests at once, so the sync is
    // paid once per group.
    connection.pragma_update(None, "synchronous", "FULL")?;
    // Savepoint journals (one per job of a group) and sort space stay in memory: on disk
    // they cost a write of every page a job touches.
    connection.pragma_update(None, "temp_store", "MEMORY")?;
    match role {
        Role::Writer { .. } => {
            // Checkpoints are the checkpointer's job, off the commit path.
            connection.pragma_update(None, "wal_autocheckpoint", 0)?;
        }
        Role::Reader => {
            connection.pragma_update(None, "query_only", true)?;
            // SQLite's default page cache (2 MB) on each of up to ten connections filled
            // as the database grew, and the hub's memory with it (BENCHMARKS.md, the
            // soak). Readers find pages the writer just wrote in the OS's file cache.
            connection.pragma_update(None, "cache_size", READER_CACHE_KIB)?;
        }
        Role::Checkpointer => connection.pragma_update(None, "cache_size", CHECKPOINTER_CACHE_KIB)?,
    }
    Ok(connection)
}

fn run_checkpointer(connection: Connection, stop: mpsc::Receiver<()>, writer: mpsc::Sender<Command>) {
    loop {
        match stop.recv_timeout(CHECKPOINT_INTERVAL) {
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // PASSIVE: copies what no reader still needs, never waits for the writer.
                let outcome =
                    connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| row.get::<_, i64>(1));
                match outcome {
                    // SQLite starts the WAL over only when a write transaction begins with
                    // every frame checkpointed. Under a steady stream of writes some commit
                    // always lands while this copy runs, so the WAL would grow without end,
                    // and appending to a growing file costs the writer a block allocation per
                    // page. The writer finishes the copy between two groups (a few frames
                    // and an fsync), and its next transaction starts the WAL over.
                    Ok(log_frames) if log_frames >= WAL_RESTART_FRAMES => {
                        if writer.send(Command::FinishCheckpoint).is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "SQLite checkpoint failed; will retry"),
                }
            }
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQLite's heap in use, process-wide (nextest runs each test in a process of its own).
    fn sqlite_heap_bytes() -> i64 {
        // SAFETY: a read of SQLite's own counter, under its mutex.
        unsafe { rusqlite::ffi::sqlite3_memory_used() }
    }

    #[tokio::test]
    async fn releasing_memory_empties_the_connections_caches_and_the_data_stays() {
        for wal_batching in [false, true] {
            releasing_memory_empties_the_caches(wal_batching).await;
        }
    }

    async fn releasing_memory_empties_the_caches(wal_batching: bool) {
        let dir = tempfile::tempdir().unwrap();
        let database = Database::open(&dir.path().join("cache.db"), wal_batching).unwrap();
        database
            .write(|connection| {
                connection
                    .execute_batch("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, body TEXT)")
                    .map_err(db)?;
                for id in 0..4_000 {
                    connection
                        .execute("INSERT OR IGNORE INTO rows VALUES (?1, ?2)", (id, "x".repeat(200)))
                        .map_err(db)?;
                }
                Ok(())
            })
            .await
            .unwrap();
        let count_rows = |connection: &Connection| {
            connection.query_row("SELECT count(*), sum(length(body)) FROM rows", [], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?))
            })
        };
        assert_eq!(database.read(|connection| count_rows(connection).map_err(db)).unwrap(), (4_000, 800_000));
        let cached = sqlite_heap_bytes();

        database.release_memory().await.unwrap();
        let released = sqlite_heap_bytes();
        assert!(
            released < cached - 500_000,
            "the writer's and the reader's pages of the table (about 1 MB) are given back: \
             {cached} bytes before, {released} after"
        );
        assert_eq!(database.read(|connection| count_rows(connection).map_err(db)).unwrap(), (4_000, 800_000));
        database.close().await;
    }
}
