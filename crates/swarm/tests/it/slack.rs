//! The Slack bridge against a local Slack stand-in, through the real hub: Socket Mode
//! (a mention to the lead → inbox, its poll, `slack-reply`, `inbox-delegate`, the
//! worker's completion posted once, even across a restart; a worker-routed message → a
//! task) and the Events API (signatures, URL verification, duplicate deliveries).

use serde_json::{Value, json};

use crate::{
    hub::{Database, Hub, send, sqlite_file},
    mcp_client::{Revision, connect_http, ok, refused, tool_names},
    runner::{Runner, RunnerSetup, registered},
    slack_stand_in::{BOT_USER, SlackStandIn},
};

const SECRET: &str = "test-signing-secret";

fn slack_flags(stand_in: &SlackStandIn, socket_mode: bool) -> Vec<String> {
    let mut flags = vec![
        "--slack-bot-token".to_string(),
        "xoxb-test".into(),
        "--slack-signing-secret".into(),
        SECRET.into(),
        "--slack-api-url".into(),
        stand_in.api_url.clone(),
        "--slack-allowed-user-ids".into(),
        "U1,U2".into(),
    ];
    if socket_mode {
        flags.extend(["--slack-app-token".to_string(), "xapp-test".into()]);
    }
    flags
}

fn start_hub(database: &Database, flags: &[String]) -> Hub {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    Hub::start_with(database, None, &flags)
}

async fn poll(hub: &Hub, agent: &str, wait: u64) -> Value {
    let (status, body) = hub.get(&format!("/api/poll?wait={wait}"), Some(agent)).await;
    assert_eq!(status, 200, "{body}");
    body["trigger"].clone()
}

