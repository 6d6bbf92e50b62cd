//! Doing work: start, pause, resume, finish, and the agent status that follows.

use std::sync::Arc;

use crate::{Applied, Store};
use swarm_domain::{
    agent::AgentStatus,
    event::EventType,
    task::{FinishOutcome, TaskAction, TaskDraft, TaskStatus},
};

use super::{Fixture, complete, draft, fail, of_type, pair, status_changes};

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_work {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            work,
            [
                start_makes_the_agent_busy,
                start_needs_a_pending_task_of_mine,
                start_needs_capacity,
                start_waits_for_dependencies,
                pause_and_resume,
                resume_needs_capacity,
                finish_completed_keeps_the_output,
                finish_failed_keeps_the_reason,
                finishing_twice_changes_nothing,
                finish_is_guarded_by_the_assignee,
                agent_stays_busy_while_it_holds_work,
                offline_agent_stays_offline,
            ],
            multi_thread: []
        );
    };
}

pub async fn start_makes_the_agent_busy(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let task = fx.assigned_task("assigned", agent).await;

    let started_at = fx.now();
    let res = fx.apply_at(task.id, TaskAction::Start { agent }, started_at).await;
    let Applied::Changed { before, after } = res else { panic!("start: {res:?}") };
    assert_eq!(before.status, TaskStatus::Pending);
    assert_eq!(after.status, TaskStatus::InProgress);
    assert_eq!(after.agent_id, Some(agent));
    assert_eq!(after.last_updated_at, started_at);
    assert_eq!(fx.task(task.id).await, after);
    assert_eq!(status_changes(&fx.task_events(task.id).await), [pair("pending", "in_progress")]);

    let worker = fx.agent(agent).await;
    assert_eq!(worker.status, AgentStatus::Busy);
    assert_eq!(worker.capacity.current, 1);
    let events = fx.agent_events(agent).await;
    let changes = of_type(&events, EventType::AgentStatusChange);
    assert_eq!(changes.len(), 1, "idle -> busy logged once: {events:?}");
    assert_eq!(changes[0].old_value.as_deref(), Some("idle"));
    assert_eq!(changes[0].new_value.as_deref(), Some("busy"));
}

pub async fn start_needs_a_pending_task_of_mine(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.register("worker-1", false, 5).await.id;
    let other = fx.register("worker-2", false, 5).await.id;

    let theirs = fx.assigned_task("theirs", other).await;
    fx.must_refuse(theirs.id, TaskAction::Start { agent }).await;

    let pool = fx.pool_task("pool").await;
    fx.must_refuse(pool.id, TaskAction::Start { agent }).await;
    let offered = fx.offered_task("offered", agent).await;
    fx.must_refuse(offered.id, TaskAction::Start { agent }).await;
    let started = fx.started_task("started", agent).await;
    fx.must_refuse(started.id, TaskAction::Start { agent }).await;
    let done = fx.completed_task("done", agent).await;
    fx.must_refuse(done.id, TaskAction::Start { agent }).await;
    assert_eq!(fx.agent(other).await.status, AgentStatus::Idle);
}

pub async fn start_needs_capacity(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await; // maxTasks 1
    let first = fx.assigned_task("first", agent).await;
    let second = fx.assigned_task("second", agent).await;

    fx.must_change(first.id, TaskAction::Start { agent }).await;
    fx.must_refuse(second.id, TaskAction::Start { agent }).await;
    assert_eq!(fx.agent(agent).await.capacity.current, 1);

    fx.must_change(first.id, complete(agent)).await;
    fx.must_change(second.id, TaskAction::Start { agent }).await;
}

pub async fn start_waits_for_dependencies(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.register("worker-1", false, 5).await.id;
    let dependency = fx.assigned_task("first", agent).await;
    let dependent = fx
        .create(TaskDraft { agent_id: Some(agent), depends_on: vec![dependency.id], ..draft("then") }, None)
        .await;
    assert_eq!(dependent.status, TaskStatus::Pending);

    fx.must_refuse(dependent.id, TaskAction::Start { agent }).await;
    fx.must_change(dependency.id, TaskAction::Start { agent }).await;
    fx.must_refuse(dependent.id, TaskAction::Start { agent }).await;
    fx.must_change(dependency.id, complete(agent)).await;
    fx.must_change(dependent.id, TaskAction::Start { agent }).await;
}

