//! `swarm worker` and `swarm lead` against the real hub, with real child processes: the
//! agent CLI is `swarm stand-in-agent`, a scripted agent that acts through the hub's MCP
//! endpoint and records each of its runs in a folder (see `crates/swarm-demo/src/stand_in.rs`).

mod fixture;

use serde_json::{Value, json};

use crate::hub::{Hub, sqlite_file};
// The fixture is the other modules' way to start runners too (`crate::runner::Runner`).
pub(crate) use fixture::*;

#[tokio::test]
async fn a_worker_runner_completes_an_assigned_task_and_logs_it() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    // YOLO=0, as the reference's deployments write it, is no error and means no --yolo.
    let mut runner = Runner::start(&hub, RunnerSetup::worker(dir.path()).env("YOLO", "0"));
    let registered = registered(&hub, &runner).await;
    assert_eq!(registered["isLead"], false);
    assert_eq!(registered["name"], format!("worker-{}", &runner.agent_id[..8]), "AGENT_NAME's default");

    let id = create(&hub, json!({"task": "Write the release notes", "agentId": runner.agent_id})).await;
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["output"], "stand-in finished: Write the release notes");

    let runs = records(dir.path());
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].prompt, format!("/work-on-task {id}"));
    assert_eq!(runs[0].task_id_env.as_deref(), Some(id.as_str()), "the agent gets TASK_ID");

    // The run's log file opens with its metadata line; its output went to the hub too.
    // The runner writes the file through a buffer flushed when the agent has exited, which
    // may come after the task is seen completed: wait for the agent's last line.
    let log_dir = dir.path().join("logs").join("test-session");
    let text = eventually("the run's log file, complete", || async {
        let path = std::fs::read_dir(&log_dir).ok()?.map_while(Result::ok).map(|entry| entry.path()).find(
            |path| path.file_name().unwrap().to_string_lossy().ends_with(&format!("-{}.jsonl", &id[..8])),
        )?;
        std::fs::read_to_string(path).ok().filter(|text| text.contains(r#""type":"result""#))
    })
    .await;
    let metadata: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(metadata["type"], "worker_metadata");
    assert_eq!(metadata["sessionId"], "test-session");
    assert_eq!(metadata["trigger"], "task_assigned");
    assert_eq!(metadata["yolo"], false);
    assert!(metadata["prompt"].as_str().unwrap().starts_with("/work-on-task "));
    assert!(
        text.lines().any(|line| line.contains(r#""type":"result""#)),
        "the agent's output follows:\n{text}"
    );
    let logs = eventually("session logs at the hub", || async {
        let (_, body) = hub.get(&format!("/api/tasks/{id}/session-logs"), None).await;
        let logs = body["logs"].as_array().cloned().unwrap_or_default();
        (logs.len() >= 2).then_some(logs)
    })
    .await;
    assert!(logs.iter().all(|log| log["sessionId"] == "test-session" && log["cli"] == "swarm"), "{logs:?}");
    let costs = eventually("the run's cost at the hub", || async {
        let (_, body) = hub.get(&format!("/api/session-costs?taskId={id}"), None).await;
        body["costs"].as_array().filter(|costs| !costs.is_empty()).cloned()
    })
    .await;
    assert_eq!(costs[0]["agentId"], runner.agent_id.as_str());

    assert!(runner.terminate().success(), "SIGTERM with nothing running is a clean stop");
    assert_eq!(
        agent(&hub, &runner.agent_id).await.unwrap()["status"],
        "offline",
        "POST /close on the way out"
    );
}

#[tokio::test]
async fn an_offered_task_is_reviewed_accepted_and_then_done() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let runner = Runner::start(&hub, RunnerSetup::worker(dir.path()));
    registered(&hub, &runner).await;

    let id = create(&hub, json!({"task": "Fix the flaky test", "offeredTo": runner.agent_id})).await;
    let done = task_in(&hub, &id, &["completed", "failed", "unassigned"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(event_types(&done).contains(&"task_accepted".to_string()), "{done}");

    let runs = records(dir.path());
    let prompts: Vec<&str> = runs.iter().map(|run| run.prompt.as_str()).collect();
    assert_eq!(prompts, [format!("/review-offered-task {id}"), format!("/work-on-task {id}")]);
    assert_eq!(runs[0].trigger.as_deref(), Some("task_offered"));
}

#[tokio::test]
async fn with_three_slots_each_of_twelve_tasks_runs_once_and_never_more_than_three_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let setup =
        RunnerSetup::worker(dir.path()).env("MAX_CONCURRENT_TASKS", "3").env("STAND_IN_SLEEP_MS", "200");
    let runner = Runner::start(&hub, setup);
    assert_eq!(
        registered(&hub, &runner).await["maxTasks"],
        3,
        "the agent's maxTasks is MAX_CONCURRENT_TASKS"
    );

    // Half assigned to the agent, half in the pool (claimed for it by its polls).
    let mut ids = Vec::new();
    for n in 0..12 {
        let body = if n % 2 == 0 {
            json!({"task": format!("task {n}"), "agentId": runner.agent_id})
        } else {
            json!({"task": format!("task {n}")})
        };
        ids.push(create(&hub, body).await);
    }
    for id in &ids {
        let done = task_in(&hub, id, &["completed", "failed"]).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["agentId"], runner.agent_id.as_str());
    }

    let runs = eventually("every run to record its end", || async {
        let runs = records(dir.path());
        runs.iter().all(|run| run.end.is_some()).then_some(runs)
    })
    .await;
    let mut prompts: Vec<String> = runs.iter().map(|run| run.prompt.clone()).collect();
    prompts.sort();
    let mut expected: Vec<String> = ids.iter().map(|id| format!("/work-on-task {id}")).collect();
    expected.sort();
    assert_eq!(prompts, expected, "each task ran exactly once");
    let most = max_overlap(&runs);
    assert!(most <= 3, "at most MAX_CONCURRENT_TASKS runs at once, saw {most}");
    eprintln!("most runs at once: {most}");
}

#[tokio::test]
async fn while_there_is_no_work_no_agent_is_started() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let runner = Runner::start(&hub, RunnerSetup::worker(dir.path()));
    registered(&hub, &runner).await;
    eventually("the runner to wait for work", || async {
        runner.output().contains("waiting for work").then_some(())
    })
    .await;

    // Parked at the hub: the runner asked for work, got none, and waits for it.
    hub.parked_polls(1).await;
    assert_eq!(records(dir.path()).len(), 0, "no work, no agent run");
    assert_eq!(agent(&hub, &runner.agent_id).await.unwrap()["status"], "idle");

    let id = create(&hub, json!({"task": "now there is work", "agentId": runner.agent_id})).await;
    task_in(&hub, &id, &["completed"]).await;
    assert_eq!(records(dir.path()).len(), 1, "one task, one run");
}

#[tokio::test]
async fn a_runner_killed_mid_task_loses_it_through_the_lease_and_another_runner_completes_it() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(
        &sqlite_file(dir.path()),
        None,
        &["--lease-seconds", "2", "--rescue-interval-seconds", "1"],
    );
    let first_dir = dir.path().join("first");
    let mut first = Runner::start(&hub, RunnerSetup::worker(&first_dir).env("STAND_IN_BEHAVIOUR", "hang"));
    registered(&hub, &first).await;

    let id = create(&hub, json!({"task": "survive a crash"})).await;
    let run = eventually("the first runner's agent to start", || async { records(&first_dir).pop() }).await;
    let held = task(&hub, &id).await;
    assert_eq!(
        (held["status"].as_str(), held["agentId"].as_str()),
        (Some("in_progress"), Some(first.agent_id.as_str()))
    );

    first.kill();
    // The agent does not outlive its runner (it would keep working on a task the hub
    // hands to someone else).
    eventually("the killed runner's agent to die too", || async { (!is_alive(run.pid)).then_some(()) }).await;

    let second_dir = dir.path().join("second");
    let second = Runner::start(&hub, RunnerSetup::worker(&second_dir));
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["agentId"], second.agent_id.as_str(), "the second runner did it");
    assert!(event_types(&done).contains(&"task_lease_expired".to_string()), "{done}");
    assert_eq!(records(&second_dir).len(), 1);
}

