//! Daily budgets (issue 40): the ceilings as kept, the day's spend, and the poll's claim
//! refusing to start work past a ceiling, inside its transaction, on both backends.

use std::{collections::HashSet, sync::Arc};

use crate::Store;
use swarm_domain::{
    budget::{BudgetKey, BudgetScope, RefusalCause, Usd, UtcDay},
    event::EventType,
    id::{AgentId, TaskId},
    poll::{PoolMode, Trigger, TriggerKind},
    retention::Expiring,
    session::NewSessionCost,
    task::TaskStatus,
    time::Timestamp,
};
use tokio::sync::Barrier;

use super::Fixture;

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_budgets {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            budgets,
            [
                budgets_are_kept_replaced_listed_and_deleted,
                spend_counts_the_utc_day_s_costs,
                a_reached_budget_refuses_assigned_and_pool_work_until_raised,
                a_refused_poll_still_gets_what_starts_no_work,
                refusals_expire_with_the_delivered_triggers,
            ],
            multi_thread: [racing_polls_past_a_budget_claim_nothing_and_record_each_refusal_once]
        );
    };
}

const LEASE: i64 = 45_000;

async fn claim(fx: &Fixture, agent: AgentId) -> Option<Trigger> {
    claim_at(&fx.store, agent, fx.now()).await
}

async fn claim_at(store: &Arc<dyn Store>, agent: AgentId, now: Timestamp) -> Option<Trigger> {
    let is_lead = store.agent_get(agent).await.unwrap().unwrap().is_lead;
    let kinds: Vec<TriggerKind> =
        PoolMode::Claim.kinds().filter(|kind| kind.audience().admits(is_lead)).collect();
    store.poll_claim(agent, &kinds, now, now.plus_millis(LEASE)).await.expect("poll_claim").map(|(_, t)| t)
}

