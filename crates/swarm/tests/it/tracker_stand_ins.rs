//! Local Linear and Jira for the tracker tests, over real HTTP on loopback.
//!
//! Linear: its GraphQL endpoint for the operations the hub sends (`viewer`, an issue's
//! comments and its team's workflow states, `commentCreate`, `issueUpdate`), with one
//! team's states (Backlog, Todo, In Progress, Done, Canceled) and the issues it holds.
//! Jira: REST v3 `GET /myself`, an issue's comments (`GET`/`POST`, ADF bodies) and
//! transitions (`GET`/`POST`) over the statuses To Do, In Progress, Done. Both refuse a
//! request without the configured credential (401) and record every call.

use std::{collections::HashMap, sync::Arc, time::Duration};

use axum::{
    Json, Router,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::{Value, json};
use tokio::{
    net::TcpListener,
    sync::{Mutex, Notify},
};

pub const LINEAR_API_KEY: &str = "lin_api_test_key";
pub const LINEAR_BOT_ID: &str = "user-bot";
pub const LINEAR_BOT_NAME: &str = "swarm";
pub const JIRA_EMAIL: &str = "bot@example.com";
pub const JIRA_API_TOKEN: &str = "jira-api-token";
pub const JIRA_BOT_ACCOUNT: &str = "acc-bot";

/// Linear's team states: (id, name, type, position).
const LINEAR_STATES: [(&str, &str, &str, f64); 5] = [
    ("st-backlog", "Backlog", "backlog", 0.0),
    ("st-todo", "Todo", "unstarted", 1.0),
    ("st-progress", "In Progress", "started", 2.0),
    ("st-done", "Done", "completed", 3.0),
    ("st-canceled", "Canceled", "canceled", 4.0),
];

/// Jira's statuses: (transition id, status, category).
const JIRA_STATUSES: [(&str, &str, &str); 3] =
    [("11", "To Do", "new"), ("21", "In Progress", "indeterminate"), ("31", "Done", "done")];

/// One issue as the stand-in holds it.
#[derive(Debug, Clone, Default)]
pub struct StoredIssue {
    /// Linear: the state's id; Jira: the status's name.
    pub state: String,
    pub comments: Vec<String>,
    /// The states it was moved to, in order.
    pub moves: Vec<String>,
}

#[derive(Default)]
struct Recorded {
    /// (operation or method and path, variables or body)
    calls: Vec<(String, Value)>,
    issues: HashMap<String, StoredIssue>,
    /// Requests refused for their credential.
    refused: usize,
    /// While set, every request is answered 503 (the tracker is down), counted in `failed`.
    down: bool,
    failed: usize,
}

#[derive(Clone)]
struct Shared {
    recorded: Arc<Mutex<Recorded>>,
    changed: Arc<Notify>,
}

/// A running stand-in (Linear or Jira).
pub struct TrackerStandIn {
    /// Linear: the GraphQL endpoint (`LINEAR_API_URL`); Jira: the site (`JIRA_BASE_URL`).
    pub url: String,
    shared: Shared,
}

impl TrackerStandIn {
    pub async fn linear() -> TrackerStandIn {
        Self::serve(
            |shared| Router::new().route("/graphql", post(linear_graphql)).with_state(shared),
            "/graphql",
        )
        .await
    }

    pub async fn jira() -> TrackerStandIn {
        Self::serve(
            |shared| {
                Router::new()
                    .route("/rest/api/3/myself", get(jira_myself))
                    .route("/rest/api/3/issue/{key}", get(jira_issue))
                    .route("/rest/api/3/issue/{key}/comment", get(jira_comments).post(jira_comment_create))
                    .route("/rest/api/3/issue/{key}/transitions", get(jira_transitions).post(jira_transition))
                    .with_state(shared)
            },
            "",
        )
        .await
    }

    async fn serve(app: impl FnOnce(Shared) -> Router, path: &str) -> TrackerStandIn {
        let shared = Shared { recorded: Arc::default(), changed: Arc::new(Notify::new()) };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}{path}", listener.local_addr().unwrap());
        let router = app(shared.clone());
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        TrackerStandIn { url, shared }
    }

    /// An issue the tracker holds, in `state` (Linear: a state id; Jira: a status name).
    pub async fn put_issue(&self, id: &str, state: &str) {
        let issue = StoredIssue { state: state.into(), ..StoredIssue::default() };
        self.shared.recorded.lock().await.issues.insert(id.into(), issue);
    }

    pub async fn issue(&self, id: &str) -> StoredIssue {
        self.shared.recorded.lock().await.issues.get(id).cloned().unwrap_or_default()
    }

    /// The calls named `name` (a GraphQL operation, or `METHOD path`), in order.
    pub async fn calls(&self, name: &str) -> Vec<Value> {
        let recorded = self.shared.recorded.lock().await;
        recorded.calls.iter().filter(|(call, _)| call == name).map(|(_, body)| body.clone()).collect()
    }

    pub async fn refused(&self) -> usize {
        self.shared.recorded.lock().await.refused
    }

    /// Take the tracker down (every request 503) or bring it back.
    pub async fn set_failing(&self, down: bool) {
        self.shared.recorded.lock().await.down = down;
    }

    /// Wait until `n` requests met the tracker down (at most 30 s).
    pub async fn wait_refusals(&self, n: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.shared.recorded.lock().await.failed >= n {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!("the tracker stand-in never answered {n} requests while down");
            }
        }
    }

    /// Wait until the issue holds `comments` comments and `moves` moves (at most 30 s).
    pub async fn wait_issue(&self, id: &str, comments: usize, moves: usize) -> StoredIssue {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let issue = self.issue(id).await;
            if issue.comments.len() >= comments && issue.moves.len() >= moves {
                return issue;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!(
                    "the tracker stand-in never saw {comments} comments and {moves} moves on {id}: {issue:?}"
                );
            }
        }
    }
}

