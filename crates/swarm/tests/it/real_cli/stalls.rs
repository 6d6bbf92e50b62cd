//! A run going nowhere (issue 40) is stopped by the runner with its whole process tree, and
//! its task goes back to the queue, not `failed`, with the reason on the task and on the
//! agent: a CLI silent for `STALL_SECONDS` (its model never answers), and a CLI making the
//! same tool call `TOOL_LOOP_LIMIT` times in a row. A run cut short instead (its runner
//! stopped) goes on in the same CLI session when the agent's runner comes back.

use serde_json::{Value, json};
use swarm_scripted_model::{Failure, Script};

use super::{Cli, RunnerProcess, World, complete, every_cli, first_request, processes_in, within};

every_cli!(
    a_silent_run_is_stopped_and_its_task_handed_back,
    a_tool_loop_is_stopped_and_its_task_handed_back,
    a_stopped_run_goes_on_in_its_session_when_the_runner_comes_back,
    a_killed_run_goes_on_in_its_session_when_the_runner_comes_back
);

/// How the first runner of a resume scenario ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CutShort {
    /// SIGTERM: it stops its run and pauses the task.
    Stopped,
    /// SIGKILL, with everything it started: the task stays `in_progress` for the agent.
    Killed,
}

/// Back in the queue and never failed, with `said` in the runner's note on the task.
async fn handed_back(world: &World, runner: &RunnerProcess, task_id: &str, said: &str) -> Value {
    let seen = within("the task to be handed back with the reason", || async {
        let seen = world.task(task_id).await;
        let noted = seen["progress"].as_str().is_some_and(|progress| progress.contains(said));
        let released = seen["logs"].as_array().unwrap().iter().any(|event| event["newValue"] == "unassigned");
        (noted && released).then_some(seen)
    })
    .await;
    assert!(seen["failureReason"].is_null(), "{seen}\n{}", runner.output());
    let failed = seen["logs"].as_array().unwrap().iter().any(|event| event["newValue"] == "failed");
    assert!(!failed, "a task whose run went nowhere was failed: {seen}");
    seen
}

/// The agent's `statusReason` names `said` once the runner stopped (ENV_FAILURE_LIMIT).
async fn reason_on_the_agent(world: &World, runner: &mut RunnerProcess, said: &str) {
    let status = runner.exited().await;
    assert!(!status.success(), "{}", runner.output());
    let (status, agent) = world.hub.get(&format!("/api/agents/{}", runner.agent_id), None).await;
    assert_eq!(status, 200, "{agent}");
    let reason = agent["statusReason"].as_str().unwrap_or_default();
    assert!(reason.contains(said), "the reason is on the agent: {agent}\n{}", runner.output());
}

async fn a_silent_run_is_stopped_and_its_task_handed_back(cli: Cli) {
    let world = World::new(cli, Script::new().call_tool("store-progress", complete).reply("Reported.")).await;
    world.model.set_failure(Some(Failure::Hang));
    let lead = uuid::Uuid::new_v4().to_string();
    let (status, body) =
        world.hub.post("/api/agents", Some(&lead), json!({"name": "lead", "isLead": true})).await;
    assert_eq!(status, 201, "{body}");
    // Two runs going nowhere stop the runner: it is alive after the first, whose
    // processes the runner itself must have stopped.
    // Longer than the CLI's silent start on two shared cores: the Gemini CLI and opencode
    // say nothing for 10 to 30 s before their first model request.
    let stall = match cli {
        Cli::Claude | Cli::Codex | Cli::Pi => "5",
        _ => "40",
    };
    let env = [
        ("STALL_SECONDS", stall.to_string()),
        ("ENV_FAILURE_LIMIT", "2".to_string()),
        // Only the stall may stop it.
        ("MODEL_UNREACHABLE_MS", "3600000".to_string()),
    ];
    let mut runner = world.runner("worker", &env);
    world.registered(&runner).await;
    let id = world.create(json!({"task": "Fix the build", "agentId": runner.agent_id})).await;
    // The run's processes once it asked the model, which leaves it waiting: the CLI and
    // what it started.
    let run = within("the run to ask the model", || async {
        let run = processes_in(&world.project, runner.pid());
        (!world.model.requests().is_empty() && !run.is_empty()).then_some(run)
    })
    .await;

    handed_back(&world, &runner, &id, "the run stalled").await;
    let told = within("the lead to be told", || async {
        let (status, body) = world.hub.poll_as_runner(&lead, 1).await;
        assert_eq!(status, 200, "{body}");
        (body["trigger"]["type"] == "tasks_handed_back").then_some(body["trigger"].clone())
    })
    .await;
    let handoff = &told["handoffs"][0];
    assert_eq!((&handoff["task"]["id"], &handoff["fromAgentId"]), (&json!(id), &json!(runner.agent_id)));
    assert!(handoff["reason"].as_str().unwrap().contains("the run stalled"), "{told}");
    let left = within("the stalled run's processes to be gone", || async {
        let now = processes_in(&world.project, runner.pid());
        let left: Vec<_> = run.iter().filter(|process| now.contains(process)).cloned().collect();
        left.is_empty().then_some(now)
    })
    .await;
    assert!(
        crate::runner::is_alive(u64::from(runner.pid())),
        "the runner, not its end, stopped the run: {left:?}\n{}",
        runner.output()
    );
    reason_on_the_agent(&world, &mut runner, "STALL_SECONDS").await;
    let seen = world.task(&id).await;
    assert_eq!(seen["status"], "unassigned", "back in the queue: {seen}\n{}", runner.output());
}

