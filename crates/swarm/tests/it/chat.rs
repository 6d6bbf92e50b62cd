//! Channels over real HTTP against the real binary: a mention wakes the mentioned
//! agent's parked poll with `unread_mentions`, reading the channel clears it, `/task`
//! messages create tasks, and bad input gets a JSON 4xx.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::hub::{Hub, TEST_RUNNER_ID, sqlite_file};

const GENERAL: &str = "00000000-0000-7000-8000-000000000001";

async fn poll(hub: &Hub, agent: &str) -> Value {
    let (status, body) = hub.poll_as_runner(agent, 0).await;
    assert_eq!(status, 200, "{body}");
    body["trigger"].clone()
}

#[tokio::test]
async fn a_mention_wakes_the_agent_and_reading_clears_it() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let alice = hub.register_agent("alice", false).await;
    let bob = hub.register_agent("bob", false).await;

    let (status, body) = hub.get("/api/channels", None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["channels"].as_array().unwrap().iter().any(|c| c["name"] == "general"), "{body}");

    let started = Instant::now();
    let parked = {
        let url = hub.url("/api/poll?wait=10");
        let bob = bob.clone();
        tokio::spawn(async move {
            let response = reqwest::Client::new()
                .get(url)
                .header("X-Agent-ID", bob)
                .header("X-Runner-ID", TEST_RUNNER_ID)
                .send()
                .await
                .unwrap();
            (response.status().as_u16(), response.json::<Value>().await.unwrap(), started.elapsed())
        })
    };
    hub.parked_polls(1).await;
    assert!(!parked.is_finished(), "with nothing to do, the poll waits");

    let (status, posted) = hub
        .post(
            &format!("/api/channels/{GENERAL}/messages"),
            Some(&alice),
            json!({"content": "@bob can you look? cc @alice @nobody"}),
        )
        .await;
    assert_eq!(status, 201, "{posted}");
    assert_eq!(posted["mentions"], json!([bob]), "the author and unknown names are dropped");
    assert_eq!(posted["agentId"], alice.as_str());

    let (status, body, elapsed) = parked.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(body["trigger"]["type"], "unread_mentions", "{body}");
    // The reference's names (issue 20).
    assert_eq!(body["trigger"]["claimedChannels"], json!([GENERAL]));
    assert_eq!(body["trigger"]["mentionsCount"], 1);
    assert_eq!(body["trigger"]["messages"][0]["id"], posted["id"]);
    assert!(elapsed < Duration::from_secs(10), "woken by the mention ({elapsed:?})");

    // A person replies in the thread, without X-Agent-ID.
    let (status, reply) = hub
        .post(
            &format!("/api/channels/{GENERAL}/messages"),
            None,
            json!({"content": "thanks", "replyToId": posted["id"]}),
        )
        .await;
    assert_eq!(status, 201, "{reply}");
    assert_eq!(reply["agentId"], Value::Null);
    let (status, thread) = hub
        .get(&format!("/api/channels/{GENERAL}/messages/{}/thread", posted["id"].as_str().unwrap()), None)
        .await;
    assert_eq!(status, 200, "{thread}");
    assert_eq!(thread["messages"].as_array().unwrap().len(), 2);

    // Reading the channel clears the mention: nothing comes back, even after the claim.
    let (status, read) = hub.get(&format!("/api/channels/{GENERAL}/messages?limit=10"), Some(&bob)).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["messages"].as_array().unwrap().len(), 2, "{read}");
    assert_eq!(poll(&hub, &bob).await, Value::Null);

    // A new mention is a new trigger; reading clears it before any poll.
    let (status, _) = hub
        .post(&format!("/api/channels/{GENERAL}/messages"), None, json!({"content": "hi", "mentions": [bob]}))
        .await;
    assert_eq!(status, 201);
    let (status, _) = hub.get(&format!("/api/channels/{GENERAL}/messages"), Some(&bob)).await;
    assert_eq!(status, 200);
    assert_eq!(poll(&hub, &bob).await, Value::Null, "read before the poll");
}

#[tokio::test]
async fn a_task_message_creates_one_task_per_mentioned_agent() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let lead = hub.register_agent("lead", false).await;
    let one = hub.register_agent("one", false).await;
    let two = hub.register_agent("two", false).await;

    let (status, posted) = hub
        .post(
            &format!("/api/channels/{GENERAL}/messages"),
            Some(&lead),
            json!({"content": "/task @one fix the build", "mentions": [two]}),
        )
        .await;
    assert_eq!(status, 201, "{posted}");
    let tasks = posted["taskIds"].as_array().unwrap();
    assert_eq!(tasks.len(), 2, "{posted}");
    let mut assignees = Vec::new();
    for id in tasks {
        let (status, task) = hub.get(&format!("/api/tasks/{}", id.as_str().unwrap()), None).await;
        assert_eq!(status, 200, "{task}");
        assert_eq!(task["status"], "pending", "{task}");
        assert_eq!(task["creatorAgentId"], lead.as_str());
        assignees.push(task["agentId"].as_str().unwrap().to_string());
    }
    assignees.sort();
    let mut expected = vec![one.clone(), two];
    expected.sort();
    assert_eq!(assignees, expected);

    let (status, body) = hub
        .post(
            &format!("/api/channels/{GENERAL}/messages"),
            Some(&lead),
            json!({"content": "/task nobody here"}),
        )
        .await;
    assert_eq!(status, 400, "a /task message needs a mention: {body}");

    // As with send-task, the swarm's lead is never given work.
    let boss = uuid::Uuid::new_v4().to_string();
    let (status, _) = hub.post("/api/agents", Some(&boss), json!({"name": "boss", "isLead": true})).await;
    assert_eq!(status, 201);
    let (_, before) = hub.get("/api/tasks", None).await;
    let (status, body) = hub
        .post(
            &format!("/api/channels/{GENERAL}/messages"),
            Some(&one),
            json!({"content": "/task @boss @two deploy"}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("the lead"), "{body}");
    let (_, after) = hub.get("/api/tasks", None).await;
    assert_eq!(before["total"], after["total"], "no task was created");
}

