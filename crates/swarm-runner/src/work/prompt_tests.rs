//! Every prompt the runner starts a run with, as each CLI's model reads it (the command
//! expanded, as Claude Code and pi do themselves; mail appended where the runner delivers
//! it): the task's text is said once, and no prompt grows past its budget unnoticed.

use serde_json::{Value, json};

use super::*;
use crate::harness::{Harness, Invocation, MailDelivery};

const TASK_ID: &str = "0190abcd-0000-7000-8000-000000000001";
/// Unlike anything in the commands' files, so counting it counts the task's text.
const TASK_TEXT: &str = "Write the release notes for version 7.3 of the billing service (QX-5521)";
const MAIL_BODY: &str = "The migration fails on the orders table (MB-9917)";

/// Budgets in bytes of what the model reads for each trigger kind, for the inputs below
/// (one task, one mail, one message). They are the sizes of 2026-11-28 plus about 10%: a prompt
/// that grows past one is a decision (raise the number here, in the same commit), not
/// drift. Every byte is read by the model on every run of that kind.
const BUDGET_TASK: usize = 2_450;
const BUDGET_OFFER: usize = 1_500;
const BUDGET_TASK_RESULT: usize = 1_150;
const BUDGET_TASKS_FINISHED: usize = 700;
const BUDGET_POOL: usize = 350;
const BUDGET_SLACK_INBOX: usize = 1_250;
const BUDGET_HANDED_BACK: usize = 700;
const BUDGET_EPIC_PROGRESS: usize = 750;
const BUDGET_MENTIONS: usize = 500;
const BUDGET_URGENT_MAIL: usize = 450;
const BUDGET_UNKNOWN: usize = 1_500;
const BUDGET_LOOP_WORKER: usize = 1_400;
const BUDGET_LOOP_LEAD: usize = 2_350;
/// The mail the runner appends for a CLI without hooks (the hooks give the same text).
const BUDGET_MAIL_DELIVERY: usize = 450;
/// What the hooks (or the runner, resuming a Codex thread) put before steering messages.
const BUDGET_STEERING_PREAMBLE: usize = 250;

fn task(status: &str) -> Task {
    serde_json::from_value(json!({
        "id": TASK_ID, "agentId": "0190ffff-0000-7000-8000-000000000002",
        "creatorAgentId": null, "task": TASK_TEXT, "status": status, "source": "api",
        "taskType": null, "tags": [], "priority": 50, "dependsOn": [], "offeredTo": null, "offeredAt": null,
        "acceptedAt": null, "rejectionReason": null, "createdAt": "2026-01-20T10:00:00.000Z",
        "lastUpdatedAt": "2026-01-20T10:00:00.000Z", "finishedAt": null, "failureReason": "tests broke",
        "output": "notes.md written", "progress": null, "notifiedAt": null, "leaseExpiresAt": null,
        "leaseLosses": 0
    }))
    .unwrap()
}

fn other(kind: &str, body: Value) -> Work {
    Work::from_trigger(Trigger::Other { kind: kind.into(), body }, "/start-worker")
}

