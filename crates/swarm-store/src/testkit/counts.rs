//! The counts of tasks by status that each driver keeps for listings' totals and the
//! stats (so that neither walks every task): a history to count, and the check against
//! counting the rows. Not an area of the suite: each driver's own tests count the rows in
//! its SQL, and add a row written by another connection, which only they can.

use swarm_domain::{
    agent::NewAgent,
    id::AgentId,
    retention::Expiring,
    task::{FinishOutcome, NewTask, TaskAction, TaskDraft, TaskStatus},
    time::Timestamp,
};

use crate::{Applied, Store, TaskFilter};

/// Eight tasks, then a start and a finish, a claim, a start, three cancels, and
/// retention removing the three cancelled ones: five tasks left.
pub async fn counted_history(store: &dyn Store, now: Timestamp) {
    let agent = NewAgent::parse(AgentId::new_v7(), "counted", false, None, None, None, Some(5)).unwrap();
    store.agent_register(&agent, now).await.unwrap();
    let mut tasks = Vec::new();
    for n in 0..8 {
        let agent_id = (n % 2 == 0).then_some(agent.id);
        let draft = TaskDraft { task: format!("task {n}"), agent_id, ..TaskDraft::default() };
        tasks.push(store.task_create(&NewTask::parse(draft, None).unwrap(), now).await.unwrap().id);
    }
    let apply = |id, action: TaskAction| async move {
        let applied = store.task_apply(id, &action.change(), Some(agent.id), now).await.unwrap();
        assert!(matches!(applied, Applied::Changed { .. }), "{applied:?}");
    };
    apply(tasks[0], TaskAction::Start { agent: agent.id }).await;
    let finish =
        TaskAction::Finish { assignee: Some(agent.id), outcome: FinishOutcome::Completed { output: None } };
    apply(tasks[0], finish).await;
    apply(tasks[1], TaskAction::Claim { agent: agent.id }).await;
    apply(tasks[2], TaskAction::Start { agent: agent.id }).await;
    let cancel = TaskAction::Cancel { reason: None, unstarted_only: false };
    for id in [tasks[3], tasks[4], tasks[5]] {
        apply(id, cancel.clone()).await;
    }
    // Cancelled tasks need no telling: retention removes them (here all three).
    let removed = store.retention_remove(Expiring::FinishedTasks, now.plus_millis(1), 500).await.unwrap();
    assert_eq!(removed, 3);
}

/// The stats and listings' totals are `counted`, the rows counted by status in SQL.
pub async fn assert_counts_are(store: &dyn Store, counted: &[(String, i64)], when: &str) {
    let count =
        |status: TaskStatus| counted.iter().find(|(name, _)| name == status.as_str()).map_or(0, |(_, n)| *n);
    let total: i64 = counted.iter().map(|(_, n)| n).sum();
    let stats = store.stats().await.unwrap().tasks;
    assert_eq!(
        [stats.total, stats.completed, stats.in_progress, stats.pending, stats.unassigned, stats.backlog],
        [
            total,
            count(TaskStatus::Completed),
            count(TaskStatus::InProgress),
            count(TaskStatus::Pending),
            count(TaskStatus::Unassigned),
            count(TaskStatus::Backlog),
        ],
        "{when}: {stats:?} against {counted:?}"
    );
    assert_eq!(stats.cancelled, count(TaskStatus::Cancelled), "{when}");
    let listed = |statuses: Vec<TaskStatus>| async move {
        let filter = TaskFilter { statuses, limit: 2, ..TaskFilter::default() };
        store.task_list(&filter).await.unwrap().1
    };
    assert_eq!(listed(Vec::new()).await, total, "{when}");
    let working = vec![TaskStatus::InProgress, TaskStatus::Unassigned];
    assert_eq!(
        listed(working).await,
        count(TaskStatus::InProgress) + count(TaskStatus::Unassigned),
        "{when}"
    );
}
