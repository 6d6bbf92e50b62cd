//! Issue #20 told as users tell it, with the real `swarm lead` / `swarm worker` runners
//! and the stand-in agent (`lead_stories_slack.rs` has the Slack, cron and interactive
//! stories; `real_cli::lead_stories` the same with the real agent CLIs):
//! - a lead run that ignores its inbox message has it again on the next poll, at once,
//!   not after its lease;
//! - after `MAX_DELIVERIES` hand-overs the message is a dead letter, shown, and back in
//!   the lead's hands once the operator requeues it;
//! - two mentions in a row wake the lead twice, the second posted while the first run is
//!   still under way;
//! - a lead runner killed with SIGKILL and restarted picks up the task result its first
//!   life was handling;
//! - a reply to low-priority mail the agent awaits wakes its runner.
//!
//! Every hub keeps its default 45 s lease: a claim that came back only through its lease
//! would come after the tests' 30 s limit, so these stories fail unless the claim is
//! given back when the run (or the runner) ends.

use std::path::Path;

use serde_json::{Value, json};

use crate::{
    hub::{Hub, sqlite_file},
    mcp_client::{Revision, connect_http, new_agent_id, ok},
    runner::{Runner, RunnerSetup, is_alive, records_dir, registered},
    slack_stand_in::{BOT_USER, SlackStandIn},
    support::eventually,
};

/// Every run the stand-in recorded in `dir`: its start record (`prompt` is the first
/// line, `text` the whole prompt), with `ended` and `answer` from its end record.
pub(crate) fn runs(dir: &Path) -> Vec<Value> {
    let read =
        |path: &Path| -> Option<Value> { serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok() };
    let mut found: Vec<Value> = std::fs::read_dir(records_dir(dir))
        .map(|entries| entries.map_while(Result::ok).map(|entry| entry.path()).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|path| path.extension().is_some_and(|extension| extension == "start"))
        .filter_map(|path| {
            let mut run = read(&path)?;
            let end = read(&path.with_extension("end"));
            run["ended"] = json!(end.is_some());
            run["answer"] = end.map(|end| end["text"].clone()).unwrap_or(Value::Null);
            Some(run)
        })
        .collect();
    found.sort_by_key(|run| run["at"].as_str().unwrap_or_default().parse::<u128>().unwrap_or(0));
    found
}

/// The runs whose prompt starts with `prefix`.
pub(crate) fn runs_of(dir: &Path, prefix: &str) -> Vec<Value> {
    runs(dir)
        .into_iter()
        .filter(|run| run["prompt"].as_str().is_some_and(|p| p.starts_with(prefix)))
        .collect()
}

pub(crate) fn lead_setup<'a>(dir: &'a Path, agent_id: &str) -> RunnerSetup<'a> {
    RunnerSetup { role: "lead", agent_id: agent_id.to_string(), ..RunnerSetup::worker(dir) }
}

/// A hub whose Slack bridge talks to `stand_in` over Socket Mode, with `extra` flags.
pub(crate) async fn slack_hub(stand_in: &SlackStandIn, dir: &Path, extra: &[&str]) -> Hub {
    let api = stand_in.api_url.clone();
    let mut flags = vec![
        "--slack-bot-token",
        "xoxb-test",
        "--slack-app-token",
        "xapp-test",
        "--slack-signing-secret",
        "test-signing-secret",
        "--slack-api-url",
        &api,
        "--slack-allowed-user-ids",
        "U1",
    ];
    flags.extend(extra);
    let hub = Hub::start_with(&sqlite_file(dir), None, &flags);
    stand_in.wait_connected(1).await;
    hub
}

/// `@bot <text>` from U1 in C1, starting the thread `ts`.
pub(crate) async fn mention_bot(stand_in: &SlackStandIn, ts: &str, text: &str) {
    let event = json!({"type": "app_mention", "user": "U1", "channel": "C1", "ts": ts,
                       "text": format!("<@{BOT_USER}> {text}")});
    stand_in.push_event(&format!("env-{ts}"), &format!("Ev{ts}"), event).await;
}

