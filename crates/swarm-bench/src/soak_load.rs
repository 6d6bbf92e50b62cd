//! The soak's load: worker agents that each, round after round, create a task (assigned to
//! themselves or in the pool), take it with a poll (a long-poll when nothing is there yet)
//! and finish it, send mail to the next worker and read their own, post to and read the
//! general channel, read the task list, and every fourth round fire a signed webhook and
//! take the task it filed; and a lead whose long-polls collect the finished tasks.
//!
//! Every request is checked (a 2xx, the expected trigger, no task handed out twice); what
//! fails is counted and kept as an error, and the load goes on.

use std::{
    collections::HashSet,
    future::Future,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use bytes::Bytes;
use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize, de::IgnoredAny};
use serde_json::json;
use tokio::{task::JoinHandle, time::Instant};

use super::hub::{Http, Target};

/// The channel every hub has (`general`).
const GENERAL: &str = "00000000-0000-7000-8000-000000000001";
/// The webhook trigger the soak creates.
const HOOK: &str = "soak";
/// How long a worker's long-poll waits when its first poll found nothing.
const LONG_POLL: &str = "/api/poll?wait=10";
/// Long-polls a worker makes for a trigger before it counts an error.
const LONG_POLLS_PER_TASK: usize = 3;
/// Errors kept word for word; the rest are only counted.
const ERRORS_KEPT: usize = 20;

/// How the load is shaped.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub workers: usize,
    pub pause: Duration,
}

/// What happened since the last sample.
#[derive(Debug, Default)]
pub(crate) struct Interval {
    /// The kind and duration of each checked request that answers at once (long-polls
    /// excluded).
    pub latencies: Vec<(&'static str, Duration)>,
    pub requests: u64,
    pub errors: u64,
}

/// Counts over the whole run.
#[derive(Debug, Default, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Totals {
    pub requests: u64,
    pub errors: u64,
    pub tasks_created: u64,
    pub tasks_finished: u64,
    pub mails_sent: u64,
    pub chat_messages: u64,
    pub webhooks: u64,
    /// Workers' long-polls: their first poll found nothing.
    pub long_polls: u64,
    pub lead_polls: u64,
    pub lead_triggers: u64,
    /// Tasks a poll handed out that an earlier poll had handed out already (must be 0).
    pub handed_out_twice: u64,
    /// Finishes the hub answered with `alreadyFinished` (must be 0).
    pub finished_twice: u64,
}

#[derive(Default)]
struct Counters {
    tasks_created: AtomicU64,
    tasks_finished: AtomicU64,
    mails_sent: AtomicU64,
    chat_messages: AtomicU64,
    webhooks: AtomicU64,
    long_polls: AtomicU64,
    lead_polls: AtomicU64,
    lead_triggers: AtomicU64,
    handed_out_twice: AtomicU64,
    finished_twice: AtomicU64,
}

/// Shared by the clients and the sampler.
#[derive(Default)]
pub(crate) struct Stats {
    interval: Mutex<Interval>,
    requests: AtomicU64,
    errors: AtomicU64,
    kept_errors: Mutex<Vec<String>>,
    received: Mutex<HashSet<String>>,
    counters: Counters,
}

impl Stats {
    fn answered(&self, latency: Option<(&'static str, Duration)>) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let mut interval = self.interval.lock().unwrap();
        interval.requests += 1;
        if let Some(latency) = latency {
            interval.latencies.push(latency);
        }
    }

    fn failed(&self, error: String) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.errors.fetch_add(1, Ordering::Relaxed);
        {
            let mut interval = self.interval.lock().unwrap();
            interval.requests += 1;
            interval.errors += 1;
        }
        let mut kept = self.kept_errors.lock().unwrap();
        if kept.len() < ERRORS_KEPT {
            kept.push(error);
        }
    }

    /// What happened since the last call.
    pub(crate) fn take_interval(&self) -> Interval {
        std::mem::take(&mut *self.interval.lock().unwrap())
    }

    pub(crate) fn totals(&self) -> Totals {
        let count = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let c = &self.counters;
        Totals {
            requests: count(&self.requests),
            errors: count(&self.errors),
            tasks_created: count(&c.tasks_created),
            tasks_finished: count(&c.tasks_finished),
            mails_sent: count(&c.mails_sent),
            chat_messages: count(&c.chat_messages),
            webhooks: count(&c.webhooks),
            long_polls: count(&c.long_polls),
            lead_polls: count(&c.lead_polls),
            lead_triggers: count(&c.lead_triggers),
            handed_out_twice: count(&c.handed_out_twice),
            finished_twice: count(&c.finished_twice),
        }
    }

