//! The lead's inbox and the Slack bridge's once-only marks. Every status change is one
//! guarded `UPDATE` (`WHERE status IN (<from>)`), run on the writer connection.

use rusqlite::{Connection, Row, params};
use swarm_domain::{
    id::{AgentId, InboxMessageId, TaskId},
    inbox::{
        INBOX_TRIGGER_MAX, InboxChange, InboxMessage, InboxStatus, NewInboxMessage, SlackContext, SlackMark,
    },
    poll::Trigger,
    task::NewTask,
    time::Timestamp,
};
use swarm_store::{Applied, StoreError, StoreResult};

use crate::{
    error::{corrupt, db, is_foreign_key_violation},
    rows::Columns,
    sql::{self, Sql},
    tasks,
};

const SELECT_MESSAGE: &str =
    "SELECT id, agent_id, content, source, status, slack_channel_id, slack_thread_ts,
        slack_user_id, matched_text, delegated_to_task_id, response_text, lease_expires_at, created_at,
        last_updated_at
 FROM inbox_messages";

pub(crate) fn create(
    tx: &Connection,
    message: &NewInboxMessage,
    now: Timestamp,
) -> StoreResult<InboxMessage> {
    let inserted = tx
        .prepare_cached(
            "INSERT INTO inbox_messages (id, agent_id, content, source, status, slack_channel_id,
                 slack_thread_ts, slack_user_id, matched_text, created_at, last_updated_at)
             VALUES (?1, ?2, ?3, 'slack', 'unread', ?4, ?5, ?6, ?7, ?8, ?8)",
        )
        .and_then(|mut statement| {
            statement.execute(params![
                message.id.to_string(),
                message.agent_id.to_string(),
                message.content,
                message.slack.slack_channel_id,
                message.slack.slack_thread_ts,
                message.slack.slack_user_id,
                message.matched_text,
                now.unix_millis(),
            ])
        });
    match inserted {
        Ok(_) => get_known(tx, message.id),
        Err(error) if is_foreign_key_violation(&error) => {
            Err(StoreError::MissingReference(format!("agentId: agent {} does not exist", message.agent_id)))
        }
        Err(error) => Err(db(error)),
    }
}

pub(crate) fn get(connection: &Connection, id: InboxMessageId) -> StoreResult<Option<InboxMessage>> {
    sql::optional(connection, &format!("{SELECT_MESSAGE} WHERE id = ?"), [id.to_string()], from_row)
}

fn get_known(tx: &Connection, id: InboxMessageId) -> StoreResult<InboxMessage> {
    get(tx, id)?.ok_or_else(|| corrupt(format!("inbox message {id} vanished inside its own transaction")))
}

pub(crate) fn list(
    connection: &Connection,
    agent: AgentId,
    statuses: &[InboxStatus],
    limit: i64,
) -> StoreResult<Vec<InboxMessage>> {
    let mut query = Sql::default();
    query.push(SELECT_MESSAGE);
    query.push(" WHERE agent_id = ");
    query.bind(agent.to_string());
    if !statuses.is_empty() {
        query.push(" AND status IN (");
        query.bind_list(statuses.iter().map(|status| status.as_str().to_string()));
        query.push(")");
    }
    query.push(" ORDER BY created_at, id LIMIT ");
    query.bind(limit);
    query.all(connection, from_row)
}

/// The guarded close of an open message.
pub(crate) fn apply(
    tx: &Connection,
    id: InboxMessageId,
    change: &InboxChange,
    now: Timestamp,
) -> StoreResult<Applied<InboxMessage>> {
    let Some(before) = get(tx, id)? else {
        return Ok(Applied::NotFound);
    };
    let (response_text, task_id) = match change {
        InboxChange::Responded { response_text } => (Some(response_text.as_str()), None),
        InboxChange::Delegated { task_id } => (None, Some(task_id.to_string())),
        InboxChange::Read => (None, None),
    };
    let updated = sql::execute(
        tx,
        "UPDATE inbox_messages SET status = ?1, lease_expires_at = NULL, last_updated_at = ?2,
                response_text = coalesce(?3, response_text),
                delegated_to_task_id = coalesce(?4, delegated_to_task_id)
         WHERE id = ?5 AND status IN ('unread', 'processing')",
        params![change.to().as_str(), now.unix_millis(), response_text, task_id, id.to_string()],
    )?;
    if updated == 0 {
        return Ok(Applied::Refused { current: before });
    }
    Ok(Applied::Changed { before, after: get_known(tx, id)? })
}

