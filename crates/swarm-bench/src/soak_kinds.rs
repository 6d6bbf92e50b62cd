//! The soak's latencies by kind of request: when the p99 of a whole interval rises, this
//! says which request's cost grew (one whose work grows with the tables stands out as its
//! column climbs while the others stay put), and whether each kind's p99 held over the run.

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
            let at = |percent| percentile(&values, percent).unwrap_or_default();
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

/// Whether one kind's p99 held: the median of its intervals' p99 in the second half of the
/// run (after the warm-up) against the first half. Medians, so that one slow minute (another
/// program on the machine) does not decide, while a creep that grows with the tables does.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KindDrift {
    pub kind: String,
    pub first_half_ms: f64,
    pub second_half_ms: f64,
    pub growth_percent: f64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct P99Stability {
    /// How far (in percent) a kind's p99 may grow from the first half to the second.
    pub tolerance_percent: f64,
    /// Intervals after the warm-up in each half.
    pub intervals_per_half: usize,
    pub kinds: Vec<KindDrift>,
    /// Every kind within the tolerance; false when there are not two intervals to compare.
    pub stable: bool,
}

/// Each kind's drift over `intervals` (those after the warm-up, in order); with an odd count
/// the middle interval belongs to neither half.
pub(crate) fn stability(intervals: &[&[KindLatency]], tolerance_percent: f64) -> P99Stability {
    let half = intervals.len() / 2;
    let (first, second) = (&intervals[..half], &intervals[intervals.len() - half..]);
    let median_p99 = |half: &[&[KindLatency]], kind: &str| -> Option<f64> {
        let mut values: Vec<f64> = half
            .iter()
            .filter_map(|kinds| kinds.iter().find(|latency| latency.kind == kind))
            .map(|latency| latency.p99_ms)
            .collect();
        values.sort_by(f64::total_cmp);
        // The lower middle of an even count: in a half of two, one slow minute is not its median.
        values.get(values.len().saturating_sub(1) / 2).copied()
    };
    let mut names: Vec<&str> =
        intervals.iter().flat_map(|kinds| kinds.iter().map(|latency| latency.kind.as_str())).collect();
    names.sort_unstable();
    names.dedup();
    let kinds: Vec<KindDrift> = names
        .into_iter()
        .filter_map(|kind| {
            let (first_half_ms, second_half_ms) = (median_p99(first, kind)?, median_p99(second, kind)?);
            Some(KindDrift {
                kind: kind.to_string(),
                first_half_ms,
                second_half_ms,
                growth_percent: (second_half_ms / first_half_ms - 1.0) * 100.0,
            })
        })
        .collect();
    let stable =
        half > 0 && !kinds.is_empty() && kinds.iter().all(|drift| drift.growth_percent <= tolerance_percent);
    P99Stability { tolerance_percent, intervals_per_half: half, kinds, stable }
}

impl P99Stability {
    /// The kinds past the tolerance, in words.
    pub(crate) fn failures(&self) -> Vec<String> {
        if self.intervals_per_half == 0 {
            return vec!["too few intervals after the warm-up to tell whether p99 held".to_string()];
        }
        self.kinds
            .iter()
            .filter(|drift| drift.growth_percent > self.tolerance_percent)
            .map(|drift| {
                format!(
                    "the p99 of {} grew {:.0} % ({:.1} ms to {:.1} ms, medians of each half), past +{} %",
                    drift.kind,
                    drift.growth_percent,
                    drift.first_half_ms,
                    drift.second_half_ms,
                    self.tolerance_percent
                )
            })
            .collect()
    }

    pub(crate) fn markdown(&self) -> String {
        let kinds: Vec<String> = self
            .kinds
            .iter()
            .map(|drift| {
                format!(
                    "{} {:.1} → {:.1} ms ({:+.0} %)",
                    drift.kind, drift.first_half_ms, drift.second_half_ms, drift.growth_percent
                )
            })
            .collect();
        format!(
            "p99 by kind, median of the first {n} intervals after the warm-up → of the last {n}: {}; bound +{} %: {}\n",
            kinds.join(", "),
            self.tolerance_percent,
            if self.stable { "held" } else { "exceeded" },
            n = self.intervals_per_half,
        )
    }
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

/// Nearest rank of sorted values, in milliseconds.
pub(crate) fn percentile(sorted: &[Duration], percent: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((percent / 100.0) * sorted.len() as f64).ceil() as usize;
    let value = sorted[rank.clamp(1, sorted.len()) - 1];
    Some(value.as_secs_f64() * 1000.0)
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

    fn kind(kind: &str, p99_ms: f64) -> KindLatency {
        KindLatency { kind: kind.to_string(), requests: 100, p50_ms: 1.0, p99_ms, max_ms: p99_ms }
    }

    #[test]
    fn a_creeping_kind_fails_and_one_slow_minute_does_not() {
        // Five intervals after the warm-up: halves of two, the middle one in neither.
        let minutes: Vec<Vec<KindLatency>> = [
            (2.0, 3.0),
            (2.1, 4.0),
            (9.0, 5.0), // a slow minute for `list` only, in the middle
            (2.0, 6.0),
            (2.2, 7.0),
        ]
        .into_iter()
        .map(|(list, poll)| vec![kind("list", list), kind("poll", poll)])
        .collect();
        let intervals: Vec<&[KindLatency]> = minutes.iter().map(Vec::as_slice).collect();
        let verdict = stability(&intervals, 50.0);
        assert_eq!(verdict.intervals_per_half, 2);
        let list = &verdict.kinds[0];
        assert_eq!((list.kind.as_str(), list.first_half_ms, list.second_half_ms), ("list", 2.0, 2.0));
        let poll = &verdict.kinds[1];
        assert_eq!((poll.first_half_ms, poll.second_half_ms), (3.0, 6.0));
        assert!(!verdict.stable, "{verdict:?}");
        let failures = verdict.failures();
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].starts_with("the p99 of poll grew 100 %"), "{failures:?}");
        assert!(verdict.markdown().contains("poll 3.0 → 6.0 ms (+100 %)"), "{}", verdict.markdown());

        // One slow minute in a half moves its median less than a creep does.
        let mut spiky = minutes.clone();
        spiky[4] = vec![kind("list", 9.0), kind("poll", 3.0)];
        spiky[3] = vec![kind("list", 2.0), kind("poll", 3.1)];
        let intervals: Vec<&[KindLatency]> = spiky.iter().map(Vec::as_slice).collect();
        assert!(stability(&intervals, 50.0).stable, "{:?}", stability(&intervals, 50.0));

        assert!(!stability(&intervals[..1], 50.0).stable, "one interval: no verdict");
        assert_eq!(stability(&intervals[..1], 50.0).failures().len(), 1);
    }
}
