//! The dashboard as the control room (issue 49), the operator's side: a task's actions
//! and the Tasks list's bulk actions change the task at the hub (asking first where work
//! is lost), every page fits a phone, a sign-in holds across tabs, and the smaller points
//! (one-line headings, epic counts that add up, the agent page, cron in words, the Inbox
//! without Slack). Headless Chromium against a real hub; screenshots go to
//! `target/dashboard-screenshots/`.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::{
    hub::{Hub, sqlite_file},
    webdriver::Browser,
};

const KEY: &str = "dashboard-actions-key";
const GENERAL: &str = "00000000-0000-7000-8000-000000000001";

fn screenshots_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("dashboard-screenshots")
}

async fn must(hub: &Hub, path: &str, agent: Option<&str>, body: Value) -> Value {
    let (status, answer) = hub.post(path, agent, body).await;
    assert!((200..300).contains(&status), "{path}: {status} {answer}");
    answer
}

async fn task(hub: &Hub, id: &str) -> Value {
    let (status, body) = hub.get(&format!("/api/tasks/{id}"), None).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// Wait until the task's page shows `status` (its badge in the heading).
async fn page_shows(browser: &Browser, status: &str) {
    browser
        .wait_for(
            &format!("the task page to show {status}"),
            &format!("return document.querySelector('h1.task-title .badge.status-{status}') && document.getElementById('task-actions')"),
        )
        .await;
}

async fn set_select(browser: &Browser, css: &str, value: &str) {
    browser
        .script(&format!(
            "const s = document.querySelector({css:?}); s.value = {value:?}; s.dispatchEvent(new Event('change', {{bubbles: true}})); return null"
        ))
        .await;
}

/// A worker starts its assigned task as a runner does: the poll hands it over.
async fn start_as(hub: &Hub, agent: &str, id: &str) {
    let (status, poll) = hub.get("/api/poll", Some(agent)).await;
    assert_eq!(status, 200, "{poll}");
    assert_eq!(poll["trigger"]["taskId"], json!(id), "{poll}");
    assert_eq!(task(hub, id).await["status"], "in_progress");
}

#[tokio::test]
async fn each_task_action_works_from_its_page_and_cancel_asks_first() {
    let browser = Browser::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let ada = hub.register_agent("ada", false).await;
    let bob = hub.register_agent("bob", false).await;

    // A pool task: to the backlog and back, priority, text, then to bob.
    let pool = hub.create_task(json!({"task": "Tidy the changelog", "priority": 40})).await;
    browser.goto(&hub.url(&format!("/#/tasks/{pool}"))).await;
    page_shows(&browser, "unassigned").await;
    browser.click("#action-to-backlog").await;
    page_shows(&browser, "backlog").await;
    assert_eq!(task(&hub, &pool).await["status"], "backlog");
    browser.click("#action-from-backlog").await;
    page_shows(&browser, "unassigned").await;
    assert_eq!(task(&hub, &pool).await["status"], "unassigned");

    browser.type_into("#priority-form input[name=priority]", "85").await;
    browser.click("#priority-form button[type=submit]").await;
    browser
        .wait_for("the new priority", "return document.querySelector('.facts')?.textContent.includes('85')")
        .await;
    assert_eq!(task(&hub, &pool).await["priority"], 85);

    browser.click("#task-actions details.edit summary").await;
    browser.type_into("#edit-form textarea[name=task]", "Tidy the changelog and the release notes").await;
    browser.click("#edit-form button[type=submit]").await;
    browser
        .wait_for(
            "the new text",
            "return document.getElementById('task-heading')?.textContent === 'Tidy the changelog and the release notes'",
        )
        .await;
    assert_eq!(task(&hub, &pool).await["task"], "Tidy the changelog and the release notes");

    browser.click("#action-reassign").await;
    set_select(&browser, "#reassign-agent", &bob).await;
    browser.click("#action-reassign-confirm .confirm-yes").await;
    page_shows(&browser, "pending").await;
    let moved = task(&hub, &pool).await;
    assert_eq!((moved["status"].as_str(), moved["agentId"].as_str()), (Some("pending"), Some(bob.as_str())));

    // Work in progress with ada online: pause, resume, and reassign only after a warning.
    let held = hub.create_task(json!({"task": "Port the parser", "agentId": ada})).await;
    start_as(&hub, &ada, &held).await;
    browser.goto(&hub.url(&format!("/#/tasks/{held}"))).await;
    page_shows(&browser, "in_progress").await;
    browser.click("#action-pause").await;
    browser
        .wait_for("the pause confirmation", "return document.getElementById('action-pause-confirm')")
        .await;
    browser.click("#action-pause-confirm .confirm-yes").await;
    page_shows(&browser, "paused").await;
    assert_eq!(task(&hub, &held).await["status"], "paused");
    browser.click("#action-resume").await;
    page_shows(&browser, "in_progress").await;
    assert_eq!(task(&hub, &held).await["status"], "in_progress");

    browser.click("#action-reassign").await;
    let warning = browser
        .wait_for(
            "the reassign warning",
            "return document.getElementById('action-reassign-confirm')?.textContent",
        )
        .await;
    assert!(warning.as_str().unwrap().contains("ada is online"), "{warning}");
    set_select(&browser, "#reassign-agent", &bob).await;
    browser.screenshot(&screenshots_dir(), "task-actions").await;
    browser.click("#action-reassign-confirm .confirm-yes").await;
    page_shows(&browser, "pending").await;
    let taken = task(&hub, &held).await;
    assert_eq!((taken["status"].as_str(), taken["agentId"].as_str()), (Some("pending"), Some(bob.as_str())));

    // Cancel asks first: the first click changes nothing at the hub.
    let doomed = hub.create_task(json!({"task": "Rewrite everything in COBOL"})).await;
    browser.goto(&hub.url(&format!("/#/tasks/{doomed}"))).await;
    page_shows(&browser, "unassigned").await;
    browser.click("#action-cancel").await;
    browser
        .wait_for("the cancel confirmation", "return document.getElementById('action-cancel-confirm')")
        .await;
    assert_eq!(task(&hub, &doomed).await["status"], "unassigned", "one click cancels nothing");
    browser.click("#action-cancel-confirm .confirm-no").await;
    browser
        .wait_for("the confirmation gone", "return !document.getElementById('action-cancel-confirm')")
        .await;
    assert_eq!(task(&hub, &doomed).await["status"], "unassigned");
    browser.click("#action-cancel").await;
    browser.type_into("#action-cancel-confirm input[name=reason]", "not this year").await;
    browser.click("#action-cancel-confirm .confirm-yes").await;
    page_shows(&browser, "cancelled").await;
    let cancelled = task(&hub, &doomed).await;
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["failureReason"], "not this year");

    // Retry: a new task with the same text, shown at once.
    browser.click("#action-retry").await;
    let retry = browser
        .wait_for(
            "the new task's page",
            &format!(
                "const id = location.hash.split('/')[2]; return id && id !== '{doomed}' && document.querySelector('h1.task-title .badge.status-unassigned') ? id : null"
            ),
        )
        .await;
    let retried = task(&hub, retry.as_str().unwrap()).await;
    assert_eq!(retried["task"], "Rewrite everything in COBOL");
    assert_eq!(retried["status"], "unassigned");
    browser.close().await;
}

