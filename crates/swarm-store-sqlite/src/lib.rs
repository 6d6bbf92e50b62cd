//! The SQLite implementation of [`swarm_store::Store`], the embedded default.
//!
//! Architecture invariant: every write runs on the one writer connection of this
//! process (`database.rs`) inside `BEGIN IMMEDIATE`, so a transaction holds the
//! database write lock before it reads anything its guard depends on. Other processes
//! on the same file (`swarm serve` beside `swarm mcp`) wait on `busy_timeout` for that
//! lock instead of failing halfway through a transaction. Reads use their own
//! connections and see the last committed state (WAL).
//!
//! Each module's functions take a `&Connection` and run synchronously; `lib.rs` chooses
//! where they run: the writer thread for writes, the caller's thread for point reads,
//! the blocking pool for listings.

mod agents;
mod apply;
mod backup;
mod budgets;
mod chat;
mod database;
mod epics;
mod error;
mod events;
mod handback;
mod heartbeats;
mod held_claims;
mod inbox;
mod insight;
mod mail;
mod mcp_tasks;
mod poll;
mod power_loss;
mod rescue;
mod retention;
mod rows;
mod runner_records;
mod services;
mod sessions;
mod slack_status;
mod sql;
mod steering;
mod tasks;
#[cfg(test)]
mod test_file;
mod tokens;
mod trackers;
mod triggers;
mod view_cache;
mod wal_appends;
mod wal_index;
mod writer;
mod writer_usage;

use std::{path::Path, sync::Arc};

use async_trait::async_trait;
use sqlx::{
    Connection as _, SqliteConnection,
    sqlite::{SqliteAutoVacuum, SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous},
};
use swarm_domain::agent::Registration;
use swarm_domain::{
    agent::{Agent, NewAgent, ProfileUpdate},
    chat::{Channel, ChatMessage, MessageQuery, NewChannel, NewChatMessage},
    event::Event,
    id::{
        AgentId, AgentTokenId, ChannelId, ChatMessageId, InboxMessageId, MailId, RunnerId, TaskId, TriggerId,
    },
    inbox::{InboxChange, InboxMessage, InboxStatus, NewInboxMessage, SlackMark},
    lease::{LeasePolicy, RescueReport},
    mail::{Mail, MailCounts, MailDelivery, MailQuery, NewMail},
    poll::{Trigger, TriggerKind, Wake},
    retention::Expiring,
    session::{NewSessionCost, NewSessionLogs, SessionCost, SessionLog},
    stats::{Stats, WorkCounts},
    task::{NewTask, Task, TaskChange},
    time::Timestamp,
    token::AgentToken,
    trigger::{TaskAwait, TriggerDef, TriggerSession},
};
use swarm_store::{
    Applied, DeliveryMark, EventFilter, FireGuard, FireOutcome, HeldItems, NewTaskAwait, PollView, Released,
    SessionCostFilter, Store, StoreError, StoreResult, TaskFilter, TaskWaiters,
};

pub use crate::backup::{BackupError, CopySummary, backup, check_backup, in_use, restore};
use crate::database::{BUSY_TIMEOUT, Database};

pub struct SqliteStore {
    database: Arc<Database>,
    views: view_cache::ViewCache,
    location: String,
}

/// How a [`SqliteStore`] opens its file; the default is what `swarm serve` does unless told
/// otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SqliteOptions {
    /// The writer writes each commit's WAL frames with one `write` instead of two per page
    /// (`wal_appends.rs`, a VFS over SQLite's own): 5 to 14 % more claims per second in
    /// the benchmarks. Off by default: it had two data-corrupting bugs while it was
    /// written (`scripts/power-loss` now cuts the power under it, on and off).
    pub wal_batching: bool,
}

impl SqliteStore {
    /// Open (creating it if missing) the database file and bring its schema up to date,
    /// with the default [`SqliteOptions`].
    pub async fn open(path: &Path) -> StoreResult<SqliteStore> {
        SqliteStore::open_with(path, SqliteOptions::default()).await
    }

