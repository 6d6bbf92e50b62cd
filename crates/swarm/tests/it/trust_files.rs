//! Issue 39, private files: each test is the attack as it was made (another local user
//! reading the database or a backup, an agent reading another's service `env`, a new
//! user's `git add -A` in a checkout, a key file planted by another user), and fails on
//! the hub before the fix.
//!
//! The tests run as root (here and in CI), so "another user" is `nobody` through
//! `setpriv` where a read is tried, and otherwise the file's mode, which is what decides.

use std::{
    io::Read,
    os::unix::fs::{PermissionsExt, symlink},
    path::Path,
    process::{Command, Output, Stdio},
};

use serde_json::{Value, json};

use crate::{
    hub::{Database, Hub, SWARM, sqlite_file},
    mcp_client::{Revision, connect_http, ok},
    support::eventually,
    triggers::post_webhook,
};

const WEBHOOK_SECRET: &str = "whsec-the-4ttacker-wants-this";
const ENV_SECRET: &str = "postgres://app:pw-the-4ttacker-wants@db/app";

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|err| panic!("{}: {err}", path.display())).permissions().mode()
        & 0o777
}

/// `cat file` as user `nobody`, as another local user would try it.
fn read_as_nobody(file: &Path) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "cat"])
        .arg(file)
        .output()
        .expect("setpriv (util-linux) runs")
}

fn with_suffix(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

fn swarm(args: &[&str]) -> Output {
    Command::new(SWARM)
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("API_KEY")
        .output()
        .expect("swarm runs")
}

fn git(dir: &Path, args: &[&str]) -> Output {
    let output = Command::new("git").arg("-C").arg(dir).args(args).output().expect("git runs");
    assert!(output.status.success() || args[0] == "check-ignore", "git {args:?}: {output:?}");
    output
}

async fn agent(hub: &Hub, name: &str, extra: Value) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    let mut body = json!({ "name": name });
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let (status, body) = hub.post("/api/agents", Some(&id), body).await;
    assert_eq!(status, 201, "{body}");
    id
}

fn env_of<'a>(services: &'a Value, name: &str) -> &'a Value {
    services["services"]
        .as_array()
        .unwrap_or_else(|| panic!("services in {services}"))
        .iter()
        .find(|service| service["name"] == name)
        .map(|service| &service["env"])
        .unwrap_or_else(|| panic!("service {name} in {services}"))
}

/// A webhook trigger with a secret and a service with a secret `env` value, written so
/// that the WAL has frames; the webhook answers a signed request.
async fn write_secrets(hub: &Hub) -> String {
    let (status, created) = hub
        .post(
            "/api/triggers",
            None,
            json!({"name": "deploys", "type": "webhook", "webhookSecret": WEBHOOK_SECRET}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let owner = agent(hub, "owner", json!({})).await;
    let client = connect_http(hub, Some(&owner), Revision::Initialize).await;
    ok(
        &client,
        "register-service",
        json!({"name": "api", "script": "server.js", "env": {"DATABASE_URL": ENV_SECRET}}),
    )
    .await;
    owner
}

#[tokio::test]
async fn another_user_cannot_read_the_database_its_wal_or_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    // A folder the hub creates for its database, as `--db /var/lib/swarm/swarm.db` does.
    let db = dir.path().join("data").join("swarm.db");
    let hub = Hub::start(&Database::SqliteFile(db.clone()), Some("hub-key-0123456789abcdef"));
    write_secrets(&hub).await;

    assert_eq!(mode(db.parent().unwrap()), 0o700, "the folder the hub created");
    for file in [db.clone(), with_suffix(&db, "-wal"), with_suffix(&db, "-shm")] {
        assert_eq!(mode(&file), 0o600, "{}", file.display());
        let read = read_as_nobody(&file);
        assert!(!read.status.success() && read.stdout.is_empty(), "nobody read {}: {read:?}", file.display());
    }
    let banner = hub.banner.join("\n");
    assert!(!banner.contains("other users on this machine can read"), "{banner}");
}

#[tokio::test]
async fn a_database_others_can_read_is_named_at_start_with_the_chmod_to_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("swarm.db");
    drop(Hub::start(&sqlite_file(dir.path()), Some("hub-key-0123456789abcdef")));
    // An older swarm made it 0644.
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some("hub-key-0123456789abcdef"));
    let banner = hub.banner.join("\n");
    assert!(
        banner.contains("WARNING: other users on this machine can read the database")
            && banner.contains(&format!("chmod 600 {}", db.display())),
        "{banner}"
    );
}

