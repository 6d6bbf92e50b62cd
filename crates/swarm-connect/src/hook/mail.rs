//! The mail side of the hooks (`seeds/agent-mailbox.md`, "SDK Hook Integration"):
//! - `UserPromptSubmit` delivers the agent's unread urgent and normal mail into its
//!   context, urgent first (delivering marks it read, so each piece is injected once);
//! - `Stop` and `SubagentStop` tell the coordinator, with a `systemMessage`, that the
//!   agent stopped while waiting on mail it sent (awaiting a response, or urgent and not
//!   yet read by its recipient);
//! - `PostToolUse` refreshes the agent's counts (`inbox_count.json`, the seed's quick
//!   unread check) and speaks up only when new urgent mail arrived since the last refresh.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Value, json};
use swarm_client::Client;
use swarm_domain::{
    id::AgentId,
    mail::{Mail, MailType},
    time::Timestamp,
};

use super::{
    HookSettings, short_id,
    trace::{self, Counts},
};

use swarm_domain::prompts::MAIL_PER_PROMPT as DELIVER_PER_PROMPT;

#[derive(Debug, Deserialize)]
struct Delivered {
    mail: Vec<Mail>,
}

#[derive(Debug, Deserialize)]
struct MailPage {
    mail: Vec<Mail>,
}

/// Deliver the unread mail and say it; `None` when there is none (or the hub failed).
pub(super) async fn deliver(client: &Client, settings: &HookSettings) -> Option<String> {
    settings.agent_id?;
    let body = json!({"limit": DELIVER_PER_PROMPT});
    // Names first: once the hub has marked the mail delivered, nothing may stand
    // between the answer and printing it.
    let names = agent_names(client).await;
    let delivered: Delivered = match client.post_json("/api/mail/read", &body).await {
        Ok(delivered) => delivered,
        Err(error) => {
            trace::why("user-prompt-submit", &format!("could not read the agent's mail: {error}"));
            return None;
        }
    };
    (!delivered.mail.is_empty()).then(|| describe_delivery(&delivered.mail, &names))
}

/// The text is the runner's too (a Codex run, which has no hooks, gets it in its prompt).
fn describe_delivery(mail: &[Mail], names: &HashMap<AgentId, String>) -> String {
    swarm_domain::prompts::mail_delivery(mail, names)
}

/// Tell the hub the agent stopped (`POST /api/mail/stopped`): when mail is pending, the
/// agent that delegated its work gets urgent mail, which wakes it wherever it runs.
pub(super) async fn tell_coordinator(client: &Client, settings: &HookSettings, event: &str) {
    if settings.agent_id.is_none() {
        return;
    }
    if let Err(error) = client.post_json::<_, Value>("/api/mail/stopped", &json!({})).await {
        trace::why(event, &format!("could not tell the hub the agent stopped: {error}"));
    }
}

/// What the coordinator should know when the agent stops: the mail it still waits on.
pub(super) async fn stop_alert(client: &Client, settings: &HookSettings, event: &str) -> Option<String> {
    let me = settings.agent_id?;
    let query = [("box", "outbox".to_string()), ("pending", "true".to_string()), ("limit", "20".to_string())];
    let pending: MailPage = match client.get_json("/api/mail", &query).await {
        Ok(page) => page,
        Err(error) => {
            trace::why(event, &format!("could not list the agent's pending mail: {error}"));
            return None;
        }
    };
    let mut pending = pending;
    // Status updates are news, not waiting: among them are the hub's own alerts to the
    // coordinator (`POST /api/mail/stopped`), which must not be reported in turn.
    pending.mail.retain(|piece| piece.mail_type != MailType::StatusUpdate);
    if pending.mail.is_empty() {
        return None;
    }
    let names = agent_names(client).await;
    let lines: Vec<String> = pending
        .mail
        .iter()
        .map(|piece| {
            let state = match (piece.is_waiting(), piece.read_at) {
                (true, None) => "awaiting a response, not read yet",
                (true, Some(_)) => "awaiting a response",
                (false, _) => "not read yet",
            };
            format!(
                "{} {} to {} \"{}\" ({state}; mailId {})",
                piece.priority,
                piece.mail_type,
                name_of(&names, piece.to_agent_id),
                piece.subject,
                piece.id
            )
        })
        .collect();
    let waiting = pending.mail.iter().any(Mail::is_waiting);
    let headline = if waiting { "stopped waiting for a response" } else { "stopped with urgent mail unread" };
    Some(format!("swarm: {} {headline}: {}", name_of(&names, me), lines.join("; ")))
}

