//! The measurements. Every simulated client has its own keep-alive connection, and a
//! throughput run counts only the operations that begin after its warm-up and end
//! before its deadline.
//!
//! Each measurement also checks what the hub promises (the right trigger, once), and
//! fails the bench when it is broken: a fast wrong answer is no result.

use std::{collections::HashSet, future::Future, time::Duration};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize, de::IgnoredAny};
use serde_json::json;
use tokio::time::Instant;

use super::{
    cpu::{CpuClock, CpuUse},
    hub::{Http, Target},
};

/// How long the latency sample waits after sending its poll before it creates the task,
/// so that the poll is parked in the hub (not still on its way) and the wake-up path is
/// what gets measured. Generous for loopback on a busy machine.
const PARK_TIME: Duration = Duration::from_millis(5);

/// What to measure and for how long.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Plan {
    pub latency_samples: usize,
    pub latency_warmup: usize,
    #[serde(serialize_with = "seconds")]
    pub warmup: Duration,
    #[serde(serialize_with = "seconds")]
    pub measure: Duration,
    pub concurrency: Vec<usize>,
    pub workers: usize,
    pub cycles: Vec<CycleKind>,
    pub health: bool,
}

/// Where the tasks of a claim cycle come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CycleKind {
    /// Each worker creates a task assigned to itself (`agentId`, sent as the operator),
    /// then polls for it.
    Assigned,
    /// Each worker creates a pool task (`unassigned`), then polls; the poll claims the best
    /// pool task for it, which may be another worker's.
    Pool,
}

impl CycleKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            CycleKind::Assigned => "assigned",
            CycleKind::Pool => "pool",
        }
    }
}

