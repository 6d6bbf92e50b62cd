//! The listener's loop: HTTP/1.1 connections served by hyper, with the limits
//! `axum::serve` has no setting for. A client must send a request's headers within
//! `--header-read-timeout-seconds` and its body within `--body-read-timeout-seconds`
//! after that (a half-sent or dripped request no longer holds a connection open for
//! good: the body's deadline is answered 408 and the connection closed); at most
//! `--max-connections` are served at once, and at most `--max-connections-per-address`
//! of them from one client address: one more is answered (503, or 429 for the address
//! that holds its share) and closed rather than left waiting, so a flood from one
//! address cannot starve the runners' polls of memory or file descriptors.
//!
//! Each request carries its peer's address (`ConnectInfo<SocketAddr>`) for the
//! API's per-address budgets (`swarm_api::Limits`).

use std::{
    collections::HashMap,
    convert::Infallible,
    io,
    net::{IpAddr, SocketAddr},
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll, ready},
    time::Duration,
};

use axum::{
    extract::ConnectInfo,
    http::{HeaderValue, Request, Response, StatusCode, header},
    response::IntoResponse,
};
use hyper::body::{Body as _, Bytes, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{
    io::AsyncWriteExt,
    net::{TcpListener, TcpStream},
    sync::Semaphore,
};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    pub max_connections: usize,
    /// Connections one client address (an IPv6 client's /64) may hold at once.
    pub max_per_address: usize,
    /// Whether loopback clients (this machine's runners) are held to `max_per_address`.
    pub per_address_loopback_too: bool,
    pub header_read_timeout: Duration,
    /// Time a request's body may take to arrive once its headers did.
    pub body_read_timeout: Duration,
}

/// Serve `app` until `stop` is cancelled, then let the connections in flight finish.
pub(crate) async fn serve(
    listener: TcpListener,
    app: axum::Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
) -> io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let per_address = PerAddress::new(limits.max_per_address, limits.per_address_loopback_too);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: the next accept may work.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            tokio::spawn(refuse(stream, Refusal::Hub));
            continue;
        };
        let Some(address_slot) = per_address.take(peer.ip()) else {
            tracing::warn!(peer = %peer.ip(), cap = limits.max_per_address,
                "refused a connection: its address holds its share of connections already");
            drop(permit);
            tokio::spawn(refuse(stream, Refusal::Address(limits.max_per_address)));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let body_read_timeout = limits.body_read_timeout;
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            handle(app.clone(), request, peer, body_read_timeout)
        });
        let connection = builder.serve_connection(TokioIo::new(stream), service).with_upgrades();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
            drop(permit);
            drop(address_slot);
        });
    }
    // Every connection gives its permit back when it ends.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = permits.acquire_many(all).await;
    Ok(())
}

/// One request: its peer's address attached, its body under a deadline. A body that
/// misses it is answered 408 whatever the handler made of the broken body, and the
/// connection closes (the rest of the body is never read).
async fn handle(
    app: axum::Router,
    mut request: Request<Incoming>,
    peer: SocketAddr,
    body_read_timeout: Duration,
) -> Result<Response<axum::body::Body>, Infallible> {
    request.extensions_mut().insert(ConnectInfo(peer));
    // A request without a body (every GET, every poll) costs no timer and no flag.
    if request.body().is_end_stream() {
        return app.oneshot(request).await;
    }
    let expired = Arc::new(AtomicBool::new(false));
    let deadline = tokio::time::Instant::now() + body_read_timeout;
    let request = request.map(|body| {
        axum::body::Body::new(ReadDeadline {
            inner: body,
            deadline,
            timer: None,
            expired: Arc::clone(&expired),
        })
    });
    let response = app.oneshot(request).await?;
    if !expired.load(Ordering::Relaxed) {
        return Ok(response);
    }
    tracing::warn!(peer = %peer.ip(), "a request body did not arrive within its deadline; closing the connection");
    let message = format!(
        "the request body did not arrive within {}s of its headers: send it at once \
         (--body-read-timeout-seconds on the hub sets the deadline)",
        body_read_timeout.as_secs()
    );
    let mut timed_out =
        (StatusCode::REQUEST_TIMEOUT, axum::Json(serde_json::json!({ "error": message }))).into_response();
    timed_out.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    Ok(timed_out)
}

/// The body's deadline passed while the client still owed bytes.
#[derive(Debug)]
struct BodyDeadlinePassed;

impl std::fmt::Display for BodyDeadlinePassed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body did not arrive in time")
    }
}

impl std::error::Error for BodyDeadlinePassed {}

/// A request body that fails once its deadline passes with bytes still owed. Data the
/// client sent in time is always handed out first: only a client that is late is cut.
struct ReadDeadline {
    inner: Incoming,
    deadline: tokio::time::Instant,
    /// Armed at the first read that has to wait: a body that arrives whole costs none.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    expired: Arc<AtomicBool>,
}

impl hyper::body::Body for ReadDeadline {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let timer = this.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        ready!(timer.as_mut().poll(cx));
        this.expired.store(true, Ordering::Relaxed);
        Poll::Ready(Some(Err(Box::new(BodyDeadlinePassed))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Open connections per client address. A plain map under a lock: it is touched once
/// when a connection opens and once when it closes, never per request.
#[derive(Clone)]
struct PerAddress {
    cap: usize,
    loopback_too: bool,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl PerAddress {
    fn new(cap: usize, loopback_too: bool) -> Self {
        PerAddress { cap, loopback_too, open: Arc::default() }
    }

    /// A slot of `ip`'s share, `None` when it holds its share already.
    fn take(&self, ip: IpAddr) -> Option<AddressSlot> {
        let key = swarm_api::address_key(ip);
        if !self.loopback_too && key.is_loopback() {
            return Some(AddressSlot { open: None, key });
        }
        let mut open = self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = open.entry(key).or_default();
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(AddressSlot { open: Some(Arc::clone(&self.open)), key })
    }
}

/// One open connection of an address, given back when it closes (`open`: `None` for an
/// address not counted).
struct AddressSlot {
    open: Option<Arc<Mutex<HashMap<IpAddr, usize>>>>,
    key: IpAddr,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let Some(open) = &self.open else { return };
        let mut open = open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = open.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.key);
            }
        }
    }
}

enum Refusal {
    /// Every slot of the hub is taken.
    Hub,
    /// The client's address holds this many connections already.
    Address(usize),
}

/// One connection too many: a clear answer, then close.
async fn refuse(mut stream: TcpStream, refusal: Refusal) {
    let (status, body) = match refusal {
        Refusal::Hub => (
            "503 Service Unavailable",
            r#"{"error":"too many connections to this hub; try again shortly"}"#.to_string(),
        ),
        Refusal::Address(cap) => (
            "429 Too Many Requests",
            format!(
                r#"{{"error":"too many connections from your address: it holds {cap} open already; close some, or raise the hub's --max-connections-per-address (env MAX_CONNECTIONS_PER_ADDRESS)"}}"#
            ),
        ),
    };
    let answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         retry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(answer.as_bytes())).await;
    let _ = stream.shutdown().await;
}
