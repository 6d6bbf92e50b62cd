//! `swarm-bench fleet-client`: one slice of a fleet, in a process of its own (a process
//! may hold 20,000 descriptors here, a fleet needs more). `swarm-bench fleet` starts it;
//! people do not. Each agent of the slice behaves as our runner does when it waits for
//! work: it registers, keeps one `GET /api/poll?wait=` parked on its own keep-alive
//! connection with the runner's headers, polls again when the poll answers empty, and
//! when a task comes it says so, pings (the runner heartbeats while a run is under way),
//! finishes the task and polls again. A connection that fails is made again after a
//! second, as the runner's backoff does.
//!
//! It talks to its parent over stdin and stdout, one line each:
//! - out `registered`: every agent of the slice is registered; it then waits for a line
//!   on stdin before parking the polls (so the parent can read the idle hub's memory);
//! - out `got <agent> <task id> <unix ns>`: a poll of `agent` answered with that task;
//! - out `idle <agent>`: the agent finished its task and polls again;
//! - out `stat <polls sent> <pings sent> <errors>`: totals, once a second;
//! - out `error <text>`: a failure worth showing (the first few).

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, bail};
use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, client::conn::http1::SendRequest, header};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::json;
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    sync::mpsc,
};

/// Where the client finds the replicas' keys (comma-separated, in the order of `--urls`;
/// each replica the bench starts has its own): not on the command line, where `ps` shows it.
pub(crate) const API_KEY_ENV: &str = "SWARM_FLEET_API_KEY";
/// What our runner says it is (swarm-client's reqwest user agent).
const USER_AGENT: &str = concat!("swarm-client/", env!("CARGO_PKG_VERSION"));
/// The runner's backoff after a failed request, at its shortest.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);
/// Failures told to the parent, at most (the counts say the rest).
const ERRORS_TOLD: u64 = 5;
/// Connections a client opens at once: thousands of connects in the same millisecond
/// overflow the hub's listen backlog (a fleet of real runners does not start in one).
const CONNECTING_AT_ONCE: usize = 64;

#[derive(Debug, Args)]
pub struct FleetClientArgs {
    /// The replicas' base URLs (http://host:port), comma-separated; agent i uses i mod R.
    #[arg(long, value_delimiter = ',', required = true)]
    urls: Vec<String>,
    /// The fleet's id: agent i's id is `<seed>-f1ee-4000-8000-<i in hex>`.
    #[arg(long)]
    seed: u32,
    /// The first agent of this slice (its global index).
    #[arg(long)]
    from: u64,
    /// One past the last agent of this slice.
    #[arg(long)]
    to: u64,
    /// Agents per loopback source address: agent i connects from 127.0.0.(2 + i / this).
    #[arg(long)]
    agents_per_address: u64,
    /// Each poll's `?wait=` in seconds.
    #[arg(long)]
    wait: f64,
}

/// Agent `index`'s id in the fleet `seed`.
pub(crate) fn agent_id(seed: u32, index: u64) -> String {
    format!("{seed:08x}-f1ee-4000-8000-{index:012x}")
}

/// The loopback address agent `index` connects from.
pub(crate) fn source_address(index: u64, agents_per_address: u64) -> anyhow::Result<Ipv4Addr> {
    let slot = 2 + index / agents_per_address.max(1);
    if slot > 254 * 256 {
        bail!("agent {index} needs more loopback source addresses than 127.0.0.0/8 has");
    }
    Ok(Ipv4Addr::new(127, 0, (slot / 255) as u8, (slot % 255) as u8))
}

#[derive(Default)]
struct Totals {
    polls: AtomicU64,
    pings: AtomicU64,
    errors: AtomicU64,
}

