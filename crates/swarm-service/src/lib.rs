//! The operations of swarm. This is the only layer that changes state: REST handlers,
//! MCP tools and every other adapter call these functions and nothing below them.
//!
//! Each operation checks who may do it, calls one guarded store operation, and
//! publishes a [`Change`] after it committed, so long-polls and live views can wake.

mod activity;
mod agents;
pub mod auth;
mod budgets;
mod chat;
mod claims;
pub mod clock;
mod delegation;
mod epics;
mod error;
mod handback;
mod heartbeats;
mod history;
mod inbox;
mod insight;
mod mail;
mod mcp_tasks;
mod poll;
mod registry;
mod reporting;
mod rescue;
mod retention;
mod runner_compat;
mod schedules;
mod secrets;
mod sessions;
pub mod settings;
pub mod slack_api;
mod slack_files;
pub mod slack_status;
pub mod slack_tools;
mod steering;
mod tasks;
pub mod timings;
pub mod trackers;
mod triggers;
mod waiting;
mod wake;
mod webhooks;

use std::sync::Arc;

use swarm_domain::{
    id::{AgentId, ChannelId, ChatMessageId, EpicId, MailId, ServiceId, TaskId},
    lease::LeasePolicy,
    poll::Wake,
    task::{Task, TaskStatus},
    time::Timestamp,
};
use swarm_store::{Store, TaskWaiters};
use tokio::sync::broadcast;

use crate::wake::Waiters;

pub use activity::ActivitySnapshot;
pub use agents::{InboxSummary, RegisterInput};
pub use auth::{AgentAuth, Authenticated, Credential, IssuedToken};
pub use chat::{CreateChannel, MESSAGES_PAGE_MAX, PostMessage, ReadMessages};
pub use claims::ReleaseRequest;
pub use delegation::SendTask;
pub use epics::{EPIC_PAGE_MAX, EpicDetail, EpicQuery, EpicTask};
pub use error::{ServiceError, ServiceResult};
pub use heartbeats::HeartbeatSnapshot;
pub use history::HISTORY_EVERY;
pub use inbox::{Delegate, Delegated, ReplyTarget};
pub use mail::{DeliverMail, ListMail, MAIL_PAGE_MAX, ReplyMail, SendMail};
pub use poll::{POLL_WAIT_MAX, PollRequest};
pub use registry::ServiceRef;
pub use reporting::{Finish, ReportOutcome, TaskReport};
pub use rescue::Background;
pub use retention::{RETENTION_BATCH, RETENTION_EVERY, RetentionReport};
pub use runner_compat::{EVENT_BATCH_MAX, PROFILE_FILES, RECORDS_PAGE_MAX, TaskDetailReported};
pub use secrets::{REDACTED, SecretBox};
pub use settings::HubSettings;
pub use slack_files::{FileDownload, FilePlace, FileUpload, SLACK_FILE_INLINE_MAX_BYTES};
pub use steering::SteeringSettled;
pub use swarm_store::WriterUsage;
pub use swarm_store::{HeldItems, Released, ServiceFilter};
pub use swarm_store::{NewWorkerEvent, RunnerRecord as RunnerRecordView, WorkerEvent, WorkerEventFilter};
pub use tasks::{ActionOutcome, TaskDetail, TaskListQuery, TaskRequest};
pub use triggers::{FireRequest, SCHEDULER_TICK};
pub use webhooks::{WebhookOutcome, WebhookRequest, sign_body};

/// Who is asking. `Agent` comes from `X-Agent-ID`; `Operator` is a person or script
/// holding the API key without naming an agent (the CLI, the dashboard). An operator
/// may do what the lead may do, except act as an agent (claim, accept, start ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    Agent(AgentId),
    Operator,
}

impl Caller {
    pub fn agent_id(&self) -> Option<AgentId> {
        match self {
            Caller::Agent(id) => Some(*id),
            Caller::Operator => None,
        }
    }

    fn require_agent(&self) -> ServiceResult<AgentId> {
        self.agent_id().ok_or_else(|| {
            ServiceError::Invalid(
                "Missing X-Agent-ID header: this action is done by an agent, named by its id in that header"
                    .into(),
            )
        })
    }
}

