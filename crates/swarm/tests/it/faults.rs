//! Faults survived (issue 25): the hub killed with SIGKILL under a mixed write load, a
//! full disk under SQLite, PostgreSQL restarted under two replicas. Each test counts
//! what a user would: acknowledged writes lost (must be none), work handed out twice
//! (none), and whether the hub and its runners come back by themselves.

use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    process::Command,
    sync::{Arc, Mutex},
    time::Instant,
};

use serde_json::{Value, json};
use sqlx::Connection;

use crate::{
    hub::{Database, Hub, sqlite_file},
    runner::{Runner, RunnerSetup, create, registered, task_in},
    support::eventually,
};

fn new_agent_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn free_port() -> String {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string()
}

/// What the load's clients were told, kept for checking after the restart.
#[derive(Default)]
struct Acknowledged {
    created: HashSet<String>,
    /// Task id → the workers whose polls were handed it.
    handed: HashMap<String, Vec<String>>,
    completed: HashSet<String>,
    /// Mail id → its sender.
    mail: HashMap<String, String>,
}

impl Acknowledged {
    fn writes(&self) -> usize {
        self.created.len() + self.completed.len() + self.mail.len()
    }
}

/// One client of the load: creates a task, asks for work as `worker` and finishes what
/// it gets, sends mail to `peer`, until the hub stops answering.
async fn load_client(url: String, worker: String, peer: String, seen: Arc<Mutex<Acknowledged>>) {
    let http = reqwest::Client::new();
    for round in 0.. {
        let body = json!({"task": format!("{worker} {round}")});
        let Ok(created) = http.post(format!("{url}/api/tasks")).json(&body).send().await else { return };
        if created.status() != 201 {
            return;
        }
        let Ok(task) = created.json::<Value>().await else { return };
        seen.lock().unwrap().created.insert(task["id"].as_str().unwrap().to_string());

        let polled = http.get(format!("{url}/api/poll")).header("X-Agent-ID", &worker).send().await;
        let Ok(polled) = polled else { return };
        let Ok(polled) = polled.json::<Value>().await else { return };
        if polled["trigger"]["type"] == "task_assigned" {
            let id = polled["trigger"]["taskId"].as_str().unwrap().to_string();
            seen.lock().unwrap().handed.entry(id.clone()).or_default().push(worker.clone());
            let finish = json!({"status": "completed", "output": "done"});
            let finished = http
                .post(format!("{url}/api/tasks/{id}/finish"))
                .header("X-Agent-ID", &worker)
                .json(&finish)
                .send()
                .await;
            let Ok(finished) = finished else { return };
            if finished.status() == 200 {
                seen.lock().unwrap().completed.insert(id);
            }
        }

        let mail = json!({"to": peer, "subject": format!("round {round}"), "body": "still here"});
        let sent =
            http.post(format!("{url}/api/mail")).header("X-Agent-ID", &worker).json(&mail).send().await;
        let Ok(sent) = sent else { return };
        if sent.status() == 201
            && let Ok(mail) = sent.json::<Value>().await
        {
            seen.lock().unwrap().mail.insert(mail["id"].as_str().unwrap().to_string(), worker.clone());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_under_load_loses_no_acknowledged_write_and_runners_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let port = free_port();
    // Short leases: a claim the kill cut off comes back within seconds of the restart.
    let flags = ["--port", port.as_str(), "--lease-seconds", "2", "--rescue-interval-seconds", "1"];
    let hub = Hub::spawn_with(&database, None, &flags);
    // The runner may be running one of the load's pool tasks when the hub dies: that agent
    // run fails (its MCP connection is cut), which stops a runner without --yolo by design.
    // What this test asks is that a runner that keeps going finds the new hub by itself.
    let mut setup = RunnerSetup::worker(dir.path());
    setup.env.push(("YOLO", "true".into()));
    let runner = Runner::start(&hub, setup);
    registered(&hub, &runner).await;

    let workers: Vec<String> = (0..4).map(|_| new_agent_id()).collect();
    for (n, worker) in workers.iter().enumerate() {
        let body = json!({"name": format!("load-{n}"), "maxTasks": 10});
        assert_eq!(hub.post("/api/agents", Some(worker), body).await.0, 201);
    }
    let seen = Arc::new(Mutex::new(Acknowledged::default()));
    let clients: Vec<_> = workers
        .iter()
        .enumerate()
        .map(|(n, worker)| {
            let peer = format!("load-{}", (n + 1) % workers.len());
            tokio::spawn(load_client(hub.base_url.clone(), worker.clone(), peer, seen.clone()))
        })
        .collect();
    eventually("a few hundred acknowledged writes", || async {
        (seen.lock().unwrap().writes() >= 300).then_some(())
    })
    .await;
    hub.kill();
    for client in clients {
        client.await.unwrap();
    }

    let hub = Hub::spawn_with(&database, None, &flags);
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let (status, tasks) = hub.get("/api/tasks?limit=1000", None).await;
    assert_eq!(status, 200);
    let status_of: HashMap<String, String> = tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|task| (task["id"].as_str().unwrap().to_string(), task["status"].as_str().unwrap().to_string()))
        .collect();
    let lost: Vec<&String> = seen.created.iter().filter(|id| !status_of.contains_key(*id)).collect();
    assert!(lost.is_empty(), "acknowledged tasks lost: {lost:?}");
    let undone: Vec<&String> = seen
        .completed
        .iter()
        .filter(|id| status_of.get(*id).map(String::as_str) != Some("completed"))
        .collect();
    assert!(undone.is_empty(), "acknowledged finishes lost: {undone:?}");
    let twice: Vec<(&String, &Vec<String>)> = seen.handed.iter().filter(|(_, to)| to.len() > 1).collect();
    assert!(twice.is_empty(), "tasks handed out twice: {twice:?}");
    for (id, sender) in &seen.mail {
        let (status, mail) = hub.get(&format!("/api/mail/{id}"), Some(sender)).await;
        assert_eq!(status, 200, "acknowledged mail {id} lost: {mail}");
    }
    eprintln!(
        "acknowledged before the kill: {} tasks created, {} completed, {} mail; none lost",
        seen.created.len(),
        seen.completed.len(),
        seen.mail.len()
    );

    // The runner parked on the killed hub finds the new one by itself.
    let id = create(&hub, json!({"task": "after the crash", "agentId": runner.agent_id})).await;
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    // A completed task is never handed out again.
    for worker in &workers {
        let (_, polled) = hub.get("/api/poll", Some(worker)).await;
        if let Some(id) = polled["trigger"]["taskId"].as_str() {
            assert!(!seen.completed.contains(id), "completed task {id} handed out again");
        }
    }
}

/// A small file system of the test's own for the database, unmounted when dropped.
struct SmallDisk {
    mount_point: PathBuf,
}

impl SmallDisk {
    fn mount(at: &Path, size: &str) -> SmallDisk {
        std::fs::create_dir_all(at).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .expect("run mount");
        assert!(
            mounted.status.success(),
            "the disk-full test mounts a {size} tmpfs, which needs root (CI runs as root): {}",
            String::from_utf8_lossy(&mounted.stderr)
        );
        SmallDisk { mount_point: at.to_path_buf() }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mount_point).status();
    }
}

