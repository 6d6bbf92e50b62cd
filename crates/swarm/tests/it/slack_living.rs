//! The living Slack message of a task (issue 42), against the Slack stand-in through the
//! real hub: one status message per Slack task, posted when the task is taken and edited
//! through its life (progress, pause, the ending) with no second post; its ending shown
//! once across a restart; a chatty agent's notes coalesced into few edits; a 429 honoured
//! after its `Retry-After`.

use serde_json::{Value, json};

use crate::{
    hub::{Database, Hub, sqlite_file},
    slack_stand_in::{SlackStandIn, StoredMessage},
};

pub const SECRET: &str = "test-signing-secret";
pub const APP_URL: &str = "https://swarm.example.com";

pub fn living_flags(stand_in: &SlackStandIn) -> Vec<String> {
    [
        "--slack-bot-token",
        "xoxb-test",
        "--slack-signing-secret",
        SECRET,
        "--slack-api-url",
        &stand_in.api_url,
        "--slack-allowed-user-ids",
        "U1,U2",
        "--slack-app-token",
        "xapp-test",
        "--app-url",
        APP_URL,
    ]
    .iter()
    .map(|flag| flag.to_string())
    .collect()
}

pub fn start_hub(database: &Database, flags: &[String]) -> Hub {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    Hub::start_with(database, None, &flags)
}

/// A person asks a worker by name in a new thread; the worker's poll takes the task.
pub async fn slack_task_taken(hub: &Hub, stand_in: &SlackStandIn, worker: &str, thread: &str) -> String {
    let event = json!({"type": "message", "user": "U1", "channel": "C1", "ts": thread,
                       "text": "zeta: rebuild the docs site"});
    stand_in.push_event(&format!("env-{thread}"), &format!("Ev-{thread}"), event).await;
    let (status, body) = hub.get("/api/poll?wait=10", Some(worker)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["trigger"]["type"], "task_assigned", "{body}");
    body["trigger"]["task"]["id"].as_str().unwrap().to_string()
}

fn in_thread(thread: &str) -> impl Fn(&StoredMessage) -> bool + '_ {
    move |m: &StoredMessage| m.thread_ts.as_deref() == Some(thread)
}

fn action_ids(message: &StoredMessage) -> Vec<String> {
    let blocks = message.blocks.as_array().cloned().unwrap_or_default();
    blocks
        .iter()
        .filter(|block| block["type"] == "actions")
        .flat_map(|block| block["elements"].as_array().cloned().unwrap_or_default())
        .filter_map(|element| element["action_id"].as_str().map(str::to_string))
        .collect()
}

