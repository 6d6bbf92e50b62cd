//! Power loss loses nothing (issue 46): `scripts/power-loss [iterations]` runs
//! [`power_loss_sqlite`], which cuts the power under a SQLite hub again and again.
//!
//! The hub runs with `SWARM_TEST_POWER_LOSS=1`: the store's test-only VFS
//! (`crates/swarm-store-sqlite/src/power_loss.rs`) holds every write in memory until the
//! file's `fsync`, so killing the process loses exactly what a power cut would. Each cut is
//! either a SIGKILL at a random moment of a mixed write load (task creates, claims,
//! finishes, mail, webhook and Slack deliveries, whose dedupe marks are writes too), or
//! the VFS's own cut at a random write, sync or truncation (mid-commit, mid-checkpoint,
//! at a WAL restart), half of those torn: a random subset of the unsynced 4 KiB pieces
//! reaches the files first. After each cut: `PRAGMA integrity_check`, then a hub without
//! the VFS must show every write it acknowledged (HTTP 2xx), hand no acknowledged claim
//! out again, and take no acknowledged delivery a second time. Both with and without the
//! WAL-batching VFS (`--sqlite-wal-batching`), on one file per mode that every cut
//! inherits.
//!
//! Why a VFS and not a FUSE layer such as LazyFS: LazyFS is not packaged (Debian has only
//! libfuse), it would be built from source and mounted, which CI machines and containers
//! often may not do; the VFS needs nothing, it sees SQLite's own calls, so a cut can be
//! placed between any two of them, and the run is repeatable from its seed. It cannot see
//! what the kernel and the disk do below `fsync`; docs/reliability.md says what that
//! leaves to the file system.

use std::{
    collections::HashMap,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex, atomic::AtomicBool, atomic::Ordering},
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use sqlx::{ConnectOptions, Connection as _, Row, sqlite::SqliteConnectOptions};

use crate::{hub::SWARM, slack_stand_in::SlackStandIn};

const ITERATIONS_VAR: &str = "POWER_LOSS_ITERATIONS";
const SEED_VAR: &str = "POWER_LOSS_SEED";
/// The exit status of the VFS's own cut (`POWER_CUT_EXIT` in `power_loss.rs`).
const POWER_CUT_EXIT: i32 = 86;
const GITHUB_SECRET: &str = "gh-secret-0123456789abcdef";
const SLACK_SECRET: &str = "power-loss-signing-secret";
const WORKERS: usize = 4;

/// A small xorshift generator: a run is repeated by its seed.
#[derive(Clone)]
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }
}

/// What the hub acknowledged, and must still show after any cut.
#[derive(Default)]
struct Ledger {
    /// Created tasks not yet claimed by the load.
    open: Vec<String>,
    tasks: Vec<String>,
    /// Task → the agent whose claim was acknowledged.
    claimed: HashMap<String, String>,
    /// Claimed tasks not yet finished, by agent.
    to_finish: HashMap<String, Vec<String>>,
    finished: Vec<String>,
    /// Mail id → its recipient.
    mail: Vec<(String, String)>,
    /// Delivery id → (body, the task it created).
    deliveries: Vec<(String, Vec<u8>, String)>,
    /// Slack events answered 200 (id, ts): the bridge handles them after answering, so
    /// they are not acknowledged writes, but none may become two inbox messages.
    slack_events: Vec<(String, String)>,
    /// How many acknowledgements came before the last cut's check (older ones are sampled).
    checked_before: Checked,
}

#[derive(Default, Clone, Copy)]
struct Checked {
    tasks: usize,
    claimed: usize,
    finished: usize,
    mail: usize,
    deliveries: usize,
    slack_events: usize,
}

#[derive(Default)]
struct Totals {
    crashes: u64,
    corrupt: u64,
    lost: u64,
    twice: u64,
    acknowledged: u64,
}

