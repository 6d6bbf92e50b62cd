//! The living message of a Slack task in Block Kit: a headline (status, agent, the task's
//! link), the latest progress note or the ending (output or failure), a context line
//! (when it started or how long it took, the cost so far) and the buttons that act on
//! it. Pure: the announcer gathers the facts. Shapes after the reference's
//! `src/slack/blocks.ts` (`buildProgressBlocks`, `buildCompletedBlocks`, `cancel_task`).

use serde_json::{Value, json};
use swarm_domain::task::{Task, TaskStatus};

use crate::mrkdwn;

/// Slack refuses a section longer than 3,000 characters; the reference keeps 2,900.
const SECTION_MAX_CHARS: usize = 2900;
/// At most this many sections of output (Slack allows 50 blocks a message).
const OUTPUT_SECTIONS_MAX: usize = 8;
/// The notification text of an ending (the fallback of the blocks).
const FALLBACK_MAX_CHARS: usize = 3500;

/// The button ids (`action_id`) of the living message; each button's `value` is the task id.
pub const CANCEL_ACTION: &str = "cancel_task";
pub const PAUSE_ACTION: &str = "pause_task";
pub const RESUME_ACTION: &str = "resume_task";
pub const ASK_LEAD_ACTION: &str = "ask_lead";
pub const VIEW_ACTION: &str = "view_task";

/// What the living message shows of a task.
pub struct StatusView<'a> {
    pub task: &'a Task,
    pub agent_name: Option<&'a str>,
    pub cost_usd: f64,
    /// The task's page on the dashboard (`APP_URL/#/tasks/<id>`), when APP_URL is set.
    pub task_url: Option<String>,
}

/// The message: its fallback text (notifications, clients without blocks) and its blocks.
pub fn render(view: &StatusView<'_>) -> (String, Value) {
    let task = view.task;
    let agent = view.agent_name.unwrap_or("an agent");
    let (icon, label) = match task.status {
        TaskStatus::Completed => (":white_check_mark:", "Completed"),
        TaskStatus::Failed => (":x:", "Failed"),
        TaskStatus::Cancelled => (":no_entry_sign:", "Cancelled"),
        TaskStatus::Paused => (":double_vertical_bar:", "Paused"),
        _ => (":hourglass_flowing_sand:", "In progress"),
    };
    let short_id = task.id.short();
    let link = match &view.task_url {
        Some(url) => format!("<{url}|`{short_id}`>"),
        None => format!("`{short_id}`"),
    };
    let mut blocks = vec![section(&format!("{icon} *{label}* · *{}* · {link}", escape(agent)))];
    let fallback = match task.status {
        TaskStatus::Completed => {
            let output = mrkdwn::from_markdown(task.output.as_deref().unwrap_or("(no output)"));
            for chunk in chunks(&output).into_iter().take(OUTPUT_SECTIONS_MAX) {
                blocks.push(section(&chunk));
            }
            format!(":white_check_mark: Done.\n{}", truncate(&output, FALLBACK_MAX_CHARS))
        }
        TaskStatus::Failed => {
            let reason = task.failure_reason.as_deref().unwrap_or("no reason given");
            blocks.push(section(&format!("```{}```", truncate(reason, SECTION_MAX_CHARS - 6))));
            format!(":x: Failed: {reason}")
        }
        TaskStatus::Cancelled => {
            let reason = task.failure_reason.as_deref();
            if let Some(reason) = reason {
                blocks.push(section(&truncate(&escape(reason), SECTION_MAX_CHARS)));
            }
            format!(":no_entry_sign: Cancelled{}", reason.map(|r| format!(": {r}")).unwrap_or_default())
        }
        _ => {
            let progress = task.progress.as_deref().map(mrkdwn::from_markdown);
            if let Some(progress) = &progress {
                blocks.push(section(&format!("_Progress:_ {}", truncate(progress, SECTION_MAX_CHARS - 12))));
            }
            let doing = if task.status == TaskStatus::Paused { "paused" } else { "working on it" };
            match progress {
                Some(progress) => format!("{icon} {agent} is {doing}: {}", truncate(&progress, 300)),
                None => format!("{icon} {agent} is {doing}."),
            }
        }
    };
    blocks.push(context_line(view));
    let actions = buttons(view);
    if !actions.is_empty() {
        blocks.push(json!({ "type": "actions", "block_id": "task_actions", "elements": actions }));
    }
    (fallback, Value::Array(blocks))
}

