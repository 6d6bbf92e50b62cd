//! Creating and changing a trigger: what a caller gives, validated once into a
//! [`TriggerDef`].

use std::str::FromStr;

use super::{
    CHANNEL_MAX_CHARS, DESCRIPTION_MAX_CHARS, GITHUB_BOT_DEFAULT, INTERVAL_MAX_MS, INTERVAL_MIN_MS,
    NAME_MAX_CHARS, PROMPT_MAX_CHARS, SECRET_MAX_CHARS, SessionMode, TriggerDef, TriggerTarget, TriggerType,
};
use crate::{
    Invalid,
    id::{AgentId, TriggerId},
    reject_nul,
    task::{PRIORITY_DEFAULT, parse_tags},
    time::Timestamp,
};

/// The shortest webhook secret a trigger is given now: an HMAC key or a header secret
/// one can guess is no secret. (Secrets stored before this rule keep working.)
pub const SECRET_MIN_CHARS: usize = 16;

/// What a caller gives to create a trigger, before validation.
#[derive(Debug, Clone, Default)]
pub struct TriggerDraft {
    pub name: String,
    pub kind: String,
    pub description: Option<String>,
    pub schedule: Option<String>,
    pub timezone: Option<String>,
    pub interval_ms: Option<i64>,
    pub run_at: Option<Timestamp>,
    pub webhook_secret: Option<String>,
    pub webhook_public: Option<bool>,
    pub github_bot: Option<String>,
    pub channel: Option<String>,
    pub target: Option<String>,
    pub prompt: Option<String>,
    pub task_type: Option<String>,
    pub tags: Option<Vec<String>>,
    pub priority: Option<i64>,
    pub session_mode: Option<String>,
    pub enabled: Option<bool>,
}

impl TriggerDraft {
    /// A secret the caller gives now (on create or change) is long enough to resist
    /// guessing. Checked on what the caller sent, not on a stored secret it leaves alone.
    pub fn check_new_secret(&self) -> Result<(), Invalid> {
        let Some(secret) = self.webhook_secret.as_deref().map(str::trim).filter(|s| !s.is_empty()) else {
            return Ok(());
        };
        if secret.chars().count() < SECRET_MIN_CHARS {
            return Err(Invalid(format!(
                "webhookSecret must be at least {SECRET_MIN_CHARS} characters (a guessable secret lets \
                 anyone fire the trigger); make one with `openssl rand -hex 32`"
            )));
        }
        Ok(())
    }

    /// A draft that changes `current` by the fields set in `self` (`name` and `kind` of
    /// `self` are ignored: a trigger keeps both).
    pub fn apply_to(self, current: &TriggerDef) -> TriggerDraft {
        TriggerDraft {
            name: current.name.clone(),
            kind: current.kind.as_str().into(),
            description: self.description.or_else(|| current.description.clone()),
            schedule: self.schedule.or_else(|| current.schedule.clone()),
            timezone: self.timezone.or_else(|| Some(current.timezone.clone())),
            interval_ms: self.interval_ms.or(current.interval_ms),
            run_at: self.run_at.or(current.run_at),
            webhook_secret: self.webhook_secret.or_else(|| current.webhook_secret.clone()),
            webhook_public: self.webhook_public.or(Some(current.webhook_public)),
            github_bot: self.github_bot.or_else(|| current.github_bot.clone()),
            channel: self.channel.or_else(|| current.channel.clone()),
            target: self.target.or_else(|| Some(current.target.encode())),
            prompt: self.prompt.or_else(|| Some(current.prompt.clone())),
            task_type: self.task_type.or_else(|| current.task_type.clone()),
            tags: self.tags.or_else(|| Some(current.tags.clone())),
            priority: self.priority.or(Some(i64::from(current.priority))),
            session_mode: self.session_mode.or_else(|| Some(current.session_mode.as_str().into())),
            enabled: self.enabled.or(Some(current.enabled)),
        }
    }

