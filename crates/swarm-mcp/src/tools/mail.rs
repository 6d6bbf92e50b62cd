//! Agent mail: `send-mail`, `reply-mail`, `list-mail`, `read-mail`,
//! `unread-mail-count`. Each is one service call, the same its REST twin makes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use swarm_domain::{
    id::MailId,
    mail::{MailBox, MailPriority, MailType},
};
use swarm_service::{DeliverMail, ListMail, ReplyMail, SendMail};
use uuid::Uuid;

use crate::{
    context::ToolCall,
    registry::{Audience, ToolSpec},
    reply::{Answer, Outcome, Reply},
    tools::NoArguments,
};

pub fn group() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "send-mail",
            "Send mail to an agent (id or name) or the lead (to: \"coordinator\"). priority urgent wakes \
             the recipient; normal (default) reaches it at its next break; low when it asks. \
             awaitingResponse: you wait for a reply (the lead is told if you stop).",
            Audience::Agents,
            send_mail,
        ),
        ToolSpec::new(
            "reply-mail",
            "Answer mail sent to you (mailId): the answer goes to its sender and ends its waiting. It has the \
             original's priority unless you give one.",
            Audience::Agents,
            reply_mail,
        ),
        ToolSpec::new(
            "read-mail",
            "Read your unread mail, urgent first; this marks it read. mailIds reads those pieces, read or \
             not; includeLow adds low-priority mail.",
            Audience::Agents,
            read_mail,
        ),
        ToolSpec::new(
            "list-mail",
            "List your mail without marking it read: box inbox (default), outbox or all; unreadOnly; priority; \
             pending (mail you still wait on).",
            Audience::Agents,
            list_mail,
        )
        .read_only(),
        ToolSpec::new(
            "unread-mail-count",
            "Your unread mail by priority, and whether you are waiting for a response.",
            Audience::Agents,
            unread_mail_count,
        )
        .read_only(),
    ]
}

fn mail_type_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let names: Vec<&str> = MailType::ALL.iter().map(MailType::as_str).collect();
    schemars::json_schema!({ "type": "string", "enum": names })
}

fn priority_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let names: Vec<&str> = MailPriority::ALL.iter().map(MailPriority::as_str).collect();
    schemars::json_schema!({ "type": "string", "enum": names })
}

fn refuse(invalid: swarm_domain::Invalid) -> Reply {
    Reply::refused(invalid.0)
}

fn parse_type(text: Option<&str>) -> Result<Option<MailType>, Reply> {
    text.map(MailType::parse).transpose().map_err(refuse)
}

