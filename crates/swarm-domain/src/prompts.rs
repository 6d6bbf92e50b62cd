//! The instructions agents get, in one place: the slash commands `swarm connect` installs for
//! Claude Code (`.claude/commands/<name>.md`) are the same texts the runner sends, in full, to
//! a CLI without slash commands (Codex), so the two never drift apart.
//!
//! The runner's prompts start with a command line (`/work-on-task <id>`), then details of
//! their own (the task's text, a result). [`expand`] turns such a prompt into plain text.

pub mod inbox;

use std::collections::HashMap;

use crate::{
    id::AgentId,
    mail::{Mail, MailPriority},
};

/// One command: its name (`/name`) and its file, with YAML front matter as Claude Code reads
/// it (`description`, `argument-hint`) and `$ARGUMENTS` where the arguments go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Command {
    pub name: &'static str,
    pub file: &'static str,
}

/// Every command, in the order `swarm connect` lists them.
pub const COMMANDS: [Command; 6] = [
    Command { name: "work-on-task", file: include_str!("prompts/work-on-task.md") },
    Command { name: "review-offered-task", file: include_str!("prompts/review-offered-task.md") },
    Command { name: "task-result", file: include_str!("prompts/task-result.md") },
    Command { name: "swarm-chat", file: include_str!("prompts/swarm-chat.md") },
    Command { name: "start-worker", file: include_str!("prompts/start-worker.md") },
    Command { name: "start-leader", file: include_str!("prompts/start-leader.md") },
];

/// The command called `name` (without the slash).
pub fn command(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|command| command.name == name)
}

impl Command {
    /// The instructions: the file without its front matter.
    pub fn body(&self) -> &'static str {
        let text = self.file;
        let Some(rest) = text.strip_prefix("---\n") else {
            return text.trim_start();
        };
        match rest.find("\n---\n") {
            Some(end) => rest[end + 5..].trim_start(),
            None => text,
        }
    }

    /// The instructions with `arguments` where Claude Code would put them.
    pub fn render(&self, arguments: &str) -> String {
        self.body().replace("$ARGUMENTS", arguments.trim())
    }
}

/// A prompt that starts with a known command (`/work-on-task <id>\n\n<text>`) as plain text,
/// as Claude Code makes it: everything after the command's name is its arguments, put where
/// the file says `$ARGUMENTS` (once in every command, so details are said once); a command
/// that takes none gets them after its instructions. `None` when the prompt does not start
/// with a known command.
pub fn expand(prompt: &str) -> Option<String> {
    let invocation = prompt.strip_prefix('/')?;
    let (name, arguments) = invocation.split_once(char::is_whitespace).unwrap_or((invocation, ""));
    let command = command(name)?;
    let arguments = arguments.trim();
    if command.body().contains("$ARGUMENTS") {
        return Some(command.render(arguments));
    }
    let mut text = command.body().to_string();
    if !arguments.is_empty() {
        text.push_str("\n\n");
        text.push_str(arguments);
    }
    Some(text)
}

/// The inverse of [`expand`], for programs that stand in for a CLI in tests: where `text`
/// holds a command's instructions in full (after whatever preceded them, e.g. a system
/// prompt), the prompt in command form, `/name <arguments>`.
pub fn collapse(text: &str) -> Option<String> {
    COMMANDS.iter().find_map(|command| {
        let body = command.body();
        let (before, after) = body.split_once("$ARGUMENTS").unwrap_or((body, ""));
        let start = text.find(before)? + before.len();
        let rest = &text[start..];
        let arguments = if body.contains("$ARGUMENTS") {
            match after.trim() {
                "" => rest,
                _ => &rest[..rest.find(after)?],
            }
        } else {
            rest
        };
        Some(format!("/{} {}", command.name, arguments.trim()).trim_end().to_string())
    })
}

