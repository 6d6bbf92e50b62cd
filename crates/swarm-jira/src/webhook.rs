//! Jira Cloud's webhooks: the shared token, the delivery's identity, and what an event
//! means for the swarm. Pure: no I/O.
//!
//! Jira does not sign webhooks; the reference puts a high-entropy token in the webhook's
//! URL (`/api/trackers/jira/webhook/<JIRA_WEBHOOK_TOKEN>`), compared in constant time.
//! A request carrying the token vouches for its headers too, so Jira's own delivery id
//! (`X-Atlassian-Webhook-Identifier`, the same across its retries) marks it; without
//! one, the reference's synthesized id (event, timestamp, entity, body digest) does.

use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::adf;

/// The label that makes an issue the swarm's (`JIRA_SWARM_READY_LABEL`).
pub const DEFAULT_READY_LABEL: &str = "swarm-ready";

/// Whether the token in the URL is the configured one, in constant time (a length
/// mismatch too takes the same comparison).
pub fn token_valid(given: &str, expected: &str) -> bool {
    if expected.is_empty() {
        return false;
    }
    let given = Sha256::digest(given.as_bytes());
    let expected = Sha256::digest(expected.as_bytes());
    bool::from(given.ct_eq(&expected))
}

/// The delivery's id: Jira's header when it sent one, else event, timestamp, entity
/// and the body's digest (the reference's `synthesizeDeliveryId`).
pub fn delivery_id(header: Option<&str>, json: &Value, body: &[u8]) -> String {
    if let Some(id) = header.map(str::trim).filter(|id| !id.is_empty()) {
        return format!("jira:{}", id.chars().take(200).collect::<String>());
    }
    let event = json["webhookEvent"].as_str().unwrap_or_default();
    let at = match &json["timestamp"] {
        Value::Number(number) => number.to_string(),
        Value::String(text) => text.clone(),
        _ => String::new(),
    };
    let entity = json["issue"]["id"].as_str().or_else(|| json["comment"]["id"].as_str()).unwrap_or("_");
    let digest = hex::encode(Sha256::digest(body));
    format!("{event}:{at}:{entity}:{}", &digest[..16])
}

/// A Jira issue, as a webhook shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Issue {
    pub id: String,
    /// `KAN-7`; only letters, digits and `-` kept (it is shown outside the fence).
    pub key: String,
    pub summary: String,
    pub description: String,
    pub labels: Vec<String>,
    pub assignee: Option<String>,
}

/// Why an issue became the swarm's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    Assigned,
    Labelled,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JiraEvent {
    IssueReady { issue: Issue, ready: Ready, actor: Option<String> },
    Ignored(String),
}

/// The event a body carrying the token means, for the bot `bot` (an Atlassian
/// `accountId`, when known) and the ready label (lowercased).
pub fn classify(json: &Value, bot: Option<&str>, ready_label: &str) -> JiraEvent {
    let event = json["webhookEvent"].as_str().unwrap_or_default();
    let actor = json["user"]["accountId"].as_str().map(str::to_string);
    if bot.is_some() && actor.as_deref() == bot {
        return JiraEvent::Ignored(format!("{event} by the bot itself"));
    }
    let issue = issue_of(&json["issue"]);
    if issue.id.is_empty() || issue.key.is_empty() {
        return JiraEvent::Ignored(format!("{event}: no issue id and key"));
    }
    let is_bot = |account: Option<&str>| bot.is_some() && account == bot;
    let has_label = issue.labels.iter().any(|label| label.to_lowercase() == ready_label);
    let ready = match event {
        "jira:issue_created" if is_bot(issue.assignee.as_deref()) => Some(Ready::Assigned),
        "jira:issue_created" if has_label => Some(Ready::Labelled),
        "jira:issue_updated" => {
            let items = json["changelog"]["items"].as_array().cloned().unwrap_or_default();
            let field = |item: &Value, name: &str| item["field"] == name || item["fieldId"] == name;
            let assigned = items.iter().any(|item| {
                field(item, "assignee") && is_bot(item["to"].as_str()) && !is_bot(item["from"].as_str())
            });
            let labelled = items.iter().any(|item| {
                let words = |key: &str| {
                    item[key]
                        .as_str()
                        .unwrap_or_default()
                        .split_whitespace()
                        .any(|l| l.to_lowercase() == ready_label)
                };
                field(item, "labels") && words("toString") && !words("fromString")
            });
            if assigned {
                Some(Ready::Assigned)
            } else if labelled {
                Some(Ready::Labelled)
            } else {
                None
            }
        }
        _ => None,
    };
    match ready {
        Some(ready) => JiraEvent::IssueReady { issue, ready, actor },
        None => JiraEvent::Ignored(format!(
            "{event} on {}: neither assigned to the bot nor labelled {ready_label}",
            issue.key
        )),
    }
}