/// An operator puts a dead letter back where the poll finds it, with a fresh count.
pub(crate) fn requeue(
    tx: &Connection,
    id: InboxMessageId,
    now: Timestamp,
) -> StoreResult<Applied<InboxMessage>> {
    let Some(before) = get(tx, id)? else {
        return Ok(Applied::NotFound);
    };
    let updated = sql::execute(
        tx,
        "UPDATE inbox_messages SET status = 'unread', deliveries = 0, last_updated_at = ?1
         WHERE id = ?2 AND status = 'dead_letter'",
        params![now.unix_millis(), id.to_string()],
    )?;
    if updated == 0 {
        return Ok(Applied::Refused { current: before });
    }
    Ok(Applied::Changed { before, after: get_known(tx, id)? })
}

pub(crate) fn delegate(
    tx: &Connection,
    id: InboxMessageId,
    owner: AgentId,
    task: &NewTask,
    now: Timestamp,
) -> StoreResult<Applied<InboxMessage>> {
    let Some(before) = get(tx, id)? else {
        return Ok(Applied::NotFound);
    };
    if before.agent_id != owner || !before.status.is_open() {
        return Ok(Applied::Refused { current: before });
    }
    // The task first (the message refers to it); the guard below repeats the checks, and
    // the writer connection runs nothing else in between.
    tasks::create(tx, task, now)?;
    let updated = sql::execute(
        tx,
        "UPDATE inbox_messages SET status = 'delegated', delegated_to_task_id = ?1, lease_expires_at = NULL,
                last_updated_at = ?2
         WHERE id = ?3 AND agent_id = ?4 AND status IN ('unread', 'processing')",
        params![task.id.to_string(), now.unix_millis(), id.to_string(), owner.to_string()],
    )?;
    if updated == 0 {
        return Err(corrupt(format!("inbox message {id} changed inside its own transaction")));
    }
    Ok(Applied::Changed { before, after: get_known(tx, id)? })
}

/// The poll's claim: the lead's oldest unread messages → `processing` with a lease.
pub(crate) fn claim(
    tx: &Connection,
    agent: AgentId,
    now: Timestamp,
    lease_until: Timestamp,
    runner: Option<&str>,
) -> StoreResult<Option<Trigger>> {
    let ids: Vec<String> = sql::all(
        tx,
        "UPDATE inbox_messages SET status = 'processing', lease_expires_at = ?3, last_updated_at = ?2,
                                  lease_holder = ?5, deliveries = deliveries + 1
         WHERE status = 'unread' AND id IN (
             SELECT id FROM inbox_messages WHERE agent_id = ?1 AND status = 'unread'
             ORDER BY created_at, id LIMIT ?4)
         RETURNING id",
        params![agent.to_string(), now.unix_millis(), lease_until.unix_millis(), INBOX_TRIGGER_MAX, runner],
        |row| row.get(0).map_err(db),
    )?;
    if ids.is_empty() {
        return Ok(None);
    }
    let mut messages = Vec::with_capacity(ids.len());
    for id in ids {
        let id = InboxMessageId::parse(&id).map_err(|error| corrupt(error.0))?;
        messages.push(get_known(tx, id)?);
    }
    messages.sort_by_key(|message| (message.created_at, message.id));
    Ok(Some(Trigger::SlackInboxMessage { count: messages.len(), messages }))
}

pub(crate) fn mark_once(tx: &Connection, kind: SlackMark, key: &str, now: Timestamp) -> StoreResult<bool> {
    let inserted = sql::execute(
        tx,
        "INSERT INTO slack_marks (kind, key, created_at) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
        params![kind.as_str(), key, now.unix_millis()],
    )?;
    Ok(inserted == 1)
}

fn from_row(row: &Row<'_>) -> StoreResult<InboxMessage> {
    let mut column = Columns::new(row);
    let id: String = column.take("id")?;
    let id = InboxMessageId::parse(&id).map_err(|error| corrupt(error.0))?;
    let agent_id = column.agent_id("agent_id")?;
    let content = column.take("content")?;
    let source = column.take("source")?;
    let status: String = column.take("status")?;
    let status =
        InboxStatus::parse(&status).map_err(|error| corrupt(format!("inbox message {id}: {error}")))?;
    let slack = SlackContext {
        slack_channel_id: column.take("slack_channel_id")?,
        slack_thread_ts: column.take("slack_thread_ts")?,
        slack_user_id: column.take("slack_user_id")?,
    };
    let matched_text = column.take("matched_text")?;
    let delegated_to_task_id: Option<TaskId> = column.opt_task_id("delegated_to_task_id")?;
    Ok(InboxMessage {
        id,
        agent_id,
        content,
        source,
        status,
        slack,
        matched_text,
        delegated_to_task_id,
        response_text: column.take("response_text")?,
        lease_expires_at: column.opt_timestamp("lease_expires_at")?,
        created_at: column.timestamp("created_at")?,
        last_updated_at: column.timestamp("last_updated_at")?,
    })
}
