//! `swarm-bench memory`: what a real `swarm serve` holds in memory idle, with many parked
//! long-polls, and after they end. It starts the hub on a scratch database, reads its
//! VmRSS from `/proc/<pid>/status` once it has settled, registers `--polls` agents and
//! parks one `GET /api/poll?wait=` for each, every one on its own connection as a runner
//! has, reads VmRSS again once the hub counts them all parked, lets them answer (nothing
//! comes) and close, then reads VmRSS every second until it is back near the idle
//! figure or `--return-within` has passed. It exits non-zero when a bound is missed.

use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::time::Instant;

use super::{
    hub::{Http, HubReport, SpawnedHub, Started, Target, measure_scratch_hub},
    soak::{memory_kb, parse_duration},
};

/// The long help of `swarm-bench memory`.
pub const MEMORY_ABOUT: &str = "Measure a real hub's memory: idle, with many parked long-polls, and after they end.\n\n\
    Starts the `swarm` binary as `swarm serve --port 0` on a scratch database (SQLite in a temporary \
    folder, or with --postgres a new database on that server, dropped after), waits --settle and \
    reads its VmRSS (idle); registers --polls agents and opens, for each, its own connection with \
    a parked `GET /api/poll?wait=<--wait>`; once the hub's /metrics counts them all parked it \
    reads VmRSS again; then lets the polls answer (nothing comes for them), closes the \
    connections, and reads VmRSS every second until it is within --return-tolerance percent of \
    the idle figure or --return-within has passed. Exits 1 when the idle hub is over \
    --idle-max-mb, the parked one over --parked-max-mb, or the memory did not come back. \
    Build with --release: a debug binary is larger and allocates more. Progress goes to \
    stderr, the report (Markdown, or --json) to stdout.";

#[derive(Debug, Args)]
pub struct MemoryArgs {
    /// Agents, each with its own connection and one parked long-poll.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1000))]
    polls: u32,
    /// How long each poll waits for a trigger (its `?wait=`): seconds, or with a unit.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    wait: Duration,
    /// How long the hub is left alone after it starts (and after the bench's one request,
    /// `GET /health`) before its idle memory is read. A hub gives back what serving needs
    /// once it has been quiet for 5 s; the default reads it after that.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    settle: Duration,
    /// How long after the polls end the memory may take to come back.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    return_within: Duration,
    /// The most the idle hub may hold (VmRSS, MB). Measured: about 27 MB, of which about
    /// 18 MB is the program's own code mapped from its file.
    #[arg(long, default_value_t = 32.0)]
    idle_max_mb: f64,
    /// The most the hub may hold with every poll parked (VmRSS, MB). Measured: about 45 MB
    /// with 1,000 polls.
    #[arg(long, default_value_t = 56.0)]
    parked_max_mb: f64,
    /// How far (in percent) over the idle figure the memory counts as come back.
    #[arg(long, default_value_t = 20.0)]
    return_tolerance: f64,
    /// Measure a hub on PostgreSQL: the server (postgres:// URL) to create the scratch
    /// database on, with a role that may CREATE DATABASE. Without it, SQLite.
    #[arg(long, visible_alias = "database-url", value_name = "URL")]
    postgres: Option<String>,
    /// Print the report as JSON instead of Markdown.
    #[arg(long)]
    json: bool,
}

/// One reading of the hub's memory.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Reading {
    /// Seconds since the polls ended (only for the readings after them).
    pub at_seconds: f64,
    pub rss_kb: u64,
    /// The anonymous part (heap, stacks); the rest is files mapped in, above all the
    /// hub's own program.
    pub rss_anon_kb: u64,
    /// The pages of the hub's own program file (its code and read-only data), resident
    /// from the file cache: the part of VmRSS only a smaller program shrinks.
    pub program_kb: u64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MemoryReport {
    pub backend: String,
    pub hub: String,
    pub version: String,
    pub polls: u32,
    pub wait_seconds: f64,
    pub idle: Reading,
    pub parked: Reading,
    /// What each parked poll added: (parked − idle) / polls.
    pub per_poll_kb: f64,
    /// The readings after the polls ended, one a second, until the memory came back or
    /// `returnWithinSeconds` passed.
    pub after: Vec<Reading>,
    /// The last of `after`.
    pub returned: Reading,
    /// Seconds after the polls ended at which the memory was back within the bound.
    pub returned_after_seconds: Option<f64>,
    pub return_within_seconds: f64,
    pub idle_max_kb: u64,
    pub parked_max_kb: u64,
    pub return_bound_kb: u64,
    pub passed: bool,
    /// Why it did not pass (empty when it did).
    pub failures: Vec<String>,
}

pub async fn run(args: MemoryArgs) -> anyhow::Result<()> {
    for (name, value) in [
        ("--idle-max-mb", args.idle_max_mb),
        ("--parked-max-mb", args.parked_max_mb),
        ("--return-tolerance", args.return_tolerance),
    ] {
        if !(value.is_finite() && value >= 0.0) {
            bail!("{name} must be a number of 0 or more");
        }
    }
    measure_scratch_hub("memory", args.postgres.as_deref(), args.json, async |hub, started| {
        measure(hub, started, &args).await
    })
    .await
}

