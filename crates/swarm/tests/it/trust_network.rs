//! Issue 39 from the attacker's side, on the listener: dripped bodies, one address
//! holding every connection, webhook floods, oversized public bodies, a revoked token's
//! open stream and parked poll, and a keyless hub approached by other sites' pages and
//! by rebound names. Each test is the attack; it failed on the hub before the fix.

use std::{net::SocketAddr, os::unix::fs::PermissionsExt, time::Duration};

use reqwest::Method;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpSocket, TcpStream},
};

use crate::{
    hub::{Database, Hub, send, sqlite_file},
    support::eventually,
};

const KEY: &str = "operator-key-for-trust-network";

fn address(hub: &Hub) -> SocketAddr {
    hub.base_url.trim_start_matches("http://").parse().expect("the hub listens on an IP address")
}

/// A connection to the hub from another loopback address (all of 127/8 is this machine),
/// so that a test can be two clients.
async fn connect_from(source: &str, hub: &Hub) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    socket.connect(address(hub)).await.unwrap()
}

/// Everything the hub sends until it closes the connection; fails after `within`.
async fn read_until_closed(stream: &mut (impl AsyncReadExt + Unpin), within: Duration) -> String {
    let mut received = Vec::new();
    let read = tokio::time::timeout(within, stream.read_to_end(&mut received)).await;
    assert!(
        read.is_ok(),
        "the hub answers and closes within {within:?}; so far: {:?}",
        String::from_utf8_lossy(&received)
    );
    String::from_utf8_lossy(&received).into_owned()
}

fn json_body(answer: &str) -> Value {
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    serde_json::from_str(body).unwrap_or_else(|_| panic!("a JSON body in {answer:?}"))
}

/// The attack of the issue: four connections declare a 1 MB webhook body and send a byte
/// a second, with `--max-connections 4`. The hub cuts each at its body deadline (408,
/// JSON, connection closed) and then serves everyone again.
#[tokio::test]
async fn dripped_webhook_bodies_are_cut_at_their_deadline_and_the_hub_serves_again() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(
        &sqlite_file(dir.path()),
        Some(KEY),
        &["--max-connections", "4", "--max-connections-per-address", "4", "--body-read-timeout-seconds", "2"],
    );
    let mut drips = Vec::new();
    for _ in 0..4 {
        let stream = TcpStream::connect(address(&hub)).await.unwrap();
        let (mut read, mut write) = stream.into_split();
        write
            .write_all(b"POST /api/webhooks/anything HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{")
            .await
            .unwrap();
        let dripping = tokio::spawn(async move {
            // The slow client: a byte a second, until the hub hangs up.
            while write.write_all(b" ").await.is_ok() {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        drips.push(tokio::spawn(async move {
            let started = std::time::Instant::now();
            let answer = read_until_closed(&mut read, Duration::from_secs(30)).await;
            dripping.abort();
            (answer, started.elapsed())
        }));
    }
    for drip in drips {
        let (answer, took) = drip.await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
        let error = json_body(&answer)["error"].as_str().unwrap_or_default().to_string();
        assert!(
            error.contains("--body-read-timeout-seconds"),
            "the answer says what sets the deadline: {error}"
        );
        assert!(took < Duration::from_secs(20), "cut near the deadline, not after the whole body: {took:?}");
    }
    eventually("/health served once the dripping connections are cut", || async {
        let response = reqwest::get(hub.url("/health")).await.ok()?;
        (response.status() == 200).then_some(())
    })
    .await;
}

/// A body that arrives in time is served, however it is cut into pieces.
#[tokio::test]
async fn a_body_sent_in_pieces_within_the_deadline_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(&sqlite_file(dir.path()), Some(KEY), &["--body-read-timeout-seconds", "5"]);
    let mut stream = TcpStream::connect(address(&hub)).await.unwrap();
    let body = br#"{"task": "sent in two pieces"}"#;
    let head = format!(
        "POST /api/tasks HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body[..10]).await.unwrap();
    stream.flush().await.unwrap();
    stream.write_all(&body[10..]).await.unwrap();
    let answer = read_until_closed(&mut stream, Duration::from_secs(30)).await;
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
}

/// One address opens connection after connection: past its share it is refused (429,
/// JSON naming the flag), while another address is still served.
#[tokio::test]
async fn one_address_cannot_hold_every_connection() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(
        &sqlite_file(dir.path()),
        Some(KEY),
        &["--max-connections", "6", "--max-connections-per-address", "2"],
    );
    let _held = [connect_from("127.0.0.2", &hub).await, connect_from("127.0.0.2", &hub).await];
    let mut third = connect_from("127.0.0.2", &hub).await;
    let answer = read_until_closed(&mut third, Duration::from_secs(30)).await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    let error = json_body(&answer)["error"].as_str().unwrap_or_default().to_string();
    assert!(error.contains("--max-connections-per-address"), "{error}");
    // Everyone else (this test's own address) is served meanwhile.
    let (status, _) = hub.get("/health", None).await;
    assert_eq!(status, 200);
}

/// The default share holds remote addresses only: many runners on the hub's own machine
/// (one loopback address) may use every slot, the hub-wide limit answering the next one
/// with 503, not the share with 429.
#[tokio::test]
async fn runners_on_the_hubs_own_machine_are_not_held_to_the_default_share() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(&sqlite_file(dir.path()), Some(KEY), &["--max-connections", "8"]);
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(connect_from("127.0.0.2", &hub).await);
    }
    let mut ninth = connect_from("127.0.0.2", &hub).await;
    let answer = read_until_closed(&mut ninth, Duration::from_secs(30)).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "the hub's limit, not the address's share: {answer}");
}

