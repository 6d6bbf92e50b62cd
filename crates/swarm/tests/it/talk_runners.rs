//! Chat and mail with real runners and the stand-in agent:
//! - the mailbox seed's waiting pattern end to end, through Claude Code's hooks as
//!   `swarm connect` installs them: a worker sends an urgent help request awaiting a
//!   response and stops (its Stop hook alerts the coordinator); the lead is woken by
//!   the urgent mail and replies; the reply wakes the worker, whose UserPromptSubmit
//!   hook injects it, and its waiting state is over;
//! - two lead runners for one lead never answer a mention twice, and a crashed one's
//!   claim comes back after its lease and is answered.

use std::{path::Path, process::Command};

use serde_json::{Value, json};

use crate::{
    hub::{Hub, SWARM, sqlite_file},
    mcp_client::{Revision, connect_http, new_agent_id, ok},
    runner::{Runner, RunnerSetup, is_alive, records, records_dir, registered},
    support::eventually,
};

/// What the stand-in recorded of one hook run: `<pid>.hook-<event>.<n>`.
fn hook_outputs(dir: &Path, event: &str) -> Vec<(u64, Value)> {
    let mut outputs = Vec::new();
    for entry in std::fs::read_dir(records_dir(dir)).unwrap().map_while(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((pid, rest)) = name.split_once('.') else { continue };
        if !rest.starts_with(&format!("hook-{event}.")) {
            continue;
        }
        let recorded: Value = serde_json::from_str(&std::fs::read_to_string(entry.path()).unwrap()).unwrap();
        let stdout = recorded["stdout"].as_str().unwrap_or_default();
        let printed =
            if stdout.trim().is_empty() { Value::Null } else { serde_json::from_str(stdout).unwrap() };
        assert_eq!(recorded["exitCode"], 0, "a hook never fails the agent: {recorded}");
        outputs.push((pid.parse().unwrap(), printed));
    }
    outputs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_waiting_on_the_coordinator_gets_its_answer_through_the_hooks() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let connected = Command::new(SWARM)
        .args(["connect", "--url", &hub.base_url, "--hook-command", SWARM])
        .current_dir(&project)
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert!(connected.status.success(), "{}", String::from_utf8_lossy(&connected.stderr));
    let hook_dir = dir.path().join("hooks").display().to_string();

    let (worker_dir, lead_dir) = (dir.path().join("worker"), dir.path().join("lead"));
    let worker = Runner::start(
        &hub,
        RunnerSetup { harness: Some("claude"), cwd: Some(&project), ..RunnerSetup::worker(&worker_dir) }
            .env("SWARM_HOOK_DIR", hook_dir.clone()),
    );
    // The lead takes a moment before answering, so that the worker has surely stopped
    // (and its Stop hook spoken) before the answer exists.
    let lead = Runner::start(
        &hub,
        RunnerSetup {
            role: "lead",
            harness: Some("claude"),
            cwd: Some(&project),
            ..RunnerSetup::worker(&lead_dir)
        }
        .env("SWARM_HOOK_DIR", hook_dir)
        .env("STAND_IN_SLEEP_MS", "1500"),
    );
    registered(&hub, &worker).await;
    registered(&hub, &lead).await;

    let question = "Which database should the cache use?";
    let (status, task) = hub
        .post(
            "/api/tasks",
            None,
            json!({"task": format!("Ask the coordinator: {question}"), "agentId": worker.agent_id}),
        )
        .await;
    assert_eq!(status, 201, "{task}");

    // The worker asked and stopped; its Stop hook told the coordinator it waits.
    let alert = eventually("the worker's Stop hook alert", || async {
        hook_outputs(&worker_dir, "Stop")
            .into_iter()
            .find_map(|(_, printed)| printed.get("systemMessage").cloned())
    })
    .await;
    let alert = alert.as_str().unwrap();
    assert!(alert.contains("stopped waiting for a response") && alert.contains(question), "{alert}");

    // The lead was woken by the urgent mail (a run about it) and answered.
    let reply = eventually("the lead's answer", || async {
        let query = format!("/api/mail?agentId={}&box=inbox", worker.agent_id);
        let (_, page) = hub.get(&query, None).await;
        page["mail"].as_array().and_then(|mail| mail.first().cloned())
    })
    .await;
    assert_eq!(reply["fromAgentId"], lead.agent_id.as_str(), "{reply}");
    assert_eq!(reply["priority"], "urgent");
    let lead_runs = records(&lead_dir);
    assert!(lead_runs.iter().any(|run| run.prompt == "You have 1 urgent mail:"), "{lead_runs:?}");

    // The answer woke the worker; Claude Code's UserPromptSubmit hook put it in front
    // of the agent, and the worker no longer waits.
    let body = reply["body"].as_str().unwrap().to_string();
    let injected = eventually("the answer injected into the worker's next prompt", || async {
        hook_outputs(&worker_dir, "UserPromptSubmit").into_iter().find_map(|(_, printed)| {
            let context = printed["hookSpecificOutput"]["additionalContext"].as_str()?.to_string();
            context.contains(&body).then_some(context)
        })
    })
    .await;
    assert!(injected.contains("[URGENT] response from"), "{injected}");
    let (_, counts) = hub.get(&format!("/api/mail/unread-count?agentId={}", worker.agent_id), None).await;
    assert_eq!(counts["waitingForResponse"], false, "{counts}");
    assert_eq!(counts["unread"], 0, "the hook delivered it: {counts}");
    let (_, done) = hub.get(&format!("/api/tasks/{}", task["id"].as_str().unwrap()), None).await;
    assert_eq!(done["status"], "completed", "{done}");
}

