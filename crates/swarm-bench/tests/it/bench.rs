//! `swarm-bench` runs end to end with tiny durations: a smoke test of the command, not a
//! measurement (no assertion here depends on how fast anything is).

use std::process::Output;

use serde_json::Value;

use crate::support::{Hub, postgres_url, swarm_bench};

/// Just enough of every measurement to exercise it: a few samples, 0.2 s windows.
const TINY: &[&str] = &[
    "--latency-samples",
    "3",
    "--latency-warmup",
    "1",
    "--seconds",
    "0.2",
    "--warmup-seconds",
    "0.05",
    "--concurrency",
    "1,2",
    "--workers",
    "3",
];

fn bench(args: &[&str]) -> Output {
    let output = swarm_bench(&[TINY, args].concat());
    assert!(
        output.status.success(),
        "swarm-bench exits 0; got {:?}, stderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[test]
fn bench_starts_a_sqlite_hub_and_prints_the_table() {
    let output = bench(&["--backend", "sqlite"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("| measurement | result | target | verdict |"), "{stdout}");
    for row in [
        "trigger latency",
        "null polls `GET /api/poll`, 1 concurrent",
        "null polls `GET /api/poll`, 2 concurrent",
        "floor: `GET /health`, 2 concurrent",
        "claim cycles (create → poll → finish), 3 workers, own assigned tasks",
        "claim cycles (create → poll → finish), 3 workers, pool tasks",
    ] {
        assert!(stdout.contains(row), "the table has a row {row:?}:\n{stdout}");
    }
    assert!(stdout.contains("## sqlite:"), "{stdout}");
    assert!(stdout.contains("0 duplicates, 0 finished twice, 0 never received"), "{stdout}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bench [sqlite]: claim cycles"), "progress goes to stderr:\n{stderr}");
}

#[test]
fn bench_measures_a_running_hub_given_by_url_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(dir.path(), "bench-key-0123456789");
    let output =
        bench(&["--url", &hub.base_url, "--api-key", "bench-key-0123456789", "--cycles", "pool", "--json"]);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!("--json prints JSON ({err}): {}", String::from_utf8_lossy(&output.stdout))
    });
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{report}");
    let run = &runs[0];
    assert_eq!(run["backend"], "sqlite");
    assert_eq!(run["latency"]["trigger"]["samples"], 3);
    assert_eq!(run["nullPolls"].as_array().map(Vec::len), Some(2));
    // The floor is measured beside the polls at each concurrency, and both got requests.
    let floor = run["health"].as_array().expect("health");
    assert_eq!(floor.len(), 2, "{run}");
    for (polls, health) in run["nullPolls"].as_array().unwrap().iter().zip(floor) {
        assert_eq!(polls["concurrency"], health["concurrency"], "{run}");
        assert!(polls["requests"].as_u64().is_some_and(|requests| requests > 0), "{polls}");
        assert!(health["requests"].as_u64().is_some_and(|requests| requests > 0), "{health}");
    }
    let cycles = &run["claimCycles"][0];
    assert_eq!(cycles["kind"], "pool");
    assert_eq!(cycles["duplicates"], 0);
    assert_eq!(cycles["neverReceived"], 0);
    assert!(cycles["triggers"].as_u64().is_some_and(|triggers| triggers > 0), "{cycles}");
    assert!(report["machine"]["cpus"].as_u64().is_some_and(|cpus| cpus >= 1), "{report}");
    drop(hub);
}

/// `--fill`: the scratch database gets its history through the store before its hub
/// starts (the bench itself checks that the hub counts and decodes what was written), and
/// the report says what was filled and how big the database is.
fn bench_fills(backend: &[&str]) {
    let mut args = backend.to_vec();
    args.extend(["--fill", "1200", "--fill-agents", "30", "--cycles", "assigned", "--json"]);
    let output = bench(&args);
    let report: Value = serde_json::from_slice(&output.stdout).expect("--json prints JSON");
    let run = &report["runs"][0];
    let fill = &run["fill"];
    assert_eq!((fill["tasks"].as_u64(), fill["agents"].as_u64()), (Some(1200), Some(30)), "{fill}");
    assert_eq!(fill["events"], 3600);
    let filled = fill["bytesFilled"].as_u64().unwrap_or_default();
    assert!(filled > 100_000, "1,200 tasks and their events take room: {fill}");
    assert!(fill["bytesAfter"].as_u64().is_some_and(|after| after >= filled / 2), "{fill}");
    assert_eq!(run["claimCycles"][0]["duplicates"], 0);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("filled 1200 of 1200 tasks"), "{stderr}");
}

#[test]
fn bench_fill_gives_a_sqlite_hub_a_history_first() {
    bench_fills(&["--backend", "sqlite"]);
}