struct Spawned {
    child: Child,
    base: String,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `swarm serve` on `database`, or how it ended when it died before listening.
fn spawn_hub(
    database: &Path,
    batching: bool,
    slack_api: &str,
    env: &[(&str, String)],
) -> Result<Spawned, std::process::ExitStatus> {
    let mut command = Command::new(SWARM);
    command
        .args(["serve", "--host", "127.0.0.1", "--port", "0", "--insecure-no-auth", "--db"])
        .arg(database)
        .args(["--slack-bot-token", "xoxb-test", "--slack-signing-secret", SLACK_SECRET])
        .args(["--slack-api-url", slack_api, "--slack-allowed-user-ids", "U1"])
        // The load's agents never heartbeat: no claim may run out during the run, or the
        // rescuer would rightly hand it out again.
        .args(["--lease-seconds", "86400"])
        .env_remove("LEASE_SECONDS")
        .env_remove("API_KEY")
        .env_remove("DATABASE_URL")
        .env_remove("SQLITE_WAL_BATCHING")
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if batching {
        command.arg("--sqlite-wal-batching");
    }
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("the swarm binary starts");
    let stdout = child.stdout.take().expect("piped");
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    loop {
        match received.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => {
                if let Some(url) = line.split("listening on ").nth(1) {
                    let base = url.trim().to_string();
                    std::thread::spawn(move || while received.recv().is_ok() {});
                    return Ok(Spawned { child, base });
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(child.wait().expect("the hub's status"));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("the hub did not start within a minute")
            }
        }
    }
}

async fn call(request: reqwest::RequestBuilder) -> Option<(u16, Value)> {
    let response = request.timeout(Duration::from_secs(20)).send().await.ok()?;
    let status = response.status().as_u16();
    let body = response.bytes().await.ok()?;
    Some((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
}

fn signed_github(http: &reqwest::Client, base: &str, delivery: &str, body: &[u8]) -> reqwest::RequestBuilder {
    http.post(format!("{base}/api/webhooks/github"))
        .header("x-hub-signature-256", swarm_service::sign_body(GITHUB_SECRET, body))
        .header("x-github-event", "pull_request")
        .header("x-github-delivery", delivery)
        .header("content-type", "application/json")
        .body(body.to_vec())
}

fn signed_slack(http: &reqwest::Client, base: &str, body: &str) -> reqwest::RequestBuilder {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    http.post(format!("{base}/slack/events"))
        .header("content-type", "application/json")
        .header("x-slack-request-timestamp", now.to_string())
        .header("x-slack-signature", swarm_slack::signature::sign(SLACK_SECRET, now, body.as_bytes()))
        .body(body.to_string())
}

fn github_event(number: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "action": "review_requested", "requested_reviewer": {"login": "swarm-bot"},
        "pull_request": {"number": number, "title": "Power", "html_url": format!("https://github.com/o/r/pull/{number}")},
        "repository": {"full_name": "o/r"}, "sender": {"login": "ada"}
    }))
    .unwrap()
}

fn slack_event(event_id: &str, ts: &str) -> String {
    json!({"type": "event_callback", "event_id": event_id,
           "event": {"type": "app_mention", "user": "U1", "channel": "C1", "ts": ts,
                     "text": format!("<@UBOT> power {event_id}")}})
    .to_string()
}

