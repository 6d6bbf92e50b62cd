//! Races: many concurrent callers hammering the same tasks. Every transition that may
//! happen once happens exactly once, every final state is legal, and the event log
//! agrees with what the callers were told.

use std::{collections::HashMap, sync::Arc};

use crate::{Applied, Store, StoreError, TaskFilter};
use swarm_domain::agent::Registration;
use swarm_domain::{
    agent::AgentStatus,
    event::EventType,
    id::{AgentId, TaskId},
    task::{TaskAction, TaskStatus},
};
use tokio::sync::Barrier;

use super::{Fixture, actor_of, cancel, complete, new_agent, of_type};

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_race {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            race,
            [],
            multi_thread: [
                concurrent_transitions_happen_once,
                concurrent_starts_respect_capacity,
                concurrent_registrations_keep_one_lead_and_unique_names,
            ]
        );
    };
}

const N_AGENTS: usize = 8;
const N_WORKERS: usize = 32;
const N_POOL: usize = 40;
const N_OFFERED: usize = 16;
/// Pool tasks whose index is a multiple of this are also cancelled by some workers.
const CANCEL_EVERY: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Claim,
    Accept,
    Reject,
    Start,
    Finish,
    Cancel,
}

/// One transition a worker was told it made.
#[derive(Debug, Clone, Copy)]
struct Win {
    task: TaskId,
    kind: Kind,
    agent: Option<AgentId>,
}

#[derive(Debug, Clone, Copy)]
struct Target {
    id: TaskId,
    offered_to: Option<AgentId>,
    cancellable: bool,
}

/// Apply `action` to `target`; `Some(win)` when this call made the change.
async fn attempt(fx: &Fixture, task: TaskId, kind: Kind, action: TaskAction) -> Option<Win> {
    let agent = actor_of(&action);
    let res =
        fx.store.task_apply(task, &action.change(), agent, fx.now()).await.unwrap_or_else(|err| {
            panic!("{} failed instead of being applied or refused: {err}", action.name())
        });
    match res {
        Applied::Changed { before, after } => {
            assert!(!before.status.is_finished(), "{kind:?} changed a finished task: {before:?}");
            assert_ne!(before.status, after.status, "{kind:?} must change the status");
            Some(Win { task, kind, agent })
        }
        Applied::Refused { .. } => None,
        Applied::NotFound => panic!("{kind:?}: task {task} not found"),
    }
}

async fn worker(
    fx: Arc<Fixture>,
    barrier: Arc<Barrier>,
    n: usize,
    agent: AgentId,
    targets: Vec<Target>,
) -> Vec<Win> {
    let mut order = targets;
    let shift = (n * 7) % order.len();
    order.rotate_left(shift);
    if n % 2 == 1 {
        order.reverse();
    }
    let accepts = (n / N_AGENTS).is_multiple_of(2);
    let cancels = n.is_multiple_of(3);
    barrier.wait().await;

    let mut wins = Vec::new();
    for target in order {
        let id = target.id;
        if target.offered_to == Some(agent) {
            let res = if accepts {
                attempt(&fx, id, Kind::Accept, TaskAction::Accept { agent }).await
            } else {
                let reason = Some(format!("worker {n} passes"));
                attempt(&fx, id, Kind::Reject, TaskAction::Reject { agent, reason }).await
            };
            wins.extend(res);
        }
        wins.extend(attempt(&fx, id, Kind::Claim, TaskAction::Claim { agent }).await);
        if target.cancellable && cancels {
            wins.extend(attempt(&fx, id, Kind::Cancel, cancel()).await);
        }
        wins.extend(attempt(&fx, id, Kind::Start, TaskAction::Start { agent }).await);
        wins.extend(attempt(&fx, id, Kind::Finish, complete(agent)).await);
    }
    wins
}

