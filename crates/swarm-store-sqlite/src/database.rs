//! The connections of one store: a writer thread that owns the only connection that
//! writes, a pool of readers used on the caller's thread, and a checkpointer.
//!
//! Why a thread of our own: SQLite runs a statement in microseconds, but a driver that
//! hands every statement to a connection thread and its rows back (sqlx) pays two
//! cross-thread wake-ups per statement, and a write transaction of ten statements holds
//! the database's one write lock across all of them. Here a write transaction is a
//! closure sent once to the writer, which runs it whole. While transactions queue up,
//! the writer runs several of them in one SQLite transaction, each inside its own
//! savepoint, and answers them all after the one `COMMIT` (group commit): each still
//! commits or fails alone, and none is acknowledged before it is durable.
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
    panic::AssertUnwindSafe,
    path::{Path, PathBuf},
    sync::{Mutex, mpsc},
    thread,
    time::Duration,
};

use rusqlite::Connection;
use swarm_store::{StoreError, StoreResult};
use tokio::sync::oneshot;

use crate::decode::{corrupt, db};

/// How long a connection waits for another process's write lock before failing.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Jobs committed together at most, so that the first of a group is not kept waiting.
const MAX_GROUP: usize = 64;
/// Idle reader connections kept open.
const MAX_IDLE_READERS: usize = 8;
/// How often the checkpointer copies the WAL back into the database file.
const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);
/// WAL size (in pages) past which the writer finishes a checkpoint so that the WAL starts
/// over (SQLite's own auto-checkpoint threshold).
const WAL_RESTART_FRAMES: i64 = 1000;
/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 64;

/// A write transaction's work, run on the writer thread (`None`: it cannot run, the
/// group already failed). It returns whether its changes are kept, and the reply to
/// send once the outcome of the `COMMIT` is known.
type WriteJob = Box<dyn FnOnce(Option<&Connection>) -> (bool, Reply) + Send>;
type Reply = Box<dyn FnOnce(Result<(), String>) + Send>;

enum Command {
    Write(WriteJob),
    /// Work outside any transaction (`PRAGMA data_version`).
    Plain(Box<dyn FnOnce(&Connection) + Send>),
    /// Checkpoint what the checkpointer could not, between two groups (see
    /// [`run_checkpointer`]).
    FinishCheckpoint,
    Stop(oneshot::Sender<()>),
}

pub(crate) struct Database {
    path: PathBuf,
    writer: mpsc::Sender<Command>,
    readers: Mutex<Vec<Connection>>,
    /// Dropping it stops the checkpointer.
    _checkpointer: mpsc::Sender<()>,
}

impl Database {
    /// Open the file (it must exist and be migrated) and start the writer and checkpointer.
    pub(crate) fn open(path: &Path) -> StoreResult<Database> {
        let writer_connection = open_connection(path, Role::Writer).map_err(db)?;
        let (writer, commands) = mpsc::channel();
        thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || run_writer(writer_connection, commands))
            .map_err(|error| StoreError::Backend(Box::new(error)))?;