#[tokio::test]
async fn bulk_actions_change_the_selected_tasks_after_a_confirmation() {
    let browser = Browser::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let ada = hub.register_agent("ada", false).await;
    let mut ids = Vec::new();
    for text in ["Bulk one", "Bulk two", "Bulk three"] {
        ids.push(hub.create_task(json!({"task": text})).await);
    }
    browser.goto(&hub.url("/#/tasks")).await;
    browser.wait_for("the list", "return document.querySelectorAll('tr.task-row').length === 3").await;

    // Two rows to the backlog; the third stays.
    for id in &ids[..2] {
        browser.click(&format!("input.select-task[value='{id}']")).await;
    }
    browser
        .wait_for("two selected", "return document.getElementById('bulk-count').textContent === '2'")
        .await;
    browser.click("#bulk-actions button[data-bulk=backlog]").await;
    browser.wait_for("the confirmation", "return document.getElementById('bulk-confirm')").await;
    assert_eq!(task(&hub, &ids[0]).await["status"], "unassigned", "nothing before the confirmation");
    browser.click("#bulk-confirm .confirm-yes").await;
    browser
        .wait_for(
            "the result",
            "return document.getElementById('bulk-result').textContent.includes('2 of 2 changed')",
        )
        .await;
    for (id, status) in ids.iter().zip(["backlog", "backlog", "unassigned"]) {
        assert_eq!(task(&hub, id).await["status"], status);
    }

    // Every row: a priority, then a reassignment, then a cancel.
    browser
        .wait_for(
            "the list re-read",
            "return document.querySelectorAll('tr.task-row[data-status=backlog]').length === 2",
        )
        .await;
    browser.click("#select-all").await;
    browser
        .wait_for("three selected", "return document.getElementById('bulk-count').textContent === '3'")
        .await;
    browser.type_into("#bulk-actions input[name=priority]", "70").await;
    browser.click("#bulk-actions button[data-bulk=priority]").await;
    browser.click("#bulk-confirm .confirm-yes").await;
    browser
        .wait_for(
            "the result",
            "return document.getElementById('bulk-result').textContent.includes('3 of 3 changed')",
        )
        .await;
    for id in &ids {
        assert_eq!(task(&hub, id).await["priority"], 70);
    }

    browser.click(&format!("input.select-task[value='{}']", ids[2])).await;
    set_select(&browser, "#bulk-actions select[name=agentId]", &ada).await;
    browser.click("#bulk-actions button[data-bulk=reassign]").await;
    browser.click("#bulk-confirm .confirm-yes").await;
    browser
        .wait_for(
            "the result",
            "return document.getElementById('bulk-result').textContent.includes('1 of 1 changed')",
        )
        .await;
    let assigned = task(&hub, &ids[2]).await;
    assert_eq!(
        (assigned["status"].as_str(), assigned["agentId"].as_str()),
        (Some("pending"), Some(ada.as_str()))
    );

    browser
        .wait_for(
            "the list re-read",
            "return document.querySelectorAll('tr.task-row[data-status=pending]').length === 1",
        )
        .await;
    browser.click("#select-all").await;
    browser.click("#bulk-actions button[data-bulk=cancel]").await;
    browser.click("#bulk-confirm .confirm-yes").await;
    browser
        .wait_for(
            "the result",
            "return document.getElementById('bulk-result').textContent.includes('3 of 3 changed')",
        )
        .await;
    for id in &ids {
        assert_eq!(task(&hub, id).await["status"], "cancelled");
    }
    browser.close().await;
}

