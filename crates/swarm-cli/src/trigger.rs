//! `swarm trigger list|create|fire|disable`.

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use super::{HubArgs, JSON_HELP, hub_failure, output, resolve_agent};

#[derive(Debug, Subcommand)]
pub enum TriggerCommand {
    /// List the triggers, by name
    ///
    /// Shows name, type, when (schedule, interval, time or webhook path), target,
    /// enabled, runs and the next run. --json prints the hub's `{triggers}` list.
    List(TriggerListArgs),
    /// Create a trigger
    ///
    /// Examples:
    ///   swarm trigger create nightly --type cron --schedule "0 2 * * *" --timezone Europe/Paris --prompt "Review yesterday's merges"
    ///   swarm trigger create alerts --type webhook --secret "$SECRET" --prompt "Alert: {{payload}}" --target lead
    ///   swarm trigger create github --type github --secret "$GH_SECRET" --github-bot my-bot --session persistent
    Create(Box<TriggerCreateArgs>),
    /// Fire a trigger now (any type, even disabled); prints the task it created
    Fire(TriggerFireArgs),
    /// Disable a trigger (or enable it again with --enable)
    Disable(TriggerDisableArgs),
}

#[derive(Debug, Args)]
pub struct TriggerListArgs {
    /// Only triggers of this type (cron, interval, once, webhook, github, manual)
    #[arg(long = "type", value_name = "TYPE")]
    kind: Option<String>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
    #[command(flatten)]
    hub: HubArgs,
}

#[derive(Debug, Args)]
pub struct TriggerCreateArgs {
    /// A slug: lowercase letters, digits, - and _
    name: String,
    /// cron, interval, once, webhook, github or manual
    #[arg(long = "type", value_name = "TYPE")]
    kind: String,
    /// The task text; {{payload}}, {{sender}}, {{channel}} and {{trigger_name}} are filled in
    #[arg(long)]
    prompt: Option<String>,
    #[arg(long)]
    description: Option<String>,
    /// cron: the expression (5 or 6 fields)
    #[arg(long)]
    schedule: Option<String>,
    /// cron: IANA time zone (default UTC)
    #[arg(long)]
    timezone: Option<String>,
    /// interval: seconds between firings
    #[arg(long, value_name = "SECONDS")]
    every: Option<i64>,
    /// once: when, e.g. 2026-01-20T10:00:00Z
    #[arg(long, value_name = "TIME")]
    at: Option<String>,
    /// webhook, github: the HMAC key (X-Hub-Signature-256) or header secret (X-Webhook-Secret)
    #[arg(long, env = "TRIGGER_SECRET", hide_env_values = true)]
    secret: Option<String>,
    /// webhook: accept unsigned requests
    #[arg(long)]
    public: bool,
    /// github: the login whose assignments, review requests and @mentions count
    #[arg(long, value_name = "LOGIN")]
    github_bot: Option<String>,
    /// pool (default), lead, or an agent's name or id
    #[arg(long)]
    target: Option<String>,
    /// ephemeral (default) or persistent: one agent session per conversation
    #[arg(long = "session", value_name = "MODE")]
    session_mode: Option<String>,
    #[arg(long)]
    task_type: Option<String>,
    /// A tag for its tasks (repeatable)
    #[arg(long = "tag")]
    tags: Vec<String>,
    /// 0 to 100
    #[arg(long)]
    priority: Option<i64>,
    /// Create it disabled
    #[arg(long)]
    disabled: bool,
    #[arg(long, help = JSON_HELP)]
    json: bool,
    #[command(flatten)]
    hub: HubArgs,
}

#[derive(Debug, Args)]
pub struct TriggerFireArgs {
    /// The trigger's name or id
    name: String,
    /// What fills {{payload}}
    #[arg(long)]
    payload: Option<String>,
    /// The conversation of a persistent trigger
    #[arg(long)]
    session_key: Option<String>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
    #[command(flatten)]
    hub: HubArgs,
}

#[derive(Debug, Args)]
pub struct TriggerDisableArgs {
    /// The trigger's name or id
    name: String,
    /// Enable it instead
    #[arg(long)]
    enable: bool,
    #[arg(long, help = JSON_HELP)]
    json: bool,
    #[command(flatten)]
    hub: HubArgs,
}

pub async fn run_trigger(command: TriggerCommand) -> anyhow::Result<()> {
    match command {
        TriggerCommand::List(args) => trigger_list(args).await,
        TriggerCommand::Create(args) => trigger_create(*args).await,
        TriggerCommand::Fire(args) => trigger_fire(args).await,
        TriggerCommand::Disable(args) => trigger_disable(args).await,
    }
}

fn not_found_tip(status: u16) -> Option<String> {
    (status == 404).then(|| "see the triggers with `swarm trigger list`".to_string())
}

