//! Steering reaches the real CLIs mid-run (issue 40), and the scripted model does what it
//! says: Claude Code and the Gemini CLI through their hooks (`steer` in the context of
//! `PostToolUse`/`AfterTool` after the tool call it is in, `queue` as the `Stop`/`AfterAgent`
//! hook's reason to go on), Codex, pi and opencode by the runner resuming their session with
//! the message once their turn ends. The model's first step waits at a gate (a shell
//! command) until the test has sent the steer, so the message always arrives while the CLI
//! works. A message the run could not take (the task was finished) becomes a follow-up task
//! for the same agent.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use swarm_scripted_model::{Conversation, Script};

use super::{Cli, World, complete, task_id_in, within};

const CODE_WORD: &str = "PELICAN-4471";
const STEERING: &str = "Steering check: put the code word PELICAN-4471 in your report.";

mod claude {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_steer_reaches_the_agent_at_its_next_tool_call() {
        let gate = Gate::new();
        let script = Script::new()
            .shell(&gate.command())
            .call_tool("store-progress", report_what_was_seen)
            .reply("Reported.");
        steer_mid_run(Cli::Claude, script, &gate, "steer").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_queued_steer_keeps_the_agent_going_at_the_end_of_its_turn() {
        let gate = Gate::new();
        let script = Script::new()
            .shell(&gate.command())
            .reply("The first part is done.")
            .call_tool("store-progress", report_what_was_seen)
            .reply("Reported.");
        steer_mid_run(Cli::Claude, script, &gate, "queue").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_steer_the_run_cannot_take_becomes_a_follow_up_task() {
        too_late_becomes_a_follow_up(Cli::Claude).await;
    }
}

mod codex {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_steer_reaches_the_agent_by_resuming_its_thread() {
        let gate = Gate::new();
        // Codex has no hooks: the turn ends with the task open, and the runner resumes the
        // thread with the message.
        let script = Script::new()
            .shell(&gate.command())
            .reply("The first part is done.")
            .call_tool("store-progress", report_what_was_seen)
            .reply("Reported.");
        steer_mid_run(Cli::Codex, script, &gate, "steer").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_steer_the_run_cannot_take_becomes_a_follow_up_task() {
        too_late_becomes_a_follow_up(Cli::Codex).await;
    }
}

mod pi {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_steer_reaches_the_agent_by_resuming_its_session() {
        let gate = Gate::new();
        // pi's `--mode json` run takes no input (docs/real-agent-clis.md, "pi"): the turn
        // ends with the task open, and the runner resumes the session with the message.
        let script = Script::new()
            .shell(&gate.command())
            .reply("The first part is done.")
            .call_tool("store-progress", report_what_was_seen)
            .reply("Reported.");
        steer_mid_run(Cli::Pi, script, &gate, "steer").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_steer_the_run_cannot_take_becomes_a_follow_up_task() {
        too_late_becomes_a_follow_up(Cli::Pi).await;
    }
}

mod opencode {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_steer_reaches_the_agent_by_resuming_its_session() {
        let gate = Gate::new();
        // opencode runs no hooks: the turn ends with the task open, and the runner resumes
        // the session with the message.
        let script = Script::new()
            .shell(&gate.command())
            .reply("The first part is done.")
            .call_tool("store-progress", report_what_was_seen)
            .reply("Reported.");
        steer_mid_run(Cli::Opencode, script, &gate, "steer").await;
    }
}

mod gemini {
    use super::*;

