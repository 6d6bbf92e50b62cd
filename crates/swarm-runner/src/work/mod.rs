//! What one agent run is for, and the prompt it gets (the reference's prompt for each trigger).

use serde_json::Value;

use crate::claims::HeldItems;
use swarm_client::Trigger;
use swarm_domain::{
    id::TaskId,
    prompts::inbox,
    task::{Task, TaskStatus},
};

/// How long a task's text or output may be inside a summary prompt.
const SUMMARY_TASK_CHARS: usize = 100;
const SUMMARY_OUTPUT_CHARS: usize = 200;

/// One agent run to start.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Work {
    /// Work on a task that is `in_progress` for this agent (the poll claimed it, or a
    /// previous run of this runner left it).
    Task { task: Task, origin: TaskOrigin },
    /// Resume a task this agent paused (a previous runner was stopped), then work on it.
    Resume { task: Task },
    /// Accept or reject a task offered to this agent (`reviewing`).
    Offer { task: Task },
    /// A trigger that is about no single task (finished tasks for the lead, pool news,
    /// kinds of a newer hub). It gets no `TASK_ID`.
    Notice { kind: String, prompt: String, held: HeldItems },
    /// A task one of this agent's trigger sessions created finished: resume that
    /// session with the result. It gets no `TASK_ID`.
    TaskResult {
        task: Task,
        parent_task_id: TaskId,
        trigger_name: String,
        session_key: String,
        session_id: Option<String>,
    },
    /// `--ai-loop`: the agent polls by itself with the default prompt.
    Loop,
}

/// Where a task to work on came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskOrigin {
    /// Claimed by this runner's poll.
    Polled,
    /// Found `in_progress` for this agent when the runner started.
    Held,
}

impl Work {
    pub fn from_trigger(trigger: Trigger, default_prompt: &str) -> Work {
        match trigger {
            Trigger::TaskAssigned { task } => Work::Task { task, origin: TaskOrigin::Polled },
            Trigger::TaskOffered { task } => Work::Offer { task },
            Trigger::TasksFinished { tasks } => {
                let prompt = tasks_finished_prompt(&tasks);
                Work::Notice { kind: "tasks_finished".into(), prompt, held: HeldItems::default() }
            }
            Trigger::TaskResult { task, parent_task_id, trigger_name, session_key, session_id } => {
                Work::TaskResult { task, parent_task_id, trigger_name, session_key, session_id }
            }
            Trigger::PoolTasksAvailable { count } => {
                let prompt = pool_prompt(count);
                Work::Notice { kind: "pool_tasks_available".into(), prompt, held: HeldItems::default() }
            }
            // The poll loop waits on a refusal (`budget_wait.rs`) and never starts a run for
            // it; were one started, it would only be told why no work came.
            Trigger::BudgetRefused(refused) => Work::Notice {
                kind: "budget_refused".into(),
                prompt: format!("No new work was started: {}.", refused.describe()),
                held: HeldItems::default(),
            },
            Trigger::Other { kind, body } => {
                let prompt = other_prompt(&kind, &body, default_prompt);
                let held = HeldItems::of_trigger(&kind, &body);
                Work::Notice { kind, prompt, held }
            }
        }
    }

    /// The task this run is about, if any: it gets `TASK_ID` and its outcome is checked.
    pub fn task(&self) -> Option<&Task> {
        match self {
            Work::Task { task, .. } | Work::Resume { task } | Work::Offer { task } => Some(task),
            Work::Notice { .. } | Work::TaskResult { .. } | Work::Loop => None,
        }
    }

    /// The model the run asks its agent CLI for: the one its task names, if any (else the
    /// runner's `--model`).
    pub fn model(&self) -> Option<&str> {
        self.task()?.origin.model.as_deref()
    }

    /// The trigger conversation this run belongs to (trigger name, session key): its
    /// agent session is resumed, and the session it used is recorded for the next run.
    pub fn session(&self) -> Option<(String, String)> {
        match self {
            Work::Task { task, .. } | Work::Resume { task } => {
                Some((task.origin.trigger_name.clone()?, task.origin.session_key.clone()?))
            }
            Work::TaskResult { trigger_name, session_key, .. } => {
                Some((trigger_name.clone(), session_key.clone()))
            }
            Work::Offer { .. } | Work::Notice { .. } | Work::Loop => None,
        }
    }

    /// The lead-side claims this run holds: given back when it ends unfinished.
    pub fn held(&self) -> HeldItems {
        match self {
            Work::Notice { held, .. } => held.clone(),
            Work::TaskResult { task, .. } => HeldItems::result(task.id.to_string()),
            Work::Task { .. } | Work::Resume { .. } | Work::Offer { .. } | Work::Loop => HeldItems::default(),
        }
    }

