//! Sends agent output, costs and whether the agent CLI started to the hub
//! (`POST /api/session-logs`, `POST /api/session-costs`, `POST /api/session-starts`) in
//! the background, logs in batches.
//!
//! Reading an agent's output never waits for the hub: lines go into a bounded queue with
//! `try_send`, and when the queue is full (the hub is slow or down) the line is dropped
//! and counted. Every line is in the local log file anyway; the hub's copy is a
//! convenience. A batch the hub refuses or cannot take is dropped and counted too.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use swarm_client::{Client, ClientError, SessionCostRequest, SessionLogsRequest, SessionStartRequest};
use swarm_domain::id::TaskId;
use tokio::{sync::mpsc, task::JoinHandle, time::Instant};

use crate::view::View;

/// Lines waiting for the hub, across all runs of a runner.
const QUEUE_CAPACITY: usize = 8_192;
/// A batch goes out when it has this many lines...
const BATCH_LINES: usize = 200;
/// ...or when its oldest line has waited this long.
const BATCH_DELAY: Duration = Duration::from_millis(500);

/// Which run a line belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunKey {
    pub iteration: u64,
    pub task_id: Option<TaskId>,
}

enum Shipment {
    Line { run: RunKey, line: String },
    Cost(Box<SessionCostRequest>),
    Start { started: bool },
}

/// The sending half, one per runner; cheap to clone.
#[derive(Clone)]
pub(crate) struct Shipper {
    queue: mpsc::Sender<Shipment>,
    /// Lines that never reached the hub: queue full, or the hub refused or missed a batch.
    dropped: Arc<AtomicU64>,
}

/// The background task; [`ShipperTask::finish`] sends what is queued and stops.
pub(crate) struct ShipperTask {
    handle: JoinHandle<()>,
    dropped: Arc<AtomicU64>,
}

pub(crate) fn start(client: Client, session_id: String, cli: String, view: View) -> (Shipper, ShipperTask) {
    let (queue, receiver) = mpsc::channel(QUEUE_CAPACITY);
    let dropped = Arc::new(AtomicU64::new(0));
    let sender = Sender { client, session_id, cli, view, dropped: Arc::clone(&dropped), failing: false };
    let handle = tokio::spawn(sender.run(receiver));
    (Shipper { queue, dropped: Arc::clone(&dropped) }, ShipperTask { handle, dropped })
}

impl Shipper {
    /// Queues one output line; false when it was dropped because the queue is full.
    pub fn line(&self, run: &RunKey, line: &str) -> bool {
        let shipment = Shipment::Line { run: run.clone(), line: line.to_string() };
        if self.queue.try_send(shipment).is_ok() {
            return true;
        }
        self.dropped.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// Queues whether a run's agent CLI started, for the hub's metrics; false when the
    /// queue is full.
    pub fn start(&self, started: bool) -> bool {
        self.queue.try_send(Shipment::Start { started }).is_ok()
    }

    /// Queues a run's cost; false when the queue is full.
    pub fn cost(&self, cost: SessionCostRequest) -> bool {
        self.queue.try_send(Shipment::Cost(Box::new(cost))).is_ok()
    }
}

impl ShipperTask {
    /// Waits up to `deadline` for the queue to drain once every [`Shipper`] is dropped;
    /// answers how many lines never reached the hub.
    pub async fn finish(self, deadline: Duration) -> u64 {
        let abort = self.handle.abort_handle();
        if tokio::time::timeout(deadline, self.handle).await.is_err() {
            abort.abort();
        }
        self.dropped.load(Ordering::Relaxed)
    }
}

struct Sender {
    client: Client,
    session_id: String,
    cli: String,
    view: View,
    dropped: Arc<AtomicU64>,
    /// The last batch failed: warn once per streak, not once per batch.
    failing: bool,
}

impl Sender {
    async fn run(mut self, mut receiver: mpsc::Receiver<Shipment>) {
        let mut batch: Vec<(RunKey, String)> = Vec::new();
        loop {
            let first = match receiver.recv().await {
                Some(shipment) => shipment,
                None => break,
            };
            let deadline = Instant::now() + BATCH_DELAY;
            let mut next = Some(first);
            while let Some(shipment) = next.take() {
                match shipment {
                    Shipment::Line { run, line } => batch.push((run, line)),
                    Shipment::Cost(cost) => {
                        // Lines before the cost go first, so the hub sees them in order.
                        self.send_lines(&mut batch).await;
                        self.send_cost(&cost).await;
                    }
                    Shipment::Start { started } => self.send_start(started).await,
                }
                if batch.len() >= BATCH_LINES {
                    break;
                }
                next = match tokio::time::timeout_at(deadline, receiver.recv()).await {
                    Ok(Some(shipment)) => Some(shipment),
                    Ok(None) | Err(_) => None,
                };
            }
            self.send_lines(&mut batch).await;
        }
        self.send_lines(&mut batch).await;
    }