#[tokio::test]
async fn sigterm_pauses_the_running_task_and_the_next_start_resumes_and_completes_it() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let agent_id = new_id();
    let first_dir = dir.path().join("first");
    let setup = RunnerSetup { agent_id: agent_id.clone(), ..RunnerSetup::worker(&first_dir) }
        .env("STAND_IN_BEHAVIOUR", "hang")
        .env("SHUTDOWN_TIMEOUT", "200");
    let mut first = Runner::start(&hub, setup);
    registered(&hub, &first).await;
    let id = create(&hub, json!({"task": "long job", "agentId": agent_id})).await;
    eventually("the agent to start", || async { records(&first_dir).pop() }).await;

    assert!(first.terminate().success(), "a graceful stop:\n{}", first.output());
    let paused = task(&hub, &id).await;
    assert_eq!(paused["status"], "paused", "{paused}");
    assert_eq!(agent(&hub, &agent_id).await.unwrap()["status"], "offline");

    let second_dir = dir.path().join("second");
    let second =
        Runner::start(&hub, RunnerSetup { agent_id: agent_id.clone(), ..RunnerSetup::worker(&second_dir) });
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    let runs = records(&second_dir);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].trigger.as_deref(), Some("task_resumed"));
    drop(second);
}

#[tokio::test]
async fn an_agent_that_exits_without_reporting_leaves_its_task_failed_with_that_reason() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);

    // With YOLO=1 (the reference's spelling of --yolo) the runner keeps going after the
    // failed run.
    let yolo_dir = dir.path().join("yolo");
    let mut setup =
        RunnerSetup::worker(&yolo_dir).env("STAND_IN_BEHAVIOUR", "silent").env("STAND_IN_EXIT_CODE", "3");
    // A silent agent failing at once looks like a broken environment (runner_env.rs);
    // here every exit counts as the task's.
    setup.env.push(("QUICK_EXIT_MS", "0".into()));
    setup.env.push(("YOLO", "1".into()));
    let mut yolo = Runner::start(&hub, setup);
    registered(&hub, &yolo).await;
    for text in ["first", "second"] {
        let id = create(&hub, json!({"task": text, "agentId": yolo.agent_id})).await;
        let failed = task_in(&hub, &id, &["completed", "failed"]).await;
        assert_eq!(failed["status"], "failed", "{failed}");
        let reason = failed["failureReason"].as_str().unwrap();
        assert!(reason.contains("without reporting") && reason.contains("exit code 3"), "{reason}");
    }
    let errors = std::fs::read_to_string(yolo_dir.join("logs/test-session/errors.jsonl")).unwrap();
    let errors: Vec<Value> = errors.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(errors.len(), 2);
    assert!(errors.iter().all(|error| error["exitCode"] == 3 && error["error"] == true), "{errors:?}");
    assert!(yolo.child.try_wait().unwrap().is_none(), "still running");
    assert!(yolo.terminate().success());

    // Without it, the runner stops after the failed run and says how to keep going.
    let strict_dir = dir.path().join("strict");
    let setup = RunnerSetup::worker(&strict_dir)
        .env("STAND_IN_BEHAVIOUR", "silent")
        .env("STAND_IN_EXIT_CODE", "3")
        .env("QUICK_EXIT_MS", "0");
    let mut strict = Runner::start(&hub, setup);
    registered(&hub, &strict).await;
    let id = create(&hub, json!({"task": "third", "agentId": strict.agent_id})).await;
    assert_eq!(task_in(&hub, &id, &["completed", "failed"]).await["status"], "failed");
    let status = strict.wait();
    assert_eq!(status.code(), Some(1), "{}", strict.output());
    assert!(strict.output().contains("--yolo"), "{}", strict.output());
    assert_eq!(agent(&hub, &strict.agent_id).await.unwrap()["status"], "offline");
}

