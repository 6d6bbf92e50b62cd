//! The dashboard (issue 9): its pages in headless Chromium against a real hub and a real
//! runner, and the change stream `GET /api/events` over plain HTTP. Screenshots of every
//! page go to `target/dashboard-screenshots/`.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::{
    hub::{Hub, sqlite_file},
    runner::{Runner, RunnerSetup},
    webdriver::Browser,
};

const KEY: &str = "dashboard-test-key";

fn screenshots_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("dashboard-screenshots")
}

#[tokio::test]
async fn dashboard_drives_a_live_swarm_in_a_browser() {
    let browser = Browser::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let shots = screenshots_dir();

    // A wrong key is refused with the hub's 401, and the data stays hidden.
    browser.goto(&hub.url("/")).await;
    browser.wait_for("the login form", "return !document.getElementById('login').hidden").await;
    browser.screenshot(&shots, "login").await;
    browser.type_into("#login-key", "not-the-key").await;
    browser.click("#login-form button[type=submit]").await;
    let refusal =
        browser.wait_for("the refusal", "return document.getElementById('login-error').textContent").await;
    assert!(refusal.as_str().unwrap().contains("401"), "{refusal}");
    assert_eq!(browser.script("return document.getElementById('view').hidden").await, json!(true));
    browser.screenshot(&shots, "login-refused").await;

    // The right key opens the overview, live.
    browser.type_into("#login-key", KEY).await;
    browser.click("#login-form button[type=submit]").await;
    browser.wait_for("the overview", "return document.querySelector('#page-overview #task-counts a')").await;
    browser
        .wait_for("the live stream", "return document.getElementById('live').dataset.state === 'live'")
        .await;
    // Set once; a reload would lose it. Everything below must happen without one.
    browser.script("window.__noReload = true; return null").await;

    // A worker joins: the overview shows it without a reload.
    let worker =
        Runner::start(&hub, RunnerSetup::worker(dir.path()).env("API_KEY", KEY).env("AGENT_NAME", "ada"));
    browser
        .wait_for(
            "the worker on the overview",
            "return document.querySelector('#overview-agents')?.textContent.includes('ada')",
        )
        .await;
    // The last hour as three small charts, from the hub's points (one at start-up).
    let charts = browser
        .wait_for(
            "the overview's charts",
            "const charts = [...document.querySelectorAll('#overview-charts .chart')];
             return charts.length === 3 && charts.every((c) => c.querySelector('svg polyline') && c.dataset.points !== '0')
                 ? charts.map((c) => c.id + ':' + c.querySelector('strong').textContent) : null",
        )
        .await;
    let charts = charts.to_string();
    for id in ["chart-queue", "chart-trigger-wait", "chart-runs"] {
        assert!(charts.contains(id), "{charts}");
    }
    browser.screenshot(&shots, "overview").await;

    // A task created from the page is picked up and completed by the runner, and the list
    // follows it live.
    browser.click("a[data-page=tasks]").await;
    browser.type_into("#create-task textarea[name=task]", "Write the release notes from the dashboard").await;
    browser.click("#create-task button[type=submit]").await;
    let task_id = browser
        .wait_for(
            "the task completed in the list",
            "const row = [...document.querySelectorAll('tr.task-row')]
                .find(r => r.textContent.includes('release notes from the dashboard'));
             return row && row.dataset.status === 'completed' ? row.dataset.taskId : null",
        )
        .await;
    let task_id = task_id.as_str().unwrap().to_string();
    assert_eq!(browser.script("return window.__noReload === true").await, json!(true), "the page reloaded");
    browser.screenshot(&shots, "tasks").await;
    let (_, task) = hub.get(&format!("/api/tasks/{task_id}"), None).await;
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(task["source"], "api");

    // Its detail: output, cost and the session log, rendered.
    browser.click(&format!("tr[data-task-id='{task_id}'] a.task-link")).await;
    browser.wait_for("the session log", "return document.querySelector('#session-log .entry.result')").await;
    let log = browser.text("#session-log").await.unwrap();
    assert!(log.contains("started"), "the init line is rendered: {log}");
    assert!(!log.contains("\"type\""), "no raw stream-json for known lines: {log}");
    let cost = browser.text("#task-cost").await.unwrap();
    assert!(cost.contains("$0.0125"), "{cost}");
    browser.screenshot(&shots, "task").await;

    // The agent's page: rename it from the page.
    browser.click("a[data-page=agents]").await;
    browser.click("#page-agents table a[href^='#/agents/']").await;
    browser.click("#agent-edit summary").await;
    browser.type_into("#rename-form input[name=name]", "ada-renamed").await;
    browser.click("#rename-form button[type=submit]").await;
    browser
        .wait_for(
            "the new name",
            "return document.querySelector('#page-agents h1')?.textContent.includes('ada-renamed')",
        )
        .await;
    browser.screenshot(&shots, "agent").await;

    // The lead inbox (empty without Slack) and channels: post as a person, reply in a thread.
    browser.click("a[data-page=inbox]").await;
    browser.wait_for("the inbox", "return document.querySelector('#inbox-messages p')").await;
    browser.screenshot(&shots, "inbox").await;
    browser.click("a[data-page=channels]").await;
    browser.type_into("#post-message textarea", "Hello crew, from a person").await;
    browser.click("#post-message button[type=submit]").await;
    browser
        .wait_for(
            "the message",
            "return document.querySelector('#messages')?.textContent.includes('Hello crew')",
        )
        .await;
    browser.click("#messages .thread-link").await;
    browser.type_into("#post-message textarea", "And a reply in the thread").await;
    browser.click("#post-message button[type=submit]").await;
    browser
        .wait_for("the reply", "return document.querySelector('#messages.thread')?.textContent.includes('a reply in the thread')")
        .await;
    browser.screenshot(&shots, "channels").await;
    // A message posted by someone else appears without a reload.
    let (status, channels) = hub.get("/api/channels", None).await;
    assert_eq!(status, 200);
    let general = channels["channels"][0]["id"].as_str().unwrap().to_string();
    let (status, _) = hub
        .post(&format!("/api/channels/{general}/messages"), None, json!({"content": "Posted over REST"}))
        .await;
    assert_eq!(status, 201);
    browser.click("a[data-page=channels]").await;
    browser
        .wait_for(
            "the REST message",
            "return document.querySelector('#messages')?.textContent.includes('Posted over REST')",
        )
        .await;

    // Mail: a help request appears, waiting; the answer arrives live and ends the waiting.
    let (asker, lead) = (uuid::Uuid::new_v4().to_string(), uuid::Uuid::new_v4().to_string());
    for (id, name, is_lead) in [(&asker, "asker", false), (&lead, "boss", true)] {
        let (status, _) = hub.post("/api/agents", Some(id), json!({"name": name, "isLead": is_lead})).await;
        assert_eq!(status, 201);
    }
    let (status, ask) = hub
        .post(
            "/api/mail",
            Some(&asker),
            json!({"to": "coordinator", "type": "help_request", "priority": "urgent", "awaitingResponse": true,
                   "subject": "Blocked on the schema", "body": "Which column type?"}),
        )
        .await;
    assert_eq!(status, 201, "{ask}");
    browser.click("a[data-page=mail]").await;
    browser
        .wait_for("the waiting mail", "return document.querySelector('#mail-list tr.mail-waiting')?.textContent.includes('Blocked on the schema')")
        .await;
    let id = ask["id"].as_str().unwrap();
    let (status, _) =
        hub.post(&format!("/api/mail/{id}/reply"), Some(&lead), json!({"body": "Use text."})).await;
    assert_eq!(status, 201);
    browser
        .wait_for(
            "the answer, live",
            "return document.querySelector('#mail-list')?.textContent.includes('Re: Blocked on the schema') \
             && !document.querySelector('#mail-list tr.mail-waiting')",
        )
        .await;
    browser.screenshot(&shots, "mail").await;

    // Triggers: fire one now, then disable it, from the page.
    let (status, created) = hub
        .post(
            "/api/triggers",
            None,
            json!({"name": "nightly-review", "type": "cron", "schedule": "0 2 * * *", "timezone": "Europe/Paris",
                   "prompt": "Review what changed today", "target": "pool"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    browser.click("a[data-page=triggers]").await;
    browser
        .wait_for(
            "the trigger",
            "return document.querySelector('#trigger-list tr[data-name=nightly-review]')",
        )
        .await;
    browser.click("#trigger-list button.fire[data-trigger=nightly-review]").await;
    browser
        .wait_for(
            "the firing",
            "return document.querySelector('#trigger-notice')?.textContent.includes('nightly-review fired')",
        )
        .await;
    let (_, fired) = hub.get("/api/triggers/nightly-review", None).await;
    assert_eq!(fired["trigger"]["runCount"], 1, "{fired}");
    browser.click("#trigger-list button.toggle[data-trigger=nightly-review]").await;
    browser
        .wait_for(
            "the trigger disabled",
            "return document.querySelector('#trigger-list tr[data-name=nightly-review]')?.textContent.includes('disabled')",
        )
        .await;
    let (_, disabled) = hub.get("/api/triggers/nightly-review", None).await;
    assert_eq!(disabled["trigger"]["enabled"], false, "{disabled}");
    browser.screenshot(&shots, "triggers").await;
    assert_eq!(browser.script("return window.__noReload === true").await, json!(true), "the page reloaded");

    drop(worker);
    browser.close().await;
}

#[tokio::test]
async fn dashboard_needs_no_key_on_an_open_hub() {
    let browser = Browser::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    browser.goto(&hub.url("/#/tasks")).await;
    browser.wait_for("the tasks page", "return document.querySelector('#page-tasks #create-task')").await;
    assert_eq!(browser.script("return document.getElementById('login').hidden").await, json!(true));
    browser.close().await;
}

/// A task whose runner reported its session and its context usage (the reference's
/// newest runner does, issue 48) shows both on its page.
#[tokio::test]
async fn a_task_page_shows_the_reported_session_and_context_usage() {
    let browser = Browser::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let agent = hub.register_agent("context-reporter", false).await;
    let id = hub.create_task(json!({"task": "Measure the context", "agentId": agent})).await;
    let session = json!({"claudeSessionId": "s-1", "provider": "claude", "model": "opus"});
    let put = reqwest::Client::new().put(hub.url(&format!("/api/tasks/{id}/session"))).json(&session);
    assert_eq!(crate::hub::send(put).await.0, 200);
    let snapshot = json!({"eventType": "progress", "sessionId": "s-1",
                          "contextUsedTokens": 124000, "contextTotalTokens": 200000});
    let (status, body) = hub.post(&format!("/api/tasks/{id}/context"), None, snapshot).await;
    assert_eq!(status, 201, "{body}");

    browser.goto(&hub.url(&format!("/#/tasks/{id}"))).await;
    let context = browser
        .wait_for("the context line", "return document.getElementById('task-context')?.textContent")
        .await;
    assert_eq!(context, json!("62 % (124,000 of 200,000 tokens)"));
    let facts = browser.text(".facts").await.unwrap_or_default();
    assert!(facts.contains("claude opus"), "{facts}");
    browser.close().await;
}

/// `swarm serve` prints `http://.../#key=<key>` on the operator's terminal: opened, it
/// signs the tab in, and the key leaves the address bar.
#[tokio::test]
async fn the_sign_in_link_signs_the_dashboard_in_and_leaves_no_key_in_the_address() {
    let browser = Browser::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    browser.goto(&hub.url(&format!("/#key={KEY}"))).await;
    browser
        .wait_for(
            "the first page",
            "return document.getElementById('login').hidden && document.querySelector('.page')",
        )
        .await;
    assert_eq!(browser.script("return location.href.includes('key=')").await, json!(false));
    assert_eq!(
        browser.script("return localStorage.getItem('swarm.apiKey')").await,
        json!(KEY),
        "the key is kept in this browser, for its other tabs too"
    );
    browser.close().await;
}

/// Issue 44: two tasks just created read as two tasks on the overview. The events name
/// them by title (not by the first 8 hex digits of a UUIDv7, which ids made in the same
/// minute share), and the queue depth beside them is the queue now: unassigned, offered
/// and pending tasks, as the hub's minute points count it.
#[tokio::test]
async fn overview_names_tasks_by_title_and_counts_the_queue_now() {
    let browser = Browser::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let mut ids = Vec::new();
    for text in ["Write the release notes", "Fix the flaky login test"] {
        let (status, task) = hub.post("/api/tasks", None, json!({"task": text})).await;
        assert_eq!(status, 201, "{task}");
        assert_eq!(task["status"], "unassigned", "{task}");
        ids.push(task["id"].as_str().unwrap().to_string());
    }
    browser.goto(&hub.url(&format!("/#key={KEY}"))).await;
    let tasks = browser
        .wait_for(
            "the created tasks among the events, by title",
            "const rows = [...document.querySelectorAll('#overview-events tr[data-event-type=task_created]')];
             return rows.length === 2 ? rows.map((row) => row.querySelector('a.task-link').textContent) : null",
        )
        .await;
    let tasks = tasks.to_string();
    assert!(
        tasks.contains("Write the release notes") && tasks.contains("Fix the flaky login test"),
        "{tasks}"
    );
    let queue = browser
        .wait_for(
            "the queue depth",
            "const figure = document.querySelector('#chart-queue strong'); return figure && figure.textContent",
        )
        .await;
    assert_eq!(queue, json!("2"), "two unassigned tasks are a queue of two");
    let (_, stats) = hub.get("/api/stats", None).await;
    assert_eq!(stats["tasks"]["unassigned"], 2, "{stats}");

    // An id shown without its title shows its random end, which tells ids of one minute apart.
    let short = browser
        .script(&format!("return import('/assets/ui.js').then((ui) => ui.shortId('{}'))", ids[0]))
        .await;
    assert_eq!(short, json!(format!("…{}", &ids[0][ids[0].len() - 8..])));
    browser.close().await;
}

#[tokio::test]
async fn dashboard_shows_epics_with_their_progress_live() {
    let browser = Browser::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let shots = screenshots_dir();
    let worker = uuid::Uuid::new_v4().to_string();
    let (status, _) = hub.post("/api/agents", Some(&worker), json!({"name": "ada"})).await;
    assert_eq!(status, 201);
    let (status, epic) =
        hub.post("/api/epics", None, json!({"name": "checkout", "goal": "Ship the new checkout"})).await;
    assert_eq!(status, 201, "{epic}");
    let id = epic["id"].as_str().unwrap();
    let mut tasks = Vec::new();
    for text in ["Build the cart", "Wire payments"] {
        let (status, task) =
            hub.post(&format!("/api/epics/{id}/tasks"), None, json!({"task": text, "agentId": worker})).await;
        assert_eq!(status, 201, "{task}");
        tasks.push(task["id"].as_str().unwrap().to_string());
    }
    browser.goto(&hub.url("/#/epics")).await;
    let row = format!("#epic-list tr[data-id='{id}']");
    browser
        .wait_for(
            "the epic at 0%",
            &format!("return document.querySelector(\"{row}\")?.textContent.includes('0%')"),
        )
        .await;
    let shown = browser.script(&format!("return document.querySelector(\"{row}\").textContent")).await;
    let shown = shown.as_str().unwrap();
    assert!(shown.contains("checkout") && shown.contains("Ship the new checkout"), "{shown}");
    assert!(shown.contains("Build the cart") && shown.contains("0 of 2 done"), "{shown}");
    browser.script("window.__noReload = true; return null").await;

    // The worker finishes one task: the page follows without a reload.
    let (status, trigger) = hub.get("/api/poll", Some(&worker)).await;
    assert_eq!((status, trigger["trigger"]["type"].as_str()), (200, Some("task_assigned")), "{trigger}");
    let started = trigger["trigger"]["taskId"].as_str().unwrap();
    assert!(tasks.iter().any(|task| task == started), "{trigger}");
    let (status, body) = hub
        .post(&format!("/api/tasks/{started}/finish"), Some(&worker), json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200, "{body}");
    browser
        .wait_for(
            "the epic at 50%, live",
            &format!("return document.querySelector(\"{row}\")?.textContent.includes('1 of 2 done')"),
        )
        .await;
    let value = browser.script(&format!("return document.querySelector(\"{row} progress\").value")).await;
    assert_eq!(value, json!(50));
    assert_eq!(browser.script("return window.__noReload === true").await, json!(true), "the page reloaded");
    browser.screenshot(&shots, "epics").await;
    browser.close().await;
}

#[tokio::test]
async fn dashboard_files_are_served_without_the_key_and_data_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let http = reqwest::Client::new();
    for path in ["/", "/assets/app.js", "/assets/pages/tasks.js", "/assets/style.css"] {
        let response = http.get(hub.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert!(
            response.headers()["content-security-policy"].to_str().unwrap().contains("default-src 'self'")
        );
    }
    let response = http.get(hub.url("/assets/nothing.js")).send().await.unwrap();
    assert_eq!(response.status(), 404);
    for path in ["/api/events", "/api/inbox", "/api/stats"] {
        let response = http.get(hub.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 401, "{path}");
    }
}

/// Reads server-sent events off a streaming response.
struct EventReader {
    response: reqwest::Response,
    buffer: String,
}

impl EventReader {
    async fn open(hub: &Hub) -> EventReader {
        let response = hub.request(reqwest::Method::GET, "/api/events", None).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        EventReader { response, buffer: String::new() }
    }

    /// The next event as (name, data), skipping comments.
    async fn next(&mut self) -> (String, Value) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut name = String::from("message");
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("event:") {
                        name = value.trim().to_string();
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data.push_str(value.trim());
                    }
                }
                if data.is_empty() && name == "message" {
                    continue;
                }
                return (name, serde_json::from_str(&data).unwrap_or(Value::String(data)));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let chunk = tokio::time::timeout(left, self.response.chunk())
                .await
                .expect("an event within 30 s")
                .unwrap()
                .expect("the stream stays open");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Skip events until one satisfies `matches`.
    async fn until(&mut self, what: &str, matches: impl Fn(&str, &Value) -> bool) -> Value {
        for _ in 0..1000 {
            let (name, data) = self.next().await;
            if matches(&name, &data) {
                return data;
            }
        }
        panic!("no event for {what}");
    }
}

#[tokio::test]
async fn events_stream_announces_changes_and_other_processes() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let hub = Hub::start(&database, Some(KEY));
    let mut events = EventReader::open(&hub).await;
    assert_eq!(events.next().await.0, "ready");

    let agent = uuid::Uuid::new_v4().to_string();
    let (status, _) = hub.post("/api/agents", Some(&agent), json!({"name": "watcher"})).await;
    assert_eq!(status, 201);
    events
        .until("the agent", |name, data| {
            name == "change" && data["kind"] == "agent" && data["agentId"] == agent
        })
        .await;
    let (_, task) = hub.post("/api/tasks", None, json!({"task": "watch me"})).await;
    let task_id = task["id"].as_str().unwrap().to_string();
    events
        .until("the task", |name, data| {
            name == "change" && data["kind"] == "task" && data["taskId"] == task_id
        })
        .await;
    let lines = json!({"sessionId": "s1", "iteration": 1, "lines": ["{\"type\":\"turn.started\"}"], "taskId": task_id});
    let (status, _) = hub.post("/api/session-logs", None, lines).await;
    assert_eq!(status, 201);
    events
        .until("the session output", |name, data| {
            name == "change" && data["kind"] == "sessionOutput" && data["taskId"] == task_id
        })
        .await;
    let (_, channels) = hub.get("/api/channels", None).await;
    let general = channels["channels"][0]["id"].as_str().unwrap().to_string();
    let (status, _) =
        hub.post(&format!("/api/channels/{general}/messages"), None, json!({"content": "hi"})).await;
    assert_eq!(status, 201);
    events
        .until("the message", |name, data| {
            name == "change" && data["kind"] == "channelMessage" && data["channelId"] == general
        })
        .await;

    // A second process on the same SQLite file: this hub's stream says something changed.
    let other = Hub::start(&database, Some(KEY));
    let (status, _) = other.post("/api/tasks", None, json!({"task": "made elsewhere"})).await;
    assert_eq!(status, 201);
    events
        .until("the other process's change", |name, data| name == "change" && data["kind"] == "external")
        .await;
}

#[tokio::test]
async fn events_stream_ends_when_the_hub_stops() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let mut events = EventReader::open(&hub).await;
    assert_eq!(events.next().await.0, "ready");
    // An open dashboard must not hold a graceful shutdown.
    assert!(hub.terminate(), "the hub stops cleanly with a stream open");
    let rest = tokio::time::timeout(Duration::from_secs(10), events.response.chunk())
        .await
        .expect("the stream ends");
    assert!(matches!(rest, Ok(None) | Err(_)), "{rest:?}");
}