/// One worker of the load: random writes until the hub stops answering or `stop` is set.
async fn load(
    base: String,
    agent: String,
    agents: Arc<Vec<String>>,
    ledger: Arc<Mutex<Ledger>>,
    stop: Arc<AtomicBool>,
    mut random: Random,
    tag: String,
) {
    let http = reqwest::Client::new();
    let mut n = 0_u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let answered = match random.below(10) {
            0..=2 => {
                let request =
                    http.post(format!("{base}/api/tasks")).json(&json!({"task": format!("{tag}-{n}")}));
                call(request).await.map(|(status, task)| {
                    if status == 201 {
                        let id = task["id"].as_str().unwrap().to_string();
                        let mut ledger = ledger.lock().unwrap();
                        ledger.tasks.push(id.clone());
                        ledger.open.push(id);
                    }
                })
            }
            3..=4 => {
                let Some(task) = ledger.lock().unwrap().open.pop() else { continue };
                let request =
                    http.post(format!("{base}/api/tasks/{task}/claim")).header("X-Agent-ID", &agent);
                call(request.json(&json!({}))).await.map(|(status, _)| {
                    let mut ledger = ledger.lock().unwrap();
                    if status == 200 {
                        ledger.claimed.insert(task.clone(), agent.clone());
                        ledger.to_finish.entry(agent.clone()).or_default().push(task);
                    } else {
                        // At its limit of tasks (20): another agent takes it later.
                        ledger.open.insert(0, task);
                    }
                })
            }
            5..=6 => {
                let Some(task) = ledger.lock().unwrap().to_finish.get_mut(&agent).and_then(Vec::pop) else {
                    continue;
                };
                let start = http.post(format!("{base}/api/tasks/{task}/start")).header("X-Agent-ID", &agent);
                let finish =
                    http.post(format!("{base}/api/tasks/{task}/finish")).header("X-Agent-ID", &agent);
                // Finished only once started: the finish of a claimed task that was never
                // started changes nothing and answers 200 "alreadyFinished" by design (the
                // reference's runner finishes every run; docs/reliability.md).
                match call(start.json(&json!({}))).await {
                    None => None,
                    Some((status, _)) if status != 200 => Some(()),
                    Some(_) => call(finish.json(&json!({"status": "completed", "output": "done"})))
                        .await
                        .map(|(status, _)| {
                            if status == 200 {
                                ledger.lock().unwrap().finished.push(task);
                            }
                        }),
                }
            }
            7 => {
                let to = agents[random.below(agents.len() as u64) as usize].clone();
                let request = http.post(format!("{base}/api/mail")).header("X-Agent-ID", &agent);
                let body = json!({"to": to, "subject": format!("{tag}-{n}"), "body": "power"});
                call(request.json(&body)).await.map(|(status, mail)| {
                    if status == 201 {
                        let id = mail["id"].as_str().unwrap().to_string();
                        ledger.lock().unwrap().mail.push((id, to));
                    }
                })
            }
            8 => {
                let delivery = format!("{tag}-{agent}-{n}");
                let body = github_event(random.next() >> 20);
                call(signed_github(&http, &base, &delivery, &body)).await.map(|(status, accepted)| {
                    if status == 202
                        && let Some(task) = accepted["taskId"].as_str()
                    {
                        ledger.lock().unwrap().deliveries.push((delivery, body, task.to_string()));
                    }
                })
            }
            _ => {
                let event_id = format!("Ev{tag}-{agent}-{n}");
                let ts = format!("{}.{n}", random.below(1 << 30));
                call(signed_slack(&http, &base, &slack_event(&event_id, &ts))).await.map(|(status, _)| {
                    if status == 200 {
                        ledger.lock().unwrap().slack_events.push((event_id, ts));
                    }
                })
            }
        };
        if answered.is_none() {
            return;
        }
    }
}

/// `PRAGMA integrity_check` of the file as the cut left it; `false` when it is not ok.
async fn integrity_ok(database: &Path) -> bool {
    let options =
        SqliteConnectOptions::new().filename(database).journal_mode(sqlx::sqlite::SqliteJournalMode::Wal);
    let Ok(mut connection) = options.connect().await else { return false };
    let rows = sqlx::query("PRAGMA integrity_check").fetch_all(&mut connection).await;
    let ok = rows.is_ok_and(|rows| rows.len() == 1 && rows[0].get::<String, _>(0) == "ok");
    let _ = connection.close().await;
    ok
}

