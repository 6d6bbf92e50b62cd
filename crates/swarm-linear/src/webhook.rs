//! Linear's webhooks: the signature, the freshness of a delivery, and what an event
//! means for the swarm. Pure: no I/O, the caller passes the time and the bot's identity.
//!
//! Linear signs the raw body (`Linear-Signature`: hex HMAC-SHA256 with the webhook's
//! signing secret) and writes the time it sent it into the body (`webhookTimestamp`,
//! Unix milliseconds); a delivery more than a minute away from now is refused, as
//! Linear's documentation asks, so a captured body cannot be replayed later.

use hmac::{KeyInit, Mac};
use serde_json::Value;
use sha2::Sha256;

/// How far `webhookTimestamp` may be from now.
pub const TIMESTAMP_WINDOW_MS: i64 = 60_000;

/// The label that makes an issue the swarm's (`LINEAR_SWARM_READY_LABEL`).
pub const DEFAULT_READY_LABEL: &str = "swarm-ready";

/// The workflow-state types in which an issue assigned to the bot becomes a task
/// (`LINEAR_ALLOWED_STATES`): all of Linear's but `triage` and `backlog`.
pub const DEFAULT_ALLOWED_STATES: [&str; 4] = ["unstarted", "started", "completed", "canceled"];

/// Whether `header` is the hex HMAC-SHA256 of `body` under `secret`, compared in
/// constant time.
pub fn signature_valid(secret: &str, header: &str, body: &[u8]) -> bool {
    let Ok(expected) = hex::decode(header.trim()) else {
        return false;
    };
    let Ok(mut mac) = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(body);
    // verify_slice compares in constant time.
    mac.verify_slice(&expected).is_ok()
}

/// The `Linear-Signature` Linear would send: for stand-ins and tests.
pub fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac =
        <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// Whether the body's `webhookTimestamp` is within [`TIMESTAMP_WINDOW_MS`] of `now_ms`.
/// A body without one is not fresh: Linear always sends it.
pub fn timestamp_fresh(json: &Value, now_ms: i64) -> bool {
    let sent = match &json["webhookTimestamp"] {
        Value::Number(number) => number.as_i64(),
        Value::String(text) => text.trim().parse::<i64>().ok(),
        _ => None,
    };
    sent.is_some_and(|sent| (now_ms - sent).abs() <= TIMESTAMP_WINDOW_MS)
}

/// Who the bot is in Linear: the API key's user (`viewer`), or the names configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bot {
    pub id: Option<String>,
    /// Names a mention may use (`@name`), compared without case.
    pub names: Vec<String>,
}

impl Bot {
    fn is(&self, user_id: Option<&str>) -> bool {
        matches!((&self.id, user_id), (Some(id), Some(user)) if id == user)
    }

    /// `@name` for any of its names, or a link to its profile (`/profiles/<name>`),
    /// which is how Linear's editor writes a mention into the markdown.
    pub fn mentioned_in(&self, text: &str) -> bool {
        let text = text.to_lowercase();
        self.names
            .iter()
            .map(|name| name.trim().to_lowercase())
            .filter(|name| !name.is_empty())
            .any(|name| text.contains(&format!("@{name}")) || text.contains(&format!("/profiles/{name}")))
    }
}

/// Which issues become tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    /// Lowercased; an issue with it becomes a task whatever its state.
    pub ready_label: String,
    /// Lowercased workflow-state types in which an assignment to the bot counts.
    pub allowed_states: Vec<String>,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            ready_label: DEFAULT_READY_LABEL.into(),
            allowed_states: DEFAULT_ALLOWED_STATES.iter().map(|state| state.to_string()).collect(),
        }
    }
}

impl Gate {
    /// `LINEAR_SWARM_READY_LABEL` (empty: the default) and `LINEAR_ALLOWED_STATES`
    /// (comma-separated; unset: the default; empty: none, so only the label counts).
    pub fn new(ready_label: Option<&str>, allowed_states: Option<&str>) -> Gate {
        let ready_label = ready_label.map(str::trim).filter(|label| !label.is_empty());
        Gate {
            ready_label: ready_label.unwrap_or(DEFAULT_READY_LABEL).to_lowercase(),
            allowed_states: match allowed_states {
                Some(list) => list
                    .split(',')
                    .map(|state| state.trim().to_lowercase())
                    .filter(|state| !state.is_empty())
                    .collect(),
                None => Gate::default().allowed_states,
            },
        }
    }
}

/// A Linear issue, as a webhook shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Issue {
    pub id: String,
    /// `ENG-42`; only letters, digits and `-` are kept (it is shown outside the fence).
    pub identifier: Option<String>,
    pub title: String,
    pub description: String,
    pub url: Option<String>,
    pub state_type: Option<String>,
    pub labels: Vec<Label>,
    pub assignee_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Label {
    pub id: String,
    pub name: String,
}

/// Who did it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Actor {
    pub id: Option<String>,
    pub name: Option<String>,
}

/// Why an issue became the swarm's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// Created with the ready label.
    CreatedLabelled,
    /// The ready label was added.
    Labelled,
    /// Assigned to the bot, in an allowed state (or with the label).
    Assigned,
}