    pub(crate) fn kept_errors(&self) -> Vec<String> {
        self.kept_errors.lock().unwrap().clone()
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// The running load.
pub(crate) struct Load {
    pub stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
    clients: Vec<JoinHandle<()>>,
}

impl Load {
    /// Registers the agents and the webhook, then starts every client.
    pub(crate) async fn start(target: &Target, shape: Shape) -> anyhow::Result<Load> {
        let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
        let secret = uuid::Uuid::new_v4().simple().to_string();
        let setup = Http::new(target);
        let _: IgnoredAny = setup
            .post(
                "/api/triggers",
                None,
                &json!({"name": HOOK, "type": "webhook", "webhookSecret": secret,
                        "prompt": "Soak webhook {{payload}}"}),
            )
            .await
            .context("cannot create the soak's webhook trigger")?;
        let names: Vec<String> =
            (0..shape.workers).map(|index| format!("soak-worker-{index}-{suffix}")).collect();
        let mut workers = Vec::with_capacity(shape.workers);
        for (index, name) in names.iter().enumerate() {
            let http = Http::new(target);
            let id = uuid::Uuid::new_v4().to_string();
            let _: IgnoredAny = http
                .post("/api/agents", Some(&id), &json!({"name": name, "maxTasks": 1}))
                .await
                .with_context(|| format!("cannot register {name}"))?;
            let next = names[(index + 1) % names.len()].clone();
            workers.push(Worker { http, id, index, next, secret: secret.clone() });
        }
        let lead = Http::new(target);
        let lead_id = uuid::Uuid::new_v4().to_string();
        let _: IgnoredAny = lead
            .post(
                "/api/agents",
                Some(&lead_id),
                &json!({"name": format!("soak-lead-{suffix}"), "isLead": true}),
            )
            .await
            .context("cannot register the soak's lead")?;

        let stats = Arc::new(Stats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let mut clients = Vec::new();
        for worker in workers {
            let (stats, stop) = (Arc::clone(&stats), Arc::clone(&stop));
            clients.push(tokio::spawn(async move {
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    worker.round(round, &stats).await;
                    round += 1;
                    tokio::time::sleep(shape.pause).await;
                }
            }));
        }
        let (lead_stats, lead_stop) = (Arc::clone(&stats), Arc::clone(&stop));
        clients.push(tokio::spawn(async move {
            while !lead_stop.load(Ordering::Relaxed) {
                let answer: anyhow::Result<PollAnswer> = lead.get("/api/poll?wait=10", Some(&lead_id)).await;
                match answer {
                    Ok(answer) => {
                        lead_stats.answered(None);
                        bump(&lead_stats.counters.lead_polls);
                        if answer.trigger.is_some() {
                            bump(&lead_stats.counters.lead_triggers);
                        }
                    }
                    Err(error) => {
                        lead_stats.failed(format!("the lead's long-poll: {error:#}"));
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        }));
        Ok(Load { stats, stop, clients })
    }

    /// Asks every client to stop after its round, and waits for them a while (a long-poll
    /// may still be parked); those still busy then are cut off, uncounted.
    pub(crate) async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let aborts: Vec<_> = self.clients.iter().map(JoinHandle::abort_handle).collect();
        let all = futures_join(self.clients);
        if tokio::time::timeout(Duration::from_secs(15), all).await.is_err() {
            for abort in aborts {
                abort.abort();
            }
        }
    }
}

async fn futures_join(handles: Vec<JoinHandle<()>>) {
    for handle in handles {
        let _ = handle.await;
    }
}

struct Worker {
    http: Http,
    id: String,
    index: usize,
    /// The worker this one writes to.
    next: String,
    secret: String,
}

impl Worker {
    async fn round(&self, round: u64, stats: &Stats) {
        let counters = &stats.counters;
        let body = if round.is_multiple_of(2) {
            json!({"task": format!("soak task {round} of worker {}", self.index), "agentId": self.id})
        } else {
            json!({"task": format!("soak pool task {round} of worker {}", self.index)})
        };
        if checked(stats, "create a task", self.http.post::<IgnoredAny>("/api/tasks", None, &body))
            .await
            .is_some()
        {
            bump(&counters.tasks_created);
            self.take_one(stats).await;
        }

        let mail = json!({"to": self.next, "subject": format!("round {round}"),
                          "body": format!("worker {} says hello, round {round}", self.index)});
        if checked(stats, "send mail", self.http.post::<IgnoredAny>("/api/mail", Some(&self.id), &mail))
            .await
            .is_some()
        {
            bump(&counters.mails_sent);
        }
        checked(stats, "list mail", self.http.get::<IgnoredAny>("/api/mail?limit=20", Some(&self.id))).await;
        checked(
            stats,
            "read mail",
            self.http.post::<IgnoredAny>("/api/mail/read", Some(&self.id), &json!({})),
        )
        .await;

        let message = json!({"content": format!("worker {} at round {round}", self.index)});
        let channel = format!("/api/channels/{GENERAL}/messages");
        if checked(
            stats,
            "post to the channel",
            self.http.post::<IgnoredAny>(&channel, Some(&self.id), &message),
        )
        .await
        .is_some()
        {
            bump(&counters.chat_messages);
        }
        let read = format!("{channel}?limit=20");
        checked(stats, "read the channel", self.http.get::<IgnoredAny>(&read, Some(&self.id))).await;
        checked(stats, "list tasks", self.http.get::<IgnoredAny>("/api/tasks?limit=20", None)).await;

        if round % 4 == 3 {
            // Each body differs: the hub ignores a signed body it has seen.
            let payload = json!({"sender": "soak", "worker": self.index, "round": round,
                                 "nonce": uuid::Uuid::new_v4().to_string()});
            let payload = Bytes::from(serde_json::to_vec(&payload).expect("JSON"));
            let signature = sign(&self.secret, &payload);
            let path = format!("/api/webhooks/{HOOK}");
            let headers = [("x-hub-signature-256", signature.as_str())];
            let fired = self.http.post_raw::<IgnoredAny>(&path, payload, &headers);
            if checked(stats, "fire the signed webhook", fired).await.is_some() {
                bump(&counters.webhooks);
                bump(&counters.tasks_created);
                self.take_one(stats).await;
            }
        }
    }

    /// Polls until a task comes (at once, else long-polls) and finishes it: one task out of
    /// the pool or its own for each one created, so nothing piles up.
    async fn take_one(&self, stats: &Stats) {
        let counters = &stats.counters;
        let mut answer =
            checked(stats, "poll", self.http.get::<PollAnswer>("/api/poll", Some(&self.id))).await;
        let mut long_polls = 0;
        while matches!(&answer, Some(PollAnswer { trigger: None })) && long_polls < LONG_POLLS_PER_TASK {
            long_polls += 1;
            bump(&counters.long_polls);
            answer = match self.http.get::<PollAnswer>(LONG_POLL, Some(&self.id)).await {
                Ok(answer) => {
                    stats.answered(None);
                    Some(answer)
                }
                Err(error) => {
                    stats.failed(format!("long-poll: {error:#}"));
                    None
                }
            };
        }
        let Some(answer) = answer else { return };
        let task_id = match answer.trigger {
            Some(TriggerAnswer { kind, task_id: Some(task_id) }) if kind == "task_assigned" => task_id,
            Some(TriggerAnswer { kind, task_id }) => {
                stats.failed(format!("expected a task_assigned trigger, got {kind} (task {task_id:?})"));
                return;
            }
            None => {
                stats.failed(format!(
                    "worker {} created a task and {long_polls} long-polls found none",
                    self.index
                ));
                return;
            }
        };
        if !stats.received.lock().unwrap().insert(task_id.clone()) {
            bump(&counters.handed_out_twice);
        }
        let path = format!("/api/tasks/{task_id}/finish");
        let body = json!({"status": "completed", "output": "soaked"});
        let finish = self.http.post::<FinishAnswer>(&path, Some(&self.id), &body);
        if let Some(finished) = checked(stats, "finish a task", finish).await {
            bump(&counters.tasks_finished);
            if finished.already_finished {
                bump(&counters.finished_twice);
            }
        }
    }
}

/// Runs one request, timing it; a failure is counted and kept, not returned.
async fn checked<T>(
    stats: &Stats,
    what: &'static str,
    request: impl Future<Output = anyhow::Result<T>>,
) -> Option<T> {
    let began = Instant::now();
    match request.await {
        Ok(answer) => {
            stats.answered(Some((what, began.elapsed())));
            Some(answer)
        }
        Err(error) => {
            stats.failed(format!("{what}: {error:#}"));
            None
        }
    }
}

/// GitHub's `X-Hub-Signature-256`, as the hub checks it.
fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac =
        <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[derive(Debug, Deserialize)]
struct PollAnswer {
    trigger: Option<TriggerAnswer>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TriggerAnswer {
    #[serde(rename = "type")]
    kind: String,
    task_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FinishAnswer {
    #[serde(default)]
    already_finished: bool,
}
