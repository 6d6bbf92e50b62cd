//! Agents: registration, names, the one-lead rule, profile, heartbeat, close, capacity.

use std::sync::Arc;

use crate::{Store, StoreError};
use swarm_domain::agent::Registration;
use swarm_domain::{
    agent::{AgentStatus, Capacity, NewAgent, ProfileUpdate},
    event::EventType,
    id::AgentId,
};

use super::{Fixture, complete, new_agent, of_type};

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_agents {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            agents,
            [
                register_creates_then_returns_existing,
                register_brings_an_offline_agent_back,
                register_refuses_a_taken_name,
                one_active_lead_at_a_time,
                rename_refuses_a_taken_name,
                profile_update_changes_only_given_fields,
                heartbeat_brings_an_offline_agent_back,
                close_takes_an_agent_offline_once,
                list_is_ordered_by_name,
                capacity_counts_in_progress_tasks,
            ],
            multi_thread: []
        );
    };
}

pub async fn register_creates_then_returns_existing(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let id = AgentId::new_v7();
    let new = NewAgent::parse(
        id,
        "worker-1",
        false,
        Some("writes tests".into()),
        Some("tester".into()),
        Some(vec!["rust".into(), "sql".into(), "ci".into()]),
        Some(3),
    )
    .unwrap();
    let joined_at = fx.now();
    let Registration::Created(agent) = fx.store.agent_register(&new, joined_at).await.unwrap() else {
        panic!("a new id must be Created");
    };
    assert_eq!(agent.id, id);
    assert_eq!(agent.name, "worker-1");
    assert!(!agent.is_lead);
    assert_eq!(agent.status, AgentStatus::Idle);
    assert_eq!(agent.description.as_deref(), Some("writes tests"));
    assert_eq!(agent.role.as_deref(), Some("tester"));
    assert_eq!(agent.capabilities, ["rust", "sql", "ci"]);
    assert_eq!(agent.max_tasks, 3);
    assert_eq!(agent.created_at, joined_at);
    assert_eq!(agent.last_updated_at, joined_at);
    assert_eq!(agent.capacity, Capacity { current: 0, max: 3, available: 3 });
    assert_eq!(fx.agent(id).await, agent, "agent_get must return what agent_register did");
    let joined = fx.agent_events(id).await;
    assert_eq!(of_type(&joined, EventType::AgentJoined).len(), 1, "{joined:?}");

    // The same id again: kept as it was, except max_tasks.
    let again = NewAgent::parse(id, "worker-1", false, Some("other".into()), None, None, Some(5)).unwrap();
    let Registration::Existing(agent) = fx.store.agent_register(&again, fx.now()).await.unwrap() else {
        panic!("a known id must be Existing");
    };
    assert_eq!(agent.max_tasks, 5);
    assert_eq!(agent.capacity, Capacity { current: 0, max: 5, available: 5 });
    assert_eq!(agent.description.as_deref(), Some("writes tests"));
    assert_eq!(agent.role.as_deref(), Some("tester"));
    assert_eq!(agent.capabilities, ["rust", "sql", "ci"]);
    assert_eq!(agent.created_at, joined_at);
    assert_eq!(agent.status, AgentStatus::Idle);
    assert_eq!(fx.agent(id).await, agent);
    let events = fx.agent_events(id).await;
    assert_eq!(of_type(&events, EventType::AgentJoined).len(), 1, "joined once: {events:?}");
    assert_eq!(fx.store.agent_list().await.unwrap().len(), 1);
}

pub async fn register_brings_an_offline_agent_back(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.register("worker-1", false, 1).await;
    let closed = fx.store.agent_close(agent.id, fx.now()).await.unwrap().unwrap();
    assert_eq!(closed.status, AgentStatus::Offline);
    let n_changes = of_type(&fx.agent_events(agent.id).await, EventType::AgentStatusChange).len();

    let again = new_agent(agent.id, "worker-1", false, 2);
    let Registration::Existing(back) = fx.store.agent_register(&again, fx.now()).await.unwrap() else {
        panic!("a known id must be Existing");
    };
    assert_eq!(back.status, AgentStatus::Idle);
    assert_eq!(back.max_tasks, 2);
    assert_eq!(fx.agent(agent.id).await.status, AgentStatus::Idle);
    let events = fx.agent_events(agent.id).await;
    let changes = of_type(&events, EventType::AgentStatusChange);
    assert_eq!(changes.len(), n_changes + 1, "offline -> idle must be logged: {events:?}");
    assert_eq!(changes[0].new_value.as_deref(), Some("idle"));
}