/// Each kind of run, its default prompt, whether it is about the task's text, and its budget.
fn every_kind() -> Vec<(&'static str, Work, &'static str, bool, usize)> {
    let agent = "0190ffff-0000-7000-8000-000000000002";
    vec![
        (
            "task_assigned",
            Work::Task { task: task("in_progress"), origin: TaskOrigin::Polled },
            "",
            true,
            BUDGET_TASK,
        ),
        (
            "task_held",
            Work::Task { task: task("in_progress"), origin: TaskOrigin::Held },
            "",
            true,
            BUDGET_TASK,
        ),
        ("task_resumed", Work::Resume { task: task("paused") }, "", true, BUDGET_TASK),
        ("task_offered", Work::Offer { task: task("reviewing") }, "", true, BUDGET_OFFER),
        (
            "task_result",
            Work::TaskResult {
                task: task("completed"),
                parent_task_id: TaskId::parse("0190abcd-0000-7000-8000-0000000000ff").unwrap(),
                trigger_name: "slack".into(),
                session_key: "C1:1.2".into(),
                session_id: None,
            },
            "",
            true,
            BUDGET_TASK_RESULT,
        ),
        (
            "tasks_finished",
            Work::from_trigger(Trigger::TasksFinished { tasks: vec![task("completed")] }, "/start-leader"),
            "/start-leader",
            true,
            BUDGET_TASKS_FINISHED,
        ),
        (
            "pool_tasks_available",
            Work::from_trigger(Trigger::PoolTasksAvailable { count: 3 }, ""),
            "",
            false,
            BUDGET_POOL,
        ),
        (
            "slack_inbox_message",
            other(
                "slack_inbox_message",
                json!({"messages": [{"id": TASK_ID, "content": TASK_TEXT,
                "slackUserId": "U1", "slackChannelId": "C1", "matchedText": "bot mention"}]}),
            ),
            "/start-leader",
            true,
            BUDGET_SLACK_INBOX,
        ),
        (
            "tasks_handed_back",
            other(
                "tasks_handed_back",
                json!({"handoffs": [{"task": {"id": TASK_ID, "task": TASK_TEXT},
                "fromAgentId": agent, "fromStatus": "pending", "toStatus": "backlog", "reason": "offline"}]}),
            ),
            "/start-leader",
            true,
            BUDGET_HANDED_BACK,
        ),
        (
            "epic_progress_changed",
            other(
                "epic_progress_changed",
                json!({"epics": [{"epic": {"id": TASK_ID, "name": "billing",
                "goal": "Ship 7.3", "progress": 50, "taskStats": {"total": 2, "completed": 1}},
                "finishedTasks": [{"id": TASK_ID, "task": TASK_TEXT, "status": "completed"}]}]}),
            ),
            "/start-leader",
            true,
            BUDGET_EPIC_PROGRESS,
        ),
        (
            "unread_mentions",
            other(
                "unread_mentions",
                json!({"claimedChannels": ["C1"], "messages": [{"id": TASK_ID,
                "channelId": "C1", "agentId": agent, "content": TASK_TEXT}]}),
            ),
            "/start-worker",
            true,
            BUDGET_MENTIONS,
        ),
        (
            "urgent_mail",
            other(
                "urgent_mail",
                json!({"mail": [{"id": TASK_ID, "fromAgentId": agent, "type": "help_request",
                "subject": "Blocked", "body": MAIL_BODY, "awaitingResponse": true}]}),
            ),
            "/start-worker",
            false,
            BUDGET_URGENT_MAIL,
        ),
        (
            "brand_new",
            other("brand_new", json!({"type": "brand_new"})),
            "/start-worker",
            false,
            BUDGET_UNKNOWN,
        ),
        ("ai_loop worker", Work::Loop, "/start-worker", false, BUDGET_LOOP_WORKER),
        ("ai_loop lead", Work::Loop, "/start-leader", false, BUDGET_LOOP_LEAD),
    ]
}

/// What the model reads: the command's instructions with its arguments (Claude Code and pi
/// substitute them; the runner expands them for the others).
fn as_the_model_reads_it(prompt: &str) -> String {
    swarm_domain::prompts::expand(prompt).unwrap_or_else(|| prompt.to_string())
}

/// The prompt each CLI is started with carries the task's text once, and what its model
/// reads does too; `taskId: "..."` anywhere holds the id alone (issue 43: the whole prompt
/// was the command's argument, so the text stood in for the id six times).
#[test]
fn every_cli_gets_the_task_text_once_and_ids_alone() {
    for name in Harness::built_in_names() {
        let harness = Harness::built_in(name).unwrap();
        for (kind, work, default_prompt, about_the_text, _) in every_kind() {
            let prompt = work.prompt(default_prompt);
            let run =
                Invocation { prompt: &prompt, system_prompt: "", agent_args: &[], resume: None, model: None };
            let (_, args) = harness.command_line(&run);
            let sent = format!("{}{}", args.join("\n"), harness.input(&run).unwrap_or_default());
            let read = as_the_model_reads_it(&prompt);
            let expected = usize::from(about_the_text);
            assert_eq!(sent.matches(TASK_TEXT).count(), expected, "{name} {kind}: {sent}");
            assert_eq!(read.matches(TASK_TEXT).count(), expected, "{name} {kind}: {read}");
            assert_eq!(
                read.matches(MAIL_BODY).count(),
                0,
                "{name} {kind}: the mail comes by delivery: {read}"
            );
            for (at, _) in read.match_indices("taskId: \"") {
                let value = &read[at + 9..];
                let value = &value[..value.find('"').expect(&read)];
                assert!(!value.contains(char::is_whitespace), "{name} {kind}: taskId: \"{value}\" in {read}");
            }
        }
    }
}

