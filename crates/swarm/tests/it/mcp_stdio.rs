//! MCP over stdio: rmcp's client running the real `swarm mcp`, with no hub, on the
//! database a hub opens afterwards (or at the same time) and agrees with.

use serde_json::{Value, json};

use crate::{
    hub::{Database, Hub, sqlite_file},
    mcp_client::{
        UNREGISTERED_TOOLS, WORKER_TOOLS, connect_stdio, connect_stdio_watching, lead_tools, new_agent_id,
        ok, refused, tool_names,
    },
    support,
};

const INBOX_WORKER_TOOLS: [&str; 9] = [
    "get_next_task",
    "task_complete",
    "task_list",
    "task_get",
    "inbox_stats",
    "trigger_list",
    "trigger_create",
    "trigger_update",
    "trigger_delete",
];
const INBOX_TRIGGER_TOOLS: [&str; 8] = [
    "task_create",
    "task_get",
    "task_update",
    "task_cancel",
    "trigger_list",
    "trigger_create",
    "trigger_update",
    "trigger_delete",
];

fn names(groups: &[&[&str]]) -> Vec<String> {
    groups.iter().flat_map(|group| group.iter().map(|name| name.to_string())).collect()
}

fn id_of(content: &Value, pointer: &str) -> String {
    content
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no {pointer} in {content}"))
        .to_string()
}

#[tokio::test]
async fn mcp_stdio_works_without_a_hub_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    walk_without_a_hub(sqlite_file(dir.path())).await;
}

#[tokio::test]
async fn mcp_stdio_works_without_a_hub_postgres() {
    let database = support::postgres_database().await;
    walk_without_a_hub(database.database()).await;
}