#[test]
fn the_default_share_is_max_connections_less_an_eighth() {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        limits: swarm_hub::LimitArgs,
    }
    let limits = |args: &[&str]| {
        let mut all = vec!["serve"];
        all.extend(args);
        Flags::try_parse_from(all).unwrap().limits
    };
    let share = |args: &[&str]| {
        let limits = limits(args);
        (limits.connections_per_address(), limits.connections_per_address_loopback_too())
    };
    assert_eq!(share(&[]), (896, false));
    assert_eq!(share(&["--max-connections", "3"]), (3, false));
    assert_eq!(share(&["--max-connections", "4000"]), (3500, false));
    assert_eq!(share(&["--max-connections", "100", "--max-connections-per-address", "10"]), (10, true));
    assert_eq!(limits(&[]).webhook_rate(), (120, false));
    assert_eq!(limits(&["--webhook-rate-per-minute", "0"]).webhook_rate(), (0, true));
}

/// A flood of deliveries to a public webhook path from one address: past its budget,
/// 429 with `Retry-After` and a JSON error; another address has a budget of its own.
#[tokio::test]
async fn a_webhook_flood_from_one_address_gets_429_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(&sqlite_file(dir.path()), Some(KEY), &["--webhook-rate-per-minute", "3"]);
    let flooder = reqwest::Client::builder().local_address("127.0.0.3".parse().ok()).build().unwrap();
    for _ in 0..3 {
        let response = flooder.post(hub.url("/api/webhooks/anything")).body("{}").send().await.unwrap();
        let status = response.status().as_u16();
        assert!(status == 401 || status == 404, "within the budget the delivery is handled: {status}");
    }
    let refused = flooder.post(hub.url("/api/webhooks/anything")).body("{}").send().await.unwrap();
    assert_eq!(refused.status(), 429);
    let retry_after: u64 = refused
        .headers()
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse().ok())
        .expect("a Retry-After in seconds");
    assert!((1..=20).contains(&retry_after), "one delivery every 20 s: {retry_after}");
    let body: Value = refused.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("--webhook-rate-per-minute"), "{body}");
    let other = reqwest::Client::builder().local_address("127.0.0.4".parse().ok()).build().unwrap();
    let response = other.post(hub.url("/api/webhooks/anything")).body("{}").send().await.unwrap();
    assert_ne!(response.status(), 429, "another address is not refused");
    // The API itself is not budgeted this way.
    let (status, _) = send(flooder.get(hub.url("/api/tasks")).bearer_auth(KEY)).await;
    assert_eq!(status, 200);
}

