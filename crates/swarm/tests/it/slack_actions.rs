//! The buttons of a Slack task's living message and the lead's Slack tools (issue 42),
//! against the Slack stand-in through the real hub: signed interaction payloads pause,
//! resume, ask the lead and cancel through the service, for allowed users only; the lead
//! starts a thread, edits and deletes the bot's own messages (never a person's), and manages
//! channels only on a hub started with `--slack-channel-management`.

use serde_json::{Value, json};

use crate::{
    hub::{Hub, send, sqlite_file},
    mcp_client::{Revision, connect_http, ok, refused},
    slack_living::{SECRET, living_flags, slack_task_taken, start_hub},
    slack_stand_in::SlackStandIn,
    support::eventually,
};

fn now_seconds() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// A button press as Slack sends it: form-encoded `payload=<JSON>`, signed.
fn press(
    hub: &Hub,
    path: &str,
    user: &str,
    action_id: &str,
    task: &str,
    secret: &str,
) -> reqwest::RequestBuilder {
    let payload = json!({
        "type": "block_actions",
        "user": { "id": user },
        "channel": { "id": "C1" },
        "actions": [{ "type": "button", "action_id": action_id, "value": task, "block_id": "task_actions" }],
    });
    let body = format!("payload={}", form_encode(&payload.to_string()));
    let timestamp = now_seconds();
    let signature = swarm_slack::signature::sign(secret, timestamp, body.as_bytes());
    reqwest::Client::new()
        .post(hub.url(path))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-slack-request-timestamp", timestamp.to_string())
        .header("x-slack-signature", signature)
        .body(body)
}

fn form_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => (byte as char).to_string(),
            b' ' => "+".to_string(),
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

async fn task_status(hub: &Hub, task: &str) -> Value {
    let (code, body) = hub.get(&format!("/api/tasks/{task}"), None).await;
    assert_eq!(code, 200, "{body}");
    body["status"].clone()
}

