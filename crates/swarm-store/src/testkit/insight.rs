//! The control room's reads (issue 49): tasks found by the end of their id, and the
//! session costs summed per agent and epic over a window, on both backends.

use std::sync::Arc;

use crate::Store;
use swarm_domain::{
    epic::EpicDraft,
    id::{AgentId, EpicId, TaskId},
    session::NewSessionCost,
    task::{NewTask, TaskDraft},
    time::Timestamp,
};
use uuid::Uuid;

use super::{Fixture, draft};

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_insight {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            insight,
            [tasks_are_found_by_the_end_of_their_id, costs_are_summed_per_agent_and_epic_within_the_window],
            multi_thread: []
        );
    };
}

/// A task with a chosen id, so that two can share the end of theirs.
async fn task_with_id(fx: &Fixture, id: &str) -> TaskId {
    let mut new = NewTask::parse(draft("found by its end"), None).expect("a valid draft");
    new.id = TaskId::from_uuid(Uuid::parse_str(id).unwrap());
    fx.store.task_create(&new, fx.now()).await.expect("task_create").id
}

pub async fn tasks_are_found_by_the_end_of_their_id(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let first = task_with_id(&fx, "0193a1b2-0000-7000-8000-0000aa11d0e2").await;
    let twin = task_with_id(&fx, "0193a1b2-0000-7000-8000-0000bb11d0e2").await;
    let other = fx.pool_task("another").await;
    let found = |suffix: &'static str| {
        let store = fx.store.clone();
        async move { store.task_ids_ending_with(suffix, 10).await.expect("task_ids_ending_with") }
    };
    assert_eq!(found("aa11d0e2").await, vec![first]);
    assert_eq!(found("11d0e2").await, vec![first, twin], "ordered by id");
    assert_eq!(fx.store.task_ids_ending_with("11d0e2", 1).await.unwrap(), vec![first], "at most the limit");
    assert_eq!(fx.store.task_ids_ending_with(&other.id.short(), 10).await.unwrap(), vec![other.id]);
    assert_eq!(found("0000").await, Vec::<TaskId>::new(), "the end, not the middle");
}

async fn spend(fx: &Fixture, agent: AgentId, task: Option<TaskId>, usd: f64, at: Timestamp) {
    let cost = NewSessionCost {
        session_id: format!("session-{}", AgentId::new_v7()),
        agent_id: agent,
        task_id: task,
        total_cost_usd: usd,
        input_tokens: None,
        output_tokens: None,
        cache_read_tokens: None,
        cache_write_tokens: None,
        duration_ms: None,
        num_turns: None,
        model: None,
        is_error: false,
    };
    fx.store.session_cost_insert(&cost, at).await.expect("session_cost_insert");
}

pub async fn costs_are_summed_per_agent_and_epic_within_the_window(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let (ada, bob) = (fx.worker("ada").await, fx.worker("bob").await);
    let epic =
        EpicDraft { name: Some("launch".into()), goal: Some("ship it".into()), ..EpicDraft::default() }
            .create(EpicId::new_v7(), None, fx.now())
            .expect("a valid epic");
    fx.store.epic_create(&epic).await.expect("epic_create");
    let in_epic = fx.create(TaskDraft { epic_id: Some(epic.id), ..draft("epic work") }, None).await;
    let loose = fx.pool_task("loose work").await;

    let before = fx.now();
    let start = fx.now();
    spend(&fx, ada, Some(in_epic.id), 1.25, before).await;
    spend(&fx, ada, Some(in_epic.id), 0.5, fx.now()).await;
    spend(&fx, ada, Some(loose.id), 0.25, fx.now()).await;
    spend(&fx, bob, Some(in_epic.id), 0.125, fx.now()).await;
    spend(&fx, bob, None, 2.0, fx.now()).await;
    let end = fx.now();
    spend(&fx, bob, None, 4.0, end).await;

    let mut totals = fx.store.cost_totals(start, end).await.expect("cost_totals");
    totals.sort_by_key(|total| (total.agent_id, total.epic_id));
    let seen: Vec<(AgentId, Option<EpicId>, f64, i64)> =
        totals.iter().map(|t| (t.agent_id, t.epic_id, t.cost_usd, t.sessions)).collect();
    let mut expected = vec![
        (ada, Some(epic.id), 0.5, 1),
        (ada, None, 0.25, 1),
        (bob, Some(epic.id), 0.125, 1),
        (bob, None, 2.0, 1),
    ];
    expected.sort_by_key(|(agent, epic, _, _)| (*agent, *epic));
    assert_eq!(seen, expected, "from start (included) to end (excluded), per agent and epic");
    assert!(fx.store.cost_totals(end.plus_millis(1), end.plus_millis(2)).await.unwrap().is_empty());
}