pub async fn register_refuses_a_taken_name(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    fx.register("worker-1", false, 1).await;
    let other = new_agent(AgentId::new_v7(), "worker-1", false, 1);
    let res = fx.store.agent_register(&other, fx.now()).await;
    assert!(matches!(res, Err(StoreError::Conflict(_))), "expected Conflict, got {res:?}");
    assert_eq!(fx.store.agent_get(other.id).await.unwrap(), None);
    assert!(fx.agent_events(other.id).await.is_empty(), "nothing logged for a refused agent");
    assert_eq!(fx.store.agent_list().await.unwrap().len(), 1);
}

pub async fn one_active_lead_at_a_time(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let first = fx.register("lead-1", true, 1).await;
    assert!(first.is_lead);

    let second = new_agent(AgentId::new_v7(), "lead-2", true, 1);
    let res = fx.store.agent_register(&second, fx.now()).await;
    assert!(matches!(res, Err(StoreError::Conflict(_))), "second lead: got {res:?}");
    assert_eq!(fx.store.agent_get(second.id).await.unwrap(), None);

    // The active lead itself may register again (a runner restart).
    let first_again = new_agent(first.id, "lead-1", true, 1);
    let res = fx.store.agent_register(&first_again, fx.now()).await.unwrap();
    assert!(matches!(res, Registration::Existing(_)), "the lead re-registering: got {res:?}");

    // Workers are not affected by the rule.
    fx.register("worker-1", false, 1).await;

    // Once the first lead is offline, another may take over.
    fx.store.agent_close(first.id, fx.now()).await.unwrap().unwrap();
    let res = fx.store.agent_register(&second, fx.now()).await.unwrap();
    let Registration::Created(lead) = res else { panic!("expected Created, got {res:?}") };
    assert!(lead.is_lead);

    // Now the first lead cannot come back while the second is active.
    let res = fx.store.agent_register(&first_again, fx.now()).await;
    assert!(matches!(res, Err(StoreError::Conflict(_))), "returning lead: got {res:?}");
    assert_eq!(fx.agent(first.id).await.status, AgentStatus::Offline);

    // Nor by registering as a worker, nor by a heartbeat.
    let as_worker = new_agent(first.id, "lead-1", false, 1);
    let res = fx.store.agent_register(&as_worker, fx.now()).await;
    assert!(matches!(res, Err(StoreError::Conflict(_))), "returning lead without isLead: got {res:?}");
    let res = fx.store.agent_heartbeat(first.id, fx.now(), fx.now()).await;
    assert!(matches!(res, Err(StoreError::Conflict(_))), "heartbeat of a returning lead: got {res:?}");
    assert_eq!(fx.agent(first.id).await.status, AgentStatus::Offline, "still offline after the refusals");

    // Once the second lead leaves, the first comes back with a heartbeat.
    fx.store.agent_close(second.id, fx.now()).await.unwrap().unwrap();
    let back = fx.store.agent_heartbeat(first.id, fx.now(), fx.now()).await.unwrap().unwrap();
    assert_eq!(back.status, AgentStatus::Idle);
}

pub async fn rename_refuses_a_taken_name(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let first = fx.worker("worker-1").await;
    let second = fx.worker("worker-2").await;

    let renamed_at = fx.now();
    let renamed = fx.store.agent_rename(first, "builder", renamed_at).await.unwrap().unwrap();
    assert_eq!(renamed.name, "builder");
    assert_eq!(renamed.last_updated_at, renamed_at);
    assert_eq!(fx.agent(first).await.name, "builder");

    let res = fx.store.agent_rename(second, "builder", fx.now()).await;
    assert!(matches!(res, Err(StoreError::Conflict(_))), "expected Conflict, got {res:?}");
    assert_eq!(fx.agent(second).await.name, "worker-2");

    // Keeping one's own name is no conflict.
    let same = fx.store.agent_rename(second, "worker-2", fx.now()).await.unwrap().unwrap();
    assert_eq!(same.name, "worker-2");
    // The old name is free again.
    let taken = fx.store.agent_rename(second, "worker-1", fx.now()).await.unwrap().unwrap();
    assert_eq!(taken.name, "worker-1");

    assert_eq!(fx.store.agent_rename(AgentId::new_v7(), "ghost", fx.now()).await.unwrap(), None);
}