/// Public paths take smaller bodies: a declared size over the limit is refused before
/// a byte of the body is read, and a chunked body is cut where it passes the limit.
#[tokio::test]
async fn oversized_bodies_on_public_paths_are_refused_413() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(&sqlite_file(dir.path()), Some(KEY), &[]);
    for (path, declared) in [("/api/webhooks/anything", 2 * 1024 * 1024), ("/slack/events", 1024 * 1024)] {
        let mut stream = TcpStream::connect(address(&hub)).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = vec![0u8; 4096];
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut answer)).await;
        let answer = String::from_utf8_lossy(&answer[..read.expect("answered without the body").unwrap()])
            .into_owned();
        assert!(answer.starts_with("HTTP/1.1 413"), "{path}: {answer}");
        assert!(json_body(&answer)["error"].as_str().unwrap().contains("KiB"), "{answer}");
    }
    // Chunked, so no length is declared: cut at the limit.
    let mut stream = TcpStream::connect(address(&hub)).await.unwrap();
    let chunk = vec![b' '; 1536 * 1024];
    let head = "POST /api/webhooks/anything HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
                Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    let _ = stream.write_all(format!("{:x}\r\n", chunk.len()).as_bytes()).await;
    let _ = stream.write_all(&chunk).await;
    let _ = stream.write_all(b"\r\n0\r\n\r\n").await;
    let answer = read_until_closed(&mut stream, Duration::from_secs(30)).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(json_body(&answer)["error"].is_string(), "{answer}");
}

/// An agent's token is revoked while it holds an event stream and a parked poll: both
/// end at once, the poll answered 401, instead of living on until the poll's wait ends
/// or the stream is closed by the client.
#[tokio::test]
async fn revoking_a_token_ends_its_event_stream_and_parked_poll() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(&sqlite_file(dir.path()), Some(KEY), &["--agent-auth", "token"]);
    let (status, agent) = hub.post("/api/agents", None, json!({"name": "leaky"})).await;
    assert_eq!(status, 201, "{agent}");
    let (id, token, token_id) = (
        agent["id"].as_str().unwrap().to_string(),
        agent["token"]["token"].as_str().unwrap().to_string(),
        agent["token"]["id"].as_str().unwrap().to_string(),
    );
    let http = reqwest::Client::new();
    let mut stream = http.get(hub.url("/api/events")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(stream.status(), 200);
    let first = stream.chunk().await.unwrap().expect("the ready event");
    assert!(String::from_utf8_lossy(&first).contains("ready"));
    let parked = tokio::spawn(send(http.get(hub.url("/api/poll?wait=60")).bearer_auth(&token)));
    hub.parked_polls(1).await;

    let (status, revoked) =
        send(http.delete(hub.url(&format!("/api/agents/{id}/tokens/{token_id}"))).bearer_auth(KEY)).await;
    assert_eq!(status, 200, "{revoked}");

    let (status, answer) = tokio::time::timeout(Duration::from_secs(10), parked)
        .await
        .expect("the parked poll ends at the revocation, not after its 60 s")
        .unwrap();
    assert_eq!(status, 401, "{answer}");
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        // Whatever was announced before the revocation, then the end of the stream.
        while let Ok(Some(_)) = stream.chunk().await {}
    })
    .await;
    assert!(ended.is_ok(), "the event stream ends at the revocation");
    let (status, _) = send(http.get(hub.url("/api/events")).bearer_auth(&token)).await;
    assert_eq!(status, 401, "and cannot be opened again");
    // Another agent's token is not touched by it.
    let (_, other) = hub.post("/api/agents", None, json!({"name": "other"})).await;
    let other_token = other["token"]["token"].as_str().unwrap();
    let (status, _) = send(http.get(hub.url("/api/poll")).bearer_auth(other_token)).await;
    assert_eq!(status, 200);
}