/// Every page at 390 × 844 with realistic content: nothing scrolls sideways, the menu
/// folds behind a button, the live badge stays in the header, tables are stacked rows.
#[tokio::test]
async fn no_page_scrolls_sideways_on_a_phone() {
    let browser = Browser::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let lead = hub.register_agent("the-lead-with-a-long-name", true).await;
    let ada = hub.register_agent_with(
        "ada-the-very-thorough-reviewer",
        json!({"role": "reviewer", "capabilities": ["rust", "typescript", "postgres", "kubernetes", "documentation"]}),
    )
    .await;
    let long = format!(
        "Investigate why https://ci.example.com/pipelines/1234567890/jobs/abcdefghijklmnopqrstuvwxyz/artifacts/{} fails on \
         the nightly build, then fix the flaky retry logic in crates/swarm-service/src/very/deeply/nested/module.rs \
         and write a report of everything that changed.\nSecond line with more detail.",
        "x".repeat(80)
    );
    let held =
        hub.create_task(json!({"task": long, "agentId": ada, "tags": ["ci", "flaky", "nightly"]})).await;
    start_as(&hub, &ada, &held).await;
    must(&hub, &format!("/api/tasks/{held}/progress"), Some(&ada), json!({"progress": "a".repeat(300)}))
        .await;
    for n in 0..6 {
        hub.create_task(json!({"task": format!("{long} ({n})")})).await;
    }
    // What "Needs you" lists: a failure with a long reason, an offline agent holding work.
    let dora = hub.register_agent("dora-who-fails-with-long-reasons", false).await;
    let failing = hub.create_task(json!({"task": long, "agentId": dora})).await;
    start_as(&hub, &dora, &failing).await;
    let reason = format!("The build failed: {}", "error[E0308]: mismatched types at src/x.rs:1 ".repeat(8));
    must(
        &hub,
        &format!("/api/tasks/{failing}/finish"),
        Some(&dora),
        json!({"status": "failed", "failureReason": reason}),
    )
    .await;
    let carl = hub.register_agent("carl-the-agent-who-went-offline-holding-work", false).await;
    let stranded = hub.create_task(json!({"task": long, "agentId": carl})).await;
    start_as(&hub, &carl, &stranded).await;
    must(&hub, "/close", Some(&carl), json!({})).await;
    let epic =
        must(&hub, "/api/epics", None, json!({"name": "a-rather-long-epic-name-for-checkout", "goal": long}))
            .await;
    let epic = epic["id"].as_str().unwrap().to_string();
    must(&hub, &format!("/api/epics/{epic}/tasks"), None, json!({"task": long})).await;
    must(
        &hub,
        "/api/mail",
        Some(&ada),
        json!({"to": "the-lead-with-a-long-name", "subject": &long[..190], "body": long}),
    )
    .await;
    must(&hub, &format!("/api/channels/{GENERAL}/messages"), Some(&lead), json!({"content": long})).await;
    must(
        &hub,
        "/api/triggers",
        None,
        json!({"name": "nightly-review-of-everything-that-changed", "type": "cron", "schedule": "0 2 * * *",
               "timezone": "Europe/Paris", "prompt": long, "target": "pool"}),
    )
    .await;

    browser.emulate_screen(390, 844).await;
    let pages = [
        ("overview", "#/overview".to_string()),
        ("agents", "#/agents".to_string()),
        ("agent", format!("#/agents/{ada}")),
        ("tasks", "#/tasks".to_string()),
        ("task", format!("#/tasks/{held}")),
        ("epics", "#/epics".to_string()),
        ("inbox", "#/inbox".to_string()),
        ("channels", format!("#/channels/{GENERAL}")),
        ("mail", "#/mail".to_string()),
        ("triggers", "#/triggers".to_string()),
    ];
    let shots = screenshots_dir();
    for (name, hash) in &pages {
        browser.goto(&hub.url(&format!("/{hash}"))).await;
        if *name == "overview" {
            // Its longest content: the failure and the offline agent under "Needs you".
            browser
                .wait_for(
                    "Needs you",
                    "return document.querySelectorAll('#needs-you .needs-group').length >= 2",
                )
                .await;
        }
        // Loaded: the page's first table (or its empty note) is drawn.
        browser
            .wait_for(
                &format!("the {name} page at 390 px"),
                "const page = document.querySelector('.page'); return page && page.querySelector('table tbody tr, p.empty, ol.messages li')",
            )
            .await;
        let fits = browser
            .script(
                "return {scroll: document.scrollingElement.scrollWidth, inner: innerWidth,
                         live: document.getElementById('live').getBoundingClientRect().right,
                         liveInHeader: document.querySelector('header.top').contains(document.getElementById('live')),
                         menu: getComputedStyle(document.getElementById('menu-toggle')).display,
                         nav: getComputedStyle(document.getElementById('nav')).display,
                         rows: [...document.querySelectorAll('.page table')].every((t) => getComputedStyle(t).display === 'block')}",
            )
            .await;
        assert_eq!(fits["inner"], 390, "{name}: {fits}");
        assert!(fits["scroll"].as_i64().unwrap() <= 390, "{name} scrolls sideways: {fits}");
        assert!(
            fits["live"].as_f64().unwrap() <= 390.0 && fits["liveInHeader"] == json!(true),
            "{name}: {fits}"
        );
        assert!(
            fits["menu"] != json!("none") && fits["nav"] == json!("none"),
            "{name}: the menu is folded: {fits}"
        );
        assert_eq!(fits["rows"], json!(true), "{name}: tables are stacked rows: {fits}");
        if ["task", "tasks", "overview"].contains(name) {
            browser.screenshot(&shots, &format!("phone-{name}")).await;
        }
    }

    // The menu opens and closes on the button, and a link closes it.
    browser.click("#menu-toggle").await;
    browser
        .wait_for(
            "the open menu",
            "return getComputedStyle(document.getElementById('nav')).display === 'flex'",
        )
        .await;
    browser.screenshot(&shots, "phone-menu").await;
    let scroll = browser.script("return document.scrollingElement.scrollWidth").await;
    assert!(scroll.as_i64().unwrap() <= 390, "the open menu fits: {scroll}");
    browser.click("#nav a[data-page=agents]").await;
    browser.wait_for("the menu closed", "return getComputedStyle(document.getElementById('nav')).display === 'none' && location.hash === '#/agents'").await;
    browser.close().await;
}

