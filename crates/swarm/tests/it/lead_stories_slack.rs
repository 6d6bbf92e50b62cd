//! Issue #20's stories about sessions and Slack, with real runners and the stand-in:
//! - the Inbox-MCP seed's cron story: a cron trigger's session files a task with
//!   `task_create` (over the stdio `swarm mcp` its agent starts, which sees the session
//!   the runner set), a worker finishes it, and the same session is resumed with the
//!   result;
//! - one Slack thread, one delegation, exactly one completion answer in the thread;
//! - an interactive lead (a person's session: MCP only, no runner) gets a Slack message,
//!   reads it through MCP and answers in the thread.

use std::{path::Path, sync::Arc, time::Duration};

use serde_json::json;
use swarm_hub::HubOptions;

use crate::{
    hub::{Hub, SWARM, sqlite_file},
    lead_stories::{inbox, lead_setup, mention_bot, runs_of, slack_hub},
    mcp_client::{Revision, connect_http, new_agent_id, ok},
    runner::{Runner, RunnerSetup, registered},
    slack_stand_in::SlackStandIn,
    support::eventually,
};

fn set_clock(path: &Path, at: &str) {
    // Write then rename: the hub never reads a half-written time.
    let partial = path.with_extension("tmp");
    std::fs::write(&partial, at).unwrap();
    std::fs::rename(&partial, path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lead_stories_a_cron_session_files_a_task_with_task_create_and_is_resumed_with_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("clock");
    set_clock(&clock, "2026-05-04T08:59:00Z");
    let options = HubOptions {
        scheduler_tick: Duration::from_millis(50),
        clock: Some(Arc::new(swarm_service::clock::FileClock::new(clock.clone()))),
        ..HubOptions::default()
    };
    let database = sqlite_file(dir.path());
    let hub = Hub::start_with_options(&database, None, &[], options);
    let worker = Runner::start(&hub, RunnerSetup::worker(&dir.path().join("worker")));
    registered(&hub, &worker).await;
    // The lead's agent has the Inbox-MCP server of the trigger session in its MCP
    // configuration, as the seed's Atlas does: `swarm mcp` on the hub's database.
    let db = dir.path().join("swarm.db");
    let inbox_mcp = format!("{SWARM} mcp --db {} --trigger nightly-digest", db.display());
    let lead_dir = dir.path().join("lead");
    let setup = RunnerSetup { harness: Some("claude"), ..lead_setup(&lead_dir, &new_agent_id()) }
        .env("STAND_IN_INBOX_MCP", inbox_mcp);
    let lead = Runner::start(&hub, setup);
    registered(&hub, &lead).await;
    let (status, created) = hub
        .post(
            "/api/triggers",
            None,
            json!({"name": "nightly-digest", "type": "cron", "schedule": "0 9 * * *", "timezone": "UTC",
                   "target": "lead", "prompt": "Write the digest of yesterday's builds"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");

    set_clock(&clock, "2026-05-04T09:00:00.200Z");
    let first = eventually("the cron firing's session", || async {
        runs_of(&lead_dir, "/work-on-task").into_iter().find(|run| run["ended"] == true)
    })
    .await;
    let filed = first["answer"].as_str().unwrap().strip_prefix("filed as task ").unwrap().to_string();
    let (_, task) = hub.get(&format!("/api/tasks/{filed}"), None).await;
    assert!(task["tags"].to_string().contains("trigger:nightly-digest"), "filed with task_create: {task}");

    let resumed = eventually("the session resumed with the result", || async {
        runs_of(&lead_dir, "/task-result").into_iter().find(|run| run["ended"] == true)
    })
    .await;
    assert_eq!(resumed["prompt"], format!("/task-result {filed}"));
    assert_eq!(resumed["trigger"], "task_result");
    assert_eq!(resumed["sessionId"], first["sessionId"], "the same CLI session");
    let text = resumed["text"].as_str().unwrap();
    assert!(text.contains("stand-in finished: Please handle: Write the digest"), "{text}");
    let (_, done) = hub.get(&format!("/api/tasks/{filed}"), None).await;
    assert_eq!(done["agentId"], worker.agent_id.as_str(), "a worker did it: {done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lead_stories_one_slack_thread_one_delegation_exactly_one_completion_answer() {
    let dir = tempfile::tempdir().unwrap();
    let stand_in = SlackStandIn::start().await;
    let hub = slack_hub(&stand_in, dir.path(), &[]).await;
    let worker = Runner::start(&hub, RunnerSetup::worker(&dir.path().join("worker")));
    registered(&hub, &worker).await;
    let lead_dir = dir.path().join("lead");
    let lead = Runner::start(&hub, lead_setup(&lead_dir, &new_agent_id()));
    registered(&hub, &lead).await;

    mention_bot(&stand_in, "300.1", "Please do: rebuild the docs site").await;
    stand_in
        .wait_message("the worker's completion in the thread", |m| {
            m.thread_ts.as_deref() == Some("300.1") && m.text.contains("Done")
        })
        .await;
    // The lead hears the task finished and, like an eager model, tries to answer the
    // thread too: the hub refuses, the bridge has answered.
    let reviewed = eventually("the lead's review of the finished task", || async {
        runs_of(&lead_dir, "1 task(s) finished:").into_iter().find(|run| run["ended"] == true)
    })
    .await;
    assert!(reviewed["answer"].as_str().unwrap().contains("1 Slack reply(ies) refused"), "{reviewed}");
    hub.slack_sweeps().await;

    // The thread as Slack shows it: the acknowledgement and the task's living message.
    let thread = stand_in.thread("C1", "300.1").await;
    let texts: Vec<&str> = thread.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts.len(), 2, "the acknowledgement and one answer: {texts:?}");
    assert!(texts[0].starts_with("Got it"), "{texts:?}");
    // The stand-in echoes its task's first line: the task holds the Slack message fenced
    // as outside text.
    assert!(texts[1].contains("stand-in finished: Outside input (slack, from U1)"), "{texts:?}");
    let delegated = inbox(&hub, "delegated").await;
    assert_eq!(delegated.len(), 1, "{delegated:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lead_stories_an_interactive_lead_gets_a_slack_message_through_mcp_and_answers_it() {
    let dir = tempfile::tempdir().unwrap();
    let stand_in = SlackStandIn::start().await;
    // Real leases: an MCP session's sign of life is rate-limited by real time
    // (`Service::agent_seen`), so a moved clock would outrun the session's calls.
    let hub =
        slack_hub(&stand_in, dir.path(), &["--lease-seconds", "2", "--rescue-interval-seconds", "1"]).await;
    let lead_id = new_agent_id();
    let lead = connect_http(&hub, Some(&lead_id), Revision::Initialize).await;
    ok(&lead, "join-swarm", json!({"name": "person-lead", "lead": true})).await;
    let silent = hub.register_agent("silent-worker", false).await;
    // A person's Claude Code session: tool calls now and then, never a poll.
    let session = {
        let peer = lead.peer().clone();
        tokio::spawn(async move {
            loop {
                ok(&peer, "get-swarm", json!({})).await;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };
    eventually("a lease period to pass (the silent worker offline)", || async {
        let (_, agent) = hub.get(&format!("/api/agents/{silent}"), None).await;
        (agent["status"] == "offline").then_some(())
    })
    .await;

    mention_bot(&stand_in, "400.1", "is the staging deploy green?").await;
    let ack = stand_in.wait_post("the acknowledgement", |post| post["thread_ts"] == "400.1").await;
    assert!(ack["text"].as_str().unwrap().contains("person-lead"), "routed to the interactive lead: {ack}");
    // The session finds the message through MCP, reads it, answers it.
    let waiting = eventually("the message among the lead's MCP view", || async {
        let me = ok(&lead, "my-agent-info", json!({})).await;
        me["slackInbox"].as_array().and_then(|messages| messages.first().cloned())
    })
    .await;
    let id = waiting["id"].as_str().unwrap().to_string();
    let read = ok(&lead, "get-inbox-message", json!({"inboxMessageId": id})).await;
    assert_eq!(read["inboxMessage"]["content"], "is the staging deploy green?", "{read}");
    ok(&lead, "slack-reply", json!({"inboxMessageId": id, "message": "Green since 10:02."})).await;
    let answer =
        stand_in.wait_post("the answer in the thread", |post| post["text"] == "Green since 10:02.").await;
    assert_eq!(
        (answer["thread_ts"].as_str(), answer["username"].as_str()),
        (Some("400.1"), Some("person-lead"))
    );
    assert_eq!(inbox(&hub, "responded").await.len(), 1);
    session.abort();
}