pub async fn run(args: FleetClientArgs) -> anyhow::Result<()> {
    let keys = std::env::var(API_KEY_ENV).with_context(|| format!("{API_KEY_ENV} is not set"))?;
    let keys: Vec<&str> = keys.split(',').collect();
    if keys.len() != args.urls.len() {
        bail!("{API_KEY_ENV} has {} keys for {} --urls", keys.len(), args.urls.len());
    }
    let mut hubs = Vec::new();
    for (url, key) in args.urls.iter().zip(keys) {
        let parsed = reqwest::Url::parse(url).with_context(|| format!("{url:?} is not a hub URL"))?;
        let host: IpAddr =
            parsed.host_str().context("no host")?.parse().context("the hub must be an IP address")?;
        let address = SocketAddr::new(host, parsed.port_or_known_default().unwrap_or(80));
        hubs.push(Hub {
            address,
            authority: Arc::from(address.to_string()),
            authorization: format!("Bearer {key}"),
        });
    }
    let hubs: Arc<[Hub]> = Arc::from(hubs);
    let common = Arc::new(Common {
        hubs,
        connecting: tokio::sync::Semaphore::new(CONNECTING_AT_ONCE),
        poll_path: format!("/api/poll?wait={:.3}", args.wait),
        totals: Totals::default(),
    });
    let (lines, mut outbox) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = outbox.recv().await {
            if stdout.write_all(line.as_bytes()).await.is_err() {
                break;
            }
            // Several lines at once when they queue up, one flush.
            while let Ok(more) = outbox.try_recv() {
                let _ = stdout.write_all(more.as_bytes()).await;
            }
            let _ = stdout.flush().await;
        }
    });

    let mut agents = Vec::new();
    for index in args.from..args.to {
        let source = source_address(index, args.agents_per_address)?;
        agents.push(Agent::new(&common, args.seed, index, source));
    }
    register_all(&agents).await?;
    let _ = lines.send("registered\n".to_string());
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    if stdin.next_line().await?.is_none() {
        return Ok(());
    }

    for agent in agents {
        let lines = lines.clone();
        tokio::spawn(async move { agent.wait_for_work(lines).await });
    }
    let totals = Arc::clone(&common);
    let stats = lines.clone();
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(Duration::from_secs(1));
        loop {
            ticks.tick().await;
            let totals = &totals.totals;
            let line = format!(
                "stat {} {} {}\n",
                totals.polls.load(Ordering::Relaxed),
                totals.pings.load(Ordering::Relaxed),
                totals.errors.load(Ordering::Relaxed)
            );
            if stats.send(line).is_err() {
                return;
            }
        }
    });
    // The parent closes stdin (or dies) when the run is over.
    while stdin.next_line().await.ok().flatten().is_some() {}
    drop(lines);
    writer.abort();
    Ok(())
}