#[tokio::test]
async fn webhook_secrets_and_env_values_are_not_in_the_database_files_in_clear() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("swarm.db");
    let hub = Hub::start(&sqlite_file(dir.path()), Some("hub-key-0123456789abcdef"));
    let owner = write_secrets(&hub).await;

    // Whoever reads the files (or a backup of them) finds neither.
    let mut bytes = Vec::new();
    for file in [db.clone(), with_suffix(&db, "-wal")] {
        bytes.extend(std::fs::read(&file).unwrap_or_default());
    }
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("enc:v1:"), "the values are stored sealed");
    assert!(!text.contains(WEBHOOK_SECRET), "the webhook secret is in the database in clear");
    assert!(!text.contains("pw-the-4ttacker-wants"), "the env value is in the database in clear");

    // The hub still has them: the webhook verifies its signature, the owner reads its env.
    let body = br#"{"ref":"main"}"#;
    let signature = swarm_service::sign_body(WEBHOOK_SECRET, body);
    let (status, accepted) = post_webhook(
        &hub,
        "deploys",
        body,
        &[("content-type", "application/json"), ("x-hub-signature-256", signature.as_str())],
    )
    .await;
    assert_eq!(status, 202, "{accepted}");
    let (_, mine) = hub.get("/api/services", Some(&owner)).await;
    assert_eq!(env_of(&mine, "api")["DATABASE_URL"], ENV_SECRET);
}

#[tokio::test]
async fn secrets_stored_in_clear_by_a_keyless_hub_are_sealed_when_a_hub_with_a_key_starts() {
    let dir = tempfile::tempdir().unwrap();
    // Header mode: a keyless hub even when the suite runs in token mode.
    let open = Hub::start_with(&sqlite_file(dir.path()), None, &["--agent-auth", "header"]);
    assert!(open.banner.join("\n").contains("stored in clear"), "{:?}", open.banner);
    write_secrets(&open).await;
    drop(open);

    let hub = Hub::start(&sqlite_file(dir.path()), Some("hub-key-0123456789abcdef"));
    let banner = hub.banner.join("\n");
    assert!(
        banner.contains("sealed the clear webhook secrets of 1 trigger(s) and env values of 1 service(s)"),
        "{banner}"
    );
    let body = br#"{"ref":"main"}"#;
    let signature = swarm_service::sign_body(WEBHOOK_SECRET, body);
    let headers = [("content-type", "application/json"), ("x-hub-signature-256", signature.as_str())];
    let (status, accepted) = post_webhook(&hub, "deploys", body, &headers).await;
    assert_eq!(status, 202, "the sealed secret still verifies: {accepted}");
    let (_, all) = hub.get("/api/services", None).await;
    assert_eq!(env_of(&all, "api")["DATABASE_URL"], ENV_SECRET, "the operator reads it");
}

#[tokio::test]
async fn another_agent_sees_a_services_env_names_but_not_their_values() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some("hub-key-0123456789abcdef"));
    let owner = write_secrets(&hub).await;
    let other = agent(&hub, "curious", json!({})).await;
    let lead = agent(&hub, "lead", json!({"isLead": true})).await;

    // The attack: another worker lists the services, over REST and over MCP.
    let (status, listed) = hub.get("/api/services", Some(&other)).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(env_of(&listed, "api"), &json!({"DATABASE_URL": "<redacted>"}));
    let client = connect_http(&hub, Some(&other), Revision::Initialize).await;
    let listed = ok(&client, "list-services", json!({})).await;
    assert_eq!(env_of(&listed, "api"), &json!({"DATABASE_URL": "<redacted>"}));
    assert!(!listed.to_string().contains("pw-the-4ttacker-wants"), "{listed}");

    // Its agent, the lead and the operator read it.
    for reader in [Some(owner.as_str()), Some(lead.as_str()), None] {
        let (_, listed) = hub.get("/api/services", reader).await;
        assert_eq!(env_of(&listed, "api")["DATABASE_URL"], ENV_SECRET, "{reader:?}");
    }
}

#[tokio::test]
async fn a_backup_is_private_from_its_first_byte_and_never_written_through_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("swarm.db");
    let hub = Hub::start(&sqlite_file(dir.path()), Some("hub-key-0123456789abcdef"));
    write_secrets(&hub).await;
    let db_arg = db.to_str().unwrap();

    let backup = dir.path().join("nightly.db");
    let made = swarm(&["backup", backup.to_str().unwrap(), "--db", db_arg]);
    assert!(made.status.success(), "{made:?}");
    assert_eq!(mode(&backup), 0o600);
    let read = read_as_nobody(&backup);
    assert!(!read.status.success() && read.stdout.is_empty(), "nobody read the backup: {read:?}");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Another user leaves a dangling link where the operator will write the next backup.
    let planted = dir.path().join("attacker-reads-this.db");
    let link = dir.path().join("weekly.db");
    symlink(&planted, &link).unwrap();
    let refused = swarm(&["backup", link.to_str().unwrap(), "--db", db_arg]);
    assert!(!refused.status.success(), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("already exists"), "{refused:?}");
    assert!(!planted.exists(), "the backup went through the link");
    assert_eq!(std::fs::read_link(&link).unwrap(), planted, "the link is left as it was");
}