/// What a delivery means for the swarm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinearEvent {
    IssueReady {
        issue: Issue,
        ready: Ready,
        actor: Actor,
    },
    /// A comment that mentions the bot: for the task of its issue, if it has one.
    Mention {
        issue: Issue,
        comment_id: String,
        body: String,
        actor: Actor,
    },
    /// Nothing for the swarm, and why.
    Ignored(String),
}

/// The event a verified, fresh body carries.
pub fn classify(json: &Value, gate: &Gate, bot: &Bot) -> LinearEvent {
    let kind = json["type"].as_str().unwrap_or_default();
    let action = json["action"].as_str().unwrap_or_default();
    let actor = Actor {
        id: text(&json["actor"]["id"]),
        name: text(&json["actor"]["name"]).or_else(|| text(&json["actor"]["displayName"])),
    };
    match (kind, action) {
        ("Issue", "create" | "update") => issue_event(json, action, gate, bot, actor),
        ("Comment", "create") => comment_event(json, bot, actor),
        _ => LinearEvent::Ignored(format!("Linear {kind} {action}: not an event the swarm handles")),
    }
}

fn issue_event(json: &Value, action: &str, gate: &Gate, bot: &Bot, actor: Actor) -> LinearEvent {
    let issue = issue_of(&json["data"]);
    if issue.id.is_empty() {
        return LinearEvent::Ignored("a Linear issue event without the issue's id".into());
    }
    let ready_label = issue.labels.iter().find(|label| label.name.trim().to_lowercase() == gate.ready_label);
    let before = &json["updatedFrom"];
    let label_added = match (action, ready_label) {
        ("create", Some(_)) => Some(Ready::CreatedLabelled),
        ("update", Some(label)) => before["labelIds"]
            .as_array()
            .is_some_and(|ids| !ids.iter().any(|id| id.as_str() == Some(label.id.as_str())))
            .then_some(Ready::Labelled),
        _ => None,
    };
    if let Some(ready) = label_added {
        return LinearEvent::IssueReady { issue, ready, actor };
    }
    let assigned_now = match action {
        "create" => true,
        // `updatedFrom` holds the fields that changed, with their old values.
        _ => before.get("assigneeId").is_some(),
    };
    if assigned_now && bot.is(issue.assignee_id.as_deref()) {
        let state_allowed = issue
            .state_type
            .as_deref()
            .is_none_or(|state| gate.allowed_states.iter().any(|allowed| allowed == &state.to_lowercase()));
        if state_allowed || ready_label.is_some() {
            return LinearEvent::IssueReady { issue, ready: Ready::Assigned, actor };
        }
        return LinearEvent::Ignored(format!(
            "Linear issue {} was assigned to the bot in state {}, which LINEAR_ALLOWED_STATES leaves out \
             (add the {} label to take it anyway)",
            issue.identifier.as_deref().unwrap_or(&issue.id),
            issue.state_type.as_deref().unwrap_or("?"),
            gate.ready_label
        ));
    }
    LinearEvent::Ignored(format!(
        "Linear issue {} {action}: neither labelled {} nor assigned to the bot",
        issue.identifier.as_deref().unwrap_or(&issue.id),
        gate.ready_label
    ))
}

fn comment_event(json: &Value, bot: &Bot, actor: Actor) -> LinearEvent {
    let data = &json["data"];
    let author = text(&data["userId"]).or_else(|| text(&data["user"]["id"])).or_else(|| actor.id.clone());
    if bot.is(author.as_deref()) {
        return LinearEvent::Ignored("a comment by the bot itself".into());
    }
    let body = data["body"].as_str().unwrap_or_default().to_string();
    if !bot.mentioned_in(&body) {
        return LinearEvent::Ignored("a Linear comment that does not mention the bot".into());
    }
    let mut issue = issue_of(&data["issue"]);
    if issue.id.is_empty() {
        issue.id = text(&data["issueId"]).unwrap_or_default();
    }
    if issue.id.is_empty() {
        return LinearEvent::Ignored("a Linear comment without its issue's id".into());
    }
    let actor = Actor { id: author, name: text(&data["user"]["name"]).or(actor.name) };
    LinearEvent::Mention { issue, comment_id: text(&data["id"]).unwrap_or_default(), body, actor }
}

