//! Exactly once under concurrency: 64 workers and a lead long-poll real hubs while
//! thousands of tasks arrive as offers, assignments and pool work. Every trigger must
//! be delivered exactly once: no task handed to two pollers, none lost. Run on SQLite,
//! on PostgreSQL, and on two `swarm serve` replicas sharing one PostgreSQL database.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use serde_json::{Value, json};

use crate::{
    hub::{Hub, sqlite_file},
    support::postgres_database,
};

const WORKERS: usize = 64;
const TASKS: usize = 1800;
const CREATORS: usize = 4;
/// Generous: the point is correctness; a hang is a lost trigger.
const DEADLINE: Duration = Duration::from_secs(150);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Pool,
    Offered,
    Assigned,
}

/// How often each task was handed out, per trigger type.
#[derive(Default)]
struct Ledger {
    offered: Mutex<HashMap<String, usize>>,
    assigned: Mutex<HashMap<String, usize>>,
    finished: Mutex<HashMap<String, usize>>,
    notified: AtomicUsize,
    /// Told when the lead has heard of every task.
    all_notified: tokio::sync::Notify,
}

fn record(counts: &Mutex<HashMap<String, usize>>, id: &str) {
    *counts.lock().unwrap().entry(id.to_string()).or_default() += 1;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_trigger_is_delivered_exactly_once_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    stress(&[hub]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_trigger_is_delivered_exactly_once_on_postgres() {
    let database = postgres_database().await;
    let hub = Hub::start(&database.database(), None);
    stress(&[hub]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_trigger_is_delivered_exactly_once_across_two_postgres_replicas() {
    let postgres = postgres_database().await;
    let database = postgres.database();
    let replicas = [Hub::start(&database, None), Hub::start(&database, None)];
    stress(&replicas).await;
}

async fn stress(hubs: &[Hub]) {
    let http = reqwest::Client::new();
    let urls: Vec<String> = hubs.iter().map(|hub| hub.base_url.clone()).collect();
    let lead = register(&http, &urls[0], "lead", true).await;
    let mut workers = Vec::new();
    for n in 0..WORKERS {
        workers.push(register(&http, &urls[n % urls.len()], &format!("worker-{n}"), false).await);
    }

    let ledger = Arc::new(Ledger::default());
    let done = Arc::new(AtomicBool::new(false));
    let mut pollers = Vec::new();
    for (n, worker) in workers.iter().enumerate() {
        let (http, url, worker) = (http.clone(), urls[n % urls.len()].clone(), worker.clone());
        let (ledger, done) = (ledger.clone(), done.clone());
        pollers.push(tokio::spawn(async move { work(&http, &url, &worker, &ledger, &done).await }));
    }
    let lead_poller = {
        let (http, url, lead) = (http.clone(), urls[0].clone(), lead.clone());
        let (ledger, done) = (ledger.clone(), done.clone());
        tokio::spawn(async move { lead_loop(&http, &url, &lead, &ledger, &done).await })
    };

    // Tasks arrive while everyone is polling, through every replica.
    let mut creators = Vec::new();
    let workers = Arc::new(workers);
    for creator in 0..CREATORS {
        let (http, urls, workers) = (http.clone(), urls.clone(), workers.clone());
        creators.push(tokio::spawn(async move {
            let mut created = Vec::new();
            for n in (creator..TASKS).step_by(CREATORS) {
                let target = &workers[(n * 7) % workers.len()];
                let (kind, body) = match n % 3 {
                    0 => (Kind::Pool, json!({"task": format!("pool {n}")})),
                    1 => (Kind::Offered, json!({"task": format!("offer {n}"), "offeredTo": target})),
                    _ => (Kind::Assigned, json!({"task": format!("assigned {n}"), "agentId": target})),
                };
                let url = format!("{}/api/tasks", urls[n % urls.len()]);
                let task: Value = expect_ok(http.post(url).json(&body).send().await, "create").await;
                created.push((task["id"].as_str().unwrap().to_string(), kind));
            }
            created
        }));
    }
    let mut created: Vec<(String, Kind)> = Vec::new();
    for creator in creators {
        created.extend(creator.await.unwrap());
    }

    // Until the lead has heard of every task; past the deadline, the checks below say what
    // was lost.
    let all_notified = ledger.all_notified.notified();
    if ledger.notified.load(Ordering::SeqCst) < TASKS {
        let _ = tokio::time::timeout(DEADLINE, all_notified).await;
    }
    done.store(true, Ordering::SeqCst);
    for poller in pollers {
        poller.await.unwrap();
    }
    lead_poller.await.unwrap();

    let offered = ledger.offered.lock().unwrap();
    let assigned = ledger.assigned.lock().unwrap();
    let finished = ledger.finished.lock().unwrap();
    let mut problems = Vec::new();
    for (id, kind) in &created {
        let times = |counts: &HashMap<String, usize>| counts.get(id).copied().unwrap_or(0);
        let expected_offers = usize::from(*kind == Kind::Offered);
        if times(&offered) != expected_offers {
            problems.push(format!("{kind:?} task {id}: task_offered {} times", times(&offered)));
        }
        if times(&assigned) != 1 {
            problems.push(format!("{kind:?} task {id}: task_assigned {} times", times(&assigned)));
        }
        if times(&finished) != 1 {
            problems.push(format!("{kind:?} task {id}: in tasks_finished {} times", times(&finished)));
        }
    }
    let known = created.len();
    for (what, counts) in [("offered", &*offered), ("assigned", &*assigned), ("finished", &*finished)] {
        let strangers = counts.keys().filter(|id| !created.iter().any(|(known, _)| known == *id)).count();
        if strangers > 0 {
            problems.push(format!("{strangers} {what} triggers name tasks that were never created"));
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {known} tasks were not delivered exactly once:\n{}",
        problems.len(),
        problems.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
    assert_eq!(known, TASKS);
}

async fn register(http: &reqwest::Client, url: &str, name: &str, is_lead: bool) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    let body = json!({"name": name, "isLead": is_lead, "maxTasks": 3});
    let _: Value = expect_ok(
        http.post(format!("{url}/api/agents")).header("X-Agent-ID", &id).json(&body).send().await,
        "register",
    )
    .await;
    id
}

/// A worker's runner, reduced to its protocol: poll; review offers by accepting them;
/// finish what it is assigned at once.
async fn work(http: &reqwest::Client, url: &str, worker: &str, ledger: &Ledger, done: &AtomicBool) {
    while !done.load(Ordering::SeqCst) {
        let request = http.get(format!("{url}/api/poll?wait=1")).header("X-Agent-ID", worker);
        let body: Value = expect_ok(request.send().await, "poll").await;
        let trigger = &body["trigger"];
        let Some(task_id) = trigger["taskId"].as_str() else {
            assert!(trigger.is_null(), "a worker only gets task triggers: {trigger}");
            continue;
        };
        let action = match trigger["type"].as_str() {
            Some("task_offered") => {
                record(&ledger.offered, task_id);
                json!({"action": "accept", "body": {}})
            }
            Some("task_assigned") => {
                record(&ledger.assigned, task_id);
                json!({"action": "finish", "body": {"status": "completed", "output": "done"}})
            }
            other => panic!("unexpected trigger {other:?}"),
        };
        let path = format!("{url}/api/tasks/{task_id}/{}", action["action"].as_str().unwrap());
        let response = http.post(path).header("X-Agent-ID", worker).json(&action["body"]).send().await;
        let answer: Value = expect_ok(response, "act on a trigger").await;
        assert_eq!(answer["alreadyFinished"], false, "the task was handed out twice: {answer}");
    }
}

async fn lead_loop(http: &reqwest::Client, url: &str, lead: &str, ledger: &Ledger, done: &AtomicBool) {
    while !done.load(Ordering::SeqCst) {
        let request = http.get(format!("{url}/api/poll?wait=1")).header("X-Agent-ID", lead);
        let body: Value = expect_ok(request.send().await, "lead poll").await;
        let trigger = &body["trigger"];
        if trigger.is_null() {
            continue;
        }
        assert_eq!(trigger["type"], "tasks_finished", "the lead gets no worker triggers here: {trigger}");
        let tasks = trigger["tasks"].as_array().unwrap();
        assert_eq!(trigger["count"].as_u64(), Some(tasks.len() as u64));
        for task in tasks {
            record(&ledger.finished, task["id"].as_str().unwrap());
        }
        if ledger.notified.fetch_add(tasks.len(), Ordering::SeqCst) + tasks.len() >= TASKS {
            ledger.all_notified.notify_one();
        }
    }
}

async fn expect_ok(response: reqwest::Result<reqwest::Response>, what: &str) -> Value {
    let response = response.unwrap_or_else(|error| panic!("{what}: the hub did not answer: {error}"));
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    assert!(status.is_success(), "{what}: status {status}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("{what}: not JSON: {text}"))
}
