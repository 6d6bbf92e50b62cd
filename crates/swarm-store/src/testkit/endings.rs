//! Cancel, the backlog, progress notes, and the rule that finished tasks are final.

use std::sync::Arc;

use crate::{Applied, Store};
use swarm_domain::{
    agent::AgentStatus,
    event::EventType,
    id::{AgentId, TaskId},
    task::{FinishOutcome, Task, TaskAction, TaskDraft, TaskStatus},
};

use super::{Fixture, cancel, complete, draft, fail, of_type, pair, status_changes};

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_endings {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            endings,
            [
                cancel_from_every_open_status,
                cancel_refused_once_finished,
                backlog_round_trip,
                progress_recorded_while_open,
                progress_is_guarded_by_the_assignee,
                progress_never_revives_a_finished_task,
                nothing_leaves_a_finished_status,
                unknown_task_is_not_found,
            ],
            multi_thread: []
        );
    };
}

/// One task in each status that cancel accepts (all but `reviewing`, which no action
/// reaches yet), with the agent that holds it.
async fn open_tasks(fx: &Fixture, agent: AgentId) -> Vec<Task> {
    let backlog = fx.create(TaskDraft { backlog: true, ..draft("backlog") }, None).await;
    let unassigned = fx.pool_task("unassigned").await;
    let offered = fx.offered_task("offered", agent).await;
    let pending = fx.assigned_task("pending", agent).await;
    let in_progress = fx.started_task("in progress", agent).await;
    let paused = fx.started_task("paused", agent).await;
    let paused = fx.must_change(paused.id, TaskAction::Pause { agent }).await;
    vec![backlog, unassigned, offered, pending, in_progress, paused]
}

pub async fn cancel_from_every_open_status(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.register("worker-1", false, 5).await.id;
    let tasks = open_tasks(&fx, agent).await;
    assert_eq!(fx.agent(agent).await.status, AgentStatus::Busy);

    for task in tasks {
        let from = task.status;
        let cancelled_at = fx.now();
        let action =
            TaskAction::Cancel { reason: Some(format!("withdrawn from {from}")), unstarted_only: false };
        let res = fx.store.task_apply(task.id, &action.change(), None, cancelled_at).await.unwrap();
        let Applied::Changed { before, after } = res else {
            panic!("cancel from {from}: expected Changed, got {res:?}")
        };
        assert_eq!(before.status, from);
        assert_eq!(after.status, TaskStatus::Cancelled, "from {from}");
        assert_eq!(after.finished_at, Some(cancelled_at), "from {from}");
        assert_eq!(after.failure_reason, Some(format!("withdrawn from {from}")));
        assert_eq!(fx.task(task.id).await, after);
        let changes = status_changes(&fx.task_events(task.id).await);
        assert_eq!(changes.last(), Some(&pair(from.as_str(), "cancelled")), "from {from}");
    }
    // Its only in-progress task was cancelled.
    let worker = fx.agent(agent).await;
    assert_eq!(worker.status, AgentStatus::Idle);
    assert_eq!(worker.capacity.current, 0);
}

pub async fn cancel_refused_once_finished(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let completed = fx.completed_task("completed", agent).await;
    let failed = fx.started_task("failed", agent).await;
    fx.must_change(failed.id, fail(agent)).await;
    let cancelled = fx.pool_task("cancelled").await;
    let cancelled = fx.must_change(cancelled.id, cancel()).await;

    for task in [completed, failed, cancelled.clone()] {
        fx.must_refuse(task.id, cancel()).await;
    }
    assert_eq!(fx.task(cancelled.id).await.failure_reason.as_deref(), Some("not needed"));
}

pub async fn backlog_round_trip(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let task = fx.pool_task("someday").await;

    fx.must_refuse(task.id, TaskAction::FromBacklog).await;
    let parked = fx.must_change(task.id, TaskAction::ToBacklog).await;
    assert_eq!(parked.status, TaskStatus::Backlog);
    fx.must_refuse(task.id, TaskAction::ToBacklog).await;
    // Backlog work is not pool work.
    fx.must_refuse(task.id, TaskAction::Claim { agent }).await;

    let back = fx.must_change(task.id, TaskAction::FromBacklog).await;
    assert_eq!(back.status, TaskStatus::Unassigned);
    assert_eq!(
        status_changes(&fx.task_events(task.id).await),
        [pair("unassigned", "backlog"), pair("backlog", "unassigned")]
    );

    // Only pool work goes to the backlog.
    let pending = fx.assigned_task("assigned", agent).await;
    fx.must_refuse(pending.id, TaskAction::ToBacklog).await;
    let offered = fx.offered_task("offered", agent).await;
    fx.must_refuse(offered.id, TaskAction::ToBacklog).await;
}