/// Writes zeros into `path` until the file system refuses.
fn fill(path: &Path) {
    use std::io::Write;
    let mut file = std::fs::File::create(path).unwrap();
    let block = vec![0u8; 16 * 1024];
    while file.write_all(&block).is_ok() {}
    let _ = file.sync_all();
}

#[tokio::test]
async fn a_full_disk_refuses_writes_with_503_keeps_reads_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let disk = SmallDisk::mount(&dir.path().join("disk"), "8m");
    let path = disk.mount_point.join("swarm.db");
    let database = Database::SqliteFile(path.clone());
    let hub = Hub::start(&database, None);

    let mut acknowledged = Vec::new();
    let (status, task) = hub.post("/api/tasks", None, json!({"task": "before the disk filled"})).await;
    assert_eq!(status, 201, "{task}");
    acknowledged.push(task["id"].as_str().unwrap().to_string());

    let filler = disk.mount_point.join("filler");
    fill(&filler);
    let text = "x".repeat(4000);
    let mut refusal = None;
    for round in 0..3000 {
        let (status, body) = hub.post("/api/tasks", None, json!({"task": format!("{round} {text}")})).await;
        match status {
            201 => acknowledged.push(body["id"].as_str().unwrap().to_string()),
            503 => {
                refusal = Some(body);
                break;
            }
            other => panic!("a write on a full disk answered {other}: {body}"),
        }
    }
    let refusal = refusal.expect("writes on a full disk are refused");
    let message = refusal["error"].as_str().unwrap();
    assert!(message.contains("disk is full") && message.contains("Free space"), "{message}");

    let (status, listed) = hub.get("/api/tasks?limit=1", None).await;
    assert_eq!(status, 200, "reads keep working: {listed}");
    assert_eq!(listed["total"], acknowledged.len(), "every acknowledged write is there, nothing more");

    std::fs::remove_file(&filler).unwrap();
    let recovered = eventually("a write once space is back", || async {
        let (status, body) = hub.post("/api/tasks", None, json!({"task": "after the disk emptied"})).await;
        (status == 201).then_some(body)
    })
    .await;
    acknowledged.push(recovered["id"].as_str().unwrap().to_string());
    assert!(hub.terminate(), "the hub stops cleanly");

    let url = format!("sqlite://{}", path.display());
    let mut connection = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let (integrity,): (String,) =
        sqlx::query_as("PRAGMA integrity_check").fetch_one(&mut connection).await.unwrap();
    assert_eq!(integrity, "ok");
    let (count,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM tasks").fetch_one(&mut connection).await.unwrap();
    assert_eq!(count, i64::try_from(acknowledged.len()).unwrap());
    connection.close().await.unwrap();
}