    /// [`SqliteStore::open`] with the given options.
    pub async fn open_with(path: &Path, options: SqliteOptions) -> StoreResult<SqliteStore> {
        power_loss::install_if_requested();
        let new_file = !path.exists();
        migrate(path).await?;
        if new_file {
            sync_new_file_directory(path)?;
        }
        let database = Database::open(path, options.wal_batching)?;
        let views = view_cache::ViewCache::open(path)?;
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        Ok(SqliteStore {
            database: Arc::new(database),
            views,
            location: format!(
                "SQLite file {}{}",
                absolute.display(),
                if options.wal_batching { " (WAL appends batched, experimental)" } else { "" }
            ),
        })
    }

    /// Where the data lives, for start-up logs.
    pub fn describe(&self) -> String {
        self.location.clone()
    }

    /// Bring the event log's index by agent up to date now. The writer does it by itself
    /// a few times a second while writes go on; tests use this to put events on both
    /// sides of a batch.
    pub async fn index_agent_events(&self) -> StoreResult<()> {
        self.database.index_agent_events().await
    }

    /// Finish the writes already sent and close every connection.
    pub async fn close(&self) {
        self.views.close();
        self.database.close().await;
    }
}

/// A new database file's name lives in its directory, which SQLite never syncs for the
/// database itself (it does for a new WAL or journal): without this a power cut soon after
/// a first start could lose the whole file, every acknowledged write with it.
fn sync_new_file_directory(path: &Path) -> StoreResult<()> {
    let directory = std::path::absolute(path)
        .ok()
        .and_then(|absolute| absolute.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| ".".into());
    std::fs::File::open(&directory)
        .and_then(|directory| directory.sync_all())
        .map_err(|error| StoreError::Backend(Box::new(error)))
}

/// The schema is sqlx's migrations (`migrations/`), applied on a connection of their own
/// that creates the file and switches it to WAL. sqlx's SQLite migrator takes no lock,
/// so two processes opening a new file at once would both apply `0001`; running it
/// inside `BEGIN IMMEDIATE` (its own transactions become savepoints) makes the second
/// wait and then find the work done.
async fn migrate(path: &Path) -> StoreResult<()> {
    let backend = |error: sqlx::Error| StoreError::Backend(Box::new(error));
    // `auto_vacuum` takes effect only in a file without tables (sqlx sets it before the
    // journal mode, as it must be): a new file can give the pages that retention frees
    // back in small steps (`retention::reclaim`); an older one reuses them.
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .auto_vacuum(SqliteAutoVacuum::Incremental)
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(BUSY_TIMEOUT)
        .foreign_keys(true)
        .synchronous(SqliteSynchronous::Normal);
    let mut connection = SqliteConnection::connect_with(&options).await.map_err(backend)?;
    let mut tx = connection.begin_with("BEGIN IMMEDIATE").await.map_err(backend)?;
    sqlx::migrate!("./migrations")
        .run(&mut *tx)
        .await
        .map_err(|error| StoreError::Backend(Box::new(error)))?;
    tx.commit().await.map_err(backend)?;
    connection.close().await.map_err(backend)
}