#[tokio::test]
async fn a_deep_link_in_a_new_tab_is_signed_in_and_sign_out_signs_every_tab_out() {
    let browser = Browser::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let id = hub.create_task(json!({"task": "Read me in another tab"})).await;
    browser.goto(&hub.url("/")).await;
    browser.wait_for("the login form", "return !document.getElementById('login').hidden").await;
    browser.type_into("#login-key", KEY).await;
    browser.click("#login-form button[type=submit]").await;
    browser.wait_for("the overview", "return document.body.classList.contains('signed-in')").await;
    let first = browser.tab().await;

    browser.open_tab().await;
    browser.goto(&hub.url(&format!("/#/tasks/{id}"))).await;
    browser
        .wait_for(
            "the task, signed in",
            "return document.getElementById('task-heading')?.textContent === 'Read me in another tab'",
        )
        .await;
    assert_eq!(browser.script("return document.getElementById('login').hidden").await, json!(true));
    assert_eq!(
        browser.script("return location.href.includes('key')").await,
        json!(false),
        "no key in the address"
    );

    // Signing out in this tab signs the first one out too.
    browser.click("#sign-out").await;
    browser.wait_for("the login form", "return !document.getElementById('login').hidden").await;
    assert_eq!(browser.script("return localStorage.getItem('swarm.apiKey')").await, Value::Null);
    browser.switch_to(&first).await;
    browser
        .wait_for(
            "the first tab signed out",
            "return !document.getElementById('login').hidden && document.getElementById('view').hidden",
        )
        .await;
    browser.close().await;
}

