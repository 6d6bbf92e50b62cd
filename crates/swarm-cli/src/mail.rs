//! `swarm mail log <agent>`: an agent's mail history, both directions, oldest first, as
//! the mailbox seed's JSONL lines (`{"id", "from", "to", "type", "subject", "body",
//! "priority", "created_at", "awaiting_response"}`, plus `in_reply_to` on replies).

use std::io::Write as _;

use clap::{Args, Subcommand};
use serde::Deserialize;
use swarm_domain::{id::MailId, mail::Mail};

use super::{HubArgs, hub_failure, resolve_agent};

/// The page size of the history walk (the hub's maximum).
const PAGE: i64 = 200;

#[derive(Debug, Subcommand)]
pub enum MailCommand {
    /// Print an agent's mail history (sent and received), oldest first, as JSONL
    ///
    /// One JSON object per line, in the mailbox seed's format, from the whole history:
    /// mail is append-only. Pipe it to jq, or to a file to keep.
    Log(MailLogArgs),
}

#[derive(Debug, Args)]
pub struct MailLogArgs {
    /// The agent's name or id
    #[arg(value_name = "AGENT")]
    agent: String,
    #[command(flatten)]
    hub: HubArgs,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Page {
    mail: Vec<Mail>,
    next_cursor: Option<MailId>,
}

pub async fn run_mail(command: MailCommand) -> anyhow::Result<()> {
    match command {
        MailCommand::Log(args) => mail_log(args).await,
    }
}

async fn mail_log(args: MailLogArgs) -> anyhow::Result<()> {
    // The operator's view: whoever's history is asked for, not the caller's own.
    let client = HubArgs { agent_id: None, ..args.hub }.connect()?;
    let agent = resolve_agent(&client, &args.agent).await?;
    let mut after: Option<MailId> = None;
    let mut stdout = std::io::stdout().lock();
    loop {
        let mut query = vec![
            ("agentId", agent.to_string()),
            ("box", "all".to_string()),
            ("order", "oldest".to_string()),
            ("limit", PAGE.to_string()),
        ];
        query.extend(after.map(|cursor| ("after", cursor.to_string())));
        let page: Page = client.get_json("/api/mail", &query).await.map_err(|err| {
            hub_failure(format!("cannot read the mail of agent {agent}"), err, |status| {
                (status == 401).then(|| "set the hub's key with --api-key or API_KEY".to_string())
            })
        })?;
        for mail in &page.mail {
            writeln!(stdout, "{}", mail.log_line())?;
        }
        match page.next_cursor {
            Some(cursor) => after = Some(cursor),
            None => return Ok(()),
        }
    }
}