    /// The trigger task whose session this run continues: a task the agent creates now
    /// is awaited by that session (`SWARM_SESSION_TASK_ID`).
    pub fn session_task_id(&self) -> Option<TaskId> {
        match self {
            Work::Task { task, .. } | Work::Resume { task } => {
                task.origin.trigger_name.as_ref().map(|_| task.id)
            }
            Work::TaskResult { parent_task_id, .. } => Some(*parent_task_id),
            Work::Offer { .. } | Work::Notice { .. } | Work::Loop => None,
        }
    }

    pub fn task_id(&self) -> Option<TaskId> {
        self.task().map(|task| task.id)
    }

    /// The trigger kind recorded in logs (`task_assigned`, `resumed`, ...).
    pub fn kind(&self) -> &str {
        match self {
            Work::Task { origin: TaskOrigin::Polled, .. } => "task_assigned",
            Work::Task { origin: TaskOrigin::Held, .. } => "task_held",
            Work::Resume { .. } => "task_resumed",
            Work::Offer { .. } => "task_offered",
            Work::Notice { kind, .. } => kind,
            Work::TaskResult { .. } => "task_result",
            Work::Loop => "ai_loop",
        }
    }

    /// What the terminal calls the run: `task <id>` or the trigger kind. The whole id:
    /// ids are UUID v7, whose first characters are a timestamp shared by tasks created
    /// close together.
    pub fn label(&self) -> String {
        match self.task_id() {
            Some(id) => format!("task {id}"),
            None => self.kind().to_string(),
        }
    }

    pub fn prompt(&self, default_prompt: &str) -> String {
        match self {
            Work::Task { task, .. } | Work::Resume { task } => work_prompt(task),
            Work::Offer { task } => offer_prompt(task),
            Work::Notice { prompt, .. } => prompt.clone(),
            Work::TaskResult { task, parent_task_id, .. } => task_result_prompt(task, *parent_task_id),
            Work::Loop => default_prompt.to_string(),
        }
    }
}

/// The first 8 characters of an id, as the reference shows them.
pub(crate) fn short_id(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

fn work_prompt(task: &Task) -> String {
    // The command's argument is the id then the text: the command file says what to do
    // with them, once (issue 43).
    format!("/work-on-task {id}\n\n{text}", id = task.id, text = task.task.trim())
}

/// The result of a task this session created, for it to relay to whoever asked.
fn task_result_prompt(task: &Task, parent: TaskId) -> String {
    let outcome = match task.status {
        TaskStatus::Completed => {
            format!("completed. Its response:\n{}", task.output.as_deref().unwrap_or("(no output)"))
        }
        TaskStatus::Cancelled => {
            format!("was cancelled: {}", task.failure_reason.as_deref().unwrap_or("(no reason)"))
        }
        _ => format!("failed: {}", task.failure_reason.as_deref().unwrap_or("(no reason)")),
    };
    format!(
        "/task-result {id}\n\nThe task you created while working on {parent} ({text}) {outcome}",
        id = task.id,
        text = clip(task.task.trim(), SUMMARY_TASK_CHARS),
    )
}

fn offer_prompt(task: &Task) -> String {
    format!("/review-offered-task {id}\n\n{text}", id = task.id, text = task.task.trim())
}

fn tasks_finished_prompt(tasks: &[Task]) -> String {
    let mut prompt = format!("{} task(s) finished:\n", tasks.len());
    for task in tasks {
        let agent =
            task.agent_id.map(|id| format!("agent {}", short_id(&id.to_string()))).unwrap_or_default();
        let outcome = match task.status {
            TaskStatus::Completed => {
                format!(
                    "output: {}",
                    clip(task.output.as_deref().unwrap_or("(no output)"), SUMMARY_OUTPUT_CHARS)
                )
            }
            _ => format!(
                "reason: {}",
                clip(task.failure_reason.as_deref().unwrap_or("(no reason)"), SUMMARY_OUTPUT_CHARS)
            ),
        };
        // A task from a Slack thread has had its outcome posted there by the bridge.
        let slack = if task.origin.slack_thread_ts.is_some() {
            " (from Slack: the bridge already posted this outcome in its thread)"
        } else {
            ""
        };
        prompt.push_str(&format!(
            "- {status} task {id} by {agent}{slack}: \"{text}\"\n  {outcome}\n",
            status = task.status.as_str(),
            id = task.id,
            text = clip(task.task.trim(), SUMMARY_TASK_CHARS),
        ));
    }
    prompt.push_str(
        "\nThe Slack bridge has already posted the outcome of every task that came from a Slack thread \
         in that thread: do not answer there again (no slack-reply about these tasks; the hub refuses it). \
         Review the results and decide on follow-ups: for failed work, send a better-described task to a \
         worker (send-task) or cancel what is no longer needed; where an agent waits on a result, tell it \
         (reply-mail). Do not do the work yourself.",
    );
    prompt
}

fn pool_prompt(count: i64) -> String {
    format!(
        "{count} task(s) available in the pool.\n\n1. Run get-tasks with unassigned: true to browse them\n\
         2. Pick one that matches your skills\n3. Run task-action with action \"claim\" and its taskId, then \
         work on it and report with store-progress\n\nClaims are first come, first served: if a claim fails, \
         pick another."
    )
}

/// Kinds the hub may send that this runner knows by name only (the reference's lead
/// triggers), and anything newer.
fn other_prompt(kind: &str, body: &Value, default_prompt: &str) -> String {
    match kind {
        "slack_inbox_message" => {
            // The text is the domain's (the MCP prompt `slack-inbox` serves the same).
            let messages = body.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
            let field = |message: &'_ Value, key: &str| -> String {
                message.get(key).and_then(Value::as_str).unwrap_or("?").to_string()
            };
            let owned: Vec<[String; 5]> = messages
                .iter()
                .map(|message| {
                    let content = message.get("content").and_then(Value::as_str).unwrap_or("").to_string();
                    let [id, user, channel, matched] =
                        ["id", "slackUserId", "slackChannelId", "matchedText"].map(|key| field(message, key));
                    [id, user, channel, matched, content]
                })
                .collect();
            let entries: Vec<inbox::Entry<'_>> = owned
                .iter()
                .map(|[id, user, channel, matched, content]| inbox::Entry {
                    id,
                    slack_user_id: user,
                    slack_channel_id: channel,
                    matched_text: matched,
                    content,
                })
                .collect();
            inbox::prompt(&entries)
        }
        "tasks_handed_back" => handed_back_prompt(body),
        "epic_progress_changed" => epic_progress_prompt(body),
        "unread_mentions" => mentions_prompt(body),
        "urgent_mail" => urgent_mail_prompt(body),
        _ => format!(
            "{default_prompt}\n\nThe hub sent a \"{kind}\" trigger this runner has no prompt for:\n{body}\n\n\
             Handle it with your swarm tools."
        ),
    }
}