/// Registers the slice over a few connections at once.
async fn register_all(agents: &[Agent]) -> anyhow::Result<()> {
    const AT_ONCE: usize = 16;
    let mut groups = tokio::task::JoinSet::new();
    for group in 0..AT_ONCE.min(agents.len()) {
        let slice: Vec<Agent> = agents.iter().skip(group).step_by(AT_ONCE).cloned().collect();
        groups.spawn(async move {
            for mut agent in slice {
                let body = json!({"name": format!("fleet-{}", agent.id), "maxTasks": 1});
                agent.request(Method::POST, "/api/agents", Some(body)).await.with_context(|| {
                    format!("cannot register agent {} at {}", agent.index, agent.hub().authority)
                })?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(joined) = groups.join_next().await {
        joined.context("a registering task panicked")??;
    }
    Ok(())
}

struct Hub {
    address: SocketAddr,
    authority: Arc<str>,
    authorization: String,
}

struct Common {
    hubs: Arc<[Hub]>,
    connecting: tokio::sync::Semaphore,
    poll_path: String,
    totals: Totals,
}

struct Agent {
    common: Arc<Common>,
    index: u64,
    id: String,
    runner_id: String,
    source: Ipv4Addr,
    connection: Option<SendRequest<Full<Bytes>>>,
}

impl Clone for Agent {
    /// The same agent on a connection of its own (made when first needed).
    fn clone(&self) -> Agent {
        Agent {
            common: Arc::clone(&self.common),
            index: self.index,
            id: self.id.clone(),
            runner_id: self.runner_id.clone(),
            source: self.source,
            connection: None,
        }
    }
}

#[derive(Deserialize)]
struct PollAnswer {
    trigger: Option<TriggerAnswer>,
}

#[derive(Deserialize)]
struct TriggerAnswer {
    #[serde(rename = "type")]
    kind: String,
    task: Option<TaskAnswer>,
}

#[derive(Deserialize)]
struct TaskAnswer {
    id: String,
}

impl Agent {
    fn new(common: &Arc<Common>, seed: u32, index: u64, source: Ipv4Addr) -> Agent {
        Agent {
            common: Arc::clone(common),
            index,
            id: agent_id(seed, index),
            runner_id: uuid::Uuid::new_v4().to_string(),
            source,
            connection: None,
        }
    }

    fn hub(&self) -> &Hub {
        &self.common.hubs[(self.index % self.common.hubs.len() as u64) as usize]
    }

    /// The runner's loop while it waits for work, forever (the process ends it).
    async fn wait_for_work(mut self, lines: mpsc::UnboundedSender<String>) {
        let common = Arc::clone(&self.common);
        let totals = || &common.totals;
        loop {
            totals().polls.fetch_add(1, Ordering::Relaxed);
            let path = self.common.poll_path.clone();
            let answer = match self.request(Method::GET, &path, None).await {
                Ok(bytes) => serde_json::from_slice::<PollAnswer>(&bytes).map_err(anyhow::Error::from),
                Err(error) => Err(error),
            };
            let task = match answer {
                Ok(PollAnswer { trigger: None }) => continue,
                Ok(PollAnswer { trigger: Some(TriggerAnswer { kind, task: Some(task) }) })
                    if kind == "task_assigned" =>
                {
                    task
                }
                Ok(PollAnswer { trigger: Some(other) }) => {
                    self.fail(&lines, format!("an unexpected trigger {}", other.kind));
                    continue;
                }
                Err(error) => {
                    self.fail(&lines, format!("{error:#}"));
                    tokio::time::sleep(RECONNECT_AFTER).await;
                    continue;
                }
            };
            let at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
            let _ = lines.send(format!("got {} {} {at}\n", self.index, task.id));
            totals().pings.fetch_add(1, Ordering::Relaxed);
            if let Err(error) = self.request(Method::POST, "/ping", Some(json!({}))).await {
                self.fail(&lines, format!("{error:#}"));
            }
            let finish = format!("/api/tasks/{}/finish", task.id);
            if let Err(error) =
                self.request(Method::POST, &finish, Some(json!({"status": "completed"}))).await
            {
                self.fail(&lines, format!("{error:#}"));
            }
            let _ = lines.send(format!("idle {}\n", self.index));
        }
    }

    fn fail(&self, lines: &mpsc::UnboundedSender<String>, error: String) {
        let errors = self.common.totals.errors.fetch_add(1, Ordering::Relaxed);
        if errors < ERRORS_TOLD {
            let _ = lines.send(format!("error agent {}: {}\n", self.index, error.replace('\n', " ")));
        }
    }

    /// One request on the agent's connection (made again when it is gone); a 2xx
    /// answer's body, else an error.
    async fn request(
        &mut self,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> anyhow::Result<Bytes> {
        let mut request = Request::builder()
            .method(method.clone())
            .uri(path)
            .header(header::HOST, &*self.hub().authority)
            .header(header::USER_AGENT, USER_AGENT)
            .header(header::ACCEPT, "*/*")
            .header(header::AUTHORIZATION, &self.hub().authorization)
            .header("X-Agent-ID", &self.id)
            .header("X-Runner-ID", &self.runner_id);
        let body = match body {
            Some(body) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Bytes::from(serde_json::to_vec(&body)?)
            }
            None => Bytes::new(),
        };
        let request = request.body(Full::new(body))?;
        let sender = match self.connection.take() {
            Some(sender) if !sender.is_closed() => self.connection.insert(sender),
            _ => {
                let sender = self.connect().await?;
                self.connection.insert(sender)
            }
        };
        let exchange = async {
            sender.ready().await?;
            let response = sender.send_request(request).await?;
            let status = response.status();
            anyhow::Ok((status, response.into_body().collect().await?.to_bytes()))
        };
        // Longer than any poll waits.
        let (status, bytes) = match tokio::time::timeout(Duration::from_secs(90), exchange).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(error)) => {
                self.connection = None;
                return Err(error.context(format!("{method} {path}")));
            }
            Err(_) => {
                self.connection = None;
                bail!("{method} {path}: no answer within 90 s");
            }
        };
        if !status.is_success() {
            bail!("{method} {path} answered {status}: {}", String::from_utf8_lossy(&bytes));
        }
        Ok(bytes)
    }

    async fn connect(&self) -> anyhow::Result<SendRequest<Full<Bytes>>> {
        let hub = self.hub().address;
        let _turn = self.common.connecting.acquire().await?;
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket
            .bind(SocketAddr::new(IpAddr::V4(self.source), 0))
            .with_context(|| format!("cannot bind the source address {}", self.source))?;
        let stream = socket.connect(hub).await.with_context(|| format!("cannot connect to {hub}"))?;
        stream.set_nodelay(true)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_ids_are_uuids_and_sources_spread_over_loopback() {
        let id = agent_id(0xdead_beef, 70_000);
        assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
        assert_eq!(source_address(0, 16_000).unwrap(), Ipv4Addr::new(127, 0, 0, 2));
        assert_eq!(source_address(16_000, 16_000).unwrap(), Ipv4Addr::new(127, 0, 0, 3));
        assert_eq!(source_address(253 * 10, 10).unwrap(), Ipv4Addr::new(127, 0, 1, 0));
    }
}