/// A keyless hub (`--insecure-no-auth`) and another site's web page: no CORS approval,
/// its requests refused, a "simple" cross-site POST (no preflight) included; the hub's
/// own pages and this machine's (a local dev server) are served.
#[tokio::test]
async fn a_keyless_hub_refuses_other_sites_pages() {
    let dir = tempfile::tempdir().unwrap();
    // `--agent-auth header` chosen here: the suite's token mode would give the hub a key.
    let hub = Hub::start_with(&sqlite_file(dir.path()), None, &["--agent-auth", "header"]);
    assert!(hub.api_key.is_none());
    let http = reqwest::Client::new();
    let (status, created) =
        hub.post("/api/triggers", None, json!({"name": "deploy", "type": "manual"})).await;
    assert_eq!(status, 201, "a trigger a page could fire: {created}");

    let evil = "https://evil.example";
    let preflight = http
        .request(Method::OPTIONS, hub.url("/api/tasks"))
        .header("origin", evil)
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert!(preflight.headers().get("access-control-allow-origin").is_none(), "no approval for {evil}");
    let read = http.get(hub.url("/api/tasks")).header("origin", evil).send().await.unwrap();
    assert_eq!(read.status(), 403);
    assert!(read.headers().get("access-control-allow-origin").is_none());
    let refusal: Value = read.json().await.unwrap();
    assert!(refusal["error"].as_str().unwrap().contains("Origin"), "{refusal}");
    for path in ["/api/triggers/deploy/fire", "/api/tasks"] {
        let (status, body) = send(
            http.post(hub.url(path)).header("origin", evil).header("content-type", "text/plain").body("{}"),
        )
        .await;
        assert_eq!(status, 403, "{path}: {body}");
    }
    let (_, tasks) = hub.get("/api/tasks", None).await;
    assert_eq!(tasks["total"], 0, "nothing was created or fired: {tasks}");

    for friendly in ["http://localhost:5173".to_string(), hub.base_url.clone()] {
        let response = http.get(hub.url("/api/tasks")).header("origin", &friendly).send().await.unwrap();
        assert_eq!(response.status(), 200, "{friendly}");
        let allowed = response
            .headers()
            .get("access-control-allow-origin")
            .map(|value| value.to_str().unwrap().to_string());
        assert_eq!(allowed.as_deref(), Some(friendly.as_str()));
    }
    // A hub with a key keeps approving any origin: the key guards it.
    let keyed_dir = tempfile::tempdir().unwrap();
    let keyed = Hub::start_with(&sqlite_file(keyed_dir.path()), Some(KEY), &[]);
    let response = http.get(keyed.url("/health")).header("origin", evil).send().await.unwrap();
    assert_eq!(response.headers().get("access-control-allow-origin").unwrap(), "*");
}

/// DNS rebinding: a page on a name the attacker points at 127.0.0.1 reaches a keyless
/// hub as "same origin", with its own name in `Host`. Refused; loopback names, IP
/// addresses and names listed in --mcp-allowed-hosts are served.
#[tokio::test]
async fn a_keyless_hub_refuses_rebound_host_names() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(&sqlite_file(dir.path()), None, &["--agent-auth", "header"]);
    let port = address(&hub).port();
    let http = reqwest::Client::new();
    let with_host = |host: String| http.get(hub.url("/api/tasks")).header("host", host).send();
    let rebound = with_host(format!("rebind.evil.example:{port}")).await.unwrap();
    assert_eq!(rebound.status(), 403);
    let refusal: Value = rebound.json().await.unwrap();
    assert!(refusal["error"].as_str().unwrap().contains("--mcp-allowed-hosts"), "{refusal}");
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}"), format!("10.1.2.3:{port}")] {
        assert_eq!(with_host(host.clone()).await.unwrap().status(), 200, "{host}");
    }
    let listed_dir = tempfile::tempdir().unwrap();
    let listed = Hub::start_with(
        &sqlite_file(listed_dir.path()),
        None,
        &["--agent-auth", "header", "--mcp-allowed-hosts", "localhost,hub.lan"],
    );
    let response = http.get(listed.url("/api/tasks")).header("host", "hub.lan").send().await.unwrap();
    assert_eq!(response.status(), 200);
}

/// `swarm serve --insecure-no-auth --db <a folder that does not exist>/swarm.db` starts,
/// creating the folder for its owner only, as the keyed hub does.
#[tokio::test]
async fn a_keyless_hub_creates_its_database_folder() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("new").join("dir");
    let hub =
        Hub::spawn_with(&Database::SqliteFile(folder.join("swarm.db")), None, &["--agent-auth", "header"]);
    assert!(hub.api_key.is_none());
    let (status, _) = hub.get("/health", None).await;
    assert_eq!(status, 200);
    let mode = std::fs::metadata(&folder).expect("the folder was created").permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{mode:o}");
}
