//! The bench's results: the machine they were measured on, one `Run` per hub, and the
//! Markdown table (with the targets beside the numbers) or JSON.

use std::fmt::Write;

use serde::Serialize;

use super::cpu::CpuUse;
use super::fill::Fill;
use super::measure::{ClaimCycles, CycleKind, Percentiles, Plan, Throughput, TriggerLatency};

/// The targets of issue #3.
const TARGET_LATENCY_P99_MS: f64 = 5.0;
const TARGET_NULL_POLLS_PER_SECOND: f64 = 20_000.0;
const TARGET_CYCLES_PER_SECOND: f64 = 5_000.0;
/// Issue #22: null polls at the widest concurrency reach this share of `/health` (SQLite).
const TARGET_NULL_POLL_SHARE_OF_FLOOR: f64 = 0.90;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Report {
    pub machine: Machine,
    pub plan: Plan,
    pub runs: Vec<Run>,
}

/// The results of one hub.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Run {
    /// `sqlite` or `postgres`, as the hub's `/health` says.
    pub backend: String,
    pub version: String,
    pub hub: String,
    pub latency: TriggerLatency,
    pub null_polls: Vec<Throughput>,
    pub health: Vec<Throughput>,
    pub claim_cycles: Vec<ClaimCycles>,
    /// CPU time spent while this hub was measured, when the OS tells.
    pub cpu: Option<CpuUse>,
    /// The history `--fill` wrote before the measurements.
    pub fill: Option<Fill>,
}

/// What the numbers were measured on. The hub and the bench client share it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Machine {
    pub cpus: usize,
    pub cpu_model: Option<String>,
    pub memory_gib: Option<f64>,
    pub os: String,
    pub commit: Option<String>,
}

impl Machine {
    pub(crate) fn read() -> Machine {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|line| line.strip_prefix("model name")?.split_once(':').map(|(_, model)| model.trim()))
            .map(str::to_string);
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_gib = meminfo
            .lines()
            .find_map(|line| {
                line.strip_prefix("MemTotal:")?.trim().strip_suffix("kB")?.trim().parse::<f64>().ok()
            })
            .map(|kib| kib / (1024.0 * 1024.0));
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok();
        let os = match kernel {
            Some(kernel) => {
                format!("{} {} (kernel {})", std::env::consts::OS, std::env::consts::ARCH, kernel.trim())
            }
            None => format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        };
        Machine { cpus, cpu_model, memory_gib, os, commit: git_commit() }
    }
}

/// The commit of the working directory's repository, when it is one; `-dirty` when
/// tracked files were changed since.
fn git_commit() -> Option<String> {
    let git = |args: &[&str]| {
        let output =
            std::process::Command::new("git").args(args).stderr(std::process::Stdio::null()).output().ok()?;
        output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short", "HEAD"])?;
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|status| !status.is_empty());
    Some(if dirty { format!("{commit}-dirty") } else { commit })
}

impl Report {
    pub(crate) fn markdown(&self) -> String {
        let mut out = String::new();
        let machine = &self.machine;
        let _ = writeln!(out, "# swarm-bench\n");
        let mut size = format!("{} CPUs", machine.cpus);
        if let Some(model) = &machine.cpu_model {
            let _ = write!(size, " ({model})");
        }
        if let Some(memory) = machine.memory_gib {
            let _ = write!(size, ", {memory:.1} GiB RAM");
        }
        let _ = writeln!(
            out,
            "- Machine: {size}, {}; the hub and the bench client share these CPUs.",
            machine.os
        );
        if let Some(commit) = &machine.commit {
            let _ = writeln!(out, "- Commit: {commit}");
        }
        let plan = &self.plan;
        let _ = writeln!(
            out,
            "- Plan: trigger latency {} samples after {} warm-up; throughput runs {:.1} s each after {:.1} s warm-up.",
            plan.latency_samples,
            plan.latency_warmup,
            plan.measure.as_secs_f64(),
            plan.warmup.as_secs_f64()
        );
        for run in &self.runs {
            let _ = writeln!(out, "\n## {}: {} (swarm {})\n", run.backend, run.hub, run.version);
            if let Some(fill) = &run.fill {
                let mb = |bytes: u64| bytes as f64 / 1_000_000.0;
                let after =
                    fill.bytes_after.map_or(String::new(), |bytes| format!(", {:.1} MB after", mb(bytes)));
                let _ = writeln!(
                    out,
                    "Measured on a filled database: {} agents and {} finished tasks with {} events written \
                     in {:.0} s; the database is {:.1} MB after the fill ({:.0} bytes per task){after}.\n",
                    thousands(fill.agents as f64),
                    thousands(fill.tasks as f64),
                    thousands(fill.events as f64),
                    fill.seconds,
                    mb(fill.bytes_filled),
                    fill.bytes_filled as f64 / fill.tasks.max(1) as f64,
                );
            }
            if let Some(cpu) = &run.cpu {
                let hub = cpu.hub_seconds.map_or(String::new(), |seconds| format!("hub {seconds:.1} s, "));
                let _ = writeln!(
                    out,
                    "CPU time over these {:.0} s ({:.0} CPU-seconds available): {hub}bench client {:.1} s, \
                     everything else (kernel threads, a PostgreSQL server, other processes) {:.1} s.\n",
                    cpu.wall_seconds,
                    cpu.wall_seconds * machine.cpus as f64,
                    cpu.bench_seconds,
                    cpu.others_seconds
                );
            }
            out.push_str(&run.table());
        }
        out
    }
}

