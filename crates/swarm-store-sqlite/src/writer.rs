//! The writer thread: the only connection that writes, running each write transaction
//! sent to it whole.
//!
//! Why a thread of our own: SQLite runs a statement in microseconds, but a driver that
//! hands every statement to a connection thread and its rows back (sqlx) pays two
//! cross-thread wake-ups per statement, and a write transaction of ten statements holds
//! the database's one write lock across all of them. Here a write transaction is a
//! closure sent once to the writer, which runs it whole. While transactions queue up,
//! the writer runs several of them in one SQLite transaction and answers them all after
//! the one `COMMIT` (group commit): none is acknowledged before it is durable, and each
//! still commits or fails alone (a failure sends the group through again, one savepoint
//! per job; see [`commit_group`]).

use std::{
    panic::AssertUnwindSafe,
    sync::mpsc,
    time::{Duration, Instant},
};

use rusqlite::Connection;
use swarm_store::{StoreError, StoreResult};
use tokio::sync::oneshot;

use crate::{error::corrupt, writer_usage::WriterCounters};

/// Jobs committed together at most, so that the first of a group is not kept waiting.
const MAX_GROUP: usize = 64;
/// How long events may wait, after a write, for their batch into the index by agent
/// (`events::index_agent_events`). Listings read the events after the last batch one by
/// one, so this bounds how many they read.
const AGENT_EVENTS_INTERVAL: Duration = Duration::from_millis(250);

/// A write transaction's work, queued for the writer thread. It may run twice: a group
/// runs its jobs without savepoints, and when one fails it rolls the group back and runs
/// them again, each in a savepoint of its own (see [`commit_group`]).
pub(crate) trait WriteJob: Send {
    /// Run the work (`None`: it cannot run, the group already failed); whether its changes
    /// are to be kept.
    fn run(&mut self, connection: Option<&Connection>) -> bool;
    /// Whether its last run failed because the disk is full.
    fn found_disk_full(&self) -> bool;
    /// Answer the caller, once the outcome of the `COMMIT` is known.
    fn answer(self: Box<Self>, committed: Result<(), GroupFailure>);
}

pub(crate) struct Job<T, F> {
    pub(crate) work: F,
    pub(crate) result: Option<StoreResult<T>>,
    pub(crate) answer: oneshot::Sender<StoreResult<T>>,
}

impl<T, F> WriteJob for Job<T, F>
where
    T: Send,
    F: Fn(&Connection) -> StoreResult<T> + Send,
{
    fn run(&mut self, connection: Option<&Connection>) -> bool {
        let result = match connection {
            Some(connection) => std::panic::catch_unwind(AssertUnwindSafe(|| (self.work)(connection)))
                .unwrap_or_else(|_| Err(corrupt("a write transaction panicked; it was rolled back".into()))),
            None => Err(corrupt("the write transaction was not run".into())),
        };
        let keep = result.is_ok();
        self.result = Some(result);
        keep
    }

    fn found_disk_full(&self) -> bool {
        matches!(self.result, Some(Err(StoreError::Unavailable(_))))
    }

    fn answer(self: Box<Self>, committed: Result<(), GroupFailure>) {
        let outcome = match committed {
            Ok(()) => self.result.unwrap_or_else(|| Err(corrupt("the write transaction was not run".into()))),
            Err(failure) => Err(failure.into_store_error()),
        };
        let _ = self.answer.send(outcome);
    }
}

/// Why a group's transaction did not commit; every job of the group gets it.
#[derive(Debug, Clone)]
pub(crate) enum GroupFailure {
    /// Out of disk space: the operator's to fix, the client's to retry.
    DiskFull,
    /// SQLite rolled the whole transaction back after a job's error.
    RolledBack,
    Other(String),
}

impl GroupFailure {
    fn of(doing: &str, error: &rusqlite::Error) -> GroupFailure {
        match error {
            rusqlite::Error::SqliteFailure(failure, _) if failure.code == rusqlite::ErrorCode::DiskFull => {
                GroupFailure::DiskFull
            }
            _ => GroupFailure::Other(format!("{doing}: {error}")),
        }
    }

    /// What rolled the group back after `job` ran: its full disk, or an error of its own.
    fn after(job: &dyn WriteJob) -> GroupFailure {
        if job.found_disk_full() { GroupFailure::DiskFull } else { GroupFailure::RolledBack }
    }

    fn into_store_error(self) -> StoreError {
        match self {
            GroupFailure::DiskFull => StoreError::Unavailable(crate::error::DISK_FULL.to_string()),
            GroupFailure::RolledBack => {
                StoreError::Backend("SQLite rolled back the transaction after an error".into())
            }
            GroupFailure::Other(message) => StoreError::Backend(message.into()),
        }
    }
}

pub(crate) enum Command {
    Write(Box<dyn WriteJob>),
    /// Work outside any transaction (`PRAGMA data_version`).
    Plain(Box<dyn FnOnce(&Connection) + Send>),
    /// Checkpoint what the checkpointer could not, between two groups (see
    /// [`crate::database`]'s checkpointer).
    FinishCheckpoint,
    /// Run a batch of the index by agent now, not at its next time.
    IndexAgentEvents(oneshot::Sender<StoreResult<()>>),
    Stop(oneshot::Sender<()>),
}