#[tokio::test]
async fn headings_epic_counts_the_agent_page_triggers_and_the_inbox_read_right() {
    let browser = Browser::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let _lead = hub.register_agent("lead", true).await;
    let ada = hub.register_agent("ada", false).await;

    // A webhook's whole prompt is not the heading: its first line, cut at a word.
    let prompt = format!(
        "GitHub issue opened in acme/shop by octocat: the checkout page crashes whenever a customer applies two discount codes at once\n\n{}",
        "Body of the issue with many details. ".repeat(20)
    );
    let hooked = hub.create_task(json!({"task": prompt})).await;
    browser.goto(&hub.url(&format!("/#/tasks/{hooked}"))).await;
    let heading =
        browser.wait_for("the heading", "return document.getElementById('task-heading')?.textContent").await;
    let heading = heading.as_str().unwrap();
    let first_line = prompt.lines().next().unwrap();
    assert!(heading.ends_with('…') && heading.chars().count() <= 100, "{heading}");
    let kept = heading.trim_end_matches('…');
    assert!(first_line.starts_with(kept), "{heading}");
    assert_eq!(first_line[kept.len()..].chars().next(), Some(' '), "cut at a word: {heading}");
    let full = browser.text("#task-text").await.unwrap();
    assert_eq!(json!(full), task(&hub, &hooked).await["task"], "the whole text is below the heading");

    // An epic's counts add up to its tasks, whatever their statuses; names cut at a word.
    let epic = must(&hub, "/api/epics", None, json!({"name": "checkout", "goal": "Ship it"})).await;
    let epic = epic["id"].as_str().unwrap().to_string();
    let mut in_epic = Vec::new();
    for text in [
        "Build the cart",
        "Wire payments",
        "Write the onboarding guide for merchants who sell internationally and need taxes and duties",
        "Drop IE11",
        "Later maybe",
    ] {
        let created = must(&hub, &format!("/api/epics/{epic}/tasks"), None, json!({"task": text})).await;
        in_epic.push(created["id"].as_str().unwrap().to_string());
    }
    must(&hub, &format!("/api/tasks/{}/reassign", in_epic[0]), None, json!({"agentId": ada})).await;
    start_as(&hub, &ada, &in_epic[0]).await;
    must(&hub, &format!("/api/tasks/{}/finish", in_epic[0]), Some(&ada), json!({"status": "completed"}))
        .await;
    must(&hub, &format!("/api/tasks/{}/cancel", in_epic[3]), None, json!({})).await;
    must(&hub, &format!("/api/tasks/{}/to-backlog", in_epic[4]), None, json!({})).await;
    browser.goto(&hub.url("/#/epics")).await;
    let counts = browser
        .wait_for(
            "the epic's counts",
            "return document.querySelector('#epic-list .epic-counts')?.textContent",
        )
        .await;
    let counts = counts.as_str().unwrap();
    assert!(counts.starts_with("1 of 5 done: "), "{counts}");
    let parts: i64 = counts
        .split_once(": ")
        .unwrap()
        .1
        .split(", ")
        .map(|part| part.split(' ').next().unwrap().parse::<i64>().unwrap())
        .sum();
    assert_eq!(parts, 5, "the parts add up to the total: {counts}");
    let names = browser
        .script("return [...document.querySelectorAll('#epic-list .epic-tasks a')].map((a) => a.textContent)")
        .await;
    let long_name = names
        .as_array()
        .unwrap()
        .iter()
        .map(|name| name.as_str().unwrap())
        .find(|name| name.starts_with("Write the onboarding"))
        .unwrap();
    assert!(long_name.ends_with('…'), "{long_name}");
    let kept = long_name.trim_end_matches('…');
    assert_eq!(in_epic_text(kept), Some(' '), "cut at a word: {long_name}");

    // The agent's page leads with what it is doing, offers under review included.
    let offered = hub.create_task(json!({"task": "Review the migration plan", "offeredTo": ada})).await;
    let (status, _) = hub.get("/api/poll", Some(&ada)).await;
    assert_eq!(status, 200);
    let reviewing = task(&hub, &offered).await;
    assert!(["offered", "reviewing"].contains(&reviewing["status"].as_str().unwrap()), "{reviewing}");
    let mine = hub.create_task(json!({"task": "Fix the cart total", "agentId": ada})).await;
    browser.goto(&hub.url(&format!("/#/agents/{ada}"))).await;
    let current = browser
        .wait_for("what it is doing", "return document.querySelector('#agent-current table')?.textContent")
        .await;
    let current = current.as_str().unwrap();
    assert!(
        current.contains("Review the migration plan") && current.contains("Fix the cart total"),
        "{current}"
    );
    assert!(!current.contains("Build the cart"), "finished work is not current: {current}");
    let order = browser
        .script(
            "const current = document.getElementById('agent-current'), edit = document.getElementById('agent-edit');
             return [Boolean(current.compareDocumentPosition(edit) & Node.DOCUMENT_POSITION_FOLLOWING), edit.open]",
        )
        .await;
    assert_eq!(order, json!([true, false]), "current work first, the edit forms after it, folded");
    let _ = mine;

    // A cron trigger in words, with its zone; the next run in the browser's zone, named.
    must(
        &hub,
        "/api/triggers",
        None,
        json!({"name": "nightly", "type": "cron", "schedule": "0 2 * * *", "timezone": "Europe/Paris",
               "prompt": "Review", "target": "pool"}),
    )
    .await;
    browser.goto(&hub.url("/#/triggers")).await;
    let when = browser
        .wait_for(
            "the trigger",
            "return document.querySelector('#trigger-list tr[data-name=nightly] .cron')?.textContent",
        )
        .await;
    assert_eq!(when, json!("every day at 02:00 (Europe/Paris time) 0 2 * * *"));
    let next = browser
        .script(
            "const next = document.querySelector('#trigger-list tr[data-name=nightly] .next-run');
             const zone = new Intl.DateTimeFormat(undefined, {timeZoneName: 'short'}).formatToParts(new Date(next.dateTime))
               .find((part) => part.type === 'timeZoneName').value;
             return [next.textContent, zone]",
        )
        .await;
    let (text, zone) = (next[0].as_str().unwrap(), next[1].as_str().unwrap());
    assert!(!zone.is_empty() && text.ends_with(zone), "the zone is named: {next}");

    // Without Slack the Inbox says so, not that every message was answered.
    browser.goto(&hub.url("/#/inbox")).await;
    let inbox = browser
        .wait_for("the inbox", "return document.getElementById('inbox-no-slack') && document.getElementById('inbox-messages').textContent")
        .await;
    let inbox = inbox.as_str().unwrap();
    assert!(inbox.contains("Slack is not configured"), "{inbox}");
    assert!(!inbox.contains("every message was answered"), "{inbox}");
    let (_, health) = hub.get("/health", None).await;
    assert_eq!(health["slackConfigured"], false, "{health}");
    browser.close().await;
}

/// The character after `kept` in the long epic task's text.
fn in_epic_text(kept: &str) -> Option<char> {
    let text = "Write the onboarding guide for merchants who sell internationally and need taxes and duties";
    assert!(text.starts_with(kept), "{kept:?}");
    text[kept.len()..].chars().next()
}