/// The lead's `tasks_handed_back` (ours): what the hub took from agents that stayed
/// offline, where it went, and what is left for the lead to decide.
fn handed_back_prompt(body: &Value) -> String {
    let handoffs = body.get("handoffs").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut prompt = format!("{} task(s) were taken from agents that stayed offline:\n", handoffs.len());
    let text = |value: Option<&Value>| value.and_then(Value::as_str).unwrap_or("?").to_string();
    for handoff in &handoffs {
        let task = handoff.get("task");
        prompt.push_str(&format!(
            "- task {id} (was {from} with agent {agent}, now {to}): \"{text}\"\n  why: {reason}\n",
            id = text(task.and_then(|task| task.get("id"))),
            from = text(handoff.get("fromStatus")),
            agent = short_id(&text(handoff.get("fromAgentId"))),
            to = text(handoff.get("toStatus")),
            text = clip(&text(task.and_then(|task| task.get("task"))), SUMMARY_TASK_CHARS),
            reason = text(handoff.get("reason")),
        ));
    }
    prompt.push_str(
        "\nTasks now unassigned are back in the pool: a free worker takes them, nothing to do. Tasks now in \
         the backlog were asked of that agent by name, so no worker takes them until you decide: return one \
         to the pool with task-action (action \"from_backlog\"), or cancel it and send-task it to a worker you \
         choose (get-swarm lists the workers and their free capacity). Do not work on them yourself.",
    );
    prompt
}

