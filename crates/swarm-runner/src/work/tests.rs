use serde_json::json;

use super::*;

fn task(status: &str) -> Task {
    serde_json::from_value(json!({
        "id": "0190abcd-0000-7000-8000-000000000001", "agentId": "0190ffff-0000-7000-8000-000000000002",
        "creatorAgentId": null, "task": "Write the release notes", "status": status, "source": "api",
        "taskType": null, "tags": [], "priority": 50, "dependsOn": [], "offeredTo": null, "offeredAt": null,
        "acceptedAt": null, "rejectionReason": null, "createdAt": "2026-01-20T10:00:00.000Z",
        "lastUpdatedAt": "2026-01-20T10:00:00.000Z", "finishedAt": null, "failureReason": "tests broke",
        "output": "notes.md written", "progress": null, "notifiedAt": null, "leaseExpiresAt": null,
        "leaseLosses": 0
    }))
    .unwrap()
}

#[test]
fn task_prompts_start_with_their_command_and_id() {
    let work = Work::from_trigger(Trigger::TaskAssigned { task: task("in_progress") }, "/start-worker");
    let prompt = work.prompt("/start-worker");
    assert!(prompt.starts_with("/work-on-task 0190abcd-0000-7000-8000-000000000001\n"), "{prompt}");
    assert!(prompt.contains("Write the release notes"));
    assert_eq!(work.label(), "task 0190abcd-0000-7000-8000-000000000001");
    let offer = Work::from_trigger(Trigger::TaskOffered { task: task("reviewing") }, "");
    assert!(offer.prompt("").starts_with("/review-offered-task 0190abcd-0000-7000-8000-000000000001\n"));
}

#[test]
fn notices_are_about_no_task() {
    let finished = Work::from_trigger(
        Trigger::TasksFinished { tasks: vec![task("completed"), task("failed")] },
        "/start-leader",
    );
    assert_eq!(finished.task_id(), None);
    assert_eq!(finished.kind(), "tasks_finished");
    let prompt = finished.prompt("/start-leader");
    assert!(prompt.contains("- completed task") && prompt.contains("output: notes.md written"), "{prompt}");
    assert!(prompt.contains("- failed task") && prompt.contains("reason: tests broke"), "{prompt}");
    // The bridge answers Slack threads itself: the lead must not be told to.
    assert!(prompt.contains("do not answer there again"), "{prompt}");
    assert!(!prompt.contains("reply where a user is waiting"), "{prompt}");

    let unknown = Work::from_trigger(
        Trigger::Other { kind: "brand_new".into(), body: json!({"type": "brand_new"}) },
        "/start-worker",
    );
    assert_eq!(unknown.task_id(), None);
    assert!(unknown.prompt("/start-worker").starts_with("/start-worker\n\nThe hub sent a \"brand_new\""));
}

#[test]
fn clip_counts_characters_not_bytes() {
    assert_eq!(clip("ééé", 2), "éé...");
    assert_eq!(clip("ab", 2), "ab");
}

// The lead's Slack inbox.

#[test]
fn slack_inbox_prompt_lists_ids_and_the_two_choices() {
    let body = json!({"type": "slack_inbox_message", "count": 1, "messages": [{
        "id": "0190abcd-0000-7000-8000-00000000000a", "content": "is the build green?",
        "slackUserId": "U1", "slackChannelId": "C1", "matchedText": "bot mention"
    }]});
    let prompt = other_prompt("slack_inbox_message", &body, "default");
    assert!(prompt.contains("inboxMessageId: 0190abcd-0000-7000-8000-00000000000a"), "{prompt}");
    assert!(prompt.contains("is the build green?") && prompt.contains("bot mention"), "{prompt}");
    assert!(prompt.contains("slack-reply") && prompt.contains("inbox-delegate"), "{prompt}");
    assert!(prompt.contains("never work tasks"), "{prompt}");
    assert!(
        prompt.contains(
            "<untrusted-input source=\"slack\" from=\"U1\">\nis the build green?\n</untrusted-input>"
        ),
        "the message is fenced as outside text: {prompt}"
    );
}

// Chat mentions and mail.