#[tokio::test]
async fn bad_chat_input_gets_a_json_4xx() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let alice = hub.register_agent("alice", false).await;
    let messages = format!("/api/channels/{GENERAL}/messages");
    let unknown = uuid::Uuid::new_v4();

    let cases: Vec<(u16, Value)> = vec![
        hub.post(&messages, Some(&alice), json!({"content": "   "})).await,
        hub.post(&messages, Some(&alice), json!({"content": "a\u{0}b"})).await,
        hub.post(&messages, Some(&alice), json!({"content": "x".repeat(20_001)})).await,
        hub.post(&messages, Some(&alice), json!({"content": "hi", "mentions": [unknown]})).await,
        hub.post(&messages, Some(&alice), json!({"content": "hi", "mentions": ["nope"]})).await,
        hub.post(&messages, Some(&alice), json!({"content": "hi", "replyToId": unknown})).await,
        hub.post(&messages, Some(&alice), json!({"content": "hi", "agentId": unknown})).await,
        hub.post(&messages, None, json!({"nocontent": 1})).await,
        hub.post(&format!("/api/channels/{unknown}/messages"), None, json!({"content": "hi"})).await,
        hub.post("/api/channels/not-a-uuid/messages", None, json!({"content": "hi"})).await,
        hub.get(&format!("{messages}?limit=0"), None).await,
        hub.get(&format!("{messages}?limit=101"), None).await,
        hub.get(&format!("{messages}?limit=abc"), None).await,
        hub.get(&format!("{messages}?since=yesterday"), None).await,
        hub.get(&format!("{messages}/{unknown}/thread"), None).await,
        hub.get(&format!("/api/channels/{unknown}/messages"), None).await,
    ];
    for (index, (status, body)) in cases.into_iter().enumerate() {
        assert!((400..500).contains(&status), "case {index}: {status} {body}");
        assert!(body["error"].is_string(), "case {index}: a JSON error body: {body}");
    }
}

#[tokio::test]
async fn the_chat_tools_post_read_and_keep_direct_channels_private() {
    use crate::mcp_client::{Revision, connect_http, new_agent_id, ok, refused};

    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let (alice, bob, carol) = (new_agent_id(), new_agent_id(), new_agent_id());
    let alice_client = connect_http(&hub, Some(&alice), Revision::Initialize).await;
    let bob_client = connect_http(&hub, Some(&bob), Revision::Initialize).await;
    let carol_client = connect_http(&hub, Some(&carol), Revision::Initialize).await;
    ok(&alice_client, "join-swarm", json!({"name": "alice"})).await;
    ok(&bob_client, "join-swarm", json!({"name": "bob"})).await;
    ok(&carol_client, "join-swarm", json!({"name": "carol"})).await;

    let created =
        ok(&alice_client, "create-channel", json!({"name": "pair", "type": "dm", "participants": [bob]}))
            .await;
    let pair = created["channel"]["id"].as_str().unwrap().to_string();
    let reason = refused(&alice_client, "create-channel", json!({"name": "pair"})).await;
    assert!(!reason.is_empty());
    let reason = refused(&alice_client, "create-channel", json!({"name": "no spaces"})).await;
    assert!(reason.contains("channel name"), "{reason}");

    let posted = ok(&alice_client, "post-message", json!({"channelId": pair, "content": "@bob ping"})).await;
    assert_eq!(posted["chatMessage"]["mentions"], json!([bob]));
    let listed = ok(&bob_client, "list-channels", json!({})).await;
    assert_eq!(listed["unreadMentions"][&pair], 1, "{listed}");
    let names: Vec<&str> =
        listed["channels"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["general", "pair"]);

    // Carol sees neither the channel nor its messages.
    let listed = ok(&carol_client, "list-channels", json!({})).await;
    assert_eq!(listed["channels"].as_array().unwrap().len(), 1, "{listed}");
    refused(&carol_client, "read-messages", json!({"channelId": pair})).await;
    refused(&carol_client, "post-message", json!({"channelId": pair, "content": "hi"})).await;

    let read = ok(&bob_client, "read-messages", json!({"channelId": pair, "mentionsOnly": true})).await;
    assert_eq!(read["messages"].as_array().unwrap().len(), 1);
    let listed = ok(&bob_client, "list-channels", json!({})).await;
    assert_eq!(listed["unreadMentions"], json!({}), "reading cleared the mention");

    let root = posted["chatMessage"]["id"].as_str().unwrap();
    ok(&bob_client, "post-message", json!({"channelId": pair, "content": "pong", "replyToId": root})).await;
    let thread = ok(&alice_client, "read-messages", json!({"channelId": pair, "threadId": root})).await;
    assert_eq!(thread["messages"].as_array().unwrap().len(), 2);
    refused(&alice_client, "read-messages", json!({"limit": 0})).await;
    refused(&alice_client, "post-message", json!({"content": "  "})).await;
}
