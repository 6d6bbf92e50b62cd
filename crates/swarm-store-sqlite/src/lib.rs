//! The SQLite implementation of [`swarm_store::Store`], the embedded default.
//!
//! Architecture invariant: every write runs on the one connection of the write pool
//! inside `BEGIN IMMEDIATE`, so a transaction holds the database write lock before it
//! reads anything its guard depends on. Other processes on the same file (`swarm serve`
//! beside `swarm mcp`) wait on `busy_timeout` for that lock instead of failing halfway
//! through a transaction. Reads use their own pool and see the last committed state (WAL).

mod agents;
mod decode;
mod events;
mod poll;
mod rescue;
mod sessions;
mod tasks;
mod transitions;

use std::{path::Path, str::FromStr, time::Duration};

use async_trait::async_trait;
use sqlx::{
    Sqlite, SqlitePool, Transaction,
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
};
use swarm_domain::agent::Registration;
use swarm_domain::{
    agent::{Agent, NewAgent, ProfileUpdate},
    event::Event,
    id::{AgentId, TaskId},
    lease::{LeasePolicy, RescueReport},
    poll::{Trigger, TriggerKind, Wake},
    session::{NewSessionCost, NewSessionLogs, SessionCost, SessionLog},
    stats::{Stats, WorkCounts},
    task::{NewTask, Task, TaskChange},
    time::Timestamp,
};
use swarm_store::{
    Applied, EventFilter, PollView, SessionCostFilter, Store, StoreError, StoreResult, TaskFilter,
};

use crate::decode::db;

const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
const READ_CONNECTIONS: u32 = 4;

pub struct SqliteStore {
    read: SqlitePool,
    write: SqlitePool,
    location: String,
}

impl SqliteStore {
    /// Open (creating it if missing) the database file and bring its schema up to date.
    pub async fn open(path: &Path) -> StoreResult<SqliteStore> {
        let options = SqliteConnectOptions::new().filename(path);
        Self::open_with(options).await
    }

    /// Open a `sqlite:` URL (`sqlite://swarm.db`, `sqlite:///abs/swarm.db`,
    /// `sqlite:swarm.db?mode=rwc`). The file is created if missing.
    pub async fn open_url(url: &str) -> StoreResult<SqliteStore> {
        let options = SqliteConnectOptions::from_str(url).map_err(db)?;
        Self::open_with(options).await
    }

    /// Where the data lives, for start-up logs.
    pub fn describe(&self) -> String {
        self.location.clone()
    }

    /// Close both pools, waiting for connections in use to be returned.
    pub async fn close(&self) {
        self.write.close().await;
        self.read.close().await;
    }

    async fn open_with(options: SqliteConnectOptions) -> StoreResult<SqliteStore> {
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true)
            .synchronous(SqliteSynchronous::Normal);
        let filename = options.get_filename();
        // sqlx names an in-memory database `file:sqlx-in-memory-<n>`.
        let location = if filename.to_string_lossy().starts_with("file:") {
            "SQLite in memory".to_string()
        } else {
            let path = std::path::absolute(filename).unwrap_or_else(|_| filename.to_path_buf());
            format!("SQLite file {}", path.display())
        };
        // The writer is opened and migrated first: it creates the file and switches it to
        // WAL, which readers then find already done. It is never recycled, which also keeps
        // a `sqlite::memory:` database alive.
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options.clone())
            .await
            .map_err(db)?;
        migrate(&write).await?;
        let read = SqlitePoolOptions::new()
            .max_connections(READ_CONNECTIONS)
            .connect_with(options)
            .await
            .map_err(db)?;
        Ok(SqliteStore { read, write, location })
    }

    async fn begin_write(&self) -> StoreResult<Transaction<'static, Sqlite>> {
        self.write.begin_with("BEGIN IMMEDIATE").await.map_err(db)
    }
}

/// sqlx's SQLite migrator takes no lock, so two processes opening a new file at once
/// would both apply `0001`. Running it inside `BEGIN IMMEDIATE` (its own transactions
/// become savepoints) makes the second wait and then find the work done.
async fn migrate(write: &SqlitePool) -> StoreResult<()> {
    let mut tx = write.begin_with("BEGIN IMMEDIATE").await.map_err(db)?;
    sqlx::migrate!("./migrations")
        .run(&mut *tx)
        .await
        .map_err(|error| StoreError::Backend(Box::new(error)))?;
    tx.commit().await.map_err(db)
}