#[tokio::test]
async fn git_status_in_the_checkout_where_the_hub_runs_shows_no_key_or_database() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("checkout");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let db = repo.join("swarm.db");
    let hub = Hub::spawn_generating_key(&Database::SqliteFile(db.clone()), &dir.path().join("home"), &[]);
    assert!(swarm_hub::default_key_file(&db).exists());
    let (status, _) = hub.post("/api/tasks", None, json!({"task": "fill the WAL"})).await;
    assert_eq!(status, 201);

    let porcelain = git(&repo, &["status", "--porcelain", "--untracked-files=all"]);
    let untracked = String::from_utf8_lossy(&porcelain.stdout);
    assert!(untracked.trim().is_empty(), "git add -A would commit: {untracked}");
    let exclude = std::fs::read_to_string(repo.join(".git/info/exclude")).unwrap();
    assert!(exclude.contains("/swarm.db*"), "{exclude}");
    drop(hub);
}

#[tokio::test]
async fn connect_will_not_embed_the_key_in_a_file_git_tracks() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    git(repo, &["init", "-q"]);
    std::fs::write(repo.join(".mcp.json"), "{\"mcpServers\": {}}\n").unwrap();
    git(repo, &["add", ".mcp.json"]);
    let key = "swk_embedded-key-0123456789abcdef";
    let connect = |extra: &[&str]| {
        let mut args = vec!["connect", "--dir", repo.to_str().unwrap(), "--embed-api-key", "--api-key", key];
        args.extend(extra);
        Command::new(SWARM).args(&args).env_remove("API_KEY").env_remove("AGENT_ID").output().unwrap()
    };

    let refused = connect(&[]);
    assert!(!refused.status.success(), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("tracked by git") && stderr.contains("--force"), "{stderr}");
    assert!(!std::fs::read_to_string(repo.join(".mcp.json")).unwrap().contains(key), "nothing written");

    // Untracked: written, and git is told to ignore it.
    git(repo, &["rm", "-q", "--cached", ".mcp.json"]);
    let written = connect(&[]);
    assert!(written.status.success(), "{written:?}");
    assert!(std::fs::read_to_string(repo.join(".mcp.json")).unwrap().contains(key));
    assert!(git(repo, &["check-ignore", "-q", ".mcp.json"]).status.success(), "git ignores .mcp.json");

    // --force writes into a tracked file, for who really wants it.
    git(repo, &["add", "-f", ".mcp.json"]);
    assert!(connect(&["--force"]).status.success());
}

#[tokio::test]
async fn a_key_file_another_user_owns_is_refused_by_the_hub_and_by_local_commands() {
    let dir = tempfile::tempdir().unwrap();
    // The hub's own key file, left by another user (who knows the key it holds).
    let db = dir.path().join("swarm.db");
    let key_file = swarm_hub::default_key_file(&db);
    std::fs::write(&key_file, "swk_chosen-by-someone-else-0123456789\n").unwrap();
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&key_file, Some(65534), Some(65534)).unwrap();
    let home = dir.path().join("home");
    let serve = Command::new(SWARM)
        .args(["serve", "--host", "127.0.0.1", "--port", "0", "--db", db.to_str().unwrap()])
        .env_remove("API_KEY")
        .env_remove("DATABASE_URL")
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed on the way out if it served after all (the failure this test is about).
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut serve = Killed(serve);
    let status = eventually("the hub to refuse the key file and exit", || {
        let exited = serve.0.try_wait().unwrap();
        async move { exited }
    })
    .await;
    assert!(!status.success(), "the hub served with another user's key");
    let mut stderr = String::new();
    serve.0.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(stderr.contains("belongs to user id 65534"), "{stderr}");

    // A per-port key file a local command would send to the hub on that port.
    let keys = home.join(".config/swarm/keys");
    std::fs::create_dir_all(&keys).unwrap();
    let shared = keys.join("localhost-9.key");
    std::fs::write(&shared, "swk_chosen-by-someone-else-0123456789\n").unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&shared, Some(65534), Some(65534)).unwrap();
    let listed = Command::new(SWARM)
        .args(["task", "list", "--url", "http://127.0.0.1:9"])
        .env_remove("API_KEY")
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&listed.stderr);
    assert!(
        stderr.contains("not using the key in") && stderr.contains("belongs to user id 65534"),
        "{stderr}"
    );
}
