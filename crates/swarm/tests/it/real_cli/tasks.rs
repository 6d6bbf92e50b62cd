//! Tasks end to end with the real CLIs: an assigned task is completed (its output, session
//! logs, cost and tokens on the hub), an offered task is reviewed, accepted and done, and with
//! two slots each of six tasks runs exactly once; a task cancelled while its CLI works stops
//! the CLI and all it started.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use serde_json::json;
use swarm_scripted_model::Script;

use super::{Cli, World, complete, every_cli, first_request, processes_in, task_id_in, within};

every_cli!(
    a_task_cancelled_mid_run_stops_the_cli_process_tree,
    a_worker_completes_an_assigned_task,
    an_offered_task_is_reviewed_accepted_and_done,
    two_slots_run_each_of_six_tasks_exactly_once
);

/// Scenarios 1 and 7: the output, the CLI's output lines and its usage reach the hub.
async fn a_worker_completes_an_assigned_task(cli: Cli) {
    let script = Script::new().call_tool("store-progress", complete).reply("Reported.").with_usage(1000, 50);
    let world = World::new(cli, script).await;
    let runner = world.runner("worker", &[]);
    world.registered(&runner).await;

    let id = world.create(json!({"task": "Write the release notes", "agentId": runner.agent_id})).await;
    let done = world.task_in(&id, &["completed", "failed", "unassigned"], &runner).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    assert_eq!(done["output"], format!("scripted output for {id}"));
    let conversations = world.conversations_about(&id);
    assert!(
        conversations.iter().any(|c| c.contains("Write the release notes")),
        "the task text reached the model"
    );
    // Once: the command's argument is the task id then its text, put in once (issue 43).
    // Claude Code also echoes what was typed after the command (`<command-args>`).
    let first = conversations[0].user_texts().join("\n");
    let (said, echoed) = match first.split_once("<command-args>") {
        Some((before, rest)) => {
            let (args, after) = rest.split_once("</command-args>").expect(&first);
            (format!("{before}{after}"), args.matches("Write the release notes").count())
        }
        None => (first.clone(), 0),
    };
    assert_eq!(said.matches("Write the release notes").count(), 1, "{first}");
    assert!(echoed <= 1, "{first}");
    if matches!(cli, Cli::Codex | Cli::Gemini | Cli::Opencode) {
        // No slash commands in Codex and opencode (the Gemini CLI's the runner does not
        // use): the instructions themselves.
        assert!(conversations[0].prompt().contains("# Work on swarm task"), "{}", conversations[0].prompt());
    }

    let logs = within("the CLI's output at the hub", || async {
        let (_, body) = world.hub.get(&format!("/api/tasks/{id}/session-logs"), None).await;
        let logs = body["logs"].as_array().cloned().unwrap_or_default();
        // The CLI's last line: Claude's `result`, Codex's `turn.completed`, pi's answer (`stopReason: stop`).
        let last = match cli {
            Cli::Claude => "\"type\":\"result\"",
            Cli::Codex => "turn.completed",
            Cli::Pi => "\"stopReason\":\"stop\"",
            Cli::Gemini => "\"type\":\"result\"",
            // opencode's last step, which ends the turn.
            Cli::Opencode => "\"reason\":\"stop\"",
        };
        logs.iter().any(|log| log["content"].as_str().is_some_and(|line| line.contains(last))).then_some(logs)
    })
    .await;
    assert!(logs.iter().all(|log| log["cli"] == cli.name() && log["sessionId"] == "e2e"), "{logs:?}");

    let cost = within("the run's usage at the hub", || async {
        let (_, body) = world.hub.get(&format!("/api/session-costs?taskId={id}"), None).await;
        body["costs"].as_array().and_then(|costs| costs.first().cloned())
    })
    .await;
    assert_eq!(cost["agentId"], runner.agent_id.as_str(), "{cost}");
    // Every model request reports the script's usage: the run's tokens are that many times it.
    // The usage is sent once the CLI has exited: every request has been made.
    let requests = world.conversations_about(&id).len() as i64;
    assert_eq!(cost["inputTokens"], json!(1000 * requests), "{cost} after {requests} requests");
    assert_eq!(cost["outputTokens"], json!(50 * requests), "{cost}");
    match cli {
        // Claude Code prices the tokens itself.
        Cli::Claude => assert!(cost["totalCostUsd"].as_f64().is_some_and(|usd| usd > 0.0), "{cost}"),
        // Codex and the Gemini CLI report no money: the runner records none.
        Cli::Codex | Cli::Gemini => assert_eq!(cost["totalCostUsd"].as_f64(), Some(0.0), "{cost}"),
        // pi and opencode price each request from their model table (the test's models.json
        // and opencode.json: $5/M in, $25/M out).
        Cli::Pi | Cli::Opencode => {
            let usd = (1000.0 * 5.0 + 50.0 * 25.0) / 1e6 * requests as f64;
            let reported = cost["totalCostUsd"].as_f64().unwrap_or_default();
            assert!((reported - usd).abs() < 1e-9, "{cost}: {usd} expected");
        }
    }
}

