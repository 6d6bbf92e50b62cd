//! Many concurrent callers hammer the same tasks through the service layer: every
//! transition is won by exactly one caller and every final state is legal.

use std::{collections::HashMap, sync::Arc};

use futures_util::future::join_all;
use swarm_domain::{
    event::EventType,
    id::{AgentId, TaskId},
    task::{TaskDraft, TaskStatus},
};
use swarm_service::{Caller, RegisterInput, Service, ServiceError, TaskRequest};
use swarm_store::{EventFilter, Store};

const WORKERS: usize = 8;
const CALLS_PER_WORKER: usize = 4; // 32 concurrent callers per contested action
const POOL_TASKS: usize = 12;
const OFFERED_TASKS: usize = 8;

crate::support::store_tests!(multi_thread: every_transition_is_won_exactly_once);

/// Did this call change the task? `Ok` with `already_finished == false` is a win; a
/// refusal (409/403) or an already-finished answer is a loss; anything else is a bug.
fn won(result: &Result<swarm_service::ActionOutcome, ServiceError>) -> bool {
    match result {
        Ok(outcome) => !outcome.already_finished,
        Err(ServiceError::Conflict(_) | ServiceError::Forbidden(_)) => false,
        Err(other) => panic!("unexpected error under contention: {other:?}"),
    }
}

async fn contest(service: &Service, calls: Vec<(Caller, TaskId, TaskRequest)>) -> Vec<(usize, bool)> {
    let attempts = calls.into_iter().enumerate().map(|(n, (caller, task, request))| {
        let service = service.clone();
        tokio::spawn(async move { (n, won(&service.task_act(caller, task, request).await)) })
    });
    join_all(attempts).await.into_iter().map(|joined| joined.expect("no task panicked")).collect()
}