async fn measure(hub: &mut SpawnedHub, started: Started, args: &MemoryArgs) -> anyhow::Result<MemoryReport> {
    let Started { target, pid, health } = started;
    let read = |at: Duration| -> anyhow::Result<Reading> {
        let (rss_kb, rss_anon_kb) = memory_kb(pid).context("cannot read the hub's VmRSS from /proc")?;
        let program_kb = program_kb(pid).context("cannot read the hub's mappings from /proc")?;
        Ok(Reading { at_seconds: at.as_secs_f64(), rss_kb, rss_anon_kb, program_kb })
    };
    let operator = Http::new(&target);
    tokio::time::sleep(args.settle).await;
    let idle = read(Duration::ZERO)?;
    eprintln!("memory [{}]: idle {}", health.database, mb(idle));

    let agents = register(&target, args.polls as usize).await?;
    let mut polls = park(&target, &agents, args.wait);
    let parked_in_time = wait_until_parked(&operator, args.polls as usize, args.wait).await?;
    if !parked_in_time {
        polls.abort_all();
        bail!(
            "the hub did not count {} parked polls before the first would end ({} s): give a longer --wait",
            args.polls,
            args.wait.as_secs()
        );
    }
    let parked = read(Duration::ZERO)?;
    eprintln!("memory [{}]: {} polls parked {}", health.database, args.polls, mb(parked));
    let answered = polls.join_all().await;
    let unanswered = answered.iter().filter(|answer| answer.is_err()).count();
    if let Some(Err(error)) = answered.into_iter().find(Result::is_err) {
        bail!("{unanswered} of {} parked polls failed; the first: {error:#}", args.polls);
    }

    // The polls answered and their connections are closed: the memory should come back.
    let ended = Instant::now();
    let return_bound_kb = (idle.rss_kb as f64 * (1.0 + args.return_tolerance / 100.0)).floor() as u64;
    let mut after = Vec::new();
    let mut returned_after_seconds = None;
    loop {
        let reading = read(ended.elapsed())?;
        after.push(reading);
        if reading.rss_kb <= return_bound_kb {
            returned_after_seconds = Some(reading.at_seconds);
            break;
        }
        if ended.elapsed() >= args.return_within {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let returned = *after.last().expect("one reading at least");
    eprintln!(
        "memory [{}]: {:.0} s after the polls ended {}",
        health.database,
        returned.at_seconds,
        mb(returned)
    );

    let kb = |megabytes: f64| (megabytes * 1024.0).floor() as u64;
    let (idle_max_kb, parked_max_kb) = (kb(args.idle_max_mb), kb(args.parked_max_mb));
    let mut failures = Vec::new();
    if idle.rss_kb > idle_max_kb {
        failures.push(format!("the idle hub holds {} kB, over {idle_max_kb} kB", idle.rss_kb));
    }
    if parked.rss_kb > parked_max_kb {
        failures.push(format!(
            "with {} parked polls the hub holds {} kB, over {parked_max_kb} kB",
            args.polls, parked.rss_kb
        ));
    }
    if returned_after_seconds.is_none() {
        failures.push(format!(
            "{:.0} s after the polls ended the hub still holds {} kB, over {return_bound_kb} kB \
             ({} % over idle)",
            returned.at_seconds, returned.rss_kb, args.return_tolerance
        ));
    }
    Ok(MemoryReport {
        backend: health.database,
        hub: hub.description().to_string(),
        version: health.version,
        polls: args.polls,
        wait_seconds: args.wait.as_secs_f64(),
        idle,
        parked,
        per_poll_kb: (parked.rss_kb as f64 - idle.rss_kb as f64) / f64::from(args.polls),
        after,
        returned,
        returned_after_seconds,
        return_within_seconds: args.return_within.as_secs_f64(),
        idle_max_kb,
        parked_max_kb,
        return_bound_kb,
        passed: failures.is_empty(),
        failures,
    })
}

/// Registers `count` workers, over a few connections at once; their ids.
async fn register(target: &Target, count: usize) -> anyhow::Result<Vec<String>> {
    const CLIENTS: usize = 8;
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let suffix = suffix[..8].to_string();
    let mut clients = tokio::task::JoinSet::new();
    for client in 0..CLIENTS.min(count) {
        let (http, suffix) = (Http::new(target), suffix.clone());
        clients.spawn(async move {
            let mut ids = Vec::new();
            for index in (client..count).step_by(CLIENTS) {
                let id = uuid::Uuid::new_v4().to_string();
                let body = json!({"name": format!("memory-{index}-{suffix}"), "maxTasks": 1});
                let _: serde::de::IgnoredAny = http
                    .post("/api/agents", Some(&id), &body)
                    .await
                    .with_context(|| format!("cannot register agent {index}"))?;
                ids.push(id);
            }
            anyhow::Ok(ids)
        });
    }
    let mut ids = Vec::with_capacity(count);
    while let Some(joined) = clients.join_next().await {
        ids.extend(joined.context("a registering client panicked")??);
    }
    Ok(ids)
}

#[derive(Debug, Deserialize)]
struct PollAnswer {
    trigger: Option<serde::de::IgnoredAny>,
}

/// One parked poll per agent, each on a connection of its own that closes when its
/// answer is in (the `Http` is dropped with the task).
fn park(target: &Target, agents: &[String], wait: Duration) -> tokio::task::JoinSet<anyhow::Result<()>> {
    let path = format!("/api/poll?wait={}", wait.as_secs());
    let mut polls = tokio::task::JoinSet::new();
    for agent in agents {
        let (http, agent, path) = (Http::new(target), agent.clone(), path.clone());
        polls.spawn(async move {
            let answer: PollAnswer = http.get(&path, Some(&agent)).await?;
            if answer.trigger.is_some() {
                bail!("a poll of agent {agent} got a trigger; nothing was meant for it");
            }
            Ok(())
        });
    }
    polls
}

/// Whether the hub's `/metrics` counted `count` parked polls before `wait` passed.
async fn wait_until_parked(operator: &Http, count: usize, wait: Duration) -> anyhow::Result<bool> {
    let began = Instant::now();
    // The first polls end `wait` after they were sent: leave time to read the memory.
    let deadline = began + wait.mul_f64(0.8);
    loop {
        let metrics = operator.get_text("/metrics").await.context("GET /metrics")?;
        if parked_polls(&metrics).is_some_and(|parked| parked >= count) {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The `swarm_parked_polls` gauge of a Prometheus text exposition.
fn parked_polls(metrics: &str) -> Option<usize> {
    metrics.lines().find_map(|line| line.strip_prefix("swarm_parked_polls ")?.trim().parse().ok())
}

/// The resident kB of the process's own executable file, from `/proc/<pid>/smaps`: its
/// mappings' pages less their anonymous ones (data the loader relocated or the program
/// wrote, counted in `RssAnon`).
fn program_kb(pid: u32) -> Option<u64> {
    let program = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let program = format!(" {}", program.to_str()?);
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    let mut in_program = false;
    let (mut resident, mut anonymous) = (0, 0);
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("Rss:") if in_program => resident += fields.next()?.parse::<u64>().ok()?,
            Some("Anonymous:") if in_program => anonymous += fields.next()?.parse::<u64>().ok()?,
            // A mapping's header, `start-end perms offset dev inode [path]`; the rest
            // are `Name: value` lines.
            Some(first) if !first.ends_with(':') => in_program = line.trim_end().ends_with(&program),
            _ => {}
        }
    }
    Some(resident.saturating_sub(anonymous))
}

fn mb(reading: Reading) -> String {
    format!(
        "{:.1} MB ({:.1} MB anonymous, {:.1} MB the program's own file)",
        reading.rss_kb as f64 / 1024.0,
        reading.rss_anon_kb as f64 / 1024.0,
        reading.program_kb as f64 / 1024.0
    )
}

impl HubReport for MemoryReport {
    fn failures(&self) -> &[String] {
        &self.failures
    }

    fn markdown(&self) -> String {
        let megabytes = |kb: u64| kb as f64 / 1024.0;
        let mut out = format!(
            "## memory: {}, {} (swarm {})\n\n{} agents, each with one `GET /api/poll?wait={:.0}` on its own connection.\n\n",
            self.backend, self.hub, self.version, self.polls, self.wait_seconds
        );
        out.push_str(
            "| hub | VmRSS | of it anonymous | of it the program's file | bound |\n|---|---|---|---|---|\n",
        );
        let row = |what: String, reading: &Reading, bound: String| {
            format!(
                "| {what} | {:.1} MB | {:.1} MB | {:.1} MB | {bound} |\n",
                megabytes(reading.rss_kb),
                megabytes(reading.rss_anon_kb),
                megabytes(reading.program_kb)
            )
        };
        out.push_str(&row("idle".into(), &self.idle, format!("≤ {:.1} MB", megabytes(self.idle_max_kb))));
        out.push_str(&row(
            format!("{} polls parked", self.polls),
            &self.parked,
            format!("≤ {:.1} MB", megabytes(self.parked_max_kb)),
        ));
        out.push_str(&row(
            format!("{:.0} s after they ended", self.returned.at_seconds),
            &self.returned,
            format!("≤ {:.1} MB within {:.0} s", megabytes(self.return_bound_kb), self.return_within_seconds),
        ));
        out.push_str(&format!("\neach parked poll: {:.1} kB\n", self.per_poll_kb));
        out.push_str(&format!(
            "verdict: {}\n",
            if self.passed { "passed".to_string() } else { format!("failed ({})", self.failures.join("; ")) }
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parked_polls_gauge_is_read_from_the_exposition() {
        let metrics = "# HELP swarm_parked_polls Polls waiting\n# TYPE swarm_parked_polls gauge\n\
                       swarm_parked_polls 1000\nswarm_parked_polls_other 3\n";
        assert_eq!(parked_polls(metrics), Some(1000));
        assert_eq!(parked_polls("swarm_polls_answered_total 4\n"), None);
    }
}
