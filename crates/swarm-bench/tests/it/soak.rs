//! `swarm-bench soak` for half a minute, as CI can afford: the real binary starts its own
//! hub, loads it with tasks, polls, mail, chat and signed webhooks, and reports per
//! interval. Asserts that nothing failed and the report's shape, never a timing; the
//! ten-minute figures are in BENCHMARKS.md ("Faults survived").

use serde_json::Value;

use crate::support::{postgres_url, swarm_bench};

fn soak(extra: &[&str]) -> (Value, String) {
    let output = swarm_bench(
        &[
            // A 30-second run has hardly warmed up, so its memory says nothing yet, and one
            // 10-second interval against another on a shared CI machine says nothing of the
            // p99: the bounds on RSS and p99 are the ten-minute run's business, not CI's.
            ["soak", "--duration", "30s", "--sample-every", "10s", "--workers", "3"].as_slice(),
            &["--warmup", "10s", "--rss-tolerance", "400", "--p99-tolerance", "100000", "--json"],
            extra,
        ]
        .concat(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!("--json prints JSON ({err}): {}\n{stderr}", String::from_utf8_lossy(&output.stdout))
    });
    assert!(output.status.success(), "the soak passes: {report:#}\n{stderr}");
    (report, stderr)
}

fn check(report: &Value, stderr: &str, backend: &str) {
    assert_eq!(report["backend"], backend);
    assert_eq!(report["passed"], true, "{report:#}");
    assert_eq!(report["failures"], serde_json::json!([]), "{report:#}");
    assert_eq!(report["errors"], serde_json::json!([]), "{report:#}");
    let samples = report["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 3, "one row per 10 s: {report:#}");
    for sample in samples {
        assert_eq!(sample["errors"], 0, "{sample}");
        assert!(sample["requests"].as_u64().is_some_and(|n| n > 0), "{sample}");
        assert!(sample["p50Ms"].is_number() && sample["p99Ms"].is_number(), "{sample}");
        assert!(sample["rssKb"].as_u64().is_some_and(|kb| kb > 0), "{sample}");
    }
    let totals = &report["totals"];
    assert_eq!(totals["errors"], 0, "{totals}");
    assert_eq!(totals["handedOutTwice"], 0, "{totals}");
    assert_eq!(totals["finishedTwice"], 0, "{totals}");
    for kind in ["tasksCreated", "tasksFinished", "mailsSent", "chatMessages", "webhooks", "leadTriggers"] {
        assert!(totals[kind].as_u64().is_some_and(|n| n > 0), "some {kind}: {totals}");
    }
    let rss = &report["rss"];
    assert_eq!(rss["firstKb"], samples[0]["rssKb"], "{rss}");
    assert_eq!(rss["lastKb"], samples[2]["rssKb"], "{rss}");
    assert_eq!(rss["afterWarmupKb"], samples[0]["rssKb"], "the warm-up is the first 10 s: {rss}");
    assert!(rss["maxKb"].as_u64() >= rss["afterWarmupKb"].as_u64(), "{rss}");
    assert!(samples.iter().all(|s| s["rssAnonKb"].as_u64() <= s["rssKb"].as_u64()), "{report:#}");
    let p99 = &report["p99"];
    assert_eq!(p99["intervalsPerHalf"], 1, "the two intervals after the warm-up, one a half: {p99}");
    assert_eq!(p99["stable"], true, "{p99}");
    let kinds = p99["kinds"].as_array().unwrap();
    let named: Vec<&str> = kinds.iter().map(|drift| drift["kind"].as_str().unwrap()).collect();
    for kind in ["create a task", "poll", "finish a task", "send mail", "read the channel"] {
        assert!(named.contains(&kind), "{kind} is judged: {p99}");
    }
    // With one interval a half, each half's median is that interval's p99 for the kind.
    let p99_in = |sample: &Value, kind: &Value| -> Value {
        let kinds = sample["byKind"].as_array().unwrap();
        kinds.iter().find(|latency| &latency["kind"] == kind).unwrap()["p99Ms"].clone()
    };
    for drift in kinds {
        assert_eq!(drift["firstHalfMs"], p99_in(&samples[1], &drift["kind"]), "{drift}");
        assert_eq!(drift["secondHalfMs"], p99_in(&samples[2], &drift["kind"]), "{drift}");
    }
    let progress = stderr.lines().filter(|line| line.starts_with(&format!("soak [{backend}]"))).count();
    assert_eq!(progress, 3, "a progress line per sample on stderr:\n{stderr}");
}

#[test]
fn a_short_soak_on_sqlite_has_no_error() {
    let (report, stderr) = soak(&[]);
    check(&report, &stderr, "sqlite");
}

#[test]
fn a_short_soak_on_postgres_has_no_error() {
    let (report, stderr) = soak(&["--postgres", &postgres_url()]);
    check(&report, &stderr, "postgres");
}
