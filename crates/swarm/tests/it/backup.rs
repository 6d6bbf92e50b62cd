//! `swarm backup` of a live hub under write load, and `swarm restore`: every task
//! acknowledged before the backup started is in the restored database.

use std::{
    process::{Command, Output},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

use serde_json::json;

use crate::{
    hub::{Database, Hub, SWARM, sqlite_file},
    support::eventually,
};

const WRITERS: usize = 4;

fn swarm(args: &[&str]) -> Output {
    // DATABASE_URL from the environment would win over --db.
    Command::new(SWARM).args(args).env_remove("DATABASE_URL").output().expect("run swarm")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_under_write_load_restores_every_acknowledged_task() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("swarm.db");
    let hub = Arc::new(Hub::start(&sqlite_file(dir.path()), None));

    // Writers create tasks without pause; an id is recorded once the hub answered 201.
    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let (hub, acknowledged, stop) = (hub.clone(), acknowledged.clone(), stop.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let body = json!({"task": format!("writer {writer} task {n}")});
                    let (status, task) = hub.post("/api/tasks", None, body).await;
                    assert_eq!(status, 201, "{task}");
                    acknowledged.lock().unwrap().push(task["id"].as_str().unwrap().to_string());
                    n += 1;
                }
            })
        })
        .collect();
    let count = || acknowledged.lock().unwrap().len();
    eventually("the writers to have some tasks acknowledged", || async { (count() >= 200).then_some(()) })
        .await;

    let before: Vec<String> = acknowledged.lock().unwrap().clone();
    let backup_file = dir.path().join("backup.db");
    let args = ["backup", backup_file.to_str().unwrap(), "--db", live.to_str().unwrap()].map(String::from);
    let output =
        tokio::task::spawn_blocking(move || swarm(&args.each_ref().map(String::as_str))).await.unwrap();
    let during = count() - before.len();
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }
    assert!(output.status.success(), "swarm backup: {}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("backed up "), "{output:?}");
    assert!(during > 0, "the writers acknowledged nothing while the backup ran: no load was shown");

    // The live database is in use: restoring over it is refused, and nothing changes.
    let output = swarm(&["restore", backup_file.to_str().unwrap(), "--db", live.to_str().unwrap()]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("is in use"), "{}", stderr(&output));
    drop(hub);

    // Restored where no process has the file open (a hub in this test process keeps its
    // connections until the process ends, so a new path stands for a stopped hub's).
    let target = dir.path().join("restored.db");
    let output = swarm(&["restore", backup_file.to_str().unwrap(), "--db", target.to_str().unwrap()]);
    assert!(output.status.success(), "swarm restore: {}", stderr(&output));

    let restored = Hub::start(&Database::SqliteFile(target), None);
    let (status, stats) = restored.get("/api/stats", None).await;
    assert_eq!(status, 200);
    let total = stats["tasks"]["total"].as_u64().unwrap() as usize;
    assert!(total >= before.len() && total <= before.len() + during, "{total} tasks restored");
    for id in &before {
        let (status, task) = restored.get(&format!("/api/tasks/{id}"), None).await;
        assert_eq!(status, 200, "task {id}, acknowledged before the backup, is missing: {task}");
    }
}

#[tokio::test]
async fn restore_refuses_what_is_not_a_good_backup() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();

    std::fs::write(path("garbage.db"), "not a database at all, but long enough to look like a file").unwrap();
    let output = swarm(&["restore", &path("garbage.db"), "--db", &path("target.db")]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("is not a readable SQLite database"), "{}", stderr(&output));

    // A backup never overwrites a file.
    drop(Hub::start(&Database::SqliteFile(dir.path().join("stopped.db")), None));
    let output = swarm(&["backup", &path("garbage.db"), "--db", &path("stopped.db")]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("already exists"), "{}", stderr(&output));
    assert!(std::fs::read_to_string(path("garbage.db")).unwrap().starts_with("not a database"));

    let output = swarm(&["restore", &path("missing.db"), "--db", &path("target.db")]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("no backup at"), "{}", stderr(&output));
    assert!(!dir.path().join("target.db").exists(), "a refused restore writes nothing");

    let output = swarm(&["backup", &path("copy.db"), "--db", &path("absent.db")]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("no database at"), "{}", stderr(&output));

    let output = Command::new(SWARM)
        .args(["backup", &path("copy.db")])
        .env("DATABASE_URL", "postgres://127.0.0.1/swarm")
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(stderr(&output).contains("pg_dump"), "{}", stderr(&output));
}
