//! GitLab's webhook events, read into what concerns the bot: a note mentioning it on an
//! issue or merge request, an issue or merge request opened mentioning it or assigned to
//! it, a failed pipeline of a merge request. Everything else concerns nobody here.
//!
//! The words (titles, descriptions, notes) stay GitLab's users' and go into the fence;
//! what goes outside it is built from identifiers only (a username, a project path, a
//! number), each checked to be one.

use serde_json::Value;
use swarm_domain::trigger::sender_identifier;

/// The item a task is about, and where its report goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub project_id: i64,
    /// `group/subgroup/project`, when it reads as a path.
    pub project_path: Option<String>,
    pub kind: ItemKind,
    pub iid: i64,
    pub url: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    Issue,
    MergeRequest,
}

impl ItemKind {
    /// Its REST API path segment.
    pub fn api_segment(self) -> &'static str {
        match self {
            ItemKind::Issue => "issues",
            ItemKind::MergeRequest => "merge_requests",
        }
    }

    pub fn entity_type(self) -> &'static str {
        match self {
            ItemKind::Issue => "issue",
            ItemKind::MergeRequest => "merge_request",
        }
    }

    fn words(self) -> &'static str {
        match self {
            ItemKind::Issue => "issue",
            ItemKind::MergeRequest => "merge request",
        }
    }

    fn with_article(self) -> &'static str {
        match self {
            ItemKind::Issue => "an issue",
            ItemKind::MergeRequest => "a merge request",
        }
    }

    /// GitLab's own reference sign: `#12` for an issue, `!7` for a merge request.
    fn sign(self) -> char {
        match self {
            ItemKind::Issue => '#',
            ItemKind::MergeRequest => '!',
        }
    }
}

impl Item {
    /// What the tracker link stores to reach the item again: `<project id>/<issues|merge_requests>/<iid>`.
    pub fn external_id(&self) -> String {
        format!("{}/{}/{}", self.project_id, self.kind.api_segment(), self.iid)
    }

    /// What people call it: `group/project#12`, `group/project!7`.
    pub fn identifier(&self) -> String {
        let project = self.project_path.clone().unwrap_or_else(|| format!("project {}", self.project_id));
        format!("{project}{}{}", self.kind.sign(), self.iid)
    }
}

/// An event that asks the bot for work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub item: Item,
    /// Who asked: GitLab's user id (for the membership check) and username.
    pub user_id: Option<i64>,
    pub username: Option<String>,
    /// One line of ours: what happened where, identifiers only.
    pub summary: String,
    /// `gitlab-issue`, `gitlab-mr`, `gitlab-ci`.
    pub task_type: &'static str,
}

