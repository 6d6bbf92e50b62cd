//! The store conformance suite (River's `riverdrivertest`): what the [`Store`] trait
//! documents, checked through the trait only, so that every driver is held to the same
//! behaviour. A driver runs the whole suite from its own `tests/` with one call of
//! [`store_conformance!`](crate::store_conformance), given an async factory of a fresh,
//! empty store:
//!
//! ```ignore
//! async fn fresh_store() -> (Arc<dyn Store>, TempDir) { ... }
//! swarm_store::store_conformance!(sqlite, fresh_store);
//! ```
//!
//! The factory returns the store and whatever must outlive it (a temporary folder, or
//! `()`); each test gets its own. The tests are named `<backend>::<area>::<test>`.

pub mod agents;
pub mod budgets;
pub mod chat;
pub mod claims;
pub mod counts;
pub mod endings;
pub mod epics;
pub mod handback;
pub mod heartbeats;
pub mod inbox;
pub mod insight;
pub mod lists;
pub mod mail;
pub mod mcp_tasks;
pub mod poll;
pub mod race;
pub mod retention;
pub mod run_claims;
pub mod runner_records;
pub mod services;
pub mod slack_status;
pub mod steering;
pub mod tasks;
pub mod tokens;
pub mod trackers;
pub mod triggers;
pub mod waiting;
pub mod work;

use std::sync::{
    Arc,
    atomic::{AtomicI64, Ordering},
};

use crate::{Applied, EventFilter, Store};
use swarm_domain::agent::Registration;
use swarm_domain::{
    agent::{Agent, NewAgent},
    event::{Event, EventType},
    id::{AgentId, TaskId},
    task::{FinishOutcome, NewTask, Task, TaskAction, TaskDraft},
    time::Timestamp,
};

/// An idle worker's poll view (one slot, none taken) with `waiting` listed: for the
/// drivers' own tests of their null-poll caches.
pub fn idle_worker_view(waiting: Vec<swarm_domain::poll::TriggerKind>) -> crate::PollView {
    crate::PollView {
        is_lead: false,
        status: swarm_domain::agent::AgentStatus::Idle,
        last_seen_at: Timestamp::now(),
        in_progress: 0,
        max_tasks: 1,
        waiting,
    }
}

/// 2026-01-20T10:00:00.123Z: a start with a non-zero millisecond part, so that a
/// store that drops milliseconds is caught.
const CLOCK_START_MILLIS: i64 = 1_768_903_200_123;

/// A store plus a clock that moves one second per reading, so that every write has
/// its own timestamp and "newest first" is well defined.
pub struct Fixture {
    pub store: Arc<dyn Store>,
    clock: AtomicI64,
}

