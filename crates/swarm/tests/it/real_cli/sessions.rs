//! A persistent trigger session with the real CLIs: a webhook's task starts a session that
//! delegates work (`send-task`) and stops; when the delegated task is done, the runner resumes
//! the same session (`claude --resume <id>`, `codex exec resume <id>`) with a prompt the CLI
//! understands (Claude Code: the `/task-result` command `swarm connect` installs; Codex: the
//! same instructions as plain text), and the model relays the result. The resumed run's tokens
//! are its own (Codex counts the whole thread: the runner takes the difference).

use serde_json::{Value, json};
use swarm_scripted_model::Script;

use super::{Cli, World, complete, every_cli, task_id_in, within};
use crate::hub::send;

every_cli!(a_persistent_session_is_resumed_with_the_result_of_its_task);

async fn a_persistent_session_is_resumed_with_the_result_of_its_task(cli: Cli) {
    let helper = uuid::Uuid::new_v4().to_string();
    let delegate_to = helper.clone();
    let script = Script::new()
        // The first run: delegate, report its own task, stop.
        .call_tool("send-task", move |_| json!({"agentId": delegate_to, "task": "Look up invoice 42"}))
        .call_tool("store-progress", complete)
        .reply("Delegated.")
        // The resumed run: relay what the runner's prompt says.
        .reply_with(|c| format!("RELAYED: {}", c.latest_prompt()))
        .with_usage(100, 10);
    let world = World::new(cli, script).await;
    let (status, body) = world.hub.post("/api/agents", Some(&helper), json!({"name": "helper-1"})).await;
    assert_eq!(status, 201, "{body}");
    let runner = world.runner("worker", &[]);
    world.registered(&runner).await;
    let (status, created) = world
        .hub
        .post(
            "/api/triggers",
            None,
            json!({"name": "inbox", "type": "webhook", "webhookSecret": "s3cret-0123456789abcdef", "target": runner.agent_id,
                   "sessionMode": "persistent", "prompt": "Message: {{payload}}"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    // The conversation's key travels in the signed body: an unsigned header decides nothing.
    let body = json!({"message": "where is my invoice?", "sessionKey": "thread-1"}).to_string();
    let request = reqwest::Client::new()
        .post(world.hub.url("/api/webhooks/inbox"))
        .header("x-hub-signature-256", swarm_service::sign_body("s3cret-0123456789abcdef", body.as_bytes()))
        .header("content-type", "application/json")
        .body(body);
    let (status, accepted) = send(request).await;
    assert_eq!(status, 202, "{accepted}");
    let first = accepted["taskId"].as_str().unwrap().to_string();
    let done = world.task_in(&first, &["completed", "failed"], &runner).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    let session = within("the trigger's recorded session", || async {
        let (status, body) = world.hub.get("/api/triggers/inbox/session?key=thread-1", None).await;
        (status == 200).then(|| body["session"]["sessionId"].as_str().unwrap().to_string())
    })
    .await;

    // The helper does the delegated task.
    let (_, mine) = world.hub.get(&format!("/api/tasks?agentId={helper}"), None).await;
    let delegated = mine["tasks"][0]["id"].as_str().expect("the delegated task").to_string();
    let (status, body) =
        world.hub.post(&format!("/api/tasks/{delegated}/start"), Some(&helper), json!({})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = world
        .hub
        .post(
            &format!("/api/tasks/{delegated}/finish"),
            Some(&helper),
            json!({"status": "completed", "output": "Invoice 42 was paid on Monday (RESULT-9)."}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    let resumed = within("the session to be resumed with the result", || async {
        world
            .model
            .conversations()
            .into_iter()
            .find(|c| c.final_replies().iter().any(|reply| reply == "Delegated."))
    })
    .await;
    let relayed = resumed.latest_prompt();
    assert!(relayed.contains("RESULT-9") && relayed.contains(&delegated), "{relayed}");
    assert!(!relayed.starts_with('/') || cli == Cli::Claude, "Codex has no slash commands: {relayed}");
    if cli == Cli::Claude {
        // Claude Code ran the installed command (an unknown one never reaches the model).
        assert!(resumed.contains("# The result of swarm task"), "{:?}", resumed.user_texts());
    } else {
        assert!(relayed.starts_with("# The result of swarm task"), "{relayed}");
    }
    if cli == Cli::Gemini {
        // The Gemini CLI resends a resumed session without the first run's prompt, which its
        // BeforeAgent hook had added to (docs/real-agent-clis.md, "Gemini CLI"): the history
        // is the first run's by its calls, store-progress on the first task among them.
        assert!(resumed.contains(&format!("scripted output for {first}")), "{:?}", resumed.body);
    } else {
        assert_eq!(task_id_in(&resumed).as_deref(), Some(first.as_str()), "the history is the first run's");
    }

    let (_, after) = world.hub.get("/api/triggers/inbox/session?key=thread-1", None).await;
    assert_eq!(after["session"]["sessionId"], session.as_str(), "the same session, resumed");

    // Scenario 7 for a resumed session: the relaying run made one model request, and its
    // tokens are that request's alone, not the thread's.
    let costs: Vec<Value> = within("the resumed run's usage", || async {
        let (_, body) = world.hub.get(&format!("/api/session-costs?agentId={}", runner.agent_id), None).await;
        let costs = body["costs"].as_array().cloned().unwrap_or_default();
        (costs.len() >= 2).then_some(costs)
    })
    .await;
    let resumed_cost =
        costs.iter().find(|cost| cost["taskId"].is_null()).expect("the resumed run's cost (no task)");
    assert_eq!(resumed_cost["inputTokens"], 100, "{resumed_cost}");
    assert_eq!(resumed_cost["outputTokens"], 10, "{resumed_cost}");
    // The runner acknowledged the result (before it sent the usage) without complaint.
    assert!(!runner.output().contains("cannot acknowledge"), "{}", runner.output());
}
