//! Going on in the same agent session after a run was cut short (issue 40): a run stopped
//! by its runner's shutdown (its task paused) or lost with its runner (its task still
//! `in_progress` for the agent when a runner starts again) resumes the CLI's session when
//! the CLI can resume one. The runner records each task run's session at the hub as soon as
//! the CLI names it (`PUT /api/tasks/:id/session`, the reference runner's call), so a runner
//! that was killed leaves it there too. A session the CLI cannot resume (expired, another
//! machine's) costs one attempt: `agent_run.rs` then starts a new one.

use serde_json::{Value, json};
use swarm_client::Client;
use swarm_domain::id::TaskId;

use crate::{
    run::Context,
    view::View,
    work::{TaskOrigin, Work},
};

/// Records `session` as the task's agent session, by `cli` (the harness's name: a session
/// is resumed only by the CLI that started it). A failure is only reported: the run goes on.
pub(crate) async fn record_session(
    client: Client,
    view: View,
    task_id: TaskId,
    session: String,
    cli: String,
) {
    let body = json!({ "claudeSessionId": session, "provider": cli });
    match client.put_json::<_, Value>(&format!("/api/tasks/{task_id}/session"), &body).await {
        // An offer under review is not the agent's task yet: its session is not the work's.
        Err(err) if err.status().is_some_and(|status| status.as_u16() == 403) => {}
        Err(err) => view.warn(
            "session_record_failed",
            &format!("cannot record the task's session at the hub: {err}"),
            &[],
        ),
        Ok(_) => {}
    }
}

/// The session to resume for `work`: the one recorded for its task by this CLI, when the
/// work goes on after a cut-short run (a paused task resumed, a task found `in_progress` at
/// start) and the CLI resumes sessions.
pub(crate) async fn session_to_resume(context: &Context, work: &Work) -> Option<String> {
    let harness = &context.config.harness;
    let task = match work {
        Work::Resume { task } | Work::Task { task, origin: TaskOrigin::Held } if harness.can_resume() => task,
        _ => return None,
    };
    let detail: Value = match context.client.get_json(&format!("/api/tasks/{}", task.id), &[]).await {
        Ok(detail) => detail,
        Err(err) => {
            context.view.warn(
                "session_lookup_failed",
                &format!("cannot look up the task's session: {err}"),
                &[],
            );
            return None;
        }
    };
    let by_this_cli = detail["provider"].as_str() == Some(harness.name());
    detail["claudeSessionId"].as_str().filter(|_| by_this_cli).map(str::to_string)
}
