//! The demo's script: the tasks it sends, by which route, and how each must end; and the
//! verdict on what the crew did with them.

use swarm_domain::{
    id::{AgentId, TaskId},
    task::{Task, TaskDraft, TaskStatus},
};

/// How a task reached the agent that did it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    /// Offered to a worker, who reviews it, accepts, then works on it.
    Offer,
    /// Assigned to the lead, who hands it to a worker with `send-task`.
    Lead,
    /// Sent by the lead with `send-task`.
    Delegated,
    /// Put in the pool: whichever worker is free claims it.
    Pool,
}

impl Route {
    pub fn as_str(&self) -> &'static str {
        match self {
            Route::Offer => "offer",
            Route::Lead => "lead",
            Route::Delegated => "delegated",
            Route::Pool => "pool",
        }
    }
}

/// One task the demo sends.
#[derive(Debug, Clone, Copy)]
pub(super) struct Step {
    pub route: Route,
    pub text: &'static str,
    pub expected: TaskStatus,
    /// Sent only once the lead has delegated its task: pool work sent earlier would keep
    /// both workers busy, and the lead would have to delegate to the pool.
    pub after_delegation: bool,
}

/// Worker stand-ins fail tasks that mention this (`stand-in-agent --fail-when`).
pub(super) const FAIL_MARKER: &str = "Friday";
/// The worker the offer goes to.
pub(super) const OFFERED_TO: &str = "worker-1";
pub(super) const LEAD: &str = "lead";

/// In the order they are sent. The lead's task comes back as a delegated one.
pub(super) const STEPS: [Step; 4] = [
    Step {
        route: Route::Offer,
        text: "Write the README",
        expected: TaskStatus::Completed,
        after_delegation: false,
    },
    Step {
        route: Route::Lead,
        text: "Write the release notes",
        expected: TaskStatus::Completed,
        after_delegation: false,
    },
    Step {
        route: Route::Pool,
        text: "Fix the flaky login test",
        expected: TaskStatus::Completed,
        after_delegation: true,
    },
    Step {
        route: Route::Pool,
        text: "Deploy to production on a Friday evening",
        expected: TaskStatus::Failed,
        after_delegation: true,
    },
];

/// The new task for a step.
pub(super) fn draft(step: &Step, cast: &Cast) -> TaskDraft {
    let base = TaskDraft { task: step.text.to_string(), ..TaskDraft::default() };
    match step.route {
        Route::Offer => TaskDraft { offered_to: Some(cast.offered_to), ..base },
        Route::Lead => TaskDraft { agent_id: Some(cast.lead), ..base },
        // The demo sends no delegated task itself: the lead does.
        Route::Pool | Route::Delegated => base,
    }
}

/// A task of the demo, and how it must end.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tracked {
    pub route: Route,
    pub task_id: TaskId,
    pub expected: TaskStatus,
}

/// What the verdict needs to know about the crew.
pub(super) struct Cast {
    pub lead: AgentId,
    pub offered_to: AgentId,
    pub workers: Vec<AgentId>,
}

/// Every task of the demo (those it sent, then those the lead delegated), with the
/// route each took; `None` for tasks that belong to neither.
pub(super) fn route_of(task: &Task, sent: &[Tracked], cast: &Cast) -> Option<Route> {
    if let Some(tracked) = sent.iter().find(|tracked| tracked.task_id == task.id) {
        return Some(tracked.route);
    }
    (task.creator_agent_id == Some(cast.lead)).then_some(Route::Delegated)
}

/// Whether the lead has sent any task.
pub(super) fn has_delegated(sent: &[Tracked], tasks: &[Task], cast: &Cast) -> bool {
    tasks.iter().any(|task| route_of(task, sent, cast) == Some(Route::Delegated))
}

/// Whether there is nothing left to wait for: every task sent has finished, the lead
/// has delegated and that work has finished, and the lead has been told of every
/// finished worker task. Says nothing of whether it all went as expected.
pub(super) fn settled(sent: &[Tracked], tasks: &[Task], cast: &Cast) -> bool {
    let finished = |id: TaskId| tasks.iter().any(|task| task.id == id && task.status.is_finished());
    let delegated: Vec<&Task> =
        tasks.iter().filter(|task| route_of(task, sent, cast) == Some(Route::Delegated)).collect();
    sent.len() == STEPS.len()
        && sent.iter().all(|tracked| finished(tracked.task_id))
        && !delegated.is_empty()
        && delegated.iter().all(|task| task.status.is_finished())
        && unnotified(tasks, cast).next().is_none()
}

/// What went differently from the script, one sentence each; empty when all went well.
pub(super) fn problems(sent: &[Tracked], tasks: &[Task], cast: &Cast) -> Vec<String> {
    let mut problems = Vec::new();
    for step in STEPS.iter().skip(sent.len()) {
        problems.push(format!("'{}' ({}) was never sent", step.text, step.route.as_str()));
    }
    let delegated = tasks.iter().filter(|task| route_of(task, sent, cast) == Some(Route::Delegated));
    let expectations = sent
        .iter()
        .map(|tracked| (tracked.route, tracked.task_id, tracked.expected))
        .chain(delegated.map(|task| (Route::Delegated, task.id, TaskStatus::Completed)));
    let mut n_delegated = 0;
    for (route, task_id, expected) in expectations {
        n_delegated += usize::from(route == Route::Delegated);
        let Some(task) = tasks.iter().find(|task| task.id == task_id) else {
            problems.push(format!("task {task_id} ({}) has disappeared", route.as_str()));
            continue;
        };
        if let Some(problem) = ending_problem(task, route, expected, cast) {
            problems.push(problem);
        }
    }
    if n_delegated == 0 && sent.iter().any(|tracked| tracked.route == Route::Lead) {
        problems.push("the lead delegated nothing: no task was sent with send-task".into());
    }
    for task in unnotified(tasks, cast) {
        problems.push(format!("the lead was never told that '{}' finished (tasks_finished)", task.task));
    }
    problems
}

/// How one task's ending differs from the script, if it does.
fn ending_problem(task: &Task, route: Route, expected: TaskStatus, cast: &Cast) -> Option<String> {
    let label = format!("'{}' ({})", task.task, route.as_str());
    if !task.status.is_finished() {
        return Some(format!("{label} is still {}", task.status.as_str()));
    }
    if task.status != expected {
        let detail = task.failure_reason.as_deref().or(task.output.as_deref()).unwrap_or("no detail");
        return Some(format!(
            "{label} ended {} ({detail}), expected {}",
            task.status.as_str(),
            expected.as_str()
        ));
    }
    let right_agent = match route {
        Route::Offer => task.agent_id == Some(cast.offered_to) && task.accepted_at.is_some(),
        Route::Lead => task.agent_id == Some(cast.lead),
        Route::Delegated | Route::Pool => task.agent_id.is_some_and(|agent| cast.workers.contains(&agent)),
    };
    (!right_agent).then(|| format!("{label} was done by the wrong agent ({:?})", task.agent_id))
}

/// Finished worker tasks the lead has not been handed in a `tasks_finished` trigger.
fn unnotified<'a>(tasks: &'a [Task], cast: &'a Cast) -> impl Iterator<Item = &'a Task> {
    tasks.iter().filter(|task| {
        task.status.is_finished()
            && task.status != TaskStatus::Cancelled
            && task.notified_at.is_none()
            && task.agent_id.is_some_and(|agent| cast.workers.contains(&agent))
    })
}
