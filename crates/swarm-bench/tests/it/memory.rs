//! `swarm-bench memory` with a handful of polls and bounds no hub misses: a smoke test of
//! the command and its report's shape. The real figures (1,000 polls, a release build)
//! and their bounds are in BENCHMARKS.md; no assertion here depends on a size or a time.

use serde_json::Value;

use crate::support::swarm_bench;

#[test]
fn the_memory_bench_reports_idle_parked_and_after() {
    let output = swarm_bench(
        &[
            ["memory", "--polls", "5", "--wait", "2s", "--settle", "1s", "--return-within", "2s"].as_slice(),
            // A debug build: the default bounds are for the release binary.
            &["--idle-max-mb", "100000", "--parked-max-mb", "100000", "--return-tolerance", "100000"],
            &["--json"],
        ]
        .concat(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!("--json prints JSON ({err}): {}\n{stderr}", String::from_utf8_lossy(&output.stdout))
    });
    assert!(output.status.success(), "within bounds this wide it passes: {report:#}\n{stderr}");
    assert_eq!(report["backend"], "sqlite");
    assert_eq!(report["polls"], 5);
    assert_eq!(report["passed"], true, "{report:#}");
    assert_eq!(report["failures"], serde_json::json!([]), "{report:#}");
    for reading in ["idle", "parked", "returned"] {
        let kb = &report[reading];
        assert!(kb["rssKb"].as_u64().is_some_and(|kb| kb > 0), "{reading}: {report:#}");
        let (rss, anonymous) = (kb["rssKb"].as_u64().unwrap(), kb["rssAnonKb"].as_u64().unwrap());
        assert!(anonymous <= rss, "{reading}: {report:#}");
        // The program's own pages are part of what is not anonymous, and some of them
        // are always resident: the code that runs.
        let program = kb["programKb"].as_u64().expect("the program's pages");
        assert!(program > 0 && program <= rss - anonymous, "{reading}: {report:#}");
    }
    let after = report["after"].as_array().expect("the readings after the polls");
    assert_eq!(after.len(), 1, "within this bound the first reading is back: {report:#}");
    assert_eq!(after[0], report["returned"], "{report:#}");
    assert!(report["perPollKb"].is_number(), "{report:#}");
    assert!(report["returnedAfterSeconds"].is_number(), "{report:#}");
    for line in ["idle", "5 polls parked", "after the polls ended"] {
        assert!(stderr.contains(line), "progress says {line:?}:\n{stderr}");
    }
}

#[test]
fn the_memory_bench_fails_when_a_bound_is_missed() {
    let output = swarm_bench(
        &[
            ["memory", "--polls", "2", "--wait", "2s", "--settle", "1s", "--return-within", "1s"].as_slice(),
            // No hub fits in 1 MB.
            &["--idle-max-mb", "1", "--json"],
        ]
        .concat(),
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("a report even when it fails");
    assert!(!output.status.success(), "a missed bound exits non-zero: {report:#}");
    assert_eq!(report["passed"], false, "{report:#}");
    let failures = report["failures"].as_array().unwrap();
    assert!(failures.iter().any(|f| f.as_str().is_some_and(|f| f.contains("idle hub"))), "{report:#}");
}