    // The Gemini CLI's hooks as Claude Code's: `steer` in AfterTool's context, `queue` as
    // AfterAgent's block decision, whose reason goes on as the next prompt.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_steer_reaches_the_agent_at_its_next_tool_call() {
        let gate = Gate::new();
        let script = Script::new()
            .shell(&gate.command())
            .call_tool("store-progress", report_what_was_seen)
            .reply("Reported.");
        steer_mid_run(Cli::Gemini, script, &gate, "steer").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_queued_steer_keeps_the_agent_going_at_the_end_of_its_turn() {
        let gate = Gate::new();
        let script = Script::new()
            .shell(&gate.command())
            .reply("The first part is done.")
            .call_tool("store-progress", report_what_was_seen)
            .reply("Reported.");
        steer_mid_run(Cli::Gemini, script, &gate, "queue").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_steer_the_run_cannot_take_becomes_a_follow_up_task() {
        too_late_becomes_a_follow_up(Cli::Gemini).await;
    }
}

/// A shell command the model runs that says it is waiting, then waits for the test.
struct Gate {
    dir: tempfile::TempDir,
}

impl Gate {
    fn new() -> Gate {
        Gate { dir: tempfile::tempdir().unwrap() }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn command(&self) -> String {
        let (waiting, open) = (self.path("waiting"), self.path("open"));
        format!(
            "touch '{}'; while [ ! -f '{}' ]; do sleep 0.1; done; echo through the gate",
            waiting.display(),
            open.display()
        )
    }

    async fn reached(&self) {
        let waiting = self.path("waiting");
        within("the agent to reach the gate", || async { exists(&waiting).then_some(()) }).await;
    }

    fn open(&self) {
        std::fs::write(self.path("open"), "").unwrap();
    }
}

fn exists(path: &Path) -> bool {
    path.exists()
}

/// `store-progress` completing the task with what the model saw: the code word if the
/// steering reached it.
fn report_what_was_seen(conversation: &Conversation) -> Value {
    let mut report = complete(conversation);
    let seen =
        if conversation.contains(STEERING) { format!("followed: {CODE_WORD}") } else { "no steering".into() };
    report["output"] = json!(seen);
    report
}

async fn steer_mid_run(cli: Cli, script: Script, gate: &Gate, mode: &str) {
    let world = World::new(cli, script).await;
    let runner = world.runner("worker", &[]);
    world.registered(&runner).await;
    let id = world.create(json!({"task": "Write the changelog", "agentId": runner.agent_id})).await;
    gate.reached().await;
    let (status, steered) = world
        .hub
        .post(&format!("/api/tasks/{id}/steer"), None, json!({"message": STEERING, "mode": mode}))
        .await;
    assert_eq!(status, 200, "{steered}");
    gate.open();

    let done = world.task_in(&id, &["completed", "failed", "unassigned"], &runner).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    assert_eq!(done["output"], format!("followed: {CODE_WORD}"), "the model did what the steering said");
    let messages = within("the message to be handled", || async {
        let (_, body) = world.hub.get(&format!("/api/tasks/{id}/steering-messages"), None).await;
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        messages.iter().all(|m| m["status"] == "handled").then_some(messages)
    })
    .await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(messages[0]["deliveredAt"].is_string() && messages[0]["handledAt"].is_string(), "{messages:?}");
    let requests = world.conversations_about(&id);
    let first_seen = requests.iter().position(|c| c.contains(STEERING)).expect("a request with the steering");
    assert!(first_seen > 0, "it arrived mid-run, not in the first prompt");
}

/// The agent finishes its task while the message waits (a `queue` message when the CLI's
/// turn ends with the task finished): no run can take it, so it becomes a follow-up task
/// for the same agent, which that agent's runner then works.
async fn too_late_becomes_a_follow_up(cli: Cli) {
    let gate = Gate::new();
    let command = gate.command();
    // The first run: the gate, then completing the task. The follow-up's run: completing it.
    let script = Script::new()
        .shell_with(move |conversation| match conversation.contains("Follow-up to task") {
            true => "echo nothing to wait for".to_string(),
            false => command.clone(),
        })
        .call_tool("store-progress", complete)
        .reply("Reported.");
    let world = World::new(cli, script).await;
    let runner = world.runner("worker", &[]);
    world.registered(&runner).await;
    let id = world.create(json!({"task": "Write the changelog", "agentId": runner.agent_id})).await;
    gate.reached().await;
    // After the tool call it waits in: `queue` is never taken at a tool call, and the task is
    // completed before the turn ends.
    let (status, steered) = world
        .hub
        .post(
            &format!("/api/tasks/{id}/steer"),
            None,
            json!({"message": "Also update the README", "mode": "queue"}),
        )
        .await;
    assert_eq!(status, 200, "{steered}");
    gate.open();
    let done = world.task_in(&id, &["completed", "failed", "unassigned"], &runner).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());

    let promoted = within("the message to become a follow-up task", || async {
        let (_, body) = world.hub.get(&format!("/api/tasks/{id}/steering-messages"), None).await;
        let message = body["messages"].as_array()?.first()?.clone();
        (message["status"] == "promoted").then_some(message)
    })
    .await;
    let follow_up = promoted["promotedTaskId"].as_str().expect("the follow-up's id").to_string();
    let task = world.task(&follow_up).await;
    assert_eq!(task["agentId"], runner.agent_id.as_str(), "for the same agent");
    assert!(task["task"].as_str().unwrap().contains("Also update the README"), "{task}");
    let run = world.task_in(&follow_up, &["completed", "failed", "unassigned"], &runner).await;
    assert_eq!(run["status"], "completed", "the agent worked the follow-up: {run}");
    let follow_up_requests = world.conversations_about(&follow_up);
    assert!(follow_up_requests.iter().any(|c| c.contains("Also update the README")));
    assert_eq!(task_id_in(&follow_up_requests[0]).as_deref(), Some(follow_up.as_str()));
}
