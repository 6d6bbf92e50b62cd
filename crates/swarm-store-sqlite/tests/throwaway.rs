use swarm_domain::{
    agent::{NewAgent, ProfileUpdate},
    id::{AgentId, TaskId},
    session::{NewSessionCost, NewSessionLogs},
    task::{FinishOutcome, NewTask, TaskAction, TaskDraft, TaskStatus},
    time::Timestamp,
};
use swarm_store::{Applied, EventFilter, Registered, SessionCostFilter, Store, StoreError, TaskFilter};
use swarm_store_sqlite::SqliteStore;

#[tokio::test]
async fn everything() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("x.db")).await.unwrap();
    let now = Timestamp::now();
    let lead = NewAgent::parse(AgentId::new_v7(), "lead", true, None, None, Some(vec!["a".into()]), None).unwrap();
    let lead2 = NewAgent::parse(AgentId::new_v7(), "lead2", true, None, None, None, None).unwrap();
    let w = NewAgent::parse(AgentId::new_v7(), "w", false, Some("d".into()), None, None, Some(1)).unwrap();
    assert!(matches!(store.agent_register(&lead, now).await.unwrap(), Registered::Created(_)));
    let e = store.agent_register(&lead2, now).await.unwrap_err();
    println!("{e}");
    store.agent_register(&w, now).await.unwrap();
    assert!(matches!(store.agent_register(&lead, now).await.unwrap(), Registered::Existing(_)));
    println!("{}", store.agent_rename(w.id, "lead", now).await.unwrap_err());
    let a = store.agent_update_profile(w.id, &ProfileUpdate::parse(None, Some("r".into()), Some(vec!["x".into(), "y".into()])).unwrap(), now).await.unwrap().unwrap();
    println!("{a:?}");
    assert_eq!(a.description.as_deref(), Some("d"));
    println!("{:?}", store.agent_list().await.unwrap().iter().map(|a| &a.name).collect::<Vec<_>>());

    let dep = store.task_create(&NewTask::parse(TaskDraft { task: "dep".into(), tags: vec!["b".into(), "a".into()], ..Default::default() }, Some(lead.id)).unwrap(), now).await.unwrap();
    println!("{dep:?}");
    let t = store.task_create(&NewTask::parse(TaskDraft { task: "Main 100% _x".into(), depends_on: vec![dep.id], tags: vec!["a".into()], ..Default::default() }, Some(lead.id)).unwrap(), now).await.unwrap();
    assert_eq!(t.depends_on, vec![dep.id]);
    let bad = NewTask::parse(TaskDraft { task: "x".into(), depends_on: vec![TaskId::new_v7()], ..Default::default() }, None).unwrap();
    println!("{}", store.task_create(&bad, now).await.unwrap_err());
    let bad = NewTask::parse(TaskDraft { task: "x".into(), offered_to: Some(AgentId::new_v7()), ..Default::default() }, None).unwrap();
    println!("{}", store.task_create(&bad, now).await.unwrap_err());
    let off = store.task_create(&NewTask::parse(TaskDraft { task: "offer".into(), offered_to: Some(w.id), ..Default::default() }, Some(lead.id)).unwrap(), now).await.unwrap();
    assert!(off.offered_at.is_some());

    let claim = TaskAction::Claim { agent: w.id }.change();
    assert!(matches!(store.task_apply(t.id, &claim, Some(w.id), now).await.unwrap(), Applied::Refused { .. }));
    println!("unfinished {:?}", store.task_unfinished_dependencies(t.id).await.unwrap());
    assert!(matches!(store.task_apply(TaskId::new_v7(), &claim, Some(w.id), now).await.unwrap(), Applied::NotFound));
    // finish dep: claim, start, finish
    for action in [TaskAction::Claim { agent: w.id }, TaskAction::Start { agent: w.id }] {
        let r = store.task_apply(dep.id, &action.change(), Some(w.id), now).await.unwrap();
        assert!(matches!(r, Applied::Changed { .. }), "{r:?}");
    }
    assert_eq!(store.agent_get(w.id).await.unwrap().unwrap().status.as_str(), "busy");
    assert_eq!(store.agent_get(w.id).await.unwrap().unwrap().capacity.current, 1);
    // capacity: claim t then start should fail on capacity (deps not done too)
    println!("{:?}", store.task_set_progress(dep.id, "half", Some(lead.id), Some(lead.id), now).await.unwrap());
    assert!(matches!(store.task_set_progress(dep.id, "half", Some(w.id), Some(w.id), now).await.unwrap(), Applied::Changed { .. }));
    let fin = TaskAction::Finish { assignee: Some(w.id), outcome: FinishOutcome::Completed { output: Some("ok".into()) } }.change();
    let Applied::Changed { after, .. } = store.task_apply(dep.id, &fin, Some(w.id), now).await.unwrap() else { panic!() };
    assert_eq!(after.output.as_deref(), Some("ok"));
    assert!(after.finished_at.is_some());
    assert!(matches!(store.task_set_progress(dep.id, "again", None, None, now).await.unwrap(), Applied::Refused { .. }));
    assert_eq!(store.agent_get(w.id).await.unwrap().unwrap().status.as_str(), "idle");
    assert!(matches!(store.task_apply(t.id, &claim, Some(w.id), now).await.unwrap(), Applied::Changed { .. }));
    let acc = TaskAction::Accept { agent: w.id }.change();
    let Applied::Changed { after, .. } = store.task_apply(off.id, &acc, Some(w.id), now).await.unwrap() else { panic!() };
    assert_eq!(after.agent_id, Some(w.id));
    assert!(after.accepted_at.is_some());
    let cancel = TaskAction::Cancel { reason: Some("nope".into()) }.change();
    let Applied::Changed { after, .. } = store.task_apply(off.id, &cancel, Some(lead.id), now).await.unwrap() else { panic!() };
    assert_eq!(after.status, TaskStatus::Cancelled);

    let (list, total) = store.task_list(&TaskFilter { limit: 10, ..Default::default() }).await.unwrap();
    println!("total {total} {:?}", list.iter().map(|t| (&t.task, t.status, &t.tags)).collect::<Vec<_>>());
    let (list, total) = store.task_list(&TaskFilter { limit: 10, tags: vec!["a".into(), "b".into()], ..Default::default() }).await.unwrap();
    assert_eq!((list.len(), total), (1, 1));
    let (list, total) = store.task_list(&TaskFilter { limit: 10, search: Some("100% _X".into()), ..Default::default() }).await.unwrap();
    assert_eq!((list.len(), total), (1, 1));
    let (list, total) = store.task_list(&TaskFilter { limit: 1, offset: 1, statuses: vec![TaskStatus::Pending, TaskStatus::Completed, TaskStatus::Cancelled], ..Default::default() }).await.unwrap();
    assert_eq!((list.len(), total), (1, 3));
    let (_, total) = store.task_list(&TaskFilter { limit: 1, finished_since: Some(now), ..Default::default() }).await.unwrap();
    assert_eq!(total, 2);
    println!("{:?}", store.agent_work_counts(w.id).await.unwrap());
    println!("{:?}", store.tasks_existing(&[t.id, TaskId::new_v7(), dep.id]).await.unwrap());
    println!("{:?}", store.agents_existing(&[w.id, AgentId::new_v7()]).await.unwrap());
    for e in store.event_list(&EventFilter { limit: 100, ..Default::default() }).await.unwrap() {
        println!("{:?} {:?} {:?} {:?} -> {:?} {:?}", e.event_type, e.agent_id.map(|a| a.to_string()[..8].to_string()), e.task_id.map(|a| a.to_string()[..8].to_string()), e.old_value, e.new_value, e.metadata);
    }
    let logs = NewSessionLogs::parse("s".into(), 0, Some(t.id), None, (0..1200).map(|n| format!("l{n}")).collect()).unwrap();
    assert_eq!(store.session_logs_append(&logs, now).await.unwrap(), 1200);
    let logs = NewSessionLogs::parse("s".into(), 0, Some(t.id), None, vec!["more".into()]).unwrap();
    store.session_logs_append(&logs, now).await.unwrap();
    let got = store.session_logs_for_task(t.id).await.unwrap();
    assert_eq!(got.len(), 1201);
    assert_eq!(got.last().unwrap().line_number, 1200);
    assert_eq!(got[700].content, "l700");
    let cost = NewSessionCost { session_id: "s".into(), agent_id: w.id, task_id: None, total_cost_usd: 1.5, input_tokens: Some(3), output_tokens: None, cache_read_tokens: None, cache_write_tokens: None, duration_ms: None, num_turns: None, model: Some("m".into()), is_error: true };
    let c = store.session_cost_insert(&cost, now).await.unwrap();
    assert_eq!(store.session_cost_list(&SessionCostFilter { agent_id: Some(w.id), limit: 5, ..Default::default() }).await.unwrap(), vec![c]);
    println!("{:?}", store.stats().await.unwrap());
    let closed = store.agent_close(w.id, now).await.unwrap().unwrap();
    assert_eq!(closed.status.as_str(), "offline");
    store.agent_close(w.id, now).await.unwrap();
    let back = store.agent_heartbeat(w.id, now).await.unwrap().unwrap();
    assert_eq!(back.status.as_str(), "idle");
    assert!(store.agent_heartbeat(AgentId::new_v7(), now).await.unwrap().is_none());
    let _ = StoreError::Conflict(String::new());
}
