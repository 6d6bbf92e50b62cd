//! The PostgreSQL implementation of [`swarm_store::Store`], the scale-out backend.
//!
//! Several `swarm serve` replicas may share one database, so every guard lives in SQL and
//! every write is one transaction at READ COMMITTED.
//!
//! Architecture invariant: row locks are always taken in one order — at most one task
//! row first, then agent rows sorted by id. No transaction waits for a task row while it
//! holds an agent row, so these transactions cannot deadlock each other. Both are locked
//! `FOR NO KEY UPDATE` (never `FOR UPDATE`): that serializes writers of the row but not
//! the foreign key checks of concurrent inserts (a new task naming the agent, or depending
//! on the task), which take only `FOR KEY SHARE`. Registration serializes on one advisory
//! lock instead (see `agents.rs`).

/// [`swarm_store::TaskWaiters::assignee_mail_pending`] of the task row `tasks` in scope:
/// one expression, so that the finish's `RETURNING` and `task_waiters` agree.
macro_rules! assignee_mail_pending {
    () => {
        "(EXISTS (SELECT 1 FROM mail WHERE to_agent_id = tasks.agent_id AND status <> 'read') \
          OR EXISTS (SELECT 1 FROM mail WHERE from_agent_id = tasks.agent_id \
                                          AND awaiting_response AND answered_at IS NULL))"
    };
}

mod agents;
mod apply;
mod budgets;
mod chat;
mod counts;
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
mod poll_cache;
mod rescue;
mod retention;
mod rows;
mod runner_records;
mod services;
mod sessions;
mod slack_status;
mod stats;
mod steering;
mod tasks;
mod tokens;
mod trackers;
mod triggers;
mod wakes;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use async_trait::async_trait;
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
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

use crate::error::db;

/// Enough for a replica's concurrent requests; a shared server has to fit every replica's
/// pool (and the test suite's many stores) under its `max_connections`.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 16;
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a pooled connection may sit idle and still be handed out without a ping.
const TRUST_IDLE_CONNECTION_FOR: Duration = Duration::from_secs(1);

pub struct PgStore {
    pool: PgPool,
    description: String,
    /// Names this store in its `NOTIFY` payloads, so it can skip its own.
    origin: uuid::Uuid,
    announcer: wakes::Announcer,
    /// Null polls answered from memory (see `poll_cache.rs` for why that is safe).
    poll_cache: Arc<poll_cache::PollCache>,
    /// Folds the task counts' changes every second while the store lives.
    _count_folder: counts::Folder,
}

impl PgStore {
    /// Connect to a `postgres://` URL with [`DEFAULT_MAX_CONNECTIONS`] and bring the schema
    /// up to date.
    pub async fn connect(url: &str) -> StoreResult<PgStore> {
        Self::connect_with(url, DEFAULT_MAX_CONNECTIONS).await
    }

    /// Like [`PgStore::connect`], with a pool of at most `max_connections`.
    ///
    /// Several processes may start at once on one database: sqlx's migrator holds a
    /// session advisory lock (keyed by the database name) while it checks and applies
    /// migrations, so the later ones wait and then find the work done.
    pub async fn connect_with(url: &str, max_connections: u32) -> StoreResult<PgStore> {
        let options: PgConnectOptions = url.parse().map_err(db)?;
        // Named, so an operator can tell swarm's sessions apart in pg_stat_activity.
        let options = options.application_name("swarm");
        let description = describe_options(&options);
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(ACQUIRE_TIMEOUT)
            // sqlx would ping every connection it hands out: a round trip per store call,
            // a fifth of the server's work on a null poll. A connection used within the
            // last second is trusted instead; one idle for longer is pinged, and replaced
            // when the ping fails (a server restart while the hub was quiet). A connection
            // that breaks while in use fails its request (503, nothing half done: the
            // server rolls back what it had not committed) and sqlx closes it on release.
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for >= TRUST_IDLE_CONNECTION_FOR {
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            })
            .connect_with(options)
            .await
            .map_err(db)?;
        if let Err(err) = sqlx::migrate!("./migrations").run(&pool).await {
            // A failed migration may leave its advisory lock on a pooled connection;
            // closing the pool releases it for the next process.
            pool.close().await;
            return Err(StoreError::Backend(Box::new(err)));
        }
        let origin = uuid::Uuid::new_v4();
        let announcer = wakes::Announcer::start(pool.clone(), origin);
        let _count_folder = counts::Folder::start(pool.clone());
        Ok(PgStore { pool, description, origin, announcer, poll_cache: Arc::default(), _count_folder })
    }

    /// Where the data lives, for start-up logs; never includes the password.
    pub fn describe(&self) -> String {
        self.description.clone()
    }

    /// A store call that may have written has returned: its commit is behind it, and no
    /// poll view read before it may be served again. Called on every write path, errors
    /// included (a failed call may have committed part of a multi-transaction pass).
    fn wrote<T>(&self, result: T) -> T {
        self.poll_cache.changed();
        result
    }

    /// Close the pool, waiting for connections in use to be returned.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