/// What changed, published after the change committed. Small on purpose: a listener
/// (a parked poll, the dashboard's `GET /api/events`) re-reads what it shows; the
/// database stays the truth. Every change also writes the event log, so a view of it
/// refreshes on any change. A new kind of state publishes one new variant here with one
/// `publish` call after its commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Task {
        task_id: TaskId,
    },
    Agent {
        agent_id: AgentId,
    },
    /// A message in this lead's inbox arrived or changed status.
    Inbox {
        agent_id: AgentId,
    },
    /// A runner sent session log lines or a cost for this task (the task itself did not
    /// change).
    SessionOutput {
        task_id: TaskId,
    },
    /// A message was posted in a channel.
    ChannelMessage {
        channel_id: ChannelId,
        message_id: ChatMessageId,
    },
    /// Mail was sent, claimed, delivered or answered.
    Mail {
        mail_id: MailId,
    },
    /// An epic was created, changed or deleted, or a task joined or left it.
    Epic {
        epic_id: EpicId,
    },
    /// A registered service was registered, changed status or unregistered.
    Service {
        service_id: ServiceId,
    },
    /// A daily budget was set or removed (issue 40); `scope_id` is `""` for the global one.
    Budget {
        scope: swarm_domain::budget::BudgetScope,
        scope_id: String,
    },
    /// Another process (a second replica, `swarm mcp` on the same SQLite file) changed
    /// the database; what changed is not known here, so everything may have.
    External,
}

#[derive(Clone)]
pub struct Service {
    store: Arc<dyn Store>,
    changes: broadcast::Sender<Change>,
    waiters: Arc<Waiters>,
    activity: Arc<activity::Activity>,
    /// The dashboard's last hour.
    history: Arc<history::History>,
    /// Changes published so far (see [`Service::changes_published`]).
    published: Arc<std::sync::atomic::AtomicU64>,
    lease: LeasePolicy,
    /// Slack's Web API, when the hub has Slack credentials.
    slack: Option<Arc<dyn slack_api::SlackApi>>,
    /// The lead may create, invite to and archive Slack channels (`SLACK_CHANNEL_MANAGEMENT`).
    slack_channel_management: bool,
    /// Where schedules read the time: the system clock, or a test's.
    clock: Arc<dyn clock::Clock>,
    /// When this process last recorded each agent's MCP session as a sign of life (Unix
    /// milliseconds on the service's clock).
    seen: Arc<std::sync::Mutex<std::collections::HashMap<AgentId, i64>>>,
    /// Heartbeats kept for the next batch (`heartbeats.rs`).
    heartbeats: Arc<heartbeats::Heartbeats>,
    /// What names the calling agent (`AGENT_AUTH`).
    agent_auth: auth::AgentAuth,
    /// Whose GitHub comments fire `github` triggers (`GITHUB_ALLOWED_ASSOCIATIONS`).
    github_associations: Arc<Vec<String>>,
    /// Seals webhook secrets and services' `env` values at rest (`secrets.rs`); `None`
    /// without an operator key.
    secrets: Option<Arc<secrets::SecretBox>>,
    /// The hub's files that hold its key or its data: an agent that can read one is not
    /// isolated by its token (`Service::private_files`).
    private_files: Arc<Vec<std::path::PathBuf>>,
    /// Who holds the tracker reports this hub takes (`trackers::reporter`).
    tracker_holder: Arc<std::sync::RwLock<String>>,
}