#[async_trait]
impl Store for SqliteStore {
    fn backend_name(&self) -> &'static str {
        "sqlite"
    }

    async fn agent_register(&self, agent: &NewAgent, now: Timestamp) -> StoreResult<Registration> {
        agents::register(self, agent, now).await
    }

    async fn agent_get(&self, id: AgentId) -> StoreResult<Option<Agent>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        agents::get(&mut conn, id).await
    }

    async fn agent_list(&self) -> StoreResult<Vec<Agent>> {
        agents::list(&self.read).await
    }

    async fn agent_rename(&self, id: AgentId, name: &str, now: Timestamp) -> StoreResult<Option<Agent>> {
        agents::rename(self, id, name, now).await
    }

    async fn agent_update_profile(
        &self,
        id: AgentId,
        update: &ProfileUpdate,
        now: Timestamp,
    ) -> StoreResult<Option<Agent>> {
        agents::update_profile(self, id, update, now).await
    }

    async fn agent_heartbeat(
        &self,
        id: AgentId,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> StoreResult<Option<Agent>> {
        agents::heartbeat(self, id, now, lease_until).await
    }

    async fn agent_close(&self, id: AgentId, now: Timestamp) -> StoreResult<Option<Agent>> {
        agents::close(self, id, now).await
    }

    async fn agent_work_counts(&self, id: AgentId) -> StoreResult<WorkCounts> {
        agents::work_counts(&self.read, id).await
    }

    async fn task_create(&self, task: &NewTask, now: Timestamp) -> StoreResult<Task> {
        tasks::create(self, task, now).await
    }

    async fn task_get(&self, id: TaskId) -> StoreResult<Option<Task>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        tasks::get(&mut conn, id).await
    }

    async fn task_list(&self, filter: &TaskFilter) -> StoreResult<(Vec<Task>, i64)> {
        tasks::list(&self.read, filter).await
    }

    async fn task_unfinished_dependencies(&self, id: TaskId) -> StoreResult<Vec<TaskId>> {
        tasks::unfinished_dependencies(&self.read, id).await
    }

    async fn task_has_dependents(&self, id: TaskId) -> StoreResult<bool> {
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM task_dependencies WHERE depends_on_task_id = ?)")
            .bind(id.to_string())
            .fetch_one(&self.read)
            .await
            .map_err(db)
    }

    async fn task_apply(
        &self,
        id: TaskId,
        change: &TaskChange,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>> {
        transitions::apply(self, id, change, actor, now).await
    }

    async fn task_edit_text(
        &self,
        id: TaskId,
        text: &str,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>> {
        transitions::edit_text(self, id, text, actor, now).await
    }

    async fn task_set_progress(
        &self,
        id: TaskId,
        progress: &str,
        assignee: Option<AgentId>,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>> {
        transitions::set_progress(self, id, progress, assignee, actor, now).await
    }

    async fn poll_view(&self, agent: AgentId) -> StoreResult<Option<PollView>> {
        poll::view(&self.read, agent).await
    }

    async fn poll_claim(
        &self,
        agent: AgentId,
        kinds: &[TriggerKind],
        now: Timestamp,
        lease_until: Timestamp,
    ) -> StoreResult<Option<(TriggerKind, Trigger)>> {
        poll::claim(self, agent, kinds, now, lease_until).await
    }

    async fn rescue(&self, policy: &LeasePolicy, now: Timestamp) -> StoreResult<RescueReport> {
        rescue::rescue(self, policy, now).await
    }

    async fn announce(&self, _wakes: &[Wake]) -> StoreResult<()> {
        // Other processes notice our commits through `PRAGMA data_version`.
        Ok(())
    }

    async fn watch_external_changes(&self, sink: tokio::sync::mpsc::Sender<Wake>) -> StoreResult<()> {
        rescue::watch_external_changes(self, sink).await
    }

    async fn event_list(&self, filter: &EventFilter) -> StoreResult<Vec<Event>> {
        events::list(&self.read, filter).await
    }

    async fn session_logs_append(&self, logs: &NewSessionLogs, now: Timestamp) -> StoreResult<u64> {
        sessions::logs_append(self, logs, now).await
    }

    async fn session_logs_for_task(&self, task_id: TaskId) -> StoreResult<Vec<SessionLog>> {
        sessions::logs_for_task(&self.read, task_id).await
    }

    async fn session_cost_insert(&self, cost: &NewSessionCost, now: Timestamp) -> StoreResult<SessionCost> {
        sessions::cost_insert(self, cost, now).await
    }

    async fn session_cost_list(&self, filter: &SessionCostFilter) -> StoreResult<Vec<SessionCost>> {
        sessions::cost_list(&self.read, filter).await
    }

    async fn stats(&self) -> StoreResult<Stats> {
        sessions::stats(&self.read).await
    }
}