fn refuse(shared_refused: &mut usize) -> Response {
    *shared_refused += 1;
    (StatusCode::UNAUTHORIZED, Json(json!({"errors": [{"message": "Authentication required"}]})))
        .into_response()
}

/// The answer of a tracker that is down, when it is.
fn down(shared: &Shared, recorded: &mut Recorded) -> Option<Response> {
    if !recorded.down {
        return None;
    }
    recorded.failed += 1;
    shared.changed.notify_waiters();
    Some(
        (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"errors": [{"message": "down for maintenance"}]})))
            .into_response(),
    )
}

async fn linear_graphql(
    State(shared): State<Shared>,
    headers: HeaderMap,
    Json(request): Json<Value>,
) -> Response {
    let mut recorded = shared.recorded.lock().await;
    if let Some(down) = down(&shared, &mut recorded) {
        return down;
    }
    if headers.get("authorization").and_then(|value| value.to_str().ok()) != Some(LINEAR_API_KEY) {
        return refuse(&mut recorded.refused);
    }
    let query = request["query"].as_str().unwrap_or_default();
    let variables = request["variables"].clone();
    let operation = query
        .split_whitespace()
        .nth(1)
        .map(|name| name.split(['(', '{']).next().unwrap_or_default().to_string())
        .unwrap_or_default();
    recorded.calls.push((operation.clone(), variables.clone()));
    let issue_id =
        variables["id"].as_str().or_else(|| variables["input"]["issueId"].as_str()).unwrap_or_default();
    let answer = match operation.as_str() {
        "SwarmViewer" => {
            json!({"viewer": {"id": LINEAR_BOT_ID, "name": LINEAR_BOT_NAME, "displayName": LINEAR_BOT_NAME}})
        }
        "SwarmIssueComments" => {
            let comments =
                recorded.issues.get(issue_id).map(|issue| issue.comments.clone()).unwrap_or_default();
            let nodes: Vec<Value> = comments.iter().map(|body| json!({"body": body})).collect();
            json!({"issue": {"comments": {"nodes": nodes}}})
        }
        "SwarmIssueStates" => {
            let current = recorded.issues.get(issue_id).map(|issue| issue.state.clone());
            let nodes: Vec<Value> = LINEAR_STATES
                .iter()
                .map(|(id, name, kind, position)| json!({"id": id, "name": name, "type": kind, "position": position}))
                .collect();
            json!({"issue": {"state": {"id": current}, "team": {"states": {"nodes": nodes}}}})
        }
        "SwarmCommentCreate" => {
            let body = variables["input"]["body"].as_str().unwrap_or_default().to_string();
            recorded.issues.entry(issue_id.into()).or_default().comments.push(body);
            json!({"commentCreate": {"success": true}})
        }
        "SwarmIssueUpdate" => {
            let state = variables["input"]["stateId"].as_str().unwrap_or_default().to_string();
            let issue = recorded.issues.entry(issue_id.into()).or_default();
            issue.state = state.clone();
            issue.moves.push(state);
            json!({"issueUpdate": {"success": true}})
        }
        other => {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"errors": [{"message": format!("unknown operation {other}")}]})),
            )
                .into_response();
        }
    };
    drop(recorded);
    shared.changed.notify_waiters();
    Json(json!({ "data": answer })).into_response()
}

fn jira_authorized(headers: &HeaderMap) -> bool {
    use base64::Engine;
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{JIRA_EMAIL}:{JIRA_API_TOKEN}"))
    );
    headers.get("authorization").and_then(|value| value.to_str().ok()) == Some(expected.as_str())
}

async fn jira_myself(State(shared): State<Shared>, headers: HeaderMap) -> Response {
    let mut recorded = shared.recorded.lock().await;
    if let Some(down) = down(&shared, &mut recorded) {
        return down;
    }
    if !jira_authorized(&headers) {
        return refuse(&mut recorded.refused);
    }
    recorded.calls.push(("GET myself".into(), Value::Null));
    Json(json!({"accountId": JIRA_BOT_ACCOUNT, "displayName": "Swarm"})).into_response()
}