#[tokio::test]
async fn a_lead_runner_reviews_finished_tasks_in_a_run_that_is_about_no_task() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let lead = Runner::start(&hub, RunnerSetup { role: "lead", ..RunnerSetup::worker(dir.path()) });
    assert_eq!(registered(&hub, &lead).await["isLead"], true);

    let worker = new_id();
    let (status, _) = hub.post("/api/agents", Some(&worker), json!({"name": "plain-worker"})).await;
    assert_eq!(status, 201);
    let id = create(&hub, json!({"task": "done by hand", "agentId": worker})).await;
    let (status, body) = hub.post(&format!("/api/tasks/{id}/start"), Some(&worker), json!({})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = hub
        .post(
            &format!("/api/tasks/{id}/finish"),
            Some(&worker),
            json!({"status": "completed", "output": "ok"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    let run = eventually("the lead's run", || async { records(dir.path()).pop() }).await;
    assert_eq!(run.prompt, "1 task(s) finished:");
    assert_eq!(run.trigger.as_deref(), Some("tasks_finished"));
    assert_eq!(run.task_id_env, None, "a trigger that is not a task gets no TASK_ID");
}

#[tokio::test]
async fn a_runner_restarted_after_a_crash_picks_up_the_task_it_still_holds() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let agent_id = new_id();
    let first_dir = dir.path().join("first");
    let setup = RunnerSetup { agent_id: agent_id.clone(), ..RunnerSetup::worker(&first_dir) }
        .env("STAND_IN_BEHAVIOUR", "hang");
    let mut first = Runner::start(&hub, setup);
    registered(&hub, &first).await;
    let id = create(&hub, json!({"task": "interrupted", "agentId": agent_id})).await;
    eventually("the agent to start", || async { records(&first_dir).pop() }).await;
    first.kill();

    // Its lease (45 s by default) has not run out: the task is still in_progress for the
    // agent, and the same agent's next runner takes it up again at once.
    assert_eq!(task(&hub, &id).await["status"], "in_progress");
    let second_dir = dir.path().join("second");
    let _second =
        Runner::start(&hub, RunnerSetup { agent_id: agent_id.clone(), ..RunnerSetup::worker(&second_dir) });
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(records(&second_dir)[0].trigger.as_deref(), Some("task_held"));
}

#[tokio::test]
async fn ai_loop_mode_starts_the_agent_right_away_with_the_default_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let mut setup = RunnerSetup::worker(dir.path()).env("AI_LOOP", "1").env("STAND_IN_SLEEP_MS", "100");
    setup.flags.extend(["-m", "/start-worker please"]);
    let mut runner = Runner::start(&hub, setup);
    registered(&hub, &runner).await;

    // No work exists, yet the agent runs, again and again: it polls by itself.
    let runs = eventually("two agent runs", || async {
        let runs = records(dir.path());
        (runs.len() >= 2).then_some(runs)
    })
    .await;
    assert!(
        runs.iter().all(|run| run.prompt == "/start-worker please" && run.task_id_env.is_none()),
        "{runs:?}"
    );
    assert_eq!(runs[0].trigger.as_deref(), Some("ai_loop"));
    assert!(runner.terminate().success());
}

#[tokio::test]
async fn a_runner_rides_out_a_hub_restart_and_takes_work_from_the_new_hub() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    // A port of our own, so that the restarted hub is where the runner looks for it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let hub = Hub::start_with(&database, None, &["--port", &port]);
    let runner = Runner::start(&hub, RunnerSetup::worker(dir.path()));
    registered(&hub, &runner).await;

    hub.kill();
    eventually("the runner reporting that the hub is gone", || async {
        runner.output().contains("retrying in").then_some(())
    })
    .await;

    let hub = Hub::start_with(&database, None, &["--port", &port]);
    let id = create(&hub, json!({"task": "Work after the outage", "agentId": runner.agent_id})).await;
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    assert!(runner.output().contains("the hub answers again"), "{}", runner.output());
}