/// The lead's `epic_progress_changed` (the reference's): where each active epic stands,
/// what finished since the last notice, and that planning the next step is the lead's.
fn epic_progress_prompt(body: &Value) -> String {
    let epics = body.get("epics").and_then(Value::as_array).cloned().unwrap_or_default();
    let text = |value: Option<&Value>| value.and_then(Value::as_str).unwrap_or("?").to_string();
    let number = |value: Option<&Value>| value.and_then(Value::as_i64).unwrap_or(0);
    let mut prompt = format!("{} epic(s) moved since you were last told:\n", epics.len());
    for entry in &epics {
        let epic = entry.get("epic");
        let field = |key: &str| epic.and_then(|epic| epic.get(key));
        let stats = field("taskStats");
        let stat = |key: &str| number(stats.and_then(|stats| stats.get(key)));
        prompt.push_str(&format!(
            "- epic \"{name}\" ({id}), goal: {goal}\n  progress {progress}%: {completed} of {total} tasks completed, \
             {failed} failed, {in_progress} in progress, {pending} pending\n",
            name = text(field("name")),
            id = text(field("id")),
            goal = clip(&text(field("goal")), SUMMARY_TASK_CHARS),
            progress = number(field("progress")),
            completed = stat("completed"),
            total = stat("total"),
            failed = stat("failed"),
            in_progress = stat("inProgress"),
            pending = stat("pending"),
        ));
        for task in entry.get("finishedTasks").and_then(Value::as_array).into_iter().flatten() {
            prompt.push_str(&format!(
                "  - {status}: \"{task}\" ({id})\n",
                status = text(task.get("status")),
                task = clip(&text(task.get("task")), SUMMARY_TASK_CHARS),
                id = text(task.get("id")),
            ));
        }
    }
    prompt.push_str(
        "\nPlan each epic's next step: send-task the work that follows to a worker (get-swarm lists the \
         workers and their free capacity) and assign-task-to-epic it, send better-described work for what \
         failed, or mark the epic completed with update-epic when its goal is met. get-epic-details shows an \
         epic with its tasks. Do not do the work yourself.",
    );
    prompt
}

/// The mentioning messages, by channel, with what to do: read each channel (which
/// releases the claim) and answer in the messages' threads.
fn mentions_prompt(body: &Value) -> String {
    let text = |value: &Value, key: &str| value.get(key).and_then(Value::as_str).unwrap_or("?").to_string();
    let messages = body.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
    // The reference's `claimedChannels`; `channelIds` from hubs before issue 20.
    let channels = body
        .get("claimedChannels")
        .or_else(|| body.get("channelIds"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut prompt = format!("You have {} unread mention(s) in chat channels:\n", messages.len());
    for channel in channels.iter().filter_map(Value::as_str) {
        prompt.push_str(&format!("- channelId: {channel};\n"));
        for message in messages.iter().filter(|message| text(message, "channelId") == channel) {
            let author = match message.get("agentId").and_then(Value::as_str) {
                Some(agent) => format!("agent {}", short_id(agent)),
                None => "a person".to_string(),
            };
            prompt.push_str(&format!(
                "  - messageId: {}; from {author}: \"{}\"\n",
                text(message, "id"),
                clip(&text(message, "content"), SUMMARY_TASK_CHARS),
            ));
        }
    }
    prompt.push_str(
        "\nFor each channel: read it with read-messages (channelId, unreadOnly: true), which marks it read, \
         then answer what is asked of you with post-message (channelId, replyToId: the messageId). If a \
         message asks for work, create a task with send-task.",
    );
    prompt
}

/// Mail that woke the agent (urgent: "someone is blocked"; or the answer to mail it sent
/// awaiting a response, whatever its priority): which pieces, and what to do with them. The
/// bodies are not repeated here: the CLI's hook or the runner delivers them with this prompt
/// (marked read), and `read-mail` by id returns them read or not (issue 43).
fn urgent_mail_prompt(body: &Value) -> String {
    let text = |value: &Value, key: &str| value.get(key).and_then(Value::as_str).unwrap_or("?").to_string();
    let mail = body.get("mail").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut prompt = format!("You have {} urgent mail:\n", mail.len());
    for piece in &mail {
        let awaiting = if piece.get("awaitingResponse") == Some(&Value::Bool(true)) {
            "; the sender is waiting for your response"
        } else {
            ""
        };
        let answers = match piece.get("inReplyTo").and_then(Value::as_str) {
            Some(parent) => format!("; it answers your mail {parent}"),
            None => String::new(),
        };
        prompt.push_str(&format!(
            "- mailId: {}; {} from agent {}{awaiting}{answers}: \"{}\"\n",
            text(piece, "id"),
            text(piece, "type"),
            short_id(&text(piece, "fromAgentId")),
            text(piece, "subject"),
        ));
    }
    prompt.push_str(
        "\nread-mail (mailIds) shows each piece in full, read or not. Answer each with reply-mail (mailId). \
         An answer to your own mail is what you were waiting for: carry on with it. If it asks for work, \
         create a task with send-task.",
    );
    prompt
}

fn clip(text: &str, max_chars: usize) -> String {
    swarm_domain::prompts::clip(text, max_chars)
}

#[cfg(test)]
mod prompt_tests;
#[cfg(test)]
mod tests;
