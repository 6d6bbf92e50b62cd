//! Retention in a running hub: with the hub's clock moved past a window, the background
//! worker removes a finished task's logs (and later its events), keeps a running task's,
//! and `/metrics` counts what it removed.

use std::{sync::Arc, time::Duration};

use serde_json::{Value, json};
use swarm_hub::HubOptions;

use crate::{
    hub::{Hub, sqlite_file},
    metrics::scrape,
    support::eventually,
};

fn set_clock(path: &std::path::Path, at: chrono::DateTime<chrono::Utc>) {
    std::fs::write(path, at.to_rfc3339()).unwrap();
}

async fn lines(hub: &Hub, task: &str) -> usize {
    let (status, body) = hub.get(&format!("/api/tasks/{task}/session-logs"), None).await;
    assert_eq!(status, 200, "{body}");
    body["logs"].as_array().unwrap().len()
}

async fn removed(hub: &Hub, kind: &str) -> f64 {
    scrape(hub).await.get("swarm_retention_removed_rows_total", &[("kind", kind)])
}

#[tokio::test]
async fn retention_removes_finished_work_past_its_window_and_counts_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("clock");
    let start = chrono::Utc::now();
    set_clock(&clock, start);
    let options = HubOptions {
        clock: Some(Arc::new(swarm_service::clock::FileClock::new(clock.clone()))),
        retention_every: Duration::from_millis(100),
        ..HubOptions::default()
    };
    let hub = Hub::start_with_options(&sqlite_file(dir.path()), None, &[], options);

    let worker = uuid::Uuid::new_v4().to_string();
    let (status, body) = hub.post("/api/agents", Some(&worker), json!({"name": "w", "maxTasks": 2})).await;
    assert_eq!(status, 201, "{body}");
    let mut tasks = Vec::new();
    for n in 0..2 {
        let (status, task) =
            hub.post("/api/tasks", None, json!({"task": format!("work {n}"), "agentId": worker})).await;
        assert_eq!(status, 201, "{task}");
        let (status, polled) = hub.get("/api/poll", Some(&worker)).await;
        assert_eq!((status, polled["trigger"]["type"].as_str()), (200, Some("task_assigned")), "{polled}");
        tasks.push(polled["trigger"]["taskId"].as_str().unwrap().to_string());
    }
    for task in &tasks {
        let logs = json!({"sessionId": format!("s-{task}"), "iteration": 0, "taskId": task,
                          "lines": ["one", "two", "three"]});
        let (status, body) = hub.post("/api/session-logs", Some(&worker), logs).await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, body) = hub
        .post(&format!("/api/tasks/{}/finish", tasks[0]), Some(&worker), json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200, "{body}");

    // Passes run at the hub's time, which has not moved: nothing is old enough.
    let passes =
        |exposition: &crate::metrics::Exposition| exposition.get("swarm_retention_passes_total", &[]);
    let first = passes(&scrape(&hub).await);
    eventually("two retention passes", || async {
        (passes(&scrape(&hub).await) >= first + 2.0).then_some(())
    })
    .await;
    assert_eq!(removed(&hub, "session_logs").await, 0.0);
    assert_eq!((lines(&hub, &tasks[0]).await, lines(&hub, &tasks[1]).await), (3, 3));

    // Fifteen days on: past the logs' 14, within the events' 30.
    set_clock(&clock, start + chrono::Duration::days(15));
    eventually("the finished task's logs removed", || async {
        (removed(&hub, "session_logs").await >= 3.0).then_some(())
    })
    .await;
    assert_eq!(lines(&hub, &tasks[0]).await, 0);
    assert_eq!(lines(&hub, &tasks[1]).await, 3, "the running task keeps its logs");
    let (status, task) = hub.get(&format!("/api/tasks/{}", tasks[0]), None).await;
    assert_eq!((status, task["status"].as_str()), (200, Some("completed")), "the task stays");
    assert_eq!(removed(&hub, "events").await, 0.0);
    let events_of = |task: String| {
        let hub = &hub;
        async move {
            let (status, body): (u16, Value) = hub.get(&format!("/api/tasks/{task}"), None).await;
            assert_eq!(status, 200, "{body}");
            body["logs"].as_array().map_or(0, Vec::len)
        }
    };
    let running_events = events_of(tasks[1].clone()).await;

    // Thirty-one days on: the finished task's events go too, the running task's stay.
    set_clock(&clock, start + chrono::Duration::days(31));
    eventually("the finished task's events removed", || async {
        (removed(&hub, "events").await >= 1.0).then_some(())
    })
    .await;
    assert_eq!(events_of(tasks[0].clone()).await, 0);
    assert_eq!(events_of(tasks[1].clone()).await, running_events);
    assert_eq!(lines(&hub, &tasks[1]).await, 3);
}
