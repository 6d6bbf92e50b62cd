//! No hub without a key (issue 23, finding 1): `swarm serve` started with no `API_KEY`
//! generates one, keeps it 0600 beside its database and leaves it for the user's local
//! commands, so the zero-config start still works on one machine while a web page (or
//! anyone else who reaches the port) gets 401. `--insecure-no-auth` opts out, loudly.

use std::{os::unix::fs::PermissionsExt, path::Path, process::Command};

use serde_json::json;

use crate::{
    hub::{Database, Hub, SWARM, sqlite_file},
    runner::{Runner, RunnerSetup, create, registered, task_in},
    support::postgres_url,
};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|err| panic!("{}: {err}", path.display())).permissions().mode()
        & 0o777
}

fn port_of(hub: &Hub) -> u16 {
    hub.base_url.rsplit(':').next().unwrap().parse().unwrap()
}

/// `swarm <args>` as the user whose home is `home`, with no key of its own.
fn swarm_as_user(home: &Path, args: &[&str]) -> std::process::Output {
    Command::new(SWARM)
        .args(args)
        .env_remove("API_KEY")
        .env_remove("AGENT_ID")
        .env_remove("MCP_BASE_URL")
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .output()
        .expect("swarm runs")
}

#[tokio::test]
async fn a_hub_started_without_a_key_generates_one_that_local_commands_use() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let db = sqlite_file(dir.path());
    let Database::SqliteFile(db_path) = &db else { unreachable!() };
    let hub = Hub::spawn_generating_key(&db, &home, &[]);
    let key = hub.api_key.clone().unwrap();
    let port = port_of(&hub);

    // Kept beside the database and left for this user's commands, both private.
    let key_file = dir.path().join(format!("{}.key", db_path.file_name().unwrap().to_string_lossy()));
    assert!(key.starts_with("swk_") && key.len() > 40, "{key}");
    assert_eq!(mode(&key_file), 0o600);
    let shared = home.join(format!(".config/swarm/keys/localhost-{port}.key"));
    assert_eq!(std::fs::read_to_string(&shared).unwrap().trim(), key);
    assert_eq!(mode(&shared), 0o600);
    assert_eq!(mode(shared.parent().unwrap()), 0o700);
    let banner = hub.banner.join("\n");
    assert!(banner.contains(&key_file.display().to_string()), "the banner says where the key is:\n{banner}");
    assert!(!banner.contains(&key), "the banner never prints the key:\n{banner}");
    // Off a terminal there is no sign-in link (it holds the key), and the banner says so.
    assert!(
        banner.contains("sign-in link: shown on a terminal only") && banner.contains("sign-in form"),
        "the banner says how to sign in without the link:\n{banner}"
    );

    // Without the key: 401, whoever asks, and a cross-site form post creates nothing.
    let http = reqwest::Client::new();
    let refused = http.get(format!("{}/api/tasks", hub.base_url)).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let cross_site = http
        .post(format!("{}/api/tasks", hub.base_url))
        .header("Origin", "http://evil.example")
        .header("Content-Type", "text/plain")
        .body(r#"{"task":"exfiltrate the repo"}"#)
        .send()
        .await
        .unwrap();
    assert!(cross_site.status().is_client_error(), "{}", cross_site.status());
    let (status, tasks) = hub.get("/api/tasks", None).await;
    assert_eq!(status, 200, "the key opens the API");
    assert_eq!(tasks["tasks"], json!([]), "the cross-site post created nothing");

    // The user's own CLI finds the key, by either loopback name.
    for url in [format!("http://127.0.0.1:{port}"), format!("http://localhost:{port}")] {
        let output =
            swarm_as_user(&home, &["task", "create", "Write the release notes", "--url", &url, "--json"]);
        assert!(output.status.success(), "{url}: {}", String::from_utf8_lossy(&output.stderr));
    }
    // Another user of the machine has no key file: told what to set.
    let other = swarm_as_user(&dir.path().join("other-user"), &["task", "list", "--url", &hub.base_url]);
    assert!(!other.status.success());
    let said = String::from_utf8_lossy(&other.stderr);
    assert!(said.contains("401") && said.contains("API_KEY") && said.contains(".key"), "{said}");

    // A runner of this user needs nothing but the URL: it works a task to the end.
    let work = dir.path().join("runner");
    std::fs::create_dir_all(&work).unwrap();
    let runner = Runner::start(
        &hub,
        RunnerSetup::worker(&work)
            .env("HOME", home.display().to_string())
            .env("XDG_CONFIG_HOME", home.join(".config").display().to_string()),
    );
    registered(&hub, &runner).await;
    let id = create(&hub, json!({"task": "Tidy the changelog", "agentId": runner.agent_id})).await;
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
}

#[tokio::test]
async fn a_restarted_hub_keeps_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let db = sqlite_file(dir.path());
    let first = Hub::spawn_generating_key(&db, &home, &[]);
    let key = first.api_key.clone().unwrap();
    drop(first);
    let again = Hub::spawn_generating_key(&db, &home, &[]);
    assert_eq!(again.api_key.as_deref(), Some(key.as_str()), "the same key after a restart");
    let banner = again.banner.join("\n");
    assert!(banner.contains("api key: kept in"), "{banner}");
    let (status, _) = again.get("/api/tasks", None).await;
    assert_eq!(status, 200);
    let shared = home.join(format!(".config/swarm/keys/localhost-{}.key", port_of(&again)));
    assert_eq!(std::fs::read_to_string(shared).unwrap().trim(), key, "left again for the port it serves now");
}

#[test]
fn a_key_file_that_others_can_read_stops_the_hub() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("swarm.db");
    let key_file = dir.path().join("swarm.db.key");
    std::fs::write(&key_file, "swk_seen_by_everyone\n").unwrap();
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let output =
        swarm_as_user(&dir.path().join("home"), &["serve", "--port", "0", "--db", db.to_str().unwrap()]);
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("chmod 600") && said.contains("swarm.db.key"), "{said}");
}

#[test]
fn a_postgres_hub_without_a_key_refuses_to_start_and_says_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let output =
        swarm_as_user(&dir.path().join("home"), &["serve", "--port", "0", "--database-url", &postgres_url()]);
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("API_KEY") && said.contains("--api-key-file") && said.contains("--insecure-no-auth"),
        "{said}"
    );
}

#[tokio::test]
async fn insecure_no_auth_serves_without_a_key_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::spawn(&sqlite_file(dir.path()), None);
    let banner = hub.banner.join("\n");
    assert!(banner.contains("WARNING: --insecure-no-auth"), "{banner}");
    let open = reqwest::get(format!("{}/api/tasks", hub.base_url)).await.unwrap();
    assert_eq!(open.status(), 200);
    assert!(!dir.path().join("swarm.db.key").exists(), "no key file for a hub without a key");
    let both = swarm_as_user(
        &dir.path().join("home"),
        &["serve", "--port", "0", "--insecure-no-auth", "--api-key", "k", "--db", "x.db"],
    );
    assert!(!both.status.success(), "a key and --insecure-no-auth exclude each other");
}