/// The indices to check of a list whose first `before` entries were checked after an
/// earlier cut: all the new ones, and a sample of the old.
fn to_check(length: usize, before: usize, random: &mut Random) -> Vec<usize> {
    let mut indices: Vec<usize> = (before.min(length)..length).collect();
    for _ in 0..before.min(20) {
        indices.push(random.below(before as u64) as usize);
    }
    indices
}

/// A task's events, oldest first, as `event(agent…):old→new`: what happened to a write
/// the check finds missing.
fn history(task: &Value) -> String {
    let mut events: Vec<&Value> =
        task["logs"].as_array().map(|logs| logs.iter().collect()).unwrap_or_default();
    events.sort_by_key(|event| event["id"].as_str().unwrap_or_default().to_string());
    let line = |event: &&Value| {
        let agent = event["agentId"].as_str().unwrap_or("-").get(..8).unwrap_or("-").to_string();
        format!("{}({agent}):{}→{}", event["eventType"], event["oldValue"], event["newValue"])
    };
    events.iter().map(line).collect::<Vec<_>>().join(", ")
}

/// The checks after a cut, on a hub without the power-loss VFS: (lost, handed out twice).
async fn check(
    base: &str,
    ledger: &mut Ledger,
    agents: &[String],
    random: &mut Random,
    all: bool,
) -> (u64, u64) {
    let http = reqwest::Client::new();
    let before = if all { Checked::default() } else { ledger.checked_before };
    let (mut lost, mut twice) = (0, 0);
    let get = |path: String, agent: Option<&str>| {
        let mut request = http.get(format!("{base}{path}"));
        if let Some(agent) = agent {
            request = request.header("X-Agent-ID", agent);
        }
        call(request)
    };
    for index in to_check(ledger.tasks.len(), before.tasks, random) {
        let id = &ledger.tasks[index];
        if get(format!("/api/tasks/{id}"), None).await.map(|answer| answer.0) != Some(200) {
            eprintln!("lost: task {id}");
            lost += 1;
        }
    }
    let claimed: Vec<(String, String)> = ledger.claimed.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    for index in to_check(claimed.len(), before.claimed, random) {
        let (task, agent) = &claimed[index];
        let answer = get(format!("/api/tasks/{task}"), None).await.unwrap_or_default();
        if answer.1["agentId"].as_str() != Some(agent) || answer.1["status"] == "unassigned" {
            eprintln!(
                "lost: the claim of {task} by {agent}: {}; its history: {}",
                answer.1["status"],
                history(&answer.1)
            );
            lost += 1;
        }
        let other = agents.iter().find(|other| *other != agent).unwrap();
        let again = http.post(format!("{base}/api/tasks/{task}/claim")).header("X-Agent-ID", other);
        if call(again.json(&json!({}))).await.map(|answer| answer.0) == Some(200) {
            eprintln!("handed out twice: {task}");
            twice += 1;
        }
    }
    for index in to_check(ledger.finished.len(), before.finished, random) {
        let id = &ledger.finished[index];
        let answer = get(format!("/api/tasks/{id}"), None).await.unwrap_or_default();
        if answer.1["status"] != "completed" {
            eprintln!(
                "lost: the finish of {id}: {}; its history: {}",
                answer.1["status"],
                history(&answer.1)
            );
            lost += 1;
        }
    }
    for index in to_check(ledger.mail.len(), before.mail, random) {
        let (id, to) = &ledger.mail[index];
        if get(format!("/api/mail/{id}"), Some(to)).await.map(|answer| answer.0) != Some(200) {
            eprintln!("lost: mail {id}");
            lost += 1;
        }
    }
    for index in to_check(ledger.deliveries.len(), before.deliveries, random) {
        let (delivery, body, task) = &ledger.deliveries[index];
        if get(format!("/api/tasks/{task}"), None).await.map(|answer| answer.0) != Some(200) {
            eprintln!("lost: the task of delivery {delivery}");
            lost += 1;
        }
        let again = call(signed_github(&http, base, delivery, body)).await.unwrap_or_default();
        if again.1["taskId"].is_string() {
            eprintln!("handed out twice: delivery {delivery} made a second task");
            twice += 1;
        }
    }
    // Every acknowledged Slack event, sent again, is known: none becomes a second
    // inbox message (what the lead is handed).
    for index in to_check(ledger.slack_events.len(), before.slack_events, random) {
        let (event_id, ts) = &ledger.slack_events[index];
        let _ = call(signed_slack(&http, base, &slack_event(event_id, ts))).await;
    }
    ledger.checked_before = Checked {
        tasks: ledger.tasks.len(),
        claimed: ledger.claimed.len(),
        finished: ledger.finished.len(),
        mail: ledger.mail.len(),
        deliveries: ledger.deliveries.len(),
        slack_events: ledger.slack_events.len(),
    };
    (lost, twice)
}

