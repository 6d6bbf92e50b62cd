//! A run going nowhere (issue 40) is stopped by the runner with its whole process tree, and
//! its task goes back to the queue, not `failed`, with the reason on the task and on the
//! agent: a CLI silent for `STALL_SECONDS` (its model never answers), and a CLI making the
//! same tool call `TOOL_LOOP_LIMIT` times in a row.

use serde_json::{Value, json};
use swarm_scripted_model::{Failure, Script};

use super::{Cli, RunnerProcess, World, complete, every_cli, processes_in, within};

every_cli!(a_silent_run_is_stopped_and_its_task_handed_back, a_tool_loop_is_stopped_and_its_task_handed_back);

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
    let env = [
        ("STALL_SECONDS", "5".to_string()),
        ("ENV_FAILURE_LIMIT", "2".to_string()),
        // Only the stall may stop it.
        ("MODEL_UNREACHABLE_MS", "3600000".to_string()),
    ];
    let mut runner = world.runner("worker", &env);
    world.registered(&runner).await;
    let id = world.create(json!({"task": "Fix the build", "agentId": runner.agent_id})).await;
    within("the CLI to wait on the model", || async { first_model_turn(&world) }).await;
    // The run's processes as the model leaves it waiting: the CLI and what it started.
    let run = processes_in(&world.project, runner.pid());
    assert!(!run.is_empty(), "the run is under way:\n{}", runner.output());

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

/// Some model turn reached the model (and hangs there).
fn first_model_turn(world: &World) -> Option<()> {
    (!world.model.conversations().is_empty()).then_some(())
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
