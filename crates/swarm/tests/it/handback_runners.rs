//! Work of dead agents handed on (issue 25) with real runners: `swarm worker` processes
//! driving the stand-in agent, killed with SIGKILL together with everything they started.
//! A task asked of a runner that died goes to the backlog once its agent has been offline
//! for `--reassign-after-seconds`; the lead's own runner is told, its agent returns the
//! task to the pool, and another runner completes it. A runner back in time keeps its
//! task and finishes it. (`handback.rs` tells the same stories over raw HTTP;
//! `real_cli::handback` with the real Claude Code.)

use serde_json::{Value, json};

use crate::{
    hub::{Hub, sqlite_file},
    runner::{Runner, RunnerSetup, create, event_types, records, registered, task, task_in},
    support::{eventually, kill::kill_run},
};

/// Short leases and a short hand-back delay, so that the stories take seconds.
pub(crate) const FAST: [&str; 6] =
    ["--lease-seconds", "2", "--rescue-interval-seconds", "1", "--reassign-after-seconds", "3"];

fn handed_back_from(task: &Value) -> Vec<String> {
    task["logs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["eventType"] == "task_handed_back")
        .map(|event| event["metadata"]["fromAgentId"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The lead runner's runs about work handed back, by their first line (the count).
fn handed_back_runs(lead_dir: &std::path::Path) -> Vec<String> {
    records(lead_dir)
        .into_iter()
        .filter(|run| run.trigger.as_deref() == Some("tasks_handed_back"))
        .map(|run| run.prompt)
        .collect()
}

fn lead(hub: &Hub, dir: &std::path::Path) -> Runner {
    Runner::start(hub, RunnerSetup { role: "lead", ..RunnerSetup::worker(dir) })
}

#[tokio::test]
async fn a_dead_runners_task_goes_through_the_lead_to_another_runner() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(&sqlite_file(dir.path()), None, &FAST);
    let lead_dir = dir.path().join("lead");
    let lead = lead(&hub, &lead_dir);
    registered(&hub, &lead).await;

    // A task asked of A by name: a lost lease only gives it back to A, pending.
    let a_dir = dir.path().join("a");
    let mut a = Runner::start(&hub, RunnerSetup::worker(&a_dir).env("STAND_IN_BEHAVIOUR", "hang"));
    registered(&hub, &a).await;
    let id = create(&hub, json!({"task": "outlive the runner it was asked of", "agentId": a.agent_id})).await;
    let run = eventually("A's agent to start", || async { records(&a_dir).pop() }).await;
    let held = task(&hub, &id).await;
    assert_eq!(
        (held["status"].as_str(), held["agentId"].as_str()),
        (Some("in_progress"), Some(a.agent_id.as_str()))
    );
    let killed = kill_run(a.pid()).await;
    assert!(killed.contains(&(run.pid as u32)), "A's agent {} was among {killed:?}", run.pid);
    a.kill();

    // B idles from the start. Once A has been gone long enough the task goes to the
    // backlog, the lead's runner is told, its agent returns the task to the pool, and B
    // takes it.
    let b_dir = dir.path().join("b");
    let b = Runner::start(&hub, RunnerSetup::worker(&b_dir));
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", b.output());
    assert_eq!(done["agentId"], b.agent_id.as_str(), "{done}");
    assert_eq!(handed_back_from(&done), [a.agent_id.clone()], "{done}");
    let events = event_types(&done);
    assert!(events.contains(&"task_lease_expired".to_string()), "{events:?}");
    let b_runs = records(&b_dir);
    assert_eq!(b_runs.len(), 1, "{b_runs:?}");
    assert_eq!(b_runs[0].prompt, format!("/work-on-task {id}"));
    let a_runs = records(&a_dir);
    assert_eq!((a_runs.len(), a_runs[0].end), (1, None), "A's one run never ended: {a_runs:?}");
    assert_eq!(crate::runner::agent(&hub, &a.agent_id).await.unwrap()["status"], "offline");
    let told = handed_back_runs(&lead_dir);
    assert_eq!(told, ["1 task(s) were taken from agents that stayed offline:"], "{}", lead.output());
    let returned = done["logs"].as_array().unwrap().iter().any(|event| {
        (event["oldValue"].as_str(), event["newValue"].as_str(), event["agentId"].as_str())
            == (Some("backlog"), Some("unassigned"), Some(lead.agent_id.as_str()))
    });
    assert!(returned, "the lead's agent returned it to the pool: {done}");
}

#[tokio::test]
async fn a_runner_back_in_time_keeps_its_task_and_finishes_it() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(&sqlite_file(dir.path()), None, &FAST);
    let lead_dir = dir.path().join("lead");
    let lead = lead(&hub, &lead_dir);
    registered(&hub, &lead).await;

    let a_id = uuid::Uuid::new_v4().to_string();
    let first_dir = dir.path().join("a-first");
    let mut first = Runner::start(
        &hub,
        RunnerSetup { agent_id: a_id.clone(), ..RunnerSetup::worker(&first_dir) }
            .env("STAND_IN_BEHAVIOUR", "hang"),
    );
    registered(&hub, &first).await;
    let id =
        create(&hub, json!({"task": "interrupted, then finished by the same agent", "agentId": a_id})).await;
    eventually("A's agent to start", || async { records(&first_dir).pop() }).await;
    kill_run(first.pid()).await;
    first.kill();

    // A control that falls silent after A died and stays away: when its task moves, A's
    // would have moved too, had A not come back.
    let control = uuid::Uuid::new_v4().to_string();
    let (status, body) = hub.post("/api/agents", Some(&control), json!({"name": "control"})).await;
    assert_eq!(status, 201, "{body}");
    let control_task = create(&hub, json!({"task": "asked of the control", "agentId": control})).await;

    // A comes back at once; its agent works until the test lets it finish.
    let gate = dir.path().join("finish");
    let second_dir = dir.path().join("a-second");
    let second = Runner::start(
        &hub,
        RunnerSetup { agent_id: a_id.clone(), ..RunnerSetup::worker(&second_dir) }
            .env("STAND_IN_BEHAVIOUR", "hang")
            .env("STAND_IN_HOLD_UNTIL", gate.display().to_string()),
    );
    let resumed =
        eventually("A's new runner to start its agent", || async { records(&second_dir).pop() }).await;
    assert_eq!(resumed.prompt, format!("/work-on-task {id}"));
    eventually("the control's task to be handed back", || async {
        (!handed_back_from(&task(&hub, &control_task).await).is_empty()).then_some(())
    })
    .await;
    let kept = task(&hub, &id).await;
    assert_eq!(
        (kept["status"].as_str(), kept["agentId"].as_str()),
        (Some("in_progress"), Some(a_id.as_str())),
        "{kept}"
    );

    std::fs::write(&gate, "").unwrap();
    let done = task_in(&hub, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", second.output());
    assert_eq!(done["agentId"], a_id.as_str());
    assert_eq!(handed_back_from(&done), Vec::<String>::new(), "{done}");
    assert!(!event_types(&done).contains(&"task_released".to_string()), "{done}");

    // The lead hears of the control's task, and of nothing else.
    let told = eventually("the lead's runner to be told", || async {
        let runs = handed_back_runs(&lead_dir);
        (!runs.is_empty()).then_some(runs)
    })
    .await;
    assert_eq!(told, ["1 task(s) were taken from agents that stayed offline:"], "{}", lead.output());
    assert_eq!(handed_back_from(&task(&hub, &control_task).await), [control]);
}