    /// Sends the batch as one request per run, in order, and empties it.
    async fn send_lines(&mut self, batch: &mut Vec<(RunKey, String)>) {
        let mut lines = std::mem::take(batch).into_iter().peekable();
        while let Some((run, first)) = lines.next() {
            let mut group = vec![first];
            while let Some((_, line)) = lines.next_if(|(next_run, _)| *next_run == run) {
                group.push(line);
            }
            let n_lines = group.len() as u64;
            let request = SessionLogsRequest {
                session_id: self.session_id.clone(),
                iteration: i64::try_from(run.iteration).unwrap_or(i64::MAX),
                lines: group,
                task_id: run.task_id,
                cli: Some(self.cli.clone()),
            };
            match self.client.append_session_logs(&request).await {
                Ok(_) => self.failing = false,
                Err(err) => {
                    self.dropped.fetch_add(n_lines, Ordering::Relaxed);
                    self.warn_once(&format!(
                        "agent output not sent to the hub ({err}); it stays in the log file"
                    ));
                }
            }
        }
    }

    async fn send_cost(&mut self, cost: &SessionCostRequest) {
        if let Err(err) = self.client.record_session_cost(cost).await {
            self.warn_once(&format!("a run's cost was not sent to the hub ({err})"));
        }
    }

    async fn send_start(&mut self, started: bool) {
        let request = SessionStartRequest { cli: self.cli.clone(), started };
        // A hub without this endpoint (the reference's) answers 404: only a count is lost.
        if let Err(err) = self.client.report_session_start(&request).await
            && !matches!(&err, ClientError::Status { status, .. } if status.as_u16() == 404)
        {
            self.warn_once(&format!("a run's start was not reported to the hub ({err})"));
        }
    }

    fn warn_once(&mut self, message: &str) {
        if !self.failing {
            self.view.warn("hub_logs_failed", message, &[]);
        }
        self.failing = true;
    }
}

#[cfg(test)]
mod tests {
    use swarm_client::ClientConfig;

    use super::*;
    use crate::config::OutputFormat;

    /// A hub that accepts connections and never answers: every request hangs.
    async fn silent_hub() -> (String, JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let handle = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        (url, handle)
    }

    #[tokio::test]
    async fn a_hub_that_never_answers_costs_dropped_lines_not_a_blocked_agent() {
        let (url, _hub) = silent_hub().await;
        let client = Client::new(ClientConfig { base_url: url, api_key: None, agent_id: None }).unwrap();
        let view = View::new("test", OutputFormat::Text);
        let (shipper, task) = start(client, "s".into(), "cli".into(), view);
        let run = RunKey { iteration: 1, task_id: None };

        // Far more lines than the queue holds: each call returns at once, the overflow is dropped.
        let n_lines = QUEUE_CAPACITY + 2 * BATCH_LINES + 1_000;
        let accepted = (0..n_lines).filter(|n| shipper.line(&run, &format!("line {n}"))).count();
        assert!(accepted <= QUEUE_CAPACITY + BATCH_LINES, "the queue is bounded: {accepted} accepted");
        assert!(accepted < n_lines, "some lines were dropped");

        drop(shipper);
        let unshipped = task.finish(Duration::from_millis(100)).await;
        assert!(unshipped >= (n_lines - accepted) as u64, "drops are counted: {unshipped}");
    }
}
