//! The storage interface of swarm.
//!
//! One trait, two implementations (`swarm-store-sqlite`, `swarm-store-postgres`), one
//! conformance suite ([`testkit`], feature `testkit`) that each runs from its `tests/`.
//!
//! Architecture invariant: every method that changes state is one transaction whose SQL
//! carries its guard; a guard that is false changes nothing and is reported as an
//! outcome ([`Applied::Refused`]), never as an error string. Every state change appends
//! its event log rows in the same transaction. Permissions are not checked here: that is
//! the service's job.

pub mod budgets;
pub mod epics;
pub mod insight;
pub mod mcp_tasks;
pub mod runner_records;
pub mod services;
pub mod slack_status;
pub mod sql;
pub mod steering;
mod task_filter;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod trackers;
mod values;

pub use budgets::BudgetStore;
pub use epics::{EpicFilter, EpicStore};
pub use insight::InsightStore;
pub use mcp_tasks::McpTaskStore;
pub use runner_records::{
    NewWorkerEvent, RecordArea, RunnerRecord, RunnerRecords, WorkerEvent, WorkerEventFilter,
};
pub use services::{ServiceFilter, ServiceRegistry};
pub use slack_status::{SlackStatusMessage, SlackStatusStore};
pub use steering::{SteeringRecorded, SteeringStore};
pub use task_filter::TaskFilter;
pub use trackers::{TrackerLink, TrackerReportDue, TrackerStore, TrackerSync, TrackerTaskCreated};
pub use values::{
    Applied, DeliveryMark, EventFilter, FireGuard, FireOutcome, Heartbeat, HeldItems, NewTaskAwait, PollView,
    Released, SessionCostFilter, StoreError, StoreResult, TaskWaiters, WriterUsage,
};

