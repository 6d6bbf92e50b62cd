//! The lead's inbox and the Slack bridge's once-only marks. Every status change is one
//! guarded `UPDATE` (`WHERE status IN (<from>)`); the poll's claim picks its rows
//! `FOR UPDATE SKIP LOCKED`, so concurrent polls of one lead (on any replica) take
//! different messages.

use sqlx::{PgConnection, PgExecutor, PgPool, Row, postgres::PgRow};
use swarm_domain::{
    id::{AgentId, InboxMessageId, TaskId},
    inbox::{
        INBOX_TRIGGER_MAX, InboxChange, InboxMessage, InboxStatus, NewInboxMessage, SlackContext, SlackMark,
    },
    poll::Trigger,
    task::{NewTask, Task},
    time::Timestamp,
};
use swarm_store::{Applied, StoreError, StoreResult};
use uuid::Uuid;

use crate::{
    error::{corrupt, db, vanished},
    events,
    rows::{task_from_row, task_select},
    tasks,
};

macro_rules! message_select {
    () => {
        "SELECT id, agent_id, content, source, status, slack_channel_id, slack_thread_ts, slack_user_id, \
         matched_text, delegated_to_task_id, response_text, lease_expires_at, created_at, last_updated_at \
         FROM inbox_messages"
    };
}

pub(crate) async fn create(
    pool: &PgPool,
    message: &NewInboxMessage,
    now: Timestamp,
) -> StoreResult<InboxMessage> {
    let inserted = sqlx::query(concat!(
        "INSERT INTO inbox_messages (id, agent_id, content, source, status, slack_channel_id, \
             slack_thread_ts, slack_user_id, matched_text, created_at, last_updated_at) \
         VALUES ($1, $2, $3, 'slack', 'unread', $4, $5, $6, $7, $8, $8) RETURNING ",
        "id, agent_id, content, source, status, slack_channel_id, slack_thread_ts, slack_user_id, \
         matched_text, delegated_to_task_id, response_text, lease_expires_at, created_at, last_updated_at"
    ))
    .bind(message.id.as_uuid())
    .bind(message.agent_id.as_uuid())
    .bind(&message.content)
    .bind(message.slack.slack_channel_id.as_deref())
    .bind(message.slack.slack_thread_ts.as_deref())
    .bind(message.slack.slack_user_id.as_deref())
    .bind(message.matched_text.as_deref())
    .bind(now.datetime())
    .try_map(from_row)
    .fetch_one(pool)
    .await;
    match inserted {
        Ok(message) => Ok(message),
        Err(error) if error.as_database_error().is_some_and(|e| e.is_foreign_key_violation()) => {
            Err(StoreError::MissingReference(format!("agentId: agent {} does not exist", message.agent_id)))
        }
        Err(error) => Err(db(error)),
    }
}

pub(crate) async fn get<'e>(
    executor: impl PgExecutor<'e>,
    id: InboxMessageId,
) -> StoreResult<Option<InboxMessage>> {
    sqlx::query(concat!(message_select!(), " WHERE id = $1"))
        .bind(id.as_uuid())
        .try_map(from_row)
        .fetch_optional(executor)
        .await
        .map_err(db)
}

async fn lock(conn: &mut PgConnection, id: InboxMessageId) -> StoreResult<Option<InboxMessage>> {
    sqlx::query(concat!(message_select!(), " WHERE id = $1 FOR NO KEY UPDATE"))
        .bind(id.as_uuid())
        .try_map(from_row)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)
}

pub(crate) async fn list(
    pool: &PgPool,
    agent: AgentId,
    statuses: &[InboxStatus],
    limit: i64,
) -> StoreResult<Vec<InboxMessage>> {
    let statuses: Vec<&str> = statuses.iter().map(InboxStatus::as_str).collect();
    sqlx::query(concat!(
        message_select!(),
        " WHERE agent_id = $1 AND (cardinality($2::text[]) = 0 OR status = ANY($2)) \
          ORDER BY created_at, id LIMIT $3"
    ))
    .bind(agent.as_uuid())
    .bind(&statuses)
    .bind(limit)
    .try_map(from_row)
    .fetch_all(pool)
    .await
    .map_err(db)
}

