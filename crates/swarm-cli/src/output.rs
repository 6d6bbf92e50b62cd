//! Plain-text rendering shared by the client commands: tables, field lists and
//! one-line excerpts. Pure functions of their input, so they are unit tested here.

use std::{collections::HashMap, io::Write};

use anyhow::Context;
use serde::Serialize;
use swarm_domain::{event::Event, id::AgentId, task::Task, time::Timestamp};

/// Print `value` as pretty JSON on stdout (the `--json` output).
pub fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value).context("cannot write the answer as JSON")?;
    emit(&format!("{text}\n"))
}

/// Write `text` to stdout. A closed pipe (`swarm task list | head`) ends the output
/// quietly rather than failing.
pub fn emit(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(err).context("cannot write to stdout"))
        }
        _ => Ok(()),
    }
}

/// A table with left-aligned columns separated by two spaces; the last column is
/// not padded, so long text does not leave trailing blanks.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|header| header.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header_row: Vec<String> = headers.iter().map(|header| header.to_string()).collect();
    let mut text = String::new();
    for row in std::iter::once(&header_row).chain(rows) {
        let mut line = String::new();
        for (index, cell) in row.iter().enumerate() {
            if index + 1 == row.len() {
                line.push_str(cell);
            } else {
                let padding = widths[index].saturating_sub(cell.chars().count());
                line.push_str(cell);
                line.push_str(&" ".repeat(padding + 2));
            }
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// `label  value` lines, aligned, leaving out empty values. Values that span several
/// lines are indented under the first.
pub fn fields(pairs: &[(&str, String)]) -> String {
    let shown: Vec<&(&str, String)> = pairs.iter().filter(|(_, value)| !value.trim().is_empty()).collect();
    let width = shown.iter().map(|(label, _)| label.chars().count()).max().unwrap_or(0);
    let indent = " ".repeat(width + 2);
    let mut text = String::new();
    for (label, value) in shown {
        let mut lines = value.trim_end().lines();
        let first = lines.next().unwrap_or_default();
        text.push_str(&format!("{label:<width$}  {first}\n"));
        for line in lines {
            text.push_str(format!("{indent}{line}").trim_end());
            text.push('\n');
        }
    }
    text
}

/// The first `max_chars` characters of `text` on one line, with `…` when cut.
pub fn excerpt(text: &str, max_chars: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max_chars {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(max_chars.saturating_sub(1)).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

/// An agent's name when known, else its id.
pub fn agent_label(id: AgentId, names: &HashMap<AgentId, String>) -> String {
    names.get(&id).cloned().unwrap_or_else(|| id.to_string())
}

/// An agent's name and id, for detail views: `worker-1 (0193…)`.
pub fn agent_with_id(id: Option<AgentId>, names: &HashMap<AgentId, String>) -> String {
    match id {
        None => String::new(),
        Some(id) => match names.get(&id) {
            Some(name) => format!("{name} ({id})"),
            None => id.to_string(),
        },
    }
}

/// Who holds a task, for the `AGENT` column: its assignee, else who it is offered to.
pub fn task_holder(task: &Task, names: &HashMap<AgentId, String>) -> String {
    match (task.agent_id, task.offered_to) {
        (Some(agent), _) => agent_label(agent, names),
        (None, Some(offered_to)) => format!("{} (offered)", agent_label(offered_to, names)),
        (None, None) => "-".to_string(),
    }
}

/// Rows of the task table: ID (as people read it: its random last 8 hex digits, which
/// `swarm task show` and the other task commands accept), STATUS, PRI, AGENT, TASK.
pub fn task_rows(tasks: &[Task], names: &HashMap<AgentId, String>) -> Vec<Vec<String>> {
    tasks
        .iter()
        .map(|task| {
            vec![
                task.id.short(),
                task.status.to_string(),
                task.priority.to_string(),
                excerpt(&task_holder(task, names), 24),
                excerpt(&task.task, 60),
            ]
        })
        .collect()
}

pub const TASK_HEADERS: [&str; 5] = ["ID", "STATUS", "PRI", "AGENT", "TASK"];

/// Every field of a task that has a value, for `task show`.
pub fn task_fields(task: &Task, names: &HashMap<AgentId, String>) -> String {
    let time = |at: Option<Timestamp>| at.map(|at| at.to_string()).unwrap_or_default();
    let text = |value: &Option<String>| value.clone().unwrap_or_default();
    let number = |value: Option<i64>| value.map(|n| n.to_string()).unwrap_or_default();
    let depends_on: Vec<String> = task.depends_on.iter().map(|id| id.short()).collect();
    let origin = &task.origin;
    fields(&[
        ("id", task.id.to_string()),
        ("short id", task.id.short()),
        ("status", task.status.to_string()),
        ("priority", task.priority.to_string()),
        ("agent", agent_with_id(task.agent_id, names)),
        ("offered to", agent_with_id(task.offered_to, names)),
        ("creator", agent_with_id(task.creator_agent_id, names)),
        ("source", task.source.clone()),
        ("type", text(&task.task_type)),
        ("tags", task.tags.join(", ")),
        ("depends on", depends_on.join(", ")),
        ("created", task.created_at.to_string()),
        ("updated", task.last_updated_at.to_string()),
        ("offered", time(task.offered_at)),
        ("accepted", time(task.accepted_at)),
        ("finished", time(task.finished_at)),
        ("notified", time(task.notified_at)),
        ("rejection", text(&task.rejection_reason)),
        ("slack channel", text(&origin.slack_channel_id)),
        ("slack thread", text(&origin.slack_thread_ts)),
        ("slack user", text(&origin.slack_user_id)),
        ("mention message", text(&origin.mention_message_id)),
        ("mention channel", text(&origin.mention_channel_id)),
        ("github repo", text(&origin.github_repo)),
        ("github event", text(&origin.github_event_type)),
        ("github number", number(origin.github_number)),
        ("github comment", number(origin.github_comment_id)),
        ("github author", text(&origin.github_author)),
        ("github url", text(&origin.github_url)),
        ("task", task.task.clone()),
        ("progress", text(&task.progress)),
        ("output", text(&task.output)),
        ("failure", text(&task.failure_reason)),
    ])
}

/// The history of a task, one event a line: time, kind, agent, change.
pub fn event_rows(events: &[Event], names: &HashMap<AgentId, String>) -> Vec<Vec<String>> {
    events
        .iter()
        .map(|event| {
            let change = match (&event.old_value, &event.new_value) {
                (Some(old), Some(new)) => format!("{old} → {new}"),
                (None, Some(new)) => new.clone(),
                (Some(old), None) => format!("{old} →"),
                (None, None) => String::new(),
            };
            vec![
                event.created_at.to_string(),
                event.event_type.as_str().to_string(),
                event.agent_id.map(|id| agent_label(id, names)).unwrap_or_else(|| "-".to_string()),
                excerpt(&change, 80),
            ]
        })
        .collect()
}

/// The line under a page of results that says where the next page starts; empty on
/// the last page.
pub fn page_note(offset: u32, n_shown: usize, total: i64) -> String {
    let shown_to = i64::from(offset) + n_shown as i64;
    if n_shown == 0 || shown_to >= total {
        return String::new();
    }
    format!("showing {}-{shown_to} of {total}; next page: --offset {shown_to}\n", i64::from(offset) + 1)
}

pub const EVENT_HEADERS: [&str; 4] = ["TIME", "EVENT", "AGENT", "CHANGE"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns_and_leaves_no_trailing_blanks() {
        let rows = vec![
            vec!["a".to_string(), "pending".to_string(), "x".to_string()],
            vec!["bbb".to_string(), "in_progress".to_string(), String::new()],
        ];
        assert_eq!(
            table(&["ID", "STATUS", "TASK"], &rows),
            "ID   STATUS       TASK\n\
             a    pending      x\n\
             bbb  in_progress\n"
        );
    }

    #[test]
    fn fields_skip_empty_values_and_indent_continuation_lines() {
        let text = fields(&[
            ("id", "1".to_string()),
            ("type", String::new()),
            ("output", "line one\nline two\n".to_string()),
        ]);
        assert_eq!(text, "id      1\noutput  line one\n        line two\n");
    }

    #[test]
    fn page_note_points_at_the_next_page_only_when_there_is_one() {
        assert_eq!(page_note(0, 50, 120), "showing 1-50 of 120; next page: --offset 50\n");
        assert_eq!(page_note(100, 20, 120), "");
        assert_eq!(page_note(0, 3, 3), "");
    }

    #[test]
    fn excerpt_keeps_one_line_and_marks_cuts() {
        assert_eq!(excerpt("fix\n  the   bug", 60), "fix the bug");
        assert_eq!(excerpt("abcdefghij", 5), "abcd…");
        assert_eq!(excerpt("abc  defgh", 5), "abc…");
        assert_eq!(excerpt("", 5), "");
    }
}