/// Scenario 2: the review run accepts, the work run (a new CLI run) completes.
async fn an_offered_task_is_reviewed_accepted_and_done(cli: Cli) {
    let script = Script::new()
        .call_tool_with(|c| {
            let id = task_id_in(c).unwrap_or_default();
            if c.user_texts().join("\n").contains("was offered to you") {
                ("task-action".into(), json!({"action": "accept", "taskId": id}))
            } else {
                ("store-progress".into(), complete(c))
            }
        })
        .reply("Done here.");
    let world = World::new(cli, script).await;
    let runner = world.runner("worker", &[]);
    world.registered(&runner).await;

    let id = world.create(json!({"task": "Fix the flaky test", "offeredTo": runner.agent_id})).await;
    let done = world.task_in(&id, &["completed", "failed", "unassigned"], &runner).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    let events: Vec<&str> =
        done["logs"].as_array().unwrap().iter().filter_map(|e| e["eventType"].as_str()).collect();
    assert!(events.contains(&"task_accepted"), "{events:?}");
    let runs: Vec<bool> = world
        .conversations_about(&id)
        .iter()
        .filter(|c| first_request(c))
        .map(|c| c.user_texts().join("\n").contains("was offered to you"))
        .collect();
    assert_eq!(runs, [true, false], "a review run, then a work run");
}

/// Scenario 3: `MAX_CONCURRENT_TASKS=2`, six tasks: one CLI run and one claim per task.
async fn two_slots_run_each_of_six_tasks_exactly_once(cli: Cli) {
    let script = Script::new().call_tool("store-progress", complete).reply("Reported.");
    let world = World::new(cli, script).await;
    let runner = world.runner("worker", &[("MAX_CONCURRENT_TASKS", "2".into())]);
    assert_eq!(world.registered(&runner).await["maxTasks"], 2);

    // opencode creates its own database on its first start, and two first starts at once race
    // on it (one exits with its schema's `CREATE TABLE`, and the runner hands its task back:
    // docs/real-agent-clis.md). A machine that has run it once has the database.
    let mut warm_up = Vec::new();
    if cli == Cli::Opencode {
        let id = world.create(json!({"task": "Warm up", "agentId": runner.agent_id})).await;
        let done = world.task_in(&id, &["completed", "failed", "unassigned"], &runner).await;
        assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
        warm_up.push(id);
    }
    let mut ids = Vec::new();
    for n in 0..6 {
        ids.push(world.create(json!({"task": format!("Job number {n}")})).await);
    }
    for id in &ids {
        let done = world.task_in(id, &["completed", "failed"], &runner).await;
        assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
        assert_eq!(done["agentId"], runner.agent_id.as_str());
        let events: Vec<&str> =
            done["logs"].as_array().unwrap().iter().filter_map(|e| e["eventType"].as_str()).collect();
        let claims =
            events.iter().filter(|kind| **kind == "task_claimed" || **kind == "task_assigned").count();
        assert!(claims <= 1, "claimed more than once: {events:?}");
        assert!(!events.contains(&"task_released"), "{events:?}");
    }
    let mut runs: HashMap<String, usize> = HashMap::new();
    for conversation in world.model.conversations().iter().filter(|c| first_request(c)) {
        *runs.entry(task_id_in(conversation).unwrap_or_default()).or_default() += 1;
    }
    let expected: HashMap<String, usize> = ids.iter().chain(&warm_up).map(|id| (id.clone(), 1)).collect();
    assert_eq!(runs, expected, "one CLI run per task");
}

/// Scenario 4: the model has the CLI run `sleep 300` through its shell tool; cancelling the task
/// at the hub ends every process of the run (Codex: the node launcher and the native binary)
/// within seconds, and the task stays cancelled.
async fn a_task_cancelled_mid_run_stops_the_cli_process_tree(cli: Cli) {
    // Twice: Codex's shell tool hands a long command back to the model after a while, still
    // running; the run must still be under way when the test cancels it. Not a bare
    // `sleep 300`: Claude Code 2.1.3xx refuses "standalone sleep" (and `sleep 300; ...`).
    let long_job = "echo working && sleep 300";
    let script = Script::new().shell(long_job).shell(long_job).reply("Slept.");
    let world = World::new(cli, script).await;
    let runner = world.runner("worker", &[]);
    world.registered(&runner).await;
    let id = world.create(json!({"task": "A long job", "agentId": runner.agent_id})).await;

    let run = within("the CLI to run `sleep 300`", || async {
        let run = processes_in(&world.project, runner.pid());
        run.iter().any(|(_, cmdline)| cmdline == "sleep 300").then_some(run)
    })
    .await;
    let cli_running = |run: &[(u32, String)]| run.iter().any(|(_, cmdline)| cmdline.contains(cli.name()));
    assert!(cli_running(&run), "the CLI runs in the project: {run:?}");

    let cancelled_at = Instant::now();
    let (status, body) =
        world.hub.post(&format!("/api/tasks/{id}/cancel"), None, json!({"reason": "not needed"})).await;
    assert_eq!(status, 200, "{body}");
    within("every process of the run to end", || async {
        let left: Vec<_> = processes_in(&world.project, runner.pid())
            .into_iter()
            .filter(|(pid, _)| run.iter().any(|(started, _)| started == pid))
            .collect();
        left.is_empty().then_some(())
    })
    .await;
    let took = cancelled_at.elapsed();
    assert!(took < Duration::from_secs(10), "the run took {took:?} to stop");
    let left = processes_in(&world.project, runner.pid());
    assert!(!left.iter().any(|(_, cmdline)| cmdline == "sleep 300") && !cli_running(&left), "{left:?}");

    within("the runner to settle the run", || async {
        runner.output().contains("cancelled at the hub").then_some(())
    })
    .await;
    let seen = world.task(&id).await;
    assert_eq!(seen["status"], "cancelled", "{seen}\n{}", runner.output());
}
