//! GitLab (issue 47) through the real hub, against the GitLab stand-in: a note
//! mentioning the bot, an issue assigned to it and a failed merge request pipeline each
//! become one task, fenced; a replayed delivery, a wrong token and a non-member nothing;
//! the task's end leaves exactly one note with the evidence, across a killed and
//! restarted hub process, on SQLite and PostgreSQL.

use serde_json::{Value, json};

use crate::{
    gitlab_stand_in::{GITLAB_TOKEN, GitLabStandIn, NotePosts},
    hub::{Database, Hub, send, sqlite_file},
};

const SECRET: &str = "gitlab-webhook-secret-0123456789";
const API_KEY: &str = "gitlab-test-operator-key-0123456789";
const BOT: &str = "swarm-bot";
const PROJECT: i64 = 7;
const MEMBER: i64 = 3;
const STRANGER: i64 = 66;

fn flags(stand_in: &GitLabStandIn) -> Vec<String> {
    ["--gitlab-webhook-secret", SECRET, "--gitlab-url", &stand_in.url, "--gitlab-token", GITLAB_TOKEN]
        .into_iter()
        .chain(["--gitlab-bot-name", BOT])
        .map(str::to_string)
        .collect()
}

fn as_strs(flags: &[String]) -> Vec<&str> {
    flags.iter().map(String::as_str).collect()
}

fn project() -> Value {
    json!({"id": PROJECT, "path_with_namespace": "acme/app", "web_url": "https://gitlab.example/acme/app"})
}

/// A note by `user` on issue `iid`.
fn note(user: i64, iid: i64, text: &str) -> Value {
    json!({
        "object_kind": "note", "event_type": "note",
        "user": {"id": user, "username": format!("user{user}"), "name": "Ada"},
        "project": project(),
        "object_attributes": {"id": 500 + iid, "note": text, "noteable_type": "Issue",
                              "url": format!("https://gitlab.example/acme/app/-/issues/{iid}#note_1")},
        "issue": {"iid": iid, "title": "Login fails twice", "description": "Steps: log in twice.",
                  "url": format!("https://gitlab.example/acme/app/-/issues/{iid}")},
    })
}

async fn deliver(hub: &Hub, token: Option<&str>, uuid: &str, body: &Value) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(hub.url("/api/gitlab/webhook"))
        .header("X-Gitlab-Event", "Note Hook")
        .header("X-Gitlab-Event-UUID", uuid)
        .json(body);
    if let Some(token) = token {
        request = request.header("X-Gitlab-Token", token);
    }
    send(request).await
}