async fn progress(hub: &Hub, worker: &str, task: &str, note: &str) {
    let (status, body) =
        hub.post(&format!("/api/tasks/{task}/progress"), Some(worker), json!({ "progress": note })).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_living_message_is_posted_once_and_edited_through_the_task_life() {
    let stand_in = SlackStandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let flags = living_flags(&stand_in);
    let hub = start_hub(&database, &flags);
    stand_in.wait_connected(1).await;
    let worker = hub.register_agent("zeta-worker", false).await;
    let task = slack_task_taken(&hub, &stand_in, &worker, "600.1").await;

    // Taken: one status message in the thread, under the worker's persona, in Block Kit.
    let status = stand_in
        .wait_message("the status message", |m| {
            in_thread("600.1")(m) && m.blocks.to_string().contains("In progress")
        })
        .await;
    assert_eq!(status.username.as_deref(), Some("zeta-worker"));
    let headline = status.blocks[0]["text"]["text"].as_str().unwrap().to_string();
    assert!(headline.contains("*zeta-worker*"), "{headline}");
    assert!(
        headline.contains(&format!("<{APP_URL}/#/tasks/{task}|`{}`>", &task[task.len() - 8..])),
        "{headline}"
    );
    assert!(status.blocks.to_string().contains("Cost so far: $0.0000"), "{}", status.blocks);
    assert!(
        status.blocks.to_string().contains("<!date^"),
        "elapsed, kept current by Slack: {}",
        status.blocks
    );
    assert_eq!(action_ids(&status), ["pause_task", "cancel_task", "ask_lead", "view_task"]);

    // Progress edits that message: no second post.
    for note in ["checked out the repo", "built **half** the pages", "built all pages"] {
        progress(&hub, &worker, &task, note).await;
    }
    let shown = stand_in
        .wait_message("the last progress note", |m| m.ts == status.ts && m.text.contains("built all pages"))
        .await;
    assert!(shown.blocks.to_string().contains("_Progress:_ built all pages"), "{}", shown.blocks);

    // Paused and resumed: shown, with the button that undoes it.
    let (code, body) = hub.post(&format!("/api/tasks/{task}/pause"), Some(&worker), json!({})).await;
    assert_eq!(code, 200, "{body}");
    let paused = stand_in
        .wait_message("paused", |m| m.ts == status.ts && m.blocks.to_string().contains("*Paused*"))
        .await;
    assert!(action_ids(&paused).contains(&"resume_task".to_string()), "{:?}", action_ids(&paused));
    let (code, body) = hub.post(&format!("/api/tasks/{task}/resume"), Some(&worker), json!({})).await;
    assert_eq!(code, 200, "{body}");
    stand_in
        .wait_message("resumed", |m| m.ts == status.ts && m.blocks.to_string().contains("In progress"))
        .await;

    // Finished: the output, rendered into the same message; the buttons gone but the link.
    let finish = json!({"status": "completed", "output": "**Rebuilt** the docs: 42 pages"});
    let (code, body) = hub.post(&format!("/api/tasks/{task}/finish"), Some(&worker), finish).await;
    assert_eq!(code, 200, "{body}");
    let done = stand_in
        .wait_message("the ending", |m| m.ts == status.ts && m.text.contains("*Rebuilt* the docs: 42 pages"))
        .await;
    assert!(done.blocks[0]["text"]["text"].as_str().unwrap().starts_with(":white_check_mark: *Completed*"));
    assert!(done.blocks.to_string().contains("Took "), "{}", done.blocks);
    assert_eq!(action_ids(&done), ["view_task"]);
    let thread = stand_in.thread("C1", "600.1").await;
    assert_eq!(thread.len(), 2, "the acknowledgement and the living message, nothing else: {thread:?}");
    // (The acknowledgement and the status message may be posted in either order.)
    assert!(thread.iter().any(|m| m.text.starts_with("Got it")), "{thread:?}");
    let posts = stand_in.posts().await.into_iter().filter(|p| p["thread_ts"] == "600.1").count();
    assert_eq!(posts, 2, "progress, pause and the ending were edits, not posts");

    // The ending once, across a restart: the new hub finds it rendered and edits nothing.
    let edits = done.edits;
    assert!(hub.terminate(), "the hub stops on SIGTERM");
    let hub = start_hub(&database, &flags);
    stand_in.wait_connected(2).await;
    hub.slack_sweeps().await;
    let thread = stand_in.thread("C1", "600.1").await;
    assert_eq!(thread.len(), 2, "{thread:?}");
    let living = thread.iter().find(|m| m.ts == done.ts).expect("the living message");
    assert_eq!(living.edits, edits, "no edit after the restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_living_message_coalesces_a_chatty_agent_and_honours_429() {
    let stand_in = SlackStandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = start_hub(&sqlite_file(dir.path()), &living_flags(&stand_in));
    stand_in.wait_connected(1).await;
    let worker = hub.register_agent("zeta-worker", false).await;
    let task = slack_task_taken(&hub, &stand_in, &worker, "610.1").await;
    let status = stand_in
        .wait_message("the status message", |m| {
            in_thread("610.1")(m) && m.blocks.to_string().contains("In progress")
        })
        .await;

    // While Slack answers one edit, ten notes arrive: they fold into one more edit.
    let gate = stand_in.hold_updates().await;
    progress(&hub, &worker, &task, "note 0").await;
    let arrived = |calls: Vec<Value>| calls.iter().filter(|b| b["ts"] == status.ts.as_str()).count();
    crate::support::eventually("the first edit to reach Slack", || async {
        (arrived(stand_in.calls("chat.update (arrived)").await) == 1).then_some(())
    })
    .await;
    for n in 1..10 {
        progress(&hub, &worker, &task, &format!("note {n}")).await;
    }
    drop(gate);
    stand_in.wait_message("the last note", |m| m.ts == status.ts && m.text.contains("note 9")).await;
    hub.slack_sweeps().await;
    let edits = arrived(stand_in.calls("chat.update (arrived)").await);
    assert_eq!(edits, 2, "ten notes, two edits: the one under way and one with the last note");

    // Slack answers 429 twice: the edit is sent again after Retry-After, and lands.
    stand_in.rate_limit_next_updates(2).await;
    progress(&hub, &worker, &task, "after the rate limit").await;
    stand_in
        .wait_message("the edit after 429s", |m| m.ts == status.ts && m.text.contains("after the rate limit"))
        .await;
    assert_eq!(stand_in.rate_limited().await, 2, "both 429s were met, then honoured");
    let posts = stand_in.posts().await.into_iter().filter(|p| p["thread_ts"] == "610.1").count();
    assert_eq!(posts, 2, "the acknowledgement and one status message");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_living_message_is_one_across_two_hubs_on_one_database() {
    let stand_in = SlackStandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let flags = living_flags(&stand_in);
    // Two replicas, each with its own Slack bridge and announcer.
    let first = start_hub(&database, &flags);
    stand_in.wait_connected(1).await;
    let second = start_hub(&database, &flags);
    stand_in.wait_connected(2).await;
    let worker = first.register_agent("zeta-worker", false).await;
    let task = slack_task_taken(&first, &stand_in, &worker, "620.1").await;
    for (n, hub) in [&second, &first, &second].into_iter().enumerate() {
        progress(hub, &worker, &task, &format!("step {n}")).await;
    }
    let finish = json!({"status": "completed", "output": "Done on two hubs"});
    let (code, body) = second.post(&format!("/api/tasks/{task}/finish"), Some(&worker), finish).await;
    assert_eq!(code, 200, "{body}");
    stand_in
        .wait_message("the ending", |m| in_thread("620.1")(m) && m.text.contains("Done on two hubs"))
        .await;
    first.slack_sweeps().await;
    second.slack_sweeps().await;
    let thread = stand_in.thread("C1", "620.1").await;
    assert_eq!(thread.len(), 2, "the acknowledgement and one living message: {thread:?}");
    assert!(thread.iter().any(|m| m.text.contains("Done on two hubs")), "the ending stays shown: {thread:?}");
}