    /// Validate into a trigger. `id`, `created_*` and the run counters are the caller's;
    /// `next_run_at` is the first slot after `now` (a `once` trigger's `runAt` itself).
    pub fn parse(
        self,
        id: TriggerId,
        created_by: Option<AgentId>,
        now: Timestamp,
    ) -> Result<TriggerDef, Invalid> {
        let name = parse_name(&self.name)?;
        let kind = TriggerType::parse(self.kind.trim())?;
        let description = optional_text("description", self.description, DESCRIPTION_MAX_CHARS)?;
        let timezone = self.timezone.map(|zone| zone.trim().to_string()).filter(|zone| !zone.is_empty());
        let timezone = timezone.unwrap_or_else(|| "UTC".into());
        if chrono_tz::Tz::from_str(&timezone).is_err() {
            return Err(Invalid(format!(
                "unknown time zone {timezone:?} (use an IANA name such as Europe/Paris)"
            )));
        }
        let schedule = optional_text("schedule", self.schedule, 200)?;
        // Fields a type does not use are dropped, but only once they are valid: a bad value
        // is a mistake to say whatever the type.
        if let Some(ms) = self.interval_ms {
            check_interval(ms)?;
        }
        let channel = parse_channel(self.channel)?;
        let github_bot = optional_text("githubBot", self.github_bot, 100)?;
        let mut interval_ms = None;
        let mut run_at = None;
        match kind {
            TriggerType::Cron => {
                let Some(expression) = &schedule else {
                    return Err(Invalid::new("a cron trigger needs schedule (a cron expression)"));
                };
                // Five fields, minute first: a seconds field (`* * * * * *`) would fire every
                // second, far past the interval triggers' minimum gap.
                if expression.split_whitespace().count() > 5 {
                    return Err(Invalid(format!(
                        "bad cron expression {expression:?}: use five fields (minute hour day month \
                         weekday); a seconds field is refused (the shortest gap is one minute)"
                    )));
                }
                croner::Cron::from_str(expression)
                    .map_err(|error| Invalid(format!("bad cron expression {expression:?}: {error}")))?;
            }
            TriggerType::Interval => {
                let ms =
                    self.interval_ms.ok_or_else(|| Invalid::new("an interval trigger needs intervalMs"))?;
                interval_ms = Some(check_interval(ms)?);
            }
            TriggerType::Once => {
                run_at = Some(self.run_at.ok_or_else(|| Invalid::new("a once trigger needs runAt"))?);
            }
            TriggerType::Webhook | TriggerType::Github | TriggerType::Manual => {}
        }
        let schedule = if kind == TriggerType::Cron { schedule } else { None };
        let webhook_secret = optional_text("webhookSecret", self.webhook_secret, SECRET_MAX_CHARS)?;
        let webhook_public = self.webhook_public.unwrap_or(false);
        if kind.is_webhook() && webhook_secret.is_none() && !webhook_public {
            return Err(Invalid::new(
                "a webhook needs webhookSecret (HMAC key or header secret); to accept unsigned \
                 requests create it with webhookPublic: true",
            ));
        }
        if kind == TriggerType::Github && webhook_secret.is_none() {
            return Err(Invalid::new("a github trigger needs webhookSecret: GitHub signs every delivery"));
        }
        let github_bot = match kind {
            TriggerType::Github => Some(github_bot.unwrap_or_else(|| GITHUB_BOT_DEFAULT.into())),
            _ => None,
        };
        let target = TriggerTarget::parse(self.target.as_deref().unwrap_or("pool"))?;
        let prompt = optional_text("prompt", self.prompt, PROMPT_MAX_CHARS)?.unwrap_or_default();
        let task_type = optional_text("taskType", self.task_type, 64)?;
        let priority = match self.priority {
            None => PRIORITY_DEFAULT,
            Some(p) if (0..=100).contains(&p) => p as i32,
            Some(p) => return Err(Invalid(format!("priority must be between 0 and 100, got {p}"))),
        };
        let session_mode = match self.session_mode.as_deref().map(str::trim) {
            None | Some("") => SessionMode::default(),
            Some(text) => SessionMode::parse(text)?,
        };
        let mut trigger = TriggerDef {
            id,
            name,
            description,
            kind,
            schedule,
            timezone,
            interval_ms,
            run_at,
            webhook_secret,
            webhook_public,
            github_bot,
            channel,
            target,
            prompt,
            task_type,
            tags: parse_tags(self.tags.unwrap_or_default())?,
            priority,
            session_mode,
            enabled: self.enabled.unwrap_or(true),
            last_run_at: None,
            run_count: 0,
            next_run_at: None,
            created_by,
            created_at: now,
            updated_at: now,
        };
        // A disabled trigger has no next run; enabling it computes one from then.
        trigger.next_run_at = match kind {
            _ if !trigger.enabled => None,
            TriggerType::Once => run_at,
            _ => trigger.next_run_after(now),
        };
        Ok(trigger)
    }
}

/// A slug: lowercase letters, digits, `-` and `_`, starting with a letter or digit.
pub fn parse_name(text: &str) -> Result<String, Invalid> {
    let name = text.trim();
    let ok = !name.is_empty()
        && name.chars().count() <= NAME_MAX_CHARS
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if ok {
        Ok(name.to_string())
    } else {
        Err(Invalid(format!(
            "a trigger name is 1 to {NAME_MAX_CHARS} lowercase letters, digits, - and _, got {name:?}"
        )))
    }
}

fn optional_text(field: &str, text: Option<String>, max: usize) -> Result<Option<String>, Invalid> {
    let Some(text) = text else { return Ok(None) };
    let text = text.trim();
    reject_nul(field, text)?;
    if text.chars().count() > max {
        return Err(Invalid(format!("{field} must be at most {max} characters")));
    }
    Ok((!text.is_empty()).then(|| text.to_string()))
}

fn check_interval(ms: i64) -> Result<i64, Invalid> {
    if (INTERVAL_MIN_MS..=INTERVAL_MAX_MS).contains(&ms) {
        return Ok(ms);
    }
    Err(Invalid(format!("intervalMs must be between {INTERVAL_MIN_MS} (one second) and one year, got {ms}")))
}

/// A channel names where tasks came from, like a task's `source`: a short word.
fn parse_channel(channel: Option<String>) -> Result<Option<String>, Invalid> {
    let Some(channel) = channel.map(|text| text.trim().to_string()).filter(|text| !text.is_empty()) else {
        return Ok(None);
    };
    let word = channel.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !word || channel.chars().count() > CHANNEL_MAX_CHARS {
        return Err(Invalid(format!(
            "channel must be a lowercase word (letters, digits, - and _) of at most {CHANNEL_MAX_CHARS} characters, got {channel:?}"
        )));
    }
    Ok(Some(channel))
}
