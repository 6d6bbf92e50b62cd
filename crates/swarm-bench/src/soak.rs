//! `swarm-bench soak`: a real `swarm serve` on a scratch database under a mixed load for
//! minutes (see `soak_load.rs`), its memory (VmRSS from `/proc/<pid>/status`) and the
//! latency of its answers sampled at every interval. It passes when no request failed,
//! no task was handed out or finished twice, the hub's RSS stayed within a bound over its
//! size at the end of the warm-up, and each kind of request's p99 held from the first half
//! of the run to the second; otherwise it exits non-zero.

use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use serde::Serialize;
use tokio::time::Instant;

use super::{
    hub::{HubReport, SpawnedHub, Started, measure_scratch_hub},
    soak_kinds::{self, KindLatency, percentile},
    soak_load::{Interval, Load, Shape, Totals},
};

/// The long help of `swarm-bench soak`.
pub const SOAK_ABOUT: &str = "Soak a real hub under a mixed load and watch its memory, errors and latency.\n\n\
    Starts the `swarm` binary as `swarm serve --port 0` on a scratch database (SQLite in a temporary \
    folder, or with --postgres a new database on that server, dropped after) and runs, for \
    --duration: worker agents that create tasks (their own and pool ones), take them with polls \
    and long-polls and finish them, send and read mail, post to and read a channel, list tasks \
    and fire a signed webhook every fourth round; and a lead that long-polls for finished tasks. \
    Every --sample-every it prints the interval's requests, errors, p50 and p99 latency (answers \
    that do not wait; long-polls left out) and the hub's RSS. Passes when nothing failed, no task \
    was handed out or finished twice, the hub's RSS never grew past --rss-tolerance percent \
    over its size at the end of --warmup, and no kind of request's p99 grew more than \
    --p99-tolerance percent (the median of its per-interval p99 over the second half of the \
    intervals after the warm-up, against the first half); exits 1 otherwise. Progress \
    goes to stderr, the report (Markdown, or --json) to stdout.";

#[derive(Debug, Args)]
pub struct SoakArgs {
    /// How long the load runs: seconds, or with a unit (90s, 10m, 1h).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    duration: Duration,
    /// How often the hub is sampled (one row of the report each): seconds, or with a unit.
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    sample_every: Duration,
    /// Worker agents, each a client with its own connection going through the mix.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=500))]
    workers: u32,
    /// Each worker's pause between rounds, in milliseconds: a steady mixed load rather than
    /// the most the machine can do.
    #[arg(long, default_value_t = 50)]
    pause_ms: u64,
    /// How far (in percent) the hub's RSS may grow over its size at the end of the warm-up.
    #[arg(long, default_value_t = 10.0)]
    rss_tolerance: f64,
    /// How far (in percent) a kind of request's p99 may grow from the first half of the run
    /// (after the warm-up) to the second, each half's median of its per-interval p99.
    #[arg(long, default_value_t = 50.0)]
    p99_tolerance: f64,
    /// How long the hub may take to reach its working size (caches filling, code paged in):
    /// the bound on RSS is taken from the last sample within it (or the first sample).
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    warmup: Duration,
    /// Soak a hub on PostgreSQL: the server (postgres:// URL) to create the scratch database
    /// on, with a role that may CREATE DATABASE. Without it, SQLite.
    #[arg(long, visible_alias = "database-url", value_name = "URL")]
    postgres: Option<String>,
    /// Print the report as JSON instead of Markdown.
    #[arg(long)]
    json: bool,
}

/// One sampling interval.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Sample {
    /// Seconds since the load started, at the sample.
    pub at_seconds: f64,
    pub requests: u64,
    pub errors: u64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub rss_kb: u64,
    /// The anonymous part of it (heap, stacks): what a leak grows. The rest is files mapped
    /// in, above all the pages of the hub's own program as more of its code runs.
    pub rss_anon_kb: u64,
    /// The same latencies by kind of request.
    pub by_kind: Vec<KindLatency>,
}

