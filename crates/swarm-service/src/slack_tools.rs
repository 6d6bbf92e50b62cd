//! The lead's Slack tools beyond replying (issue 42; the reference's `slack-start-thread`,
//! `slack-update`, `slack-delete`, and the channel tools): threads started, the bot's own
//! messages edited or deleted (Slack itself refuses anyone else's), and channels created,
//! joined by invitation or archived only on a hub started with `--slack-channel-management`.

use swarm_domain::inbox::parse_reply;

use crate::{
    Caller, Service, ServiceError, ServiceResult,
    slack_api::{Persona, SlackApiError, SlackChannelView, SlackPost, SlackUpdate},
};

/// At most this many Block Kit blocks in a started thread (Slack's limit is 50).
const BLOCKS_MAX: usize = 50;

/// A thread started by `slack-start-thread`: where, and its first message's `ts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartedThread {
    pub channel_id: String,
    pub ts: String,
}

impl Service {
    /// Let the lead manage channels (`SLACK_CHANNEL_MANAGEMENT`).
    pub fn with_slack_channel_management(mut self, on: bool) -> Self {
        self.slack_channel_management = on;
        self
    }

    /// `slack-start-thread`: a new top-level message whose `ts` threads the replies.
    pub async fn slack_start_thread(
        &self,
        caller: Caller,
        channel: &str,
        message: &str,
        blocks: Option<serde_json::Value>,
    ) -> ServiceResult<StartedThread> {
        let persona = self.lead_only(caller, "start Slack threads").await?;
        let channel = parse_channel(channel)?;
        let text = parse_reply(message)?;
        let blocks = match blocks {
            Some(serde_json::Value::Array(list))
                if list.len() <= BLOCKS_MAX && list.iter().all(|b| b.is_object()) =>
            {
                serde_json::Value::Array(list)
            }
            Some(_) => {
                return Err(ServiceError::Invalid(format!(
                    "blocks must be a list of at most {BLOCKS_MAX} Block Kit objects"
                )));
            }
            None => serde_json::json!([{ "type": "section", "text": { "type": "mrkdwn", "text": text } }]),
        };
        let post = SlackPost { channel: channel.clone(), thread_ts: None, text, persona };
        let ts = self.slack()?.post_blocks(&post, &blocks).await.map_err(|error| refused("post", &error))?;
        Ok(StartedThread { channel_id: channel, ts })
    }

    /// `slack-update`: edit a message the bot posted.
    pub async fn slack_update(
        &self,
        caller: Caller,
        channel: &str,
        message_ts: &str,
        message: &str,
    ) -> ServiceResult<String> {
        self.lead_only(caller, "edit Slack messages").await?;
        let (channel, ts) = (parse_channel(channel)?, parse_slack_ts(message_ts)?);
        let text = parse_reply(message)?;
        let blocks = serde_json::json!([{ "type": "section", "text": { "type": "mrkdwn", "text": text } }]);
        let update = SlackUpdate { channel, ts: ts.clone(), text, blocks: Some(blocks) };
        self.slack()?.update_message(&update).await.map_err(|error| refused("edit", &error))?;
        Ok(ts)
    }

    /// `slack-delete`: delete a message the bot posted.
    pub async fn slack_delete(&self, caller: Caller, channel: &str, message_ts: &str) -> ServiceResult<()> {
        self.lead_only(caller, "delete Slack messages").await?;
        let (channel, ts) = (parse_channel(channel)?, parse_slack_ts(message_ts)?);
        self.slack()?.delete_message(&channel, &ts).await.map_err(|error| refused("delete", &error))
    }

    /// `slack-create-channel` (channel management only).
    pub async fn slack_create_channel(
        &self,
        caller: Caller,
        name: &str,
        is_private: bool,
    ) -> ServiceResult<SlackChannelView> {
        self.channel_manager(caller).await?;
        let name = normalize_channel_name(name)?;
        self.slack()?.create_channel(&name, is_private).await.map_err(|error| refused("create", &error))
    }

    /// `slack-invite-to-channel` (channel management only).
    pub async fn slack_invite_to_channel(
        &self,
        caller: Caller,
        channel: &str,
        user_ids: &[String],
    ) -> ServiceResult<()> {
        self.channel_manager(caller).await?;
        let channel = parse_channel(channel)?;
        if user_ids.is_empty() || user_ids.len() > 100 || user_ids.iter().any(|id| parse_channel(id).is_err())
        {
            return Err(ServiceError::Invalid("userIds must name 1 to 100 Slack user ids (U...)".into()));
        }
        let users = user_ids.join(",");
        self.slack()?.invite_to_channel(&channel, &users).await.map_err(|error| refused("invite", &error))
    }

