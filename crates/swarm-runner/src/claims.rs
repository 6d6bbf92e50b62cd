//! The lead-side claims a run holds (issue 20): an inbox message, a mentioning channel,
//! urgent mail or a task result belongs to the agent run its poll started. When the run
//! ends, whatever it left unfinished goes back to the hub at once
//! (`POST /api/poll/release`): the next poll offers it again, and the hub dead-letters an
//! item offered too often. A runner that restarts releases what its previous process
//! held: that process's id is kept in the log folder.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use swarm_client::Client;
use swarm_domain::id::{AgentId, RunnerId};

use crate::view::View;

/// The items of one trigger, by kind, as the hub's release endpoint names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HeldItems {
    pub inbox_message_ids: Vec<String>,
    pub channel_ids: Vec<String>,
    pub mail_ids: Vec<String>,
    pub task_ids: Vec<String>,
}

impl HeldItems {
    /// What a lead-side trigger's body claimed: the ids of its messages, channels, mail.
    pub fn of_trigger(kind: &str, body: &Value) -> HeldItems {
        let ids = |list: &str, key: Option<&str>| -> Vec<String> {
            body.get(list)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|item| match key {
                    Some(key) => item.get(key).and_then(Value::as_str),
                    None => item.as_str(),
                })
                .map(str::to_string)
                .collect()
        };
        match kind {
            "slack_inbox_message" => {
                HeldItems { inbox_message_ids: ids("messages", Some("id")), ..HeldItems::default() }
            }
            "unread_mentions" => {
                // The reference's name, and the one hubs before issue 20 sent.
                let mut channels = ids("claimedChannels", None);
                if channels.is_empty() {
                    channels = ids("channelIds", None);
                }
                HeldItems { channel_ids: channels, ..HeldItems::default() }
            }
            "urgent_mail" => HeldItems { mail_ids: ids("mail", Some("id")), ..HeldItems::default() },
            _ => HeldItems::default(),
        }
    }

    pub fn result(task_id: String) -> HeldItems {
        HeldItems { task_ids: vec![task_id], ..HeldItems::default() }
    }

    pub fn is_empty(&self) -> bool {
        self.inbox_message_ids.is_empty()
            && self.channel_ids.is_empty()
            && self.mail_ids.is_empty()
            && self.task_ids.is_empty()
    }
}

/// Gives back what a run that ended left unfinished. Items the run finished are not
/// held any more, and the hub leaves them alone; a failed call is only reported: the
/// lease brings the items back later.
pub(crate) async fn release_after_run(client: &Client, view: &View, label: &str, items: &HeldItems) {
    if items.is_empty() {
        return;
    }
    let body = json!({
        "inboxMessageIds": items.inbox_message_ids,
        "channelIds": items.channel_ids,
        "mailIds": items.mail_ids,
        "taskIds": items.task_ids,
    });
    match client.post_json::<_, Value>("/api/poll/release", &body).await {
        Ok(answer) => {
            let released = answer["released"].as_u64().unwrap_or(0);
            let dead = answer["deadLettered"].as_u64().unwrap_or(0);
            if released + dead > 0 {
                view.info(
                    "claims_released",
                    &format!(
                        "{label}: the run left {released} item(s) unfinished, offered again; {dead} set aside as dead letters"
                    ),
                    &[("released", json!(released)), ("deadLettered", json!(dead))],
                );
            }
        }
        Err(err) => view.warn(
            "release_failed",
            &format!("{label}: cannot give back what the run left unfinished ({err}); it comes back when its lease runs out"),
            &[],
        ),
    }
}

/// Where this agent's runner keeps the id of its running process.
fn id_file(log_dir: &Path, agent: AgentId) -> PathBuf {
    log_dir.join(format!(".runner-{agent}.id"))
}

/// At start: release what the previous process of this agent's runner held (it died, or
/// was stopped before its runs' claims were given back), then record this process's id.
pub(crate) async fn release_previous_life(
    client: &Client,
    view: &View,
    log_dir: &Path,
    agent: AgentId,
    me: RunnerId,
) {
    let path = id_file(log_dir, agent);
    let previous = std::fs::read_to_string(&path).ok().and_then(|text| RunnerId::parse(text.trim()).ok());
    if let Some(previous) = previous.filter(|previous| *previous != me) {
        match client
            .post_json::<_, Value>("/api/poll/release", &json!({ "previousRunnerId": previous }))
            .await
        {
            Ok(answer) => {
                let released = answer["released"].as_u64().unwrap_or(0);
                let dead = answer["deadLettered"].as_u64().unwrap_or(0);
                if released + dead > 0 {
                    view.info(
                        "previous_claims_released",
                        &format!(
                            "the previous runner process left {released} item(s) unfinished: offered again ({dead} dead-lettered)"
                        ),
                        &[("released", json!(released)), ("deadLettered", json!(dead))],
                    );
                }
            }
            Err(err) => view.warn(
                "release_failed",
                &format!(
                    "cannot release what the previous runner process held ({err}); its leases bring it back"
                ),
                &[],
            ),
        }
    }
    let written = std::fs::create_dir_all(log_dir).and_then(|()| std::fs::write(&path, me.to_string()));
    if let Err(err) = written {
        view.warn(
            "runner_id_not_kept",
            &format!("cannot keep the runner id in {} ({err}): after a crash, its claims come back only through their leases", path.display()),
            &[],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trigger_names_the_items_it_claimed() {
        let inbox = json!({"messages": [{"id": "a"}, {"id": "b"}]});
        assert_eq!(HeldItems::of_trigger("slack_inbox_message", &inbox).inbox_message_ids, ["a", "b"]);
        let mentions = json!({"mentionsCount": 1, "claimedChannels": ["c"]});
        assert_eq!(HeldItems::of_trigger("unread_mentions", &mentions).channel_ids, ["c"]);
        let older = json!({"count": 1, "channelIds": ["d"]});
        assert_eq!(HeldItems::of_trigger("unread_mentions", &older).channel_ids, ["d"]);
        assert!(HeldItems::of_trigger("tasks_finished", &json!({"tasks": []})).is_empty());
    }
}
