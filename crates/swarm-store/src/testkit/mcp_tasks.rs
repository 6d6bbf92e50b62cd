//! MCP tasks: kept until their time runs out, settled exactly once.

use std::sync::Arc;

use serde_json::json;
use swarm_domain::{
    id::{AgentId, McpTaskId},
    mcp_task::{McpTask, McpTaskStatus},
    retention::{Expiring, RetentionPolicy},
    time::Timestamp,
};

use super::Fixture;
use crate::{Applied, Store};

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_mcp_tasks {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            mcp_tasks,
            [
                a_task_is_kept_then_settled_once,
                an_expired_task_is_gone_and_forgotten,
                retention_removes_expired_tasks_in_batches_and_keeps_live_ones,
            ],
            multi_thread: [concurrent_settlements_have_one_winner]
        );
    };
}

fn task(agent: AgentId, now: Timestamp, ttl_ms: i64) -> McpTask {
    McpTask {
        id: McpTaskId::new_v7(),
        agent_id: agent,
        tool: "poll-task".into(),
        arguments: json!({"waitSeconds": 30}),
        status: McpTaskStatus::Working,
        outcome: None,
        created_at: now,
        updated_at: now,
        deadline: now.plus_millis(30_000),
        expires_at: now.plus_millis(ttl_ms),
    }
}

pub async fn a_task_is_kept_then_settled_once(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("w").await;
    let kept = task(agent, fx.now(), 3_600_000);
    fx.store.mcp_task_create(&kept).await.unwrap();
    assert_eq!(fx.store.mcp_task_get(kept.id, fx.now()).await.unwrap(), Some(kept.clone()));
    assert_eq!(fx.store.mcp_task_get(McpTaskId::new_v7(), fx.now()).await.unwrap(), None);

    let outcome = json!({"content": [], "structuredContent": {"success": true}});
    let now = fx.now();
    let settled = fx.store.mcp_task_settle(kept.id, McpTaskStatus::Completed, Some(outcome.clone()), now);
    match settled.await.unwrap() {
        Applied::Changed { before, after } => {
            assert_eq!(before.status, McpTaskStatus::Working);
            assert_eq!(
                (after.status, after.outcome.as_ref(), after.updated_at),
                (McpTaskStatus::Completed, Some(&outcome), now)
            );
        }
        other => panic!("expected Changed, got {other:?}"),
    }
    // The guard: a cancel after it completed changes nothing and shows the completion.
    match fx.store.mcp_task_settle(kept.id, McpTaskStatus::Cancelled, None, fx.now()).await.unwrap() {
        Applied::Refused { current } => assert_eq!(current.status, McpTaskStatus::Completed),
        other => panic!("expected Refused, got {other:?}"),
    }
    let read = fx.store.mcp_task_get(kept.id, fx.now()).await.unwrap().unwrap();
    assert_eq!((read.status, read.outcome), (McpTaskStatus::Completed, Some(outcome)));
}

pub async fn an_expired_task_is_gone_and_forgotten(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("w").await;
    let short = task(agent, fx.now(), 1_500);
    fx.store.mcp_task_create(&short).await.unwrap();
    let later = fx.now().plus_millis(5_000);
    assert_eq!(fx.store.mcp_task_get(short.id, later).await.unwrap(), None);
    let settled = fx.store.mcp_task_settle(short.id, McpTaskStatus::Cancelled, None, later).await.unwrap();
    assert!(matches!(settled, Applied::NotFound), "{settled:?}");
    // The next task's creation removes it: even a read at its creation time finds nothing.
    fx.store.mcp_task_create(&task(agent, later, 3_600_000)).await.unwrap();
    assert_eq!(fx.store.mcp_task_get(short.id, short.created_at).await.unwrap(), None);
}

pub async fn retention_removes_expired_tasks_in_batches_and_keeps_live_ones(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("w").await;
    // Long enough that creating the others does not forget them already.
    let expired = [task(agent, fx.now(), 10_000), task(agent, fx.now(), 10_000)];
    let live = task(agent, fx.now(), 3_600_000);
    for task in expired.iter().chain([&live]) {
        fx.store.mcp_task_create(task).await.unwrap();
    }
    let later = fx.now().plus_millis(30_000);
    let cutoff = RetentionPolicy::keep_all().cutoff(Expiring::McpTasks, later).expect("no policy keeps them");
    let mut batches = Vec::new();
    for _ in 0..3 {
        batches.push(fx.store.retention_remove(Expiring::McpTasks, cutoff, 1).await.unwrap());
    }
    assert_eq!(batches, [1, 1, 0], "one expired task per batch of one, then none");
    // Read at their creation time, when they were still live: only removal hides them.
    for task in &expired {
        assert_eq!(fx.store.mcp_task_get(task.id, task.created_at).await.unwrap(), None, "removed");
    }
    assert_eq!(fx.store.mcp_task_get(live.id, later).await.unwrap(), Some(live.clone()), "live, kept");
}

pub async fn concurrent_settlements_have_one_winner(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("w").await;
    let kept = task(agent, fx.now(), 3_600_000);
    fx.store.mcp_task_create(&kept).await.unwrap();
    let now = fx.now();
    let attempts = (0..8).map(|i| {
        let store = Arc::clone(&fx.store);
        let status = if i % 2 == 0 { McpTaskStatus::Completed } else { McpTaskStatus::Cancelled };
        tokio::spawn(async move { store.mcp_task_settle(kept.id, status, Some(json!({"by": i})), now).await })
    });
    let mut changed = 0;
    for attempt in attempts.collect::<Vec<_>>() {
        if matches!(attempt.await.unwrap().unwrap(), Applied::Changed { .. }) {
            changed += 1;
        }
    }
    assert_eq!(changed, 1, "exactly one settlement wins");
}
