//! Who used the CPUs during a run: the hub, the bench client, and everything else.
//!
//! The hub and the bench share the machine, and on a shared machine other work (a
//! build) can take a share too; the report says how much, so a number measured beside a
//! compiler is not mistaken for the hub's own. Linux only (`/proc`); elsewhere nothing is
//! reported.

use std::time::Instant;

use serde::Serialize;

/// `USER_HZ`, the unit of `/proc`'s CPU times: 100 on every architecture Linux runs on.
const TICKS_PER_SECOND: f64 = 100.0;

/// CPU seconds spent during a run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CpuUse {
    pub wall_seconds: f64,
    /// Only for a hub the bench started (it knows its process).
    pub hub_seconds: Option<f64>,
    pub bench_seconds: f64,
    /// Everything else: kernel threads and other processes, a PostgreSQL server among them.
    pub others_seconds: f64,
}

impl CpuUse {
    /// Two stretches of time taken together.
    pub(crate) fn plus(&self, other: &CpuUse) -> CpuUse {
        CpuUse {
            wall_seconds: self.wall_seconds + other.wall_seconds,
            hub_seconds: self.hub_seconds.zip(other.hub_seconds).map(|(one, two)| one + two),
            bench_seconds: self.bench_seconds + other.bench_seconds,
            others_seconds: self.others_seconds + other.others_seconds,
        }
    }
}

/// The counters at the start of a run.
pub(crate) struct CpuClock {
    at: Instant,
    busy: u64,
    bench: u64,
    hub: Option<u64>,
    hub_pids: Vec<u32>,
}

impl CpuClock {
    /// `hub_pids`: the hub's processes (several replicas count as one hub).
    pub(crate) fn start(hub_pids: Vec<u32>) -> Option<CpuClock> {
        Some(CpuClock {
            at: Instant::now(),
            busy: machine_busy_ticks()?,
            bench: process_ticks("self")?,
            hub: processes_ticks(&hub_pids),
            hub_pids,
        })
    }

    pub(crate) fn stop(&self) -> Option<CpuUse> {
        let seconds = |ticks: u64| ticks as f64 / TICKS_PER_SECOND;
        let busy = machine_busy_ticks()?.saturating_sub(self.busy);
        let bench = process_ticks("self")?.saturating_sub(self.bench);
        let hub = self.hub.and_then(|before| Some(processes_ticks(&self.hub_pids)?.saturating_sub(before)));
        Some(CpuUse {
            wall_seconds: self.at.elapsed().as_secs_f64(),
            hub_seconds: hub.map(seconds),
            bench_seconds: seconds(bench),
            others_seconds: seconds(busy.saturating_sub(bench).saturating_sub(hub.unwrap_or(0))),
        })
    }
}

/// All CPUs' non-idle time, from the first line of `/proc/stat`.
fn machine_busy_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .filter_map(|field| field.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let [user, nice, system, _idle, _iowait, irq, softirq, steal, ..] = fields[..] else {
        return None;
    };
    Some(user + nice + system + irq + softirq + steal)
}

/// The processes' user and system time together; `None` for none or when one is gone.
fn processes_ticks(pids: &[u32]) -> Option<u64> {
    if pids.is_empty() {
        return None;
    }
    pids.iter().map(|pid| process_ticks(&pid.to_string())).sum()
}

/// A process's user and system time (all its threads), from `/proc/<pid>/stat`.
pub(crate) fn process_ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name (field 2) may hold spaces and parentheses; the fields after it do not.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line: indices 11 and 12 after the name.
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    Some(user + system)
}
