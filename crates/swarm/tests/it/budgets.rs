//! Daily budgets over HTTP (issue 40): a reached budget refuses an assigned and a pool
//! task at the poll and lets them through once raised, on both stores; who may set them;
//! bad input; and the runner waiting on `budget_refused` instead of spinning. The racing
//! polls: the store conformance suite (`testkit::budgets`).

use reqwest::Method;
use serde_json::{Value, json};

use crate::hub::{Database, Hub, send, sqlite_file};
use crate::runner::{Runner, RunnerSetup, create, eventually, registered, task, task_in};

const KEY: &str = "budgets-key-0123456789";

async fn put(hub: &Hub, path: &str, caller: Option<&str>, body: Value) -> (u16, Value) {
    send(hub.request(Method::PUT, path, caller).json(&body)).await
}

async fn delete(hub: &Hub, path: &str, caller: Option<&str>) -> (u16, Value) {
    send(hub.request(Method::DELETE, path, caller)).await
}

async fn spend(hub: &Hub, agent: &str, usd: f64) {
    let body =
        json!({"sessionId": format!("s-{}", uuid::Uuid::now_v7()), "agentId": agent, "totalCostUsd": usd});
    let (status, answer) = hub.post("/api/session-costs", None, body).await;
    assert_eq!(status, 201, "{answer}");
}

async fn poll(hub: &Hub, agent: &str) -> Value {
    let (status, body) = hub.poll_as_runner(agent, 0).await;
    assert_eq!(status, 200, "{body}");
    body["trigger"].clone()
}

async fn refusals(hub: &Hub) -> Vec<Value> {
    let (status, body) = hub.get("/api/budgets/refusals", None).await;
    assert_eq!(status, 200, "{body}");
    body["refusals"].as_array().unwrap().clone()
}

async fn refuses_and_lets_through_when_raised(database: &Database) {
    let hub = Hub::start(database, Some(KEY));
    let spender = hub.register_agent("spender", false).await;
    let saver = hub.register_agent("saver", false).await;
    spend(&hub, &spender, 1.5).await;

    // The agent's own ceiling holds back its assigned task.
    let (status, budget) =
        put(&hub, &format!("/api/budgets/agent/{spender}"), None, json!({"dailyBudgetUsd": 1})).await;
    assert_eq!(status, 200, "{budget}");
    assert_eq!(
        (budget["scope"].as_str(), budget["scopeId"].as_str()),
        (Some("agent"), Some(spender.as_str()))
    );
    assert_eq!(budget["spentTodayUsd"], 1.5);
    let own = hub.create_task(json!({"task": "Write the parser", "agentId": spender})).await;
    let refused = poll(&hub, &spender).await;
    assert_eq!(refused["type"], "budget_refused", "{refused}");
    assert_eq!((refused["cause"].as_str(), refused["agentSpend"].as_f64()), (Some("agent"), Some(1.5)));
    assert_eq!(refused["agentBudget"], 1.0);
    assert!(refused["resetAt"].as_str().unwrap().ends_with("T00:00:00.000Z"), "{refused}");
    assert_eq!(poll(&hub, &spender).await["type"], "budget_refused", "asked again: refused again");
    assert_eq!(task(&hub, &own).await["status"], "pending");
    let recorded = refusals(&hub).await;
    assert_eq!(recorded.len(), 1, "one record however often it asks: {recorded:?}");
    assert_eq!(
        (recorded[0]["agentId"].as_str(), recorded[0]["taskId"].as_str()),
        (Some(&*spender), Some(&*own))
    );

    let (status, _) =
        put(&hub, &format!("/api/budgets/agent/{spender}"), None, json!({"dailyBudgetUsd": 5})).await;
    assert_eq!(status, 200);
    let started = poll(&hub, &spender).await;
    assert_eq!((started["type"].as_str(), started["taskId"].as_str()), (Some("task_assigned"), Some(&*own)));

    // The hub's ceiling holds back the pool, even from a worker that spent nothing.
    let pooled = hub.create_task(json!({"task": "Tidy the docs"})).await;
    let (status, _) = put(&hub, "/api/budgets/global/_global", None, json!({"dailyBudgetUsd": 1.25})).await;
    assert_eq!(status, 200);
    let refused = poll(&hub, &saver).await;
    assert_eq!((refused["cause"].as_str(), refused["globalSpend"].as_f64()), (Some("global"), Some(1.5)));
    assert_eq!(task(&hub, &pooled).await["status"], "unassigned");
    let (status, list) = hub.get("/api/budgets", None).await;
    assert_eq!(status, 200, "{list}");
    let shown: Vec<_> = list["budgets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|budget| (budget["scope"].as_str().unwrap(), budget["spentTodayUsd"].as_f64().unwrap()))
        .collect();
    assert_eq!(shown, [("agent", 1.5), ("global", 1.5)]);

    let (status, _) = delete(&hub, "/api/budgets/global/_global", None).await;
    assert_eq!(status, 204);
    let started = poll(&hub, &saver).await;
    assert_eq!(
        (started["type"].as_str(), started["taskId"].as_str()),
        (Some("task_assigned"), Some(&*pooled))
    );
    assert_eq!(refusals(&hub).await.len(), 2);
}

#[tokio::test]
async fn a_budget_refuses_assigned_and_pool_work_until_raised_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    refuses_and_lets_through_when_raised(&sqlite_file(dir.path())).await;
}

