//! Triggers over MCP. The reference's schedule tools (`list-schedules`,
//! `create-schedule`, `update-schedule`, `delete-schedule`, `run-schedule-now`) see the
//! `cron` and `interval` triggers, with the reference's input names; the Inbox-MCP
//! tools of `seeds/inbox-mcp.md` (`trigger_list`, `trigger_create`, `trigger_update`,
//! `trigger_delete`, stdio) manage every type. Both call the service functions the
//! REST endpoints call. The tools whose arguments share a flattened field set accept
//! (and ignore) unknown fields: serde cannot deny them through `flatten`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use swarm_domain::{
    time::Timestamp,
    trigger::{TriggerDef, TriggerDraft, TriggerType},
};
use swarm_service::FireRequest;

use crate::{
    context::ToolCall,
    registry::{Audience, ToolSpec},
    reply::{Answer, Outcome, Reply},
};

const SCHEDULE_TYPES: [TriggerType; 2] = [TriggerType::Cron, TriggerType::Interval];

/// The schedule tools, on every transport.
pub fn schedule_group() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "list-schedules",
            "The schedules (cron and interval triggers): when each runs next, how often it ran. \
             Filters: enabled, name (substring).",
            Audience::Agents,
            list_schedules,
        )
        .read_only(),
        ToolSpec::new(
            "create-schedule",
            "Create a schedule that files a task from taskTemplate: cronExpression (5 fields, \
             in timezone, default UTC) or intervalMs (at least 1000). targetAgentId assigns the \
             task; without it the task goes to the pool.",
            Audience::Agents,
            create_schedule,
        ),
        ToolSpec::new(
            "update-schedule",
            "Change a schedule (scheduleId, or name): only the fields given. enabled false pauses \
             it. Its creator or the lead only.",
            Audience::Agents,
            update_schedule,
        ),
        ToolSpec::new(
            "delete-schedule",
            "Delete a schedule (scheduleId, or name). Its creator or the lead only.",
            Audience::Agents,
            delete_schedule,
        ),
        ToolSpec::new(
            "run-schedule-now",
            "File a schedule's task now (scheduleId, or name), without moving its next run. \
             Its creator, its target or the lead only; the task records you as its creator.",
            Audience::Agents,
            run_schedule_now,
        ),
    ]
}

/// The Inbox-MCP trigger tools (stdio), shared by trigger and worker sessions.
pub fn inbox_group() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "trigger_list",
            "Inbox: every trigger (cron, interval, once, webhook, github, manual), or those of one type.",
            Audience::Anyone,
            trigger_list,
        )
        .read_only(),
        ToolSpec::new(
            "trigger_create",
            "Inbox: create a trigger. name is a slug; type cron (schedule, timezone), interval \
             (interval_ms), once (run_at), webhook (webhook_secret of at least 16 characters, e.g. \
             `openssl rand -hex 32`, or webhook_public true), github (webhook_secret) or manual. \
             prompt may use {{payload}} (fenced outside text), {{sender}} (a short identifier, else \
             unknown), {{channel}}, {{trigger_name}}. session_mode persistent resumes one agent \
             session per conversation. Only the lead may aim one at the lead (by `lead` or its id).",
            Audience::Anyone,
            trigger_create,
        ),
        ToolSpec::new(
            "trigger_update",
            "Inbox: change a trigger by name: only the fields given; enabled false pauses it.",
            Audience::Anyone,
            trigger_update,
        ),
        ToolSpec::new(
            "trigger_delete",
            "Inbox: delete a trigger by name, with its sessions.",
            Audience::Anyone,
            trigger_delete,
        ),
    ]
}

/// A trigger as tools show it: no secret, where a webhook is called.
fn view(trigger: TriggerDef) -> TriggerView {
    let (mut webhook_url, mut auth) = (None, None);
    if trigger.kind.is_webhook() {
        // The seed's field name, and the URL the sender must call (stdio knows the hub's).
        webhook_url = Some(format!("{}/api/webhooks/{}", crate::context::hub_url(), trigger.name));
        auth = Some(if trigger.webhook_public {
            "public: no signature needed".to_string()
        } else if trigger.kind == TriggerType::Github {
            "X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body with the secret>".to_string()
        } else {
            "X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body>, or X-Webhook-Secret: <secret>".to_string()
        });
    }
    TriggerView { has_webhook_secret: trigger.has_webhook_secret(), trigger, webhook_url, auth }
}