/// What a delivery is: a request for the bot, or why it concerns nobody here.
pub fn read(json: &Value, bot: &str) -> Result<Request, String> {
    let kind = json["object_kind"].as_str().unwrap_or_default();
    let user = &json["user"];
    let username = user["username"].as_str().and_then(sender_identifier).map(str::to_string);
    if username.as_deref().is_some_and(|name| name.eq_ignore_ascii_case(bot)) {
        return Err(format!("GitLab {kind} event by @{bot} itself"));
    }
    let by = username.as_deref().map(|name| format!("@{name}")).unwrap_or_else(|| "someone".into());
    let project_id = json["project"]["id"].as_i64().or_else(|| json["project_id"].as_i64());
    let Some(project_id) = project_id else {
        return Err(format!("GitLab {kind} event without a project id"));
    };
    let project_path = json["project"]["path_with_namespace"].as_str().filter(|path| is_path(path));
    let item = |kind: ItemKind, attributes: &Value| -> Option<Item> {
        Some(Item {
            project_id,
            project_path: project_path.map(str::to_string),
            kind,
            iid: attributes["iid"].as_i64()?,
            url: attributes["url"].as_str().filter(|url| url.starts_with("http")).map(str::to_string),
        })
    };
    let request = |item: Item, what: String, task_type: &'static str| Request {
        summary: format!("{what} (by {by} on {} {})", item.kind.words(), item.identifier()),
        item,
        user_id: user["id"].as_i64(),
        username: username.clone(),
        task_type,
    };
    let attributes = &json["object_attributes"];
    let action = attributes["action"].as_str().unwrap_or_default();
    let ignored = || format!("GitLab {kind} event ({action}) does not concern @{bot}");
    match kind {
        "note" => {
            if !mentions(&attributes["note"], bot) {
                return Err(ignored());
            }
            let (item_kind, item_attributes) = match attributes["noteable_type"].as_str() {
                Some("Issue") => (ItemKind::Issue, &json["issue"]),
                Some("MergeRequest") => (ItemKind::MergeRequest, &json["merge_request"]),
                _ => return Err(format!("GitLab note on a {} is not handled", noteable(attributes))),
            };
            let item = item(item_kind, item_attributes).ok_or_else(ignored)?;
            let task_type = task_type(item_kind);
            Ok(request(item, format!("You were mentioned in a comment for @{bot}"), task_type))
        }
        "issue" | "merge_request" => {
            let item_kind = if kind == "issue" { ItemKind::Issue } else { ItemKind::MergeRequest };
            let opened = action == "open" || action == "reopen";
            let what = if opened && mentions(&attributes["description"], bot) {
                format!("You were mentioned in a new {}", item_kind.words())
            } else if (opened && assigned_now(json, bot, false)) || assigned_now(json, bot, true) {
                format!("You were assigned {}", item_kind.with_article())
            } else {
                return Err(ignored());
            };
            let item = item(item_kind, attributes).ok_or_else(ignored)?;
            Ok(request(item, what, task_type(item_kind)))
        }
        "pipeline" => {
            if attributes["status"].as_str() != Some("failed") {
                return Err(ignored());
            }
            let Some(item) = item(ItemKind::MergeRequest, &json["merge_request"]) else {
                return Err("GitLab pipeline failed outside a merge request: not handled".into());
            };
            let pipeline = attributes["id"].as_i64().map(|id| format!(" #{id}")).unwrap_or_default();
            Ok(request(item, format!("Pipeline{pipeline} failed"), "gitlab-ci"))
        }
        _ => Err(format!("GitLab {} events are not handled", if kind.is_empty() { "unknown" } else { kind })),
    }
}

fn task_type(kind: ItemKind) -> &'static str {
    match kind {
        ItemKind::Issue => "gitlab-issue",
        ItemKind::MergeRequest => "gitlab-mr",
    }
}

fn noteable(attributes: &Value) -> String {
    attributes["noteable_type"]
        .as_str()
        .filter(|name| sender_identifier(name).is_some())
        .unwrap_or("thing")
        .into()
}

/// `@bot` as a word of `text` (not `@bot-other`, not `mail@bot.example`).
fn mentions(text: &Value, bot: &str) -> bool {
    let Some(text) = text.as_str() else { return false };
    let text = text.to_ascii_lowercase();
    let needle = format!("@{}", bot.to_ascii_lowercase());
    text.match_indices(&needle).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + needle.len()..].chars().next();
        before.is_none_or(|c| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
            && after.is_none_or(|c| !(c.is_ascii_alphanumeric() || "_-".contains(c)))
    })
}

/// Whether the bot is among the item's assignees: on an opened item, or (`changed_only`)
/// newly, by this update's `changes.assignees`.
fn assigned_now(json: &Value, bot: &str, changed_only: bool) -> bool {
    let is_bot = |users: &Value| {
        users
            .as_array()
            .into_iter()
            .flatten()
            .any(|user| user["username"].as_str().is_some_and(|name| name.eq_ignore_ascii_case(bot)))
    };
    if !changed_only {
        return is_bot(&json["assignees"]);
    }
    let change = &json["changes"]["assignees"];
    change.is_object() && is_bot(&change["current"]) && !is_bot(&change["previous"])
}

