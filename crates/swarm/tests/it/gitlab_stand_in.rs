//! A local GitLab for the GitLab tests, over real HTTP on loopback: the REST API calls
//! the hub makes (`GET /api/v4/projects/:id/members/all/:user_id`, an issue's or merge
//! request's notes, `GET` and `POST`), refusing a request without the token (401) and
//! recording every call. A test can take GitLab down (503, nothing kept) or have it keep
//! a note and then fail the request (500), as a crash between the post and the answer
//! would look to the hub.

use std::{collections::HashMap, sync::Arc, time::Duration};

use axum::{
    Json, Router,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
};
use serde_json::{Value, json};
use tokio::{
    net::TcpListener,
    sync::{Mutex, Notify},
};

/// The token the tests give the hub (`--gitlab-token`).
pub const GITLAB_TOKEN: &str = "glpat-test-token";

/// How the next note posts are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NotePosts {
    #[default]
    Kept,
    /// 503, nothing kept.
    Down,
    /// Kept, then answered 500.
    KeptThenFailed,
}

#[derive(Default)]
struct Recorded {
    /// (method and path, body)
    calls: Vec<(String, Value)>,
    /// Note bodies per `<project>/<issues|merge_requests>/<iid>`, oldest first.
    notes: HashMap<String, Vec<String>>,
    /// (project id, user id) pairs that are members.
    members: Vec<(i64, i64)>,
    refused: usize,
    note_posts: NotePosts,
    /// Note posts answered with an error.
    failed_posts: usize,
}

#[derive(Clone)]
struct Shared {
    recorded: Arc<Mutex<Recorded>>,
    changed: Arc<Notify>,
}

pub struct GitLabStandIn {
    /// `GITLAB_URL`.
    pub url: String,
    shared: Shared,
}

impl GitLabStandIn {
    pub async fn start() -> GitLabStandIn {
        let shared = Shared { recorded: Arc::default(), changed: Arc::new(Notify::new()) };
        let app = Router::new()
            .route("/api/v4/projects/{project}/members/all/{user}", get(member))
            .route("/api/v4/projects/{project}/{kind}/{iid}/notes", get(notes_list).post(notes_create))
            .with_state(shared.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the GitLab stand-in");
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.expect("the GitLab stand-in serves") });
        GitLabStandIn { url, shared }
    }

    pub async fn add_member(&self, project: i64, user: i64) {
        self.shared.recorded.lock().await.members.push((project, user));
    }

    pub async fn set_note_posts(&self, mode: NotePosts) {
        self.shared.recorded.lock().await.note_posts = mode;
    }

    /// The notes on `item` (`7/issues/12`), oldest first.
    pub async fn notes(&self, item: &str) -> Vec<String> {
        self.shared.recorded.lock().await.notes.get(item).cloned().unwrap_or_default()
    }

    /// The calls whose method and path start with `prefix`, with their bodies.
    pub async fn calls(&self, prefix: &str) -> Vec<Value> {
        let recorded = self.shared.recorded.lock().await;
        recorded
            .calls
            .iter()
            .filter(|(call, _)| call.starts_with(prefix))
            .map(|(_, body)| body.clone())
            .collect()
    }

    pub async fn refused(&self) -> usize {
        self.shared.recorded.lock().await.refused
    }

    /// Wait (at most 30 s) until `ready` holds of what the stand-in recorded.
    async fn wait_for(&self, what: &str, ready: impl Fn(&Recorded) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if ready(&*self.shared.recorded.lock().await) {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!("the GitLab stand-in never saw {what}");
            }
        }
    }

    /// Wait until `item` holds `n` notes; returns them.
    pub async fn wait_notes(&self, item: &str, n: usize) -> Vec<String> {
        let what = format!("{n} notes on {item}");
        self.wait_for(&what, |recorded| recorded.notes.get(item).is_some_and(|notes| notes.len() >= n)).await;
        self.notes(item).await
    }

    /// Wait until `n` note posts were answered with an error.
    pub async fn wait_failed_posts(&self, n: usize) {
        self.wait_for(&format!("{n} failed note posts"), |recorded| recorded.failed_posts >= n).await;
    }

    /// Wait until `n` calls whose method and path start with `prefix` were made.
    pub async fn wait_calls(&self, prefix: &str, n: usize) {
        let what = format!("{n} calls {prefix}");
        self.wait_for(&what, |recorded| {
            recorded.calls.iter().filter(|(c, _)| c.starts_with(prefix)).count() >= n
        })
        .await;
    }
}

fn authorized(headers: &HeaderMap) -> bool {
    headers.get("private-token").and_then(|value| value.to_str().ok()) == Some(GITLAB_TOKEN)
}

async fn record(shared: &Shared, call: String, body: Value) {
    shared.recorded.lock().await.calls.push((call, body));
    shared.changed.notify_waiters();
}

async fn refuse(shared: &Shared) -> Response {
    shared.recorded.lock().await.refused += 1;
    shared.changed.notify_waiters();
    (StatusCode::UNAUTHORIZED, Json(json!({"message": "401 Unauthorized"}))).into_response()
}

async fn member(
    State(shared): State<Shared>,
    Path((project, user)): Path<(i64, i64)>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&headers) {
        return refuse(&shared).await;
    }
    record(&shared, format!("GET members {project}/{user}"), Value::Null).await;
    if shared.recorded.lock().await.members.contains(&(project, user)) {
        Json(json!({"id": user, "username": format!("user{user}"), "access_level": 30, "state": "active"}))
            .into_response()
    } else {
        (StatusCode::NOT_FOUND, Json(json!({"message": "404 Not found"}))).into_response()
    }
}

async fn notes_list(
    State(shared): State<Shared>,
    Path((project, kind, iid)): Path<(i64, String, i64)>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&headers) {
        return refuse(&shared).await;
    }
    let item = format!("{project}/{kind}/{iid}");
    record(&shared, format!("GET notes {item}"), Value::Null).await;
    let notes = shared.recorded.lock().await.notes.get(&item).cloned().unwrap_or_default();
    // Newest first, as the hub asks (`sort=desc`).
    let listed: Vec<Value> =
        notes.iter().enumerate().rev().map(|(n, body)| json!({"id": n + 1, "body": body})).collect();
    Json(Value::Array(listed)).into_response()
}

async fn notes_create(
    State(shared): State<Shared>,
    Path((project, kind, iid)): Path<(i64, String, i64)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if !authorized(&headers) {
        return refuse(&shared).await;
    }
    let item = format!("{project}/{kind}/{iid}");
    record(&shared, format!("POST notes {item}"), body.clone()).await;
    let mut recorded = shared.recorded.lock().await;
    let mode = recorded.note_posts;
    if mode != NotePosts::Down {
        let text = body["body"].as_str().unwrap_or_default().to_string();
        recorded.notes.entry(item).or_default().push(text);
    }
    let answer = match mode {
        NotePosts::Kept => (StatusCode::CREATED, Json(json!({"id": 1}))).into_response(),
        NotePosts::Down => {
            (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"message": "down"}))).into_response()
        }
        NotePosts::KeptThenFailed => {
            (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"message": "500"}))).into_response()
        }
    };
    if mode != NotePosts::Kept {
        recorded.failed_posts += 1;
    }
    drop(recorded);
    shared.changed.notify_waiters();
    answer
}