pub async fn pause_and_resume(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let other = fx.worker("worker-2").await;
    let task = fx.started_task("long work", agent).await;

    fx.must_refuse(task.id, TaskAction::Pause { agent: other }).await;
    fx.must_refuse(task.id, TaskAction::Resume { agent }).await;

    let paused = fx.must_change(task.id, TaskAction::Pause { agent }).await;
    assert_eq!(paused.status, TaskStatus::Paused);
    assert_eq!(paused.agent_id, Some(agent));
    let worker = fx.agent(agent).await;
    assert_eq!(worker.status, AgentStatus::Idle, "a paused task does not keep its agent busy");
    assert_eq!(worker.capacity.current, 0);

    fx.must_refuse(task.id, TaskAction::Pause { agent }).await;
    fx.must_refuse(task.id, TaskAction::Resume { agent: other }).await;
    fx.must_refuse(task.id, fail(agent)).await;

    let resumed = fx.must_change(task.id, TaskAction::Resume { agent }).await;
    assert_eq!(resumed.status, TaskStatus::InProgress);
    assert_eq!(fx.agent(agent).await.status, AgentStatus::Busy);
    assert_eq!(
        status_changes(&fx.task_events(task.id).await),
        [pair("pending", "in_progress"), pair("in_progress", "paused"), pair("paused", "in_progress")]
    );
    let events = fx.agent_events(agent).await;
    let news: Vec<Option<&str>> = of_type(&events, EventType::AgentStatusChange)
        .iter()
        .rev()
        .map(|event| event.new_value.as_deref())
        .collect();
    assert_eq!(news, [Some("busy"), Some("idle"), Some("busy")], "{events:?}");

    // Pausing is for in-progress work only.
    let pending = fx.assigned_task("not started", other).await;
    fx.must_refuse(pending.id, TaskAction::Pause { agent: other }).await;
}

pub async fn resume_needs_capacity(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await; // maxTasks 1
    let paused = fx.started_task("paused", agent).await;
    fx.must_change(paused.id, TaskAction::Pause { agent }).await;
    let current = fx.started_task("now working on this", agent).await;

    fx.must_refuse(paused.id, TaskAction::Resume { agent }).await;
    fx.must_change(current.id, complete(agent)).await;
    fx.must_change(paused.id, TaskAction::Resume { agent }).await;
}

pub async fn finish_completed_keeps_the_output(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let task = fx.started_task("work", agent).await;

    let finished_at = fx.now();
    let action = TaskAction::Finish {
        assignee: Some(agent),
        outcome: FinishOutcome::Completed { output: Some("all green".into()) },
    };
    let res = fx.store.task_apply(task.id, &action.change(), Some(agent), finished_at).await;
    let Applied::Changed { after, .. } = res.unwrap() else { panic!("finish refused") };
    assert_eq!(after.status, TaskStatus::Completed);
    assert_eq!(after.output.as_deref(), Some("all green"));
    assert_eq!(after.failure_reason, None);
    assert_eq!(after.finished_at, Some(finished_at));
    assert_eq!(after.last_updated_at, finished_at);
    assert_eq!(after.agent_id, Some(agent));
    assert_eq!(fx.task(task.id).await, after);
    assert_eq!(
        status_changes(&fx.task_events(task.id).await),
        [pair("pending", "in_progress"), pair("in_progress", "completed")]
    );

    let worker = fx.agent(agent).await;
    assert_eq!(worker.status, AgentStatus::Idle);
    assert_eq!(worker.capacity.current, 0);
    let events = fx.agent_events(agent).await;
    let changes = of_type(&events, EventType::AgentStatusChange);
    assert_eq!(changes[0].new_value.as_deref(), Some("idle"), "busy -> idle logged: {events:?}");
}