async fn gitlab_tasks(hub: &Hub) -> Vec<Value> {
    let (status, body) = hub.get("/api/tasks?limit=100", None).await;
    assert_eq!(status, 200, "{body}");
    body["tasks"].as_array().unwrap().iter().filter(|task| task["source"] == "gitlab").cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitlab_events_become_one_task_each_and_replays_bad_tokens_and_strangers_nothing() {
    let stand_in = GitLabStandIn::start().await;
    stand_in.add_member(PROJECT, MEMBER).await;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(&sqlite_file(dir.path()), Some(API_KEY), &as_strs(&flags(&stand_in)));
    let event = note(MEMBER, 12, "@swarm-bot please look");

    for token in [None, Some("wrong"), Some(&SECRET[..SECRET.len() - 1])] {
        let (status, body) = deliver(&hub, token, "u-0", &event).await;
        assert_eq!(status, 401, "{token:?}: {body}");
        assert!(body["error"].as_str().unwrap().contains("X-Gitlab-Token"), "{body}");
    }
    assert!(gitlab_tasks(&hub).await.is_empty(), "a bad token creates nothing");
    assert!(stand_in.calls("GET members").await.is_empty(), "nor asks GitLab anything");

    let (status, body) = deliver(&hub, Some(SECRET), "u-1", &event).await;
    assert_eq!((status, &body["created"]), (200, &json!(true)), "{body}");
    let tasks = gitlab_tasks(&hub).await;
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert_eq!(tasks[0]["id"], body["taskId"]);
    assert_eq!(tasks[0]["taskType"], "gitlab-issue");
    let text = tasks[0]["task"].as_str().unwrap();
    let (outside, inside) = text.split_once("<untrusted-input").unwrap();
    assert!(
        outside
            .starts_with("You were mentioned in a comment for @swarm-bot (by @user3 on issue acme/app#12)"),
        "{outside}"
    );
    assert!(!outside.contains("Login fails") && !outside.contains("please look"), "{outside}");
    assert!(inside.contains("Login fails twice") && inside.contains("@swarm-bot please look"), "{inside}");
    assert_eq!(stand_in.calls("GET members 7/3").await.len(), 1, "the author's membership was asked");

    // GitLab's resend of the delivery: nothing.
    let (status, body) = deliver(&hub, Some(SECRET), "u-1", &event).await;
    assert_eq!((status, &body["created"], &body["duplicate"]), (200, &json!(false), &json!(true)), "{body}");
    // Someone who is not a project member: nothing.
    let (status, body) = deliver(&hub, Some(SECRET), "u-2", &note(STRANGER, 13, "@swarm-bot do it")).await;
    assert_eq!((status, &body["created"]), (200, &json!(false)), "{body}");
    assert!(body["ignored"].as_str().unwrap().contains("not a member"), "{body}");
    // A note for someone else: nothing.
    let (_, body) = deliver(&hub, Some(SECRET), "u-3", &note(MEMBER, 14, "@someone-else look")).await;
    assert_eq!(body["created"], json!(false), "{body}");
    assert_eq!(gitlab_tasks(&hub).await.len(), 1);

    // An issue assigned to the bot, and a failed pipeline of a merge request: one task each.
    let assigned = json!({
        "object_kind": "issue", "user": {"id": MEMBER, "username": "user3"}, "project": project(),
        "object_attributes": {"iid": 20, "action": "update", "title": "Flaky test", "description": "x",
                              "url": "https://gitlab.example/acme/app/-/issues/20"},
        "changes": {"assignees": {"previous": [], "current": [{"username": BOT}]}},
    });
    let (_, body) = deliver(&hub, Some(SECRET), "u-4", &assigned).await;
    assert_eq!(body["created"], json!(true), "{body}");
    let pipeline = json!({
        "object_kind": "pipeline", "user": {"id": MEMBER, "username": "user3"}, "project": project(),
        "object_attributes": {"id": 99, "status": "failed", "ref": "fix-login"},
        "merge_request": {"iid": 4, "title": "Fix login", "url": "https://gitlab.example/acme/app/-/merge_requests/4"},
        "builds": [{"name": "unit", "stage": "test", "status": "failed"}],
    });
    let (_, body) = deliver(&hub, Some(SECRET), "u-5", &pipeline).await;
    assert_eq!(body["created"], json!(true), "{body}");
    let tasks = gitlab_tasks(&hub).await;
    assert_eq!(tasks.len(), 3);
    let ci = tasks.iter().find(|task| task["taskType"] == "gitlab-ci").expect("the pipeline's task");
    let ci_text = ci["task"].as_str().unwrap();
    assert!(ci_text.starts_with("Pipeline #99 failed (by @user3 on merge request acme/app!4)"), "{ci_text}");
    assert!(ci_text.split_once("<untrusted-input").unwrap().1.contains("unit (stage test)"), "{ci_text}");
    assert_eq!(stand_in.refused().await, 0, "the hub sends its token");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitlab_is_off_unless_configured_and_says_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(&sqlite_file(dir.path()), Some(API_KEY), &[]);
    let (status, body) = deliver(&hub, Some(SECRET), "u-1", &note(MEMBER, 1, "@swarm-bot")).await;
    assert_eq!(status, 503, "{body}");
    assert!(body["error"].as_str().unwrap().contains("GITLAB_WEBHOOK_SECRET"), "{body}");
    assert!(gitlab_tasks(&hub).await.is_empty());
}

/// A hub process of its own on `port`, so that the restarted one is where the test looks.
fn spawn_hub(database: &Database, flags: &[String], port: u16) -> Hub {
    let port = port.to_string();
    let mut args = as_strs(flags);
    args.extend(["--port", &port]);
    Hub::spawn_with(database, Some(API_KEY), &args)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

async fn finish(hub: &Hub, worker: &str, task: &str, output: &str) {
    let (status, body) = hub.get("/api/poll?wait=10", Some(worker)).await;
    assert_eq!((status, body["trigger"]["task"]["id"].as_str()), (200, Some(task)), "{body}");
    let finish = json!({"status": "completed", "output": output});
    let (status, body) = hub.post(&format!("/api/tasks/{task}/finish"), Some(worker), finish).await;
    assert_eq!(status, 200, "{body}");
}

/// The task's end is one note, whether the hub is killed before GitLab took the note
/// (GitLab down) or after it kept the note but before the hub heard so.
async fn one_note_per_task_across_killed_hubs(database: Database) {
    let stand_in = GitLabStandIn::start().await;
    stand_in.add_member(PROJECT, MEMBER).await;
    let flags = flags(&stand_in);
    let port = free_port();
    let hub = spawn_hub(&database, &flags, port);
    let worker = hub.register_agent("gitlab-worker", false).await;

    // GitLab is down when the first task ends: the hub is killed before any note.
    let (_, body) = deliver(&hub, Some(SECRET), "u-1", &note(MEMBER, 1, "@swarm-bot fix it")).await;
    let first = body["taskId"].as_str().expect("a task").to_string();
    stand_in.set_note_posts(NotePosts::Down).await;
    finish(&hub, &worker, &first, "Fixed in https://gitlab.example/acme/app/-/merge_requests/9.").await;
    stand_in.wait_failed_posts(1).await;
    hub.kill();
    stand_in.set_note_posts(NotePosts::Kept).await;
    let hub = spawn_hub(&database, &flags, port);
    let notes = stand_in.wait_notes("7/issues/1", 1).await;
    assert!(notes[0].contains(&format!("<!-- swarm-task:{first} -->")), "{notes:?}");
    assert!(notes[0].contains("finished") && notes[0].contains("/-/merge_requests/9"), "{notes:?}");

    // GitLab keeps the second task's note but the hub never hears it: killed, restarted,
    // it finds its marker and posts nothing more.
    let (_, body) = deliver(&hub, Some(SECRET), "u-2", &note(MEMBER, 2, "@swarm-bot and this")).await;
    let second = body["taskId"].as_str().expect("a task").to_string();
    stand_in.set_note_posts(NotePosts::KeptThenFailed).await;
    let (status, body) = hub.get("/api/poll?wait=10", Some(&worker)).await;
    assert_eq!((status, body["trigger"]["task"]["id"].as_str()), (200, Some(second.as_str())), "{body}");
    // A pull request named in progress stays evidence after later progress replaces it.
    for progress in ["opened https://github.com/acme/app/pull/2", "now testing"] {
        let (status, body) = hub
            .post(&format!("/api/tasks/{second}/progress"), Some(&worker), json!({"progress": progress}))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let done = json!({"status": "completed", "output": "Done: https://github.com/acme/app/pull/3"});
    let (status, body) = hub.post(&format!("/api/tasks/{second}/finish"), Some(&worker), done).await;
    assert_eq!(status, 200, "{body}");
    stand_in.wait_failed_posts(2).await;
    hub.kill();
    stand_in.set_note_posts(NotePosts::Kept).await;
    let reads_before = stand_in.calls("GET notes 7/issues/2").await.len();
    let hub = spawn_hub(&database, &flags, port);
    stand_in.wait_calls("GET notes 7/issues/2", reads_before + 1).await;

    // A third task ends after: noted, while the first two keep one note each.
    let (_, body) = deliver(&hub, Some(SECRET), "u-3", &note(MEMBER, 3, "@swarm-bot last")).await;
    let third = body["taskId"].as_str().expect("a task").to_string();
    finish(&hub, &worker, &third, "ok").await;
    stand_in.wait_notes("7/issues/3", 1).await;
    assert_eq!(stand_in.notes("7/issues/1").await.len(), 1);
    let second_notes = stand_in.notes("7/issues/2").await;
    assert_eq!(second_notes.len(), 1, "{second_notes:?}");
    assert!(second_notes[0].contains("https://github.com/acme/app/pull/3"), "{second_notes:?}");
    assert!(second_notes[0].contains("https://github.com/acme/app/pull/2"), "{second_notes:?}");
    let (_, detail) = hub.get(&format!("/api/tasks/{second}"), None).await;
    assert_eq!(
        detail["pullRequestUrls"],
        json!(["https://github.com/acme/app/pull/2", "https://github.com/acme/app/pull/3"]),
        "the task's evidence: {detail}"
    );
    let (_, detail) = hub.get(&format!("/api/tasks/{first}"), None).await;
    assert_eq!(detail["pullRequestUrls"], json!(["https://gitlab.example/acme/app/-/merge_requests/9"]));
    assert_eq!(stand_in.calls("POST notes 7/issues/2").await.len(), 1, "posted once");
    // Replays of the deliveries now: nothing.
    let (_, body) = deliver(&hub, Some(SECRET), "u-1", &note(MEMBER, 1, "@swarm-bot fix it")).await;
    assert_eq!(body["duplicate"], json!(true), "{body}");
    assert_eq!(gitlab_tasks(&hub).await.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitlab_a_tasks_end_is_one_note_across_killed_hubs_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    one_note_per_task_across_killed_hubs(sqlite_file(dir.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitlab_a_tasks_end_is_one_note_across_killed_hubs_postgres() {
    let database = crate::support::postgres_database().await;
    one_note_per_task_across_killed_hubs(database.database()).await;
}