#[test]
fn bench_fill_gives_a_postgres_hub_a_history_first() {
    let url = postgres_url();
    bench_fills(&["--backend", "postgres", "--database-url", &url]);
}

/// `--replicas 2` on PostgreSQL: two `swarm serve` processes on one scratch database, the
/// workers dealt out over both, and every trigger of both counted once.
#[test]
fn bench_runs_two_postgres_replicas_and_counts_every_trigger_once() {
    let url = postgres_url();
    let output = bench(&["--backend", "postgres", "--database-url", &url, "--replicas", "2", "--json"]);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!("--json prints JSON ({err}): {}", String::from_utf8_lossy(&output.stdout))
    });
    let run = &report["runs"][0];
    assert_eq!(run["backend"], "postgres", "{report}");
    assert!(run["hub"].as_str().is_some_and(|hub| hub.contains("2 replicas")), "{report}");
    let cycles = run["claimCycles"].as_array().expect("claim cycles");
    assert_eq!(cycles.len(), 2, "{report}");
    for run in cycles {
        assert_eq!(run["workers"], 3);
        assert_eq!(run["duplicates"], 0, "{run}");
        assert_eq!(run["finishedTwice"], 0, "{run}");
        assert_eq!(run["neverReceived"], 0, "{run}");
        assert!(run["triggers"].as_u64().is_some_and(|triggers| triggers > 0), "{run}");
    }
}

/// Without the `swarm` binary the bench cannot start a hub, and says how to build one.
#[test]
fn bench_without_the_swarm_binary_says_how_to_build_it() {
    let output = swarm_bench(&["--swarm", "/nonexistent/swarm", "--backend", "sqlite"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cargo build --release -p swarm"), "{stderr}");
}

/// The bench is its own binary: `swarm --help` has no `bench`, `swarm-bench --help` has
/// every command.
#[test]
fn the_bench_is_not_a_command_of_swarm() {
    let swarm = std::process::Command::new(crate::support::swarm()).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&swarm.stdout);
    assert!(swarm.status.success() && help.contains("serve"), "{help}");
    assert!(!help.contains("bench"), "swarm --help mentions the bench:\n{help}");
    let bench = swarm_bench(&["--help"]);
    let help = String::from_utf8_lossy(&bench.stdout);
    for word in ["soak", "memory", "--fill", "--url", "--replicas", "--swarm"] {
        assert!(help.contains(word), "swarm-bench --help lacks {word}:\n{help}");
    }
}

/// A small fleet: every agent parked (over two client processes and two loopback source
/// addresses), every task delivered once to its own agent. Counts only, never timings.
fn fleet(extra: &[&str]) -> Value {
    let args = [
        ["fleet", "--agents", "300", "--seconds", "3", "--rate", "40", "--burst", "30"].as_slice(),
        &["--agents-per-client", "150", "--agents-per-address", "200", "--json"],
        extra,
    ]
    .concat();
    let output = swarm_bench(&args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "swarm-bench fleet exits 0; got {:?}:\n{stderr}", output.status);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!("--json prints one JSON line ({err}): {}\n{stderr}", String::from_utf8_lossy(&output.stdout))
    });
    assert_eq!(report["agents"], 300, "{report}");
    assert_eq!(report["parked"], 300, "every agent's poll was parked: {report}\n{stderr}");
    assert_eq!(
        (report["clients"].as_u64(), report["source_addresses"].as_u64()),
        (Some(2), Some(2)),
        "{report}"
    );
    assert!(report["tasks_created"].as_u64().is_some_and(|tasks| tasks > 30), "the burst and more: {report}");
    for count in ["duplicates", "lost", "misdelivered", "strangers", "create_failures"] {
        assert_eq!(report[count], 0, "{count}: {report}\n{stderr}");
    }
    for number in ["wake_p50_ms", "wake_p99_ms", "hub_rss_mb", "hub_anon_mb", "anon_kb_per_parked_agent"] {
        assert!(report[number].is_number(), "{number}: {report}");
    }
    assert!(stderr.contains("300 of 300 polls parked"), "progress goes to stderr:\n{stderr}");
    report
}

#[test]
fn a_small_fleet_on_sqlite_parks_every_agent_and_delivers_every_task_once() {
    let report = fleet(&[]);
    assert_eq!(report["backend"], "sqlite", "{report}");
    assert_eq!(report["replicas"], 1, "{report}");
}

#[test]
fn a_small_fleet_on_postgres_replicas_parks_every_agent_and_delivers_every_task_once() {
    let url = postgres_url();
    let report = fleet(&["--replicas", "2", "--database-url", &url]);
    assert_eq!(report["backend"], "postgres", "{report}");
    assert_eq!(report["replicas"], 2, "{report}");
    assert!(report["database_cpu_ms_per_task"].is_number(), "the local server's CPU: {report}");
}
