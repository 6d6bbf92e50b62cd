//! What `swarm-bench fleet` reads beside the HTTP it measures: the hubs' `/metrics`,
//! and from `/proc` the CPU time of the hubs and of the local PostgreSQL server, and
//! this process's descriptor limit.

use anyhow::Context;

use super::hub::{Database, Http};

/// The sum of every replica's `swarm_parked_polls`.
pub(crate) async fn parked_polls(operators: &[Http]) -> anyhow::Result<u64> {
    let mut parked = 0;
    for operator in operators {
        let metrics = operator.get_text("/metrics").await.context("GET /metrics")?;
        parked += metric_sum(&metrics, |name| name == "swarm_parked_polls").unwrap_or(0.0) as u64;
    }
    Ok(parked)
}

/// Heartbeat writes the replicas counted, if their `/metrics` has such a counter.
pub(crate) async fn heartbeat_writes(operators: &[Http]) -> Option<f64> {
    let mut total = None;
    for operator in operators {
        let metrics = operator.get_text("/metrics").await.ok()?;
        let writes = metric_sum(&metrics, |name| name.contains("heartbeat") && name.contains("write"));
        if let Some(writes) = writes {
            *total.get_or_insert(0.0) += writes;
        }
    }
    total
}

/// The sum of the samples whose metric name `wanted` accepts (labels ignored).
fn metric_sum(metrics: &str, wanted: impl Fn(&str) -> bool) -> Option<f64> {
    let mut sum = None;
    for line in metrics.lines().filter(|line| !line.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let name = series.split('{').next().unwrap_or(series);
        if wanted(name)
            && let Ok(value) = value.parse::<f64>()
        {
            *sum.get_or_insert(0.0) += value;
        }
    }
    sum
}

pub(crate) fn hub_ticks(pids: &[u32]) -> Option<u64> {
    pids.iter().map(|pid| super::cpu::process_ticks(&pid.to_string())).sum()
}

/// The CPU ticks of the local PostgreSQL processes serving the scratch database (its
/// backends, named after it) and of the server's writers (WAL, checkpoints).
pub(crate) fn database_ticks(database: &Database) -> Option<u64> {
    let Database::Postgres { url } = database else { return None };
    let name = reqwest::Url::parse(url).ok()?.path().trim_start_matches('/').to_string();
    let mut total = 0;
    let mut found = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let pid = entry.file_name();
        let Some(pid) = pid.to_str().filter(|pid| pid.bytes().all(|b| b.is_ascii_digit())) else { continue };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline);
        let ours = cmdline.starts_with("postgres: ")
            && (cmdline.contains(&format!(" {name} "))
                || ["walwriter", "checkpointer", "background writer"]
                    .iter()
                    .any(|writer| cmdline.contains(writer)));
        if ours && let Some(ticks) = super::cpu::process_ticks(pid) {
            total += ticks;
            found = true;
        }
    }
    found.then_some(total)
}

/// `ulimit -n` of this process (its children and the hubs inherit it).
pub(crate) fn descriptor_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|line| line.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_sums_add_labelled_series() {
        let metrics = "# TYPE swarm_parked_polls gauge\nswarm_parked_polls 12\n\
                       swarm_heartbeat_writes_total{store=\"a\"} 3\nswarm_heartbeat_writes_total{store=\"b\"} 4\n";
        assert_eq!(metric_sum(metrics, |name| name == "swarm_parked_polls"), Some(12.0));
        assert_eq!(metric_sum(metrics, |name| name.contains("heartbeat")), Some(7.0));
        assert_eq!(metric_sum(metrics, |name| name == "nothing"), None);
    }
}