/// A PostgreSQL server of the test's own, which it may restart without disturbing the
/// cluster the other tests share.
struct OwnPostgres {
    dir: tempfile::TempDir,
    url: String,
}

impl OwnPostgres {
    fn start() -> OwnPostgres {
        let dir = tempfile::tempdir().unwrap();
        let url = pg_cluster("start", &dir.path().join("pg"));
        OwnPostgres { dir, url }
    }

    /// Stops the server, cutting every connection, and starts it again on its port.
    fn restart(&self) {
        let url = pg_cluster("restart", &self.dir.path().join("pg"));
        assert_eq!(url, self.url, "the server comes back on its port");
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        let _ = run_pg_cluster("stop", &self.dir.path().join("pg"));
    }
}

fn run_pg_cluster(command: &str, dir: &Path) -> std::process::Output {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg-cluster");
    Command::new(script).arg(command).arg(dir).output().expect("run scripts/pg-cluster")
}

fn pg_cluster(command: &str, dir: &Path) -> String {
    let output = run_pg_cluster(command, dir);
    assert!(
        output.status.success(),
        "scripts/pg-cluster {command} (PostgreSQL must be installed: scripts/test installs it): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}

/// A poll parked on `on` for `worker`, answered with its body and how long it waited.
fn park(on: &Hub, worker: &str) -> tokio::task::JoinHandle<(Value, std::time::Duration)> {
    let url = on.url("/api/poll?wait=30");
    let worker = worker.to_string();
    tokio::spawn(async move {
        let started = Instant::now();
        let response = reqwest::Client::new().get(url).header("X-Agent-ID", worker).send().await.unwrap();
        (response.json().await.unwrap(), started.elapsed())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_ride_out_a_postgres_restart_without_duplicates_or_lost_wakes() {
    let postgres = OwnPostgres::start();
    let database = Database::Postgres(postgres.url.clone());
    let first = Hub::start(&database, None);
    let second = Hub::start(&database, None);
    let worker = new_agent_id();
    let body = json!({"name": "w", "maxTasks": 10});
    assert_eq!(first.post("/api/agents", Some(&worker), body).await.0, 201);

    // Before: a poll parked on one replica wakes for a task created on the other.
    let parked = park(&first, &worker);
    first.parked_polls(1).await;
    let before = create(&second, json!({"task": "before the restart", "agentId": worker})).await;
    let (body, _) = parked.await.unwrap();
    assert_eq!(body["trigger"]["taskId"], before.as_str(), "{body}");

    postgres.restart();
    // Writes while the server is away are refused whole (503), never half done.
    let created = eventually("the replicas to write again", || async {
        let body = json!({"task": "after the restart", "agentId": worker});
        let (status, answer) = second.post("/api/tasks", None, body).await;
        assert!(
            status == 201 || status == 503,
            "a write while PostgreSQL restarts answered {status}: {answer}"
        );
        (status == 201).then(|| answer["id"].as_str().unwrap().to_string())
    })
    .await;
    let polled = eventually("the first replica to read again", || async {
        let (status, body) = first.get("/api/poll", Some(&worker)).await;
        (status == 200).then_some(body)
    })
    .await;
    assert_eq!(polled["trigger"]["taskId"], created.as_str(), "{polled}");

    // After: LISTEN/NOTIFY wakes across replicas again, well within the wait.
    let parked = park(&first, &worker);
    first.parked_polls(1).await;
    let after = create(&second, json!({"task": "woken after the restart", "agentId": worker})).await;
    let (body, waited) = parked.await.unwrap();
    assert_eq!(body["trigger"]["taskId"], after.as_str(), "{body}");
    assert!(waited.as_secs() < 30, "woken by the other replica, not by the end of the wait");

    // Each task went to the worker once: none is left over, none handed out twice.
    let (_, tasks) = first.get("/api/tasks?limit=100", None).await;
    let statuses: Vec<&str> =
        tasks["tasks"].as_array().unwrap().iter().map(|task| task["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["in_progress"; 3], "{tasks}");
    let (_, again) = second.get("/api/poll", Some(&worker)).await;
    assert_eq!(again["trigger"], Value::Null, "nothing is handed out twice: {again}");
}
