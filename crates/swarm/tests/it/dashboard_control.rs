//! The dashboard as the control room (issue 49), in headless Chromium against a real hub:
//! task ids a person can tell apart, "Needs you" on the overview with its actions, and
//! the spend per agent, epic and day. Screenshots go to `target/dashboard-screenshots/`.

use std::{collections::HashSet, path::PathBuf};

use serde_json::{Value, json};

use crate::{
    hub::{Hub, send, sqlite_file},
    support::eventually,
    webdriver::Browser,
};

const KEY: &str = "dashboard-control-key";

fn screenshots_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("dashboard-screenshots")
}

async fn sign_in(browser: &Browser, hub: &Hub, path: &str) {
    browser.goto(&hub.url(path)).await;
    browser.wait_for("the login form", "return !document.getElementById('login').hidden").await;
    browser.type_into("#login-key", KEY).await;
    browser.click("#login-form button[type=submit]").await;
}

async fn must(hub: &Hub, path: &str, agent: Option<&str>, body: Value) -> Value {
    let (status, answer) = hub.post(path, agent, body).await;
    assert!((200..300).contains(&status), "{path}: {status} {answer}");
    answer
}

async fn task_status(hub: &Hub, id: &str) -> Value {
    let (status, body) = hub.get(&format!("/api/tasks/{id}"), None).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn spend(hub: &Hub, agent: &str, task: &str, usd: f64) {
    must(
        hub,
        "/api/session-costs",
        None,
        json!({"sessionId": format!("s-{}", uuid::Uuid::now_v7()), "agentId": agent, "taskId": task, "totalCostUsd": usd}),
    )
    .await;
}

#[tokio::test]
async fn tasks_made_in_one_second_have_id_labels_that_differ() {
    let browser = Browser::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let mut ids = Vec::new();
    for n in 0..12 {
        ids.push(hub.create_task(json!({ "task": format!("Same-second task {n}") })).await);
    }
    // UUIDv7: the first 8 hex digits are the top of a millisecond timestamp, the same for
    // about a minute; what the dashboard used to show.
    let prefixes: HashSet<&str> = ids.iter().map(|id| &id[..8]).collect();
    assert!(prefixes.len() < ids.len(), "the tasks were made within the same minute: {ids:?}");

    // Nothing failed, nobody is gone: "Needs you" says so in one line.
    sign_in(&browser, &hub, "/").await;
    let nothing = browser
        .wait_for(
            "an empty Needs you",
            "return document.querySelector('#needs-you .needs-nothing')?.textContent",
        )
        .await;
    assert_eq!(nothing, json!("Nothing needs you right now."));
    browser.script("location.hash = '#/tasks'; return null").await;
    let labels = browser
        .wait_for(
            "every task in the list",
            "const rows = [...document.querySelectorAll('tr.task-row')];
             return rows.length === 12 ? rows.map((row) => {
                 const link = row.querySelector('td a.task-link');
                 return [row.dataset.taskId, link.textContent, link.title];
             }) : null",
        )
        .await;
    let labels = labels.as_array().unwrap();
    let shown: HashSet<&str> = labels.iter().map(|row| row[1].as_str().unwrap()).collect();
    assert_eq!(shown.len(), ids.len(), "every id label differs: {labels:?}");
    for row in labels {
        let (id, label, title) =
            (row[0].as_str().unwrap(), row[1].as_str().unwrap(), row[2].as_str().unwrap());
        assert_eq!(label, format!("…{}", &id[id.len() - 8..]), "the label is the id's random end");
        assert_eq!(title, id, "the full id is on the label");
    }
    browser.screenshot(&screenshots_dir(), "tasks-short-ids").await;

    // The same short id finds the task on the hub, as the CLI asks it.
    let short = &ids[3][ids[3].len() - 8..];
    let (status, found) = hub.get(&format!("/api/task-ids/{short}"), None).await;
    assert_eq!((status, found["id"].as_str()), (200, Some(ids[3].as_str())), "{found}");
    browser.close().await;
}

#[tokio::test]
async fn needs_you_lists_failures_and_stranded_work_and_its_actions_work() {
    let browser = Browser::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let shots = screenshots_dir();
    let ada = hub.register_agent("ada", false).await;
    let bob = hub.register_agent("bob", false).await;
    let gone = hub.register_agent("gone", false).await;

    // Ada's run failed, with a reason.
    let failed = hub
        .create_task(json!({ "task": "Migrate the invoices table", "agentId": ada, "priority": 70 }))
        .await;
    must(&hub, &format!("/api/tasks/{failed}/start"), Some(&ada), json!({})).await;
    let reason = "the migration tool crashed: exit status 3";
    must(
        &hub,
        &format!("/api/tasks/{failed}/finish"),
        Some(&ada),
        json!({"status": "failed", "failureReason": reason}),
    )
    .await;
    // `gone` holds two tasks, then goes offline.
    let started = hub.create_task(json!({ "task": "Rewrite the importer", "agentId": gone })).await;
    must(&hub, &format!("/api/tasks/{started}/start"), Some(&gone), json!({})).await;
    let waiting = hub.create_task(json!({ "task": "Document the importer", "agentId": gone })).await;
    let (status, _) = send(hub.request(reqwest::Method::POST, "/close", Some(&gone)).json(&json!({}))).await;
    assert_eq!(status, 204);

    // Costs: an epic's task and a loose one, and a budget for ada.
    let epic =
        must(&hub, "/api/epics", None, json!({"name": "billing", "goal": "Invoices that add up"})).await;
    let epic_id = epic["id"].as_str().unwrap().to_string();
    let in_epic =
        must(&hub, &format!("/api/epics/{epic_id}/tasks"), None, json!({"task": "Invoice totals"})).await;
    let in_epic = in_epic["id"].as_str().unwrap().to_string();
    spend(&hub, &ada, &in_epic, 1.25).await;
    spend(&hub, &ada, &failed, 0.5).await;
    spend(&hub, &gone, &started, 0.75).await;
    let (status, _) = send(
        hub.request(reqwest::Method::PUT, &format!("/api/budgets/agent/{ada}"), None)
            .json(&json!({"dailyBudgetUsd": 5})),
    )
    .await;
    assert_eq!(status, 200);

    // Ada's runner gives a stalled run back, saying why.
    let stalled = hub.create_task(json!({ "task": "Resize the thumbnails", "agentId": ada })).await;
    must(&hub, &format!("/api/tasks/{stalled}/start"), Some(&ada), json!({})).await;
    let stall = "stalled: no output for 10 minutes";
    must(&hub, &format!("/api/tasks/{stalled}/give-back"), Some(&ada), json!({ "reason": stall })).await;

    // Mail that waits for the lead's answer: one urgent, one normal.
    hub.register_agent("boss", true).await;
    for (priority, subject) in [("urgent", "Prod is down"), ("normal", "Which column type?")] {
        must(
            &hub,
            "/api/mail",
            Some(&bob),
            json!({"to": "coordinator", "type": "help_request", "priority": priority, "awaitingResponse": true,
                   "subject": subject, "body": "Please answer"}),
        )
        .await;
    }

    sign_in(&browser, &hub, "/").await;
    let colours = browser
        .wait_for(
            "the waiting mail under Needs you, urgent and normal apart",
            "const badges = [...document.querySelectorAll('#needs-you .needs-mail .badge')];
             if (badges.length !== 2) return null;
             return badges.map((badge) => [badge.textContent, getComputedStyle(badge).backgroundColor]);",
        )
        .await;
    let colours = colours.as_array().unwrap();
    assert_eq!(
        colours.iter().map(|pair| pair[0].as_str().unwrap()).collect::<HashSet<_>>(),
        HashSet::from(["urgent", "normal"]),
        "{colours:?}"
    );
    assert_ne!(colours[0][1], colours[1][1], "urgent and normal have colours of their own: {colours:?}");
    let failure = browser
        .wait_for(
            "the failed task under Needs you",
            &format!(
                "const item = document.querySelector('#needs-you .needs-failed[data-task-id=\"{failed}\"]');
                 return item ? item.querySelector('.failure-reason').textContent : null"
            ),
        )
        .await;
    assert_eq!(failure, json!(reason));
    let given_back = browser
        .wait_for(
            "the stalled run under Needs you",
            &format!(
                "return document.querySelector('#needs-you .needs-handed-back[data-task-id=\"{stalled}\"] .needs-why')?.textContent"
            ),
        )
        .await;
    assert_eq!(given_back, json!(stall));
    let stranded = browser
        .wait_for(
            "the offline holder under Needs you",
            "const items = [...document.querySelectorAll('#needs-you .needs-offline')];
             return items.length === 2 ? items.map((item) => [item.dataset.taskId, item.textContent]) : null",
        )
        .await;
    let stranded = stranded.to_string();
    assert!(
        stranded.contains(&started) && stranded.contains(&waiting) && stranded.contains("gone"),
        "{stranded}"
    );
    assert_eq!(
        browser.script("return document.querySelector('#page-overview h2').textContent").await,
        json!("Needs you"),
        "the overview opens with it"
    );

    // The spend: per agent, per epic and per day, each adding up to the total.
    let costs = browser
        .wait_for(
            "the spend",
            "const week = document.getElementById('cost-week');
             if (!week) return null;
             const sum = (css, key) => [...document.querySelectorAll(css)].reduce((total, el) => total + Number(el.dataset[key]), 0);
             return { total: Number(week.dataset.usd), today: Number(document.getElementById('cost-today').dataset.usd),
                      agents: sum('tr.cost-agent', 'week'), epics: sum('tr.cost-epic', 'week'), days: sum('.cost-day', 'usd'),
                      text: document.getElementById('overview-costs').textContent }",
        )
        .await;
    assert_eq!(costs["total"], json!(2.5), "{costs}");
    assert_eq!(costs["today"], json!(2.5), "{costs}");
    for part in ["agents", "epics", "days"] {
        assert_eq!(costs[part], json!(2.5), "the {part} add up: {costs}");
    }
    let text = costs["text"].as_str().unwrap();
    assert!(
        text.contains("ada") && text.contains("$1.75") && text.contains("billing") && text.contains("$5.00"),
        "{text}"
    );
    browser.screenshot(&shots, "overview-needs-you").await;
    browser.screenshot_of("#overview-costs", &shots, "overview-costs").await;

    // Retry: a new task with the same text, in the pool; the failure leaves the list.
    browser.click(&format!("#needs-you .needs-failed[data-task-id='{failed}'] button.retry")).await;
    let retried = eventually("the retry task", || async {
        let (_, list) = hub.get("/api/tasks?search=Migrate%20the%20invoices&limit=10", None).await;
        list["tasks"].as_array().unwrap().iter().find(|task| task["id"] != failed.as_str()).cloned()
    })
    .await;
    assert_eq!(retried["task"], "Migrate the invoices table");
    assert_eq!(retried["status"], "unassigned");
    assert_eq!(retried["priority"], 70, "{retried}");
    browser
        .wait_for(
            "the failure handled",
            &format!("return !document.querySelector('#needs-you .needs-failed[data-task-id=\"{failed}\"]')"),
        )
        .await;

    // Release frees the started task to the pool; reassign gives the other one to bob.
    browser.click(&format!("#needs-you .needs-offline[data-task-id='{started}'] button.release")).await;
    let said = browser
        .wait_for(
            "the release answered",
            &format!(
                "const item = document.querySelector('#needs-you .needs-offline[data-task-id=\"{started}\"]');
                 return item ? (item.querySelector('.form-status')?.textContent || null) : 'gone'"
            ),
        )
        .await;
    assert!(said == json!("gone") || said == json!("released to the pool"), "{said}");
    eventually("the released task in the pool", || async {
        (task_status(&hub, &started).await["status"] == "unassigned").then_some(())
    })
    .await;
    browser
        .script(&format!(
            "const item = document.querySelector('#needs-you .needs-offline[data-task-id=\"{waiting}\"]');
             const select = item.querySelector('select.reassign-to');
             select.value = '{bob}';
             select.dispatchEvent(new Event('change'));
             return null"
        ))
        .await;
    browser.click(&format!("#needs-you .needs-offline[data-task-id='{waiting}'] button.reassign")).await;
    let moved = eventually("the reassigned task with bob", || async {
        let task = task_status(&hub, &waiting).await;
        (task["agentId"] == bob.as_str()).then_some(task)
    })
    .await;
    assert_eq!(moved["status"], "pending");
    browser
        .wait_for("no offline holder left", "return !document.querySelector('#needs-you .needs-offline')")
        .await;
    assert_eq!(
        browser.script("return document.querySelectorAll('#needs-you .needs-handed-back').length").await,
        json!(1),
        "what a person released or reassigned does not come back as handed back"
    );

    // The agent's page and the epics page show their spend.
    browser.goto(&hub.url(&format!("/#/agents/{ada}"))).await;
    let line =
        browser.wait_for("ada's spend", "return document.getElementById('agent-spend')?.textContent").await;
    assert!(line.as_str().unwrap().contains("$1.75 today of $5.00 budget"), "{line}");
    browser.goto(&hub.url("/#/epics")).await;
    let epic_row = browser
        .wait_for(
            "the epic's spend",
            "return document.querySelector('#epic-list tr[data-name=billing] .spend')?.textContent",
        )
        .await;
    assert!(epic_row.as_str().unwrap().contains("$1.25 today"), "{epic_row}");
    browser.close().await;
}

#[tokio::test]
async fn needs_you_lists_waiting_offers_blocked_chains_and_budget_refusals() {
    let browser = Browser::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let ada = hub.register_agent("ada", false).await;
    let bob = hub.register_agent("bob", false).await;
    let carol = hub.register_agent("carol", false).await;

    // An offer bob has not answered.
    let offered = hub.create_task(json!({ "task": "Review the schema change", "offeredTo": bob })).await;
    // A chain whose first link failed: the second can never start.
    let first = hub.create_task(json!({ "task": "Build the exporter", "agentId": ada })).await;
    let second = hub.create_task(json!({ "task": "Ship the exporter", "dependsOn": [first] })).await;
    must(&hub, &format!("/api/tasks/{first}/start"), Some(&ada), json!({})).await;
    must(
        &hub,
        &format!("/api/tasks/{first}/finish"),
        Some(&ada),
        json!({"status": "failed", "failureReason": "the build broke"}),
    )
    .await;
    // Carol is past her budget and is refused her task.
    spend(&hub, &carol, &first, 1.5).await;
    let (status, _) = send(
        hub.request(reqwest::Method::PUT, &format!("/api/budgets/agent/{carol}"), None)
            .json(&json!({"dailyBudgetUsd": 1})),
    )
    .await;
    assert_eq!(status, 200);
    hub.create_task(json!({ "task": "Tidy the changelog", "agentId": carol })).await;
    let (status, polled) = hub.poll_as_runner(&carol, 0).await;
    assert_eq!((status, polled["trigger"]["type"].as_str()), (200, Some("budget_refused")), "{polled}");

    sign_in(&browser, &hub, "/").await;
    let offer = browser
        .wait_for(
            "the waiting offer under Needs you",
            &format!(
                "return document.querySelector('#needs-you .needs-offer[data-task-id=\"{offered}\"]')?.textContent || null"
            ),
        )
        .await;
    assert!(offer.as_str().unwrap().contains("bob"), "{offer}");
    let blocked = browser
        .wait_for(
            "the blocked chain under Needs you",
            &format!(
                "return document.querySelector('#needs-you .needs-blocked[data-task-id=\"{second}\"] .needs-why')?.textContent || null"
            ),
        )
        .await;
    assert!(blocked.as_str().unwrap().starts_with("waits on failed"), "{blocked}");
    let refusal = browser
        .wait_for(
            "the budget refusal under Needs you",
            &format!(
                "return document.querySelector('#needs-you .needs-budget[data-agent-id=\"{carol}\"]')?.textContent || null"
            ),
        )
        .await;
    let refusal = refusal.as_str().unwrap();
    assert!(refusal.contains("carol") && refusal.contains("$1.50 of $1.00"), "{refusal}");

    // Cancel the blocked task; hand the offer to ada although bob is online.
    browser.click(&format!("#needs-you .needs-blocked[data-task-id='{second}'] button.cancel")).await;
    eventually("the blocked task cancelled", || async {
        (task_status(&hub, &second).await["status"] == "cancelled").then_some(())
    })
    .await;
    browser
        .script(&format!(
            "const item = document.querySelector('#needs-you .needs-offer[data-task-id=\"{offered}\"]');
             const select = item.querySelector('select.reassign-to');
             select.value = '{ada}';
             select.dispatchEvent(new Event('change'));
             return null"
        ))
        .await;
    browser.click(&format!("#needs-you .needs-offer[data-task-id='{offered}'] button.reassign")).await;
    let moved = eventually("the offer with ada", || async {
        let task = task_status(&hub, &offered).await;
        (task["agentId"] == ada.as_str()).then_some(task)
    })
    .await;
    assert_eq!(moved["status"], "pending", "{moved}");
    browser
        .wait_for(
            "the handled items gone",
            "return !document.querySelector('#needs-you .needs-blocked, #needs-you .needs-offer')",
        )
        .await;
    browser.close().await;
}