fn issue_of(issue: &Value) -> Issue {
    let fields = &issue["fields"];
    Issue {
        id: match &issue["id"] {
            Value::String(id) => id.clone(),
            Value::Number(id) => id.to_string(),
            _ => String::new(),
        },
        key: issue["key"]
            .as_str()
            .unwrap_or_default()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .take(40)
            .collect(),
        summary: fields["summary"].as_str().unwrap_or_default().to_string(),
        description: match &fields["description"] {
            Value::String(text) => text.clone(),
            adf_doc => adf::text_of(adf_doc),
        },
        labels: fields["labels"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|label| label.as_str().map(str::to_string))
            .collect(),
        assignee: fields["assignee"]["accountId"].as_str().map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_token_is_compared_whole() {
        assert!(token_valid("t0ken-abc", "t0ken-abc"));
        assert!(!token_valid("t0ken-ab", "t0ken-abc"));
        assert!(!token_valid("", "t0ken-abc"));
        assert!(!token_valid("", ""), "no token configured accepts nothing");
    }

    #[test]
    fn a_delivery_is_jiras_id_or_the_synthesized_one() {
        let body = br#"{"webhookEvent":"jira:issue_updated","timestamp":1,"issue":{"id":"10"}}"#;
        let json: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(delivery_id(Some("abc"), &json, body), "jira:abc");
        let synthesized = delivery_id(None, &json, body);
        assert!(synthesized.starts_with("jira:issue_updated:1:10:"), "{synthesized}");
        assert_eq!(synthesized, delivery_id(Some(" "), &json, body));
    }

    #[test]
    fn an_issue_assigned_to_or_labelled_for_the_bot_is_the_swarms() {
        let issue = json!({"id": "10001", "key": "KAN-1", "fields": {"summary": "S", "labels": ["bug"]}});
        let assigned = json!({"webhookEvent": "jira:issue_updated", "user": {"accountId": "acc-1"},
            "issue": issue, "changelog": {"items": [{"field": "assignee", "from": null, "to": "acc-bot"}]}});
        assert!(matches!(
            classify(&assigned, Some("acc-bot"), "swarm-ready"),
            JiraEvent::IssueReady { ready: Ready::Assigned, .. }
        ));
        assert!(matches!(classify(&assigned, Some("acc-other"), "swarm-ready"), JiraEvent::Ignored(_)));
        let labelled = json!({"webhookEvent": "jira:issue_updated", "issue": issue,
            "changelog": {"items": [{"field": "labels", "fromString": "bug", "toString": "bug Swarm-Ready"}]}});
        assert!(matches!(
            classify(&labelled, None, "swarm-ready"),
            JiraEvent::IssueReady { ready: Ready::Labelled, .. }
        ));
        let created = json!({"webhookEvent": "jira:issue_created",
            "issue": {"id": "10002", "key": "KAN-2", "fields": {"labels": ["swarm-ready"]}}});
        assert!(matches!(classify(&created, None, "swarm-ready"), JiraEvent::IssueReady { .. }));
        let by_bot = json!({"webhookEvent": "jira:issue_updated", "user": {"accountId": "acc-bot"},
            "issue": issue, "changelog": {"items": [{"field": "assignee", "to": "acc-bot"}]}});
        assert!(matches!(classify(&by_bot, Some("acc-bot"), "swarm-ready"), JiraEvent::Ignored(_)));
    }
}
