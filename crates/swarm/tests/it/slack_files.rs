//! `slack-upload-file` and `slack-download-file` through the real hub against the Slack
//! stand-in, which keeps files as Slack does (upload URL, upload, completion; files.info
//! and a download that needs the bot token): who may share or fetch what, the size
//! limit, the hub's own files out of reach, and the app lacking its file scopes.

use std::sync::atomic::Ordering;

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::json;

use crate::{
    hub::{Hub, sqlite_file},
    mcp_client::{Revision, connect_http, ok, refused},
    slack_stand_in::{BOT_TOKEN, BOT_USER, SlackStandIn},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_shared_and_fetched_in_the_threads_their_agents_answer_in() {
    let stand_in = SlackStandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let flags = [
        "--slack-bot-token",
        BOT_TOKEN,
        "--slack-app-token",
        "xapp-test",
        "--slack-api-url",
        stand_in.api_url.as_str(),
        "--slack-allowed-user-ids",
        "U1",
    ];
    let hub = Hub::start_with(&sqlite_file(dir.path()), None, &flags);
    stand_in.wait_connected(1).await;
    let lead = hub.register_agent("lead-one", true).await;
    let worker = hub.register_agent("worker-one", false).await;
    let stranger = hub.register_agent("worker-two", false).await;
    let lead_client = connect_http(&hub, Some(&lead), Revision::Initialize).await;
    let worker_client = connect_http(&hub, Some(&worker), Revision::Initialize).await;
    let stranger_client = connect_http(&hub, Some(&stranger), Revision::Initialize).await;

    let mention = json!({"type": "app_mention", "user": "U1", "channel": "C1", "ts": "500.1",
        "text": format!("<@{BOT_USER}> the build log is attached, what broke?")});
    stand_in.push_event("env-1", "Ev1", mention).await;
    let (_, polled) = hub.get("/api/poll?wait=10", Some(&lead)).await;
    let message_id = polled["trigger"]["messages"][0]["id"].as_str().expect("an inbox message").to_string();

    // The lead shares a file in the message's thread, through Slack's three-step upload.
    let shared = ok(
        &lead_client,
        "slack-upload-file",
        json!({"inboxMessageId": message_id, "content": STANDARD.encode("first look: a flaky test"),
               "filename": "notes.txt", "initialComment": "my notes"}),
    )
    .await;
    let file = stand_in.wait_shared_file("notes.txt").await;
    assert_eq!(shared["fileId"].as_str().map(|id| id.starts_with('F')), Some(true), "{shared}");
    assert_eq!(file.bytes, b"first look: a flaky test");
    assert_eq!(file.shares, [("C1".to_string(), "500.1".to_string())]);
    assert_eq!(file.initial_comment.as_deref(), Some("my notes"));

    // Delegated, the thread is the worker's: it shares there, a stranger does not.
    let delegated =
        ok(&lead_client, "inbox-delegate", json!({"inboxMessageId": message_id, "agentId": worker})).await;
    let task_id = delegated["task"]["id"].as_str().unwrap().to_string();
    ok(
        &worker_client,
        "slack-upload-file",
        json!({"taskId": task_id, "content": STANDARD.encode("fixed in #42"), "filename": "report.txt"}),
    )
    .await;
    assert_eq!(stand_in.wait_shared_file("report.txt").await.shares[0].1, "500.1");
    let reason = refused(
        &stranger_client,
        "slack-upload-file",
        json!({"taskId": task_id, "content": STANDARD.encode("x"), "filename": "x.txt"}),
    )
    .await;
    assert!(reason.contains("neither the assignee nor the creator"), "{reason}");
    let reason = refused(
        &worker_client,
        "slack-upload-file",
        json!({"channelId": "C1", "content": STANDARD.encode("x"), "filename": "x.txt"}),
    )
    .await;
    assert!(reason.contains("only the lead"), "{reason}");

    // The hub's own files are out of reach, and inline content has a limit.
    let reason =
        refused(&lead_client, "slack-upload-file", json!({"channelId": "C1", "filePath": "/etc/passwd"}))
            .await;
    assert!(reason.contains("content (base64)"), "{reason}");
    let too_big = STANDARD.encode(vec![b'a'; 2 * 1024 * 1024 + 1]);
    let reason = refused(
        &lead_client,
        "slack-upload-file",
        json!({"channelId": "C1", "content": too_big, "filename": "big.bin"}),
    )
    .await;
    assert!(reason.contains("2 MiB"), "{reason}");
    let reason = refused(
        &lead_client,
        "slack-upload-file",
        json!({"channelId": "C1", "content": "%%%", "filename": "x"}),
    )
    .await;
    assert!(reason.contains("base64"), "{reason}");

    // Downloads: the worker fetches what the person attached in its thread, not elsewhere.
    stand_in.put_file("FLOG0001", "build.log", b"error: test_flaky failed\n", "C1", "500.1").await;
    stand_in.put_file("FHR00001", "salaries.csv", b"name,salary\n", "C9", "77.1").await;
    let fetched = ok(&worker_client, "slack-download-file", json!({"fileId": "FLOG0001"})).await;
    assert_eq!(
        (fetched["file"]["name"].as_str(), fetched["file"]["size"].as_u64()),
        (Some("build.log"), Some(25))
    );
    let bytes = STANDARD.decode(fetched["content"].as_str().unwrap()).unwrap();
    assert_eq!(bytes, b"error: test_flaky failed\n");
    let reason = refused(&worker_client, "slack-download-file", json!({"fileId": "FHR00001"})).await;
    assert!(reason.contains("thread of one of its tasks"), "{reason}");
    let fetched = ok(&lead_client, "slack-download-file", json!({"fileId": "FHR00001"})).await;
    assert_eq!(STANDARD.decode(fetched["content"].as_str().unwrap()).unwrap(), b"name,salary\n");
    let reason = refused(&lead_client, "slack-download-file", json!({"url": "https://evil.example/x"})).await;
    assert!(reason.contains("fileId"), "{reason}");
    let reason =
        refused(&lead_client, "slack-download-file", json!({"fileId": "FLOG0001", "savePath": "/tmp"})).await;
    assert!(reason.contains("hub's machine"), "{reason}");

    // An app installed without the file scopes: the error says which scope to add.
    stand_in.without_file_scopes.store(true, Ordering::SeqCst);
    let reason = refused(
        &lead_client,
        "slack-upload-file",
        json!({"channelId": "C1", "content": STANDARD.encode("x"), "filename": "x.txt"}),
    )
    .await;
    assert!(
        reason.contains("missing_scope") && reason.contains("files:write") && reason.contains("reinstall"),
        "{reason}"
    );
    let reason = refused(&lead_client, "slack-download-file", json!({"fileId": "FLOG0001"})).await;
    assert!(reason.contains("files:read"), "{reason}");
}