impl Service {
    /// A service with the default lease policy.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self::with_lease_policy(store, LeasePolicy::default())
    }

    pub fn with_lease_policy(store: Arc<dyn Store>, lease: LeasePolicy) -> Self {
        let (changes, _) = broadcast::channel(1024);
        Service {
            store,
            changes,
            waiters: Arc::default(),
            activity: Arc::default(),
            history: Arc::default(),
            published: Arc::default(),
            lease,
            slack: None,
            slack_channel_management: false,
            clock: Arc::new(clock::SystemClock),
            seen: Arc::default(),
            heartbeats: Arc::default(),
            agent_auth: auth::AgentAuth::Header,
            github_associations: Arc::new(
                webhooks::GITHUB_ASSOCIATIONS_DEFAULT.iter().map(|a| a.to_string()).collect(),
            ),
            secrets: None,
            private_files: Arc::default(),
            tracker_holder: Arc::new(std::sync::RwLock::new(format!("hub-{}", uuid::Uuid::now_v7()))),
        }
    }

    /// The same service knowing the hub's private files (its database, its key file).
    pub fn with_private_files(mut self, files: Vec<std::path::PathBuf>) -> Self {
        self.private_files = Arc::new(files);
        self
    }

    /// The files of this hub that hold its key or its data, as absolute paths: a runner
    /// holding an agent token checks that it cannot read them (a token isolates nothing
    /// from an agent that can read the key or open the database).
    pub fn private_files(&self) -> &[std::path::PathBuf] {
        &self.private_files
    }

    /// The same service reading schedule time from `clock` (tests drive it).
    pub fn with_clock(mut self, clock: Arc<dyn clock::Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Parked polls, polls answered and scheduler passes in this process.
    pub fn activity(&self) -> ActivitySnapshot {
        ActivitySnapshot { heartbeats: self.heartbeats(), ..self.activity.snapshot() }
    }

    /// The Slack bridge finished a pass over Slack tasks' outcomes and progress.
    pub fn note_slack_sweep(&self) {
        self.activity.slack_swept();
    }

    pub fn lease_policy(&self) -> LeasePolicy {
        self.lease
    }

    /// The store's connection pool as `(open, idle)`, on PostgreSQL.
    pub fn store_pool_usage(&self) -> Option<(u32, u32)> {
        self.store.pool_usage()
    }

    /// Poll views the store answered from memory (both stores' null-poll caches).
    pub fn store_poll_views_from_memory(&self) -> Option<u64> {
        self.store.poll_views_from_memory()
    }

    /// SQLite's writer thread: its transactions, writes and busy time.
    pub fn store_writer_usage(&self) -> Option<WriterUsage> {
        self.store.writer_usage()
    }

    /// Lets the store drop its caches: the hub has gone quiet (see `swarm_hub::memory`).
    pub async fn release_store_memory(&self) -> ServiceResult<()> {
        Ok(self.store.release_memory().await?)
    }

    pub fn backend_name(&self) -> &'static str {
        self.store.backend_name()
    }

    /// Changes committed through this process, newest last. A lagging receiver misses
    /// changes (it is told so by `RecvError::Lagged`) and must re-read the state.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    fn publish(&self, change: Change) {
        self.published.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // No receiver is fine: nobody is waiting.
        let _ = self.changes.send(change);
    }

    /// Changes committed through this process (or seen from others) so far, whoever made
    /// them: requests, or background work such as the rescue pass. Unchanged over a while,
    /// with no request either, the hub was quiet.
    pub fn changes_published(&self) -> u64 {
        self.published.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A task change committed: tell live views, and wake the polls it may concern, here
    /// and in other processes on the same database.
    async fn task_changed(&self, task: &Task, previous_assignee: Option<AgentId>) {
        self.task_changed_with(task, previous_assignee, None).await;
    }

    /// [`Service::task_changed`] with the waiters of a finished task when the store
    /// brought them along with the change (`Store::task_apply_with_waiters`).
    async fn task_changed_with(
        &self,
        task: &Task,
        previous_assignee: Option<AgentId>,
        waiters: Option<TaskWaiters>,
    ) {
        self.tracker_evidence_record(task).await;
        self.publish(Change::Task { task_id: task.id });
        let waiters = if !task.status.is_finished() {
            Some(TaskWaiters::default())
        } else if waiters.is_some() {
            waiters
        } else {
            match self.store.task_waiters(task.id).await {
                Ok(waiters) => Some(waiters),
                Err(error) => {
                    tracing::warn!(%error, "could not look for dependent tasks or an awaiting session; waking every poll");
                    None
                }
            }
        };
        let has_dependents = task.status == TaskStatus::Completed
            && waiters.as_ref().is_none_or(|waiters| waiters.has_dependents);
        let mut wakes = Wake::after_task_change(task, previous_assignee, has_dependents);
        match waiters {
            // A trigger session may await this result.
            Some(TaskWaiters { awaiting_agent: Some(agent), .. }) => wakes.push(Wake::Agent(agent)),
            Some(_) => {}
            None => wakes.push(Wake::Everyone),
        }
        self.wake(&wakes).await;
    }

    async fn wake(&self, wakes: &[Wake]) {
        if wakes.is_empty() {
            return;
        }
        for wake in wakes {
            self.waiters.wake(*wake);
        }
        if let Err(error) = self.store.announce(wakes).await {
            // Polls parked on other replicas then see the change when their wait ends: late,
            // not lost. Say so; do not fail a change that committed.
            tracing::warn!(%error, "could not tell other processes about a change");
        }
    }

    /// Runs a store call and times it for `/metrics` (named in `timings::STORE_CALLS`).
    async fn timed<T>(&self, call: &'static str, work: impl std::future::Future<Output = T>) -> T {
        let started = std::time::Instant::now();
        let result = work.await;
        self.activity.store_call(call, started.elapsed());
        result
    }

    /// A delivery from outside reached the hub (`source`: `slack` or `webhook`) and was
    /// `received`, `rejected` (bad signature) or a `duplicate`; counted for `/metrics`.
    pub fn note_inbound(&self, source: &str, outcome: &str) {
        self.activity.inbound(source, outcome);
    }

    /// When a claim taken now runs out without a heartbeat.
    fn lease_until(&self, now: Timestamp) -> Timestamp {
        now.plus_millis(self.lease.period_millis())
    }
}
