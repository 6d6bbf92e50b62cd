//! Webhooks: `POST /api/webhooks/<name>` authenticated by an HMAC-SHA256 of the raw
//! body (GitHub's `X-Hub-Signature-256: sha256=<hex>`) or by a secret header, both
//! compared in constant time; the body becomes `{{payload}}`. A `github` trigger maps
//! GitHub's events onto tasks with the `github*` fields.
//!
//! The HMAC covers the body only, so nothing outside it may decide anything: a signed
//! body seen within [`REPLAY_WINDOW`] fires nothing (whatever `X-GitHub-Delivery` says,
//! which anyone replaying it can change), and the sender and session key of a signed
//! request come from its body. A request carrying the secret itself vouches for its
//! headers too. A signed body that says when it was sent (a top-level `timestamp`, or
//! the time GitHub wrote into the event) is refused once that time is older than the
//! replay window, so a capture replayed after its mark expired fires nothing either.

use std::time::Duration;

use hmac::{KeyInit, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use swarm_domain::{
    task::{Task, TaskOrigin},
    time::Timestamp,
    trigger::{Firing, TriggerDef, TriggerType, parse_session_key, sender_identifier},
};
use swarm_store::{DeliveryMark, FireGuard, FireOutcome};

use crate::{Service, ServiceError, ServiceResult};

/// How long a signed body is remembered: a replay within it fires nothing. GitHub's
/// own redeliveries come within minutes; a sender that means to repeat itself sends a
/// body that differs (a timestamp, an id).
pub const REPLAY_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// Whose GitHub comments and new issues may ask the bot for work, by GitHub's
/// `author_association` (`GITHUB_ALLOWED_ASSOCIATIONS`): the repository's people, not
/// anyone who can open an issue on a public repository.
pub const GITHUB_ASSOCIATIONS_DEFAULT: [&str; 3] = ["OWNER", "MEMBER", "COLLABORATOR"];

/// The payload is cut to this before it is fenced, so the fence stays whole inside the
/// trigger's own limit on `{{payload}}`.
const FENCED_PAYLOAD_MAX_CHARS: usize = swarm_domain::trigger::PAYLOAD_MAX_CHARS - 1_000;

/// One webhook request, as the HTTP adapter read it.
#[derive(Debug, Clone, Default)]
pub struct WebhookRequest {
    pub body: Vec<u8>,
    pub content_type: Option<String>,
    /// `X-Hub-Signature-256`.
    pub signature_256: Option<String>,
    /// `X-Webhook-Secret`.
    pub secret_header: Option<String>,
    /// `X-GitHub-Event`.
    pub github_event: Option<String>,
    /// `X-GitHub-Delivery`: marks the delivery (for good) only when the request carries
    /// the secret itself; a signed request is marked by its body instead.
    pub delivery_id: Option<String>,
    /// `X-Session-Key`: which conversation of a persistent trigger this belongs to. Read
    /// only from a request carrying the secret; a signed one names it in its body
    /// (`sessionKey`).
    pub session_key: Option<String>,
    /// `X-Sender`: as `X-Session-Key` (body field `sender`).
    pub sender: Option<String>,
}

/// How a request proved itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proof {
    /// `X-Hub-Signature-256`: the body is the sender's; its headers are anyone's.
    Signature,
    /// `X-Webhook-Secret`: the whole request is the secret holder's.
    Secret,
    /// A public trigger: nothing is proved.
    Public,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookOutcome {
    Fired(Box<Task>),
    /// Accepted and deliberately not turned into a task (a repeated delivery, a GitHub
    /// event that concerns nobody here, a disabled trigger), with why.
    Ignored(String),
}

impl Service {
    /// Whose GitHub comments and new issues fire `github` triggers (`author_association`
    /// values; `*` for anyone).
    pub fn with_github_associations(mut self, associations: Vec<String>) -> Self {
        self.github_associations =
            std::sync::Arc::new(associations.into_iter().map(|a| a.trim().to_ascii_uppercase()).collect());
        self
    }

    /// Verify and fire a webhook. An unknown trigger and a bad or missing signature read
    /// the same (401) so that names cannot be probed without the secret.
    pub async fn webhook_receive(
        &self,
        name: &str,
        request: WebhookRequest,
    ) -> ServiceResult<WebhookOutcome> {
        self.activity.inbound("webhook", "received");
        let outcome = self.webhook_verify_and_fire(name, request).await;
        match &outcome {
            Err(ServiceError::Unauthorized(_) | ServiceError::Invalid(_)) => {
                self.activity.inbound("webhook", "rejected")
            }
            Ok(WebhookOutcome::Ignored(reason)) if reason == ALREADY_RECEIVED => {
                self.activity.inbound("webhook", "duplicate")
            }
            _ => {}
        }
        outcome
    }

    async fn webhook_verify_and_fire(
        &self,
        name: &str,
        request: WebhookRequest,
    ) -> ServiceResult<WebhookOutcome> {
        let trigger = match self.trigger_get(name).await {
            Ok(trigger) if trigger.kind.is_webhook() => trigger,
            Ok(_) | Err(ServiceError::NotFound(_)) => return Err(unauthorized()),
            Err(error) => return Err(error),
        };
        let proof = authenticate(&trigger, &request)?;
        if !trigger.enabled {
            return Ok(WebhookOutcome::Ignored(format!("trigger {} is disabled", trigger.name)));
        }
        let firing = match trigger.kind {
            TriggerType::Github => match github_firing(&trigger, &request, &self.github_associations)? {
                Ok(firing) => firing,
                Err(reason) => return Ok(WebhookOutcome::Ignored(reason)),
            },
            _ => generic_firing(&request, proof)?,
        };
        let now = self.clock.now();
        let window = REPLAY_WINDOW.as_millis() as i64;
        let signed_at = match proof {
            Proof::Signature => signed_time(trigger.kind, &request),
            Proof::Secret | Proof::Public => None,
        };
        if let Some(at) = signed_at
            && at < now.minus_millis(window)
        {
            return Ok(WebhookOutcome::Ignored(format!(
                "this signed delivery says it was sent at {at}, more than 24 hours ago: a replay is \
                 ignored (send each delivery with a fresh timestamp)"
            )));
        }
        let mark = match proof {
            // Kept while the body could still pass for fresh: 24 hours from now, or from
            // the time it says it was sent when that is later.
            Proof::Signature => Some(DeliveryMark {
                id: format!("sha256:{}", hex::encode(Sha256::digest(&request.body))),
                expires_at: Some(signed_at.map_or(now, |at| at.max(now)).plus_millis(window)),
            }),
            Proof::Secret => request
                .delivery_id
                .as_deref()
                .map(str::trim)
                .filter(|id| !id.is_empty())
                .map(DeliveryMark::forever),
            Proof::Public => None,
        };
        let guard = FireGuard::Event { require_enabled: true };
        match self.fire(&trigger, &firing, guard, mark.as_ref()).await? {
            FireOutcome::Fired(task) => Ok(WebhookOutcome::Fired(task)),
            FireOutcome::Duplicate => Ok(WebhookOutcome::Ignored(ALREADY_RECEIVED.into())),
            FireOutcome::Disabled | FireOutcome::NotDue => {
                Ok(WebhookOutcome::Ignored(format!("trigger {} is disabled", trigger.name)))
            }
            FireOutcome::NotFound => Err(unauthorized()),
        }
    }
}

const ALREADY_RECEIVED: &str = "this delivery was already received";

fn unauthorized() -> ServiceError {
    ServiceError::Unauthorized("bad or missing webhook signature".into())
}

/// A trigger with a secret accepts either a valid `X-Hub-Signature-256` of the body or
/// the secret itself in `X-Webhook-Secret`; a public one accepts anything.
fn authenticate(trigger: &TriggerDef, request: &WebhookRequest) -> ServiceResult<Proof> {
    let Some(secret) = &trigger.webhook_secret else {
        return if trigger.webhook_public { Ok(Proof::Public) } else { Err(unauthorized()) };
    };
    if let Some(signature) = &request.signature_256 {
        return if signature_valid(secret, signature, &request.body) {
            Ok(Proof::Signature)
        } else {
            Err(unauthorized())
        };
    }
    // GitHub always signs: its trigger takes no header secret.
    if trigger.kind != TriggerType::Github
        && let Some(given) = &request.secret_header
        && bool::from(given.trim().as_bytes().ct_eq(secret.as_bytes()))
    {
        return Ok(Proof::Secret);
    }
    Err(unauthorized())
}

pub fn signature_valid(secret: &str, header: &str, body: &[u8]) -> bool {
    let Some(Ok(expected)) = header.trim().strip_prefix("sha256=").map(hex::decode) else {
        return false;
    };
    let Ok(mut mac) = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(body);
    // verify_slice compares in constant time.
    mac.verify_slice(&expected).is_ok()
}

/// `sha256=<hex>` of the body, as GitHub sends it.
pub fn sign_body(secret: &str, body: &[u8]) -> String {
    let mut mac =
        <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The payload as text: JSON pretty-printed, form data as a JSON object, else the text.
fn payload_text(request: &WebhookRequest) -> ServiceResult<String> {
    let content_type = request.content_type.as_deref().unwrap_or_default().to_ascii_lowercase();
    if content_type.starts_with("application/x-www-form-urlencoded") {
        let fields: serde_json::Map<String, Value> = form_urlencoded::parse(&request.body)
            .map(|(key, value)| (key.into_owned(), Value::String(value.into_owned())))
            .collect();
        return Ok(serde_json::to_string_pretty(&Value::Object(fields)).unwrap_or_default());
    }
    if let Ok(json) = serde_json::from_slice::<Value>(&request.body) {
        return Ok(serde_json::to_string_pretty(&json).unwrap_or_default());
    }
    String::from_utf8(request.body.clone())
        .map_err(|_| ServiceError::Invalid("the webhook body must be JSON, form data or UTF-8 text".into()))
}

/// The sender and session key come from where the proof reaches: the headers of a
/// request carrying the secret, else the top-level `sender` and `sessionKey` of a JSON
/// body (signed, or as untrusted as everything else on a public trigger).
fn generic_firing(request: &WebhookRequest, proof: Proof) -> ServiceResult<Firing> {
    let (sender, session_key) = match proof {
        Proof::Secret => (request.sender.clone(), request.session_key.clone()),
        Proof::Signature | Proof::Public => {
            let json = serde_json::from_slice::<Value>(&request.body).unwrap_or(Value::Null);
            let field = |name: &str| json.get(name).and_then(Value::as_str).map(str::to_string);
            (field("sender"), field("sessionKey"))
        }
    };
    let session_key = session_key.as_deref().map(parse_session_key).transpose()?;
    // `{{sender}}` and the fence's `from` stand outside the fence: only an identifier
    // goes there; any other sender is still in the (fenced) body.
    let sender = sender.as_deref().and_then(sender_identifier).map(str::to_string);
    Ok(Firing {
        payload: fenced("webhook", sender.as_deref(), &payload_text(request)?),
        sender,
        channel: "webhook".into(),
        session_key,
        ..Firing::default()
    })
}

/// A GitHub event for this trigger's bot, as a firing; `Err(reason)` when the event
/// concerns nobody here. The session key is the conversation: `owner/repo#number`.
fn github_firing(
    trigger: &TriggerDef,
    request: &WebhookRequest,
    associations: &[String],
) -> ServiceResult<Result<Firing, String>> {
    let event = request.github_event.as_deref().unwrap_or_default().trim().to_string();
    if event.is_empty() {
        return Err(ServiceError::Invalid("a GitHub delivery carries X-GitHub-Event".into()));
    }
    let json: Value = serde_json::from_slice(&request.body)
        .map_err(|_| ServiceError::Invalid("a GitHub delivery is a JSON body".into()))?;
    let bot = trigger.github_bot.clone().unwrap_or_default();
    let Some(mapped) = map_github(&event, &json, &bot) else {
        let action = json["action"].as_str().unwrap_or("-");
        return Ok(Err(format!("GitHub event {event} ({action}) does not concern @{bot}")));
    };
    let login = json["sender"]["login"].as_str().and_then(sender_identifier).map(str::to_string);
    if mapped.from_fork {
        return Ok(Err(format!(
            "GitHub event {event}: a failed check on a fork's branch is ignored: the fork's author, \
             not one of the repository's people, wrote its name and output"
        )));
    }
    if let Some(association) = &mapped.author_association
        && !associations.iter().any(|allowed| allowed == "*" || allowed == association)
    {
        return Ok(Err(format!(
            "GitHub event {event} by {} ({association}) ignored: only {} may ask @{bot} \
             (GITHUB_ALLOWED_ASSOCIATIONS)",
            login.as_deref().unwrap_or("someone"),
            associations.join(", ")
        )));
    }
    let repo = json["repository"]["full_name"].as_str().map(str::to_string);
    let session_key = match (&repo, mapped.number) {
        (Some(repo), Some(number)) => Some(format!("{repo}#{number}")),
        (Some(repo), None) => Some(repo.clone()),
        _ => None,
    };
    let origin = TaskOrigin {
        github_repo: repo,
        github_event_type: Some(event.clone()),
        github_number: mapped.number,
        github_comment_id: mapped.comment_id,
        github_author: login,
        github_url: mapped.url,
        ..TaskOrigin::default()
    };
    // The summary is ours (numbers and the title, on one line); the event is GitHub's
    // users' words, fenced.
    let event_json = serde_json::to_string_pretty(&json).unwrap_or_default();
    let payload = format!(
        "{}\n\n{}",
        one_line(&mapped.summary),
        fenced("github", origin.github_author.as_deref(), &event_json)
    );
    Ok(Ok(Firing {
        payload,
        sender: origin.github_author.clone(),
        channel: "github".into(),
        session_key,
        origin,
        fired_by: None,
    }))
}

/// Outside text, cut to fit and fenced ([`swarm_domain::untrusted`]).
fn fenced(source: &str, from: Option<&str>, text: &str) -> String {
    let text: String = text.chars().take(FENCED_PAYLOAD_MAX_CHARS).collect();
    swarm_domain::untrusted::fence(source, from, &text)
}

/// A sender's name or a title as one short line: it goes into prompts outside the fence.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect::<String>()
        .trim()
        .to_string()
}

struct GithubEvent {
    summary: String,
    /// The `author_association` of whoever wrote the text that asks the bot (a comment,
    /// a new issue); `None` for events only the repository's people can cause
    /// (assignments, review requests, checks).
    author_association: Option<String>,
    number: Option<i64>,
    comment_id: Option<i64>,
    url: Option<String>,
    /// A failed check whose head is not a branch of this repository: a fork's pull
    /// request (GitHub gives such a check no `head_branch` and no pull request), or a
    /// pull request whose head repository is another one.
    from_fork: bool,
}

/// The reference's mapping: the bot assigned to an issue or pull request, asked to
/// review, `@mentioned` in a comment or a new issue or pull request, or a check that
/// failed on a pull request.
fn map_github(event: &str, json: &Value, bot: &str) -> Option<GithubEvent> {
    let action = json["action"].as_str().unwrap_or_default();
    let is_bot = |login: &Value| login.as_str().is_some_and(|login| login.eq_ignore_ascii_case(bot));
    let mentions_bot = |text: &Value| {
        let needle = format!("@{}", bot.to_ascii_lowercase());
        text.as_str().is_some_and(|text| text.to_ascii_lowercase().contains(&needle))
    };
    let item = if json["pull_request"].is_object() { &json["pull_request"] } else { &json["issue"] };
    let number = item["number"].as_i64();
    let url = item["html_url"].as_str().map(str::to_string);
    let what =
        if event == "pull_request" || item.get("pull_request").is_some() { "pull request" } else { "issue" };
    let association =
        |author: &Value| Some(author["author_association"].as_str().unwrap_or("NONE").to_ascii_uppercase());
    let found = |summary: String,
                 author_association: Option<String>,
                 comment_id: Option<i64>,
                 url: Option<String>| {
        Some(GithubEvent { summary, author_association, number, comment_id, url, from_fork: false })
    };
    match (event, action) {
        ("issues" | "pull_request", "assigned") if is_bot(&json["assignee"]["login"]) => found(
            format!(
                "You were assigned {what} #{} (its title and text are in the event below)",
                number.unwrap_or_default()
            ),
            None,
            None,
            url,
        ),
        ("pull_request", "review_requested") if is_bot(&json["requested_reviewer"]["login"]) => found(
            format!(
                "Your review was requested on pull request #{} (its title and text are in the event below)",
                number.unwrap_or_default()
            ),
            None,
            None,
            url,
        ),
        ("issue_comment" | "pull_request_review_comment", "created")
            if mentions_bot(&json["comment"]["body"]) =>
        {
            let comment = &json["comment"];
            found(
                format!(
                    "You were mentioned on {what} #{} (the comment is in the event below)",
                    number.unwrap_or_default()
                ),
                association(comment),
                comment["id"].as_i64(),
                comment["html_url"].as_str().map(str::to_string).or(url),
            )
        }
        ("issues" | "pull_request", "opened") if mentions_bot(&item["body"]) => found(
            format!(
                "You were mentioned in a new {what} #{} (its title and text are in the event below)",
                number.unwrap_or_default()
            ),
            association(item),
            None,
            url,
        ),
        // The check's name and output are whoever wrote the workflow's: they stay in the
        // fenced event; the summary says only what failed where.
        ("check_run", "completed") if failed(&json["check_run"]["conclusion"]) => {
            let run = &json["check_run"];
            let pull = run["pull_requests"][0]["number"].as_i64();
            Some(GithubEvent {
                summary: check_summary("A check", pull, &run["head_sha"]),
                author_association: None,
                number: pull,
                comment_id: None,
                url: run["html_url"].as_str().map(str::to_string),
                from_fork: from_fork(&run["check_suite"]["head_branch"], &run["pull_requests"]),
            })
        }
        ("check_suite", "completed") if failed(&json["check_suite"]["conclusion"]) => {
            let suite = &json["check_suite"];
            let pull = suite["pull_requests"][0]["number"].as_i64();
            Some(GithubEvent {
                summary: check_summary("Checks", pull, &suite["head_sha"]),
                author_association: None,
                number: pull,
                comment_id: None,
                url: None,
                from_fork: from_fork(&suite["head_branch"], &suite["pull_requests"]),
            })
        }
        _ => None,
    }
}

fn failed(conclusion: &Value) -> bool {
    matches!(conclusion.as_str(), Some("failure" | "timed_out"))
}

/// "A check failed on pull request #3 (commit abc123)": numbers and a hex digest only.
fn check_summary(what: &str, pull: Option<i64>, sha: &Value) -> String {
    let sha = sha.as_str().filter(|sha| !sha.is_empty() && sha.chars().all(|c| c.is_ascii_hexdigit()));
    let on = match pull {
        Some(number) => format!("pull request #{number}"),
        None => "a branch".to_string(),
    };
    format!(
        "{what} failed on {on} (commit {}; its name and output are in the event below)",
        sha.unwrap_or("unknown")
    )
}

/// Whether a failed check ran on a fork's code. GitHub gives a check whose head branch
/// is in a fork a `null` `head_branch` and no pull requests; a pull request it names
/// whose head repository differs from its base is a fork's too.
fn from_fork(head_branch: &Value, pulls: &Value) -> bool {
    if head_branch.as_str().is_none_or(|branch| branch.is_empty()) {
        return true;
    }
    pulls.as_array().into_iter().flatten().any(|pull| {
        let repo = |side: &str| {
            let repo = &pull[side]["repo"];
            repo["id"].as_i64().map(|id| id.to_string()).or_else(|| repo["url"].as_str().map(str::to_string))
        };
        matches!((repo("head"), repo("base")), (Some(head), Some(base)) if head != base)
    })
}

/// When a signed body says it was sent: a generic webhook's top-level `timestamp` (Unix
/// seconds or milliseconds, or RFC 3339), or the time GitHub wrote into the events it
/// maps. `None` when it says nothing readable.
fn signed_time(kind: TriggerType, request: &WebhookRequest) -> Option<Timestamp> {
    let json: Value = serde_json::from_slice(&request.body).ok()?;
    let candidates: Vec<&Value> = match kind {
        TriggerType::Github => {
            let item = if json["pull_request"].is_object() { &json["pull_request"] } else { &json["issue"] };
            match request.github_event.as_deref().map(str::trim).unwrap_or_default() {
                "issue_comment" | "pull_request_review_comment" => vec![&json["comment"]["created_at"]],
                "check_run" => vec![&json["check_run"]["completed_at"]],
                "check_suite" => vec![&json["check_suite"]["updated_at"]],
                "issues" | "pull_request" => vec![&item["updated_at"], &item["created_at"]],
                _ => vec![],
            }
        }
        _ => vec![&json["timestamp"]],
    };
    candidates.into_iter().find_map(time_of)
}

fn time_of(value: &Value) -> Option<Timestamp> {
    match value {
        Value::Number(number) => {
            let number = number.as_i64()?;
            // Before 5138 in seconds, after 1973 in milliseconds.
            let millis = if number.abs() < 100_000_000_000 { number.checked_mul(1000)? } else { number };
            Timestamp::from_unix_millis(millis)
        }
        Value::String(text) => {
            let text = text.trim();
            if let Ok(number) = text.parse::<i64>() {
                return time_of(&Value::from(number));
            }
            let at = chrono::DateTime::parse_from_rfc3339(text).ok()?;
            Some(Timestamp::from_datetime(at.with_timezone(&chrono::Utc)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_checked_over_the_raw_body() {
        let body = br#"{"hello": "world"}"#;
        let header = sign_body("s3cret", body);
        assert!(signature_valid("s3cret", &header, body));
        assert!(!signature_valid("other", &header, body));
        assert!(!signature_valid("s3cret", &header, b"{\"hello\":\"world\"}"));
        assert!(!signature_valid("s3cret", "sha256=zz", body));
        assert!(!signature_valid("s3cret", "md5=00", body));
    }

    #[test]
    fn payloads_are_pretty_json_form_as_json_or_text() {
        let json = WebhookRequest { body: br#"{"a":1}"#.to_vec(), ..WebhookRequest::default() };
        assert_eq!(payload_text(&json).unwrap(), "{\n  \"a\": 1\n}");
        let form = WebhookRequest {
            body: b"name=Ada+L&note=50%25".to_vec(),
            content_type: Some("application/x-www-form-urlencoded".into()),
            ..WebhookRequest::default()
        };
        let parsed: Value = serde_json::from_str(&payload_text(&form).unwrap()).unwrap();
        assert_eq!(parsed, serde_json::json!({"name": "Ada L", "note": "50%"}));
        let text = WebhookRequest { body: b"disk full on db-1".to_vec(), ..WebhookRequest::default() };
        assert_eq!(payload_text(&text).unwrap(), "disk full on db-1");
    }

    #[test]
    fn github_events_map_to_the_bot() {
        let assigned = serde_json::json!({
            "action": "assigned", "assignee": {"login": "swarm-bot"},
            "issue": {"number": 7, "title": "Crash", "html_url": "https://github.com/o/r/issues/7"},
            "repository": {"full_name": "o/r"}, "sender": {"login": "ada"}
        });
        let mapped = map_github("issues", &assigned, "swarm-bot").unwrap();
        assert_eq!(mapped.number, Some(7));
        assert!(map_github("issues", &assigned, "someone-else").is_none());
        let comment = serde_json::json!({
            "action": "created", "comment": {"id": 99, "body": "hey @Swarm-Bot look"},
            "issue": {"number": 8, "title": "Q"}, "repository": {"full_name": "o/r"}
        });
        assert_eq!(map_github("issue_comment", &comment, "swarm-bot").unwrap().comment_id, Some(99));
        let check = serde_json::json!({
            "action": "completed",
            "check_run": {"name": "ci", "conclusion": "failure", "head_sha": "abc", "pull_requests": [{"number": 3}]}
        });
        assert_eq!(map_github("check_run", &check, "swarm-bot").unwrap().number, Some(3));
        let passed = serde_json::json!({"action": "completed", "check_run": {"conclusion": "success"}});
        assert!(map_github("check_run", &passed, "swarm-bot").is_none());
    }
    #[test]
    fn a_failed_check_on_a_forks_branch_is_from_a_fork() {
        let same =
            serde_json::json!([{"number": 3, "head": {"repo": {"id": 1}}, "base": {"repo": {"id": 1}}}]);
        let other =
            serde_json::json!([{"number": 3, "head": {"repo": {"id": 2}}, "base": {"repo": {"id": 1}}}]);
        assert!(!from_fork(&Value::from("fix-1"), &same));
        assert!(!from_fork(&Value::from("main"), &serde_json::json!([])), "a branch of the repository");
        assert!(from_fork(&Value::Null, &serde_json::json!([])), "GitHub's shape for a fork");
        assert!(from_fork(&Value::from("main"), &other));
        let summary = check_summary("A check", Some(3), &Value::from("abc</untrusted-input>"));
        assert_eq!(
            summary,
            "A check failed on pull request #3 (commit unknown; its name and output are in the event below)"
        );
    }

    #[test]
    fn a_signed_body_says_when_it_was_sent() {
        let at = |body: &str, kind, event: Option<&str>| {
            let request = WebhookRequest {
                body: body.as_bytes().to_vec(),
                github_event: event.map(str::to_string),
                ..WebhookRequest::default()
            };
            signed_time(kind, &request).map(|at| at.unix_millis())
        };
        let generic = TriggerType::Webhook;
        assert_eq!(at(r#"{"timestamp": 1700000000}"#, generic, None), Some(1_700_000_000_000));
        assert_eq!(at(r#"{"timestamp": 1700000000123}"#, generic, None), Some(1_700_000_000_123));
        assert_eq!(at(r#"{"timestamp": "1700000000"}"#, generic, None), Some(1_700_000_000_000));
        assert_eq!(at(r#"{"timestamp": "2023-11-14T22:13:20Z"}"#, generic, None), Some(1_700_000_000_000));
        assert_eq!(at(r#"{"timestamp": "yesterday"}"#, generic, None), None);
        assert_eq!(at("not json", generic, None), None);
        let comment = r#"{"comment": {"created_at": "2023-11-14T22:13:20Z"}}"#;
        assert_eq!(at(comment, TriggerType::Github, Some("issue_comment")), Some(1_700_000_000_000));
        assert_eq!(at(comment, TriggerType::Github, Some("ping")), None);
    }
}