impl Run {
    fn table(&self) -> String {
        let sqlite = self.backend == "sqlite";
        let mut rows: Vec<[String; 4]> = Vec::new();
        let trigger = &self.latency.trigger;
        rows.push([
            format!(
                "trigger latency: task created → parked `GET /api/poll?wait=30` answers ({} samples)",
                trigger.samples
            ),
            spread(trigger),
            if sqlite { format!("p99 ≤ {TARGET_LATENCY_P99_MS} ms") } else { String::new() },
            verdict(sqlite, trigger.p99_ms <= TARGET_LATENCY_P99_MS),
        ]);
        rows.push([
            "`POST /api/tasks` round trip (same samples)".to_string(),
            spread(&self.latency.create),
            String::new(),
            String::new(),
        ]);
        let widest = self.null_polls.iter().map(|run| run.concurrency).max();
        for run in &self.null_polls {
            let targeted = Some(run.concurrency) == widest;
            rows.push([
                format!("null polls `GET /api/poll`, {} concurrent", run.concurrency),
                rate(run.per_second, "req/s", &run.latency, run.cpu.as_ref()),
                if targeted {
                    format!("≥ {} req/s", thousands(TARGET_NULL_POLLS_PER_SECOND))
                } else {
                    String::new()
                },
                verdict(targeted, run.per_second >= TARGET_NULL_POLLS_PER_SECOND),
            ]);
        }
        for run in &self.health {
            rows.push([
                format!("floor: `GET /health`, {} concurrent", run.concurrency),
                rate(run.per_second, "req/s", &run.latency, run.cpu.as_ref()),
                String::new(),
                String::new(),
            ]);
        }
        let widest_pair =
            |runs: &[Throughput]| runs.iter().find(|run| Some(run.concurrency) == widest).cloned();
        if let (Some(polls), Some(floor)) = (widest_pair(&self.null_polls), widest_pair(&self.health)) {
            let share = polls.per_second / floor.per_second.max(f64::EPSILON);
            rows.push([
                format!("null polls as a share of the floor, {} concurrent", polls.concurrency),
                format!("{:.0} %", share * 100.0),
                if sqlite {
                    format!("≥ {:.0} %", TARGET_NULL_POLL_SHARE_OF_FLOOR * 100.0)
                } else {
                    String::new()
                },
                verdict(sqlite, share >= TARGET_NULL_POLL_SHARE_OF_FLOOR),
            ]);
        }
        for run in &self.claim_cycles {
            let source = match run.kind {
                CycleKind::Assigned => "own assigned tasks",
                CycleKind::Pool => "pool tasks",
            };
            rows.push([
                format!("claim cycles (create → poll → finish), {}, {source}", workers(run.workers)),
                rate(run.per_second, "cycles/s", &run.latency, run.cpu.as_ref()),
                if sqlite {
                    format!("≥ {} cycles/s", thousands(TARGET_CYCLES_PER_SECOND))
                } else {
                    String::new()
                },
                verdict(sqlite, run.per_second >= TARGET_CYCLES_PER_SECOND),
            ]);
            let exact = run.duplicates == 0 && run.finished_twice == 0 && run.never_received == 0;
            rows.push([
                format!("exactly once ({source})"),
                format!(
                    "{} triggers: {} duplicates, {} finished twice, {} never received; {} empty polls retried",
                    run.triggers, run.duplicates, run.finished_twice, run.never_received, run.empty_polls
                ),
                "each trigger once".to_string(),
                verdict(true, exact),
            ]);
        }
        let mut out = String::from("| measurement | result | target | verdict |\n|---|---|---|---|\n");
        for [measurement, result, target, verdict] in rows {
            let _ = writeln!(out, "| {measurement} | {result} | {target} | {verdict} |");
        }
        out
    }
}

fn workers(count: usize) -> String {
    if count == 1 { "1 worker".to_string() } else { format!("{count} workers") }
}

fn spread(samples: &Percentiles) -> String {
    format!(
        "p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        samples.p50_ms, samples.p90_ms, samples.p99_ms, samples.max_ms
    )
}

fn rate(per_second: f64, unit: &str, latency: &Percentiles, cpu: Option<&CpuUse>) -> String {
    let mut text = format!(
        "{} {unit} (each p50 {:.2} ms, p99 {:.2} ms",
        thousands(per_second),
        latency.p50_ms,
        latency.p99_ms
    );
    if let Some(cpu) = cpu {
        let busy = |seconds: f64| seconds / cpu.wall_seconds.max(f64::EPSILON);
        let _ = write!(text, "; CPUs busy:");
        if let Some(hub) = cpu.hub_seconds {
            let _ = write!(text, " hub {:.2},", busy(hub));
        }
        let _ = write!(text, " bench {:.2}, else {:.2}", busy(cpu.bench_seconds), busy(cpu.others_seconds));
    }
    text.push(')');
    text
}

fn verdict(has_target: bool, met: bool) -> String {
    match (has_target, met) {
        (false, _) => String::new(),
        (true, true) => "met".to_string(),
        (true, false) => "**not met**".to_string(),
    }
}

/// `12345.6` → `12,346`.
pub(crate) fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::thousands;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0.4), "0");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1_000.0), "1,000");
        assert_eq!(thousands(1_234_567.8), "1,234,568");
    }
}