pub(crate) async fn apply(
    pool: &PgPool,
    id: InboxMessageId,
    change: &InboxChange,
    now: Timestamp,
) -> StoreResult<Applied<InboxMessage>> {
    let mut tx = pool.begin().await.map_err(db)?;
    let Some(before) = lock(&mut tx, id).await? else {
        return Ok(Applied::NotFound);
    };
    let (response_text, task_id) = match change {
        InboxChange::Responded { response_text } => (Some(response_text.as_str()), None),
        InboxChange::Delegated { task_id } => (None, Some(task_id.as_uuid())),
        InboxChange::Read => (None, None),
    };
    let updated = sqlx::query(
        "UPDATE inbox_messages SET status = $1, lease_expires_at = NULL, last_updated_at = $2, \
                response_text = coalesce($3, response_text), \
                delegated_to_task_id = coalesce($4, delegated_to_task_id) \
         WHERE id = $5 AND status IN ('unread', 'processing')",
    )
    .bind(change.to().as_str())
    .bind(now.datetime())
    .bind(response_text)
    .bind(task_id)
    .bind(id.as_uuid())
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    settle(tx, updated.rows_affected(), id, before).await
}

/// Ends a guarded change of one message: refused (rolled back) when its guard matched
/// no row, else committed with the row as it now stands.
async fn settle(
    mut tx: sqlx::Transaction<'_, sqlx::Postgres>,
    rows_changed: u64,
    id: InboxMessageId,
    before: InboxMessage,
) -> StoreResult<Applied<InboxMessage>> {
    if rows_changed == 0 {
        tx.rollback().await.map_err(db)?;
        return Ok(Applied::Refused { current: before });
    }
    let after = get(&mut *tx, id).await?.ok_or_else(|| vanished("inbox message", id))?;
    tx.commit().await.map_err(db)?;
    Ok(Applied::Changed { before, after })
}

/// An operator puts a dead letter back where the poll finds it, with a fresh count.
pub(crate) async fn requeue(
    pool: &PgPool,
    id: InboxMessageId,
    now: Timestamp,
) -> StoreResult<Applied<InboxMessage>> {
    let mut tx = pool.begin().await.map_err(db)?;
    let Some(before) = lock(&mut tx, id).await? else {
        return Ok(Applied::NotFound);
    };
    let updated = sqlx::query(
        "UPDATE inbox_messages SET status = 'unread', deliveries = 0, last_updated_at = $1 \
         WHERE id = $2 AND status = 'dead_letter'",
    )
    .bind(now.datetime())
    .bind(id.as_uuid())
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    settle(tx, updated.rows_affected(), id, before).await
}

pub(crate) async fn delegate(
    pool: &PgPool,
    id: InboxMessageId,
    owner: AgentId,
    task: &NewTask,
    now: Timestamp,
) -> StoreResult<Applied<InboxMessage>> {
    let mut tx = pool.begin().await.map_err(db)?;
    let Some(before) = lock(&mut tx, id).await? else {
        return Ok(Applied::NotFound);
    };
    if before.agent_id != owner || !before.status.is_open() {
        tx.rollback().await.map_err(db)?;
        return Ok(Applied::Refused { current: before });
    }
    tasks::insert(&mut tx, task, now).await.map_err(db)?;
    for event in task.creation_events() {
        events::insert(&mut tx, &event, now).await?;
    }
    let updated = sqlx::query(
        "UPDATE inbox_messages SET status = 'delegated', delegated_to_task_id = $1, \
                lease_expires_at = NULL, last_updated_at = $2 \
         WHERE id = $3 AND agent_id = $4 AND status IN ('unread', 'processing')",
    )
    .bind(task.id.as_uuid())
    .bind(now.datetime())
    .bind(id.as_uuid())
    .bind(owner.as_uuid())
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    if updated.rows_affected() == 0 {
        // The row is locked: its guard cannot have changed since the check above.
        return Err(vanished("open inbox message", id));
    }
    let after = get(&mut *tx, id).await?.ok_or_else(|| vanished("inbox message", id))?;
    tx.commit().await.map_err(db)?;
    Ok(Applied::Changed { before, after })
}

