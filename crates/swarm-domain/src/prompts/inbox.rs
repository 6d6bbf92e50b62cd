//! The lead's inbox prompt: Slack messages routed to the lead, with the two things it may
//! do with each. One text for the runner (which sends it when the poll hands the lead
//! `slack_inbox_message`) and for the MCP prompt `slack-inbox` (which renders the caller's
//! open inbox), so the two never drift apart.

use super::clip;
use crate::{inbox::InboxMessage, untrusted};

/// The name of the MCP prompt that serves this text.
pub const PROMPT_NAME: &str = "slack-inbox";
/// What the MCP prompt says it is for.
pub const PROMPT_DESCRIPTION: &str = "The lead's Slack inbox: the open messages (or one, by inboxMessageId), each to answer with \
     slack-reply or hand to a worker with inbox-delegate";
/// A message's text is cut to this many characters; get-inbox-message shows it in full.
pub const CONTENT_CHARS: usize = 100;

/// One inbox message as the prompt shows it. Borrowed fields, so the runner (which reads
/// the poll's JSON) and the hub (which has [`InboxMessage`]s) fill it alike; an unknown
/// field is `?`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    pub id: &'a str,
    pub slack_user_id: &'a str,
    pub slack_channel_id: &'a str,
    pub matched_text: &'a str,
    pub content: &'a str,
}

/// An inbox message with its id as text, for an [`Entry`] to borrow.
pub struct Owned {
    id: String,
    message: InboxMessage,
}

impl Owned {
    pub fn new(message: InboxMessage) -> Self {
        Owned { id: message.id.to_string(), message }
    }

    pub fn entry(&self) -> Entry<'_> {
        let slack = &self.message.slack;
        Entry {
            id: &self.id,
            slack_user_id: slack.slack_user_id.as_deref().unwrap_or("?"),
            slack_channel_id: slack.slack_channel_id.as_deref().unwrap_or("?"),
            matched_text: self.message.matched_text.as_deref().unwrap_or("?"),
            content: &self.message.content,
        }
    }
}

/// The prompt for `entries`: each message fenced as untrusted Slack text, then what the
/// lead does with them.
pub fn prompt(entries: &[Entry<'_>]) -> String {
    let mut prompt = format!("You have {} inbox message(s) from Slack:\n", entries.len());
    for entry in entries {
        prompt.push_str(&format!(
            "- inboxMessageId: {}; from user {} in channel {}; routed because: {}\n{}\n",
            entry.id,
            entry.slack_user_id,
            entry.slack_channel_id,
            entry.matched_text,
            untrusted::fence("slack", Some(entry.slack_user_id), &clip(entry.content, CONTENT_CHARS)),
        ));
    }
    prompt.push_str(
        "\nYou are the lead: you answer and delegate, you never work tasks yourself. The Slack bridge \
         has already acknowledged each message in its thread: do not acknowledge it again. For each \
         message do exactly one of two things: answer a simple question directly in its thread with \
         slack-reply (inboxMessageId); or hand work to a worker with inbox-delegate (inboxMessageId, \
         agentId; get-swarm lists the workers and their free capacity). After delegating, say nothing \
         more in the thread: when the worker finishes, the bridge posts its outcome there. \
         get-inbox-message shows a message in full, with its thread history.",
    );
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_fences_each_message_and_names_the_two_choices() {
        let long = "x".repeat(CONTENT_CHARS + 5);
        let entries = [Entry {
            id: "0190abcd",
            slack_user_id: "U1",
            slack_channel_id: "C1",
            matched_text: "@lead",
            content: &long,
        }];
        let text = prompt(&entries);
        assert!(text.starts_with("You have 1 inbox message(s) from Slack:\n- inboxMessageId: 0190abcd;"));
        assert!(text.contains(&format!("{}...", "x".repeat(CONTENT_CHARS))), "{text}");
        assert!(!text.contains(&"x".repeat(CONTENT_CHARS + 1)), "{text}");
        assert!(text.contains("slack-reply (inboxMessageId)") && text.contains("inbox-delegate"));
    }
}
