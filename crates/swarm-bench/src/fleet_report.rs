//! What `swarm-bench fleet` reports: Markdown for people, one JSON line for scripts.

use serde::Serialize;
use serde_json::json;

/// Every replica's memory at one moment, from `/proc/<pid>/status`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Readings {
    /// `(VmRSS, RssAnon)` in kB, one per replica.
    pub replicas: Vec<(u64, u64)>,
}

impl Readings {
    pub(crate) fn of(pids: &[u32]) -> anyhow::Result<Readings> {
        let mut replicas = Vec::new();
        for &pid in pids {
            let reading = super::soak::memory_kb(pid)
                .ok_or_else(|| anyhow::anyhow!("cannot read the memory of hub process {pid} from /proc"))?;
            replicas.push(reading);
        }
        Ok(Readings { replicas })
    }

    pub(crate) fn rss_kb(&self) -> u64 {
        self.replicas.iter().map(|reading| reading.0).sum()
    }

    pub(crate) fn anon_kb(&self) -> u64 {
        self.replicas.iter().map(|reading| reading.1).sum()
    }

    fn largest_rss_kb(&self) -> u64 {
        self.replicas.iter().map(|reading| reading.0).max().unwrap_or(0)
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct FleetReport {
    pub backend: String,
    pub replicas: usize,
    pub agents: u64,
    pub clients: usize,
    pub source_addresses: u64,
    pub parked: u64,
    /// How long tasks were created for.
    pub seconds: f64,
    pub rate: f64,
    pub tasks_created: u64,
    pub create_failures: u64,
    pub first_create_failure: Option<String>,
    /// Ticks with no agent waiting to create a task for.
    pub skipped_no_agent_waiting: u64,
    pub burst: u64,
    pub wake_p50_ms: Option<f64>,
    pub wake_p99_ms: Option<f64>,
    pub wake_max_ms: Option<f64>,
    pub burst_p50_ms: Option<f64>,
    pub burst_p99_ms: Option<f64>,
    /// Steady tasks created while the burst was being delivered (not in wake_p50/p99).
    pub beside_burst_tasks: u64,
    pub beside_burst_p99_ms: Option<f64>,
    /// From the burst's creation to its last delivery.
    pub burst_seconds: Option<f64>,
    pub duplicates: u64,
    pub lost: u64,
    /// Deliveries of tasks the bench did not create.
    pub strangers: u64,
    /// Tasks delivered to another agent than the one they were created for.
    pub misdelivered: u64,
    pub client_errors: u64,
    pub idle: Readings,
    pub parked_memory: Readings,
    pub end_memory: Readings,
    pub hub_cpu_ms_per_task: Option<f64>,
    pub database_cpu_ms_per_task: Option<f64>,
    /// Polls and pings the agents sent (each is a heartbeat to the hub).
    pub heartbeats_sent_per_second: f64,
    /// What the hubs' `/metrics` counted as heartbeat writes, when they count them.
    pub heartbeat_writes_per_second: Option<f64>,
}

/// The `percent` percentile (nearest rank) of `samples`, sorted in place.
pub(crate) fn percentile(samples: &mut [f64], percent: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_by(f64::total_cmp);
    let rank = ((percent / 100.0) * samples.len() as f64).ceil().max(1.0) as usize - 1;
    Some(samples[rank.min(samples.len() - 1)])
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

fn round(value: Option<f64>, places: i32) -> Option<f64> {
    let scale = 10f64.powi(places);
    value.map(|value| (value * scale).round() / scale)
}

impl FleetReport {
    /// Anonymous memory each parked poll added to the hubs: (parked − idle) / parked.
    pub(crate) fn anon_per_parked_kb(&self) -> Option<f64> {
        (self.parked > 0)
            .then(|| (self.parked_memory.anon_kb() as f64 - self.idle.anon_kb() as f64) / self.parked as f64)
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        json!({
            "backend": self.backend,
            "replicas": self.replicas,
            "agents": self.agents,
            "parked": self.parked,
            "clients": self.clients,
            "source_addresses": self.source_addresses,
            "seconds": round(Some(self.seconds), 1),
            "rate": round(Some(self.rate), 1),
            "tasks_created": self.tasks_created,
            "create_failures": self.create_failures,
            "first_create_failure": self.first_create_failure,
            "skipped_no_agent_waiting": self.skipped_no_agent_waiting,
            "burst": self.burst,
            "wake_p50_ms": round(self.wake_p50_ms, 2),
            "wake_p99_ms": round(self.wake_p99_ms, 2),
            "wake_max_ms": round(self.wake_max_ms, 2),
            "burst_p50_ms": round(self.burst_p50_ms, 2),
            "burst_p99_ms": round(self.burst_p99_ms, 2),
            "burst_seconds": round(self.burst_seconds, 2),
            "beside_burst_tasks": self.beside_burst_tasks,
            "beside_burst_p99_ms": round(self.beside_burst_p99_ms, 2),
            "duplicates": self.duplicates,
            "lost": self.lost,
            "strangers": self.strangers,
            "misdelivered": self.misdelivered,
            "client_errors": self.client_errors,
            "hub_rss_mb": round(Some(mb(self.parked_memory.rss_kb())), 1),
            "hub_rss_mb_largest_replica": round(Some(mb(self.parked_memory.largest_rss_kb())), 1),
            "hub_anon_mb": round(Some(mb(self.parked_memory.anon_kb())), 1),
            "hub_rss_mb_idle": round(Some(mb(self.idle.rss_kb())), 1),
            "hub_anon_mb_idle": round(Some(mb(self.idle.anon_kb())), 1),
            "hub_rss_mb_end": round(Some(mb(self.end_memory.rss_kb())), 1),
            "anon_kb_per_parked_agent": round(self.anon_per_parked_kb(), 2),
            "hub_cpu_ms_per_task": round(self.hub_cpu_ms_per_task, 3),
            "database_cpu_ms_per_task": round(self.database_cpu_ms_per_task, 3),
            "heartbeats_sent_per_second": round(Some(self.heartbeats_sent_per_second), 1),
            "heartbeat_writes_per_second": round(self.heartbeat_writes_per_second, 1),
        })
    }

    pub(crate) fn markdown(&self) -> String {
        let ms = |value: Option<f64>| value.map_or_else(|| "—".to_string(), |ms| format!("{ms:.2} ms"));
        let mut out = format!(
            "## fleet: {} agents on {} ({} replica(s)), {} client processes, {} source address(es)\n\n",
            self.agents, self.backend, self.replicas, self.clients, self.source_addresses
        );
        let mut row = |what: &str, value: String| out.push_str(&format!("| {what} | {value} |\n"));
        row("measure", "value".into());
        row("---", "---".into());
        row("agents parked", format!("{} of {}", self.parked, self.agents));
        row(
            "tasks created",
            format!(
                "{} in {:.1} s ({:.1}/s asked, burst of {}), {} failed",
                self.tasks_created, self.seconds, self.rate, self.burst, self.create_failures
            ),
        );
        row(
            "wake p50 / p99 / max",
            format!("{} / {} / {}", ms(self.wake_p50_ms), ms(self.wake_p99_ms), ms(self.wake_max_ms)),
        );
        row(
            "burst wake p50 / p99 (all delivered in)",
            format!(
                "{} / {} ({})",
                ms(self.burst_p50_ms),
                ms(self.burst_p99_ms),
                self.burst_seconds.map_or("—".into(), |seconds| format!("{seconds:.2} s"))
            ),
        );
        row(
            "steady tasks beside the burst: count, p99",
            format!("{}, {}", self.beside_burst_tasks, ms(self.beside_burst_p99_ms)),
        );
        row(
            "duplicates / lost / misdelivered",
            format!("{} / {} / {}", self.duplicates, self.lost, self.misdelivered),
        );
        row(
            "hub VmRSS idle → parked",
            format!("{:.1} → {:.1} MB", mb(self.idle.rss_kb()), mb(self.parked_memory.rss_kb())),
        );
        row(
            "hub anonymous idle → parked",
            format!("{:.1} → {:.1} MB", mb(self.idle.anon_kb()), mb(self.parked_memory.anon_kb())),
        );
        row(
            "anonymous memory per parked agent",
            self.anon_per_parked_kb().map_or("—".into(), |kb| format!("{kb:.2} kB")),
        );
        row("hub CPU per task", ms(self.hub_cpu_ms_per_task));
        row("database CPU per task", ms(self.database_cpu_ms_per_task));
        row("heartbeats sent", format!("{:.1}/s (polls and pings)", self.heartbeats_sent_per_second));
        row(
            "heartbeat writes (hub /metrics)",
            self.heartbeat_writes_per_second
                .map_or("not counted by this hub".into(), |rate| format!("{rate:.1}/s")),
        );
        row("client errors", self.client_errors.to_string());
        if let Some(failure) = &self.first_create_failure {
            row("first failed create", failure.clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut samples: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&mut samples, 50.0), Some(50.0));
        assert_eq!(percentile(&mut samples, 99.0), Some(99.0));
        assert_eq!(percentile(&mut samples, 100.0), Some(100.0));
        assert_eq!(percentile(&mut [], 50.0), None);
    }
}