#[tokio::test]
async fn a_budget_refuses_assigned_and_pool_work_until_raised_on_postgres() {
    let database = crate::support::postgres_database().await;
    refuses_and_lets_through_when_raised(&database.database()).await;
}

#[tokio::test]
async fn budget_routes_refuse_bad_input_and_agents_changing_them() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let worker = hub.register_agent("worker", false).await;
    let other = hub.register_agent("other", false).await;
    let lead = hub.register_agent("lead", true).await;
    let mine = format!("/api/budgets/agent/{worker}");
    let (status, _) = put(&hub, &mine, None, json!({"dailyBudgetUsd": 2})).await;
    assert_eq!(status, 200);
    let (_, before) = hub.get("/api/budgets", None).await;

    let bad: [(&str, Value); 9] = [
        ("/api/budgets/user/someone", json!({"dailyBudgetUsd": 1})),
        ("/api/budgets/global/everyone", json!({"dailyBudgetUsd": 1})),
        ("/api/budgets/agent/not-a-uuid", json!({"dailyBudgetUsd": 1})),
        (&mine, json!({"dailyBudgetUsd": -1})),
        (&mine, json!({"dailyBudgetUsd": 1e12})),
        (&mine, json!({"dailyBudgetUsd": "5"})),
        (&mine, json!({})),
        (&mine, json!({"dailyBudgetUsd": 1, "currency": "EUR"})),
        (&mine, json!([1])),
    ];
    for (path, body) in bad {
        let (status, answer) = put(&hub, path, None, body.clone()).await;
        assert_eq!(status, 400, "{path} {body}: {answer}");
        assert!(answer["error"].as_str().is_some_and(|message| !message.is_empty()), "{answer}");
    }
    let unknown = format!("/api/budgets/agent/{}", uuid::Uuid::now_v7());
    let (status, answer) = put(&hub, &unknown, None, json!({"dailyBudgetUsd": 1})).await;
    assert_eq!(status, 404, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("not registered"), "{answer}");

    // Only the operator changes a budget: not the agent itself, not the lead.
    for caller in [&worker, &lead] {
        let (status, answer) = put(&hub, &mine, Some(caller), json!({"dailyBudgetUsd": 100})).await;
        assert_eq!(status, 403, "{answer}");
        let (status, _) = delete(&hub, &mine, Some(caller)).await;
        assert_eq!(status, 403);
    }
    let (_, after) = hub.get("/api/budgets", None).await;
    assert_eq!(before, after, "refused requests changed nothing");

    // A worker reads the global budget and its own; the lead reads all.
    let (status, own) = hub.get(&mine, Some(&worker)).await;
    assert_eq!((status, own["dailyBudgetUsd"].as_f64()), (200, Some(2.0)), "{own}");
    let (status, _) = hub.get(&mine, Some(&other)).await;
    assert_eq!(status, 403);
    let (status, listed) = hub.get("/api/budgets", Some(&other)).await;
    assert_eq!((status, listed["budgets"].as_array().map(Vec::len)), (200, Some(0)), "{listed}");
    let (status, listed) = hub.get("/api/budgets", Some(&lead)).await;
    assert_eq!((status, listed["budgets"].as_array().map(Vec::len)), (200, Some(1)), "{listed}");
    let (status, answer) = hub.get("/api/budgets/global/_global", Some(&other)).await;
    assert_eq!(status, 404, "none set: {answer}");
    let (status, answer) = hub.get("/api/budgets/refusals?limit=0", None).await;
    assert_eq!(status, 400, "{answer}");

    let (status, _) = delete(&hub, &mine, None).await;
    assert_eq!(status, 204);
    let (status, answer) = delete(&hub, &mine, None).await;
    assert_eq!(status, 404, "{answer}");
}