/// The hub's resident memory over the run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Rss {
    /// Before the load started.
    pub start_kb: u64,
    /// At the first sample.
    pub first_kb: u64,
    /// At the end of the warm-up: the bound is taken from here.
    pub after_warmup_kb: u64,
    pub warmup_seconds: f64,
    pub last_kb: u64,
    pub max_kb: u64,
    pub tolerance_percent: f64,
    pub bound_kb: u64,
    pub within_bound: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SoakReport {
    pub backend: String,
    pub hub: String,
    pub version: String,
    pub duration_seconds: f64,
    pub sample_seconds: f64,
    pub workers: usize,
    pub samples: Vec<Sample>,
    pub totals: Totals,
    pub rss: Rss,
    pub p99: soak_kinds::P99Stability,
    /// The first errors, word for word.
    pub errors: Vec<String>,
    pub passed: bool,
    /// Why it did not pass (empty when it did).
    pub failures: Vec<String>,
}

pub async fn run(args: SoakArgs) -> anyhow::Result<()> {
    if args.sample_every < Duration::from_secs(1) || args.sample_every > args.duration {
        bail!("--sample-every must be at least 1s and at most --duration");
    }
    if args.warmup + args.sample_every > args.duration {
        bail!("--warmup leaves no sample after it: make --duration longer than --warmup plus --sample-every");
    }
    if !(args.rss_tolerance.is_finite() && args.rss_tolerance >= 0.0) {
        bail!("--rss-tolerance must be a percentage of 0 or more");
    }
    if !(args.p99_tolerance.is_finite() && args.p99_tolerance >= 0.0) {
        bail!("--p99-tolerance must be a percentage of 0 or more");
    }
    measure_scratch_hub("soak", args.postgres.as_deref(), args.json, async |hub, started| {
        soak(hub, started, &args).await
    })
    .await
}

async fn soak(hub: &mut SpawnedHub, started: Started, args: &SoakArgs) -> anyhow::Result<SoakReport> {
    let Started { target, pid, health } = started;
    let (start_kb, _) = memory_kb(pid).context("cannot read the hub's VmRSS from /proc")?;
    let shape = Shape { workers: args.workers as usize, pause: Duration::from_millis(args.pause_ms) };
    let load = Load::start(&target, shape).await?;
    let started = Instant::now();
    let intervals = args.duration.as_secs_f64() / args.sample_every.as_secs_f64();
    let intervals = intervals.ceil() as u32;
    let mut samples = Vec::new();
    let mut failures = Vec::new();
    for index in 1..=intervals {
        let at = (args.sample_every * index).min(args.duration);
        tokio::time::sleep_until(started + at).await;
        let Some((kb, anon_kb)) = memory_kb(pid).filter(|_| hub.is_running()) else {
            failures.push(format!("the hub's process ended within {:.0} s", started.elapsed().as_secs_f64()));
            break;
        };
        let sample = sample(at, load.stats.take_interval(), (kb, anon_kb));
        eprintln!(
            "soak [{}] {:>5.0} s / {:.0} s: {} requests, {} errors, p50 {}, p99 {}, hub RSS {:.1} MB ({:.1} MB anonymous)",
            health.database,
            sample.at_seconds,
            args.duration.as_secs_f64(),
            sample.requests,
            sample.errors,
            milliseconds(sample.p50_ms),
            milliseconds(sample.p99_ms),
            kb as f64 / 1024.0,
            anon_kb as f64 / 1024.0
        );
        samples.push(sample);
    }
    let stats = std::sync::Arc::clone(&load.stats);
    load.stop().await;
    let totals = stats.totals();
    let rss = rss_summary(start_kb, &samples, args.warmup, args.rss_tolerance);
    let after_warmup: Vec<&[KindLatency]> = samples
        .iter()
        .skip(warm_index(&samples, args.warmup) + 1)
        .map(|sample| sample.by_kind.as_slice())
        .collect();
    let p99 = soak_kinds::stability(&after_warmup, args.p99_tolerance);
    if totals.errors > 0 {
        failures.push(format!("{} request(s) failed", totals.errors));
    }
    if totals.handed_out_twice > 0 || totals.finished_twice > 0 {
        failures.push(format!(
            "{} task(s) handed out twice, {} finished twice",
            totals.handed_out_twice, totals.finished_twice
        ));
    }
    if !rss.within_bound {
        failures.push(format!(
            "the hub's RSS grew to {} kB, past {} kB ({} % over {} kB at the end of the warm-up)",
            rss.max_kb, rss.bound_kb, args.rss_tolerance, rss.after_warmup_kb
        ));
    }
    failures.extend(p99.failures());
    Ok(SoakReport {
        backend: health.database,
        hub: hub.description().to_string(),
        version: health.version,
        duration_seconds: args.duration.as_secs_f64(),
        sample_seconds: args.sample_every.as_secs_f64(),
        workers: args.workers as usize,
        samples,
        totals,
        rss,
        p99,
        errors: stats.kept_errors(),
        passed: failures.is_empty(),
        failures,
    })
}