async fn thread_replies(hub: &Hub, channel: &str, message: &str) -> usize {
    let (status, thread) = hub.get(&format!("/api/channels/{channel}/messages/{message}/thread"), None).await;
    assert_eq!(status, 200, "{thread}");
    thread["messages"].as_array().unwrap().len() - 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_lead_runners_never_answer_a_mention_twice_and_a_crashed_claim_comes_back() {
    const GENERAL: &str = "00000000-0000-7000-8000-000000000001";
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start_with(
        &sqlite_file(dir.path()),
        None,
        &["--lease-seconds", "2", "--rescue-interval-seconds", "1"],
    );
    let lead_id = new_agent_id();
    fn lead_setup<'a>(dir: &'a Path, lead_id: &str) -> RunnerSetup<'a> {
        RunnerSetup { role: "lead", agent_id: lead_id.to_string(), ..RunnerSetup::worker(dir) }
    }

    // A lead runner whose agent hangs holds the claim, and crashes.
    let crashed_dir = dir.path().join("crashed");
    let mut crashed =
        Runner::start(&hub, lead_setup(&crashed_dir, &lead_id).env("STAND_IN_BEHAVIOUR", "hang"));
    registered(&hub, &crashed).await;
    let poster = new_agent_id();
    let poster_client = connect_http(&hub, Some(&poster), Revision::Initialize).await;
    ok(&poster_client, "join-swarm", json!({"name": "poster"})).await;
    let first =
        ok(&poster_client, "post-message", json!({"content": "lead, look", "mentions": [lead_id]})).await;
    let first = first["chatMessage"]["id"].as_str().unwrap().to_string();
    let run =
        eventually("the crashing runner to take the mention", || async { records(&crashed_dir).pop() }).await;
    assert!(run.prompt.starts_with("You have 1 unread mention(s)"), "{}", run.prompt);
    crashed.kill();
    eventually("the hung agent to die with its runner", || async { (!is_alive(run.pid)).then_some(()) })
        .await;

    // Two live runners for the same lead.
    let (one_dir, two_dir) = (dir.path().join("one"), dir.path().join("two"));
    let one = Runner::start(&hub, lead_setup(&one_dir, &lead_id));
    let two = Runner::start(&hub, lead_setup(&two_dir, &lead_id));
    eventually("the crashed runner's mention answered after its lease", || async {
        (thread_replies(&hub, GENERAL, &first).await == 1).then_some(())
    })
    .await;

    // Mentions across channels, posted while both runners work.
    let mut posted = Vec::new();
    for n in 0..8 {
        let created = ok(&poster_client, "create-channel", json!({"name": format!("room-{n}")})).await;
        let channel = created["channel"]["id"].as_str().unwrap().to_string();
        for round in 0..2 {
            let message = ok(
                &poster_client,
                "post-message",
                json!({"channelId": channel, "content": format!("question {round}"), "mentions": [lead_id]}),
            )
            .await;
            posted.push((channel.clone(), message["chatMessage"]["id"].as_str().unwrap().to_string()));
        }
    }
    eventually("every mention answered", || async {
        for (channel, message) in &posted {
            if thread_replies(&hub, channel, message).await == 0 {
                return None;
            }
        }
        Some(())
    })
    .await;
    // A duplicate would come from a run still under way: count once every run has
    // ended and both runners wait for work again.
    eventually("both runners idle, every run ended", || async {
        let ended = records(&one_dir).iter().chain(records(&two_dir).iter()).all(|run| run.end.is_some());
        (ended && hub.activity().parked_polls >= 2).then_some(())
    })
    .await;
    for (channel, message) in &posted {
        assert_eq!(thread_replies(&hub, channel, message).await, 1, "message {message} answered once");
    }
    assert_eq!(thread_replies(&hub, GENERAL, &first).await, 1, "the rescued mention answered once");
    let runs = records(&one_dir).len() + records(&two_dir).len();
    assert!(runs >= 2, "the runners took the mentions in runs of their own: {runs}");
    drop((one, two));
}