fn ignored(hub: &Hub) -> u64 {
    let inbound = hub.activity().inbound;
    inbound.iter().find(|(source, outcome, _)| *source == "slack" && *outcome == "ignored").map_or(0, |e| e.2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_buttons_pause_resume_ask_the_lead_and_cancel() {
    let stand_in = SlackStandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    // A hub with an operator key: Slack's presses carry no key, only Slack's signature.
    let flags = living_flags(&stand_in);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let hub = Hub::start_with(&sqlite_file(dir.path()), Some("slack-buttons-operator-key"), &flags);
    stand_in.wait_connected(1).await;
    let lead = hub.register_agent("lead-one", true).await;
    let worker = hub.register_agent("zeta-worker", false).await;
    let task = slack_task_taken(&hub, &stand_in, &worker, "800.1").await;
    let status =
        stand_in.wait_message("the status message", |m| m.blocks.to_string().contains("In progress")).await;
    let shows = |text: &'static str| {
        let ts = status.ts.clone();
        move |m: &crate::slack_stand_in::StoredMessage| m.ts == ts && m.blocks.to_string().contains(text)
    };

    // Unsigned or wrongly signed: refused, nothing done.
    let (code, _) = send(press(&hub, "/slack/interactivity", "U1", "cancel_task", &task, "wrong")).await;
    assert_eq!(code, 401);
    // A user who is not allowed: ignored.
    let (code, _) = send(press(&hub, "/slack/interactivity", "U9", "cancel_task", &task, SECRET)).await;
    assert_eq!(code, 200);
    eventually("the stranger's press to be ignored", || async { (ignored(&hub) == 1).then_some(()) }).await;
    assert_eq!(task_status(&hub, &task).await, "in_progress");

    // Pause (pressed over Socket Mode) and resume, as the task's assignee would; the living
    // message follows.
    let pause = json!({
        "type": "block_actions", "user": { "id": "U1" },
        "actions": [{ "type": "button", "action_id": "pause_task", "value": task }],
    });
    stand_in.push_interactive("env-pause", pause).await;
    stand_in.wait_message("paused", shows("*Paused*")).await;
    assert_eq!(task_status(&hub, &task).await, "paused");
    let (code, _) = send(press(&hub, "/slack/interactivity", "U1", "resume_task", &task, SECRET)).await;
    assert_eq!(code, 200);
    stand_in.wait_message("resumed", shows("pause_task")).await;
    assert_eq!(task_status(&hub, &task).await, "in_progress");

    // Ask the lead: an inbox message about the task, in its thread.
    let (code, _) = send(press(&hub, "/slack/interactivity", "U1", "ask_lead", &task, SECRET)).await;
    assert_eq!(code, 200);
    let (_, body) = hub.get("/api/poll?wait=10", Some(&lead)).await;
    let message = &body["trigger"]["messages"][0];
    assert_eq!(body["trigger"]["type"], "slack_inbox_message", "{body}");
    assert_eq!(message["slackThreadTs"], "800.1");
    assert!(message["content"].as_str().unwrap().contains(&task), "{message}");
    assert_eq!(message["matchedText"], format!("ask the lead: task {task}"));
    stand_in
        .wait_post("the lead asked", |p| p["text"].as_str().is_some_and(|t| t.contains("Asked *lead-one*")))
        .await;

    // Cancel, pressed where a Bolt app sends it (the events URL): the task and its message end.
    let (code, _) = send(press(&hub, "/slack/events", "U1", "cancel_task", &task, SECRET)).await;
    assert_eq!(code, 200);
    stand_in.wait_message("cancelled", shows("*Cancelled*")).await;
    assert_eq!(task_status(&hub, &task).await, "cancelled");
    let posts = stand_in.posts().await.into_iter().filter(|p| p["blocks"].is_array()).count();
    assert_eq!(posts, 1, "one status message, edited by every button");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_lead_tools_start_threads_edit_and_delete_own_messages_and_manage_channels_when_allowed() {
    let stand_in = SlackStandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = start_hub(&sqlite_file(dir.path()), &living_flags(&stand_in));
    let lead = hub.register_agent("lead-one", true).await;
    let worker = hub.register_agent("zeta-worker", false).await;
    let lead_client = connect_http(&hub, Some(&lead), Revision::Initialize).await;

    let started =
        ok(&lead_client, "slack-start-thread", json!({"channelId": "C1", "message": "Release train"})).await;
    let ts = started["ts"].as_str().unwrap().to_string();
    assert_eq!(started["messageTs"], ts.as_str());
    let thread = stand_in.wait_message("the thread's first message", |m| m.ts == ts).await;
    assert_eq!((thread.thread_ts.clone(), thread.username.as_deref()), (None, Some("lead-one")));
    assert_eq!(thread.blocks[0]["text"]["text"], "Release train");
    ok(&lead_client, "slack-post", json!({"channelId": "C1", "threadTs": ts, "message": "first stop"})).await;
    stand_in.wait_message("a reply in the thread", |m| m.thread_ts.as_deref() == Some(&ts)).await;

    let p_form = format!("p{}", ts.replace('.', ""));
    ok(
        &lead_client,
        "slack-update",
        json!({"channelId": "C1", "messageTs": p_form, "message": "Release train (moved)"}),
    )
    .await;
    stand_in.wait_message("the edit", |m| m.ts == ts && m.text == "Release train (moved)").await;

    // A person's message is not the bot's to edit or delete; a bad ts is a bad request.
    stand_in.put_human_message("C1", "1700000000.000100", "my own words").await;
    let why = refused(
        &lead_client,
        "slack-update",
        json!({"channelId": "C1", "messageTs": "1700000000.000100", "message": "rewritten"}),
    )
    .await;
    assert!(why.contains("only change messages it posted"), "{why}");
    let why =
        refused(&lead_client, "slack-delete", json!({"channelId": "C1", "messageTs": "1700000000.000100"}))
            .await;
    assert!(why.contains("only change messages it posted"), "{why}");
    let why =
        refused(&lead_client, "slack-delete", json!({"channelId": "C1", "messageTs": "yesterday"})).await;
    assert!(why.contains("not a Slack message timestamp"), "{why}");
    let permalink = format!("https://acme.slack.com/archives/C1/{p_form}");
    ok(&lead_client, "slack-delete", json!({"channelId": "C1", "messageTs": permalink})).await;
    assert!(stand_in.thread("C1", &ts).await.len() == 1, "the reply stays");
    let deleted = stand_in.calls("chat.delete").await;
    assert_eq!(deleted.last().unwrap()["ts"], ts.as_str());

    // Workers have none of these tools.
    let worker_client = connect_http(&hub, Some(&worker), Revision::Initialize).await;
    refused(&worker_client, "slack-start-thread", json!({"channelId": "C1", "message": "hi"})).await;
    refused(&worker_client, "slack-delete", json!({"channelId": "C1", "messageTs": ts})).await;

    // Channels: refused on this hub, which did not opt in.
    let why = refused(&lead_client, "slack-create-channel", json!({"name": "release-train"})).await;
    assert!(why.contains("--slack-channel-management"), "{why}");
    assert!(stand_in.calls("conversations.create").await.is_empty());

    // A hub that opted in creates, invites to and archives channels.
    let other_dir = tempfile::tempdir().unwrap();
    let mut flags = living_flags(&stand_in);
    flags.push("--slack-channel-management".into());
    let managing = start_hub(&sqlite_file(other_dir.path()), &flags);
    let lead = managing.register_agent("lead-two", true).await;
    let lead_client = connect_http(&managing, Some(&lead), Revision::Initialize).await;
    let created =
        ok(&lead_client, "slack-create-channel", json!({"name": "#Release Train", "isPrivate": true})).await;
    assert_eq!(
        (created["channelId"].as_str(), created["name"].as_str()),
        (Some("CNEW1"), Some("release-train"))
    );
    let create = stand_in.calls("conversations.create").await;
    assert_eq!(create[0], json!({"name": "release-train", "is_private": true}));
    ok(&lead_client, "slack-invite-to-channel", json!({"channelId": "CNEW1", "userIds": ["U1", "U2"]})).await;
    assert_eq!(stand_in.calls("conversations.invite").await[0]["users"], "U1,U2");
    refused(&lead_client, "slack-invite-to-channel", json!({"channelId": "CNEW1", "userIds": []})).await;
    ok(&lead_client, "slack-archive-channel", json!({"channelId": "CNEW1"})).await;
    assert_eq!(stand_in.calls("conversations.archive").await[0]["channel"], "CNEW1");
}