/// The poll's claim: the lead's oldest unread messages → `processing` with a lease.
pub(crate) async fn claim(
    tx: &mut PgConnection,
    agent: AgentId,
    now: Timestamp,
    lease_until: Timestamp,
    runner: Option<Uuid>,
) -> StoreResult<Option<Trigger>> {
    // MATERIALIZED: the pick runs once, so no more than LIMIT rows are claimed.
    let mut messages: Vec<InboxMessage> = sqlx::query(
        "WITH picked AS MATERIALIZED ( \
             SELECT id FROM inbox_messages WHERE agent_id = $1 AND status = 'unread' \
             ORDER BY created_at, id LIMIT $4 FOR UPDATE SKIP LOCKED) \
         UPDATE inbox_messages m SET status = 'processing', lease_expires_at = $3, last_updated_at = $2, \
                                    lease_holder = $5, deliveries = m.deliveries + 1 \
         FROM picked WHERE m.id = picked.id AND m.status = 'unread' \
         RETURNING m.id, m.agent_id, m.content, m.source, m.status, m.slack_channel_id, m.slack_thread_ts, \
                   m.slack_user_id, m.matched_text, m.delegated_to_task_id, m.response_text, \
                   m.lease_expires_at, m.created_at, m.last_updated_at",
    )
    .bind(agent.as_uuid())
    .bind(now.datetime())
    .bind(lease_until.datetime())
    .bind(INBOX_TRIGGER_MAX)
    .bind(runner)
    .try_map(from_row)
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    if messages.is_empty() {
        return Ok(None);
    }
    messages.sort_by_key(|message| (message.created_at, message.id));
    Ok(Some(Trigger::SlackInboxMessage { count: messages.len(), messages }))
}

pub(crate) async fn mark_once(
    pool: &PgPool,
    kind: SlackMark,
    key: &str,
    now: Timestamp,
) -> StoreResult<bool> {
    let inserted = sqlx::query(
        "INSERT INTO slack_marks (kind, key, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
    )
    .bind(kind.as_str())
    .bind(key)
    .bind(now.datetime())
    .execute(pool)
    .await
    .map_err(db)?;
    Ok(inserted.rows_affected() == 1)
}

pub(crate) async fn slack_outcomes_unannounced(
    pool: &PgPool,
    since: Timestamp,
    limit: i64,
) -> StoreResult<Vec<Task>> {
    sqlx::query(concat!(
        task_select!(),
        " WHERE t.slack_channel_id IS NOT NULL AND t.status IN ('completed', 'failed') \
            AND t.finished_at >= $1 \
            AND NOT EXISTS (SELECT 1 FROM slack_marks m WHERE m.kind = 'task_outcome' AND m.key = t.id::text) \
          ORDER BY t.finished_at, t.id LIMIT $2"
    ))
    .bind(since.datetime())
    .bind(limit)
    .try_map(task_from_row)
    .fetch_all(pool)
    .await
    .map_err(db)
}

fn from_row(row: PgRow) -> sqlx::Result<InboxMessage> {
    let status: String = row.try_get("status")?;
    let delegated: Option<Uuid> = row.try_get("delegated_to_task_id")?;
    let lease: Option<chrono::DateTime<chrono::Utc>> = row.try_get("lease_expires_at")?;
    Ok(InboxMessage {
        id: InboxMessageId::from_uuid(row.try_get("id")?),
        agent_id: AgentId::from_uuid(row.try_get("agent_id")?),
        content: row.try_get("content")?,
        source: row.try_get("source")?,
        status: InboxStatus::parse(&status).map_err(|e| corrupt("status", e))?,
        slack: SlackContext {
            slack_channel_id: row.try_get("slack_channel_id")?,
            slack_thread_ts: row.try_get("slack_thread_ts")?,
            slack_user_id: row.try_get("slack_user_id")?,
        },
        matched_text: row.try_get("matched_text")?,
        delegated_to_task_id: delegated.map(TaskId::from_uuid),
        response_text: row.try_get("response_text")?,
        lease_expires_at: lease.map(Timestamp::from_datetime),
        created_at: Timestamp::from_datetime(row.try_get("created_at")?),
        last_updated_at: Timestamp::from_datetime(row.try_get("last_updated_at")?),
    })
}