use async_trait::async_trait;
use swarm_domain::{
    agent::{Agent, NewAgent, ProfileUpdate, Registration},
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

#[async_trait]
pub trait Store:
    BudgetStore
    + EpicStore
    + InsightStore
    + ServiceRegistry
    + McpTaskStore
    + RunnerRecords
    + SteeringStore
    + SlackStatusStore
    + TrackerStore
    + Send
    + Sync
    + 'static
{
    /// `"sqlite"` or `"postgres"`, for logs and `/health`.
    fn backend_name(&self) -> &'static str;

    // ----- agents -----

    /// Insert the agent, or, when `agent.id` exists, bring it back (`offline` → `idle`,
    /// logged as `agent_status_change`) and update `max_tasks`; other fields are kept.
    /// Conflicts: the name is taken by another agent; `agent.is_lead` while another
    /// lead that is not `offline` exists (this check and the insert are atomic).
    async fn agent_register(&self, agent: &NewAgent, now: Timestamp) -> StoreResult<Registration>;
    async fn agent_get(&self, id: AgentId) -> StoreResult<Option<Agent>>;
    /// All agents ordered by name.
    async fn agent_list(&self) -> StoreResult<Vec<Agent>>;
    /// Conflict when another agent has the name.
    async fn agent_rename(&self, id: AgentId, name: &str, now: Timestamp) -> StoreResult<Option<Agent>>;
    async fn agent_update_profile(
        &self,
        id: AgentId,
        update: &ProfileUpdate,
        now: Timestamp,
    ) -> StoreResult<Option<Agent>>;
    /// A heartbeat: `offline` → `idle` (logged), `last_updated_at` and the agent's last
    /// sign of life bumped, and the lease of every task it holds (`reviewing` offered to
    /// it, `in_progress` assigned to it) and of its `processing` inbox messages extended
    /// to `lease_until`.
    async fn agent_heartbeat(
        &self,
        id: AgentId,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> StoreResult<Option<Agent>> {
        self.agent_heartbeat_from_runner(id, now, lease_until, None).await
    }
    /// [`Store::agent_heartbeat`] sent by a runner: the lead-side claims (inbox
    /// messages, mentioning channels, urgent mail) extended are those `runner` holds and
    /// those no runner holds, never another runner's; without a runner, only the latter.
    async fn agent_heartbeat_from_runner(
        &self,
        id: AgentId,
        now: Timestamp,
        lease_until: Timestamp,
        runner: Option<RunnerId>,
    ) -> StoreResult<Option<Agent>>;
    /// Heartbeats of many agents in one transaction, what a hub writes instead of one
    /// transaction per heartbeat: for each agent that is not `offline`, its last sign of
    /// life moves up to `at` and the leases it holds (those
    /// [`Store::agent_heartbeat_from_runner`] extends, by the beat's runner) up to
    /// `lease_until`; neither ever moves back. An `offline` or unknown agent is left as
    /// it is and returned: bringing it back is [`Store::agent_heartbeat_from_runner`]'s,
    /// logged. Rows are locked in the crate's order (tasks, then agents by id), so
    /// batches of several hubs do not deadlock.
    async fn agent_heartbeats(&self, beats: &[Heartbeat]) -> StoreResult<Vec<AgentId>>;
    /// The agent goes `offline` (logged as `agent_left`); a no-op when already offline.
    async fn agent_close(&self, id: AgentId, now: Timestamp) -> StoreResult<Option<Agent>>;
    /// Record why the agent stopped taking work (`Some`), or clear it (`None`), as one
    /// guarded `UPDATE` (the reason differs from the stored one), logged as
    /// `agent_status_reason`. `Refused` when it already was so. A poll that claims a
    /// task for the agent clears it too, in the claim's transaction.
    async fn agent_set_status_reason(
        &self,
        id: AgentId,
        reason: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<Applied<Agent>>;
    /// Offered-to-me, pool (unassigned) and my in-progress counts.
    async fn agent_work_counts(&self, id: AgentId) -> StoreResult<WorkCounts>;

    // ----- agent tokens -----

    /// Keep `token` with `token_hash` (the SHA-256 of the secret, hex), as one `INSERT`
    /// that finds the agent. `false` when `token.agent_id` is not a registered agent.
    async fn agent_token_create(&self, token: &AgentToken, token_hash: &str) -> StoreResult<bool>;
    /// The agent's tokens, revoked ones too, oldest first.
    async fn agent_token_list(&self, agent: AgentId) -> StoreResult<Vec<AgentToken>>;
    /// Revoke the agent's token `id`, guarded by `revoked_at IS NULL`. `Refused` when it
    /// was already revoked; `NotFound` when the agent has no such token.
    async fn agent_token_revoke(
        &self,
        agent: AgentId,
        id: AgentTokenId,
        now: Timestamp,
    ) -> StoreResult<Applied<AgentToken>>;
    /// The agent whose live (not revoked) token has this hash: one probe of the unique
    /// index, read on every request in token mode (nothing is cached, so a revocation
    /// holds at once on every replica).
    async fn agent_token_agent(&self, token_hash: &str) -> StoreResult<Option<AgentId>>;

    // ----- hub settings -----

    /// Keep each `(name, value)` (replacing what was there), all in one transaction: what
    /// the hub tells every process on its database (`swarm_service::HubSettings`).
    async fn hub_settings_put(&self, settings: &[(&str, &str)]) -> StoreResult<()>;
    /// Every setting the hub wrote, by name.
    async fn hub_settings(&self) -> StoreResult<Vec<(String, String)>>;

    // ----- tasks -----

    /// Insert the task with its tags and dependencies, logging `task_created` (and
    /// `task_offered` when offered), in one transaction. A named agent or dependency that
    /// does not exist is `MissingReference`, with a message naming it.
    async fn task_create(&self, task: &NewTask, now: Timestamp) -> StoreResult<Task>;
    async fn task_get(&self, id: TaskId) -> StoreResult<Option<Task>>;
    /// A page of tasks, newest first, and the total that match the filter.
    async fn task_list(&self, filter: &TaskFilter) -> StoreResult<(Vec<Task>, i64)>;
    /// Dependencies of the task that are not `completed`.
    async fn task_unfinished_dependencies(&self, id: TaskId) -> StoreResult<Vec<TaskId>>;
    /// Who waits for this task to finish: dependent tasks, and a trigger session that
    /// awaits its result. One read, made after a task finishes to know whom to wake.
    async fn task_waiters(&self, id: TaskId) -> StoreResult<TaskWaiters>;

    /// Apply one transition of the task state machine as a single guarded `UPDATE`:
    /// `status IN change.from` and every part of `change.guard` must hold. On success it
    /// also, in the same transaction: logs `task_status_change` (old → new status, by
    /// `actor`) and `change.event` when set; and sets the status of the agents involved
    /// (the assignee before and after) to `busy` when they hold an `in_progress` task,
    /// else `idle`, unless they are `offline` (logged as `agent_status_change`).
    async fn task_apply(
        &self,
        id: TaskId,
        change: &TaskChange,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>>;

    /// [`Store::task_apply`], and the [`Store::task_waiters`] of a task the change
    /// finished, read in the same transaction (`None` when the change finished nothing).
    /// It spares a finish its one read after the write.
    async fn task_apply_with_waiters(
        &self,
        id: TaskId,
        change: &TaskChange,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<(Applied<Task>, Option<TaskWaiters>)>;

    /// An agent gives back a task it holds, saying why (its runner stopped a run going
    /// nowhere, issue 40): [`Store::task_apply`] of `change` by `agent` and, when it applies,
    /// the move recorded for the lead's `tasks_handed_back` trigger, in one transaction. A
    /// refused guard records nothing.
    async fn task_give_back(
        &self,
        id: TaskId,
        change: &TaskChange,
        agent: AgentId,
        reason: &str,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>>;

    /// Replace the task's text, guarded by its status being one of
    /// [`TaskStatus::EDITABLE`] (nobody has taken it up). Logs `task_edited`.
    async fn task_edit_text(
        &self,
        id: TaskId,
        text: &str,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>>;

    /// Set the task's priority (0..=100, checked by the caller), guarded by the task not
    /// being finished. Logs `task_edited` with the old and new priority.
    async fn task_set_priority(
        &self,
        id: TaskId,
        priority: i32,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>>;

    /// Record a progress note, guarded by the task not being finished and, when given,
    /// by `assignee`. Logs `task_progress`.
    async fn task_set_progress(
        &self,
        id: TaskId,
        progress: &str,
        assignee: Option<AgentId>,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>>;

    // ----- the poll and its leases -----

    /// `None` when the agent does not exist.
    async fn poll_view(&self, agent: AgentId) -> StoreResult<Option<PollView>>;

    /// The agent's poll view if the store keeps it in memory and it is still the
    /// database's (both stores' null-poll caches), without reading the database or
    /// waiting; `None`: ask `poll_view`. An idle runner's every poll comes here first, so
    /// it costs neither a store call's future nor its clock.
    fn poll_view_kept(&self, _agent: AgentId) -> StoreResult<Option<PollView>> {
        Ok(None)
    }

    /// Claim, in one transaction, the first of `kinds` (in that order) that has something
    /// for the agent, and return it as a trigger with the kind that yielded it. The caller has already filtered `kinds`
    /// by the agent's role; capacity is checked here, in the claim's guard. A claimed
    /// task's lease runs until `lease_until`. Every claim is logged.
    async fn poll_claim(
        &self,
        agent: AgentId,
        kinds: &[TriggerKind],
        now: Timestamp,
        lease_until: Timestamp,
    ) -> StoreResult<Option<(TriggerKind, Trigger)>> {
        self.poll_claim_for_runner(agent, kinds, now, lease_until, None).await
    }
    /// [`Store::poll_claim`] for a runner: the lead-side claims it takes are held by
    /// `runner` (see [`Store::agent_heartbeat_from_runner`]).
    async fn poll_claim_for_runner(
        &self,
        agent: AgentId,
        kinds: &[TriggerKind],
        now: Timestamp,
        lease_until: Timestamp,
        runner: Option<RunnerId>,
    ) -> StoreResult<Option<(TriggerKind, Trigger)>>;

    /// The lead-side claims (inbox messages, mentioning channels, urgent mail, task
    /// results) of `agent` that `holder` still holds in their claimed state go back where
    /// a poll finds them, or become dead letters when handed over `max_deliveries` times:
    /// all of them (`items: None`, a restarted runner's previous life), or only `items`
    /// (an agent run that ended). One transaction; items finished meanwhile or held by
    /// another runner are left alone.
    async fn claims_release(
        &self,
        agent: AgentId,
        holder: RunnerId,
        items: Option<&HeldItems>,
        max_deliveries: i32,
        now: Timestamp,
    ) -> StoreResult<Released>;

    /// One pass of the rescuer: every claim whose lease ran out before `now` goes back
    /// where it came from, or fails after `policy.max_losses` losses
    /// ([`swarm_domain::lease::on_expiry`]); lead-side claims come back, or become dead
    /// letters after `policy.max_deliveries`; task results whose awaiting agent stayed
    /// offline for `policy.result_handoff` (or were dead-lettered) go to the lead that is
    /// online; agents silent for a lease period go
    /// `offline`. Each change is guarded and logged; replicas may run this at once.
    async fn rescue(&self, policy: &LeasePolicy, now: Timestamp) -> StoreResult<RescueReport>;

    /// Tell other processes on this database that these wakes happened. A no-op where
    /// [`Store::watch_external_changes`] finds changes by itself.
    async fn announce(&self, wakes: &[Wake]) -> StoreResult<()>;

    /// Run until `sink` closes, sending a wake for every change another process made to
    /// the database, within a second. A change whose audience is unknown is sent as
    /// [`Wake::Everyone`].
    async fn watch_external_changes(&self, sink: tokio::sync::mpsc::Sender<Wake>) -> StoreResult<()>;

    // ----- the lead's inbox and the Slack bridge -----

    /// Insert an `unread` inbox message. A lead that does not exist is `MissingReference`.
    async fn inbox_create(&self, message: &NewInboxMessage, now: Timestamp) -> StoreResult<InboxMessage>;
    async fn inbox_get(&self, id: InboxMessageId) -> StoreResult<Option<InboxMessage>>;
    /// The agent's messages, oldest first, in any of `statuses` (empty: all), at most `limit`.
    async fn inbox_list(
        &self,
        agent: AgentId,
        statuses: &[InboxStatus],
        limit: i64,
    ) -> StoreResult<Vec<InboxMessage>>;
    /// Close an open message (`status IN change.from()`) as one guarded `UPDATE`, its
    /// lease cleared.
    async fn inbox_apply(
        &self,
        id: InboxMessageId,
        change: &InboxChange,
        now: Timestamp,
    ) -> StoreResult<Applied<InboxMessage>>;
    /// An operator puts a dead letter back: `dead_letter` → `unread`, its delivery count
    /// reset, as one guarded `UPDATE`.
    async fn inbox_requeue(&self, id: InboxMessageId, now: Timestamp) -> StoreResult<Applied<InboxMessage>>;
    /// `inbox-delegate` in one transaction: the message, owned by `owner` and open, is
    /// marked `delegated` to `task`, and `task` is created (logged as by `task_create`).
    /// A false guard creates nothing.
    async fn inbox_delegate(
        &self,
        id: InboxMessageId,
        owner: AgentId,
        task: &NewTask,
        now: Timestamp,
    ) -> StoreResult<Applied<InboxMessage>>;
    /// Take the mark `(kind, key)`: `true` for the one caller that took it, `false` for
    /// everyone after (any process, any replica, after any restart).
    async fn slack_mark_once(&self, kind: SlackMark, key: &str, now: Timestamp) -> StoreResult<bool>;
    /// Finished (`completed`, `failed`) tasks with a Slack thread, finished at or after
    /// `since`, whose outcome has no [`SlackMark::TaskOutcome`] yet; oldest first.
    async fn slack_outcomes_unannounced(&self, since: Timestamp, limit: i64) -> StoreResult<Vec<Task>>;

    // ----- channels (agent chat) -----

    /// Insert a channel. A taken name is `Conflict`; a participant or creator that does
    /// not exist is `MissingReference`. `general` exists from the migration on.
    async fn channel_create(&self, channel: &NewChannel, now: Timestamp) -> StoreResult<Channel>;
    async fn channel_get(&self, id: ChannelId) -> StoreResult<Option<Channel>>;
    /// Every channel, ordered by name.
    async fn channel_list(&self) -> StoreResult<Vec<Channel>>;
    /// In one transaction: the message, one mention row per mentioned agent, each
    /// mentioned agent's unread count for the channel bumped, and `message.tasks` created
    /// (logged as by `task_create`). A channel, author, mentioned agent or replied-to
    /// message that does not exist is `MissingReference`.
    async fn chat_post(&self, message: &NewChatMessage, now: Timestamp) -> StoreResult<ChatMessage>;
    async fn chat_message_get(&self, id: ChatMessageId) -> StoreResult<Option<ChatMessage>>;
    /// The channel's messages chosen by `query` ([`MessageQuery`]), oldest first.
    async fn chat_messages(&self, channel: ChannelId, query: &MessageQuery) -> StoreResult<Vec<ChatMessage>>;
    /// The message and its replies, oldest first; empty when it does not exist.
    async fn chat_thread(&self, root: ChatMessageId) -> StoreResult<Vec<ChatMessage>>;
    /// When the agent last read the channel (`None`: never).
    async fn chat_last_read(&self, agent: AgentId, channel: ChannelId) -> StoreResult<Option<Timestamp>>;
    /// The agent read the channel up to `up_to`, as one upsert: `last_read_at` moves
    /// forward (never back), the poll's claim (`processing_since`, lease) is cleared and
    /// the unread mention count is recounted from the mention rows after `last_read_at`.
    async fn chat_mark_read(&self, agent: AgentId, channel: ChannelId, up_to: Timestamp) -> StoreResult<()>;
    /// The agent's unread mention counts, per channel that has any.
    async fn chat_unread_mentions(&self, agent: AgentId) -> StoreResult<Vec<(ChannelId, i64)>>;

    // ----- agent mail -----

    /// Append the mail. A reply (`in_reply_to`) also, in the same transaction, delivers
    /// the replied-to mail (→ `read`) and answers it (`answered_at`, when it awaited a
    /// response), both guarded on the replier being its recipient. A sender, recipient
    /// or replied-to mail that does not exist is `MissingReference`.
    async fn mail_send(&self, mail: &NewMail, now: Timestamp) -> StoreResult<Mail>;
    async fn mail_get(&self, id: MailId) -> StoreResult<Option<Mail>>;
    /// A page of mail ([`MailQuery`]).
    async fn mail_list(&self, query: &MailQuery) -> StoreResult<Vec<Mail>>;
    /// Deliver the recipient's undelivered mail chosen by `delivery` in one transaction
    /// (`unread`/`processing` → `read`, guarded on both); returns what this call
    /// delivered, urgent first, then oldest first. Mail delivered meanwhile by someone
    /// else is not returned twice.
    async fn mail_deliver(
        &self,
        recipient: AgentId,
        delivery: &MailDelivery,
        now: Timestamp,
    ) -> StoreResult<Vec<Mail>>;
    /// An agent stopped with mail pending (`key`: a digest of that mail): unless its
    /// coordinator was told about exactly that already (`agents.stop_alert_key`, the
    /// guard), record `key` and append `alert` (as `mail_send`), in one transaction.
    /// `None` when it was told already.
    async fn mail_stop_alert(
        &self,
        agent: AgentId,
        key: &str,
        alert: &NewMail,
        now: Timestamp,
    ) -> StoreResult<Option<Mail>>;
    /// The agent's undelivered mail by priority and its mail awaiting a response.
    async fn mail_counts(&self, agent: AgentId) -> StoreResult<MailCounts>;

    // ----- triggers -----

    /// Insert a trigger. A taken name is `Conflict`.
    async fn trigger_create(&self, trigger: &TriggerDef) -> StoreResult<TriggerDef>;
    async fn trigger_get(&self, name: &str) -> StoreResult<Option<TriggerDef>>;
    async fn trigger_get_by_id(&self, id: TriggerId) -> StoreResult<Option<TriggerDef>>;
    /// Every trigger, by name.
    async fn trigger_list(&self) -> StoreResult<Vec<TriggerDef>>;
    /// Replace the definition of `trigger.id` (everything but the id, name, type, run
    /// counters and creation), `next_run_at` included. `None` when it does not exist.
    async fn trigger_update(&self, trigger: &TriggerDef) -> StoreResult<Option<TriggerDef>>;
    /// Delete the trigger, its sessions and its delivery marks, in one transaction.
    async fn trigger_delete(&self, id: TriggerId) -> StoreResult<bool>;
    /// Enabled triggers whose `next_run_at` is at or before `now`, earliest first.
    async fn triggers_due(&self, now: Timestamp, limit: i64) -> StoreResult<Vec<TriggerDef>>;
    /// Fire the trigger in one transaction: the guard ([`FireGuard`]) as one `UPDATE`
    /// that also sets `last_run_at = fired_at` and bumps `run_count`; the delivery mark
    /// when `delivery` is given (one still marked is [`FireOutcome::Duplicate`]); and
    /// `task`, created as by `task_create` at `now`. A false guard creates nothing.
    async fn trigger_fire(
        &self,
        id: TriggerId,
        guard: FireGuard,
        delivery: Option<&DeliveryMark>,
        task: &NewTask,
        fired_at: Timestamp,
        now: Timestamp,
    ) -> StoreResult<FireOutcome>;
    async fn trigger_session_get(&self, trigger_name: &str, key: &str)
    -> StoreResult<Option<TriggerSession>>;
    /// Record (insert or replace) the agent session of one conversation.
    async fn trigger_session_set(
        &self,
        trigger_name: &str,
        key: &str,
        session_id: &str,
        now: Timestamp,
    ) -> StoreResult<TriggerSession>;
    /// Create `task` (as `task_create`) and record who awaits it, in one transaction.
    async fn task_create_awaited(
        &self,
        task: &NewTask,
        awaiting: &NewTaskAwait,
        now: Timestamp,
    ) -> StoreResult<Task>;
    async fn task_await_get(&self, task_id: TaskId) -> StoreResult<Option<TaskAwait>>;
    /// The runner resumed the awaiting session with the result: `delivered_at` set,
    /// guarded by `agent` being the awaiting agent and by it not being delivered yet.
    async fn task_await_deliver(&self, task_id: TaskId, agent: AgentId, now: Timestamp) -> StoreResult<bool>;

    // ----- event log, sessions, stats -----

    /// Newest first.
    async fn event_list(&self, filter: &EventFilter) -> StoreResult<Vec<Event>>;
    /// Appends the lines in order; returns how many were stored.
    async fn session_logs_append(&self, logs: &NewSessionLogs, now: Timestamp) -> StoreResult<u64>;
    /// In the order they were written.
    async fn session_logs_for_task(&self, task_id: TaskId) -> StoreResult<Vec<SessionLog>>;
    async fn session_cost_insert(&self, cost: &NewSessionCost, now: Timestamp) -> StoreResult<SessionCost>;
    /// Newest first.
    async fn session_cost_list(&self, filter: &SessionCostFilter) -> StoreResult<Vec<SessionCost>>;
    async fn stats(&self) -> StoreResult<Stats>;

    // ----- retention -----

    /// Removes at most `limit` rows of `kind` that are older than `older_than` and belong
    /// to no unfinished work (see [`Expiring`]; MCP tasks: that expired at or before
    /// `older_than`), in one short transaction; returns how many
    /// it removed. The caller repeats it while it returns `limit`, so that no write waits
    /// long behind it.
    async fn retention_remove(&self, kind: Expiring, older_than: Timestamp, limit: u32) -> StoreResult<u64>;
    /// Gives back to the file system some of the space that removed rows freed (SQLite's
    /// `incremental_vacuum`, a bounded step); returns the pages given back. A store whose
    /// database reuses and returns space by itself (PostgreSQL's autovacuum) does nothing.
    async fn reclaim_space(&self) -> StoreResult<u64> {
        Ok(0)
    }

    /// A connection pool's `(open, idle)` connections, for metrics; `None` without one
    /// (SQLite's one writer and its readers are not a pool worth watching).
    fn pool_usage(&self) -> Option<(u32, u32)> {
        None
    }

    /// Frees the caches this store keeps for speed, for a hub that has gone quiet: the next
    /// requests fill them again. Both stores forget their null polls' views; SQLite also
    /// empties each connection's page cache (`PRAGMA shrink_memory`).
    async fn release_memory(&self) -> StoreResult<()> {
        Ok(())
    }

    /// Poll views answered from memory, without reading the database, since the store
    /// opened (both stores' null-poll caches); `None` for a store without one.
    fn poll_views_from_memory(&self) -> Option<u64> {
        None
    }

    /// The writer thread's work since the store opened; `None` for a store that writes
    /// on many connections (PostgreSQL).
    fn writer_usage(&self) -> Option<WriterUsage> {
        None
    }
}