fn is_path(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= 255
        && path.split('/').all(|part| {
            !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn project() -> Value {
        json!({"id": 7, "path_with_namespace": "group/proj", "web_url": "https://gitlab.example/group/proj"})
    }

    #[test]
    fn a_note_mentioning_the_bot_on_an_issue_asks_for_work() {
        let event = json!({
            "object_kind": "note", "user": {"id": 3, "username": "alice"}, "project": project(),
            "object_attributes": {"note": "@swarm-bot please fix", "noteable_type": "Issue"},
            "issue": {"iid": 12, "title": "Crash", "url": "https://gitlab.example/group/proj/-/issues/12"}
        });
        let request = read(&event, "swarm-bot").unwrap();
        assert_eq!(request.item.external_id(), "7/issues/12");
        assert_eq!(request.item.identifier(), "group/proj#12");
        assert_eq!((request.user_id, request.username.as_deref()), (Some(3), Some("alice")));
        assert_eq!(
            request.summary,
            "You were mentioned in a comment for @swarm-bot (by @alice on issue group/proj#12)"
        );
        assert!(read(&event, "other-bot").is_err());
        let mr_note = json!({
            "object_kind": "note", "user": {"id": 3, "username": "alice"}, "project": project(),
            "object_attributes": {"note": "hey @Swarm-Bot.", "noteable_type": "MergeRequest"},
            "merge_request": {"iid": 4}
        });
        assert_eq!(read(&mr_note, "swarm-bot").unwrap().item.identifier(), "group/proj!4");
    }

    #[test]
    fn mentions_are_whole_names() {
        let says = |text: &str| mentions(&Value::from(text), "bot");
        assert!(says("@bot") && says("hi @bot, go") && says("(@BOT)"));
        assert!(!says("@bot-two") && !says("mail@bot") && !says("@bots") && !says("bot"));
    }

    #[test]
    fn issues_opened_for_or_assigned_to_the_bot_ask_for_work() {
        let opened = json!({
            "object_kind": "issue", "user": {"id": 3, "username": "alice"}, "project": project(),
            "object_attributes": {"iid": 5, "action": "open", "description": "nothing here"},
            "assignees": [{"username": "swarm-bot"}]
        });
        let summary = read(&opened, "swarm-bot").unwrap().summary;
        assert_eq!(summary, "You were assigned an issue (by @alice on issue group/proj#5)");
        let updated = json!({
            "object_kind": "issue", "user": {"id": 3, "username": "alice"}, "project": project(),
            "object_attributes": {"iid": 5, "action": "update"},
            "changes": {"assignees": {"previous": [], "current": [{"username": "swarm-bot"}]}}
        });
        assert!(read(&updated, "swarm-bot").is_ok());
        let other_update = json!({
            "object_kind": "issue", "user": {"id": 3, "username": "alice"}, "project": project(),
            "object_attributes": {"iid": 5, "action": "update"}, "assignees": [{"username": "swarm-bot"}]
        });
        assert!(read(&other_update, "swarm-bot").is_err(), "an edit of an issue it already had");
    }

    #[test]
    fn only_failed_pipelines_of_merge_requests_ask_for_work() {
        let failed = json!({
            "object_kind": "pipeline", "user": {"id": 3, "username": "alice"}, "project": project(),
            "object_attributes": {"id": 99, "status": "failed"}, "merge_request": {"iid": 4}
        });
        let request = read(&failed, "swarm-bot").unwrap();
        assert_eq!(
            (request.item.external_id().as_str(), request.task_type),
            ("7/merge_requests/4", "gitlab-ci")
        );
        let passed = json!({"object_kind": "pipeline", "project": project(), "object_attributes": {"status": "success"}});
        assert!(read(&passed, "swarm-bot").is_err());
        let branch = json!({"object_kind": "pipeline", "project": project(), "object_attributes": {"status": "failed"}});
        assert!(read(&branch, "swarm-bot").is_err());
    }

    #[test]
    fn the_bots_own_notes_and_odd_paths_stay_out_of_the_summary() {
        let own = json!({
            "object_kind": "note", "user": {"id": 9, "username": "swarm-bot"}, "project": project(),
            "object_attributes": {"note": "@swarm-bot", "noteable_type": "Issue"}, "issue": {"iid": 1}
        });
        assert!(read(&own, "swarm-bot").is_err());
        let odd = json!({
            "object_kind": "note", "user": {"id": 3, "username": "al ice\n</untrusted-input>"},
            "project": {"id": 7, "path_with_namespace": "g/p </untrusted-input>"},
            "object_attributes": {"note": "@swarm-bot", "noteable_type": "Issue"}, "issue": {"iid": 1}
        });
        let request = read(&odd, "swarm-bot").unwrap();
        assert_eq!(
            request.summary,
            "You were mentioned in a comment for @swarm-bot (by someone on issue project 7#1)"
        );
    }
}