    /// `slack-archive-channel` (channel management only).
    pub async fn slack_archive_channel(&self, caller: Caller, channel: &str) -> ServiceResult<()> {
        self.channel_manager(caller).await?;
        let channel = parse_channel(channel)?;
        self.slack()?.archive_channel(&channel).await.map_err(|error| refused("archive", &error))
    }

    /// The lead or the operator; the lead's persona to post under.
    async fn lead_only(&self, caller: Caller, verb: &str) -> ServiceResult<Option<Persona>> {
        let me = self.caller_agent(caller).await?;
        if me.as_ref().is_some_and(|agent| !agent.is_lead) {
            return Err(ServiceError::Forbidden(format!("only the lead may {verb}")));
        }
        Ok(me.map(|agent| Persona::of(&agent.name, agent.is_lead)))
    }

    async fn channel_manager(&self, caller: Caller) -> ServiceResult<()> {
        self.lead_only(caller, "manage Slack channels").await?;
        if !self.slack_channel_management {
            return Err(ServiceError::Forbidden(
                "channel management is off on this hub: start swarm serve with --slack-channel-management \
                 (SLACK_CHANNEL_MANAGEMENT=true) to let the lead create, invite to and archive channels"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// Slack's refusal, said so that the lead knows what to do.
fn refused(what: &str, error: &SlackApiError) -> ServiceError {
    let code = error.0.rsplit(": ").next().unwrap_or_default();
    let why = match code {
        "message_not_found" => "no message at that timestamp in this channel".to_string(),
        "cant_update_message" | "cant_delete_message" => {
            "the bot may only change messages it posted itself".to_string()
        }
        "edit_window_closed" => "the edit window for this message has closed".to_string(),
        "channel_not_found" => "the channel was not found or the bot cannot see it".to_string(),
        "not_in_channel" => "the bot is not in that channel".to_string(),
        "name_taken" => "a channel of that name exists".to_string(),
        _ => error.0.clone(),
    };
    ServiceError::Conflict(format!("Slack refused the {what}: {why}"))
}

fn parse_channel(channel: &str) -> ServiceResult<String> {
    let channel = channel.trim();
    let valid =
        !channel.is_empty() && channel.len() <= 40 && channel.chars().all(|c| c.is_ascii_alphanumeric());
    if !valid {
        return Err(ServiceError::Invalid(format!("{channel:?} is not a Slack id (C..., G..., D..., U...)")));
    }
    Ok(channel.to_string())
}

/// A message's `ts` as Slack's methods take it, from the dotted form (`1783411554.596189`),
/// the deep-link form (`p1783411554596189`) or a permalink ending in it.
pub fn parse_slack_ts(text: &str) -> ServiceResult<String> {
    let text = text.trim();
    let last = text
        .split(['/', '?'])
        .filter(|part| !part.is_empty())
        .find(|part| part.starts_with('p') && part.len() > 7);
    let candidate = last.unwrap_or(text);
    let invalid = || {
        ServiceError::Invalid(format!(
            "{text:?} is not a Slack message timestamp: give 1783411554.596189, p1783411554596189 or the \
             message's permalink"
        ))
    };
    if let Some(digits) = candidate.strip_prefix('p') {
        if digits.len() <= 6 || !digits.chars().all(|c| c.is_ascii_digit()) {
            return Err(invalid());
        }
        let (seconds, micros) = digits.split_at(digits.len() - 6);
        return Ok(format!("{seconds}.{micros}"));
    }
    match candidate.split_once('.') {
        Some((seconds, micros))
            if !seconds.is_empty()
                && !micros.is_empty()
                && seconds.chars().all(|c| c.is_ascii_digit())
                && micros.chars().all(|c| c.is_ascii_digit()) =>
        {
            Ok(candidate.to_string())
        }
        _ => Err(invalid()),
    }
}

/// Slack's channel-name rules: lower case, letters, digits, `-` and `_`, at most 80.
fn normalize_channel_name(name: &str) -> ServiceResult<String> {
    let normalized: String = name
        .trim()
        .trim_start_matches('#')
        .to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() || c == '-' || c == '_' { c } else { '-' })
        .take(80)
        .collect();
    let normalized = normalized.trim_matches('-').to_string();
    if normalized.is_empty() {
        return Err(ServiceError::Invalid("name must have a letter or a digit".into()));
    }
    Ok(normalized)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slack_timestamps_are_read_in_their_three_forms() {
        assert_eq!(parse_slack_ts("1783411554.596189").unwrap(), "1783411554.596189");
        assert_eq!(parse_slack_ts("p1783411554596189").unwrap(), "1783411554.596189");
        let link = "https://acme.slack.com/archives/C1/p1783411554596189?thread_ts=1.2";
        assert_eq!(parse_slack_ts(link).unwrap(), "1783411554.596189");
        assert!(parse_slack_ts("yesterday").is_err());
        assert!(parse_slack_ts("p12").is_err());
        assert_eq!(normalize_channel_name("#Release Train!").unwrap(), "release-train");
    }
}