async fn every_transition_is_won_exactly_once(store: Arc<dyn Store>) {
    let service = Service::new(store.clone());
    let lead = register(&service, "lead", true).await;
    let mut workers = Vec::new();
    for n in 0..WORKERS {
        workers.push(register(&service, &format!("worker-{n}"), false).await);
    }

    let mut pool = Vec::new();
    for n in 0..POOL_TASKS {
        pool.push(create(&service, lead, &format!("pool {n}"), None).await);
    }
    let mut offered = Vec::new();
    for n in 0..OFFERED_TASKS {
        offered.push((
            create(&service, lead, &format!("offer {n}"), Some(workers[n % WORKERS])).await,
            workers[n % WORKERS],
        ));
    }

    // Claim: every worker tries every pool task, several times at once.
    let mut owner: HashMap<TaskId, AgentId> = HashMap::new();
    for &task in &pool {
        let calls: Vec<_> = (0..WORKERS * CALLS_PER_WORKER)
            .map(|n| (Caller::Agent(workers[n % WORKERS]), task, TaskRequest::Claim))
            .collect();
        let callers: Vec<AgentId> = (0..WORKERS * CALLS_PER_WORKER).map(|n| workers[n % WORKERS]).collect();
        let winners: Vec<usize> =
            contest(&service, calls).await.into_iter().filter(|(_, w)| *w).map(|(n, _)| n).collect();
        assert_eq!(winners.len(), 1, "pool task claimed {} times", winners.len());
        owner.insert(task, callers[winners[0]]);
    }

    // Accept or reject: the offered-to agent sends both at once, many times.
    for &(task, agent) in &offered {
        let calls: Vec<_> = (0..WORKERS * CALLS_PER_WORKER)
            .map(|n| {
                let request = if n % 2 == 0 {
                    TaskRequest::Accept
                } else {
                    TaskRequest::Reject { reason: Some("busy".into()) }
                };
                (Caller::Agent(agent), task, request)
            })
            .collect();
        let wins = contest(&service, calls).await.into_iter().filter(|(_, w)| *w).count();
        assert_eq!(wins, 1, "offer answered {wins} times");
        let status = service.task_get(task).await.unwrap().status;
        assert!(
            matches!(status, TaskStatus::Pending | TaskStatus::Unassigned),
            "after accept xor reject: {status}"
        );
        if status == TaskStatus::Pending {
            owner.insert(task, agent);
        }
    }

    // Start: the owner starts its task from many callers at once.
    for (&task, &agent) in &owner {
        let calls = (0..WORKERS * CALLS_PER_WORKER)
            .map(|_| (Caller::Agent(agent), task, TaskRequest::Start))
            .collect();
        let wins = contest(&service, calls).await.into_iter().filter(|(_, w)| *w).count();
        assert_eq!(wins, 1, "task started {wins} times");
    }

    // Finish (completed or failed) against cancel, all at once.
    let mut contested: Vec<TaskId> = owner.keys().copied().collect();
    contested.extend(offered.iter().map(|(task, _)| *task).filter(|task| !owner.contains_key(task)));
    for &task in &contested {
        let calls: Vec<_> = (0..WORKERS * CALLS_PER_WORKER)
            .map(|n| match (n % 3, owner.get(&task)) {
                (0, Some(&agent)) => (
                    Caller::Agent(agent),
                    task,
                    TaskRequest::Finish {
                        status: TaskStatus::Completed,
                        output: Some(format!("by {n}")),
                        failure_reason: None,
                    },
                ),
                (1, Some(&agent)) => (
                    Caller::Agent(agent),
                    task,
                    TaskRequest::Finish {
                        status: TaskStatus::Failed,
                        output: None,
                        failure_reason: Some(format!("by {n}")),
                    },
                ),
                _ => (Caller::Agent(lead), task, TaskRequest::Cancel { reason: Some(format!("by {n}")) }),
            })
            .collect();
        let wins = contest(&service, calls).await.into_iter().filter(|(_, w)| *w).count();
        assert_eq!(wins, 1, "task finished {wins} times");
    }

    // Final states are legal and the event log tells the same story.
    for &task in pool.iter().chain(offered.iter().map(|(task, _)| task)) {
        let detail = service.task_detail(task).await.unwrap();
        assert!(detail.task.status.is_finished(), "every contested task ended: {}", detail.task.status);
        assert!(detail.task.finished_at.is_some());
        let finishes = detail
            .logs
            .iter()
            .filter(|e| e.event_type == EventType::TaskStatusChange)
            .filter(|e| {
                e.new_value.as_deref().is_some_and(|v| TaskStatus::parse(v).is_ok_and(|s| s.is_finished()))
            })
            .count();
        assert_eq!(finishes, 1, "one transition into a finished state for {task}");
        let claims = detail.logs.iter().filter(|e| e.event_type == EventType::TaskClaimed).count();
        assert_eq!(claims, usize::from(pool.contains(&task)), "claims logged for {task}");
    }
    for agent in &workers {
        let agent = service.agent_get(*agent).await.unwrap();
        assert_eq!(agent.capacity.current, 0, "no task left in progress");
        assert_eq!(agent.status, swarm_domain::agent::AgentStatus::Idle, "{} is idle at the end", agent.name);
    }
    let all_events =
        store.event_list(&EventFilter { limit: 100_000, ..EventFilter::default() }).await.unwrap();
    assert!(!all_events.is_empty());
}

async fn register(service: &Service, name: &str, is_lead: bool) -> AgentId {
    let input = RegisterInput { name: name.into(), is_lead, max_tasks: Some(20), ..RegisterInput::default() };
    match service.agent_register(Some(AgentId::new_v7()), input).await.unwrap() {
        swarm_domain::agent::Registration::Created(agent) => agent.id,
        other => panic!("expected a new agent, got {other:?}"),
    }
}

async fn create(service: &Service, lead: AgentId, text: &str, offered_to: Option<AgentId>) -> TaskId {
    let draft = TaskDraft { task: text.into(), offered_to, ..TaskDraft::default() };
    service.task_create(Caller::Agent(lead), draft).await.unwrap().id
}