fn mention(ts: &str, text: &str, thread_ts: Option<&str>) -> Value {
    let mut event = json!({
        "type": "app_mention", "user": "U1", "channel": "C1", "ts": ts,
        "text": format!("<@{BOT_USER}> {text}"),
    });
    if let Some(thread) = thread_ts {
        event["thread_ts"] = json!(thread);
    }
    event
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_socket_mode_inbox_reply_delegate_and_completion_once() {
    let stand_in = SlackStandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let flags = slack_flags(&stand_in, true);
    let hub = start_hub(&database, &flags);
    stand_in.wait_connected(1).await;
    let lead = hub.register_agent("lead-one", true).await;
    let worker = hub.register_agent("zeta-worker", false).await;

    // A mention of the bot goes to the lead's inbox, never a task.
    stand_in.push_event("env-1", "Ev1", mention("100.1", "what is the release status?", None)).await;
    let trigger = poll(&hub, &lead, 10).await;
    assert_eq!(trigger["type"], "slack_inbox_message", "{trigger}");
    assert_eq!(trigger["count"], 1);
    let message = &trigger["messages"][0];
    assert_eq!(message["status"], "processing");
    assert_eq!(message["slackChannelId"], "C1");
    assert_eq!(message["slackThreadTs"], "100.1");
    assert_eq!(message["slackUserId"], "U1");
    assert_eq!(message["matchedText"], "bot mention");
    assert_eq!(message["content"], "what is the release status?");
    let message_id = message["id"].as_str().unwrap().to_string();
    assert!(poll(&hub, &lead, 0).await.is_null(), "the lead's poll returns the message once");
    let (_, tasks) = hub.get("/api/tasks", None).await;
    assert_eq!(tasks["total"], 0, "a message to the lead creates no task");
    stand_in
        .wait_post("the acknowledgement in the thread", |post| {
            post["thread_ts"] == "100.1" && post["text"].as_str().is_some_and(|t| t.contains("inbox"))
        })
        .await;

    // The MCP prompt `slack-inbox` is the runner's inbox prompt for the same messages: one text.
    let lead_client = connect_http(&hub, Some(&lead), Revision::Initialize).await;
    let prompt = lead_client
        .get_prompt(rmcp::model::GetPromptRequestParams::new("slack-inbox"))
        .await
        .expect("prompts/get slack-inbox");
    let text =
        serde_json::to_value(&prompt.messages[0]).unwrap()["content"]["text"].as_str().unwrap().to_string();
    let field = |key: &str| message[key].as_str().unwrap().to_string();
    let (id, user, channel, matched, content) =
        (field("id"), field("slackUserId"), field("slackChannelId"), field("matchedText"), field("content"));
    let entry = swarm_domain::prompts::inbox::Entry {
        id: &id,
        slack_user_id: &user,
        slack_channel_id: &channel,
        matched_text: &matched,
        content: &content,
    };
    assert_eq!(text, swarm_domain::prompts::inbox::prompt(&[entry]));
    assert!(
        text.contains(&format!(
            "inboxMessageId: {message_id}; from user U1 in channel C1; routed because: bot mention"
        )),
        "{text}"
    );
    assert!(text.contains("what is the release status?") && text.contains("inbox-delegate"), "{text}");
    let reference = rmcp::model::Reference::for_prompt("slack-inbox");
    let argument = rmcp::model::ArgumentInfo::new("inboxMessageId", &message_id[..6]);
    let completion = lead_client
        .complete(rmcp::model::CompleteRequestParams::new(reference, argument))
        .await
        .expect("completion/complete");
    assert_eq!(completion.completion.values, [message_id.as_str()], "the lead's open message completes");

    // slack-reply posts in that thread under the lead's persona.
    ok(&lead_client, "slack-reply", json!({"inboxMessageId": message_id, "message": "Shipping Friday."}))
        .await;
    let reply = stand_in.wait_post("the lead's reply", |post| post["text"] == "Shipping Friday.").await;
    assert_eq!(reply["channel"], "C1");
    assert_eq!(reply["thread_ts"], "100.1");
    assert_eq!(reply["username"], "lead-one");
    assert_eq!(reply["icon_emoji"], ":crown:");
    let fetched = ok(&lead_client, "get-inbox-message", json!({"inboxMessageId": message_id})).await;
    assert_eq!(fetched["inboxMessage"]["status"], "responded");

    // The lead reads Slack and posts in a channel; a worker may not post.
    let channels = ok(&lead_client, "slack-list-channels", json!({})).await;
    assert!(channels["channels"].to_string().contains("general"), "{channels}");
    let thread = ok(&lead_client, "slack-read", json!({"channelId": "C1", "threadTs": "100.1"})).await;
    assert!(thread["messages"].to_string().contains("first message of the thread"), "{thread}");
    ok(&lead_client, "slack-post", json!({"channelId": "C1", "message": "Standup in 5 minutes"})).await;
    let posted = stand_in.wait_post("the lead's post", |post| post["text"] == "Standup in 5 minutes").await;
    assert_eq!(posted["channel"], "C1");
    let worker_client = connect_http(&hub, Some(&worker), Revision::Initialize).await;
    refused(&worker_client, "slack-post", json!({"channelId": "C1", "message": "hello all"})).await;

    // inbox-delegate creates a worker task carrying the Slack thread.
    stand_in.push_event("env-2", "Ev2", mention("200.1", "please rebuild the docs site", None)).await;
    let trigger = poll(&hub, &lead, 10).await;
    let second_id = trigger["messages"][0]["id"].as_str().unwrap().to_string();
    let delegated =
        ok(&lead_client, "inbox-delegate", json!({"inboxMessageId": second_id, "agentId": worker})).await;
    let task = &delegated["task"];
    assert_eq!(task["source"], "slack");
    assert_eq!(task["agentId"], worker.as_str());
    assert_eq!(task["slackChannelId"], "C1");
    assert_eq!(task["slackThreadTs"], "200.1");
    assert_eq!(delegated["inboxMessage"]["status"], "delegated");
    let task_id = task["id"].as_str().unwrap().to_string();

    // A worker reads the thread of its own task, and nothing else the bot sees.
    let own = ok(&worker_client, "slack-read", json!({"channelId": "C1", "threadTs": "200.1"})).await;
    assert!(own["messages"].is_array(), "{own}");
    let why = refused(&worker_client, "slack-read", json!({"channelId": "C1", "threadTs": "100.1"})).await;
    assert!(why.contains("thread of one of its tasks"), "{why}");
    refused(&worker_client, "slack-read", json!({"channelId": "C1"})).await;
    let worker_tools = tool_names(&worker_client).await;
    assert!(!worker_tools.iter().any(|tool| tool == "slack-list-channels"), "{worker_tools:?}");

    // GET /api/inbox (the dashboard's view): the operator sees the lead's inbox by default;
    // an agent sees only its own.
    let (status, inbox) = hub.get("/api/inbox?limit=10", None).await;
    assert_eq!(status, 200, "{inbox}");
    let statuses: Vec<&str> =
        inbox["messages"].as_array().unwrap().iter().map(|m| m["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["responded", "delegated"], "{inbox}");
    assert_eq!(inbox["messages"][1]["delegatedToTaskId"], task_id.as_str());
    let (_, open) = hub.get("/api/inbox?status=unread,processing", None).await;
    assert_eq!(open["messages"], json!([]), "{open}");
    let (status, _) = hub.get(&format!("/api/inbox?agentId={lead}"), Some(&worker)).await;
    assert_eq!(status, 403);
    let (status, own) = hub.get("/api/inbox", Some(&lead)).await;
    assert_eq!(status, 200);
    assert_eq!(own["messages"].as_array().unwrap().len(), 2);

    // The worker finishes; its output reaches the thread once, as mrkdwn, as the worker: in
    // the task's living message (posted when the task was taken, or with its ending).
    let assigned = poll(&hub, &worker, 10).await;
    assert_eq!(assigned["taskId"], task_id.as_str());
    let finish = json!({"status": "completed", "output": "**Rebuilt** the docs"});
    let (status, _) = hub.post(&format!("/api/tasks/{task_id}/finish"), Some(&worker), finish).await;
    assert_eq!(status, 200);
    let is_done = |text: &str| text.contains("*Rebuilt* the docs");
    let done = stand_in
        .wait_message("the worker's completion", |m| {
            m.thread_ts.as_deref() == Some("200.1") && is_done(&m.text)
        })
        .await;
    assert_eq!(done.username.as_deref(), Some("zeta-worker"));

    // Once, across a restart: the new hub sweeps too and finds the ending rendered.
    assert!(hub.terminate(), "the hub stops on SIGTERM");
    let hub = start_hub(&database, &flags);
    stand_in.wait_connected(2).await;
    hub.slack_sweeps().await;
    let thread = stand_in.thread("C1", "200.1").await;
    let completions: Vec<_> = thread.iter().filter(|m| is_done(&m.text)).collect();
    assert_eq!(completions.len(), 1, "the completion is shown exactly once: {thread:?}");

    // A message naming a worker becomes that worker's task.
    let named = json!({"type": "message", "user": "U2", "channel": "C1", "ts": "300.1",
                       "text": "zeta: the staging deploy is red"});
    stand_in.push_event("env-3", "Ev3", named).await;
    let trigger = poll(&hub, &worker, 10).await;
    assert_eq!(trigger["type"], "task_assigned", "{trigger}");
    assert_eq!(trigger["task"]["source"], "slack");
    assert_eq!(trigger["task"]["slackThreadTs"], "300.1");
    assert_eq!(trigger["task"]["slackUserId"], "U2");

    // Its progress, reported through another process on the same database (which has no
    // Slack of its own), reaches the thread's living message through this hub's sweep.
    let named_task = trigger["task"]["id"].as_str().unwrap().to_string();
    let other = Hub::start(&database, None);
    let note = json!({"progress": "half of the **staging** checks pass"});
    let (status, _) = other.post(&format!("/api/tasks/{named_task}/progress"), Some(&worker), note).await;
    assert_eq!(status, 200);
    let is_note = |text: &str| text.contains("half of the *staging* checks");
    let shown = stand_in
        .wait_message("the progress note", |m| m.thread_ts.as_deref() == Some("300.1") && is_note(&m.text))
        .await;
    assert_eq!(shown.username.as_deref(), Some("zeta-worker"));
    hub.slack_sweeps().await;
    let posts_with_note = stand_in
        .posts()
        .await
        .into_iter()
        .filter(|post| is_note(post["text"].as_str().unwrap_or("")))
        .count();
    assert!(posts_with_note <= 1, "a progress note is shown in the living message, not posted again");
    drop(other);

    // A user who is not allowed is ignored.
    let stranger = json!({"type": "app_mention", "user": "U9", "channel": "C1", "ts": "400.1",
                          "text": format!("<@{BOT_USER}> let me in")});
    stand_in.push_event("env-4", "Ev4", stranger).await;
    // (The lead may first hear of the finished delegated task.)
    for _ in 0..2 {
        let trigger = poll(&hub, &lead, 1).await;
        assert_ne!(trigger["type"], "slack_inbox_message", "a stranger's message reaches nobody: {trigger}");
    }
}

fn signed(hub: &Hub, body: &str, timestamp: i64, secret: &str) -> reqwest::RequestBuilder {
    let signature = swarm_slack::signature::sign(secret, timestamp, body.as_bytes());
    reqwest::Client::new()
        .post(hub.url("/slack/events"))
        .header("content-type", "application/json")
        .header("x-slack-request-timestamp", timestamp.to_string())
        .header("x-slack-signature", signature)
        .body(body.to_string())
}

fn now_seconds() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_events_api_checks_signatures_and_deduplicates() {
    let stand_in = SlackStandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = start_hub(&sqlite_file(dir.path()), &slack_flags(&stand_in, false));
    let lead = hub.register_agent("lead-one", true).await;

    let challenge = json!({"type": "url_verification", "challenge": "abc123"}).to_string();
    let (status, body) = send(signed(&hub, &challenge, now_seconds(), SECRET)).await;
    assert_eq!((status, body), (200, json!({"challenge": "abc123"})));

    let (status, body) = send(signed(&hub, &challenge, now_seconds(), "wrong-secret")).await;
    assert_eq!(status, 401, "bad signature: {body}");
    assert!(body["error"].is_string());
    let (status, _) = send(signed(&hub, &challenge, now_seconds() - 600, SECRET)).await;
    assert_eq!(status, 401, "a stale request is refused");
    let unsigned = reqwest::Client::new().post(hub.url("/slack/events")).body(challenge.clone());
    assert_eq!(send(unsigned).await.0, 401);

    let event = json!({"type": "event_callback", "event_id": "EvSame",
                       "event": mention("500.1", "hello from the Events API", None)})
    .to_string();
    for _ in 0..3 {
        let (status, _) = send(signed(&hub, &event, now_seconds(), SECRET)).await;
        assert_eq!(status, 200);
    }
    let trigger = poll(&hub, &lead, 10).await;
    assert_eq!(trigger["count"], 1, "{trigger}");
    assert_eq!(trigger["messages"][0]["content"], "hello from the Events API");
    stand_in.wait_post("the acknowledgement", |post| post["thread_ts"] == "500.1").await;
    assert!(poll(&hub, &lead, 2).await.is_null(), "three deliveries, one inbox message");
    let acks = stand_in.posts().await.into_iter().filter(|post| post["thread_ts"] == "500.1").count();
    assert_eq!(acks, 1, "acknowledged once");
}

/// A lead runner with three slots, while twelve mentions arrive: its concurrent runs
/// share the inbox, and each message is answered in its thread exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_lead_runs_answer_each_inbox_message_exactly_once() {
    let stand_in = SlackStandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = start_hub(&sqlite_file(dir.path()), &slack_flags(&stand_in, false));
    let setup = RunnerSetup { role: "lead", ..RunnerSetup::worker(dir.path()) }
        .env("MAX_CONCURRENT_TASKS", "3")
        .env("STAND_IN_SLEEP_MS", "300");
    let lead = Runner::start(&hub, setup);
    assert_eq!(registered(&hub, &lead).await["isLead"], true);

    // Two users, so that neither reaches the limit of 10 routed messages a minute.
    let threads: Vec<String> = (0..12).map(|n| format!("700.{n}")).collect();
    for (n, thread) in threads.iter().enumerate() {
        let mut message = mention(thread, &format!("question number {n}"), None);
        message["user"] = json!(if n % 2 == 0 { "U1" } else { "U2" });
        let event =
            json!({"type": "event_callback", "event_id": format!("EvMany{n}"), "event": message}).to_string();
        let (status, _) = send(signed(&hub, &event, now_seconds(), SECRET)).await;
        assert_eq!(status, 200);
    }

    let is_answer = |post: &Value| post["text"].as_str().is_some_and(|text| text.contains("stand-in answer"));
    for thread in &threads {
        stand_in
            .wait_post("an answer in every thread", |post| post["thread_ts"] == *thread && is_answer(post))
            .await;
    }
    let answers = stand_in.posts().await.into_iter().filter(|post| is_answer(post)).collect::<Vec<_>>();
    for thread in &threads {
        let in_thread = answers.iter().filter(|post| post["thread_ts"] == *thread).count();
        assert_eq!(in_thread, 1, "thread {thread} answered {in_thread} times\n{}", lead.output());
    }
    assert_eq!(answers.len(), threads.len());
}