        let checkpoint_connection = open_connection(path, Role::Checkpointer).map_err(db)?;
        let (checkpointer, stop) = mpsc::channel();
        let finish_on_writer = writer.clone();
        thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || run_checkpointer(checkpoint_connection, stop, finish_on_writer))
            .map_err(|error| StoreError::Backend(Box::new(error)))?;

        Ok(Database {
            path: path.to_path_buf(),
            writer,
            readers: Mutex::new(Vec::new()),
            _checkpointer: checkpointer,
        })
    }

    /// Run `work` as one write transaction (`BEGIN IMMEDIATE`) on the writer thread.
    /// An `Err` from `work` rolls back its changes; `Ok` is returned once committed.
    pub(crate) async fn write<T, F>(&self, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let (answer, answered) = oneshot::channel();
        let job: WriteJob = Box::new(move |connection| {
            let result = match connection {
                Some(connection) => std::panic::catch_unwind(AssertUnwindSafe(|| work(connection)))
                    .unwrap_or_else(|_| {
                        Err(corrupt("a write transaction panicked; it was rolled back".into()))
                    }),
                None => Err(corrupt("the write transaction was not run".into())),
            };
            let keep = result.is_ok();
            let reply: Reply = Box::new(move |committed| {
                let outcome = match committed {
                    Ok(()) => result,
                    Err(message) => Err(StoreError::Backend(message.into())),
                };
                let _ = answer.send(outcome);
            });
            (keep, reply)
        });
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

    /// Run a short read on the calling thread.
    pub(crate) fn read<T>(&self, work: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        let connection = self.take_reader()?;
        let result = work(&connection);
        self.return_reader(connection);
        result
    }

    /// Run a read that may take a while (a page of a listing) on tokio's blocking pool,
    /// inside one read transaction so that all of its statements see one snapshot.
    pub(crate) async fn read_snapshot<T, F>(self: &std::sync::Arc<Self>, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let database = std::sync::Arc::clone(self);
        tokio::task::spawn_blocking(move || {
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
        if idle.len() < MAX_IDLE_READERS {
            idle.push(connection);
        }
    }
}

fn writer_gone() -> StoreError {
    StoreError::Backend("the SQLite writer has stopped (the store was closed)".into())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Writer,
    Reader,
    Checkpointer,
}

fn open_connection(path: &Path, role: Role) -> rusqlite::Result<Connection> {
    let connection = Connection::open(path)?;
    connection.busy_timeout(BUSY_TIMEOUT)?;
    connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    connection.pragma_update(None, "foreign_keys", true)?;
    // WAL with NORMAL: a commit survives the process being killed; only a power loss
    // may take back the last transactions, never corrupt the file.
    connection.pragma_update(None, "synchronous", "NORMAL")?;
    // Savepoint journals (one per job of a group) and sort space stay in memory: on disk
    // they cost a write of every page a job touches.
    connection.pragma_update(None, "temp_store", "MEMORY")?;
    match role {
        Role::Writer => {
            // Checkpoints are the checkpointer's job, off the commit path.
            connection.pragma_update(None, "wal_autocheckpoint", 0)?;
        }
        Role::Reader => connection.pragma_update(None, "query_only", true)?,
        Role::Checkpointer => {}
    }
    Ok(connection)
}

fn run_writer(connection: Connection, commands: mpsc::Receiver<Command>) {
    let mut next: Option<Command> = None;
    loop {
        let command = match next.take() {
            Some(command) => command,
            None => match commands.recv() {
                Ok(command) => command,
                // Every handle to the store is gone.
                Err(mpsc::RecvError) => return,
            },
        };
        match command {
            Command::Stop(stopped) => {
                drop(connection);
                let _ = stopped.send(());
                return;
            }
            Command::Plain(job) => job(&connection),
            Command::FinishCheckpoint => {
                if let Err(error) = connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                    tracing::warn!(%error, "SQLite checkpoint on the writer failed; will retry");
                }
            }
            Command::Write(first) => next = commit_group(&connection, first, &commands),
        }
    }
}

/// Run `first`, and every write that arrives while the group runs (up to [`MAX_GROUP`]),
/// in one SQLite transaction with one savepoint per job: a job that fails rolls back to
/// its savepoint and leaves the others' changes in place. Under load the group grows by
/// itself, and the pages that its transactions share reach the WAL once. Returns a
/// command that arrived meanwhile and is not a write.
fn commit_group(
    connection: &Connection,
    first: WriteJob,
    commands: &mpsc::Receiver<Command>,
) -> Option<Command> {
    if let Err(error) = connection.execute_batch("BEGIN IMMEDIATE") {
        let (_, reply) = first(None);
        reply(Err(format!("cannot start a write transaction: {error}")));
        return None;
    }
    let mut replies = Vec::new();
    let mut broken: Option<String> = None;
    let mut held_back = None;
    let mut job = Some(first);
    while let Some(current) = job.take() {
        replies.push(run_in_savepoint(connection, current, &mut broken));
        if broken.is_some() || replies.len() >= MAX_GROUP {
            break;
        }
        match commands.try_recv() {
            Ok(Command::Write(more)) => job = Some(more),
            Ok(other) => held_back = Some(other),
            Err(_) => {}
        }
    }
    let committed = match broken {
        Some(message) => Err(message),
        None => connection.execute_batch("COMMIT").map_err(|error| format!("cannot commit: {error}")),
    };
    if committed.is_err() && !connection.is_autocommit() {
        let _ = connection.execute_batch("ROLLBACK");
    }
    for reply in replies {
        reply(committed.clone());
    }
    held_back
}

/// Run one job inside its own savepoint; a failure that breaks the whole transaction is
/// recorded in `broken`.
fn run_in_savepoint(connection: &Connection, job: WriteJob, broken: &mut Option<String>) -> Reply {
    if let Err(error) = connection.execute_batch("SAVEPOINT job") {
        *broken = Some(format!("cannot start a savepoint: {error}"));
        return job(None).1;
    }
    let (keep, reply) = job(Some(connection));
    // Some errors (I/O, a full disk) make SQLite roll back the whole transaction, taking
    // the earlier jobs' changes with it.
    if connection.is_autocommit() {
        *broken = Some("SQLite rolled back the transaction after an error".to_string());
        return reply;
    }
    let end = if keep { "RELEASE job" } else { "ROLLBACK TO job; RELEASE job" };
    if let Err(error) = connection.execute_batch(end) {
        *broken = Some(format!("cannot end a savepoint: {error}"));
    }
    reply
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