impl Fixture {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Fixture { store, clock: AtomicI64::new(CLOCK_START_MILLIS) }
    }

    /// The next instant, one second after the previous one.
    pub fn now(&self) -> Timestamp {
        let millis = self.clock.fetch_add(1000, Ordering::SeqCst) + 1000;
        Timestamp::from_unix_millis(millis).expect("a valid timestamp")
    }

    /// Register a new agent; panics unless it was created.
    pub async fn register(&self, name: &str, is_lead: bool, max_tasks: i64) -> Agent {
        let new = new_agent(AgentId::new_v7(), name, is_lead, max_tasks);
        match self.store.agent_register(&new, self.now()).await {
            Ok(Registration::Created(agent)) => agent,
            other => panic!("register {name}: expected Created, got {other:?}"),
        }
    }

    /// A worker that works one task at a time.
    pub async fn worker(&self, name: &str) -> AgentId {
        self.register(name, false, 1).await.id
    }

    pub async fn agent(&self, id: AgentId) -> Agent {
        self.store.agent_get(id).await.expect("agent_get").expect("the agent exists")
    }

    pub async fn create(&self, draft: TaskDraft, creator: Option<AgentId>) -> Task {
        let new = NewTask::parse(draft, creator).expect("a valid task draft");
        self.store.task_create(&new, self.now()).await.expect("task_create")
    }

    /// A task in the pool (`unassigned`).
    pub async fn pool_task(&self, text: &str) -> Task {
        self.create(draft(text), None).await
    }

    /// A task assigned to `agent` (`pending`).
    pub async fn assigned_task(&self, text: &str, agent: AgentId) -> Task {
        self.create(TaskDraft { agent_id: Some(agent), ..draft(text) }, None).await
    }

    /// A task offered to `agent` (`offered`).
    pub async fn offered_task(&self, text: &str, agent: AgentId) -> Task {
        self.create(TaskDraft { offered_to: Some(agent), ..draft(text) }, None).await
    }

    /// A task `agent` is working on (`in_progress`).
    pub async fn started_task(&self, text: &str, agent: AgentId) -> Task {
        let task = self.assigned_task(text, agent).await;
        self.must_change(task.id, TaskAction::Start { agent }).await
    }

    /// A task `agent` finished with `completed`.
    pub async fn completed_task(&self, text: &str, agent: AgentId) -> Task {
        let task = self.started_task(text, agent).await;
        self.must_change(task.id, complete(agent)).await
    }

    pub async fn task(&self, id: TaskId) -> Task {
        self.store.task_get(id).await.expect("task_get").expect("the task exists")
    }

    /// Apply `action` as the agent it names (no actor for cancel and backlog moves).
    pub async fn apply(&self, id: TaskId, action: TaskAction) -> Applied<Task> {
        self.apply_at(id, action, self.now()).await
    }

    pub async fn apply_at(&self, id: TaskId, action: TaskAction, now: Timestamp) -> Applied<Task> {
        let actor = actor_of(&action);
        self.store
            .task_apply(id, &action.change(), actor, now)
            .await
            .unwrap_or_else(|err| panic!("task_apply {}: {err}", action.name()))
    }

    /// Apply `action`, which must succeed; the task after it.
    pub async fn must_change(&self, id: TaskId, action: TaskAction) -> Task {
        let name = action.name();
        match self.apply(id, action).await {
            Applied::Changed { before, after } => {
                assert_eq!(before.id, id);
                assert_eq!(after.id, id);
                after
            }
            other => panic!("{name}: expected Changed, got {other:?}"),
        }
    }

    /// Apply `action`, which must be refused without changing the task or logging
    /// anything about it; the task as it stands.
    pub async fn must_refuse(&self, id: TaskId, action: TaskAction) -> Task {
        let name = action.name();
        let task_before = self.task(id).await;
        let n_events_before = self.task_events(id).await.len();
        let current = match self.apply(id, action).await {
            Applied::Refused { current } => current,
            other => panic!("{name} from {}: expected Refused, got {other:?}", task_before.status),
        };
        assert_eq!(current, task_before, "{name}: Refused must report the task as it stands");
        assert_eq!(self.task(id).await, task_before, "{name}: a refusal must change nothing");
        assert_eq!(self.task_events(id).await.len(), n_events_before, "{name}: a refusal must log nothing");
        current
    }

    /// The event log of one task, newest first.
    pub async fn task_events(&self, id: TaskId) -> Vec<Event> {
        let filter = EventFilter { task_id: Some(id), limit: 1000, ..EventFilter::default() };
        self.store.event_list(&filter).await.expect("event_list")
    }

    /// The event log of one agent, newest first.
    pub async fn agent_events(&self, id: AgentId) -> Vec<Event> {
        let filter = EventFilter { agent_id: Some(id), limit: 1000, ..EventFilter::default() };
        self.store.event_list(&filter).await.expect("event_list")
    }
}

pub fn new_agent(id: AgentId, name: &str, is_lead: bool, max_tasks: i64) -> NewAgent {
    NewAgent::parse(id, name, is_lead, None, None, None, Some(max_tasks)).expect("a valid agent")
}

pub fn draft(text: &str) -> TaskDraft {
    TaskDraft { task: text.to_string(), ..TaskDraft::default() }
}

pub fn complete(agent: AgentId) -> TaskAction {
    TaskAction::Finish {
        assignee: Some(agent),
        outcome: FinishOutcome::Completed { output: Some("done".to_string()) },
    }
}

pub fn fail(agent: AgentId) -> TaskAction {
    TaskAction::Finish {
        assignee: Some(agent),
        outcome: FinishOutcome::Failed { failure_reason: Some("broken".to_string()) },
    }
}