pub async fn finish_failed_keeps_the_reason(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let task = fx.started_task("work", agent).await;

    let after = fx.must_change(task.id, fail(agent)).await;
    assert_eq!(after.status, TaskStatus::Failed);
    assert_eq!(after.failure_reason.as_deref(), Some("broken"));
    assert_eq!(after.output, None);
    assert!(after.finished_at.is_some());
    assert_eq!(fx.agent(agent).await.status, AgentStatus::Idle);
    assert_eq!(
        status_changes(&fx.task_events(task.id).await),
        [pair("pending", "in_progress"), pair("in_progress", "failed")]
    );
}

pub async fn finishing_twice_changes_nothing(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let task = fx.started_task("work", agent).await;
    let finished = fx.must_change(task.id, complete(agent)).await;

    // Same outcome again, the other outcome, and the lead (no assignee guard).
    let current = fx.must_refuse(task.id, complete(agent)).await;
    assert_eq!(current, finished);
    fx.must_refuse(task.id, fail(agent)).await;
    let lead_finish = TaskAction::Finish {
        assignee: None,
        outcome: FinishOutcome::Failed { failure_reason: Some("too late".into()) },
    };
    let current = fx.must_refuse(task.id, lead_finish).await;
    assert_eq!(current, finished, "the finished task is returned unchanged");
}

pub async fn finish_is_guarded_by_the_assignee(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let other = fx.worker("worker-2").await;
    let task = fx.started_task("work", agent).await;

    fx.must_refuse(task.id, complete(other)).await;
    fx.must_refuse(task.id, fail(other)).await;

    // Without an assignee guard (the lead, an operator), any task may be finished.
    let lead_finish = TaskAction::Finish {
        assignee: None,
        outcome: FinishOutcome::Completed { output: Some("closed by the lead".into()) },
    };
    let after = fx.must_change(task.id, lead_finish).await;
    assert_eq!(after.status, TaskStatus::Completed);
    assert_eq!(after.agent_id, Some(agent));
    assert_eq!(fx.agent(agent).await.status, AgentStatus::Idle);

    // Only in-progress work is finished.
    let pending = fx.assigned_task("not started", agent).await;
    fx.must_refuse(pending.id, complete(agent)).await;
    let pool = fx.pool_task("pool").await;
    let lead_finish =
        TaskAction::Finish { assignee: None, outcome: FinishOutcome::Completed { output: None } };
    fx.must_refuse(pool.id, lead_finish).await;
}

pub async fn agent_stays_busy_while_it_holds_work(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.register("worker-1", false, 2).await.id;
    let first = fx.started_task("first", agent).await;
    let second = fx.started_task("second", agent).await;
    assert_eq!(fx.agent(agent).await.status, AgentStatus::Busy);

    fx.must_change(first.id, complete(agent)).await;
    let worker = fx.agent(agent).await;
    assert_eq!(worker.status, AgentStatus::Busy, "still holds the second task");
    assert_eq!(worker.capacity.current, 1);

    fx.must_change(second.id, TaskAction::Pause { agent }).await;
    assert_eq!(fx.agent(agent).await.status, AgentStatus::Idle);
}

pub async fn offline_agent_stays_offline(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.register("worker-1", false, 2).await.id;
    let task = fx.started_task("work", agent).await;
    let pending = fx.assigned_task("next", agent).await;
    fx.store.agent_close(agent, fx.now()).await.unwrap().unwrap();
    let n_changes = of_type(&fx.agent_events(agent).await, EventType::AgentStatusChange).len();

    fx.must_change(task.id, complete(agent)).await;
    fx.must_change(pending.id, TaskAction::Start { agent }).await;
    let worker = fx.agent(agent).await;
    assert_eq!(worker.status, AgentStatus::Offline, "work never brings an agent back");
    assert_eq!(worker.capacity.current, 1);
    let events = fx.agent_events(agent).await;
    assert_eq!(of_type(&events, EventType::AgentStatusChange).len(), n_changes, "{events:?}");
}
