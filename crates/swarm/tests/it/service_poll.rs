//! The poll through the service layer, as every adapter (REST, MCP's `poll-task`, the
//! runner) reaches it: offers under review, and parked polls woken in process.

use std::{sync::Arc, time::Duration};

use swarm_domain::{
    id::{AgentId, TaskId},
    poll::{PoolMode, Trigger},
    task::{TaskDraft, TaskStatus},
};
use swarm_service::{Caller, PollRequest, RegisterInput, Service, ServiceError, TaskRequest};
use swarm_store::Store;

crate::support::store_tests!(
    reviewing_offers_are_accepted_and_rejected_through_the_service,
    a_parked_poll_is_woken_by_a_change_in_the_same_process,
);

async fn register(service: &Service, name: &str) -> AgentId {
    let input = RegisterInput { name: name.into(), max_tasks: Some(2), ..RegisterInput::default() };
    match service.agent_register(Some(AgentId::new_v7()), input).await.unwrap() {
        swarm_domain::agent::Registration::Created(agent) => agent.id,
        other => panic!("expected a new agent, got {other:?}"),
    }
}

async fn offer(service: &Service, text: &str, to: AgentId) -> TaskId {
    let draft = TaskDraft { task: text.into(), offered_to: Some(to), ..TaskDraft::default() };
    service.task_create(Caller::Operator, draft).await.unwrap().id
}

async fn poll_now(service: &Service, agent: AgentId) -> Option<Trigger> {
    service.poll(Caller::Agent(agent), PollRequest::default()).await.unwrap()
}

async fn reviewing_offers_are_accepted_and_rejected_through_the_service(store: Arc<dyn Store>) {
    let service = Service::new(store);
    let worker = register(&service, "worker").await;
    let other = register(&service, "other").await;
    let accepted = offer(&service, "accept me", worker).await;
    let rejected = offer(&service, "reject me", worker).await;
    for expected in [accepted, rejected] {
        let Some(Trigger::TaskOffered { task_id, task }) = poll_now(&service, worker).await else {
            panic!("an offer comes first");
        };
        assert_eq!((task_id, task.status), (expected, TaskStatus::Reviewing));
    }

    let refused = service.task_act(Caller::Agent(other), accepted, TaskRequest::Accept).await;
    assert!(matches!(refused, Err(ServiceError::Forbidden(_))), "{refused:?}");
    let outcome = service.task_act(Caller::Agent(worker), accepted, TaskRequest::Accept).await.unwrap();
    assert_eq!((outcome.task.status, outcome.task.agent_id), (TaskStatus::Pending, Some(worker)));
    assert_eq!(outcome.task.lease_expires_at, None, "pending work holds no lease");

    let reject = TaskRequest::Reject { reason: Some("no time".into()) };
    let outcome = service.task_act(Caller::Agent(worker), rejected, reject).await.unwrap();
    assert_eq!((outcome.task.status, outcome.task.offered_to), (TaskStatus::Unassigned, None));

    // The accepted one is now the worker's assigned work, the rejected one pool work.
    let Some(Trigger::TaskAssigned { task_id, .. }) = poll_now(&service, worker).await else { panic!() };
    assert_eq!(task_id, accepted);
    let Some(Trigger::TaskAssigned { task_id, task }) = poll_now(&service, other).await else { panic!() };
    assert_eq!((task_id, task.agent_id), (rejected, Some(other)));
}

async fn a_parked_poll_is_woken_by_a_change_in_the_same_process(store: Arc<dyn Store>) {
    let service = Service::new(store);
    let worker = register(&service, "worker").await;
    let parked = {
        let service = service.clone();
        tokio::spawn(async move {
            let request = PollRequest { wait: Duration::from_secs(30), pool: PoolMode::Claim, runner: None };
            let started = tokio::time::Instant::now();
            (service.poll(Caller::Agent(worker), request).await.unwrap(), started.elapsed())
        })
    };
    crate::support::eventually("the poll to park", || async {
        (service.activity().parked_polls == 1).then_some(())
    })
    .await;
    let pooled =
        service.task_create(Caller::Operator, TaskDraft { task: "anyone".into(), ..TaskDraft::default() });
    let pooled = pooled.await.unwrap().id;
    let (trigger, waited) = parked.await.unwrap();
    let Some(Trigger::TaskAssigned { task_id, .. }) = trigger else { panic!("{trigger:?}") };
    assert_eq!(task_id, pooled);
    assert!(waited < Duration::from_secs(30), "woken by the new pool task, not by the end of the wait");

    let too_long = PollRequest { wait: Duration::from_secs(61), pool: PoolMode::Claim, runner: None };
    let refused = service.poll(Caller::Agent(worker), too_long).await;
    assert!(matches!(refused, Err(ServiceError::Invalid(_))), "{refused:?}");
    let refused = service.poll(Caller::Operator, PollRequest::default()).await;
    assert!(matches!(refused, Err(ServiceError::Invalid(_))), "an operator has no triggers: {refused:?}");
}