async fn jira_issue(State(shared): State<Shared>, headers: HeaderMap, Path(key): Path<String>) -> Response {
    let mut recorded = shared.recorded.lock().await;
    if let Some(down) = down(&shared, &mut recorded) {
        return down;
    }
    if !jira_authorized(&headers) {
        return refuse(&mut recorded.refused);
    }
    recorded.calls.push(("GET issue".into(), json!({"key": key})));
    let Some(issue) = recorded.issues.get(&key) else {
        return (StatusCode::NOT_FOUND, Json(json!({"errorMessages": ["Issue does not exist"]})))
            .into_response();
    };
    let category = JIRA_STATUSES.iter().find(|(_, status, _)| *status == issue.state).map_or("new", |s| s.2);
    Json(
        json!({"key": key, "fields": {"status": {"name": issue.state, "statusCategory": {"key": category}}}}),
    )
    .into_response()
}

async fn jira_comments(
    State(shared): State<Shared>,
    headers: HeaderMap,
    Path(key): Path<String>,
) -> Response {
    let mut recorded = shared.recorded.lock().await;
    if let Some(down) = down(&shared, &mut recorded) {
        return down;
    }
    if !jira_authorized(&headers) {
        return refuse(&mut recorded.refused);
    }
    recorded.calls.push(("GET comment".into(), json!({"key": key})));
    let comments = recorded.issues.get(&key).map(|issue| issue.comments.clone()).unwrap_or_default();
    let bodies: Vec<Value> = comments
        .iter()
        .map(|text| {
            json!({"body": {"type": "doc", "version": 1, "content": [
            {"type": "paragraph", "content": [{"type": "text", "text": text}]}]}})
        })
        .collect();
    Json(json!({"comments": bodies, "total": bodies.len()})).into_response()
}

/// The comment's text, from its ADF body (paragraph texts joined by newlines); a body
/// that is not ADF is refused, as Jira's v3 does.
fn adf_text(body: &Value) -> Option<String> {
    if body["type"] != "doc" || body["version"] != 1 {
        return None;
    }
    let mut lines = Vec::new();
    for paragraph in body["content"].as_array()? {
        let mut line = String::new();
        for node in paragraph["content"].as_array().into_iter().flatten() {
            match node["type"].as_str() {
                Some("text") => line.push_str(node["text"].as_str()?),
                Some("hardBreak") => line.push('\n'),
                _ => return None,
            }
        }
        lines.push(line);
    }
    Some(lines.join("\n"))
}

async fn jira_comment_create(
    State(shared): State<Shared>,
    headers: HeaderMap,
    Path(key): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    let mut recorded = shared.recorded.lock().await;
    if let Some(down) = down(&shared, &mut recorded) {
        return down;
    }
    if !jira_authorized(&headers) {
        return refuse(&mut recorded.refused);
    }
    recorded.calls.push(("POST comment".into(), json!({"key": key, "body": body})));
    let Some(text) = adf_text(&body["body"]) else {
        return (StatusCode::BAD_REQUEST, Json(json!({"errorMessages": ["Comment body is not valid ADF"]})))
            .into_response();
    };
    recorded.issues.entry(key).or_default().comments.push(text);
    drop(recorded);
    shared.changed.notify_waiters();
    (StatusCode::CREATED, Json(json!({"id": "c-1"}))).into_response()
}

async fn jira_transitions(
    State(shared): State<Shared>,
    headers: HeaderMap,
    Path(key): Path<String>,
) -> Response {
    let mut recorded = shared.recorded.lock().await;
    if let Some(down) = down(&shared, &mut recorded) {
        return down;
    }
    if !jira_authorized(&headers) {
        return refuse(&mut recorded.refused);
    }
    recorded.calls.push(("GET transitions".into(), json!({"key": key})));
    let current = recorded.issues.get(&key).map(|issue| issue.state.clone()).unwrap_or_default();
    let transitions: Vec<Value> = JIRA_STATUSES
        .iter()
        .filter(|(_, status, _)| *status != current)
        .map(|(id, status, category)| {
            json!({"id": id, "name": status, "to": {"name": status, "statusCategory": {"key": category}}})
        })
        .collect();
    Json(json!({ "transitions": transitions })).into_response()
}

async fn jira_transition(
    State(shared): State<Shared>,
    headers: HeaderMap,
    Path(key): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    let mut recorded = shared.recorded.lock().await;
    if let Some(down) = down(&shared, &mut recorded) {
        return down;
    }
    if !jira_authorized(&headers) {
        return refuse(&mut recorded.refused);
    }
    recorded.calls.push(("POST transitions".into(), json!({"key": key, "body": body})));
    let id = body["transition"]["id"].as_str().unwrap_or_default();
    let Some((_, status, _)) = JIRA_STATUSES.iter().find(|(transition, _, _)| *transition == id) else {
        return (StatusCode::BAD_REQUEST, Json(json!({"errorMessages": ["Transition id is not valid"]})))
            .into_response();
    };
    let issue = recorded.issues.entry(key).or_default();
    issue.state = status.to_string();
    issue.moves.push(status.to_string());
    drop(recorded);
    shared.changed.notify_waiters();
    StatusCode::NO_CONTENT.into_response()
}
