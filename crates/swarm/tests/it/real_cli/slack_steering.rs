//! A reply in a Slack task's thread reaches the real Claude Code mid-run (issue 42): the
//! Slack bridge records it as a steering message for the task (`Service::steer_task`, mode
//! `queue`) and the runner's hooks hand it to the CLI at the end of its turn. The model's
//! first step waits at a gate (a shell command) until the reply is recorded, so it always
//! arrives while the CLI works; the task's living message then shows what the model did.

use std::path::PathBuf;

use serde_json::{Value, json};
use swarm_hub::HubOptions;
use swarm_scripted_model::{Conversation, Script, ScriptedModel};

use super::{Cli, World, complete, within};
use crate::slack_stand_in::SlackStandIn;

const CODE_WORD: &str = "HERON-2718";
const REPLY: &str = "Please also put the code word HERON-2718 in your report.";

fn report_what_was_seen(conversation: &Conversation) -> Value {
    let mut report = complete(conversation);
    let seen =
        if conversation.contains(REPLY) { format!("followed: {CODE_WORD}") } else { "no reply seen".into() };
    report["output"] = json!(seen);
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_a_slack_thread_reply_reaches_the_running_agent() {
    let gate = tempfile::tempdir().unwrap();
    let (waiting, open): (PathBuf, PathBuf) = (gate.path().join("waiting"), gate.path().join("open"));
    let command = format!(
        "touch '{}'; while [ ! -f '{}' ]; do sleep 0.1; done; echo through the gate",
        waiting.display(),
        open.display()
    );
    let script = Script::new()
        .shell(&command)
        .reply("The first part is done.")
        .call_tool("store-progress", report_what_was_seen)
        .reply("Reported.");
    let stand_in = SlackStandIn::start().await;
    let api = stand_in.api_url.clone();
    let flags = [
        "--slack-bot-token",
        "xoxb-test",
        "--slack-app-token",
        "xapp-test",
        "--slack-signing-secret",
        "test-signing-secret",
        "--slack-api-url",
        &api,
        "--slack-allowed-user-ids",
        "U1",
    ];
    let model = ScriptedModel::start(script).await;
    let base_url = model.openai_base_url();
    let world = World::with_hub(Cli::Claude, model, &base_url, &flags, HubOptions::default()).await;
    stand_in.wait_connected(1).await;
    let runner = world.runner("worker", &[]);
    world.registered(&runner).await;

    // A person asks this worker in Slack; its runner takes the task and starts Claude Code.
    let ask = json!({"type": "message", "user": "U1", "channel": "C1", "ts": "900.1",
                     "text": format!("swarm#{} write the changelog", runner.agent_id)});
    stand_in.push_event("env-900.1", "Ev900.1", ask).await;
    within("the agent to reach the gate", || async { waiting.exists().then_some(()) }).await;
    let (_, tasks) = world.hub.get("/api/tasks?limit=5", None).await;
    let id = tasks["tasks"][0]["id"].as_str().expect("the Slack task").to_string();

    // The reply in the thread, while the agent works.
    let reply = json!({"type": "message", "user": "U1", "channel": "C1", "ts": "900.2",
                       "thread_ts": "900.1", "text": REPLY});
    stand_in.push_event("env-900.2", "Ev900.2", reply).await;
    within("the reply to be recorded as steering", || async {
        let (_, body) = world.hub.get(&format!("/api/tasks/{id}/steering-messages"), None).await;
        body["messages"].as_array().is_some_and(|m| m.len() == 1).then_some(())
    })
    .await;
    std::fs::write(&open, "").unwrap();

    let done = world.task_in(&id, &["completed", "failed", "unassigned"], &runner).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    assert_eq!(done["output"], format!("followed: {CODE_WORD}"), "the model did what the reply said");
    let requests = world.conversations_about(&id);
    let first_seen = requests.iter().position(|c| c.contains(REPLY)).expect("a request with the reply");
    assert!(first_seen > 0, "it arrived mid-run, not in the first prompt");
    let (_, body) = world.hub.get(&format!("/api/tasks/{id}/steering-messages"), None).await;
    assert_eq!(body["messages"][0]["source"], "slack", "{body}");
    stand_in
        .wait_message("the living message with the result", |m| {
            m.thread_ts.as_deref() == Some("900.1") && m.text.contains(CODE_WORD)
        })
        .await;
}
