//! Issue #20's end-to-end stories with the real Claude Code, pi and the Gemini CLI on the
//! scripted model (Codex is left out: these stories are about the hub and the runner, which
//! `tasks.rs` and `sessions.rs` already show drive Codex the same way):
//! - a Slack question to a runner-driven lead that delegates it to a worker: exactly one
//!   answer in the thread (the bridge's), the lead's review adds none;
//! - the Inbox-MCP cron story: a cron trigger's session files a task with `task_create`
//!   over the stdio `swarm mcp` of its `.mcp.json`, a worker does it, and the same Claude
//!   session is resumed with the result. pi has no MCP client, so no stdio server of its
//!   own: its session files the task with the hub's `send-task` (the extension sends the
//!   session's `X-Task-ID`), and is resumed with the result the same way. The Gemini CLI's
//!   session does the same through its `agent-swarm` server (whose headers carry the
//!   `X-Task-ID` as Claude Code's do): `swarm connect` gives it no stdio `swarm mcp`.

use std::{sync::Arc, time::Duration};

use serde_json::{Value, json};
use swarm_hub::HubOptions;
use swarm_scripted_model::{Conversation, Script, ScriptedModel};

use super::{Cli, World, cli_tests, complete, task_id_in, within};
use crate::{hub::SWARM, slack_stand_in::SlackStandIn};

/// The id after `inboxMessageId: ` in the run's prompt.
fn inbox_message_id(conversation: &Conversation) -> String {
    let prompt = conversation.prompts().join("\n");
    let rest = prompt.split("inboxMessageId: ").nth(1).unwrap_or_default();
    rest.split(';').next().unwrap_or_default().trim().to_string()
}

cli_tests!(claude: Claude; a_slack_question_delegated_by_the_lead_gets_one_answer);
cli_tests!(pi: Pi; a_slack_question_delegated_by_the_lead_gets_one_answer, a_cron_session_files_a_task_with_send_task_and_is_resumed_with_its_result);
cli_tests!(
    gemini: Gemini;
    a_slack_question_delegated_by_the_lead_gets_one_answer,
    a_cron_session_files_a_task_with_send_task_and_is_resumed_with_its_result
);
cli_tests!(
    opencode: Opencode;
    a_slack_question_delegated_by_the_lead_gets_one_answer,
    a_cron_session_files_a_task_with_send_task_and_is_resumed_with_its_result
);