pub async fn concurrent_transitions_happen_once(store: Arc<dyn Store>) {
    let fx = Arc::new(Fixture::new(store));
    let mut agents = Vec::new();
    for n in 0..N_AGENTS {
        agents.push(fx.register(&format!("racer-{n}"), false, 20).await.id);
    }
    let mut targets = Vec::new();
    for n in 0..N_POOL {
        let id = fx.pool_task(&format!("pool {n}")).await.id;
        targets.push(Target { id, offered_to: None, cancellable: n % CANCEL_EVERY == 0 });
    }
    for n in 0..N_OFFERED {
        let agent = agents[n % N_AGENTS];
        let id = fx.offered_task(&format!("offer {n}"), agent).await.id;
        targets.push(Target { id, offered_to: Some(agent), cancellable: false });
    }

    let barrier = Arc::new(Barrier::new(N_WORKERS));
    let mut handles = Vec::new();
    for n in 0..N_WORKERS {
        let agent = agents[n % N_AGENTS];
        handles.push(tokio::spawn(worker(fx.clone(), barrier.clone(), n, agent, targets.clone())));
    }
    let mut wins: HashMap<TaskId, Vec<Win>> = HashMap::new();
    for handle in handles {
        for win in handle.await.expect("a worker panicked") {
            wins.entry(win.task).or_default().push(win);
        }
    }

    for target in &targets {
        let task = fx.task(target.id).await;
        let won = wins.get(&target.id).cloned().unwrap_or_default();
        let count = |kind: Kind| won.iter().filter(|win| win.kind == kind).count();
        let winner = |kind: Kind| won.iter().find(|win| win.kind == kind).and_then(|win| win.agent);
        let (claims, accepts, rejects) = (count(Kind::Claim), count(Kind::Accept), count(Kind::Reject));
        let (starts, finishes, cancels) = (count(Kind::Start), count(Kind::Finish), count(Kind::Cancel));
        let story = format!("task {:?} ended {} after {won:?}", task.task, task.status);

        for kind in [Kind::Claim, Kind::Accept, Kind::Reject, Kind::Start, Kind::Finish, Kind::Cancel] {
            assert!(count(kind) <= 1, "{kind:?} won more than once: {story}");
        }
        assert!(task.status.is_finished() || task.status == TaskStatus::Unassigned, "{story}");
        match target.offered_to {
            Some(offered_to) => {
                assert_eq!(accepts + rejects, 1, "an offer is accepted xor rejected once: {story}");
                assert_eq!(winner(Kind::Accept).or(winner(Kind::Reject)), Some(offered_to), "{story}");
                assert_eq!(cancels, 0, "{story}");
                if accepts == 1 {
                    assert_eq!(claims, 0, "an accepted offer is never pool work: {story}");
                }
                let taken = accepts + claims == 1;
                let expected = if taken { TaskStatus::Completed } else { TaskStatus::Unassigned };
                assert_eq!(task.status, expected, "{story}");
                assert_eq!((starts, finishes), if taken { (1, 1) } else { (0, 0) }, "{story}");
            }
            None if cancels == 1 => {
                assert!(target.cancellable, "{story}");
                assert_eq!(task.status, TaskStatus::Cancelled, "{story}");
                assert_eq!(finishes, 0, "{story}");
            }
            None => {
                assert_eq!((claims, starts, finishes), (1, 1, 1), "{story}");
                assert_eq!(task.status, TaskStatus::Completed, "{story}");
            }
        }
        if task.status == TaskStatus::Completed {
            let holder = winner(Kind::Claim).or(winner(Kind::Accept));
            assert_eq!(task.agent_id, holder, "the task stays with who took it: {story}");
            assert_eq!(winner(Kind::Start), holder, "{story}");
            assert_eq!(winner(Kind::Finish), holder, "{story}");
        }

        // The event log tells the same story.
        let events = fx.task_events(target.id).await;
        let logged = |event_type: EventType| of_type(&events, event_type).len();
        assert_eq!(logged(EventType::TaskClaimed), claims, "task_claimed rows: {story}");
        assert_eq!(logged(EventType::TaskAccepted), accepts, "task_accepted rows: {story}");
        assert_eq!(logged(EventType::TaskRejected), rejects, "task_rejected rows: {story}");
        assert_eq!(logged(EventType::TaskStatusChange), won.len(), "task_status_change rows: {story}");
    }

    // Nobody holds work any more, so nobody is busy.
    for agent in agents {
        let agent = fx.agent(agent).await;
        assert_eq!(agent.capacity.current, 0, "{agent:?}");
        assert_eq!(agent.status, AgentStatus::Idle, "an agent without work is idle: {agent:?}");
    }
    let stats = fx.store.stats().await.unwrap();
    assert_eq!(stats.tasks.total, (N_POOL + N_OFFERED) as i64);
    assert_eq!(stats.tasks.in_progress + stats.tasks.pending + stats.tasks.offered, 0, "{stats:?}");
    assert_eq!(stats.agents.busy, 0, "{stats:?}");
}