#[tokio::test]
async fn a_runner_waits_on_budget_refused_and_starts_the_task_once_raised() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let runner = Runner::start(&hub, RunnerSetup::worker(dir.path()));
    registered(&hub, &runner).await;
    let agent = runner.agent_id.clone();
    spend(&hub, &agent, 1.5).await;
    let budget = format!("/api/budgets/agent/{agent}");
    let (status, _) = put(&hub, &budget, None, json!({"dailyBudgetUsd": 1})).await;
    assert_eq!(status, 200);

    let id = create(&hub, json!({"task": "Write the release notes", "agentId": agent})).await;
    let line = eventually("the runner saying why it waits", || async {
        runner.output().lines().find(|line| line.contains("daily budget is reached")).map(str::to_string)
    })
    .await;
    assert!(line.contains("$1.50 spent of $1.00 today") && line.contains("asking again in"), "{line}");
    assert_eq!(task(&hub, &id).await["status"], "pending", "a refused runner started nothing");
    assert!(crate::runner::records(dir.path()).is_empty(), "no agent run was started");

    let (status, _) = put(&hub, &budget, None, json!({"dailyBudgetUsd": 10})).await;
    assert_eq!(status, 200);
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    // It waited rather than asking on every turn of its loop: one record, and each wait
    // it announced twice the one before.
    assert_eq!(refusals(&hub).await.len(), 1);
    let output = runner.output();
    let waits: Vec<&str> = output.lines().filter_map(|line| line.split("asking again in ").nth(1)).collect();
    let doubling = ["2.0s", "4.0s", "8.0s", "16.0s", "32.0s", "1m00s"];
    assert!(!waits.is_empty() && doubling.starts_with(&waits), "{waits:?}\n{output}");
}

/// The dashboard's overview shows each budget with today's spend against it, and which
/// are reached.
#[tokio::test]
async fn the_overview_shows_spend_against_each_budget() {
    let browser = crate::webdriver::Browser::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let spender = hub.register_agent("spender", false).await;
    spend(&hub, &spender, 1.5).await;
    for (path, usd) in
        [(format!("/api/budgets/agent/{spender}"), 1.0), ("/api/budgets/global/_global".into(), 20.0)]
    {
        let (status, answer) = put(&hub, &path, None, json!({"dailyBudgetUsd": usd})).await;
        assert_eq!(status, 200, "{answer}");
    }
    browser.goto(&hub.url(&format!("/#key={KEY}"))).await;
    let rows = browser
        .wait_for(
            "the budgets with today's spend",
            "const rows = [...document.querySelectorAll('#overview-budgets tr[data-budget-scope]')];
             return rows.length === 2
               ? rows.map((row) => [row.dataset.budgetScope, row.dataset.reached,
                                    [...row.querySelectorAll('td')].slice(0, 3).map((cell) => cell.textContent)])
               : null",
        )
        .await;
    assert_eq!(
        rows,
        json!([
            ["agent", "true", ["spender", "$1.50", "$1.00"]],
            ["global", "false", ["everyone (global)", "$1.50", "$20.00"]],
        ])
    );

    // Raised: the page hears of it on the change stream and shows it, no reload.
    let (status, _) =
        put(&hub, &format!("/api/budgets/agent/{spender}"), None, json!({"dailyBudgetUsd": 5})).await;
    assert_eq!(status, 200);
    let raised = browser
        .wait_for(
            "the raised budget",
            "const row = document.querySelector('#overview-budgets tr[data-budget-scope=agent]');
             return row && row.dataset.reached === 'false' ? row.querySelectorAll('td')[2].textContent : null",
        )
        .await;
    assert_eq!(raised, json!("$5.00"));
    browser.close().await;
}

/// Inbox-MCP's `get_next_task` takes work through the same claim: past a budget it starts
/// nothing and says why.
#[tokio::test]
async fn get_next_task_starts_nothing_past_a_budget_and_says_why() {
    use crate::mcp_client::{connect_stdio, ok};
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let hub = Hub::start(&database, None);
    let worker = hub.register_agent("inbox-worker", false).await;
    spend(&hub, &worker, 0.75).await;
    let (status, _) =
        put(&hub, &format!("/api/budgets/agent/{worker}"), None, json!({"dailyBudgetUsd": 0.5})).await;
    assert_eq!(status, 200);
    let id = hub.create_task(json!({"task": "Answer the ticket", "agentId": worker})).await;

    let client = connect_stdio(&database, Some(&worker), &[]).await;
    let answer = ok(&client, "get_next_task", json!({})).await;
    assert!(answer["next_task"].is_null(), "{answer}");
    assert_eq!(answer["trigger"]["type"], "budget_refused", "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("the agent daily budget is reached"), "{answer}");
    assert_eq!(task(&hub, &id).await["status"], "pending");

    let (status, _) =
        put(&hub, &format!("/api/budgets/agent/{worker}"), None, json!({"dailyBudgetUsd": 2})).await;
    assert_eq!(status, 200);
    let answer = ok(&client, "get_next_task", json!({})).await;
    assert_eq!(answer["next_task"]["id"], id.as_str(), "{answer}");
}