pub(crate) fn run_writer(
    connection: Connection,
    commands: mpsc::Receiver<Command>,
    counters: &WriterCounters,
) {
    let mut next: Option<Command> = None;
    // Start with a batch: another process, or this one before a restart, may have left
    // events unindexed.
    let mut unindexed_since = Some(Instant::now());
    loop {
        if unindexed_since.is_some_and(|since| since.elapsed() >= AGENT_EVENTS_INTERVAL) {
            let began = Instant::now();
            unindexed_since = match crate::events::index_agent_events(&connection) {
                Ok(true) => None,
                // A batch stopped at its size: the next one comes after the next interval.
                Ok(false) => Some(Instant::now()),
                Err(error) => {
                    tracing::warn!(%error, "indexing the event log by agent failed; will retry");
                    None
                }
            };
            counters.busy_for(began.elapsed());
        }
        let command = match next.take() {
            Some(command) => command,
            None => {
                let received = match unindexed_since {
                    Some(since) => {
                        commands.recv_timeout(AGENT_EVENTS_INTERVAL.saturating_sub(since.elapsed()))
                    }
                    None => commands.recv().map_err(|mpsc::RecvError| mpsc::RecvTimeoutError::Disconnected),
                };
                match received {
                    Ok(command) => command,
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    // Every handle to the store is gone.
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
        };
        let began = Instant::now();
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
            Command::IndexAgentEvents(answer) => {
                let indexed = crate::events::index_agent_events(&connection);
                unindexed_since = match indexed {
                    Ok(false) => Some(Instant::now()),
                    _ => None,
                };
                let _ = answer.send(indexed.map(|_| ()));
            }
            Command::Write(first) => {
                next = commit_group(&connection, first, &commands, counters);
                unindexed_since.get_or_insert_with(Instant::now);
            }
        }
        counters.busy_for(began.elapsed());
    }
}

/// Run `first`, and every write that arrives while the group runs (up to [`MAX_GROUP`]),
/// in one SQLite transaction, and answer them all after its one `COMMIT`: under load the
/// group grows by itself, and the pages its jobs share reach the WAL once. Returns a
/// command that arrived meanwhile and is not a write.
///
/// The jobs run back to back without savepoints, which would copy every page a job
/// touches. A job that fails (rare: most refusals are answers, not errors) takes the whole
/// group back, and the group runs again with one savepoint per job, so that each job
/// still commits or fails alone.
fn commit_group(
    connection: &Connection,
    first: Box<dyn WriteJob>,
    commands: &mpsc::Receiver<Command>,
    counters: &WriterCounters,
) -> Option<Command> {
    counters.transaction_began();
    let mut jobs = vec![first];
    if let Err(error) = connection.execute_batch("BEGIN IMMEDIATE") {
        answer_all(jobs, Err(GroupFailure::of("cannot start a write transaction", &error)));
        return None;
    }
    let mut held_back = None;
    let mut all_kept = true;
    let mut next = 0;
    while next < jobs.len() {
        let kept = jobs[next].run(Some(connection));
        next += 1;
        if connection.is_autocommit() {
            // Some errors (I/O, a full disk) make SQLite roll back the whole transaction.
            let failure = GroupFailure::after(&*jobs[next - 1]);
            answer_all(jobs, Err(failure));
            return held_back;
        }
        if !kept {
            all_kept = false;
            break;
        }
        if jobs.len() >= MAX_GROUP {
            break;
        }
        match commands.try_recv() {
            Ok(Command::Write(more)) => {
                counters.write_joined();
                jobs.push(more);
            }
            Ok(other) => held_back = Some(other),
            Err(_) => {}
        }
    }
    if all_kept {
        let committed =
            connection.execute_batch("COMMIT").map_err(|error| GroupFailure::of("cannot commit", &error));
        if committed.is_err() && !connection.is_autocommit() {
            let _ = connection.execute_batch("ROLLBACK");
        }
        answer_all(jobs, committed);
        return held_back;
    }
    // A job failed: none of the group's changes stay; run them again, one savepoint each.
    jobs.truncate(next);
    if let Err(error) = connection.execute_batch("ROLLBACK") {
        answer_all(jobs, Err(GroupFailure::of("cannot roll back a failed group", &error)));
        return held_back;
    }
    commit_in_savepoints(connection, jobs);
    held_back
}

/// Run `jobs` in one transaction with one savepoint each: a job that fails rolls back to
/// its savepoint and leaves the others' changes in place.
fn commit_in_savepoints(connection: &Connection, mut jobs: Vec<Box<dyn WriteJob>>) {
    if let Err(error) = connection.execute_batch("BEGIN IMMEDIATE") {
        answer_all(jobs, Err(GroupFailure::of("cannot start a write transaction", &error)));
        return;
    }
    let mut broken: Option<GroupFailure> = None;
    for job in &mut jobs {
        if broken.is_some() {
            job.run(None);
            continue;
        }
        if let Err(error) = connection.execute_batch("SAVEPOINT job") {
            broken = Some(GroupFailure::of("cannot start a savepoint", &error));
            job.run(None);
            continue;
        }
        let keep = job.run(Some(connection));
        if connection.is_autocommit() {
            broken = Some(GroupFailure::after(&**job));
            continue;
        }
        let end = if keep { "RELEASE job" } else { "ROLLBACK TO job; RELEASE job" };
        if let Err(error) = connection.execute_batch(end) {
            broken = Some(GroupFailure::of("cannot end a savepoint", &error));
        }
    }
    let committed = match broken {
        Some(message) => Err(message),
        None => connection.execute_batch("COMMIT").map_err(|error| GroupFailure::of("cannot commit", &error)),
    };
    if committed.is_err() && !connection.is_autocommit() {
        let _ = connection.execute_batch("ROLLBACK");
    }
    answer_all(jobs, committed);
}

fn answer_all(jobs: Vec<Box<dyn WriteJob>>, committed: Result<(), GroupFailure>) {
    for job in jobs {
        job.answer(committed.clone());
    }
}