/// Slack inbox messages by content (each event's text is its own): one each, never two.
async fn slack_messages(database: &Path) -> HashMap<String, i64> {
    let options = SqliteConnectOptions::new().filename(database);
    let mut connection = options.connect().await.expect("the database opens");
    let rows = sqlx::query("SELECT content, count(*) FROM inbox_messages GROUP BY content")
        .fetch_all(&mut connection)
        .await
        .unwrap_or_default();
    let _ = connection.close().await;
    rows.iter().map(|row| (row.get::<String, _>(0), row.get::<i64, _>(1))).collect()
}

async fn run_mode(batching: bool, iterations: u64, random: &mut Random, totals: &mut Totals) {
    let stand_in = SlackStandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let database: PathBuf = dir.path().join("power.db");
    // Set up without the VFS: agents, the webhook's trigger.
    let hub = spawn_hub(&database, batching, &stand_in.api_url, &[]).expect("the hub starts on a new file");
    let http = reqwest::Client::new();
    let mut agents = Vec::new();
    for n in 0..WORKERS {
        let id = uuid::Uuid::new_v4().to_string();
        let request = http.post(format!("{}/api/agents", hub.base)).header("X-Agent-ID", &id);
        let body = json!({"name": format!("power-{n}"), "maxTasks": 20, "isLead": n == 0});
        assert_eq!(call(request.json(&body)).await.unwrap().0, 201);
        agents.push(id);
    }
    let trigger =
        json!({"name": "github", "type": "github", "webhookSecret": GITHUB_SECRET, "githubBot": "swarm-bot"});
    let created = call(http.post(format!("{}/api/triggers", hub.base)).json(&trigger)).await.unwrap();
    assert_eq!(created.0, 201, "{}", created.1);
    drop(hub);
    let agents = Arc::new(agents);
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mode = if batching { "batching" } else { "plain" };
    let (mut lost_here, mut corrupt_here, mut twice_here) = (0, 0, 0);
    for iteration in 0..iterations {
        let mut env = vec![("SWARM_TEST_POWER_LOSS", "1".to_string())];
        let cut_inside = random.below(2) == 0;
        if cut_inside {
            env.push(("SWARM_TEST_POWER_LOSS_CRASH_AT", (1 + random.below(6_000)).to_string()));
            if random.below(2) == 0 {
                env.push(("SWARM_TEST_POWER_LOSS_TORN", random.next().to_string()));
            }
        }
        let started = spawn_hub(&database, batching, &stand_in.api_url, &env);
        if let Err(status) = &started {
            assert_eq!(status.code(), Some(POWER_CUT_EXIT), "the hub died at start-up by itself: {status}");
        }
        if let Ok(mut hub) = started {
            let stop = Arc::new(AtomicBool::new(false));
            let workers: Vec<_> = (0..WORKERS)
                .map(|n| {
                    tokio::spawn(load(
                        hub.base.clone(),
                        agents[n].clone(),
                        Arc::clone(&agents),
                        Arc::clone(&ledger),
                        Arc::clone(&stop),
                        Random(random.next() | 1),
                        format!("{mode}{iteration}w{n}"),
                    ))
                })
                .collect();
            let deadline = Instant::now() + Duration::from_millis(200 + random.below(2_500));
            while Instant::now() < deadline && hub.child.try_wait().unwrap().is_none() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let _ = hub.child.kill();
            let status = hub.child.wait().unwrap();
            assert!(
                status.code().is_none() || status.code() == Some(POWER_CUT_EXIT),
                "the hub failed by itself: {status}"
            );
            stop.store(true, Ordering::Relaxed);
            for worker in workers {
                worker.await.unwrap();
            }
        }
        totals.crashes += 1;
        if !integrity_ok(&database).await {
            eprintln!("power-loss: {mode} cut {iteration}: integrity_check failed");
            corrupt_here += 1;
            break;
        }
        let Ok(verifier) = spawn_hub(&database, batching, &stand_in.api_url, &[]) else {
            eprintln!("power-loss: {mode} cut {iteration}: the hub does not start on the file");
            corrupt_here += 1;
            break;
        };
        let last = iteration + 1 == iterations;
        let mut held = std::mem::take(&mut *ledger.lock().unwrap());
        let (lost, twice) = check(&verifier.base, &mut held, &agents, random, last).await;
        *ledger.lock().unwrap() = held;
        lost_here += lost;
        twice_here += twice;
        // A clean stop, half the time: the next start then finds a checkpointed file
        // rather than a WAL to recover (the other half is killed on drop).
        if random.below(2) == 0 {
            let _ = Command::new("kill").args(["-TERM", &verifier.child.id().to_string()]).status();
            let mut verifier = verifier;
            let _ = verifier.child.wait();
        }
    }
    let ledger = std::mem::take(&mut *ledger.lock().unwrap());
    let inbox = slack_messages(&database).await;
    let doubled = inbox.values().filter(|count| **count > 1).count() as u64;
    twice_here += doubled;
    let acknowledged = (ledger.tasks.len()
        + ledger.claimed.len()
        + ledger.finished.len()
        + ledger.mail.len()
        + ledger.deliveries.len()) as u64;
    println!(
        "power-loss: {mode}: {iterations} cuts, {corrupt_here} corrupt, {lost_here} acknowledged writes lost, \
         {twice_here} handed out twice; {acknowledged} acknowledged writes ({} tasks, {} claims, {} finishes, \
         {} mail, {} webhook deliveries; {} Slack events sent, {} inbox messages)",
        ledger.tasks.len(),
        ledger.claimed.len(),
        ledger.finished.len(),
        ledger.mail.len(),
        ledger.deliveries.len(),
        ledger.slack_events.len(),
        inbox.len(),
    );
    totals.corrupt += corrupt_here;
    totals.lost += lost_here;
    totals.twice += twice_here;
    totals.acknowledged += acknowledged;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "minutes of power cuts: scripts/power-loss runs it"]
async fn power_loss_sqlite() {
    let iterations = std::env::var(ITERATIONS_VAR).ok().and_then(|value| value.parse().ok()).unwrap_or(50);
    let seed = std::env::var(SEED_VAR).ok().and_then(|value| value.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("power-loss: seed {seed} ({SEED_VAR}), {iterations} cuts with WAL batching off and on");
    let mut random = Random(seed | 1);
    let mut totals = Totals::default();
    for batching in [false, true] {
        run_mode(batching, iterations, &mut random, &mut totals).await;
    }
    println!(
        "power-loss: {} crashes, {} corrupt, {} acknowledged writes lost",
        totals.crashes, totals.corrupt, totals.lost
    );
    assert_eq!(
        (totals.corrupt, totals.lost, totals.twice),
        (0, 0, 0),
        "corrupt files, acknowledged writes lost, handed out twice (of {} acknowledged)",
        totals.acknowledged
    );
}