/// The `claude` harness itself: the stand-in named `claude` refuses any other command
/// line than the one the reference uses, and answers in stream-json, whose session id,
/// model, cost and tokens reach the hub.
#[tokio::test]
async fn the_claude_harness_runs_claude_with_its_command_line_and_reads_its_stream_json() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let setup = RunnerSetup { harness: Some("claude"), ..RunnerSetup::worker(dir.path()) };
    let runner = Runner::start(&hub, setup);
    registered(&hub, &runner).await;
    let id = create(&hub, json!({"task": "Tidy the changelog", "agentId": runner.agent_id})).await;
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    assert_eq!(done["output"], "stand-in finished: Tidy the changelog");
    let runs = records(dir.path());
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].prompt, format!("/work-on-task {id}"), "the prompt was found after -p");

    let costs = eventually("the run's cost at the hub", || async {
        let (_, body) = hub.get(&format!("/api/session-costs?taskId={id}"), None).await;
        body["costs"].as_array().filter(|costs| !costs.is_empty()).cloned()
    })
    .await;
    assert_eq!(costs[0]["totalCostUsd"], 0.0125, "{costs:?}");
    assert_eq!(costs[0]["inputTokens"], 120);
    assert_eq!(costs[0]["outputTokens"], 45);
    assert_eq!(costs[0]["cacheReadTokens"], 7);
    assert_eq!(costs[0]["model"], "stand-in");
}

/// The `codex` harness: `codex exec --json` with the system prompt in front of the
/// runner's prompt, and Codex's JSONL events read for the answer and the tokens.
#[tokio::test]
async fn the_codex_harness_runs_codex_exec_and_reads_its_json_events() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let setup = RunnerSetup { harness: Some("codex"), ..RunnerSetup::worker(dir.path()) };
    let runner = Runner::start(&hub, setup);
    registered(&hub, &runner).await;
    let id = create(&hub, json!({"task": "Bump the version", "agentId": runner.agent_id})).await;
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    assert_eq!(done["output"], "stand-in finished: Bump the version");

    let costs = eventually("the run's tokens at the hub", || async {
        let (_, body) = hub.get(&format!("/api/session-costs?taskId={id}"), None).await;
        body["costs"].as_array().filter(|costs| !costs.is_empty()).cloned()
    })
    .await;
    assert_eq!(costs[0]["inputTokens"], 200, "{costs:?}");
    assert_eq!(costs[0]["cacheReadTokens"], 50);
    assert_eq!(costs[0]["outputTokens"], 30);
    assert_eq!(costs[0]["numTurns"], 1);
}