fn invalid(message: impl Into<String>) -> Reply {
    Reply::refused(message)
}

// ----- schedules -----

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListSchedulesArguments {
    enabled: Option<bool>,
    /// Part of the name.
    name: Option<String>,
}

async fn list_schedules(call: ToolCall, args: ListSchedulesArguments) -> Outcome<ScheduleListOutput> {
    let mut schedules = call.service.trigger_list(&SCHEDULE_TYPES).await?;
    schedules.retain(|trigger| args.enabled.is_none_or(|enabled| trigger.enabled == enabled));
    if let Some(part) = args.name.as_deref().map(str::trim).filter(|part| !part.is_empty()) {
        schedules.retain(|trigger| trigger.name.contains(part));
    }
    let schedules: Vec<TriggerView> = schedules.into_iter().map(view).collect();
    Ok(Answer::new(format!("{} schedule(s)", schedules.len()), ScheduleListOutput { schedules }))
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ScheduleFields {
    /// The text of each task it files; `{{trigger_name}}` names the schedule.
    task_template: Option<String>,
    /// 5 fields (minute first), e.g. `0 9 * * 1-5`.
    cron_expression: Option<String>,
    /// Milliseconds between runs (at least 1000).
    interval_ms: Option<i64>,
    /// IANA time zone of the cron expression (default UTC).
    timezone: Option<String>,
    description: Option<String>,
    /// Assign each task to this agent (a UUID); without it, the pool.
    target_agent_id: Option<String>,
    task_type: Option<String>,
    tags: Option<Vec<String>>,
    priority: Option<i64>,
    enabled: Option<bool>,
}

impl ScheduleFields {
    fn draft(self, name: String, kind: Option<&str>) -> Result<TriggerDraft, Reply> {
        let kind = match (kind, &self.cron_expression, self.interval_ms) {
            (None, _, _) => String::new(),
            (Some(_), Some(_), Some(_)) => {
                return Err(invalid("give cronExpression or intervalMs, not both"));
            }
            (Some(_), Some(_), None) => "cron".into(),
            (Some(_), None, Some(_)) => "interval".into(),
            (Some(_), None, None) => return Err(invalid("a schedule needs cronExpression or intervalMs")),
        };
        Ok(TriggerDraft {
            name,
            kind,
            description: self.description,
            schedule: self.cron_expression,
            timezone: self.timezone,
            interval_ms: self.interval_ms,
            target: self.target_agent_id,
            prompt: self.task_template,
            task_type: self.task_type,
            tags: self.tags,
            priority: self.priority,
            enabled: self.enabled,
            ..TriggerDraft::default()
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct CreateScheduleArguments {
    /// A slug: lowercase letters, digits, - and _.
    name: String,
    #[serde(flatten)]
    fields: ScheduleFields,
}

async fn create_schedule(call: ToolCall, args: CreateScheduleArguments) -> Outcome<ScheduleOutput> {
    if args.fields.task_template.as_deref().is_none_or(|text| text.trim().is_empty()) {
        return Err(invalid("taskTemplate is required: the text of the tasks it files"));
    }
    let draft = args.fields.draft(args.name, Some("schedule"))?;
    let trigger = call.service.trigger_create(call.caller(), draft).await?;
    let when = trigger.next_run_at.map(|at| at.to_string()).unwrap_or_else(|| "never".into());
    let message = format!("schedule {} created; next run {when}", trigger.name);
    Ok(Answer::new(message, ScheduleOutput { schedule: view(trigger) }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct UpdateScheduleArguments {
    /// The schedule's id (or its name).
    schedule_id: Option<String>,
    /// The schedule's name, when no scheduleId is given.
    name: Option<String>,
    #[serde(flatten)]
    fields: ScheduleFields,
}

async fn update_schedule(call: ToolCall, args: UpdateScheduleArguments) -> Outcome<ScheduleOutput> {
    let current = schedule(&call, args.schedule_id.as_deref(), args.name.as_deref()).await?;
    let mut draft = args.fields.draft(String::new(), None)?;
    // The reference switches kinds by which field is given; a trigger keeps its type.
    if draft.schedule.is_some() && current.kind != TriggerType::Cron
        || draft.interval_ms.is_some() && current.kind != TriggerType::Interval
    {
        return Err(invalid(format!(
            "{} is a {} schedule: delete it and create another to change its kind",
            current.name,
            current.kind.as_str()
        )));
    }
    draft.kind = current.kind.as_str().into();
    let trigger = call.service.trigger_update(call.caller(), &current.name, draft).await?;
    Ok(Answer::new(format!("schedule {} updated", trigger.name), ScheduleOutput { schedule: view(trigger) }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ScheduleIdArguments {
    /// The schedule's id (or its name).
    schedule_id: Option<String>,
    /// The schedule's name, when no scheduleId is given.
    name: Option<String>,
}

async fn delete_schedule(call: ToolCall, args: ScheduleIdArguments) -> Outcome<ScheduleOutput> {
    let current = schedule(&call, args.schedule_id.as_deref(), args.name.as_deref()).await?;
    let deleted = call.service.trigger_delete(call.caller(), &current.name).await?;
    Ok(Answer::new(format!("schedule {} deleted", deleted.name), ScheduleOutput { schedule: view(deleted) }))
}

async fn run_schedule_now(call: ToolCall, args: ScheduleIdArguments) -> Outcome<FiredOutput> {
    let current = schedule(&call, args.schedule_id.as_deref(), args.name.as_deref()).await?;
    let task = call.service.trigger_fire(call.caller(), &current.name, FireRequest::default()).await?;
    Ok(Answer::new(format!("schedule {} ran: task {}", current.name, task.id), FiredOutput { task }))
}

fn given(text: Option<&str>) -> Option<&str> {
    text.map(str::trim).filter(|text| !text.is_empty())
}

/// A cron or interval trigger by `scheduleId` (an id, or a name as we always took it)
/// or by `name`, as the reference takes either; other types are not schedules.
async fn schedule(
    call: &ToolCall,
    schedule_id: Option<&str>,
    name: Option<&str>,
) -> Result<TriggerDef, Reply> {
    let Some(id_or_name) = given(schedule_id).or(given(name)) else {
        return Err(invalid("give scheduleId or name: which schedule"));
    };
    let trigger = call.service.trigger_find(id_or_name).await?;
    if !SCHEDULE_TYPES.contains(&trigger.kind) {
        return Err(invalid(format!(
            "{} is a {} trigger, not a schedule",
            trigger.name,
            trigger.kind.as_str()
        )));
    }
    Ok(trigger)
}

// ----- Inbox-MCP -----

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TriggerListArguments {
    /// cron, interval, once, webhook, github or manual.
    #[serde(rename = "type")]
    kind: Option<String>,
}

async fn trigger_list(call: ToolCall, args: TriggerListArguments) -> Outcome<TriggerListOutput> {
    let kinds = match args.kind.as_deref().map(str::trim).filter(|kind| !kind.is_empty()) {
        Some(kind) => vec![TriggerType::parse(kind).map_err(|error| invalid(error.0))?],
        None => Vec::new(),
    };
    let triggers: Vec<TriggerView> = call.service.trigger_list(&kinds).await?.into_iter().map(view).collect();
    Ok(Answer::new(format!("{} trigger(s)", triggers.len()), TriggerListOutput { triggers }))
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
struct TriggerFields {
    description: Option<String>,
    /// The seed's inbox channel: the source of the trigger's tasks and `{{channel}}`
    /// (default: the trigger's type, e.g. schedule, webhook).
    channel: Option<String>,
    /// cron: the expression.
    schedule: Option<String>,
    /// cron: IANA time zone (default UTC).
    timezone: Option<String>,
    /// interval: milliseconds between firings (at least 1000).
    interval_ms: Option<i64>,
    /// interval: seconds between firings (interval_ms wins when both are given).
    interval_seconds: Option<i64>,
    /// once: when (RFC 3339, e.g. 2026-01-20T10:00:00Z).
    run_at: Option<String>,
    /// webhook, github: the HMAC key or header secret, at least 16 characters
    /// (`openssl rand -hex 32`).
    webhook_secret: Option<String>,
    /// webhook: accept unsigned requests.
    webhook_public: Option<bool>,
    /// github: the bot login whose events count.
    github_bot: Option<String>,
    /// pool (default), lead, or an agent id.
    target: Option<String>,
    prompt: Option<String>,
    /// ephemeral (default) or persistent.
    session_mode: Option<String>,
    enabled: Option<bool>,
}

impl TriggerFields {
    fn draft(self, name: String, kind: String) -> Result<TriggerDraft, Reply> {
        let run_at = match self.run_at {
            Some(text) => {
                Some(serde_json::from_value::<Timestamp>(Value::String(text.clone())).map_err(|_| {
                    invalid(format!("run_at must be a time like 2026-01-20T10:00:00Z, got {text:?}"))
                })?)
            }
            None => None,
        };
        Ok(TriggerDraft {
            name,
            kind,
            description: self.description,
            schedule: self.schedule,
            timezone: self.timezone,
            interval_ms: self
                .interval_ms
                .or(self.interval_seconds.map(|seconds| seconds.saturating_mul(1000))),
            run_at,
            webhook_secret: self.webhook_secret,
            webhook_public: self.webhook_public,
            github_bot: self.github_bot,
            channel: self.channel,
            target: self.target,
            prompt: self.prompt,
            session_mode: self.session_mode,
            enabled: self.enabled,
            ..TriggerDraft::default()
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct TriggerCreateArguments {
    /// Unique slug (lowercase, digits, - and _).
    name: String,
    /// cron, interval, once, webhook, github or manual.
    #[serde(rename = "type")]
    kind: String,
    #[serde(flatten)]
    fields: TriggerFields,
}

async fn trigger_create(call: ToolCall, args: TriggerCreateArguments) -> Outcome<TriggerOutput> {
    let trigger =
        call.service.trigger_create(call.caller(), args.fields.draft(args.name, args.kind)?).await?;
    Ok(Answer::new(format!("trigger {} created", trigger.name), TriggerOutput { trigger: view(trigger) }))
}

#[derive(Debug, Deserialize, JsonSchema)]
struct TriggerUpdateArguments {
    name: String,
    #[serde(flatten)]
    fields: TriggerFields,
}

async fn trigger_update(call: ToolCall, args: TriggerUpdateArguments) -> Outcome<TriggerOutput> {
    let draft = args.fields.draft(String::new(), String::new())?;
    let trigger = call.service.trigger_update(call.caller(), &args.name, draft).await?;
    Ok(Answer::new(format!("trigger {} updated", trigger.name), TriggerOutput { trigger: view(trigger) }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TriggerNameArguments {
    name: String,
}

async fn trigger_delete(call: ToolCall, args: TriggerNameArguments) -> Outcome<TriggerOutput> {
    let deleted = call.service.trigger_delete(call.caller(), &args.name).await?;
    let message = format!("trigger {} deleted with its sessions", deleted.name);
    Ok(Answer::new(message, TriggerOutput { trigger: view(deleted) }))
}

// The result fields of the trigger tools, for their output schemas.

/// A trigger as the tools show it ([`view`]): the REST API's trigger, with whether it has
/// a webhook secret, and for a webhook the URL to call and how to sign.
#[derive(Serialize, utoipa::ToSchema)]
struct TriggerView {
    #[serde(flatten)]
    trigger: TriggerDef,
    #[serde(rename = "hasWebhookSecret")]
    has_webhook_secret: bool,
    /// Webhook triggers: the URL the sender calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    webhook_url: Option<String>,
    /// Webhook triggers: how a call proves it comes from the sender.
    #[serde(skip_serializing_if = "Option::is_none")]
    auth: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct ScheduleListOutput {
    schedules: Vec<TriggerView>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct ScheduleOutput {
    schedule: TriggerView,
}

#[derive(Serialize, utoipa::ToSchema)]
struct FiredOutput {
    /// The task the schedule filed.
    task: swarm_domain::task::Task,
}

#[derive(Serialize, utoipa::ToSchema)]
struct TriggerListOutput {
    triggers: Vec<TriggerView>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct TriggerOutput {
    trigger: TriggerView,
}