pub async fn concurrent_starts_respect_capacity(store: Arc<dyn Store>) {
    const MAX_TASKS: i64 = 2;
    const N_TASKS: usize = 12;
    let fx = Arc::new(Fixture::new(store));
    let agent = fx.register("capped", false, MAX_TASKS).await.id;
    let mut tasks = Vec::new();
    for n in 0..N_TASKS {
        tasks.push(fx.assigned_task(&format!("assigned {n}"), agent).await.id);
    }

    let barrier = Arc::new(Barrier::new(N_WORKERS));
    let mut handles = Vec::new();
    for n in 0..N_WORKERS {
        let (fx, barrier) = (fx.clone(), barrier.clone());
        let mut order = tasks.clone();
        order.rotate_left(n % N_TASKS);
        handles.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut started = Vec::new();
            for id in order {
                started.extend(attempt(&fx, id, Kind::Start, TaskAction::Start { agent }).await);
            }
            started
        }));
    }
    let mut started = Vec::new();
    for handle in handles {
        started.extend(handle.await.expect("a worker panicked"));
    }

    assert_eq!(started.len(), MAX_TASKS as usize, "starts beyond maxTasks: {started:?}");
    let filter = TaskFilter {
        statuses: vec![TaskStatus::InProgress],
        agent_id: Some(agent),
        limit: 100,
        ..TaskFilter::default()
    };
    let (in_progress, total) = fx.store.task_list(&filter).await.unwrap();
    assert_eq!(total, MAX_TASKS, "{in_progress:?}");
    let capped = fx.agent(agent).await;
    assert_eq!(capped.capacity.current, MAX_TASKS);
    assert_eq!(capped.status, AgentStatus::Busy);
}

pub async fn concurrent_registrations_keep_one_lead_and_unique_names(store: Arc<dyn Store>) {
    let fx = Arc::new(Fixture::new(store));
    let barrier = Arc::new(Barrier::new(2 * N_WORKERS));
    let mut handles = Vec::new();
    for n in 0..2 * N_WORKERS {
        let (fx, barrier) = (fx.clone(), barrier.clone());
        // Even: a lead with its own name. Odd: a worker with a name all odd ones want.
        let new = if n % 2 == 0 {
            new_agent(AgentId::new_v7(), &format!("lead-{n}"), true, 1)
        } else {
            new_agent(AgentId::new_v7(), "popular-name", false, 1)
        };
        handles.push(tokio::spawn(async move {
            barrier.wait().await;
            let res = fx.store.agent_register(&new, fx.now()).await;
            (new, res)
        }));
    }
    let (mut leads, mut named) = (Vec::new(), Vec::new());
    for handle in handles {
        let (new, res) = handle.await.expect("a registration panicked");
        match res {
            Ok(Registration::Created(agent)) if agent.is_lead => leads.push(agent.id),
            Ok(Registration::Created(agent)) => named.push(agent.id),
            Err(StoreError::Conflict(_)) => {
                let stored = fx.store.agent_get(new.id).await.unwrap();
                assert_eq!(stored, None, "a refused registration stores nothing");
            }
            other => panic!("{}: expected Created or Conflict, got {other:?}", new.name),
        }
    }
    assert_eq!(leads.len(), 1, "exactly one of the concurrent leads gets in: {leads:?}");
    assert_eq!(named.len(), 1, "exactly one agent gets the name: {named:?}");
    let agents = fx.store.agent_list().await.unwrap();
    assert_eq!(agents.len(), 2, "{agents:?}");
    assert_eq!(agents.iter().filter(|agent| agent.is_lead).count(), 1);
}
