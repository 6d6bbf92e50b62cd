//! An acknowledged write survives PostgreSQL's crash (issue 46), with the settings
//! docs/reliability.md names for production: `fsync`, `synchronous_commit` and
//! `full_page_writes` on.
//!
//! The test starts a cluster of its own (`scripts/pg-cluster`, whose defaults trade
//! durability for speed, so the production settings are appended and the server
//! restarted), never the shared test cluster, which it crashes with `pg_ctl stop -m
//! immediate` (every backend gone at once, no checkpoint, recovery from the WAL at the
//! next start) while a hub writes to it.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::json;
use sqlx::{Connection, PgConnection};

use crate::hub::{Database, Hub};

const PRODUCTION_SETTINGS: &str = "\n# postgres_crash: the settings docs/reliability.md names\n\
    fsync = on\nsynchronous_commit = on\nfull_page_writes = on\n";

fn pg_cluster(command: &str, dir: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg-cluster");
    let output = Command::new(script).arg(command).arg(dir).output().expect("scripts/pg-cluster runs");
    assert!(
        output.status.success(),
        "scripts/pg-cluster {command}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}

/// A cluster of this test's own: its folder, reachable by the server's user when the
/// test runs as root, so that scripts/pg-cluster keeps the data in it.
struct Cluster {
    _parent: tempfile::TempDir,
    dir: PathBuf,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg-cluster");
        let _ = Command::new(script).arg("stop").arg(&self.dir).output();
    }
}

async fn setting(url: &str, name: &str) -> String {
    let mut connection = PgConnection::connect(url).await.expect("the test's cluster answers");
    let value: String =
        sqlx::query_scalar("SELECT current_setting($1)").bind(name).fetch_one(&mut connection).await.unwrap();
    connection.close().await.unwrap();
    value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_an_immediate_postgres_stop_with_the_documented_settings() {
    let parent = tempfile::tempdir().unwrap();
    std::fs::set_permissions(parent.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let cluster = Cluster { dir: parent.path().join("pg"), _parent: parent };
    pg_cluster("start", &cluster.dir);
    let config = cluster.dir.canonicalize().unwrap().join("postgresql.conf");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(PRODUCTION_SETTINGS);
    std::fs::write(&config, text).unwrap();
    let url = pg_cluster("restart", &cluster.dir);
    for name in ["fsync", "synchronous_commit", "full_page_writes"] {
        assert_eq!(setting(&url, name).await, "on", "{name} after the restart");
    }

    let hub = Hub::start(&Database::Postgres(url.clone()), None);
    let agent = hub.register_agent_with("durable", json!({"maxTasks": 20})).await;
    let acknowledged = Arc::new(Mutex::new(Vec::<(String, &str)>::new()));
    // Writers that keep going until the server is gone: creates, and claims of each.
    let writers: Vec<_> = (0..3)
        .map(|worker| {
            let (base, agent, acknowledged) =
                (hub.base_url.clone(), agent.clone(), Arc::clone(&acknowledged));
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                for n in 0.. {
                    let created = http
                        .post(format!("{base}/api/tasks"))
                        .json(&json!({"task": format!("w{worker} {n}")}))
                        .timeout(Duration::from_secs(10))
                        .send()
                        .await;
                    let Ok(created) = created else { return };
                    if created.status() != 201 {
                        return;
                    }
                    let task: serde_json::Value = created.json().await.unwrap();
                    let id = task["id"].as_str().unwrap().to_string();
                    acknowledged.lock().unwrap().push((id.clone(), "created"));
                    let claimed = http
                        .post(format!("{base}/api/tasks/{id}/claim"))
                        .header("X-Agent-ID", &agent)
                        .json(&json!({}))
                        .timeout(Duration::from_secs(10))
                        .send()
                        .await;
                    match claimed {
                        Ok(response) if response.status() == 200 => {
                            acknowledged.lock().unwrap().push((id.clone(), "claimed"));
                        }
                        _ => return,
                    }
                    // Finished, so that the agent stays under its limit of tasks.
                    for step in ["start", "finish"] {
                        let answered = http
                            .post(format!("{base}/api/tasks/{id}/{step}"))
                            .header("X-Agent-ID", &agent)
                            .json(&json!({"status": "completed", "output": "done"}))
                            .timeout(Duration::from_secs(10))
                            .send()
                            .await;
                        if !answered.is_ok_and(|response| response.status() == 200) {
                            return;
                        }
                    }
                    acknowledged.lock().unwrap().push((id, "completed"));
                }
            })
        })
        .collect();
    // The crash comes while the writers write: once some writes are acknowledged.
    crate::support::eventually("200 acknowledged writes", || async {
        (acknowledged.lock().unwrap().len() >= 200).then_some(())
    })
    .await;
    // scripts/pg-cluster's stop is `pg_ctl stop -m immediate`; its restart starts the
    // server again on the same port without rewriting the settings.
    pg_cluster("stop", &cluster.dir);
    for writer in writers {
        writer.await.unwrap();
    }
    hub.kill();
    let url = pg_cluster("restart", &cluster.dir);
    assert_eq!(setting(&url, "synchronous_commit").await, "on");

    let restarted = Hub::start(&Database::Postgres(url), None);
    let acknowledged = acknowledged.lock().unwrap().clone();
    let mut lost = Vec::new();
    for (id, what) in &acknowledged {
        let (status, task) = restarted.get(&format!("/api/tasks/{id}"), None).await;
        let present = status == 200
            && match *what {
                "claimed" => task["agentId"].as_str() == Some(agent.as_str()),
                "completed" => task["status"] == "completed",
                _ => true,
            };
        if !present {
            lost.push(format!("{id} ({what}): {status} {task}"));
        }
    }
    assert!(lost.is_empty(), "{} of {} acknowledged writes lost: {lost:?}", lost.len(), acknowledged.len());
}