fn sample(at: Duration, interval: Interval, (rss_kb, rss_anon_kb): (u64, u64)) -> Sample {
    let by_kind = soak_kinds::by_kind(&interval.latencies);
    let mut latencies: Vec<Duration> = interval.latencies.iter().map(|(_, latency)| *latency).collect();
    latencies.sort_unstable();
    Sample {
        at_seconds: at.as_secs_f64(),
        requests: interval.requests,
        errors: interval.errors,
        p50_ms: percentile(&latencies, 50.0),
        p99_ms: percentile(&latencies, 99.0),
        rss_kb,
        rss_anon_kb,
        by_kind,
    }
}

/// The last sample within the warm-up (or the first sample): the run is judged after it.
fn warm_index(samples: &[Sample], warmup: Duration) -> usize {
    samples.iter().rposition(|sample| sample.at_seconds <= warmup.as_secs_f64()).unwrap_or(0)
}

fn rss_summary(start_kb: u64, samples: &[Sample], warmup: Duration, tolerance: f64) -> Rss {
    let first_kb = samples.first().map_or(start_kb, |sample| sample.rss_kb);
    let last_kb = samples.last().map_or(start_kb, |sample| sample.rss_kb);
    let warm = warm_index(samples, warmup);
    let after_warmup_kb = samples.get(warm).map_or(start_kb, |sample| sample.rss_kb);
    let max_kb = samples.iter().skip(warm).map(|sample| sample.rss_kb).max().unwrap_or(start_kb);
    let bound_kb = (after_warmup_kb as f64 * (1.0 + tolerance / 100.0)).floor() as u64;
    Rss {
        start_kb,
        first_kb,
        after_warmup_kb,
        warmup_seconds: warmup.as_secs_f64(),
        last_kb,
        max_kb,
        tolerance_percent: tolerance,
        bound_kb,
        within_bound: samples.len() > warm + 1 && max_kb <= bound_kb,
    }
}

/// `VmRSS` and `RssAnon` of `/proc/<pid>/status`, in kB.
pub(crate) fn memory_kb(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|line| line.starts_with(name))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    Some((field("VmRSS:")?, field("RssAnon:")?))
}

fn milliseconds(value: Option<f64>) -> String {
    value.map_or_else(|| "—".to_string(), |ms| format!("{ms:.1} ms"))
}

impl HubReport for SoakReport {
    fn failures(&self) -> &[String] {
        &self.failures
    }