pub async fn progress_recorded_while_open(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let task = fx.started_task("work", agent).await;

    let noted_at = fx.now();
    let res = fx
        .store
        .task_set_progress(task.id, "halfway there", Some(agent), Some(agent), noted_at)
        .await
        .unwrap();
    let Applied::Changed { before, after } = res else { panic!("progress refused: {res:?}") };
    assert_eq!(before.progress, None);
    assert_eq!(after.progress.as_deref(), Some("halfway there"));
    assert_eq!(after.status, TaskStatus::InProgress);
    assert_eq!(after.last_updated_at, noted_at);
    assert_eq!(fx.task(task.id).await, after);
    let events = fx.task_events(task.id).await;
    let notes = of_type(&events, EventType::TaskProgress);
    assert_eq!(notes.len(), 1, "{events:?}");
    assert_eq!(notes[0].agent_id, Some(agent));

    // The next note replaces the last one.
    let res = fx.store.task_set_progress(task.id, "almost", Some(agent), Some(agent), fx.now());
    let Applied::Changed { after, .. } = res.await.unwrap() else { panic!("progress refused") };
    assert_eq!(after.progress.as_deref(), Some("almost"));

    // Without an assignee guard, any open task takes a note, whatever its status.
    let pool = fx.pool_task("pool").await;
    let res = fx.store.task_set_progress(pool.id, "looked at it", None, None, fx.now());
    let Applied::Changed { after, .. } = res.await.unwrap() else { panic!("progress refused") };
    assert_eq!(after.status, TaskStatus::Unassigned);
    assert_eq!(after.progress.as_deref(), Some("looked at it"));
}

pub async fn progress_is_guarded_by_the_assignee(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let other = fx.worker("worker-2").await;
    let task = fx.started_task("work", agent).await;
    let pool = fx.pool_task("nobody's yet").await;

    for id in [task.id, pool.id] {
        let before = fx.task(id).await;
        let res = fx.store.task_set_progress(id, "not mine", Some(other), Some(other), fx.now());
        assert_eq!(res.await.unwrap(), Applied::Refused { current: before.clone() });
        assert_eq!(fx.task(id).await, before);
        assert!(of_type(&fx.task_events(id).await, EventType::TaskProgress).is_empty());
    }
}

pub async fn progress_never_revives_a_finished_task(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let completed = fx.started_task("completed", agent).await;
    fx.store.task_set_progress(completed.id, "working", Some(agent), Some(agent), fx.now()).await.unwrap();
    let completed = fx.must_change(completed.id, complete(agent)).await;
    let failed = fx.started_task("failed", agent).await;
    let failed = fx.must_change(failed.id, fail(agent)).await;
    let cancelled = fx.pool_task("cancelled").await;
    let cancelled = fx.must_change(cancelled.id, cancel()).await;

    for task in [completed, failed, cancelled] {
        let n_notes = of_type(&fx.task_events(task.id).await, EventType::TaskProgress).len();
        for assignee in [Some(agent), None] {
            let res = fx.store.task_set_progress(task.id, "one more thing", assignee, Some(agent), fx.now());
            assert_eq!(
                res.await.unwrap(),
                Applied::Refused { current: task.clone() },
                "progress on a {} task",
                task.status
            );
            let now = fx.task(task.id).await;
            assert_eq!(now, task, "a refused note changes nothing");
            assert!(now.status.is_finished());
        }
        let events = fx.task_events(task.id).await;
        assert_eq!(
            of_type(&events, EventType::TaskProgress).len(),
            n_notes,
            "no note logged after the finish: {events:?}"
        );
    }
    assert_eq!(fx.agent(agent).await.status, AgentStatus::Idle);
}

pub async fn nothing_leaves_a_finished_status(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.register("worker-1", false, 5).await.id;
    let completed = fx.completed_task("completed", agent).await;
    let failed = fx.started_task("failed", agent).await;
    let failed = fx.must_change(failed.id, fail(agent)).await;
    let offered = fx.offered_task("cancelled", agent).await;
    let cancelled = fx.must_change(offered.id, cancel()).await;

    for task in [completed, failed, cancelled] {
        let actions = [
            TaskAction::Claim { agent },
            TaskAction::Release { agent },
            TaskAction::Accept { agent },
            TaskAction::Reject { agent, reason: None },
            TaskAction::Start { agent },
            TaskAction::Pause { agent },
            TaskAction::Resume { agent },
            complete(agent),
            TaskAction::Finish { assignee: None, outcome: FinishOutcome::Failed { failure_reason: None } },
            cancel(),
            TaskAction::ToBacklog,
            TaskAction::FromBacklog,
        ];
        for action in actions {
            let current = fx.must_refuse(task.id, action).await;
            assert_eq!(current, task);
        }
    }
}

pub async fn unknown_task_is_not_found(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    fx.pool_task("a real task").await;
    let ghost = TaskId::new_v7();
    let actions = [
        TaskAction::Claim { agent },
        TaskAction::Release { agent },
        TaskAction::Accept { agent },
        TaskAction::Reject { agent, reason: None },
        TaskAction::Start { agent },
        TaskAction::Pause { agent },
        TaskAction::Resume { agent },
        complete(agent),
        cancel(),
        TaskAction::ToBacklog,
        TaskAction::FromBacklog,
    ];
    for action in actions {
        let name = action.name();
        assert_eq!(fx.apply(ghost, action).await, Applied::NotFound, "{name}");
    }
    let res = fx.store.task_set_progress(ghost, "note", None, None, fx.now()).await.unwrap();
    assert_eq!(res, Applied::NotFound);
    assert!(fx.task_events(ghost).await.is_empty());
}
