//! Finding 7 from the attacker's side: half-sent requests, floods of connections, of
//! event streams and of parked polls are cut off with a clear answer, and the hub keeps
//! serving everyone else.

use std::time::Duration;

use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::{
    hub::{Hub, send, sqlite_file},
    support::eventually,
};

fn address(hub: &Hub) -> String {
    hub.base_url.trim_start_matches("http://").to_string()
}

/// Everything the hub sends until it closes the connection (or a minute passes).
async fn read_until_closed(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut received)).await;
    assert!(read.is_ok(), "the hub closes the connection");
    String::from_utf8_lossy(&received).into_owned()
}

#[tokio::test]
async fn a_request_whose_headers_never_end_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(
        &sqlite_file(dir.path()),
        Some("trust-test-key-0123"),
        &["--header-read-timeout-seconds", "1"],
    );
    let mut slow = TcpStream::connect(address(&hub)).await.unwrap();
    slow.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ").await.unwrap();
    let started = std::time::Instant::now();
    let answer = read_until_closed(&mut slow).await;
    assert!(started.elapsed() < Duration::from_secs(30), "closed after the header timeout, not never");
    assert!(!answer.contains("\"ok\""), "no request was served: {answer}");
    let (status, _) = hub.get("/health", None).await;
    assert_eq!(status, 200, "everyone else is still served");
}

#[tokio::test]
async fn connections_past_the_limit_are_refused_with_503() {
    let dir = tempfile::tempdir().unwrap();
    let hub =
        Hub::start_with(&sqlite_file(dir.path()), Some("trust-test-key-0123"), &["--max-connections", "3"]);
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(TcpStream::connect(address(&hub)).await.unwrap());
    }
    let mut extra = TcpStream::connect(address(&hub)).await.unwrap();
    let answer = read_until_closed(&mut extra).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains(r#"{"error":"too many connections"#), "{answer}");
    drop(held);
    // Once the held connections are gone, a new client is served again.
    eventually("a free connection", || async {
        let client = reqwest::Client::new();
        let response = client.get(hub.url("/health")).send().await.ok()?;
        (response.status() == 200).then_some(())
    })
    .await;
}

#[tokio::test]
async fn event_streams_past_the_per_caller_cap_get_429() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(
        &sqlite_file(dir.path()),
        Some("trust-test-key-0123"),
        &["--max-streams-per-agent", "2"],
    );
    let open = || hub.request(reqwest::Method::GET, "/api/events", None).send();
    let first = open().await.unwrap();
    let second = open().await.unwrap();
    assert_eq!((first.status().as_u16(), second.status().as_u16()), (200, 200));
    let (status, body) = send(hub.request(reqwest::Method::GET, "/api/events", None)).await;
    assert_eq!(status, 429, "{body}");
    assert!(body["error"].as_str().unwrap().contains("event streams"), "{body}");
    // Another caller has a share of its own.
    let agent = uuid::Uuid::new_v4().to_string();
    let (_, _) = hub.post("/api/agents", Some(&agent), json!({"name": "watcher"})).await;
    let theirs = hub.request(reqwest::Method::GET, "/api/events", Some(&agent)).send().await.unwrap();
    assert_eq!(theirs.status(), 200);
    drop(first);
    eventually("a stream slot given back", || async {
        let response = open().await.ok()?;
        (response.status() == 200).then_some(response)
    })
    .await;
}

#[tokio::test]
async fn parked_polls_past_the_per_agent_cap_get_429() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(
        &sqlite_file(dir.path()),
        Some("trust-test-key-0123"),
        &["--max-polls-per-agent", "1"],
    );
    let agent = uuid::Uuid::new_v4().to_string();
    let (status, _) = hub.post("/api/agents", Some(&agent), json!({"name": "poller"})).await;
    assert_eq!(status, 201);
    let parked = tokio::spawn(send(hub.request(reqwest::Method::GET, "/api/poll?wait=30", Some(&agent))));
    hub.parked_polls(1).await;
    let (status, body) = hub.get("/api/poll?wait=30", Some(&agent)).await;
    assert_eq!(status, 429, "{body}");
    assert!(body["error"].as_str().unwrap().contains("waiting polls"), "{body}");
    let (status, body) = hub.get("/api/poll", Some(&agent)).await;
    assert_eq!(status, 200, "a poll that answers at once holds nothing: {body}");
    // Work for it ends the parked poll, and its slot is free again.
    let (status, _) = hub.post("/api/tasks", None, json!({"task": "t", "agentId": agent})).await;
    assert_eq!(status, 201);
    let (status, woken) = parked.await.unwrap();
    assert_eq!((status, woken["trigger"]["type"].as_str()), (200, Some("task_assigned")));
    let (status, _) = hub.get("/api/poll?wait=0.1", Some(&agent)).await;
    assert_eq!(status, 200);
}