fn parse_priority(text: Option<&str>) -> Result<Option<MailPriority>, Reply> {
    text.map(MailPriority::parse).transpose().map_err(refuse)
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SendMailArguments {
    /// An agent id or name, or "coordinator" for the lead.
    to: String,
    #[serde(rename = "type")]
    #[schemars(schema_with = "mail_type_schema")]
    mail_type: Option<String>,
    /// One line, at most 200 characters.
    subject: String,
    /// At most 20000 characters.
    body: String,
    #[schemars(schema_with = "priority_schema")]
    priority: Option<String>,
    #[serde(default)]
    awaiting_response: bool,
}

async fn send_mail(call: ToolCall, args: SendMailArguments) -> Outcome<OneMail> {
    let request = SendMail {
        to: args.to,
        mail_type: parse_type(args.mail_type.as_deref())?,
        subject: args.subject,
        body: args.body,
        priority: parse_priority(args.priority.as_deref())?,
        awaiting_response: args.awaiting_response,
    };
    let mail = call.service.mail_send(call.caller(), request).await?;
    let waiting = if mail.awaiting_response { "; you are waiting for a response" } else { "" };
    Ok(Answer::new(
        format!("{} mail sent to {}{waiting}.", mail.priority, mail.to_agent_id),
        OneMail { mail },
    ))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReplyMailArguments {
    mail_id: Uuid,
    body: String,
    subject: Option<String>,
    #[serde(rename = "type")]
    #[schemars(schema_with = "mail_type_schema")]
    mail_type: Option<String>,
    #[schemars(schema_with = "priority_schema")]
    priority: Option<String>,
    #[serde(default)]
    awaiting_response: bool,
}

async fn reply_mail(call: ToolCall, args: ReplyMailArguments) -> Outcome<OneMail> {
    let request = ReplyMail {
        body: args.body,
        subject: args.subject,
        mail_type: parse_type(args.mail_type.as_deref())?,
        priority: parse_priority(args.priority.as_deref())?,
        awaiting_response: args.awaiting_response,
    };
    let mail = call.service.mail_reply(call.caller(), MailId::from_uuid(args.mail_id), request).await?;
    Ok(Answer::new(format!("Reply sent to {}.", mail.to_agent_id), OneMail { mail }))
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReadMailArguments {
    /// Read these pieces only.
    #[serde(default)]
    mail_ids: Vec<Uuid>,
    #[serde(default)]
    include_low: bool,
    /// 1 to 200 (default 20).
    #[schemars(range(min = 1, max = 200))]
    limit: Option<i64>,
}

async fn read_mail(call: ToolCall, args: ReadMailArguments) -> Outcome<MailList> {
    let request = DeliverMail {
        ids: args.mail_ids.into_iter().map(MailId::from_uuid).collect(),
        include_low: args.include_low,
        limit: args.limit,
    };
    let mail = call.service.mail_deliver(call.caller(), request).await?;
    Ok(Answer::new(format!("{} piece(s) of mail", mail.len()), MailList { mail }))
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListMailArguments {
    /// inbox (default), outbox or all.
    #[serde(rename = "box")]
    #[schemars(regex(pattern = "^(inbox|outbox|all)$"))]
    mailbox: Option<String>,
    #[serde(default)]
    unread_only: bool,
    #[schemars(schema_with = "priority_schema")]
    priority: Option<String>,
    /// Only mail you still wait on (awaiting a response), or urgent mail not yet read.
    #[serde(default)]
    pending: bool,
    /// 1 to 200 (default 50), newest first.
    #[schemars(range(min = 1, max = 200))]
    limit: Option<i64>,
}

async fn list_mail(call: ToolCall, args: ListMailArguments) -> Outcome<MailList> {
    let request = ListMail {
        agent: None,
        mailbox: args.mailbox.as_deref().map(MailBox::parse).transpose().map_err(refuse)?.unwrap_or_default(),
        unread_only: args.unread_only,
        priorities: parse_priority(args.priority.as_deref())?.into_iter().collect(),
        pending_only: args.pending,
        limit: args.limit,
        ..ListMail::default()
    };
    let mail = call.service.mail_list(call.caller(), request).await?;
    Ok(Answer::new(format!("{} piece(s) of mail", mail.len()), MailList { mail }))
}

async fn unread_mail_count(call: ToolCall, _args: NoArguments) -> Outcome<MailCountsOutput> {
    let counts = call.service.mail_counts(call.caller(), None).await?;
    let waiting = if counts.waiting_for_response() { "; you are waiting for a response" } else { "" };
    let message = format!("{} unread ({} urgent){waiting}", counts.unread, counts.urgent);
    let waiting_for_response = counts.waiting_for_response();
    Ok(Answer::new(message, MailCountsOutput { counts, waiting_for_response }))
}

// The result fields of the mail tools, for their output schemas.
#[derive(Serialize, utoipa::ToSchema)]
struct OneMail {
    mail: swarm_domain::mail::Mail,
}

#[derive(Serialize, utoipa::ToSchema)]
struct MailList {
    mail: Vec<swarm_domain::mail::Mail>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct MailCountsOutput {
    counts: swarm_domain::mail::MailCounts,
    waiting_for_response: bool,
}