fn issue_of(data: &Value) -> Issue {
    let labels = data["labels"]
        .as_array()
        .or_else(|| data["labels"]["nodes"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|label| Some(Label { id: text(&label["id"])?, name: text(&label["name"])? }))
        .collect();
    Issue {
        id: text(&data["id"]).unwrap_or_default(),
        identifier: text(&data["identifier"]).map(|identifier| {
            identifier.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').take(40).collect()
        }),
        title: data["title"].as_str().unwrap_or_default().to_string(),
        description: data["description"].as_str().unwrap_or_default().to_string(),
        url: text(&data["url"]),
        state_type: text(&data["state"]["type"]),
        labels,
        assignee_id: text(&data["assigneeId"]).or_else(|| text(&data["assignee"]["id"])),
    }
}

fn text(value: &Value) -> Option<String> {
    value.as_str().map(str::trim).filter(|text| !text.is_empty()).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn bot() -> Bot {
        Bot { id: Some("u-bot".into()), names: vec!["swarm".into(), "Swarm Bot".into()] }
    }

    #[test]
    fn signatures_are_hex_hmac_of_the_raw_body() {
        let body = br#"{"action":"create"}"#;
        let header = sign("s3cret", body);
        assert!(signature_valid("s3cret", &header, body));
        assert!(signature_valid("s3cret", &header.to_uppercase(), body), "hex in either case");
        assert!(!signature_valid("other", &header, body));
        assert!(!signature_valid("s3cret", &header, br#"{"action": "create"}"#));
        assert!(!signature_valid("s3cret", "zz", body));
        assert!(!signature_valid("s3cret", "", body));
    }

    #[test]
    fn a_delivery_is_fresh_within_a_minute() {
        let now = 1_700_000_000_000;
        assert!(timestamp_fresh(&json!({"webhookTimestamp": now - 59_000}), now));
        assert!(timestamp_fresh(&json!({"webhookTimestamp": (now + 30_000).to_string()}), now));
        assert!(!timestamp_fresh(&json!({"webhookTimestamp": now - 61_000}), now));
        assert!(!timestamp_fresh(&json!({}), now));
    }

    #[test]
    fn an_issue_created_or_labelled_ready_is_the_swarms() {
        let gate = Gate::default();
        let labels = json!([{"id": "l-1", "name": "bug"}, {"id": "l-2", "name": "Swarm-Ready"}]);
        let created = json!({"type": "Issue", "action": "create", "actor": {"id": "u-1", "name": "Ada"},
            "data": {"id": "i-1", "identifier": "ENG-1", "title": "T", "labels": labels}});
        let LinearEvent::IssueReady { issue, ready, actor } = classify(&created, &gate, &bot()) else {
            panic!("created labelled")
        };
        assert_eq!((issue.identifier.as_deref(), ready), (Some("ENG-1"), Ready::CreatedLabelled));
        assert_eq!(actor.name.as_deref(), Some("Ada"));
        let labelled = json!({"type": "Issue", "action": "update", "updatedFrom": {"labelIds": ["l-1"]},
            "data": {"id": "i-1", "labels": labels}});
        assert!(matches!(
            classify(&labelled, &gate, &bot()),
            LinearEvent::IssueReady { ready: Ready::Labelled, .. }
        ));
        // Another field changed on an issue that already had the label: nothing new.
        let retitled = json!({"type": "Issue", "action": "update", "updatedFrom": {"title": "old"},
            "data": {"id": "i-1", "labels": labels}});
        assert!(matches!(classify(&retitled, &gate, &bot()), LinearEvent::Ignored(_)));
        let unlabelled = json!({"type": "Issue", "action": "create", "data": {"id": "i-2", "labels": []}});
        assert!(matches!(classify(&unlabelled, &gate, &bot()), LinearEvent::Ignored(_)));
    }

    #[test]
    fn an_assignment_to_the_bot_counts_in_an_allowed_state() {
        let assigned = |state: &str| {
            json!({"type": "Issue", "action": "update", "updatedFrom": {"assigneeId": null},
                "data": {"id": "i-1", "assigneeId": "u-bot", "state": {"type": state}, "labels": []}})
        };
        let gate = Gate::default();
        assert!(matches!(classify(&assigned("unstarted"), &gate, &bot()), LinearEvent::IssueReady { .. }));
        assert!(matches!(classify(&assigned("backlog"), &gate, &bot()), LinearEvent::Ignored(_)));
        let only_started = Gate::new(None, Some(" Started "));
        assert!(matches!(
            classify(&assigned("started"), &only_started, &bot()),
            LinearEvent::IssueReady { .. }
        ));
        assert!(matches!(classify(&assigned("unstarted"), &only_started, &bot()), LinearEvent::Ignored(_)));
    }

    #[test]
    fn a_comment_counts_when_it_mentions_the_bot_and_is_not_its_own() {
        let comment = |user: &str, body: &str| {
            json!({"type": "Comment", "action": "create",
                "data": {"id": "c-1", "body": body, "userId": user, "issueId": "i-1",
                         "issue": {"id": "i-1", "identifier": "ENG-1"}}})
        };
        let event = classify(&comment("u-1", "@swarm please also fix the test"), &Gate::default(), &bot());
        let LinearEvent::Mention { issue, body, .. } = event else { panic!("a mention") };
        assert_eq!((issue.id.as_str(), body.as_str()), ("i-1", "@swarm please also fix the test"));
        let linked = comment("u-1", "[@Swarm Bot](https://linear.app/acme/profiles/swarm) look");
        assert!(matches!(classify(&linked, &Gate::default(), &bot()), LinearEvent::Mention { .. }));
        assert!(matches!(
            classify(&comment("u-1", "no mention"), &Gate::default(), &bot()),
            LinearEvent::Ignored(_)
        ));
        assert!(matches!(
            classify(&comment("u-bot", "@swarm done"), &Gate::default(), &bot()),
            LinearEvent::Ignored(_)
        ));
    }
}