/// Nearest-rank percentiles of one set of samples, in milliseconds.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Percentiles {
    pub samples: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Percentiles {
    fn of(mut samples: Vec<Duration>) -> Percentiles {
        samples.sort_unstable();
        let at = |percent: usize| -> f64 {
            let Some(last) = samples.len().checked_sub(1) else {
                return 0.0;
            };
            let rank = (percent * samples.len()).div_ceil(100).max(1) - 1;
            samples[rank.min(last)].as_secs_f64() * 1_000.0
        };
        Percentiles {
            samples: samples.len(),
            p50_ms: at(50),
            p90_ms: at(90),
            p99_ms: at(99),
            max_ms: at(100),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TriggerLatency {
    /// From just before `POST /api/tasks` is sent to the parked poll's answer arriving.
    pub trigger: Percentiles,
    /// The same create's own round trip, for comparison.
    pub create: Percentiles,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Throughput {
    pub concurrency: usize,
    pub requests: usize,
    pub per_second: f64,
    /// Each request's round trip.
    pub latency: Percentiles,
    /// Over the measured window.
    pub cpu: Option<CpuUse>,
}

impl Throughput {
    /// `samples` taken over `measured` in all.
    fn of(concurrency: usize, measured: Duration, samples: Vec<Duration>, cpu: Option<CpuUse>) -> Throughput {
        let requests = samples.len();
        let per_second = requests as f64 / measured.as_secs_f64();
        Throughput { concurrency, requests, per_second, latency: Percentiles::of(samples), cpu }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClaimCycles {
    pub kind: CycleKind,
    pub workers: usize,
    pub cycles: usize,
    pub per_second: f64,
    /// One whole cycle: create, poll, finish.
    pub latency: Percentiles,
    /// Every trigger received, warm-up included: the exactly-once check covers them all.
    pub triggers: usize,
    /// Task ids received more than once (must be 0).
    pub duplicates: usize,
    /// Finishes answered `alreadyFinished: true` (must be 0).
    pub finished_twice: usize,
    /// Tasks created but never received (must be 0).
    pub never_received: usize,
    /// Polls that found nothing although a task was waiting for the worker, and were
    /// retried with `wait`: with `pool`, another worker took the task first; with
    /// `assigned`, they should not happen.
    pub empty_polls: usize,
    /// Over the measured window.
    pub cpu: Option<CpuUse>,
}

/// Trigger latency: one worker parks a long-poll, the operator creates a task assigned
/// to it, and the clock runs from just before the create is sent to the poll's answer.
pub(crate) async fn trigger_latency(target: &Target, plan: &Plan) -> anyhow::Result<TriggerLatency> {
    let worker = Agent::register(target.replica(0), &format!("bench-latency-{}", run_suffix())).await?;
    // With several replicas the task is created through another one than the poll waits
    // on: the wake-up crosses processes (LISTEN/NOTIFY on PostgreSQL).
    let creator = Http::new(target.replica(1));
    let mut trigger_samples = Vec::with_capacity(plan.latency_samples);
    let mut create_samples = Vec::with_capacity(plan.latency_samples);
    for sample in 0..plan.latency_warmup + plan.latency_samples {
        let poller = worker.clone();
        let parked = tokio::spawn(async move {
            let answer = poller.http.get::<PollAnswer>("/api/poll?wait=30", Some(&poller.id)).await;
            (answer, Instant::now())
        });
        tokio::time::sleep(PARK_TIME).await;
        let began = Instant::now();
        let task: TaskAnswer = creator
            .post(
                "/api/tasks",
                None,
                &json!({"task": format!("bench latency {sample}"), "agentId": worker.id}),
            )
            .await?;
        let created = Instant::now();
        let (answer, arrived) = parked.await.context("the parked poll's task panicked")?;
        let trigger = answer?.trigger.context("the parked poll answered no trigger within 30 s")?;
        trigger.expect_task(&task.id)?;
        if sample >= plan.latency_warmup {
            trigger_samples.push(arrived.saturating_duration_since(began));
            create_samples.push(created - began);
        }
        worker.finish(&task.id).await?;
    }
    Ok(TriggerLatency { trigger: Percentiles::of(trigger_samples), create: Percentiles::of(create_samples) })
}

/// `GET /api/poll` without `wait` by idle agents (one per client), which must answer
/// `{"trigger": null}`.
pub(crate) async fn null_polls(target: &Target, plan: &Plan, clients: usize) -> anyhow::Result<Throughput> {
    let agents = Agent::register_many(target, "idle", clients).await?;
    let window = Window::after(plan.warmup, plan.measure);
    let cpu = window.cpu_use(target);
    let samples = run_clients(agents, move |agent| async move {
        let mut samples = Vec::new();
        loop {
            let began = Instant::now();
            agent.null_poll().await?;
            if !window.record(began, &mut samples) {
                return Ok(samples);
            }
        }
    })
    .await?;
    Ok(Throughput::of(clients, window.length(), samples.concat(), cpu.await.ok().flatten()))
}

/// How long each turn of the null polls and of `GET /health` lasts when they alternate.
const TURN: Duration = Duration::from_millis(500);

/// Null polls (as `null_polls`) and `GET /health`, the floor they are compared with, by
/// the same clients on the same connections, taking turns every `TURN` through one
/// window. Each gets `plan.measure` in all. Measured one after the other, a machine that
/// slowed down for some seconds moved the share by ten points either way; taking turns,
/// both see the same seconds. A request that crosses from one turn into the next counts
/// for neither.
pub(crate) async fn null_polls_and_health(
    target: &Target,
    plan: &Plan,
    clients: usize,
) -> anyhow::Result<(Throughput, Throughput)> {
    let agents = Agent::register_many(target, "idle", clients).await?;
    let turns = Turns::after(plan.warmup, plan.measure);
    let cpu = turns.cpu_use(target);
    let samples = run_clients(agents, move |agent| async move {
        let mut samples = [Vec::new(), Vec::new()];
        loop {
            let began = Instant::now();
            let turn = turns.turn_at(began);
            if turn.is_poll() {
                agent.null_poll().await?;
            } else {
                let _: IgnoredAny = agent.http.get("/health", None).await?;
            }
            let ended = Instant::now();
            if ended >= turns.window.end {
                return Ok(samples);
            }
            if began >= turns.window.start && turns.turn_at(ended) == turn {
                samples[turn.kind()].push(ended - began);
            }
        }
    })
    .await?;
    let (mut polls, mut health) = (Vec::new(), Vec::new());
    for [poll_samples, health_samples] in samples {
        polls.extend(poll_samples);
        health.extend(health_samples);
    }
    let [poll_cpu, health_cpu] =
        cpu.await.ok().flatten().map_or([None, None], |[poll, health]| [Some(poll), Some(health)]);
    Ok((
        Throughput::of(clients, plan.measure, polls, poll_cpu),
        Throughput::of(clients, plan.measure, health, health_cpu),
    ))
}

/// A window cut into turns of `TURN`, null polls first, then `/health`, and so on; the
/// warm-up takes turns too, so that both are warm.
#[derive(Debug, Clone, Copy)]
struct Turns {
    window: Window,
    turn: Duration,
}

/// The index of a turn since the window began; even turns are the null polls'. Turns
/// before the window (the warm-up) count down from -1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Turn(i64);

impl Turn {
    fn is_poll(self) -> bool {
        self.0.rem_euclid(2) == 0
    }

    /// 0 for the null polls, 1 for `/health`.
    fn kind(self) -> usize {
        usize::from(!self.is_poll())
    }
}

impl Turns {
    /// Each kind gets `measure` of the window, in whole turns (at least one each).
    fn after(warmup: Duration, measure: Duration) -> Turns {
        let count = (measure.as_secs_f64() / TURN.as_secs_f64()).round().max(1.0);
        let turn = measure.div_f64(count);
        Turns { window: Window::after(warmup, measure * 2), turn }
    }

    fn turn_at(&self, at: Instant) -> Turn {
        let turn = self.turn.as_secs_f64();
        let index = if at >= self.window.start {
            ((at - self.window.start).as_secs_f64() / turn).floor()
        } else {
            -((self.window.start - at).as_secs_f64() / turn).ceil()
        };
        Turn(index as i64)
    }

    /// The CPUs' use during the null polls' turns and during `/health`'s.
    fn cpu_use(self, target: &Target) -> tokio::task::JoinHandle<Option<[CpuUse; 2]>> {
        let hub_pids = target.pids();
        tokio::spawn(async move {
            let mut totals: [Option<CpuUse>; 2] = [None, None];
            let mut begins = self.window.start;
            let mut index = 0;
            while begins < self.window.end {
                tokio::time::sleep_until(begins).await;
                let clock = CpuClock::start(hub_pids.clone())?;
                let ends = begins + self.turn;
                tokio::time::sleep_until(ends).await;
                let used = clock.stop()?;
                let total = &mut totals[Turn(index).kind()];
                *total = Some(match total.take() {
                    Some(sum) => sum.plus(&used),
                    None => used,
                });
                begins = ends;
                index += 1;
            }
            let [Some(polls), Some(health)] = totals else { return None };
            Some([polls, health])
        })
    }
}

/// Full claim cycles by `plan.workers` agents (maxTasks 1): create a task, poll (which
/// must answer `task_assigned`), finish it.
pub(crate) async fn claim_cycles(
    target: &Target,
    plan: &Plan,
    kind: CycleKind,
) -> anyhow::Result<ClaimCycles> {
    let agents = Agent::register_many(target, kind.name(), plan.workers).await?;
    let window = Window::after(plan.warmup, plan.measure);
    let cpu = window.cpu_use(target);
    let tallies = run_clients(agents, move |agent| claim_worker(agent, kind, window)).await?;

    let mut samples = Vec::new();
    let mut received = HashSet::new();
    let (mut triggers, mut created, mut finished_twice, mut empty_polls) = (0, 0, 0, 0);
    for tally in tallies {
        samples.extend(tally.samples);
        triggers += tally.received.len();
        received.extend(tally.received);
        created += tally.created;
        finished_twice += tally.finished_twice;
        empty_polls += tally.empty_polls;
    }
    let cycles = samples.len();
    Ok(ClaimCycles {
        kind,
        workers: plan.workers,
        cycles,
        per_second: cycles as f64 / window.length().as_secs_f64(),
        latency: Percentiles::of(samples),
        triggers,
        duplicates: triggers - received.len(),
        finished_twice,
        never_received: created.saturating_sub(received.len()),
        empty_polls,
        cpu: cpu.await.ok().flatten(),
    })
}

#[derive(Default)]
struct WorkerTally {
    samples: Vec<Duration>,
    created: usize,
    received: Vec<String>,
    finished_twice: usize,
    empty_polls: usize,
}

async fn claim_worker(agent: Agent, kind: CycleKind, window: Window) -> anyhow::Result<WorkerTally> {
    let mut tally = WorkerTally::default();
    loop {
        let began = Instant::now();
        let body = match kind {
            CycleKind::Assigned => json!({"task": "bench cycle", "agentId": agent.id}),
            CycleKind::Pool => json!({"task": "bench cycle"}),
        };
        let task: TaskAnswer = agent.http.post("/api/tasks", None, &body).await?;
        tally.created += 1;
        let mut answer: PollAnswer = agent.http.get("/api/poll", Some(&agent.id)).await?;
        if answer.trigger.is_none() {
            tally.empty_polls += 1;
            // A pool task is waiting as long as this worker's own is unclaimed, so a
            // long-poll gets one.
            answer = agent.http.get("/api/poll?wait=10", Some(&agent.id)).await?;
        }
        let trigger = answer.trigger.with_context(|| {
            format!("worker {} created task {} and two polls found nothing for it", agent.id, task.id)
        })?;
        let task_id = match kind {
            CycleKind::Assigned => trigger.expect_task(&task.id)?,
            CycleKind::Pool => trigger.expect_any_task()?,
        };
        let finished: FinishAnswer = agent
            .http
            .post(&format!("/api/tasks/{task_id}/finish"), Some(&agent.id), &json!({"status": "completed"}))
            .await?;
        if finished.already_finished {
            tally.finished_twice += 1;
        }
        tally.received.push(task_id);
        if !window.record(began, &mut tally.samples) {
            return Ok(tally);
        }
    }
}

/// A registered agent with its own connection.
#[derive(Debug, Clone)]
struct Agent {
    http: Http,
    id: String,
}

impl Agent {
    async fn register(target: &Target, name: &str) -> anyhow::Result<Agent> {
        let http = Http::new(target);
        let id = uuid::Uuid::new_v4().to_string();
        let _: IgnoredAny =
            http.post("/api/agents", Some(&id), &json!({"name": name, "maxTasks": 1})).await?;
        Ok(Agent { http, id })
    }

    /// Names carry a random suffix so that runs against one `--url` hub do not collide.
    /// Agent `index` talks to replica `index` (in turn, when there are fewer).
    async fn register_many(target: &Target, role: &str, count: usize) -> anyhow::Result<Vec<Agent>> {
        let suffix = run_suffix();
        let mut agents = Vec::with_capacity(count);
        for index in 0..count {
            let name = format!("bench-{role}-{index}-{suffix}");
            agents.push(Agent::register(target.replica(index), &name).await?);
        }
        Ok(agents)
    }

    /// A poll that must find nothing.
    async fn null_poll(&self) -> anyhow::Result<()> {
        let answer: PollAnswer = self.http.get("/api/poll", Some(&self.id)).await?;
        if let Some(trigger) = answer.trigger {
            bail!(
                "an idle agent's poll returned {}: the hub has work waiting (pool tasks?); \
                 bench a fresh hub",
                trigger.kind
            );
        }
        Ok(())
    }

    async fn finish(&self, task_id: &str) -> anyhow::Result<()> {
        let _: IgnoredAny = self
            .http
            .post(&format!("/api/tasks/{task_id}/finish"), Some(&self.id), &json!({"status": "completed"}))
            .await?;
        Ok(())
    }
}

fn run_suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

/// Run one client per item concurrently; fails with the first client that fails.
async fn run_clients<Item, F, Fut, R>(items: Vec<Item>, client: F) -> anyhow::Result<Vec<R>>
where
    F: Fn(Item) -> Fut,
    Fut: Future<Output = anyhow::Result<R>> + Send + 'static,
    R: Send + 'static,
{
    let handles: Vec<_> = items.into_iter().map(|item| tokio::spawn(client(item))).collect();
    let mut results = Vec::with_capacity(handles.len());
    for handle in handles {
        results.push(handle.await.context("a bench client panicked")??);
    }
    Ok(results)
}

/// The measured part of a throughput run: after the warm-up, until the deadline.
#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    end: Instant,
}

impl Window {
    fn after(warmup: Duration, measure: Duration) -> Window {
        let start = Instant::now() + warmup;
        Window { start, end: start + measure }
    }

    fn length(&self) -> Duration {
        self.end - self.start
    }

    /// Who used the CPUs during the window, measured in the background.
    fn cpu_use(self, target: &Target) -> tokio::task::JoinHandle<Option<CpuUse>> {
        let hub_pids = target.pids();
        tokio::spawn(async move {
            tokio::time::sleep_until(self.start).await;
            let clock = CpuClock::start(hub_pids)?;
            tokio::time::sleep_until(self.end).await;
            clock.stop()
        })
    }

    /// Keep the duration of an operation that began at `began` and just ended, if it lies
    /// wholly inside the window; false once the window is over (the client stops).
    fn record(&self, began: Instant, samples: &mut Vec<Duration>) -> bool {
        let now = Instant::now();
        if began >= self.start && now <= self.end {
            samples.push(now - began);
        }
        now < self.end
    }
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

impl TriggerAnswer {
    fn expect_any_task(self) -> anyhow::Result<String> {
        match (self.kind.as_str(), self.task_id) {
            ("task_assigned", Some(task_id)) => Ok(task_id),
            (kind, task_id) => bail!("expected a task_assigned trigger, got {kind} (task {task_id:?})"),
        }
    }

    fn expect_task(self, expected: &str) -> anyhow::Result<String> {
        let task_id = self.expect_any_task()?;
        if task_id != expected {
            bail!("expected task_assigned for task {expected}, got it for task {task_id}");
        }
        Ok(task_id)
    }
}

#[derive(Debug, Deserialize)]
struct TaskAnswer {
    id: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FinishAnswer {
    #[serde(default)]
    already_finished: bool,
}

fn seconds<S: serde::Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(duration.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_polls_and_health_take_equal_turns_warm_up_included() {
        let turns = Turns::after(Duration::from_secs(1), Duration::from_secs(3));
        assert_eq!(turns.turn, TURN);
        assert_eq!(turns.window.length(), Duration::from_secs(6), "each kind gets the measured 3 s");
        let middle_of = |index: u64| turns.window.start + TURN * (index as u32) + TURN / 2;
        let kinds: Vec<usize> = (0..12).map(|index| turns.turn_at(middle_of(index)).kind()).collect();
        assert_eq!(kinds, [0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1], "null polls first, then /health, in turn");
        assert!(turns.turn_at(turns.window.start).is_poll());
        assert_ne!(
            turns.turn_at(middle_of(0)),
            turns.turn_at(middle_of(1)),
            "a request across turns is dropped"
        );
        // The warm-up takes turns too, ending with `/health`.
        assert_eq!(turns.turn_at(turns.window.start - TURN / 2).kind(), 1);
        assert_eq!(turns.turn_at(turns.window.start - TURN - TURN / 2).kind(), 0);

        // A measured time that is not a whole number of turns is cut into equal ones.
        let uneven = Turns::after(Duration::ZERO, Duration::from_millis(1_200));
        assert_eq!(uneven.turn, Duration::from_millis(600));
        let short = Turns::after(Duration::ZERO, Duration::from_millis(200));
        assert_eq!(short.turn, Duration::from_millis(200), "at least one turn each");
    }
}