pub(crate) async fn inbox(hub: &Hub, status: &str) -> Vec<Value> {
    let (code, body) = hub.get(&format!("/api/inbox?status={status}"), None).await;
    assert_eq!(code, 200, "{body}");
    body["messages"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lead_stories_a_run_that_ignores_its_inbox_message_hands_it_to_the_next_poll() {
    let dir = tempfile::tempdir().unwrap();
    let stand_in = SlackStandIn::start().await;
    let hub = slack_hub(&stand_in, dir.path(), &[]).await;
    // A lead whose agent reads the prompt and does nothing with it.
    let lead =
        Runner::start(&hub, lead_setup(dir.path(), &new_agent_id()).env("STAND_IN_BEHAVIOUR", "silent"));
    registered(&hub, &lead).await;

    mention_bot(&stand_in, "100.1", "what is the release status?").await;
    let id = eventually("the message in the lead's inbox", || async {
        inbox(&hub, "unread,processing").await.first().and_then(|m| m["id"].as_str().map(str::to_string))
    })
    .await;
    let handed = eventually("the message handed to a second run", || async {
        let runs: Vec<Value> = runs_of(dir.path(), "You have 1 inbox message(s)")
            .into_iter()
            .filter(|run| run["text"].as_str().is_some_and(|text| text.contains(&id)))
            .collect();
        (runs.len() >= 2).then_some(runs)
    })
    .await;
    assert_eq!(handed[0]["ended"], true, "the first run had ended: {handed:?}");
    assert!(lead.output().contains("offered again"), "the runner gave it back:\n{}", lead.output());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lead_stories_an_unhandled_message_is_dead_lettered_shown_and_requeued_by_the_operator() {
    let dir = tempfile::tempdir().unwrap();
    let stand_in = SlackStandIn::start().await;
    let hub = slack_hub(&stand_in, dir.path(), &["--max-deliveries", "2"]).await;
    let lead_id = new_agent_id();
    let silent_dir = dir.path().join("silent");
    let mut silent =
        Runner::start(&hub, lead_setup(&silent_dir, &lead_id).env("STAND_IN_BEHAVIOUR", "silent"));
    registered(&hub, &silent).await;

    mention_bot(&stand_in, "200.1", "can you check the nightly build?").await;
    let dead = eventually("the message set aside as a dead letter", || async {
        inbox(&hub, "dead_letter").await.first().cloned()
    })
    .await;
    let id = dead["id"].as_str().unwrap().to_string();
    let handed = runs_of(&silent_dir, "You have 1 inbox message(s)");
    assert_eq!(handed.len(), 2, "handed over MAX_DELIVERIES times, then no more: {handed:?}");
    assert!(inbox(&hub, "unread,processing").await.is_empty(), "no longer offered");
    // The runner stops; the agent is fixed; the operator puts the message back.
    assert!(silent.terminate().success(), "{}", silent.output());

    let (status, requeued) = hub.post(&format!("/api/inbox/{id}/requeue"), None, json!({})).await;
    assert_eq!(status, 200, "{requeued}");
    let answering_dir = dir.path().join("answering");
    let answering = Runner::start(&hub, lead_setup(&answering_dir, &lead_id));
    let reply = stand_in
        .wait_post("the lead's answer after the requeue", |post| {
            post["thread_ts"] == "200.1" && post["text"] == format!("stand-in answer to {id}")
        })
        .await;
    assert_eq!(reply["icon_emoji"], ":crown:");
    // The reply reaches Slack before the message is marked answered, in the same tool call.
    let answered = eventually("the message marked responded", || async {
        let (_, message) = hub.get(&format!("/api/inbox?agentId={lead_id}&status=responded"), None).await;
        message["messages"][0]["id"].as_str().map(str::to_string)
    })
    .await;
    assert_eq!(answered, id);
    drop(answering);
}

async fn thread_replies(hub: &Hub, channel: &str, message: &str) -> usize {
    let (status, thread) = hub.get(&format!("/api/channels/{channel}/messages/{message}/thread"), None).await;
    assert_eq!(status, 200, "{thread}");
    thread["messages"].as_array().unwrap().len() - 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lead_stories_two_mentions_in_a_row_wake_the_lead_twice() {
    const GENERAL: &str = "00000000-0000-7000-8000-000000000001";
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let lead_id = new_agent_id();
    let gate = dir.path().join("let-the-run-end");
    // The lead's run answers what it read, then stays until the test opens the gate.
    let setup = lead_setup(dir.path(), &lead_id)
        .env("STAND_IN_HOLD_UNTIL", gate.display().to_string())
        .env("STAND_IN_HOLD_ONLY", "You have");
    let lead = Runner::start(&hub, setup);
    registered(&hub, &lead).await;
    let poster = connect_http(&hub, Some(&new_agent_id()), Revision::Initialize).await;
    ok(&poster, "join-swarm", json!({"name": "poster"})).await;
    let post = async |text: &str| {
        let posted = ok(&poster, "post-message", json!({"content": text, "mentions": [lead_id]})).await;
        posted["chatMessage"]["id"].as_str().unwrap().to_string()
    };

    let first = post("lead, is the release branch cut?").await;
    eventually("the first mention answered", || async {
        (thread_replies(&hub, GENERAL, &first).await == 1).then_some(())
    })
    .await;
    let second = post("lead, and who reviews it?").await;
    let under_way = runs(dir.path());
    assert_eq!(under_way.len(), 1, "{under_way:?}");
    assert_eq!(under_way[0]["ended"], false, "the second mention came while the first run was under way");
    std::fs::write(&gate, "").unwrap();

    eventually("the second mention answered", || async {
        (thread_replies(&hub, GENERAL, &second).await == 1).then_some(())
    })
    .await;
    let woken = runs_of(dir.path(), "You have 1 unread mention(s)");
    assert_eq!(woken.len(), 2, "one wake-up per mention: {woken:?}");
    assert!(woken[1]["text"].as_str().unwrap().contains("who reviews it"), "{}", woken[1]);
    assert_eq!(thread_replies(&hub, GENERAL, &first).await, 1, "the first mention answered once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lead_stories_a_lead_runner_killed_and_restarted_picks_up_its_pending_result() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let worker_dir = dir.path().join("worker");
    let worker = Runner::start(&hub, RunnerSetup::worker(&worker_dir));
    registered(&hub, &worker).await;
    // One folder for both lives of the lead runner: the same log dir (where it keeps
    // its process id) and the same CLI sessions.
    let lead_dir = dir.path().join("lead");
    let lead_id = new_agent_id();
    let never = dir.path().join("never");
    let first_life = RunnerSetup { harness: Some("claude"), ..lead_setup(&lead_dir, &lead_id) }
        .env("STAND_IN_HOLD_UNTIL", never.display().to_string())
        .env("STAND_IN_HOLD_ONLY", "/task-result");
    let mut first = Runner::start(&hub, first_life);
    registered(&hub, &first).await;
    let (status, created) = hub
        .post(
            "/api/triggers",
            None,
            json!({"name": "release-check", "type": "manual", "target": "lead", "sessionMode": "persistent",
                   "prompt": "Check the release: {{payload}}"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let (status, fired) = hub
        .post("/api/triggers/release-check/fire", None, json!({"payload": "v2.1", "sessionKey": "v2.1"}))
        .await;
    assert_eq!(status, 201, "{fired}");
    let trigger_task = fired["task"]["id"].as_str().unwrap().to_string();

    // The lead delegated from its trigger session; the worker finished; the result run
    // started and is under way when the runner dies.
    let holding =
        eventually("the result run", || async { runs_of(&lead_dir, "/task-result").into_iter().next() })
            .await;
    let session = runs_of(&lead_dir, "/work-on-task")[0]["sessionId"].clone();
    assert_eq!(holding["sessionId"], session, "the trigger's session was resumed");
    first.kill();
    let pid = holding["pid"].as_u64().unwrap();
    eventually("the result run to die with its runner", || async { (!is_alive(pid)).then_some(()) }).await;

    let second =
        Runner::start(&hub, RunnerSetup { harness: Some("claude"), ..lead_setup(&lead_dir, &lead_id) });
    let again = eventually("the restarted runner to deliver the result", || async {
        let runs = runs_of(&lead_dir, "/task-result");
        (runs.len() == 2 && runs[1]["ended"] == true).then(|| runs[1].clone())
    })
    .await;
    assert_eq!(again["prompt"], holding["prompt"], "the same result");
    assert_eq!(again["sessionId"], session, "into the same session");
    assert!(second.output().contains("previous runner process left 1 item(s)"), "{}", second.output());
    let (_, task) = hub.get(&format!("/api/tasks/{trigger_task}"), None).await;
    assert_eq!(task["status"], "completed", "{task}");
    // Delivered: the restarted runner's next poll parks instead of taking it a third time.
    hub.parked_polls(2).await;
    assert_eq!(runs_of(&lead_dir, "/task-result").len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lead_stories_a_reply_to_low_priority_awaited_mail_wakes_the_waiting_runner() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let asker = Runner::start(&hub, RunnerSetup::worker(dir.path()));
    registered(&hub, &asker).await;
    let helper = new_agent_id();
    let (status, _) = hub.post("/api/agents", Some(&helper), json!({"name": "helper"})).await;
    assert_eq!(status, 201);
    // The asker's agent asked, not urgently, and waits; its runner waits for work.
    let (status, question) = hub
        .post(
            "/api/mail",
            Some(&asker.agent_id),
            json!({"to": "helper", "subject": "which branch?", "body": "main or release?",
                   "priority": "low", "awaitingResponse": true}),
        )
        .await;
    assert_eq!(status, 201, "{question}");
    hub.parked_polls(1).await;
    assert!(runs(dir.path()).is_empty(), "nothing to do yet");

    let question_id = question["id"].as_str().unwrap();
    let (status, reply) =
        hub.post(&format!("/api/mail/{question_id}/reply"), Some(&helper), json!({"body": "release"})).await;
    assert_eq!(status, 201, "{reply}");
    let run = eventually("the asker's run about the answer", || async {
        runs(dir.path()).into_iter().find(|run| run["ended"] == true)
    })
    .await;
    assert_eq!(run["trigger"], "urgent_mail", "{run}");
    let text = run["text"].as_str().unwrap();
    assert!(text.contains(reply["id"].as_str().unwrap()), "{text}");
    assert!(text.contains(&format!("it answers your mail {question_id}")), "{text}");
    let (_, counts) = hub.get(&format!("/api/mail/unread-count?agentId={}", asker.agent_id), None).await;
    assert_eq!((counts["unread"].as_i64(), counts["waitingForResponse"].as_bool()), (Some(0), Some(false)));
}