pub fn cancel() -> TaskAction {
    TaskAction::Cancel { reason: Some("not needed".to_string()), unstarted_only: false }
}

/// The agent an action is performed by, as the service would pass it.
pub fn actor_of(action: &TaskAction) -> Option<AgentId> {
    match action {
        TaskAction::Claim { agent }
        | TaskAction::Release { agent }
        | TaskAction::Accept { agent }
        | TaskAction::Reject { agent, .. }
        | TaskAction::Start { agent }
        | TaskAction::Pause { agent }
        | TaskAction::Resume { agent } => Some(*agent),
        TaskAction::Finish { assignee, .. } => *assignee,
        TaskAction::Cancel { .. } | TaskAction::ToBacklog | TaskAction::FromBacklog => None,
    }
}

/// Events of one kind, newest first.
pub fn of_type(events: &[Event], event_type: EventType) -> Vec<&Event> {
    events.iter().filter(|event| event.event_type == event_type).collect()
}

/// The `task_status_change` rows as `(old, new)` pairs, oldest first.
pub fn status_changes(events: &[Event]) -> Vec<(String, String)> {
    let mut changes: Vec<(String, String)> = of_type(events, EventType::TaskStatusChange)
        .into_iter()
        .map(|event| {
            (event.old_value.clone().unwrap_or_default(), event.new_value.clone().unwrap_or_default())
        })
        .collect();
    changes.reverse();
    changes
}

pub fn pair(old: &str, new: &str) -> (String, String) {
    (old.to_string(), new.to_string())
}

pub fn sorted<T: Ord>(mut items: Vec<T>) -> Vec<T> {
    items.sort();
    items
}

/// Every test of the suite, as `mod $backend { mod <area> { #[tokio::test] ... } }`
/// beside the call; `$fresh` names an `async fn() -> (Arc<dyn Store>, impl Sized)`
/// defined there.
#[macro_export]
macro_rules! store_conformance {
    ($backend:ident, $fresh:ident) => {
        mod $backend {
            $crate::__store_conformance_agents!($fresh);
            $crate::__store_conformance_budgets!($fresh);
            $crate::__store_conformance_chat!($fresh);
            $crate::__store_conformance_claims!($fresh);
            $crate::__store_conformance_endings!($fresh);
            $crate::__store_conformance_epics!($fresh);
            $crate::__store_conformance_inbox!($fresh);
            $crate::__store_conformance_insight!($fresh);
            $crate::__store_conformance_lists!($fresh);
            $crate::__store_conformance_mail!($fresh);
            $crate::__store_conformance_mcp_tasks!($fresh);
            $crate::__store_conformance_poll!($fresh);
            $crate::__store_conformance_handback!($fresh);
            $crate::__store_conformance_heartbeats!($fresh);
            $crate::__store_conformance_race!($fresh);
            $crate::__store_conformance_retention!($fresh);
            $crate::__store_conformance_run_claims!($fresh);
            $crate::__store_conformance_runner_records!($fresh);
            $crate::__store_conformance_services!($fresh);
            $crate::__store_conformance_slack_status!($fresh);
            $crate::__store_conformance_steering!($fresh);
            $crate::__store_conformance_tasks!($fresh);
            $crate::__store_conformance_tokens!($fresh);
            $crate::__store_conformance_trackers!($fresh);
            $crate::__store_conformance_triggers!($fresh);
            $crate::__store_conformance_waiting!($fresh);
            $crate::__store_conformance_work!($fresh);
        }
    };
}

/// One area's tests; the races run on several threads so that they really race.
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_area {
    ($fresh:ident, $area:ident, [$($name:ident),* $(,)?], multi_thread: [$($racing:ident),* $(,)?]) => {
        mod $area {
            $(
                #[tokio::test]
                async fn $name() {
                    let (store, _keep_alive) = super::super::$fresh().await;
                    $crate::testkit::$area::$name(store).await;
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $racing() {
                    let (store, _keep_alive) = super::super::$fresh().await;
                    $crate::testkit::$area::$racing(store).await;
                }
            )*
        }
    };
}