    fn markdown(&self) -> String {
        let mut out = format!(
            "## soak: {}, {} (swarm {})\n\n{:.0} s of mixed load, {} workers and a lead, sampled every {:.0} s.\n\n",
            self.backend, self.hub, self.version, self.duration_seconds, self.workers, self.sample_seconds
        );
        out.push_str(
            "| until | requests | errors | p50 | p99 | hub RSS | of it anonymous |\n|---|---|---|---|---|---|---|\n",
        );
        for (index, sample) in self.samples.iter().enumerate() {
            let note =
                if sample.at_seconds <= self.rss.warmup_seconds || index == 0 { " (warm-up)" } else { "" };
            out.push_str(&format!(
                "| {:.0} s{note} | {} | {} | {} | {} | {:.1} MB | {:.1} MB |\n",
                sample.at_seconds,
                sample.requests,
                sample.errors,
                milliseconds(sample.p50_ms),
                milliseconds(sample.p99_ms),
                sample.rss_kb as f64 / 1024.0,
                sample.rss_anon_kb as f64 / 1024.0
            ));
        }
        let intervals: Vec<(f64, &[KindLatency])> =
            self.samples.iter().map(|sample| (sample.at_seconds, sample.by_kind.as_slice())).collect();
        out.push_str(&soak_kinds::markdown(&intervals));
        let t = &self.totals;
        out.push_str(&format!(
            "\nrequests: {} ({} tasks created, {} finished, {} mails, {} chat messages, {} signed webhooks, \
             {} workers' long-polls, {} lead long-polls bringing {} triggers); errors: {}; handed out twice: {}; \
             finished twice: {}\n",
            t.requests,
            t.tasks_created,
            t.tasks_finished,
            t.mails_sent,
            t.chat_messages,
            t.webhooks,
            t.long_polls,
            t.lead_polls,
            t.lead_triggers,
            t.errors,
            t.handed_out_twice,
            t.finished_twice
        ));
        let r = &self.rss;
        let mb = |kb: u64| kb as f64 / 1024.0;
        out.push_str(&format!(
            "hub RSS: {:.1} MB before the load, {:.1} MB at the first sample, {:.1} MB at the end of the warm-up \
             ({:.0} s), {:.1} MB at the end, {:.1} MB at most after the warm-up; bound {:.1} MB (+{} %): {}\n",
            mb(r.start_kb),
            mb(r.first_kb),
            mb(r.after_warmup_kb),
            r.warmup_seconds,
            mb(r.last_kb),
            mb(r.max_kb),
            mb(r.bound_kb),
            r.tolerance_percent,
            if r.within_bound { "within" } else { "exceeded" }
        ));
        out.push_str(&self.p99.markdown());
        for error in &self.errors {
            out.push_str(&format!("error: {error}\n"));
        }
        out.push_str(&format!(
            "verdict: {}\n",
            if self.passed { "passed".to_string() } else { format!("failed ({})", self.failures.join("; ")) }
        ));
        out
    }
}

/// `600`, `90s`, `10m`, `1h`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| c.is_ascii_alphabetic()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let number: f64 =
        number.trim().parse().map_err(|_| format!("{text:?} is not a duration (600, 90s, 10m, 1h)"))?;
    let seconds = match unit {
        "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => return Err(format!("{text:?}: the unit is s, m or h")),
    };
    if !seconds.is_finite() || !(1.0..=86_400.0).contains(&seconds) {
        return Err(format!("{text} must be between 1 s and 24 h"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_unit_or_mean_seconds() {
        assert_eq!(parse_duration("600"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&values, 50.0), Some(50.0));
        assert_eq!(percentile(&values, 99.0), Some(99.0));
        assert_eq!(percentile(&values[..1], 99.0), Some(1.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn rss_is_bounded_by_its_size_at_the_end_of_the_warm_up() {
        let at = |seconds: f64, kb: u64| Sample {
            at_seconds: seconds,
            requests: 0,
            errors: 0,
            p50_ms: None,
            p99_ms: None,
            rss_kb: kb,
            rss_anon_kb: kb / 2,
            by_kind: Vec::new(),
        };
        let minute = Duration::from_secs(60);
        let flat =
            rss_summary(5_000, &[at(60.0, 10_000), at(120.0, 10_900), at(180.0, 10_500)], minute, 10.0);
        assert!(flat.within_bound, "{flat:?}");
        assert_eq!(
            (flat.first_kb, flat.after_warmup_kb, flat.last_kb, flat.max_kb, flat.bound_kb),
            (10_000, 10_000, 10_500, 10_900, 11_000)
        );
        let grew = [at(60.0, 10_000), at(120.0, 12_000), at(180.0, 12_500)];
        assert!(!rss_summary(5_000, &grew, minute, 10.0).within_bound);
        // The same run with a two-minute warm-up: its growth was the warm-up's.
        let later = rss_summary(5_000, &grew, 2 * minute, 10.0);
        assert!(later.within_bound, "{later:?}");
        assert_eq!((later.after_warmup_kb, later.max_kb), (12_000, 12_500));
        assert!(!rss_summary(5_000, &grew[..1], minute, 10.0).within_bound, "nothing after the warm-up");
        assert!(!rss_summary(5_000, &[], minute, 10.0).within_bound, "no sample, no verdict");
    }
}