/// A digest of what the message shows apart from the clock: equal digests need no edit.
pub fn digest(text: &str, blocks: &Value) -> u64 {
    let shown = format!("{text}\u{0}{blocks}");
    shown
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

fn context_line(view: &StatusView<'_>) -> Value {
    let task = view.task;
    let started = task.accepted_at.unwrap_or(task.created_at);
    let mut elements = Vec::new();
    match task.finished_at {
        Some(finished) => {
            elements.push(format!("Took {}", duration(finished.unix_millis() - started.unix_millis())));
        }
        // Slack renders `{ago}` in each reader's client and keeps it current: the message
        // need not be edited every second to show how long it has run.
        None => {
            // The fallback is fixed too: a message whose text changed with the clock would
            // be edited on every look.
            let seconds = started.unix_millis() / 1000;
            let at: String = started.to_string().chars().take(16).collect();
            elements.push(format!("Started <!date^{seconds}^{{ago}}|at {} UTC>", at.replace('T', " ")));
        }
    }
    let spent = if task.status.is_finished() { "Cost" } else { "Cost so far" };
    elements.push(format!("{spent}: ${:.4}", view.cost_usd));
    let elements: Vec<Value> =
        elements.into_iter().map(|text| json!({ "type": "mrkdwn", "text": text })).collect();
    json!({ "type": "context", "elements": elements })
}

fn buttons(view: &StatusView<'_>) -> Vec<Value> {
    let id = view.task.id.to_string();
    let button = |text: &str, action: &str| json!({ "type": "button", "text": { "type": "plain_text", "text": text }, "action_id": action, "value": id });
    let mut elements = Vec::new();
    match view.task.status {
        TaskStatus::InProgress | TaskStatus::Paused => {
            if view.task.status == TaskStatus::Paused {
                elements.push(button("Resume", RESUME_ACTION));
            } else {
                elements.push(button("Pause", PAUSE_ACTION));
            }
            let mut cancel = button("Cancel", CANCEL_ACTION);
            cancel["style"] = json!("danger");
            cancel["confirm"] = json!({
                "title": { "type": "plain_text", "text": "Cancel task?" },
                "text": { "type": "mrkdwn", "text": "This will cancel the task. Are you sure?" },
                "confirm": { "type": "plain_text", "text": "Yes, cancel" },
                "deny": { "type": "plain_text", "text": "Never mind" },
            });
            elements.push(cancel);
            elements.push(button("Ask the lead", ASK_LEAD_ACTION));
        }
        _ => {}
    }
    if let Some(url) = &view.task_url {
        elements.push(json!({
            "type": "button", "text": { "type": "plain_text", "text": "Open in dashboard" },
            "action_id": VIEW_ACTION, "url": url,
        }));
    }
    elements
}

fn section(text: &str) -> Value {
    json!({ "type": "section", "text": { "type": "mrkdwn", "text": text } })
}

/// Slack's three control characters, which would otherwise make links or mentions.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn truncate(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max_chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Sections of at most [`SECTION_MAX_CHARS`], cut at a line break when there is one.
fn chunks(text: &str) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut rest: Vec<char> = text.chars().collect();
    while rest.len() > SECTION_MAX_CHARS {
        let window = &rest[..SECTION_MAX_CHARS];
        let cut = window.iter().rposition(|c| *c == '\n').filter(|at| *at > SECTION_MAX_CHARS / 2);
        let cut = cut.unwrap_or(SECTION_MAX_CHARS);
        chunks.push(rest[..cut].iter().collect());
        rest = rest[cut..].iter().copied().skip_while(|c| *c == '\n').collect();
    }
    if !rest.is_empty() || chunks.is_empty() {
        chunks.push(rest.into_iter().collect());
    }
    chunks
}

/// "45s", "2m 14s", "1h 30m" (the reference's `formatDuration`).
pub fn duration(millis: i64) -> String {
    let seconds = millis.max(0) / 1000;
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{}m {}s", seconds / 60, seconds % 60),
        _ => format!("{}h {}m", seconds / 3600, (seconds % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_output_is_cut_into_sections_slack_accepts() {
        let text = format!("{}\n{}", "a".repeat(2000), "b".repeat(2500));
        let parts = chunks(&text);
        assert_eq!(parts.len(), 2, "cut at the line break");
        assert!(parts.iter().all(|part| part.chars().count() <= SECTION_MAX_CHARS));
        assert_eq!(chunks("").len(), 1);
        assert_eq!(duration(45_000), "45s");
        assert_eq!(duration(134_000), "2m 14s");
        assert_eq!(duration(5_400_000), "1h 30m");
    }
}