pub async fn profile_update_changes_only_given_fields(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let id = AgentId::new_v7();
    let new = NewAgent::parse(
        id,
        "worker-1",
        false,
        Some("first description".into()),
        Some("coder".into()),
        Some(vec!["rust".into()]),
        None,
    )
    .unwrap();
    fx.store.agent_register(&new, fx.now()).await.unwrap();

    let update = ProfileUpdate::parse(None, Some("reviewer".into()), None).unwrap();
    let updated_at = fx.now();
    let agent = fx.store.agent_update_profile(id, &update, updated_at).await.unwrap().unwrap();
    assert_eq!(agent.role.as_deref(), Some("reviewer"));
    assert_eq!(agent.description.as_deref(), Some("first description"));
    assert_eq!(agent.capabilities, ["rust"]);
    assert_eq!(agent.last_updated_at, updated_at);

    let update =
        ProfileUpdate::parse(Some("second description".into()), None, Some(vec!["go".into(), "docs".into()]))
            .unwrap();
    let agent = fx.store.agent_update_profile(id, &update, fx.now()).await.unwrap().unwrap();
    assert_eq!(agent.role.as_deref(), Some("reviewer"));
    assert_eq!(agent.description.as_deref(), Some("second description"));
    assert_eq!(agent.capabilities, ["go", "docs"]);
    assert_eq!(fx.agent(id).await, agent);

    let res = fx.store.agent_update_profile(AgentId::new_v7(), &update, fx.now()).await.unwrap();
    assert_eq!(res, None);
}

pub async fn heartbeat_brings_an_offline_agent_back(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let id = fx.worker("worker-1").await;

    let beat_at = fx.now();
    let agent = fx.store.agent_heartbeat(id, beat_at, beat_at).await.unwrap().unwrap();
    assert_eq!(agent.status, AgentStatus::Idle);
    assert_eq!(agent.last_updated_at, beat_at);

    fx.store.agent_close(id, fx.now()).await.unwrap().unwrap();
    let n_changes = of_type(&fx.agent_events(id).await, EventType::AgentStatusChange).len();
    let beat_at = fx.now();
    let agent = fx.store.agent_heartbeat(id, beat_at, beat_at).await.unwrap().unwrap();
    assert_eq!(agent.status, AgentStatus::Idle);
    assert_eq!(agent.last_updated_at, beat_at);
    assert_eq!(fx.agent(id).await, agent);
    let events = fx.agent_events(id).await;
    let changes = of_type(&events, EventType::AgentStatusChange);
    assert_eq!(changes.len(), n_changes + 1, "offline -> idle must be logged: {events:?}");
    assert_eq!(changes[0].new_value.as_deref(), Some("idle"));

    // A busy agent stays busy.
    fx.started_task("work", id).await;
    let agent = fx.store.agent_heartbeat(id, fx.now(), fx.now()).await.unwrap().unwrap();
    assert_eq!(agent.status, AgentStatus::Busy);

    assert_eq!(fx.store.agent_heartbeat(AgentId::new_v7(), fx.now(), fx.now()).await.unwrap(), None);
}

pub async fn close_takes_an_agent_offline_once(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let id = fx.worker("worker-1").await;
    let agent = fx.store.agent_close(id, fx.now()).await.unwrap().unwrap();
    assert_eq!(agent.status, AgentStatus::Offline);
    assert_eq!(fx.agent(id).await.status, AgentStatus::Offline);
    let events = fx.agent_events(id).await;
    let left = of_type(&events, EventType::AgentLeft);
    assert_eq!(left.len(), 1, "{events:?}");
    assert_eq!(left[0].agent_id, Some(id));

    // Closing again changes nothing and logs nothing.
    let agent = fx.store.agent_close(id, fx.now()).await.unwrap().unwrap();
    assert_eq!(agent.status, AgentStatus::Offline);
    let events = fx.agent_events(id).await;
    assert_eq!(of_type(&events, EventType::AgentLeft).len(), 1, "{events:?}");

    assert_eq!(fx.store.agent_close(AgentId::new_v7(), fx.now()).await.unwrap(), None);
}

pub async fn list_is_ordered_by_name(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    for name in ["charlie", "alpha", "delta", "bravo"] {
        fx.worker(name).await;
    }
    let names: Vec<String> =
        fx.store.agent_list().await.unwrap().into_iter().map(|agent| agent.name).collect();
    assert_eq!(names, ["alpha", "bravo", "charlie", "delta"]);
}

pub async fn capacity_counts_in_progress_tasks(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let id = fx.register("worker-1", false, 3).await.id;
    fx.assigned_task("pending work", id).await;
    assert_eq!(fx.agent(id).await.capacity, Capacity { current: 0, max: 3, available: 3 });

    let first = fx.started_task("first", id).await;
    fx.started_task("second", id).await;
    let agent = fx.agent(id).await;
    assert_eq!(agent.capacity, Capacity { current: 2, max: 3, available: 1 });
    assert_eq!(agent.status, AgentStatus::Busy);
    let listed = fx.store.agent_list().await.unwrap();
    assert_eq!(listed[0].capacity, agent.capacity, "agent_list must carry the capacity too");

    fx.must_change(first.id, complete(id)).await;
    assert_eq!(fx.agent(id).await.capacity, Capacity { current: 1, max: 3, available: 2 });
}