/// The most pieces of mail one prompt gets; the rest wait for the next one (or `read-mail`).
pub const MAIL_PER_PROMPT: i64 = 10;
/// One piece of mail's body in the agent's context: enough to act on, never a flood.
const MAIL_BODY_CHARS: usize = 2_000;

/// Mail just delivered to an agent (`POST /api/mail/read`), as its context gets it: by Claude
/// Code's `UserPromptSubmit` hook, and by the runner in a Codex run's prompt. `names` gives
/// agents' names (a lead's with "(the lead)"); others show as `agent <first 8 of id>`.
pub fn mail_delivery(mail: &[Mail], names: &HashMap<AgentId, String>) -> String {
    let name_of = |id: AgentId| {
        names.get(&id).cloned().unwrap_or_else(|| format!("agent {}", id.to_string().get(..8).unwrap_or("")))
    };
    let mut text = format!("Mail for you ({}, urgent first; it is now marked read):\n", mail.len());
    for piece in mail {
        let marker = match piece.priority {
            MailPriority::Urgent => "[URGENT]",
            MailPriority::Normal => "[normal]",
            MailPriority::Low => "[low]",
        };
        let waits = if piece.awaiting_response { " The sender is waiting for your response." } else { "" };
        let answers = piece.in_reply_to.map(|id| format!(", answering your mail {id}")).unwrap_or_default();
        text.push_str(&format!(
            "{marker} {} from {} (mailId {}{answers}): \"{}\".{waits}\n  {}\n",
            piece.mail_type,
            name_of(piece.from_agent_id),
            piece.id,
            piece.subject,
            excerpt(&piece.body, MAIL_BODY_CHARS),
        ));
    }
    text.push_str("Answer mail with reply-mail (mailId); list-mail shows your history.");
    text
}

/// `text` cut to `max_chars` characters, with `...` when cut (the runner's summaries).
pub fn clip(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

/// `text` on one line, cut to `max_chars` with an ellipsis.
pub fn excerpt(text: &str, max_chars: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max_chars {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(max_chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_has_front_matter_and_a_body_that_uses_its_arguments_or_needs_none() {
        for command in COMMANDS {
            assert!(command.file.starts_with("---\ndescription: "), "{}", command.name);
            let body = command.body();
            assert!(body.starts_with("# "), "{}: {body}", command.name);
            let takes_arguments = command.file.contains("argument-hint:");
            assert_eq!(body.contains("$ARGUMENTS"), takes_arguments, "{}", command.name);
        }
    }

    #[test]
    fn every_command_says_its_arguments_once() {
        for command in COMMANDS {
            assert!(command.body().matches("$ARGUMENTS").count() <= 1, "{}", command.name);
        }
    }

    #[test]
    fn expand_renders_the_command_with_the_details_once() {
        let prompt = "/work-on-task 0190abcd\n\nWrite the notes";
        let text = expand(prompt).unwrap();
        assert!(text.starts_with("# Work on swarm task 0190abcd\n\nWrite the notes\n"), "{text}");
        assert_eq!(text.matches("Write the notes").count(), 1, "{text}");
        assert!(!text.contains("$ARGUMENTS") && !text.contains("taskId: \""), "{text}");
        assert!(expand("/start-worker").unwrap().starts_with("# Start as a swarm worker"));
        assert!(expand("/start-worker\n\nMore").unwrap().ends_with("\n\nMore"));
        assert_eq!(expand("/unknown-command 1"), None);
        assert_eq!(collapse(&format!("You are a worker.\n\n{text}")).as_deref(), Some(prompt));
        assert_eq!(
            collapse(&expand("/work-on-task 0190abcd").unwrap()).as_deref(),
            Some("/work-on-task 0190abcd")
        );
        assert_eq!(collapse(&expand("/start-worker").unwrap()).as_deref(), Some("/start-worker"));
        assert_eq!(collapse("plain text"), None);
        assert_eq!(expand("plain text"), None);
    }
}