async fn a_tool_loop_is_stopped_and_its_task_handed_back(cli: Cli) {
    let script = (0..6)
        .fold(Script::new(), |script, _| script.shell("echo once more"))
        .call_tool("store-progress", complete)
        .reply("Reported.");
    let world = World::new(cli, script).await;
    let env = [("TOOL_LOOP_LIMIT", "3".to_string()), ("ENV_FAILURE_LIMIT", "1".to_string())];
    let mut runner = world.runner("worker", &env);
    world.registered(&runner).await;
    let id = world.create(json!({"task": "Fix the build", "agentId": runner.agent_id})).await;

    let seen = handed_back(&world, &runner, &id, "the same tool call 3 times in a row").await;
    let progress = seen["progress"].as_str().unwrap();
    assert!(progress.contains("echo once more"), "the call is named: {progress}");
    reason_on_the_agent(&world, &mut runner, "the same tool call 3 times in a row").await;
    let seen = world.task(&id).await;
    assert_eq!(seen["status"], "unassigned", "back in the queue: {seen}\n{}", runner.output());
}

/// The runner is stopped (SIGTERM) while the first run sleeps in the CLI's shell tool: the
/// task is paused. The agent's runner started again resumes it in the first run's session
/// (recorded at the hub as soon as the CLI named it): the model sees the first run's
/// conversation, and the script goes on from its next step.
async fn a_stopped_run_goes_on_in_its_session_when_the_runner_comes_back(cli: Cli) {
    goes_on_in_its_session(cli, CutShort::Stopped).await;
}

/// The same when the runner is killed (SIGKILL) with its CLI: the task is found
/// `in_progress` for the agent at the next start, and resumed in the recorded session.
async fn a_killed_run_goes_on_in_its_session_when_the_runner_comes_back(cli: Cli) {
    goes_on_in_its_session(cli, CutShort::Killed).await;
}

async fn goes_on_in_its_session(cli: Cli, cut: CutShort) {
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("first-run-started");
    let script = Script::new()
        .shell(&format!(
            "if [ -e '{m}' ]; then echo second run; else touch '{m}'; sleep 300; fi",
            m = marker.display()
        ))
        .call_tool("store-progress", complete)
        .reply("Reported.");
    let world = World::new(cli, script).await;
    let agent_id = uuid::Uuid::new_v4().to_string();
    let mut first = world.runner_as("worker", &agent_id, &[("SHUTDOWN_TIMEOUT", "1000".to_string())]);
    world.registered(&first).await;
    let id = world.create(json!({"task": "Outlive a runner's restart", "agentId": agent_id})).await;
    within("the first run to sleep in its shell tool", || async {
        let run = processes_in(&world.project, first.pid());
        run.iter().any(|(_, cmdline)| cmdline.ends_with("sleep 300")).then_some(())
    })
    .await;
    let recorded = within("the run's session to be recorded at the hub", || async {
        let seen = world.task(&id).await;
        seen["claudeSessionId"].as_str().map(|session| (session.to_string(), seen["provider"].clone()))
    })
    .await;
    assert_eq!(recorded.1, cli.name(), "recorded by the CLI that can resume it");
    let left = match cut {
        CutShort::Stopped => {
            let stopped =
                std::process::Command::new("kill").args(["-TERM", &first.pid().to_string()]).status();
            assert!(stopped.is_ok_and(|status| status.success()));
            first.exited().await;
            "paused"
        }
        CutShort::Killed => {
            crate::support::kill::kill_run(first.pid()).await;
            first.exited().await;
            "in_progress"
        }
    };
    let held = world.task(&id).await;
    assert_eq!(held["status"], left, "{held}\n{}", first.output());

    let earlier = world.model.conversations().len();
    let second = world.runner_as("worker", &agent_id, &[]);
    let done = world.task_in(&id, &["completed", "failed"], &second).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", second.output());
    let resumed =
        world.model.conversations().into_iter().nth(earlier).expect("the second run asked the model");
    match cli {
        Cli::Claude | Cli::Codex => assert!(
            !first_request(&resumed),
            "the second run went on in the first run's session: {:?}\n{}",
            resumed.user_texts(),
            second.output()
        ),
        // A CLI that keeps no session of a turn cut short (the Gemini CLI) is asked to resume
        // it, refuses, and the work goes on in a new session.
        _ => assert!(
            !first_request(&resumed) || second.output().contains("could not resume session"),
            "the second run tried the first run's session: {}",
            second.output()
        ),
    }
}
