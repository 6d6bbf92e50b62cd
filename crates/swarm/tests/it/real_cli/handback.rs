//! Work of dead agents handed on (issue 25) with a real CLI (Claude Code, pi, the Gemini
//! CLI): runner A's CLI is killed mid-run with its runner and everything they started, and
//! stays dead; once A has been offline for `--reassign-after-seconds`, the lead is told,
//! returns the task to the pool, and runner B's CLI completes it. (`handback_runners.rs`
//! tells it with the stand-in agent.)
//! pi's shell tool starts each command in a process group of its own: killing the run must
//! find it all the same.

use serde_json::json;
use swarm_hub::HubOptions;
use swarm_scripted_model::{Script, ScriptedModel};

use super::{Cli, World, cli_tests, complete, first_request, processes_in, within};
use crate::{handback_runners::FAST, support::kill::kill_run};

cli_tests!(claude: Claude; a_dead_runners_task_is_completed_by_another_runners_cli);
cli_tests!(pi: Pi; a_dead_runners_task_is_completed_by_another_runners_cli);
cli_tests!(gemini: Gemini; a_dead_runners_task_is_completed_by_another_runners_cli);
cli_tests!(opencode: Opencode; a_dead_runners_task_is_completed_by_another_runners_cli);

async fn a_dead_runners_task_is_completed_by_another_runners_cli(cli: Cli) {
    // The first run of the task sleeps in the CLI's shell tool (and is killed there);
    // the second finds the marker the first left, and reports the task completed.
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("first-run-started");
    let script = Script::new()
        .shell(&format!(
            "if [ -e '{m}' ]; then echo second run; else touch '{m}'; sleep 300; fi",
            m = marker.display()
        ))
        .call_tool("store-progress", complete)
        .reply("Reported.");
    let model = ScriptedModel::start(script).await;
    let base_url = model.openai_base_url();
    let world = World::with_hub(cli, model, &base_url, &FAST, HubOptions::default()).await;
    let lead = uuid::Uuid::new_v4().to_string();
    let (status, body) =
        world.hub.post("/api/agents", Some(&lead), json!({"name": "lead", "isLead": true})).await;
    assert_eq!(status, 201, "{body}");

    let a = world.runner("worker", &[]);
    world.registered(&a).await;
    // In token mode the agent was registered before its runner started: the task must not be
    // assigned before A polls (pi's `--version` check alone can outlast --reassign-after-seconds
    // on a busy machine, and A would count as gone before it ever came).
    within("A to wait for work", || async { a.output().contains("waiting for work").then_some(()) }).await;
    let id = world.create(json!({"task": "Outlive the runner it was asked of", "agentId": a.agent_id})).await;
    let run = within("A's CLI to run `sleep 300`", || async {
        let run = processes_in(&world.project, a.pid());
        run.iter().any(|(_, cmdline)| cmdline.ends_with("sleep 300")).then_some(run)
    })
    .await;
    let held = world.task(&id).await;
    assert_eq!(
        (held["status"].as_str(), held["agentId"].as_str()),
        (Some("in_progress"), Some(a.agent_id.as_str())),
        "{held}"
    );
    let killed = kill_run(a.pid()).await;
    for (pid, cmdline) in &run {
        assert!(killed.contains(pid), "{cmdline} ({pid}) was A's and is killed: {killed:?}");
    }
    let a_id = a.agent_id.clone();
    drop(a);
    assert_eq!(processes_in(&world.project, 0), [], "nothing of A's run is left");

    // B idles from the start. The lead is told that the task went to the backlog, and
    // returns it to the pool, where B takes it.
    let b = world.runner("worker", &[]);
    world.registered(&b).await;
    let told = within("the lead to be told", || async {
        // As a runner of ours polls (`tasks_handed_back` is our kind: see compatibility.md).
        let (status, body) = world.hub.poll_as_runner(&lead, 1).await;
        assert_eq!(status, 200, "{body}");
        (body["trigger"]["type"] == "tasks_handed_back").then_some(body["trigger"].clone())
    })
    .await;
    assert_eq!(told["handoffs"][0]["task"]["id"], id.as_str(), "{told}");
    assert_eq!(told["handoffs"][0]["fromAgentId"], a_id.as_str(), "{told}");
    assert_eq!(told["handoffs"][0]["toStatus"], "backlog", "{told}");
    assert_eq!(world.task(&id).await["status"], "backlog", "no worker takes it before the lead decides");
    let (status, body) =
        world.hub.post(&format!("/api/tasks/{id}/from-backlog"), Some(&lead), json!({})).await;
    assert_eq!(status, 200, "{body}");

    let done = world.task_in(&id, &["completed", "failed"], &b).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", b.output());
    assert_eq!(done["agentId"], b.agent_id.as_str());
    assert_eq!(done["output"], format!("scripted output for {id}"));
    let handed: Vec<&serde_json::Value> = done["logs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["eventType"] == "task_handed_back")
        .collect();
    assert_eq!(handed.len(), 1, "{done}");
    assert_eq!(handed[0]["metadata"]["fromAgentId"], a_id.as_str());
    let runs = world.conversations_about(&id).iter().filter(|c| first_request(c)).count();
    assert_eq!(runs, 2, "one CLI run on each runner");
}