#[test]
fn every_prompt_stays_within_its_budget() {
    let mut over = Vec::new();
    for (kind, work, default_prompt, _, budget) in every_kind() {
        let bytes = as_the_model_reads_it(&work.prompt(default_prompt)).len();
        eprintln!("{kind}: {bytes} bytes (budget {budget})");
        if bytes > budget {
            over.push(format!("{kind}: {bytes} bytes, budget {budget}"));
        }
    }
    let mail = mail_delivered();
    let bytes = mail.len();
    if bytes > BUDGET_MAIL_DELIVERY {
        over.push(format!("mail delivery: {bytes} bytes, budget {BUDGET_MAIL_DELIVERY}"));
    }
    let task_id = TaskId::parse(TASK_ID).unwrap();
    let bytes = swarm_domain::steering::steering_prompt(task_id, &[]).len();
    if bytes > BUDGET_STEERING_PREAMBLE {
        over.push(format!("steering preamble: {bytes} bytes, budget {BUDGET_STEERING_PREAMBLE}"));
    }
    assert!(
        over.is_empty(),
        "prompts past their budget (raise it on purpose, or trim):\n{}",
        over.join("\n")
    );
}

/// The mail text the runner appends (Codex, opencode) and the hooks print (the others):
/// it says the mail is read now, and nothing in it sends the model to `read-mail` for it.
fn mail_delivered() -> String {
    let mail: swarm_domain::mail::Mail = serde_json::from_value(json!({
        "id": TASK_ID, "fromAgentId": "0190ffff-0000-7000-8000-000000000002",
        "toAgentId": "0190ffff-0000-7000-8000-000000000003", "type": "help_request", "subject": "Blocked",
        "body": MAIL_BODY, "priority": "urgent", "awaitingResponse": true, "inReplyTo": null, "status": "read",
        "readAt": "2026-01-20T10:00:00.000Z", "answeredAt": null, "leaseExpiresAt": null,
        "createdAt": "2026-01-20T10:00:00.000Z"
    }))
    .unwrap();
    swarm_domain::prompts::mail_delivery(&[mail], &Default::default())
}

/// A prompt that lists mail never both sends the model to `read-mail` as the way to mark
/// it read and says it is already read (issue 43): the trigger's prompt names the pieces,
/// the delivery gives them once, marked read.
#[test]
fn mail_in_a_prompt_is_either_to_read_or_already_read_never_both() {
    let (_, work, default_prompt, _, _) =
        every_kind().into_iter().find(|(kind, ..)| *kind == "urgent_mail").unwrap();
    for name in Harness::built_in_names() {
        let harness = Harness::built_in(name).unwrap();
        let mut prompt = as_the_model_reads_it(&work.prompt(default_prompt));
        // Appended by the runner, or printed by the CLI's hook: the model reads both.
        assert!(matches!(harness.mail(), MailDelivery::Prompt | MailDelivery::Hooks), "{name}");
        prompt.push_str("\n\n");
        prompt.push_str(&mail_delivered());
        assert_eq!(prompt.matches(MAIL_BODY).count(), 1, "{name}: {prompt}");
        assert_eq!(prompt.matches("marked read").count(), 1, "{name}: {prompt}");
        assert!(!prompt.contains("which marks it read"), "{name}: {prompt}");
        assert!(prompt.contains(&format!("mailId: {TASK_ID}")), "{name}: {prompt}");
    }
}
