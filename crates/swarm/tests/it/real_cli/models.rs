//! Per-task model (issue 41): the model a task names reaches the real CLI's own model flag
//! (`claude --model`, `codex exec --model`, `gemini --model`, `opencode run --model
//! <provider>/<model>`, `pi --model <provider>/<model>`), and
//! a task that names none runs with the runner's `--model` (`MODEL_OVERRIDE`): the scripted
//! model sees each name in the request body the CLI sends.

use serde_json::json;
use swarm_scripted_model::{Script, clis};

use super::{Cli, World, cli_tests, complete, task_id_in};

cli_tests!(claude: Claude; a_task_runs_with_its_model_and_the_runners_by_default);
cli_tests!(codex: Codex; a_task_runs_with_its_model_and_the_runners_by_default);
cli_tests!(gemini: Gemini; a_task_runs_with_its_model_and_the_runners_by_default);
cli_tests!(opencode: Opencode; a_task_runs_with_its_model_and_the_runners_by_default);
cli_tests!(pi: Pi; a_task_runs_with_its_model_and_the_runners_by_default);

/// The names the runner passes (the task's, the runner's), and the model each request then
/// names in its body.
fn models(cli: Cli) -> [(String, String); 2] {
    let both = |task: &str, runner: &str| [(task.into(), task.into()), (runner.into(), runner.into())];
    match cli {
        Cli::Claude => both("claude-task-model-1", "claude-runner-model-1"),
        // Names the pinned Codex knows, so that it offers its classic tools.
        Cli::Codex => both("gpt-5.4", "gpt-5.5"),
        // The Gemini CLI names the model in the request's path (the scripted model records it
        // as the body's `model`).
        Cli::Gemini => both("gemini-task-model-1", "gemini-runner-model-1"),
        // opencode takes `<provider>/<model>` and sends the model's id.
        Cli::Opencode => {
            let other = clis::OPENCODE_OTHER_MODEL;
            let default = swarm_scripted_model::MODEL_NAME;
            let provider = clis::OPENCODE_PROVIDER;
            [(format!("{provider}/{other}"), other.into()), (format!("{provider}/{default}"), default.into())]
        }
        // pi too: `--model <provider>/<id>`, the id sent.
        Cli::Pi => {
            let (other, default) = (clis::PI_OTHER_MODEL, swarm_scripted_model::MODEL_NAME);
            let provider = clis::PI_PROVIDER;
            [(format!("{provider}/{other}"), other.into()), (format!("{provider}/{default}"), default.into())]
        }
    }
}

async fn a_task_runs_with_its_model_and_the_runners_by_default(cli: Cli) {
    let [(task_model, task_sent), (runner_model, runner_sent)] = models(cli);
    let script = Script::new().call_tool("store-progress", complete).reply("Reported.");
    let world = World::new(cli, script).await;
    let runner = world.runner("worker", &[("MODEL_OVERRIDE", runner_model.clone())]);
    world.registered(&runner).await;

    let named = world
        .create(json!({"task": "Use the big model", "agentId": runner.agent_id, "model": task_model}))
        .await;
    assert_eq!(world.task(&named).await["model"], task_model.as_str(), "the task keeps its model");
    let done = world.task_in(&named, &["completed", "failed", "unassigned"], &runner).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    let unnamed = world.create(json!({"task": "Use the usual model", "agentId": runner.agent_id})).await;
    let done = world.task_in(&unnamed, &["completed", "failed", "unassigned"], &runner).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());

    for (task, sent) in [(&named, &task_sent), (&unnamed, &runner_sent)] {
        let about: Vec<_> = world
            .conversations_about(task)
            .into_iter()
            .filter(|c| task_id_in(c).as_deref() == Some(task.as_str()))
            .collect();
        assert!(!about.is_empty(), "no model request about {task}");
        for conversation in about {
            assert_eq!(
                conversation.body["model"],
                sent.as_str(),
                "task {task}: {}",
                conversation.body["model"]
            );
        }
    }
}