/// Refresh the counts; a line for the agent only when urgent mail arrived since the
/// previous refresh (a tool call is no moment for a reminder it already had).
pub(super) async fn refresh_counts(client: &Client, settings: &HookSettings) -> Option<String> {
    let agent = settings.agent_id?;
    let counts: Counts = match client.get_json("/api/mail/unread-count", &[]).await {
        Ok(counts) => counts,
        Err(error) => {
            trace::why("post-tool-use", &format!("could not read the mail counts: {error}"));
            return None;
        }
    };
    let previous = trace::read_counts(agent);
    trace::write_counts(agent, &counts, Timestamp::now());
    let new_urgent = counts.urgent > previous.map_or(0, |previous| previous.urgent);
    (new_urgent && counts.urgent > 0).then(|| {
        format!(
            "You have {} urgent unread mail ({} unread in all): read it now with read-mail, and answer with \
             reply-mail.",
            counts.urgent, counts.unread
        )
    })
}

async fn agent_names(client: &Client) -> HashMap<AgentId, String> {
    let Ok(list) = client.get_json::<Value>("/api/agents", &[]).await else {
        return HashMap::new();
    };
    let agents = list.get("agents").and_then(Value::as_array).cloned().unwrap_or_default();
    agents
        .iter()
        .filter_map(|agent| {
            let id = AgentId::parse(agent.get("id")?.as_str()?).ok()?;
            let name = agent.get("name")?.as_str()?.to_string();
            let lead = agent.get("isLead").and_then(Value::as_bool).unwrap_or(false);
            Some((id, if lead { format!("{name} (the lead)") } else { name }))
        })
        .collect()
}

fn name_of(names: &HashMap<AgentId, String>, id: AgentId) -> String {
    names.get(&id).cloned().unwrap_or_else(|| format!("agent {}", short_id(&id.to_string())))
}

#[cfg(test)]
mod tests {
    use swarm_domain::{
        id::MailId,
        mail::{MailPriority, MailStatus},
    };

    use super::*;

    fn mail(priority: MailPriority, subject: &str, awaiting: bool) -> Mail {
        Mail {
            id: MailId::new_v7(),
            from_agent_id: AgentId::new_v7(),
            to_agent_id: AgentId::new_v7(),
            mail_type: MailType::Response,
            subject: subject.into(),
            body: "line one\nline two".into(),
            priority,
            awaiting_response: awaiting,
            in_reply_to: None,
            status: MailStatus::Read,
            read_at: None,
            answered_at: None,
            lease_expires_at: None,
            created_at: Timestamp::now(),
        }
    }

    #[test]
    fn delivery_marks_priorities_and_who_waits() {
        let urgent = mail(MailPriority::Urgent, "Re: build", false);
        let names = HashMap::from([(urgent.from_agent_id, "lead-1 (the lead)".to_string())]);
        let text = describe_delivery(&[urgent.clone(), mail(MailPriority::Normal, "fyi", true)], &names);
        assert!(text.starts_with("Mail for you (2, urgent first"), "{text}");
        assert!(text.contains(&format!("[URGENT] response from lead-1 (the lead) (mailId {})", urgent.id)));
        assert!(text.contains("[normal] response from agent "), "{text}");
        assert!(text.contains("The sender is waiting for your response."), "{text}");
        assert!(text.contains("line one line two"), "{text}");
    }
}
