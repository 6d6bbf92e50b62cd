//! The soak's latencies by kind of request: when the p99 of a whole interval rises, this
//! says which request's cost grew (one whose work grows with the tables stands out as its
//! column climbs while the others stay put).

use std::{collections::BTreeMap, time::Duration};

use serde::Serialize;

/// One kind of request over one interval.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KindLatency {
    pub kind: String,
    pub requests: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Each kind's percentiles, in the order the kinds are named.
pub(crate) fn by_kind(latencies: &[(&'static str, Duration)]) -> Vec<KindLatency> {
    let mut kinds: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    for (kind, latency) in latencies {
        kinds.entry(kind).or_default().push(*latency);
    }
    kinds
        .into_iter()
        .map(|(kind, mut values)| {
            values.sort_unstable();
            let at = |percent| super::soak::percentile(&values, percent).unwrap_or_default();
            KindLatency {
                kind: kind.to_string(),
                requests: values.len(),
                p50_ms: at(50.0),
                p99_ms: at(99.0),
                max_ms: at(100.0),
            }
        })
        .collect()
}

/// A Markdown table: a row per kind, its p99 in each interval (columns are the intervals'
/// ends, in seconds).
pub(crate) fn markdown(intervals: &[(f64, &[KindLatency])]) -> String {
    let mut kinds: Vec<&str> =
        intervals.iter().flat_map(|(_, kinds)| kinds.iter().map(|kind| kind.kind.as_str())).collect();
    kinds.sort_unstable();
    kinds.dedup();
    if kinds.is_empty() {
        return String::new();
    }
    let mut out = String::from("\np99 by kind of request, in ms, per interval (until):\n\n| request |");
    for (at, _) in intervals {
        out.push_str(&format!(" {at:.0} s |"));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(intervals.len()));
    out.push('\n');
    for kind in kinds {
        out.push_str(&format!("| {kind} |"));
        for (_, latencies) in intervals {
            match latencies.iter().find(|latency| latency.kind == kind) {
                Some(latency) => out.push_str(&format!(" {:.1} |", latency.p99_ms)),
                None => out.push_str(" — |"),
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_gets_its_own_percentiles() {
        let ms = Duration::from_millis;
        let mut latencies: Vec<(&'static str, Duration)> = (1..=100).map(|n| ("poll", ms(n))).collect();
        latencies.push(("list tasks", ms(40)));
        latencies.push(("list tasks", ms(60)));
        let kinds = by_kind(&latencies);
        assert_eq!(kinds.len(), 2);
        let (list, poll) = (&kinds[0], &kinds[1]);
        assert_eq!(
            (list.kind.as_str(), list.requests, list.p50_ms, list.max_ms),
            ("list tasks", 2, 40.0, 60.0)
        );
        assert_eq!((poll.kind.as_str(), poll.requests, poll.p50_ms, poll.p99_ms), ("poll", 100, 50.0, 99.0));

        let table = markdown(&[(60.0, &kinds), (120.0, &kinds[1..])]);
        assert!(table.contains("| request | 60 s | 120 s |"), "{table}");
        assert!(table.contains("| list tasks | 60.0 | — |"), "{table}");
        assert!(table.contains("| poll | 99.0 | 99.0 |"), "{table}");
    }
}