fn describe_options(options: &PgConnectOptions) -> String {
    let database = options.get_database().unwrap_or(options.get_username());
    match options.get_socket() {
        Some(socket) => format!("PostgreSQL at {} (socket)/{database}", socket.display()),
        None => format!("PostgreSQL at {}:{}/{database}", options.get_host(), options.get_port()),
    }
}

#[async_trait]
impl Store for PgStore {
    fn backend_name(&self) -> &'static str {
        "postgres"
    }

    async fn agent_register(&self, agent: &NewAgent, now: Timestamp) -> StoreResult<Registration> {
        self.wrote(agents::register(&self.pool, agent, now).await)
    }

    async fn agent_get(&self, id: AgentId) -> StoreResult<Option<Agent>> {
        agents::get(&self.pool, id).await
    }

    async fn agent_list(&self) -> StoreResult<Vec<Agent>> {
        agents::list(&self.pool).await
    }

    async fn agent_rename(&self, id: AgentId, name: &str, now: Timestamp) -> StoreResult<Option<Agent>> {
        self.wrote(agents::rename(&self.pool, id, name, now).await)
    }

    async fn agent_set_status_reason(
        &self,
        id: AgentId,
        reason: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<Applied<Agent>> {
        self.wrote(agents::set_status_reason(&self.pool, id, reason, now).await)
    }

    async fn agent_update_profile(
        &self,
        id: AgentId,
        update: &ProfileUpdate,
        now: Timestamp,
    ) -> StoreResult<Option<Agent>> {
        self.wrote(agents::update_profile(&self.pool, id, update, now).await)
    }

    async fn agent_heartbeat_from_runner(
        &self,
        id: AgentId,
        now: Timestamp,
        lease_until: Timestamp,
        runner: Option<RunnerId>,
    ) -> StoreResult<Option<Agent>> {
        self.wrote(
            agents::heartbeat(&self.pool, id, now, lease_until, runner.map(|runner| runner.as_uuid())).await,
        )
    }

    async fn agent_heartbeats(&self, beats: &[swarm_store::Heartbeat]) -> StoreResult<Vec<AgentId>> {
        self.wrote(heartbeats::write(&self.pool, beats).await)
    }

    async fn agent_close(&self, id: AgentId, now: Timestamp) -> StoreResult<Option<Agent>> {
        self.wrote(agents::close(&self.pool, id, now).await)
    }

    async fn agent_work_counts(&self, id: AgentId) -> StoreResult<WorkCounts> {
        agents::work_counts(&self.pool, id).await
    }

    async fn agent_token_create(&self, token: &AgentToken, token_hash: &str) -> StoreResult<bool> {
        self.wrote(tokens::create(&self.pool, token, token_hash).await)
    }

    async fn agent_token_list(&self, agent: AgentId) -> StoreResult<Vec<AgentToken>> {
        tokens::list(&self.pool, agent).await
    }

    async fn agent_token_revoke(
        &self,
        agent: AgentId,
        id: AgentTokenId,
        now: Timestamp,
    ) -> StoreResult<Applied<AgentToken>> {
        self.wrote(tokens::revoke(&self.pool, agent, id, now).await)
    }

    async fn agent_token_agent(&self, token_hash: &str) -> StoreResult<Option<AgentId>> {
        tokens::agent_of(&self.pool, token_hash).await
    }

    async fn hub_settings_put(&self, settings: &[(&str, &str)]) -> StoreResult<()> {
        tokens::settings_put(&self.pool, settings).await
    }

    async fn hub_settings(&self) -> StoreResult<Vec<(String, String)>> {
        tokens::settings(&self.pool).await
    }

    async fn task_create(&self, task: &NewTask, now: Timestamp) -> StoreResult<Task> {
        self.wrote(tasks::create(&self.pool, task, now).await)
    }

    async fn task_get(&self, id: TaskId) -> StoreResult<Option<Task>> {
        tasks::get(&self.pool, id).await
    }

    async fn task_list(&self, filter: &TaskFilter) -> StoreResult<(Vec<Task>, i64)> {
        tasks::list(&self.pool, filter).await
    }

    async fn task_unfinished_dependencies(&self, id: TaskId) -> StoreResult<Vec<TaskId>> {
        tasks::unfinished_dependencies(&self.pool, id).await
    }

    async fn task_waiters(&self, id: TaskId) -> StoreResult<TaskWaiters> {
        tasks::waiters(&self.pool, id).await
    }

    async fn task_apply(
        &self,
        id: TaskId,
        change: &TaskChange,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>> {
        self.wrote(apply::apply(&self.pool, id, change, actor, now).await)
    }

    async fn task_apply_with_waiters(
        &self,
        id: TaskId,
        change: &TaskChange,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<(Applied<Task>, Option<TaskWaiters>)> {
        self.wrote(apply::apply_with_waiters(&self.pool, id, change, actor, now).await)
    }

    async fn task_give_back(
        &self,
        id: TaskId,
        change: &TaskChange,
        agent: AgentId,
        reason: &str,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>> {
        self.wrote(handback::give_back(&self.pool, id, change, agent, reason, now).await)
    }

    async fn task_edit_text(
        &self,
        id: TaskId,
        text: &str,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>> {
        self.wrote(apply::edit_text(&self.pool, id, text, actor, now).await)
    }

    async fn task_set_priority(
        &self,
        id: TaskId,
        priority: i32,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>> {
        self.wrote(apply::set_priority(&self.pool, id, priority, actor, now).await)
    }

    async fn task_set_progress(
        &self,
        id: TaskId,
        progress: &str,
        assignee: Option<AgentId>,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>> {
        self.wrote(apply::set_progress(&self.pool, id, progress, assignee, actor, now).await)
    }

    fn poll_view_kept(&self, agent: AgentId) -> StoreResult<Option<PollView>> {
        Ok(self.poll_cache.get(agent))
    }

    async fn poll_view(&self, agent: AgentId) -> StoreResult<Option<PollView>> {
        if let Some(view) = self.poll_cache.get(agent) {
            return Ok(Some(view));
        }
        // Read before the database: a change committed after this moves it.
        let generation = self.poll_cache.generation();
        let read_at = Instant::now();
        let view = poll::view(&self.pool, agent).await?;
        if let Some(view) = &view {
            self.poll_cache.keep(agent, generation, read_at, view);
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
        self.wrote(
            poll::claim(&self.pool, agent, kinds, now, lease_until, runner.map(|runner| runner.as_uuid()))
                .await,
        )
    }

    async fn claims_release(
        &self,
        agent: AgentId,
        holder: RunnerId,
        items: Option<&HeldItems>,
        max_deliveries: i32,
        now: Timestamp,
    ) -> StoreResult<Released> {
        self.wrote(
            held_claims::release(&self.pool, agent, holder.as_uuid(), items, max_deliveries, now).await,
        )
    }

    async fn rescue(&self, policy: &LeasePolicy, now: Timestamp) -> StoreResult<RescueReport> {
        self.wrote(rescue::rescue(&self.pool, policy, now).await)
    }

    async fn announce(&self, wakes: &[Wake]) -> StoreResult<()> {
        self.announcer.announce(wakes);
        Ok(())
    }

    async fn watch_external_changes(&self, sink: tokio::sync::mpsc::Sender<Wake>) -> StoreResult<()> {
        wakes::watch_external_changes(&self.pool, self.origin, self.poll_cache.clone(), sink).await
    }

    async fn inbox_create(&self, message: &NewInboxMessage, now: Timestamp) -> StoreResult<InboxMessage> {
        self.wrote(inbox::create(&self.pool, message, now).await)
    }

    async fn inbox_get(&self, id: InboxMessageId) -> StoreResult<Option<InboxMessage>> {
        inbox::get(&self.pool, id).await
    }

    async fn inbox_list(
        &self,
        agent: AgentId,
        statuses: &[InboxStatus],
        limit: i64,
    ) -> StoreResult<Vec<InboxMessage>> {
        inbox::list(&self.pool, agent, statuses, limit).await
    }

    async fn inbox_apply(
        &self,
        id: InboxMessageId,
        change: &InboxChange,
        now: Timestamp,
    ) -> StoreResult<Applied<InboxMessage>> {
        self.wrote(inbox::apply(&self.pool, id, change, now).await)
    }

    async fn inbox_requeue(&self, id: InboxMessageId, now: Timestamp) -> StoreResult<Applied<InboxMessage>> {
        self.wrote(inbox::requeue(&self.pool, id, now).await)
    }

    async fn inbox_delegate(
        &self,
        id: InboxMessageId,
        owner: AgentId,
        task: &NewTask,
        now: Timestamp,
    ) -> StoreResult<Applied<InboxMessage>> {
        self.wrote(inbox::delegate(&self.pool, id, owner, task, now).await)
    }

    async fn slack_mark_once(&self, kind: SlackMark, key: &str, now: Timestamp) -> StoreResult<bool> {
        self.wrote(inbox::mark_once(&self.pool, kind, key, now).await)
    }

    async fn slack_outcomes_unannounced(&self, since: Timestamp, limit: i64) -> StoreResult<Vec<Task>> {
        inbox::slack_outcomes_unannounced(&self.pool, since, limit).await
    }

    async fn channel_create(&self, channel: &NewChannel, now: Timestamp) -> StoreResult<Channel> {
        self.wrote(chat::channel_create(&self.pool, channel, now).await)
    }

    async fn channel_get(&self, id: ChannelId) -> StoreResult<Option<Channel>> {
        chat::channel_get(&self.pool, id).await
    }

    async fn channel_list(&self) -> StoreResult<Vec<Channel>> {
        chat::channel_list(&self.pool).await
    }

    async fn chat_post(&self, message: &NewChatMessage, now: Timestamp) -> StoreResult<ChatMessage> {
        self.wrote(chat::post(&self.pool, message, now).await)
    }

    async fn chat_message_get(&self, id: ChatMessageId) -> StoreResult<Option<ChatMessage>> {
        chat::message_get(&self.pool, id).await
    }

    async fn chat_messages(&self, channel: ChannelId, query: &MessageQuery) -> StoreResult<Vec<ChatMessage>> {
        chat::messages(&self.pool, channel, query).await
    }

    async fn chat_thread(&self, root: ChatMessageId) -> StoreResult<Vec<ChatMessage>> {
        chat::thread(&self.pool, root).await
    }

    async fn chat_last_read(&self, agent: AgentId, channel: ChannelId) -> StoreResult<Option<Timestamp>> {
        chat::last_read(&self.pool, agent, channel).await
    }

    async fn chat_mark_read(&self, agent: AgentId, channel: ChannelId, up_to: Timestamp) -> StoreResult<()> {
        self.wrote(chat::mark_read(&self.pool, agent, channel, up_to).await)
    }

    async fn chat_unread_mentions(&self, agent: AgentId) -> StoreResult<Vec<(ChannelId, i64)>> {
        chat::unread_mentions(&self.pool, agent).await
    }

    async fn mail_send(&self, mail: &NewMail, now: Timestamp) -> StoreResult<Mail> {
        self.wrote(mail::send(&self.pool, mail, now).await)
    }

    async fn mail_stop_alert(
        &self,
        agent: AgentId,
        key: &str,
        alert: &NewMail,
        now: Timestamp,
    ) -> StoreResult<Option<Mail>> {
        self.wrote(mail::stop_alert(&self.pool, agent, key, alert, now).await)
    }

    async fn mail_get(&self, id: MailId) -> StoreResult<Option<Mail>> {
        mail::get(&self.pool, id).await
    }

    async fn mail_list(&self, query: &MailQuery) -> StoreResult<Vec<Mail>> {
        mail::list(&self.pool, query).await
    }

    async fn mail_deliver(
        &self,
        recipient: AgentId,
        delivery: &MailDelivery,
        now: Timestamp,
    ) -> StoreResult<Vec<Mail>> {
        self.wrote(mail::deliver(&self.pool, recipient, delivery, now).await)
    }

    async fn mail_counts(&self, agent: AgentId) -> StoreResult<MailCounts> {
        mail::counts(&self.pool, agent).await
    }

    async fn trigger_create(&self, trigger: &TriggerDef) -> StoreResult<TriggerDef> {
        self.wrote(triggers::create(&self.pool, trigger).await)
    }

    async fn trigger_get(&self, name: &str) -> StoreResult<Option<TriggerDef>> {
        triggers::get(&self.pool, name).await
    }

    async fn trigger_get_by_id(&self, id: TriggerId) -> StoreResult<Option<TriggerDef>> {
        triggers::get_by_id(&self.pool, id).await
    }

    async fn trigger_list(&self) -> StoreResult<Vec<TriggerDef>> {
        triggers::list(&self.pool).await
    }

    async fn trigger_update(&self, trigger: &TriggerDef) -> StoreResult<Option<TriggerDef>> {
        self.wrote(triggers::update(&self.pool, trigger).await)
    }

    async fn trigger_delete(&self, id: TriggerId) -> StoreResult<bool> {
        self.wrote(triggers::delete(&self.pool, id).await)
    }

    async fn triggers_due(&self, now: Timestamp, limit: i64) -> StoreResult<Vec<TriggerDef>> {
        triggers::due(&self.pool, now, limit).await
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
        self.wrote(triggers::fire(&self.pool, id, guard, delivery, task, fired_at, now).await)
    }

    async fn trigger_session_get(
        &self,
        trigger_name: &str,
        key: &str,
    ) -> StoreResult<Option<TriggerSession>> {
        triggers::session_get(&self.pool, trigger_name, key).await
    }

    async fn trigger_session_set(
        &self,
        trigger_name: &str,
        key: &str,
        session_id: &str,
        now: Timestamp,
    ) -> StoreResult<TriggerSession> {
        self.wrote(triggers::session_set(&self.pool, trigger_name, key, session_id, now).await)
    }

    async fn task_create_awaited(
        &self,
        task: &NewTask,
        awaiting: &NewTaskAwait,
        now: Timestamp,
    ) -> StoreResult<Task> {
        self.wrote(triggers::create_awaited(&self.pool, task, awaiting, now).await)
    }

    async fn task_await_get(&self, task_id: TaskId) -> StoreResult<Option<TaskAwait>> {
        triggers::await_get(&self.pool, task_id).await
    }

    async fn task_await_deliver(&self, task_id: TaskId, agent: AgentId, now: Timestamp) -> StoreResult<bool> {
        self.wrote(triggers::await_deliver(&self.pool, task_id, agent, now).await)
    }

    async fn event_list(&self, filter: &EventFilter) -> StoreResult<Vec<Event>> {
        events::list(&self.pool, filter).await
    }

    async fn session_logs_append(&self, logs: &NewSessionLogs, now: Timestamp) -> StoreResult<u64> {
        self.wrote(sessions::logs_append(&self.pool, logs, now).await)
    }

    async fn session_logs_for_task(&self, task_id: TaskId) -> StoreResult<Vec<SessionLog>> {
        sessions::logs_for_task(&self.pool, task_id).await
    }

    async fn session_cost_insert(&self, cost: &NewSessionCost, now: Timestamp) -> StoreResult<SessionCost> {
        self.wrote(sessions::cost_insert(&self.pool, cost, now).await)
    }

    async fn session_cost_list(&self, filter: &SessionCostFilter) -> StoreResult<Vec<SessionCost>> {
        sessions::cost_list(&self.pool, filter).await
    }

    async fn stats(&self) -> StoreResult<Stats> {
        stats::stats(&self.pool).await
    }

    async fn retention_remove(&self, kind: Expiring, older_than: Timestamp, limit: u32) -> StoreResult<u64> {
        self.wrote(retention::remove(&self.pool, kind, older_than, limit).await)
    }

    async fn release_memory(&self) -> StoreResult<()> {
        self.poll_cache.release();
        Ok(())
    }

    fn pool_usage(&self) -> Option<(u32, u32)> {
        Some((self.pool.size(), u32::try_from(self.pool.num_idle()).unwrap_or(u32::MAX)))
    }

    fn poll_views_from_memory(&self) -> Option<u64> {
        Some(self.poll_cache.served())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_leaves_out_the_password() {
        let options: PgConnectOptions = "postgres://swarm:secret@db.example:5433/swarm".parse().unwrap();
        let text = describe_options(&options);
        assert_eq!(text, "PostgreSQL at db.example:5433/swarm");
        assert!(!text.contains("secret"));
    }
}