/// Two `swarm mcp` processes, a lead and a worker, walk a task from offer to completion
/// with no hub running; a hub started afterwards on the same database shows the result.
async fn walk_without_a_hub(database: Database) {
    let lead = new_agent_id();
    let lead_client = connect_stdio(&database, Some(&lead), &[]).await;
    // Unregistered: join-swarm, the read-only tools, and the inbox tools open to anyone.
    let open_inbox: Vec<&str> = INBOX_WORKER_TOOLS
        .into_iter()
        .filter(|name| !["get_next_task", "task_complete"].contains(name))
        .collect();
    assert_eq!(tool_names(&lead_client).await, names(&[&UNREGISTERED_TOOLS, &open_inbox]));
    ok(&lead_client, "join-swarm", json!({"name": "lead", "lead": true})).await;
    let lead_inbox: Vec<&str> =
        INBOX_WORKER_TOOLS.into_iter().filter(|name| *name != "get_next_task").collect();
    assert_eq!(tool_names(&lead_client).await, names(&[&lead_tools(), &lead_inbox]));

    // Without AGENT_ID the process becomes the agent it joins as, and says its tools changed.
    let (worker_client, list_changed) = connect_stdio_watching(&database).await;
    let joined = ok(&worker_client, "join-swarm", json!({"name": "worker"})).await;
    let worker = id_of(&joined, "/yourAgentId");
    tokio::time::timeout(std::time::Duration::from_secs(10), list_changed.notified())
        .await
        .expect("notifications/tools/list_changed after join-swarm");
    assert_eq!(tool_names(&worker_client).await, names(&[&WORKER_TOOLS, &INBOX_WORKER_TOOLS]));
    let info = ok(&worker_client, "my-agent-info", json!({})).await;
    assert_eq!(info["yourAgentId"], worker.as_str());

    let sent = ok(
        &lead_client,
        "send-task",
        json!({"agentId": worker, "task": "port the parser", "offerMode": true}),
    )
    .await;
    let task_id = id_of(&sent, "/task/id");
    // The poll claims the offer for review; accepting from review works over MCP too.
    let polled = ok(&worker_client, "poll-task", json!({"waitSeconds": 0})).await;
    assert_eq!(polled["trigger"]["type"], "task_offered", "{polled}");
    assert_eq!(polled["task"]["id"], task_id.as_str());
    let accepted = ok(&worker_client, "task-action", json!({"action": "accept", "taskId": task_id})).await;
    assert_eq!(accepted["task"]["status"], "pending");
    ok(&worker_client, "store-progress", json!({"taskId": task_id, "progress": "lexer done"})).await;
    let done = ok(
        &worker_client,
        "store-progress",
        json!({"taskId": task_id, "status": "completed", "output": "merged"}),
    )
    .await;
    assert_eq!(done["task"]["status"], "completed");
    worker_client.cancel().await.ok();
    lead_client.cancel().await.ok();

    let hub = Hub::start(&database, None);
    let (status, task) = hub.get(&format!("/api/tasks/{task_id}"), None).await;
    assert_eq!(status, 200);
    assert_eq!((task["status"].as_str(), task["output"].as_str()), (Some("completed"), Some("merged")));
    assert_eq!(
        (task["agentId"].as_str(), task["progress"].as_str()),
        (Some(worker.as_str()), Some("lexer done"))
    );
    let (_, agents) = hub.get("/api/agents", None).await;
    assert_eq!(agents["agents"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn mcp_stdio_and_a_hub_share_one_database_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let hub = Hub::start(&database, None);
    let worker = new_agent_id();
    let (status, _) = hub.post("/api/agents", Some(&worker), json!({"name": "worker"})).await;
    assert_eq!(status, 201);
    let client = connect_stdio(&database, Some(&worker), &[]).await;
    assert_eq!(tool_names(&client).await, names(&[&WORKER_TOOLS, &INBOX_WORKER_TOOLS]));
    let created = ok(&client, "task-action", json!({"action": "create", "task": "from stdio"})).await;
    let task_id = id_of(&created, "/task/id");
    let (_, task) = hub.get(&format!("/api/tasks/{task_id}"), None).await;
    assert_eq!(
        (task["status"].as_str(), task["creatorAgentId"].as_str()),
        (Some("unassigned"), Some(worker.as_str()))
    );
    let (status, _) = hub.post(&format!("/api/tasks/{task_id}/claim"), Some(&worker), json!({})).await;
    assert_eq!(status, 200);
    let details = ok(&client, "get-task-details", json!({"taskId": task_id})).await;
    assert_eq!(details["task"]["status"], "pending");
}

#[tokio::test]
async fn mcp_stdio_offers_the_inbox_tools_by_session_role() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let trigger = connect_stdio(&database, None, &[("ATLAS_TRIGGER", "nightly")]).await;
    assert_eq!(tool_names(&trigger).await, names(&[&UNREGISTERED_TOOLS, &INBOX_TRIGGER_TOOLS]));
    let worker_id = new_agent_id();
    let worker = connect_stdio(&database, Some(&worker_id), &[]).await;
    ok(&worker, "join-swarm", json!({"name": "inbox-worker"})).await;

    let filed = ok(&trigger, "task_create", json!({"content": "check the nightly build"})).await;
    let first = id_of(&filed, "/task/id");
    assert_eq!(
        (filed["task"]["status"].as_str(), filed["task"]["channel"].as_str()),
        (Some("pending"), Some("mcp"))
    );
    let second = id_of(&ok(&trigger, "task_create", json!({"content": "never mind"})).await, "/task/id");
    let updated = ok(&trigger, "task_update", json!({"task_id": second, "content": "changed my mind"})).await;
    assert_eq!(updated["task"]["content"], "changed my mind", "{updated}");
    let reason = refused(&trigger, "task_update", json!({"task_id": second, "content": "  "})).await;
    assert!(reason.contains("must not be empty"), "{reason}");
    ok(&trigger, "task_cancel", json!({"task_id": second, "reason": "duplicate"})).await;

    let pending = ok(&worker, "task_list", json!({})).await;
    assert_eq!(pending["total"], 1);
    assert_eq!(pending["tasks"][0]["id"], first.as_str());
    assert_eq!(ok(&worker, "task_list", json!({"status": "cancelled"})).await["total"], 1);
    let reason = refused(&worker, "task_list", json!({"status": "later"})).await;
    assert!(reason.contains("unknown status"), "{reason}");

    let next = ok(&worker, "get_next_task", json!({})).await;
    assert_eq!(next["next_task"]["id"], first.as_str(), "{next}");
    assert_eq!(next["next_task"]["status"], "processing");
    let reason = refused(&trigger, "task_update", json!({"task_id": first, "content": "too late"})).await;
    assert!(reason.contains("has not started"), "a started task keeps its text: {reason}");
    let empty = ok(&worker, "get_next_task", json!({})).await;
    assert!(empty["next_task"].is_null(), "{empty}");
    assert!(empty["message"].as_str().unwrap().contains("already have 1 task"), "{empty}");

    ok(&worker, "task_complete", json!({"task_id": first, "response_summary": "the build is green"})).await;
    let seen = ok(&trigger, "task_get", json!({"task_id": first})).await;
    assert_eq!(
        (seen["task"]["status"].as_str(), seen["task"]["response_summary"].as_str()),
        (Some("done"), Some("the build is green"))
    );
    let reason = refused(&trigger, "task_cancel", json!({"task_id": first})).await;
    assert!(reason.contains("has not started"), "{reason}");

    let stats = ok(&worker, "inbox_stats", json!({})).await;
    assert_eq!(stats["total"], 2);
    assert_eq!(stats["by_status"], json!({"pending": 0, "processing": 0, "done": 1, "cancelled": 1}));
    assert_eq!(stats["by_channel"], json!({"mcp": 2}));

    // The trigger session's tasks carry its name.
    let hub = Hub::start(&database, None);
    let (_, task) = hub.get(&format!("/api/tasks/{first}"), None).await;
    assert_eq!(task["tags"], json!(["inbox", "trigger:nightly"]));
}

/// A `swarm mcp` worker in poll-task gets work another process (the hub) adds, claimed
/// and started for it, whether the work lands before or while it waits (the poll arms
/// its wake-up before it looks). Wake-ups across processes as such are tested in `poll.rs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_stdio_poll_task_wakes_on_work_from_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let hub = Hub::start(&database, None);
    let worker = new_agent_id();
    let client = connect_stdio(&database, Some(&worker), &[]).await;
    ok(&client, "join-swarm", json!({"name": "waiting-worker"})).await;

    let started = std::time::Instant::now();
    let create = async {
        let (status, task) = hub.post("/api/tasks", None, json!({"task": "from the hub"})).await;
        assert_eq!(status, 201, "{task}");
        task
    };
    let (polled, task) = tokio::join!(ok(&client, "poll-task", json!({"waitSeconds": 30})), create);
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "the poll waited out its time");
    assert_eq!(polled["trigger"]["type"], "task_assigned", "{polled}");
    assert_eq!(polled["task"]["id"], task["id"]);
    let (_, task) = hub.get(&format!("/api/tasks/{}", task["id"].as_str().unwrap()), None).await;
    assert_eq!(
        (task["status"].as_str(), task["agentId"].as_str()),
        (Some("in_progress"), Some(worker.as_str()))
    );
}

