// TEMPORARY: deleted before hand-off.
use std::sync::Arc;

use sqlx::Connection;
use swarm_domain::{
    agent::{AgentStatus, NewAgent},
    id::AgentId,
    session::{NewSessionCost, NewSessionLogs},
    task::{FinishOutcome, NewTask, TaskAction, TaskDraft, TaskStatus},
    time::Timestamp,
};
use swarm_store::{Applied, EventFilter, Registered, SessionCostFilter, Store, StoreError, TaskFilter};
use swarm_store_postgres::PgStore;

async fn fresh_db() -> String {
    let url = std::env::var("PGURL").unwrap();
    let name = format!("smoke_{}", uuid::Uuid::new_v4().simple());
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&mut admin)
        .await
        .unwrap();
    format!("{}/{name}", url.rsplit_once('/').unwrap().0)
}

fn agent(name: &str, lead: bool, max: i64) -> NewAgent {
    NewAgent::parse(AgentId::new_v7(), name, lead, None, None, Some(vec!["a".into()]), Some(max)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_migrations() {
    let url = fresh_db().await;
    let mut handles = Vec::new();
    for _ in 0..8 {
        let url = url.clone();
        handles.push(tokio::spawn(async move { PgStore::connect(&url).await.map(|s| s.describe()) }));
    }
    for h in handles {
        println!("{}", h.await.unwrap().unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn flows() {
    let store = PgStore::connect(&fresh_db().await).await.unwrap();
    let now = Timestamp::now();
    let Registered::Created(w) = store.agent_register(&agent("w1", false, 2), now).await.unwrap() else {
        panic!()
    };
    let Registered::Created(_lead) = store.agent_register(&agent("lead", true, 1), now).await.unwrap() else {
        panic!()
    };
    let err = store.agent_register(&agent("lead2", true, 1), now).await.unwrap_err();
    println!("{err}");
    let err = store.agent_register(&agent("w1", false, 1), now).await.unwrap_err();
    println!("{err}");
    let dep = store
        .task_create(
            &NewTask::parse(TaskDraft { task: "dep".into(), ..Default::default() }, Some(w.id)).unwrap(),
            now,
        )
        .await
        .unwrap();
    let t = store
        .task_create(
            &NewTask::parse(
                TaskDraft {
                    task: "Hello 100% World".into(),
                    tags: vec!["x".into(), "y".into()],
                    depends_on: vec![dep.id],
                    ..Default::default()
                },
                Some(w.id),
            )
            .unwrap(),
            now,
        )
        .await
        .unwrap();
    println!("{t:?}");
    let claim = TaskAction::Claim { agent: w.id }.change();
    let r = store.task_apply(t.id, &claim, Some(w.id), now).await.unwrap();
    assert!(matches!(r, Applied::Refused { .. }), "{r:?}");
    // complete dep
    store.task_apply(dep.id, &claim, Some(w.id), now).await.unwrap();
    let r =
        store.task_apply(dep.id, &TaskAction::Start { agent: w.id }.change(), Some(w.id), now).await.unwrap();
    assert!(matches!(r, Applied::Changed { .. }), "{r:?}");
    assert_eq!(store.agent_get(w.id).await.unwrap().unwrap().status, AgentStatus::Busy);
    let fin = TaskAction::Finish {
        assignee: Some(w.id),
        outcome: FinishOutcome::Completed { output: Some("ok".into()) },
    };
    let r = store.task_apply(dep.id, &fin.change(), Some(w.id), now).await.unwrap();
    let Applied::Changed { after, .. } = r else { panic!() };
    assert_eq!(after.status, TaskStatus::Completed);
    assert_eq!(after.output.as_deref(), Some("ok"));
    assert_eq!(store.agent_get(w.id).await.unwrap().unwrap().status, AgentStatus::Idle);
    let r = store.task_apply(t.id, &claim, Some(w.id), now).await.unwrap();
    assert!(matches!(r, Applied::Changed { .. }), "{r:?}");
    let r = store.task_set_progress(t.id, "half", Some(w.id), Some(w.id), now).await.unwrap();
    assert!(matches!(r, Applied::Changed { .. }), "{r:?}");
    let r = store.task_set_progress(dep.id, "late", None, None, now).await.unwrap();
    assert!(matches!(r, Applied::Refused { .. }), "{r:?}");

    let (tasks, total) = store
        .task_list(&TaskFilter {
            search: Some("100%".into()),
            tags: vec!["y".into(), "x".into()],
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!((tasks.len(), total), (1, 1));
    let (tasks, total) = store
        .task_list(&TaskFilter { statuses: vec![TaskStatus::Completed], limit: 10, ..Default::default() })
        .await
        .unwrap();
    assert_eq!((tasks.len(), total), (1, 1));
    let (tasks, total) =
        store.task_list(&TaskFilter { limit: 1, offset: 1, ..Default::default() }).await.unwrap();
    assert_eq!((tasks.len(), total), (1, 2));
    assert_eq!(tasks[0].id, dep.id);

    let ghost = NewTask::parse(
        TaskDraft {
            task: "g".into(),
            depends_on: vec![swarm_domain::id::TaskId::new_v7()],
            ..Default::default()
        },
        None,
    )
    .unwrap();
    let err = store.task_create(&ghost, now).await.unwrap_err();
    assert!(matches!(err, StoreError::MissingReference(_)));
    println!("{err}");
    let ghost = NewTask::parse(
        TaskDraft { task: "g".into(), offered_to: Some(AgentId::new_v7()), ..Default::default() },
        None,
    )
    .unwrap();
    println!("{}", store.task_create(&ghost, now).await.unwrap_err());

    let events = store.event_list(&EventFilter { limit: 100, ..Default::default() }).await.unwrap();
    for e in &events {
        println!("{} {:?} {:?} {:?} {:?}", e.created_at, e.event_type, e.agent_id, e.old_value, e.new_value);
    }
    let logs = NewSessionLogs::parse("s1".into(), 0, Some(t.id), None, vec!["a".into(), "b".into()]).unwrap();
    assert_eq!(store.session_logs_append(&logs, now).await.unwrap(), 2);
    assert_eq!(store.session_logs_append(&logs, now).await.unwrap(), 2);
    let got = store.session_logs_for_task(t.id).await.unwrap();
    assert_eq!(got.iter().map(|l| l.line_number).collect::<Vec<_>>(), [0, 1, 2, 3]);
    let cost = NewSessionCost {
        session_id: "s1".into(),
        agent_id: w.id,
        task_id: None,
        total_cost_usd: 1.5,
        input_tokens: Some(3),
        output_tokens: None,
        cache_read_tokens: None,
        cache_write_tokens: None,
        duration_ms: None,
        num_turns: None,
        model: Some("m".into()),
        is_error: false,
    };
    let c = store.session_cost_insert(&cost, now).await.unwrap();
    assert_eq!(
        store
            .session_cost_list(&SessionCostFilter { agent_id: Some(w.id), limit: 5, ..Default::default() })
            .await
            .unwrap(),
        vec![c]
    );
    println!("{:?}", store.stats().await.unwrap());
    println!("{:?}", store.agent_work_counts(w.id).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn races() {
    let store = Arc::new(PgStore::connect(&fresh_db().await).await.unwrap());
    let now = Timestamp::now();
    let mut agents = Vec::new();
    for i in 0..6 {
        let Registered::Created(a) =
            store.agent_register(&agent(&format!("w{i}"), false, 2), now).await.unwrap()
        else {
            panic!()
        };
        agents.push(a.id);
    }
    let mut tasks = Vec::new();
    for i in 0..40 {
        let t = store
            .task_create(
                &NewTask::parse(TaskDraft { task: format!("t{i}"), ..Default::default() }, None).unwrap(),
                now,
            )
            .await
            .unwrap();
        tasks.push(t.id);
    }
    let mut handles = Vec::new();
    for (n, a) in agents.iter().copied().enumerate() {
        let store = store.clone();
        let mut order = tasks.clone();
        order.rotate_left(n * 7);
        handles.push(tokio::spawn(async move {
            let mut won = 0;
            for t in order {
                if let Applied::Changed { .. } = store
                    .task_apply(t, &TaskAction::Claim { agent: a }.change(), Some(a), Timestamp::now())
                    .await
                    .unwrap()
                {
                    won += 1;
                    store
                        .task_apply(t, &TaskAction::Start { agent: a }.change(), Some(a), Timestamp::now())
                        .await
                        .unwrap();
                    if won % 2 == 0 || true {
                        let fin = TaskAction::Finish {
                            assignee: Some(a),
                            outcome: FinishOutcome::Completed { output: None },
                        };
                        store.task_apply(t, &fin.change(), Some(a), Timestamp::now()).await.unwrap();
                    }
                }
                let _ = store.agent_heartbeat(a, Timestamp::now()).await.unwrap();
            }
            won
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await.unwrap();
    }
    assert_eq!(total, 40);
    for a in agents {
        let ag = store.agent_get(a).await.unwrap().unwrap();
        assert!(ag.capacity.current <= 2, "{ag:?}");
        println!("{} {:?} {:?}", ag.name, ag.status, ag.capacity);
    }
    // Concurrent lead registrations: exactly one wins.
    let mut handles = Vec::new();
    for i in 0..10 {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            store.agent_register(&agent(&format!("lead{i}"), true, 1), Timestamp::now()).await
        }));
    }
    let mut ok = 0;
    for h in handles {
        if h.await.unwrap().is_ok() {
            ok += 1;
        }
    }
    assert_eq!(ok, 1);
    // Concurrent appends to one session.
    let mut handles = Vec::new();
    for _ in 0..10 {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            let logs = NewSessionLogs::parse("s".into(), 1, None, None, vec!["a".into(); 5]).unwrap();
            store.session_logs_append(&logs, Timestamp::now()).await.unwrap()
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn capacity_race() {
    let store = Arc::new(PgStore::connect(&fresh_db().await).await.unwrap());
    for round in 0..5 {
        let Registered::Created(a) =
            store.agent_register(&agent(&format!("cap{round}"), false, 2), Timestamp::now()).await.unwrap()
        else {
            panic!()
        };
        let mut handles = Vec::new();
        for i in 0..12 {
            let t = store
                .task_create(
                    &NewTask::parse(
                        TaskDraft { task: format!("t{i}"), agent_id: Some(a.id), ..Default::default() },
                        None,
                    )
                    .unwrap(),
                    Timestamp::now(),
                )
                .await
                .unwrap();
            let store = store.clone();
            let id = a.id;
            handles.push(tokio::spawn(async move {
                let r = store
                    .task_apply(t.id, &TaskAction::Start { agent: id }.change(), Some(id), Timestamp::now())
                    .await
                    .unwrap();
                store.agent_heartbeat(id, Timestamp::now()).await.unwrap();
                matches!(r, Applied::Changed { .. })
            }));
        }
        let mut n = 0;
        for h in handles {
            if h.await.unwrap() {
                n += 1;
            }
        }
        assert_eq!(n, 2);
        let ag = store.agent_get(a.id).await.unwrap().unwrap();
        assert_eq!(ag.status, AgentStatus::Busy);
        assert_eq!(ag.capacity.current, 2);
    }
}
