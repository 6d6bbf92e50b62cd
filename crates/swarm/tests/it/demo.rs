//! `swarm demo` as a newcomer runs it: the real binary, its hub, runners and stand-in
//! agents, to completion. Whether each task ended as scripted is the demo's own verdict
//! (its exit status); these tests check that it says so and shows every route.

use std::{
    path::PathBuf,
    process::{Command, Output},
};

use serde_json::Value;

use crate::hub::SWARM;

/// Generous: the demo takes a few seconds, but CI machines are shared.
const TIMEOUT_SECONDS: &str = "120";

fn demo(extra_args: &[&str]) -> Output {
    let mut command = Command::new(SWARM);
    command.args(["demo", "--timeout", TIMEOUT_SECONDS]).args(extra_args).env("RUST_LOG", "warn");
    // The stand-in reads these as defaults for what the demo does not set itself.
    for name in [
        "STAND_IN_BEHAVIOUR",
        "STAND_IN_EXIT_CODE",
        "STAND_IN_SLEEP_MS",
        "STAND_IN_RECORD_DIR",
        "STAND_IN_FAIL_WHEN",
    ] {
        command.env_remove(name);
    }
    command.output().expect("swarm demo starts")
}

fn text(output: &Output) -> String {
    format!(
        "status: {}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn the_demo_runs_to_completion_showing_an_offer_the_pool_and_a_delegation() {
    let output = demo(&[]);
    let shown = text(&output);
    assert!(output.status.success(), "{shown}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    for expected in [
        "task 'Write the README' offered to worker-1",
        "worker-1 accepted 'Write the README'",
        "worker-1 completed 'Write the README'",
        "put in the pool",
        "from the pool and started it",
        "lead delegated 'Write the release notes'",
        "lead got a tasks_finished trigger",
        "failed 'Deploy to production on a Friday evening'",
        "every task ended as scripted",
        "agent runs started:",
    ] {
        assert!(stdout.contains(expected), "missing {expected:?}:\n{shown}");
    }
    // The summary has a row per route.
    for route in ["offer", "lead", "delegated", "pool"] {
        assert!(stdout.lines().any(|line| line.trim_start().starts_with(&format!("{route} "))), "{shown}");
    }
    // Without --keep its folder is gone.
    let dir = stdout
        .lines()
        .find_map(|line| line.split("SQLite in ").nth(1))
        .map(|rest| PathBuf::from(rest.trim_end_matches(')')))
        .expect("the header names the demo's folder");
    assert!(!dir.exists(), "{} is left behind", dir.display());
}

#[test]
fn with_json_and_keep_the_demo_prints_its_story_as_json_lines_and_leaves_its_folder() {
    let output = demo(&["--json", "--keep", "--pace", "100"]);
    let shown = text(&output);
    assert!(output.status.success(), "{shown}");
    let lines: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}\n{shown}")))
        .collect();
    let events: Vec<&str> = lines.iter().filter_map(|line| line["event"].as_str()).collect();
    for expected in [
        "task_offered",
        "task_accepted",
        "task_pooled",
        "task_claimed",
        "task_delegated",
        "tasks_finished",
        "task_failed",
    ] {
        assert!(events.contains(&expected), "no {expected} event:\n{shown}");
    }

    let summary = lines.last().unwrap();
    assert_eq!(summary["event"], "summary", "{shown}");
    assert_eq!(summary["ok"], true, "{shown}");
    let routes: Vec<&str> =
        summary["tasks"].as_array().unwrap().iter().map(|task| task["route"].as_str().unwrap()).collect();
    assert_eq!(routes.iter().filter(|route| **route == "delegated").count(), 1, "{shown}");
    assert!(["offer", "lead", "pool"].iter().all(|route| routes.contains(route)), "{shown}");
    // Each route's task ran at least once: a review and a run for the offer, and more.
    assert!(summary["agentRuns"]["total"].as_u64().unwrap() >= 6, "{shown}");

    let kept = PathBuf::from(summary["kept"].as_str().expect("--keep names the folder"));
    assert!(kept.join("swarm.db").is_file(), "{shown}");
    assert!(kept.join("logs").join("lead").is_dir(), "{shown}");
    std::fs::remove_dir_all(&kept).unwrap();
}
