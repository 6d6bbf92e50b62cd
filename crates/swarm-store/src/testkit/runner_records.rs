//! The newest reference runner's bookkeeping: records replaced by key and listed newest
//! first; the worker event log filtered as the runner queries it.

use std::sync::Arc;

use serde_json::json;

use super::Fixture;
use crate::{NewWorkerEvent, RecordArea, RunnerRecord, Store, WorkerEventFilter};

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_runner_records {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            runner_records,
            [records_are_replaced_by_key_listed_newest_first_and_deleted, worker_events_filter_as_the_runner_queries],
            multi_thread: []
        );
    };
}

pub async fn records_are_replaced_by_key_listed_newest_first_and_deleted(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("w").await.to_string();
    let other = fx.worker("x").await.to_string();
    let record = |owner: &str, name: &str, body| RunnerRecord {
        area: RecordArea::ProfileFile,
        owner_id: owner.to_string(),
        name: name.to_string(),
        body,
        updated_at: fx.now(),
    };
    fx.store.record_put(&record(&agent, "soulMd", json!("first"))).await.unwrap();
    fx.store.record_put(&record(&agent, "claudeMd", json!("claude"))).await.unwrap();
    fx.store.record_put(&record(&agent, "soulMd", json!("second"))).await.unwrap();
    fx.store.record_put(&record(&other, "soulMd", json!("other's"))).await.unwrap();

    let mine = fx.store.record_list(RecordArea::ProfileFile, Some(&agent), 10).await.unwrap();
    let pairs: Vec<_> = mine.iter().map(|r| (r.name.as_str(), r.body.clone())).collect();
    assert_eq!(pairs, vec![("soulMd", json!("second")), ("claudeMd", json!("claude"))]);
    assert_eq!(fx.store.record_list(RecordArea::ProfileFile, None, 10).await.unwrap().len(), 3);
    assert_eq!(fx.store.record_list(RecordArea::ProfileFile, None, 1).await.unwrap()[0].owner_id, other);
    assert!(fx.store.record_list(RecordArea::TaskSession, Some(&agent), 10).await.unwrap().is_empty());

    assert_eq!(fx.store.record_delete(RecordArea::ProfileFile, &agent, Some("soulMd")).await.unwrap(), 1);
    assert_eq!(fx.store.record_delete(RecordArea::ProfileFile, &agent, Some("soulMd")).await.unwrap(), 0);
    assert_eq!(fx.store.record_delete(RecordArea::ProfileFile, &other, None).await.unwrap(), 1);
    let left = fx.store.record_list(RecordArea::ProfileFile, None, 10).await.unwrap();
    assert_eq!(left.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), vec!["claudeMd"]);
}

fn event(name: &str, agent: &str, field: Option<&str>) -> NewWorkerEvent {
    NewWorkerEvent {
        category: "system".into(),
        event: name.into(),
        status: "ok".into(),
        source: "worker".into(),
        agent_id: Some(agent.into()),
        task_id: None,
        session_id: Some("s-1".into()),
        parent_event_id: None,
        numeric_value: Some(1.5),
        duration_ms: Some(20),
        data: field.map(|field| json!({"field": field, "extra": [1, 2]})),
    }
}

pub async fn worker_events_filter_as_the_runner_queries(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let first_at = fx.now();
    let first = [event("system.profile_sync_rejected", "a", Some("soulMd")), event("tool.start", "a", None)];
    assert_eq!(fx.store.worker_events_append(&first, first_at).await.unwrap(), 2);
    let second_at = fx.now();
    let second = [
        event("system.profile_sync_rejected", "a", Some("claudeMd")),
        event("system.profile_sync_rejected", "b", Some("soulMd")),
    ];
    assert_eq!(fx.store.worker_events_append(&second, second_at).await.unwrap(), 2);
    assert_eq!(fx.store.worker_events_append(&[], fx.now()).await.unwrap(), 0);

    let all =
        fx.store.worker_event_list(&WorkerEventFilter { limit: 100, ..Default::default() }).await.unwrap();
    assert_eq!(all.len(), 4);
    assert!(all.windows(2).all(|pair| pair[0].created_at >= pair[1].created_at), "newest first");
    let kept = all.iter().find(|e| e.event.event == "tool.start").unwrap();
    assert_eq!(kept.event, first[1]);
    assert_eq!(kept.created_at, first_at);

    let query = |event: &str, agent: &str, field: &str| WorkerEventFilter {
        event: Some(event.into()),
        agent_id: Some(agent.into()),
        data_field: Some(field.into()),
        limit: 1,
        ..Default::default()
    };
    let found =
        fx.store.worker_event_list(&query("system.profile_sync_rejected", "a", "soulMd")).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].event, first[0]);
    let none =
        fx.store.worker_event_list(&query("system.profile_sync_reconciled", "a", "soulMd")).await.unwrap();
    assert!(none.is_empty());

    let since = WorkerEventFilter { since: Some(second_at), limit: 100, ..Default::default() };
    assert_eq!(fx.store.worker_event_list(&since).await.unwrap().len(), 2);
    let until = WorkerEventFilter { until: Some(first_at), limit: 100, ..Default::default() };
    assert_eq!(fx.store.worker_event_list(&until).await.unwrap().len(), 2);
    let by_agent = WorkerEventFilter { agent_id: Some("b".into()), limit: 100, ..Default::default() };
    assert_eq!(fx.store.worker_event_list(&by_agent).await.unwrap().len(), 1);
    let limited = WorkerEventFilter { limit: 3, ..Default::default() };
    assert_eq!(fx.store.worker_event_list(&limited).await.unwrap().len(), 3);
}