#[test]
fn mentions_prompt_lists_each_claimed_channel_with_its_messages() {
    let body = json!({"type": "unread_mentions", "mentionsCount": 2,
        "claimedChannels": ["0190abcd-0000-7000-8000-0000000000c1", "0190abcd-0000-7000-8000-0000000000c2"],
        "messages": [
            {"id": "0190abcd-0000-7000-8000-0000000000m1", "channelId": "0190abcd-0000-7000-8000-0000000000c1",
             "agentId": null, "content": "@lead ship it?"},
            {"id": "0190abcd-0000-7000-8000-0000000000m2", "channelId": "0190abcd-0000-7000-8000-0000000000c2",
             "agentId": "0190ffff-0000-7000-8000-000000000002", "content": "@lead review"}]});
    let prompt = other_prompt("unread_mentions", &body, "default");
    assert!(prompt.starts_with("You have 2 unread mention(s) in chat channels:"), "{prompt}");
    let first = prompt.find("channelId: 0190abcd-0000-7000-8000-0000000000c1;").expect(&prompt);
    let message =
        prompt.find("messageId: 0190abcd-0000-7000-8000-0000000000m1; from a person").expect(&prompt);
    let second = prompt.find("channelId: 0190abcd-0000-7000-8000-0000000000c2;").expect(&prompt);
    assert!(first < message && message < second, "{prompt}");
    assert!(prompt.contains("from agent 0190ffff: \"@lead review\""), "{prompt}");
    assert!(prompt.contains("read-messages") && prompt.contains("replyToId"), "{prompt}");
}

#[test]
fn urgent_mail_prompt_says_who_waits() {
    let body = json!({"type": "urgent_mail", "count": 1, "mail": [{
        "id": "0190abcd-0000-7000-8000-0000000000aa", "fromAgentId": "0190ffff-0000-7000-8000-000000000002",
        "type": "help_request", "subject": "build fails", "body": "cargo test fails on main",
        "awaitingResponse": true}]});
    let prompt = other_prompt("urgent_mail", &body, "default");
    assert!(prompt.starts_with("You have 1 urgent mail:"), "{prompt}");
    assert!(
        prompt.contains("mailId: 0190abcd-0000-7000-8000-0000000000aa; help_request from agent 0190ffff")
    );
    assert!(prompt.contains("waiting for your response: \"build fails\""), "{prompt}");
    // The body comes with the delivery (hook or runner), marked read; not twice.
    assert!(!prompt.contains("cargo test fails on main") && prompt.contains("reply-mail"), "{prompt}");
    assert!(prompt.contains("read-mail (mailIds)") && !prompt.contains("marks it read"), "{prompt}");
}

// Tasks handed back from a gone agent.

#[test]
fn the_lead_hears_what_moved_and_what_is_left_to_decide() {
    let body = json!({
        "type": "tasks_handed_back",
        "count": 1,
        "handoffs": [{
            "task": {"id": "0199a1b2-0000-7000-8000-000000000001", "task": "Fix the build"},
            "fromAgentId": "0199a1b2-0000-7000-8000-0000000000aa",
            "fromStatus": "pending",
            "toStatus": "backlog",
            "reason": "its agent has been offline for more than 600s",
        }],
    });
    let trigger = Trigger::from_json(body).unwrap();
    let Work::Notice { kind, prompt, held } = Work::from_trigger(trigger, "default") else {
        panic!("a notice");
    };
    assert_eq!(kind, "tasks_handed_back");
    assert!(held.is_empty(), "nothing is held: the hand-off was marked told");
    for expected in ["Fix the build", "now backlog", "offline for more than 600s", "from_backlog"] {
        assert!(prompt.contains(expected), "{expected:?} missing from {prompt}");
    }
    assert!(!prompt.contains("has no prompt for"), "{prompt}");
}

// Epic progress.

#[test]
fn the_lead_hears_where_each_epic_stands_and_what_to_plan() {
    let body = json!({
        "type": "epic_progress_changed",
        "count": 1,
        "epics": [{
            "epic": {"id": "0199a1b2-0000-7000-8000-0000000000e1", "name": "checkout", "goal": "Ship it",
                     "progress": 50, "taskStats": {"total": 2, "completed": 1, "failed": 0, "inProgress": 1, "pending": 0}},
            "finishedTasks": [{"id": "0199a1b2-0000-7000-8000-000000000001", "task": "Build the cart", "status": "completed"}],
        }],
    });
    let trigger = Trigger::from_json(body).unwrap();
    let Work::Notice { kind, prompt, held } = Work::from_trigger(trigger, "default") else {
        panic!("a notice");
    };
    assert_eq!(kind, "epic_progress_changed");
    assert!(held.is_empty(), "nothing is held: the progress was marked told");
    for expected in [
        "checkout",
        "progress 50%",
        "1 of 2 tasks completed",
        "completed: \"Build the cart\"",
        "assign-task-to-epic",
    ] {
        assert!(prompt.contains(expected), "{expected:?} missing from {prompt}");
    }
    assert!(!prompt.contains("has no prompt for"), "{prompt}");
}