#[async_trait]
impl Store for SqliteStore {
    fn backend_name(&self) -> &'static str {
        "sqlite"
    }

    async fn agent_register(&self, agent: &NewAgent, now: Timestamp) -> StoreResult<Registration> {
        let agent = agent.clone();
        self.database.write(move |tx| agents::register(tx, &agent, now)).await
    }

    async fn agent_get(&self, id: AgentId) -> StoreResult<Option<Agent>> {
        self.database.read(|connection| agents::get(connection, id))
    }

    async fn agent_list(&self) -> StoreResult<Vec<Agent>> {
        self.database.read_snapshot(agents::list).await
    }

    async fn agent_rename(&self, id: AgentId, name: &str, now: Timestamp) -> StoreResult<Option<Agent>> {
        let name = name.to_string();
        self.database.write(move |tx| agents::rename(tx, id, &name, now)).await
    }

    async fn agent_set_status_reason(
        &self,
        id: AgentId,
        reason: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<Applied<Agent>> {
        let reason = reason.map(str::to_string);
        self.database.write(move |tx| agents::set_status_reason(tx, id, reason.as_deref(), now)).await
    }

    async fn agent_update_profile(
        &self,
        id: AgentId,
        update: &ProfileUpdate,
        now: Timestamp,
    ) -> StoreResult<Option<Agent>> {
        let update = update.clone();
        self.database.write(move |tx| agents::update_profile(tx, id, &update, now)).await
    }

    async fn agent_heartbeat_from_runner(
        &self,
        id: AgentId,
        now: Timestamp,
        lease_until: Timestamp,
        runner: Option<RunnerId>,
    ) -> StoreResult<Option<Agent>> {
        let runner = runner.map(|runner| runner.to_string());
        self.database.write(move |tx| agents::heartbeat(tx, id, now, lease_until, runner.as_deref())).await
    }

    async fn agent_heartbeats(&self, beats: &[swarm_store::Heartbeat]) -> StoreResult<Vec<AgentId>> {
        let beats = beats.to_vec();
        self.database.write(move |tx| heartbeats::write(tx, &beats)).await
    }

    async fn agent_close(&self, id: AgentId, now: Timestamp) -> StoreResult<Option<Agent>> {
        self.database.write(move |tx| agents::close(tx, id, now)).await
    }

    async fn agent_work_counts(&self, id: AgentId) -> StoreResult<WorkCounts> {
        self.database.read(|connection| agents::work_counts(connection, id))
    }

    async fn agent_token_create(&self, token: &AgentToken, token_hash: &str) -> StoreResult<bool> {
        let (token, token_hash) = (token.clone(), token_hash.to_string());
        self.database.write(move |tx| tokens::create(tx, &token, &token_hash)).await
    }

    async fn agent_token_list(&self, agent: AgentId) -> StoreResult<Vec<AgentToken>> {
        self.database.read(|connection| tokens::list(connection, agent))
    }

    async fn agent_token_revoke(
        &self,
        agent: AgentId,
        id: AgentTokenId,
        now: Timestamp,
    ) -> StoreResult<Applied<AgentToken>> {
        self.database.write(move |tx| tokens::revoke(tx, agent, id, now)).await
    }

    async fn agent_token_agent(&self, token_hash: &str) -> StoreResult<Option<AgentId>> {
        self.database.read(|connection| tokens::agent_of(connection, token_hash))
    }

    async fn hub_settings_put(&self, settings: &[(&str, &str)]) -> StoreResult<()> {
        let settings: Vec<(String, String)> =
            settings.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect();
        self.database.write(move |tx| tokens::settings_put(tx, &settings)).await
    }

    async fn hub_settings(&self) -> StoreResult<Vec<(String, String)>> {
        self.database.read(tokens::settings)
    }

    async fn task_create(&self, task: &NewTask, now: Timestamp) -> StoreResult<Task> {
        let task = task.clone();
        self.database.write(move |tx| tasks::create(tx, &task, now)).await
    }

    async fn task_get(&self, id: TaskId) -> StoreResult<Option<Task>> {
        self.database.read(|connection| tasks::get(connection, id))
    }

    async fn task_list(&self, filter: &TaskFilter) -> StoreResult<(Vec<Task>, i64)> {
        let filter = filter.clone();
        self.database.read_snapshot(move |snapshot| tasks::list(snapshot, &filter)).await
    }

    async fn task_unfinished_dependencies(&self, id: TaskId) -> StoreResult<Vec<TaskId>> {
        self.database.read(|connection| tasks::unfinished_dependencies(connection, id))
    }

    async fn task_waiters(&self, id: TaskId) -> StoreResult<TaskWaiters> {
        self.database.read(|connection| tasks::waiters(connection, id))
    }

    async fn task_apply(
        &self,
        id: TaskId,
        change: &TaskChange,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>> {
        let change = change.clone();
        self.database.write(move |tx| apply::apply(tx, id, &change, actor, now)).await
    }

    async fn task_apply_with_waiters(
        &self,
        id: TaskId,
        change: &TaskChange,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<(Applied<Task>, Option<TaskWaiters>)> {
        let change = change.clone();
        self.database
            .write(move |tx| {
                let applied = apply::apply(tx, id, &change, actor, now)?;
                let waiters = match &applied {
                    // The writer's pages are warm; a reader's are not, after a commit.
                    Applied::Changed { after, .. } if after.status.is_finished() => {
                        Some(tasks::waiters(tx, id)?)
                    }
                    _ => None,
                };
                Ok((applied, waiters))
            })
            .await
    }

    async fn task_give_back(
        &self,
        id: TaskId,
        change: &TaskChange,
        agent: AgentId,
        reason: &str,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>> {
        let (change, reason) = (change.clone(), reason.to_string());
        self.database.write(move |tx| handback::give_back(tx, id, &change, agent, &reason, now)).await
    }

    async fn task_edit_text(
        &self,
        id: TaskId,
        text: &str,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>> {
        let text = text.to_string();
        self.database.write(move |tx| apply::edit_text(tx, id, &text, actor, now)).await
    }

    async fn task_set_priority(
        &self,
        id: TaskId,
        priority: i32,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>> {
        self.database.write(move |tx| apply::set_priority(tx, id, priority, actor, now)).await
    }

    async fn task_set_progress(
        &self,
        id: TaskId,
        progress: &str,
        assignee: Option<AgentId>,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>> {
        let progress = progress.to_string();
        self.database.write(move |tx| apply::set_progress(tx, id, &progress, assignee, actor, now)).await
    }

    fn poll_view_kept(&self, agent: AgentId) -> StoreResult<Option<PollView>> {
        Ok(match self.views.lookup(agent)? {
            view_cache::Lookup::Kept(view) => Some(view),
            view_cache::Lookup::Read(_) => None,
        })
    }

    async fn poll_view(&self, agent: AgentId) -> StoreResult<Option<PollView>> {
        // The version is read before the view: see `view_cache`. After a `poll_view_kept`
        // miss this looks a second time (a lock and the wal-index header, well under a
        // microsecond against the read below), and must: the version it keeps the view
        // under is the one read just before that read.
        let version = match self.views.lookup(agent)? {
            view_cache::Lookup::Kept(view) => return Ok(Some(view)),
            view_cache::Lookup::Read(version) => version,
        };
        let view = self.database.read(|connection| poll::view(connection, agent))?;
        // Kept only if nothing committed while it was read: it is then that version's.
        if let (Some(version), Some(view)) = (version, &view)
            && self.views.version()? == Some(version)
        {
            self.views.keep(version, agent, view);
        }
        Ok(view)
    }

    async fn poll_claim_for_runner(
        &self,
        agent: AgentId,
        kinds: &[TriggerKind],
        now: Timestamp,
        lease_until: Timestamp,
        runner: Option<RunnerId>,
    ) -> StoreResult<Option<(TriggerKind, Trigger)>> {
        let kinds = kinds.to_vec();
        let runner = runner.map(|runner| runner.to_string());
        self.database
            .write(move |tx| poll::claim(tx, agent, &kinds, now, lease_until, runner.as_deref()))
            .await
    }

    async fn claims_release(
        &self,
        agent: AgentId,
        holder: RunnerId,
        items: Option<&HeldItems>,
        max_deliveries: i32,
        now: Timestamp,
    ) -> StoreResult<Released> {
        let items = items.cloned();
        let holder = holder.to_string();
        self.database
            .write(move |tx| held_claims::release(tx, agent, &holder, items.as_ref(), max_deliveries, now))
            .await
    }

    async fn rescue(&self, policy: &LeasePolicy, now: Timestamp) -> StoreResult<RescueReport> {
        let policy = *policy;
        let silent_since = now.minus_millis(policy.period_millis());
        // A read first: most passes find nothing and should not take the write lock.
        if !self
            .database
            .read(|connection| rescue::anything_to_rescue(connection, &policy, now, silent_since))?
        {
            return Ok(RescueReport::default());
        }
        self.database.write(move |tx| rescue::rescue(tx, &policy, now)).await
    }

    async fn announce(&self, _wakes: &[Wake]) -> StoreResult<()> {
        // Other processes notice our commits through `PRAGMA data_version`.
        Ok(())
    }

    async fn watch_external_changes(&self, sink: tokio::sync::mpsc::Sender<Wake>) -> StoreResult<()> {
        rescue::watch_external_changes(&self.database, sink).await
    }

    async fn inbox_create(&self, message: &NewInboxMessage, now: Timestamp) -> StoreResult<InboxMessage> {
        let message = message.clone();
        self.database.write(move |tx| inbox::create(tx, &message, now)).await
    }

    async fn inbox_get(&self, id: InboxMessageId) -> StoreResult<Option<InboxMessage>> {
        self.database.read(|connection| inbox::get(connection, id))
    }

    async fn inbox_list(
        &self,
        agent: AgentId,
        statuses: &[InboxStatus],
        limit: i64,
    ) -> StoreResult<Vec<InboxMessage>> {
        let statuses = statuses.to_vec();
        self.database.read_snapshot(move |snapshot| inbox::list(snapshot, agent, &statuses, limit)).await
    }

    async fn inbox_apply(
        &self,
        id: InboxMessageId,
        change: &InboxChange,
        now: Timestamp,
    ) -> StoreResult<Applied<InboxMessage>> {
        let change = change.clone();
        self.database.write(move |tx| inbox::apply(tx, id, &change, now)).await
    }

    async fn inbox_requeue(&self, id: InboxMessageId, now: Timestamp) -> StoreResult<Applied<InboxMessage>> {
        self.database.write(move |tx| inbox::requeue(tx, id, now)).await
    }

    async fn inbox_delegate(
        &self,
        id: InboxMessageId,
        owner: AgentId,
        task: &NewTask,
        now: Timestamp,
    ) -> StoreResult<Applied<InboxMessage>> {
        let task = task.clone();
        self.database.write(move |tx| inbox::delegate(tx, id, owner, &task, now)).await
    }

    async fn slack_mark_once(&self, kind: SlackMark, key: &str, now: Timestamp) -> StoreResult<bool> {
        let key = key.to_string();
        self.database.write(move |tx| inbox::mark_once(tx, kind, &key, now)).await
    }

    async fn slack_outcomes_unannounced(&self, since: Timestamp, limit: i64) -> StoreResult<Vec<Task>> {
        self.database
            .read_snapshot(move |snapshot| tasks::slack_outcomes_unannounced(snapshot, since, limit))
            .await
    }

    async fn channel_create(&self, channel: &NewChannel, now: Timestamp) -> StoreResult<Channel> {
        let channel = channel.clone();
        self.database.write(move |tx| chat::channel_create(tx, &channel, now)).await
    }

    async fn channel_get(&self, id: ChannelId) -> StoreResult<Option<Channel>> {
        self.database.read(|connection| chat::channel_get(connection, id))
    }

    async fn channel_list(&self) -> StoreResult<Vec<Channel>> {
        self.database.read_snapshot(chat::channel_list).await
    }

    async fn chat_post(&self, message: &NewChatMessage, now: Timestamp) -> StoreResult<ChatMessage> {
        let message = message.clone();
        self.database.write(move |tx| chat::post(tx, &message, now)).await
    }

    async fn chat_message_get(&self, id: ChatMessageId) -> StoreResult<Option<ChatMessage>> {
        self.database.read(|connection| chat::message_get(connection, id))
    }

    async fn chat_messages(&self, channel: ChannelId, query: &MessageQuery) -> StoreResult<Vec<ChatMessage>> {
        let query = query.clone();
        self.database.read_snapshot(move |snapshot| chat::messages(snapshot, channel, &query)).await
    }

    async fn chat_thread(&self, root: ChatMessageId) -> StoreResult<Vec<ChatMessage>> {
        self.database.read_snapshot(move |snapshot| chat::thread(snapshot, root)).await
    }

    async fn chat_last_read(&self, agent: AgentId, channel: ChannelId) -> StoreResult<Option<Timestamp>> {
        self.database.read(|connection| chat::last_read(connection, agent, channel))
    }

    async fn chat_mark_read(&self, agent: AgentId, channel: ChannelId, up_to: Timestamp) -> StoreResult<()> {
        self.database.write(move |tx| chat::mark_read(tx, agent, channel, up_to)).await
    }

    async fn chat_unread_mentions(&self, agent: AgentId) -> StoreResult<Vec<(ChannelId, i64)>> {
        self.database.read(|connection| chat::unread_mentions(connection, agent))
    }

    async fn mail_send(&self, mail: &NewMail, now: Timestamp) -> StoreResult<Mail> {
        let mail = mail.clone();
        self.database.write(move |tx| mail::send(tx, &mail, now)).await
    }

    async fn mail_stop_alert(
        &self,
        agent: AgentId,
        key: &str,
        alert: &NewMail,
        now: Timestamp,
    ) -> StoreResult<Option<Mail>> {
        let (key, alert) = (key.to_string(), alert.clone());
        self.database.write(move |tx| mail::stop_alert(tx, agent, &key, &alert, now)).await
    }

    async fn mail_get(&self, id: MailId) -> StoreResult<Option<Mail>> {
        self.database.read(|connection| mail::get(connection, id))
    }

    async fn mail_list(&self, query: &MailQuery) -> StoreResult<Vec<Mail>> {
        let query = query.clone();
        self.database.read_snapshot(move |snapshot| mail::list(snapshot, &query)).await
    }

    async fn mail_deliver(
        &self,
        recipient: AgentId,
        delivery: &MailDelivery,
        now: Timestamp,
    ) -> StoreResult<Vec<Mail>> {
        let delivery = delivery.clone();
        self.database.write(move |tx| mail::deliver(tx, recipient, &delivery, now)).await
    }

    async fn mail_counts(&self, agent: AgentId) -> StoreResult<MailCounts> {
        self.database.read(|connection| mail::counts(connection, agent))
    }

    async fn trigger_create(&self, trigger: &TriggerDef) -> StoreResult<TriggerDef> {
        let trigger = trigger.clone();
        self.database.write(move |tx| triggers::create(tx, &trigger)).await
    }

    async fn trigger_get(&self, name: &str) -> StoreResult<Option<TriggerDef>> {
        self.database.read(|connection| triggers::get(connection, name))
    }

    async fn trigger_get_by_id(&self, id: TriggerId) -> StoreResult<Option<TriggerDef>> {
        self.database.read(|connection| triggers::get_by_id(connection, id))
    }

    async fn trigger_list(&self) -> StoreResult<Vec<TriggerDef>> {
        self.database.read_snapshot(triggers::list).await
    }

    async fn trigger_update(&self, trigger: &TriggerDef) -> StoreResult<Option<TriggerDef>> {
        let trigger = trigger.clone();
        self.database.write(move |tx| triggers::update(tx, &trigger)).await
    }

    async fn trigger_delete(&self, id: TriggerId) -> StoreResult<bool> {
        self.database.write(move |tx| triggers::delete(tx, id)).await
    }

    async fn triggers_due(&self, now: Timestamp, limit: i64) -> StoreResult<Vec<TriggerDef>> {
        self.database.read_snapshot(move |snapshot| triggers::due(snapshot, now, limit)).await
    }

    async fn trigger_fire(
        &self,
        id: TriggerId,
        guard: FireGuard,
        delivery: Option<&DeliveryMark>,
        task: &NewTask,
        fired_at: Timestamp,
        now: Timestamp,
    ) -> StoreResult<FireOutcome> {
        let task = task.clone();
        let delivery = delivery.cloned();
        self.database
            .write(move |tx| triggers::fire(tx, id, guard, delivery.as_ref(), &task, fired_at, now))
            .await
    }

    async fn trigger_session_get(
        &self,
        trigger_name: &str,
        key: &str,
    ) -> StoreResult<Option<TriggerSession>> {
        self.database.read(|connection| triggers::session_get(connection, trigger_name, key))
    }

    async fn trigger_session_set(
        &self,
        trigger_name: &str,
        key: &str,
        session_id: &str,
        now: Timestamp,
    ) -> StoreResult<TriggerSession> {
        let (name, key, session_id) = (trigger_name.to_string(), key.to_string(), session_id.to_string());
        self.database.write(move |tx| triggers::session_set(tx, &name, &key, &session_id, now)).await
    }

    async fn task_create_awaited(
        &self,
        task: &NewTask,
        awaiting: &NewTaskAwait,
        now: Timestamp,
    ) -> StoreResult<Task> {
        let (task, awaiting) = (task.clone(), awaiting.clone());
        self.database.write(move |tx| triggers::create_awaited(tx, &task, &awaiting, now)).await
    }

    async fn task_await_get(&self, task_id: TaskId) -> StoreResult<Option<TaskAwait>> {
        self.database.read(|connection| triggers::await_get(connection, task_id))
    }

    async fn task_await_deliver(&self, task_id: TaskId, agent: AgentId, now: Timestamp) -> StoreResult<bool> {
        self.database.write(move |tx| triggers::await_deliver(tx, task_id, agent, now)).await
    }

    async fn event_list(&self, filter: &EventFilter) -> StoreResult<Vec<Event>> {
        let filter = filter.clone();
        self.database.read_snapshot(move |snapshot| events::list(snapshot, &filter)).await
    }

    async fn session_logs_append(&self, logs: &NewSessionLogs, now: Timestamp) -> StoreResult<u64> {
        if logs.lines.is_empty() {
            return Ok(0);
        }
        let logs = logs.clone();
        self.database.write(move |tx| sessions::logs_append(tx, &logs, now)).await
    }

    async fn session_logs_for_task(&self, task_id: TaskId) -> StoreResult<Vec<SessionLog>> {
        self.database.read_snapshot(move |snapshot| sessions::logs_for_task(snapshot, task_id)).await
    }

    async fn session_cost_insert(&self, cost: &NewSessionCost, now: Timestamp) -> StoreResult<SessionCost> {
        let cost = cost.clone();
        self.database.write(move |tx| sessions::cost_insert(tx, &cost, now)).await
    }

    async fn session_cost_list(&self, filter: &SessionCostFilter) -> StoreResult<Vec<SessionCost>> {
        let filter = filter.clone();
        self.database.read_snapshot(move |snapshot| sessions::cost_list(snapshot, &filter)).await
    }

    async fn stats(&self) -> StoreResult<Stats> {
        self.database.read_snapshot(sessions::stats).await
    }

    async fn retention_remove(&self, kind: Expiring, older_than: Timestamp, limit: u32) -> StoreResult<u64> {
        self.database.write(move |tx| retention::remove(tx, kind, older_than, limit)).await
    }

    async fn reclaim_space(&self) -> StoreResult<u64> {
        self.database.on_writer(retention::reclaim).await
    }

    async fn release_memory(&self) -> StoreResult<()> {
        self.views.release();
        self.database.release_memory().await
    }

    fn poll_views_from_memory(&self) -> Option<u64> {
        Some(self.views.served())
    }

    fn writer_usage(&self) -> Option<swarm_store::WriterUsage> {
        Some(self.database.writer_usage())
    }
}