async fn spend(fx: &Fixture, agent: AgentId, usd: f64, at: Timestamp) {
    let cost = NewSessionCost {
        session_id: format!("session-{}", AgentId::new_v7()),
        agent_id: agent,
        task_id: None,
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

fn refused(trigger: Option<Trigger>) -> swarm_domain::budget::BudgetRefused {
    match trigger {
        Some(Trigger::BudgetRefused(refused)) => refused,
        other => panic!("expected budget_refused, got {other:?}"),
    }
}

fn assigned(trigger: Option<Trigger>) -> TaskId {
    match trigger {
        Some(Trigger::TaskAssigned { task_id, .. }) => task_id,
        other => panic!("expected task_assigned, got {other:?}"),
    }
}

pub async fn budgets_are_kept_replaced_listed_and_deleted(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.worker("w").await;
    assert_eq!(fx.store.budget_get(BudgetKey::Global).await.unwrap(), None);

    let first = fx.now();
    let global = fx.store.budget_put(BudgetKey::Global, 10.0, first).await.unwrap();
    assert_eq!(
        (global.scope, global.scope_id.as_str(), global.daily_budget_usd),
        (BudgetScope::Global, "", 10.0)
    );
    assert_eq!((global.created_at, global.last_updated_at), (first.unix_millis(), first.unix_millis()));

    let later = fx.now();
    let raised = fx.store.budget_put(BudgetKey::Global, 12.5, later).await.unwrap();
    assert_eq!(raised.daily_budget_usd, 12.5);
    assert_eq!(raised.created_at, first.unix_millis(), "a replaced budget keeps when it was created");
    assert_eq!(raised.last_updated_at, later.unix_millis());
    assert_eq!(fx.store.budget_get(BudgetKey::Global).await.unwrap(), Some(raised.clone()));

    let mine = fx.store.budget_put(BudgetKey::Agent(worker), 0.0, fx.now()).await.unwrap();
    assert_eq!((mine.scope, mine.scope_id.clone()), (BudgetScope::Agent, worker.to_string()));
    assert_eq!(
        fx.store.budget_list().await.unwrap(),
        vec![mine.clone(), raised.clone()],
        "by scope, then id"
    );

    assert!(fx.store.budget_delete(BudgetKey::Agent(worker), fx.now()).await.unwrap());
    assert!(
        !fx.store.budget_delete(BudgetKey::Agent(worker), fx.now()).await.unwrap(),
        "deleting twice finds nothing"
    );
    assert_eq!(fx.store.budget_list().await.unwrap(), vec![raised]);

    // Each change is in the event log, newest first, with its old and new ceiling.
    let all = crate::EventFilter { limit: 100, ..crate::EventFilter::default() };
    let logged: Vec<_> = fx
        .store
        .event_list(&all)
        .await
        .unwrap()
        .into_iter()
        .filter(|event| matches!(event.event_type, EventType::BudgetSet | EventType::BudgetRemoved))
        .map(|event| (event.event_type, event.agent_id, event.old_value, event.new_value, event.metadata))
        .collect();
    let scope = |scope: &str| Some(serde_json::json!({"scope": scope}));
    assert_eq!(
        logged,
        vec![
            (EventType::BudgetRemoved, Some(worker), Some("0".into()), None, scope("agent")),
            (EventType::BudgetSet, Some(worker), None, Some("0".into()), scope("agent")),
            (EventType::BudgetSet, None, Some("10".into()), Some("12.5".into()), scope("global")),
            (EventType::BudgetSet, None, None, Some("10".into()), scope("global")),
        ]
    );
}

pub async fn spend_counts_the_utc_day_s_costs(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let (a, b) = (fx.worker("a").await, fx.worker("b").await);
    let now = fx.now();
    let today = UtcDay::of(now);
    spend(&fx, a, 1.25, now).await;
    spend(&fx, a, 0.5, today.start).await;
    spend(&fx, b, 2.0, now).await;
    spend(&fx, a, 100.0, today.start.minus_millis(1)).await; // yesterday
    spend(&fx, a, 100.0, today.end).await; // tomorrow
    assert_eq!(fx.store.budget_spend(Some(a), &today).await.unwrap(), 1.75);
    assert_eq!(fx.store.budget_spend(Some(b), &today).await.unwrap(), 2.0);
    assert_eq!(fx.store.budget_spend(None, &today).await.unwrap(), 3.75);
    assert_eq!(fx.store.budget_spend(Some(AgentId::new_v7()), &today).await.unwrap(), 0.0);
}

pub async fn a_reached_budget_refuses_assigned_and_pool_work_until_raised(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let (spender, other) = (fx.worker("spender").await, fx.worker("other").await);
    let own = fx.assigned_task("mine", spender).await;
    spend(&fx, spender, 3.0, fx.now()).await;

    // The agent's own ceiling: its assigned task waits, and so does the pool for it.
    fx.store.budget_put(BudgetKey::Agent(spender), 3.0, fx.now()).await.unwrap();
    let refusal = refused(claim(&fx, spender).await);
    assert_eq!(refusal.cause, RefusalCause::Agent);
    assert_eq!((refusal.agent_spend, refusal.agent_budget), (Some(Usd(3.0)), Some(Usd(3.0))));
    assert_eq!((refusal.global_spend, refusal.global_budget), (None, None), "no global budget is set");
    assert_eq!(refusal.reset_at, UtcDay::of(fx.now()).end.to_string());
    assert_eq!(fx.task(own.id).await.status, TaskStatus::Pending, "a refused claim takes nothing");
    assert!(refused(claim(&fx, spender).await).cause == RefusalCause::Agent, "asked again, refused again");
    let recorded = fx.store.budget_refusals(50).await.unwrap();
    assert_eq!(recorded.len(), 1, "one record per agent, task and day, however often it asks: {recorded:?}");
    assert_eq!((recorded[0].agent_id, recorded[0].task_id), (spender, own.id));
    assert_eq!((recorded[0].agent_spend_usd, recorded[0].agent_budget_usd), (Some(3.0), Some(3.0)));

    // Raised: the next poll starts it.
    fx.store.budget_put(BudgetKey::Agent(spender), 3.01, fx.now()).await.unwrap();
    assert_eq!(assigned(claim(&fx, spender).await), own.id);

    // The hub's ceiling stops every worker from the pool, including one that spent nothing.
    let pooled = fx.pool_task("pooled").await;
    fx.store.budget_put(BudgetKey::Global, 2.0, fx.now()).await.unwrap();
    let refusal = refused(claim(&fx, other).await);
    assert_eq!(refusal.cause, RefusalCause::Global);
    assert_eq!((refusal.global_spend, refusal.global_budget), (Some(Usd(3.0)), Some(Usd(2.0))));
    assert_eq!(fx.task(pooled.id).await.status, TaskStatus::Unassigned);
    let newest = &fx.store.budget_refusals(1).await.unwrap()[0];
    assert_eq!((newest.agent_id, newest.task_id, newest.cause), (other, pooled.id, RefusalCause::Global));
    assert_eq!(fx.store.budget_refusals(50).await.unwrap().len(), 2);

    fx.store.budget_put(BudgetKey::Global, 50.0, fx.now()).await.unwrap();
    assert_eq!(assigned(claim(&fx, other).await), pooled.id);

    // Deleted: no ceiling at all.
    let again = fx.assigned_task("again", other).await;
    fx.store.budget_put(BudgetKey::Global, 0.0, fx.now()).await.unwrap();
    fx.store.task_apply(pooled.id, &super::complete(other).change(), Some(other), fx.now()).await.unwrap();
    refused(claim(&fx, other).await);
    assert!(fx.store.budget_delete(BudgetKey::Global, fx.now()).await.unwrap());
    assert_eq!(assigned(claim(&fx, other).await), again.id);
}

pub async fn a_refused_poll_still_gets_what_starts_no_work(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.worker("w").await;
    let pending = fx.assigned_task("pending", worker).await;
    let offered = fx.offered_task("offered", worker).await;
    fx.store.budget_put(BudgetKey::Agent(worker), 0.0, fx.now()).await.unwrap();
    // An offer is a question, not work: it is handed over (the reference's order too).
    match claim(&fx, worker).await {
        Some(Trigger::TaskOffered { task_id, .. }) => assert_eq!(task_id, offered.id),
        other => panic!("expected the offer, got {other:?}"),
    }
    refused(claim(&fx, worker).await);
    assert_eq!(fx.task(pending.id).await.status, TaskStatus::Pending);
    // Nothing waits at all: no refusal, no record.
    let idle = fx.worker("idle").await;
    fx.store.budget_put(BudgetKey::Agent(idle), 0.0, fx.now()).await.unwrap();
    fx.store.task_apply(pending.id, &super::cancel().change(), None, fx.now()).await.unwrap();
    assert_eq!(claim(&fx, idle).await, None);
    assert!(fx.store.budget_refusals(50).await.unwrap().iter().all(|refusal| refusal.agent_id != idle));
}

pub async fn refusals_expire_with_the_delivered_triggers(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.worker("w").await;
    fx.assigned_task("waits", worker).await;
    fx.store.budget_put(BudgetKey::Agent(worker), 0.0, fx.now()).await.unwrap();
    let refused_at = fx.now();
    refused(claim_at(&fx.store, worker, refused_at).await);
    let kept = fx.store.retention_remove(Expiring::DeliveredTriggers, refused_at, 100).await.unwrap();
    assert_eq!(
        (kept, fx.store.budget_refusals(50).await.unwrap().len()),
        (0, 1),
        "not older than the cutoff"
    );
    let removed =
        fx.store.retention_remove(Expiring::DeliveredTriggers, refused_at.plus_millis(1), 100).await.unwrap();
    assert_eq!((removed, fx.store.budget_refusals(50).await.unwrap().len()), (1, 0));
    assert!(fx.store.budget_get(BudgetKey::Agent(worker)).await.unwrap().is_some(), "the budget stays");
}

const N_WORKERS: usize = 8;
const POLLS_EACH: usize = 4;

pub async fn racing_polls_past_a_budget_claim_nothing_and_record_each_refusal_once(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let mut workers = Vec::new();
    for n in 0..N_WORKERS {
        workers.push(fx.worker(&format!("w{n}")).await);
    }
    let mut tasks = HashSet::new();
    for n in 0..N_WORKERS {
        tasks.insert(fx.pool_task(&format!("pool {n}")).await.id);
    }
    spend(&fx, workers[0], 1.0, fx.now()).await;
    fx.store.budget_put(BudgetKey::Global, 1.0, fx.now()).await.unwrap();

    let now = fx.now();
    let race = |store: Arc<dyn Store>| {
        let barrier = Arc::new(Barrier::new(N_WORKERS * POLLS_EACH));
        let mut polls = tokio::task::JoinSet::new();
        for worker in &workers {
            for _ in 0..POLLS_EACH {
                let (store, barrier, worker) = (Arc::clone(&store), Arc::clone(&barrier), *worker);
                polls.spawn(async move {
                    barrier.wait().await;
                    claim_at(&store, worker, now).await
                });
            }
        }
        polls
    };
    let answers = race(Arc::clone(&fx.store)).join_all().await;
    assert!(answers.iter().all(|answer| matches!(answer, Some(Trigger::BudgetRefused(_)))), "{answers:?}");
    for id in &tasks {
        assert_eq!(fx.task(*id).await.status, TaskStatus::Unassigned, "a refused race took a task");
    }
    let recorded = fx.store.budget_refusals(500).await.unwrap();
    let agents: HashSet<AgentId> = recorded.iter().map(|refusal| refusal.agent_id).collect();
    assert_eq!(recorded.len(), N_WORKERS, "one record per worker for the one task each was refused");
    assert_eq!(agents.len(), N_WORKERS);

    // Raised: the same race hands each task to exactly one worker, one each (one slot).
    fx.store.budget_put(BudgetKey::Global, 1000.0, fx.now()).await.unwrap();
    let answers = race(Arc::clone(&fx.store)).join_all().await;
    let claimed: Vec<TaskId> = answers.into_iter().flatten().map(|trigger| assigned(Some(trigger))).collect();
    let unique: HashSet<TaskId> = claimed.iter().copied().collect();
    assert_eq!(unique.len(), claimed.len(), "a task was claimed twice: {claimed:?}");
    assert_eq!(unique, tasks, "every pool task was claimed once");
    assert_eq!(fx.store.budget_refusals(500).await.unwrap().len(), N_WORKERS, "no refusal after the raise");
}