async fn trigger_list(args: TriggerListArgs) -> anyhow::Result<()> {
    let client = args.hub.connect()?;
    let triggers = client.list_triggers(args.kind.as_deref()).await.context("cannot list triggers")?;
    if args.json {
        return output::print_json(&json!({ "triggers": triggers }));
    }
    if triggers.is_empty() {
        return output::emit("no triggers\n");
    }
    let text = |trigger: &Value, key: &str| trigger[key].as_str().unwrap_or_default().to_string();
    let rows: Vec<Vec<String>> = triggers
        .iter()
        .map(|trigger| {
            vec![
                text(trigger, "name"),
                text(trigger, "type"),
                when(trigger),
                text(trigger, "target"),
                if trigger["enabled"] == json!(true) { "yes".into() } else { "no".into() },
                trigger["runCount"].to_string(),
                trigger["nextRunAt"].as_str().unwrap_or("-").to_string(),
            ]
        })
        .collect();
    output::emit(&output::table(&["NAME", "TYPE", "WHEN", "TARGET", "ENABLED", "RUNS", "NEXT RUN"], &rows))
}

/// When a trigger fires, in a few words.
fn when(trigger: &Value) -> String {
    match trigger["type"].as_str().unwrap_or_default() {
        "cron" => format!(
            "{} ({})",
            trigger["schedule"].as_str().unwrap_or_default(),
            trigger["timezone"].as_str().unwrap_or("UTC")
        ),
        "interval" => match trigger["intervalMs"].as_i64() {
            Some(ms) if ms % 1000 == 0 => format!("every {}s", ms / 1000),
            Some(ms) => format!("every {ms}ms"),
            None => "every ?".into(),
        },
        "once" => trigger["runAt"].as_str().unwrap_or_default().to_string(),
        "webhook" | "github" => trigger["webhookPath"].as_str().unwrap_or_default().to_string(),
        _ => "by hand".into(),
    }
}

async fn trigger_create(args: TriggerCreateArgs) -> anyhow::Result<()> {
    let client = args.hub.connect()?;
    let target = match args.target.as_deref().map(str::trim) {
        None | Some("pool") => Some("pool".to_string()),
        Some("lead") => Some("lead".to_string()),
        Some(agent) => Some(resolve_agent(&client, agent).await?.to_string()),
    };
    let mut fields = Map::new();
    let mut put = |key: &str, value: Value| {
        if !value.is_null() {
            fields.insert(key.to_string(), value);
        }
    };
    put("name", json!(args.name));
    put("type", json!(args.kind));
    put("prompt", json!(args.prompt));
    put("description", json!(args.description));
    put("schedule", json!(args.schedule));
    put("timezone", json!(args.timezone));
    put("intervalSeconds", json!(args.every));
    put("runAt", json!(args.at));
    put("webhookSecret", json!(args.secret));
    put("webhookPublic", json!(args.public.then_some(true)));
    put("githubBot", json!(args.github_bot));
    put("target", json!(target));
    put("sessionMode", json!(args.session_mode));
    put("taskType", json!(args.task_type));
    put("tags", json!((!args.tags.is_empty()).then_some(args.tags)));
    put("priority", json!(args.priority));
    put("enabled", json!(args.disabled.then_some(false)));
    let created = client
        .create_trigger(&Value::Object(fields))
        .await
        .map_err(|err| hub_failure(format!("cannot create trigger {}", args.name), err, |_| None))?;
    if args.json {
        return output::print_json(&created);
    }
    let mut text =
        format!("created trigger {} ({})\n", created["name"].as_str().unwrap_or_default(), when(&created));
    if let Some(next) = created["nextRunAt"].as_str() {
        text.push_str(&format!("next run: {next}\n"));
    }
    if let Some(path) = created["webhookPath"].as_str() {
        text.push_str(&format!("webhook: POST {}{path}\n", client.base_url()));
    }
    output::emit(&text)
}

async fn trigger_fire(args: TriggerFireArgs) -> anyhow::Result<()> {
    let client = args.hub.connect()?;
    let task = client
        .fire_trigger(&args.name, args.payload.as_deref(), args.session_key.as_deref())
        .await
        .map_err(|err| hub_failure(format!("cannot fire trigger {}", args.name), err, not_found_tip))?;
    if args.json {
        return output::print_json(&task);
    }
    output::emit(&format!("fired {}: task {} ({})\n", args.name, task.id, task.status.as_str()))
}

async fn trigger_disable(args: TriggerDisableArgs) -> anyhow::Result<()> {
    let client = args.hub.connect()?;
    let verb = if args.enable { "enable" } else { "disable" };
    let updated = client
        .update_trigger(&args.name, &json!({ "enabled": args.enable }))
        .await
        .map_err(|err| hub_failure(format!("cannot {verb} trigger {}", args.name), err, not_found_tip))?;
    if args.json {
        return output::print_json(&updated);
    }
    output::emit(&format!("{}d trigger {}\n", verb, updated["name"].as_str().unwrap_or(&args.name)))
}