async fn a_slack_question_delegated_by_the_lead_gets_one_answer(cli: Cli) {
    let worker_id = uuid::Uuid::new_v4().to_string();
    let delegate_to = worker_id.clone();
    // One script for both CLIs' runs, told apart by their prompts: the lead delegates its
    // inbox message and, reviewing the finished task, only looks; the worker does the task.
    let script = Script::new()
        .call_tool_with(move |c| {
            if c.contains("inbox message(s) from Slack") {
                (
                    "inbox-delegate".into(),
                    json!({"inboxMessageId": inbox_message_id(c), "agentId": delegate_to}),
                )
            } else if c.contains("task(s) finished") {
                ("get-tasks".into(), json!({}))
            } else {
                ("store-progress".into(), complete(c))
            }
        })
        .reply("Handled.");
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
    let world = World::with_hub(cli, model, &base_url, &flags, HubOptions::default()).await;
    stand_in.wait_connected(1).await;
    let worker = world.runner_as("worker", &worker_id, &[]);
    let lead = world.runner("lead", &[]);
    world.registered(&worker).await;
    world.registered(&lead).await;

    let event = json!({"type": "app_mention", "user": "U1", "channel": "C1", "ts": "500.1",
                       "text": format!("<@{}> rebuild the docs site, please", crate::slack_stand_in::BOT_USER)});
    stand_in.push_event("env-500", "Ev500", event).await;
    // Two CLI runs first (opencode's start-up alone can take 30 s on two busy cores): the
    // delegated task done, within the real CLIs' deadline; then its answer in the thread.
    within("the worker to complete the delegated task", || async {
        let (_, body) =
            world.hub.get(&format!("/api/tasks?agentId={worker_id}&status=completed"), None).await;
        body["tasks"].as_array().is_some_and(|tasks| !tasks.is_empty()).then_some(())
    })
    .await;
    let done = stand_in
        .wait_message("the worker's completion in the thread", |m| {
            m.thread_ts.as_deref() == Some("500.1") && m.text.contains("scripted output")
        })
        .await;
    assert_eq!(done.username, Some(format!("worker-{}", &worker_id[..8])), "{done:?}");
    // The lead reviewed the finished task (a conversation about it reached the model)
    // and that run is over.
    within("the lead's review of the finished task to end", || async {
        let reviewed = world.model.conversations().iter().any(|c| c.contains("task(s) finished"));
        (reviewed && lead.output().contains("tasks_finished: done")).then_some(())
    })
    .await;
    world.hub.slack_sweeps().await;

    // The thread as Slack shows it: the acknowledgement and the task's living message.
    let thread = stand_in.thread("C1", "500.1").await;
    let texts: Vec<&str> = thread.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts.len(), 2, "the acknowledgement and one answer: {texts:?}\n{}", lead.output());
    assert!(texts[0].starts_with("Got it"), "{texts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lead_stories_claude_a_cron_session_files_a_task_and_is_resumed_with_its_result() {
    let script = Script::new()
        .call_tool_with(|c| {
            if c.contains("Write the digest") {
                ("task_create".into(), json!({"content": "Collect yesterday's build results"}))
            } else if c.contains("task(s) finished") {
                ("get-tasks".into(), json!({}))
            } else {
                (
                    "store-progress".into(),
                    json!({"taskId": task_id_in(c).unwrap_or_default(),
                    "status": "completed", "output": "RESULT-7: 12 builds, 1 red"}),
                )
            }
        })
        .call_tool_with(|c| {
            if c.contains("Write the digest") {
                ("store-progress".into(), complete(c))
            } else {
                ("get-tasks".into(), json!({}))
            }
        })
        .reply("Filed.")
        .reply_with(|c| format!("RELAYED: {}", c.latest_prompt()));
    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("clock");
    std::fs::write(&clock, "2026-05-04T08:59:00Z").unwrap();
    let options = HubOptions {
        scheduler_tick: Duration::from_millis(50),
        clock: Some(Arc::new(swarm_service::clock::FileClock::new(clock.clone()))),
        ..HubOptions::default()
    };
    let model = ScriptedModel::start(script).await;
    let base_url = model.openai_base_url();
    let world = World::with_hub(Cli::Claude, model, &base_url, &[], options).await;
    // The trigger session's Inbox-MCP server next to the hub's entry, as a user adds it:
    // it speaks for the agent and the session the runner names in the environment.
    let mcp_path = world.project.join(".mcp.json");
    let mut mcp: Value = serde_json::from_str(&std::fs::read_to_string(&mcp_path).unwrap()).unwrap();
    let db = world.dir.path().join("swarm.db").display().to_string();
    mcp["mcpServers"]["inbox"] = json!({
        "type": "stdio", "command": SWARM, "args": ["mcp", "--db", db, "--trigger", "nightly-digest"],
        "env": {"AGENT_ID": "${AGENT_ID}", "SWARM_SESSION_TASK_ID": "${SWARM_SESSION_TASK_ID:-}"},
    });
    std::fs::write(&mcp_path, mcp.to_string()).unwrap();
    let worker = world.runner("worker", &[]);
    let lead = world.runner("lead", &[]);
    world.registered(&worker).await;
    world.registered(&lead).await;
    let (status, created) = world
        .hub
        .post(
            "/api/triggers",
            None,
            json!({"name": "nightly-digest", "type": "cron", "schedule": "0 9 * * *", "timezone": "UTC",
                   "target": "lead", "prompt": "Write the digest of yesterday's builds"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let partial = clock.with_extension("tmp");
    std::fs::write(&partial, "2026-05-04T09:00:00.200Z").unwrap();
    std::fs::rename(&partial, &clock).unwrap();

    let resumed = within("the cron session resumed with the result", || async {
        world.model.conversations().into_iter().find(|c| {
            c.contains("Write the digest")
                && c.final_replies().iter().any(|r| r == "Filed.")
                && c.latest_prompt().contains("RESULT-7")
        })
    })
    .await;
    let relayed = resumed.latest_prompt();
    assert!(resumed.contains("# The result of swarm task"), "{:?}\n{}", resumed.user_texts(), lead.output());
    assert!(relayed.contains("RESULT-7"), "{relayed}");
    let (_, tasks) = world.hub.get("/api/tasks?limit=20", None).await;
    let filed: Vec<&Value> = tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|task| task["tags"].to_string().contains("trigger:nightly-digest"))
        .collect();
    assert_eq!(filed.len(), 1, "one task filed with task_create: {tasks}");
    assert_eq!(filed[0]["agentId"], worker.agent_id.as_str(), "{}", filed[0]);
}

/// pi's cron story: the session files its task with `send-task` (the hub's tool through the
/// extension, which names the session in `X-Task-ID`), and is resumed with the result.
async fn a_cron_session_files_a_task_with_send_task_and_is_resumed_with_its_result(cli: Cli) {
    let worker_id = uuid::Uuid::new_v4().to_string();
    let delegate_to = worker_id.clone();
    let script = Script::new()
        .call_tool_with(move |c| {
            if c.contains("Write the digest") {
                (
                    "send-task".into(),
                    json!({"agentId": delegate_to, "task": "Collect yesterday's build results"}),
                )
            } else if c.contains("task(s) finished") {
                ("get-tasks".into(), json!({}))
            } else {
                (
                    "store-progress".into(),
                    json!({"taskId": task_id_in(c).unwrap_or_default(),
                    "status": "completed", "output": "RESULT-7: 12 builds, 1 red"}),
                )
            }
        })
        .call_tool_with(|c| {
            if c.contains("Write the digest") {
                ("store-progress".into(), complete(c))
            } else {
                ("get-tasks".into(), json!({}))
            }
        })
        .reply("Filed.")
        .reply_with(|c| format!("RELAYED: {}", c.latest_prompt()));
    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("clock");
    std::fs::write(&clock, "2026-05-04T08:59:00Z").unwrap();
    let options = HubOptions {
        scheduler_tick: Duration::from_millis(50),
        clock: Some(Arc::new(swarm_service::clock::FileClock::new(clock.clone()))),
        ..HubOptions::default()
    };
    let model = ScriptedModel::start(script).await;
    let base_url = model.openai_base_url();
    let world = World::with_hub(cli, model, &base_url, &[], options).await;
    let worker = world.runner_as("worker", &worker_id, &[]);
    let lead = world.runner("lead", &[]);
    world.registered(&worker).await;
    world.registered(&lead).await;
    let (status, created) = world
        .hub
        .post(
            "/api/triggers",
            None,
            json!({"name": "nightly-digest", "type": "cron", "schedule": "0 9 * * *", "timezone": "UTC",
                   "target": "lead", "prompt": "Write the digest of yesterday's builds"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let partial = clock.with_extension("tmp");
    std::fs::write(&partial, "2026-05-04T09:00:00.200Z").unwrap();
    std::fs::rename(&partial, &clock).unwrap();

    let resumed = within("the cron session resumed with the result", || async {
        world.model.conversations().into_iter().find(|c| {
            c.contains("Write the digest")
                && c.final_replies().iter().any(|r| r == "Filed.")
                && c.latest_prompt().contains("RESULT-7")
        })
    })
    .await;
    let relayed = resumed.latest_prompt();
    assert!(relayed.starts_with("# The result of swarm task"), "{relayed}\n{}", lead.output());
    assert!(relayed.contains("RESULT-7"), "{relayed}");
    let (_, tasks) = world.hub.get("/api/tasks?limit=20", None).await;
    let filed: Vec<&Value> = tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|task| task["task"] == "Collect yesterday's build results")
        .collect();
    assert_eq!(filed.len(), 1, "one task filed with send-task: {tasks}");
    assert_eq!(filed[0]["agentId"], worker.agent_id.as_str(), "{}", filed[0]);
}
