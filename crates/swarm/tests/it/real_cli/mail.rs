//! Mail sent to an agent reaches the model: Claude Code through the `UserPromptSubmit` hook
//! `swarm connect` installs, Codex (no hooks) through the runner, which puts the agent's unread
//! mail into the prompt. Either way the mail is then marked read, and delivered once.

use serde_json::json;
use swarm_scripted_model::Script;

use super::{Cli, World, complete, every_cli, within};

every_cli!(mail_sent_to_the_agent_reaches_the_model);

async fn mail_sent_to_the_agent_reaches_the_model(cli: Cli) {
    let script = Script::new().call_tool("store-progress", complete).reply("Reported.");
    let world = World::new(cli, script).await;
    let runner = world.runner("worker", &[]);
    world.registered(&runner).await;
    let sender = uuid::Uuid::new_v4().to_string();
    let (status, body) = world.hub.post("/api/agents", Some(&sender), json!({"name": "reviewer-1"})).await;
    assert_eq!(status, 201, "{body}");
    let (status, mail) = world
        .hub
        .post(
            "/api/mail",
            Some(&sender),
            json!({"to": runner.agent_id, "subject": "Style", "body": "Please use British spelling (MAIL-7731)."}),
        )
        .await;
    assert_eq!(status, 201, "{mail}");

    let id = world.create(json!({"task": "Write the changelog", "agentId": runner.agent_id})).await;
    let done = world.task_in(&id, &["completed", "failed", "unassigned"], &runner).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    let conversations = world.conversations_about(&id);
    let first = conversations.first().expect("the run's requests");
    assert!(first.contains("MAIL-7731"), "the mail is in the first request: {:?}", first.user_texts());
    assert!(first.contains("from reviewer-1"), "with its sender's name: {:?}", first.user_texts());

    let (_, counts) = world.hub.get("/api/mail/unread-count", Some(&runner.agent_id)).await;
    assert_eq!(counts["unread"], 0, "delivered means read: {counts}");
    // Once: a second task's run does not get it again.
    let next = world.create(json!({"task": "Write the release notes", "agentId": runner.agent_id})).await;
    world.task_in(&next, &["completed", "failed", "unassigned"], &runner).await;
    let again =
        within("the second run's requests", || async { world.conversations_about(&next).first().cloned() })
            .await;
    assert!(!again.contains("MAIL-7731"), "delivered twice: {:?}", again.user_texts());
}