/// The seed's trigger fields as its users write them: `channel` decides where the
/// trigger's tasks say they came from, `webhook_url` is the URL a sender calls, and a
/// payload that itself contains `{{...}}` reaches the task as it was sent.
#[tokio::test]
async fn inbox_triggers_keep_their_channel_name_their_webhook_url_and_expand_once() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let hub = Hub::start(&database, None);
    let worker_id = new_agent_id();
    let worker =
        connect_stdio(&database, Some(&worker_id), &[("MCP_BASE_URL", "http://hub.example:3013/")]).await;
    ok(&worker, "join-swarm", json!({"name": "inbox-worker"})).await;

    let created = ok(
        &worker,
        "trigger_create",
        json!({"name": "mail-in", "type": "webhook", "channel": "email", "webhook_secret": "s3cret-0123456789abcdef",
               "prompt": "From {{sender}} on {{channel}}: {{payload}}"}),
    )
    .await;
    let trigger = &created["trigger"];
    assert_eq!(trigger["webhook_url"], "http://hub.example:3013/api/webhooks/mail-in", "{created}");
    assert!(trigger.get("webhookUrl").is_none(), "one name, the seed's: {created}");
    assert_eq!(trigger["channel"], "email", "{created}");
    let reason =
        refused(&worker, "trigger_create", json!({"name": "bad", "type": "manual", "channel": "E Mail"}))
            .await;
    assert!(reason.contains("channel"), "{reason}");

    let response = reqwest::Client::new()
        .post(hub.url("/api/webhooks/mail-in"))
        .header("x-webhook-secret", "s3cret-0123456789abcdef")
        .header("content-type", "text/plain")
        .body("write {{channel}} and {{trigger_name}} literally")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let answer: Value = response.json().await.unwrap();
    let task_id = answer["taskId"].as_str().expect("a task").to_string();
    let (_, task) = hub.get(&format!("/api/tasks/{task_id}"), None).await;
    assert_eq!(task["source"], "email", "{task}");
    let text = task["task"].as_str().unwrap();
    assert!(text.contains("on email: "), "{text}");
    // The payload arrives verbatim, fenced as outside text (untrusted_input.rs).
    assert!(
        text.contains("\nwrite {{channel}} and {{trigger_name}} literally\n</untrusted-input>"),
        "expanded once: {text}"
    );

    // get_next_task hands out tasks only: urgent mail is no task and stays unread.
    let colleague = new_agent_id();
    let (status, _) = hub.post("/api/agents", Some(&colleague), json!({"name": "colleague"})).await;
    assert_eq!(status, 201);
    let (status, mail) = hub
        .post(
            "/api/mail",
            Some(&colleague),
            json!({"to": "inbox-worker", "priority": "urgent", "subject": "now", "body": "read me"}),
        )
        .await;
    assert_eq!(status, 201, "{mail}");
    let (_, claimed) = hub.post(&format!("/api/tasks/{task_id}/cancel"), None, json!({})).await;
    assert_eq!(claimed["task"]["status"], "cancelled");
    let next = ok(&worker, "get_next_task", json!({})).await;
    assert!(next["next_task"].is_null() && next["trigger"].is_null(), "{next}");
    let (_, me) = hub.get("/me?include=inbox", Some(&worker_id)).await;
    assert_eq!(me["inbox"]["unreadMailCount"], 1, "the mail was not consumed: {me}");
}
