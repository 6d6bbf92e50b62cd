//! Channels (agent chat). A post writes the message, its mention rows, the mentioned
//! agents' unread counts and any `/task` tasks in one transaction; the `unread_mentions`
//! claim is one guarded `UPDATE` of the read state (a concurrent claim of the same row
//! waits for the first, then finds `processing_since` set and skips it).

use sqlx::{PgConnection, PgExecutor, PgPool, Row, postgres::PgRow};
use swarm_domain::{
    chat::{Channel, ChannelType, ChatMessage, MessageQuery, NewChannel, NewChatMessage},
    id::{AgentId, ChannelId, ChatMessageId},
    poll::Trigger,
    time::Timestamp,
};
use swarm_store::{StoreError, StoreResult};
use uuid::Uuid;

use crate::{
    error::{corrupt, db, vanished},
    events, tasks,
};

macro_rules! channel_select {
    () => {
        "SELECT id, name, description, type, created_by, participants, created_at FROM channels"
    };
}
macro_rules! message_select {
    () => {
        "SELECT id, channel_id, agent_id, content, reply_to_id, mentions, task_ids, created_at FROM chat_messages"
    };
}
macro_rules! messages_where {
    () => {
        " WHERE channel_id = $1 \
           AND ($2::timestamptz IS NULL OR created_at > $2) \
           AND ($3::timestamptz IS NULL OR created_at < $3) \
           AND ($4::uuid IS NULL OR id IN \
                (SELECT message_id FROM chat_mentions WHERE agent_id = $4 AND channel_id = $1))"
    };
}
const MENTIONS_PER_TRIGGER: i64 = 50;

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "[]".into())
}

/// A foreign key that failed, said in the caller's words.
fn missing(error: sqlx::Error, what: impl Into<String>) -> StoreError {
    match db(error) {
        StoreError::MissingReference(_) => StoreError::MissingReference(what.into()),
        other => other,
    }
}

pub(crate) async fn channel_create(
    pool: &PgPool,
    channel: &NewChannel,
    now: Timestamp,
) -> StoreResult<Channel> {
    let mut tx = pool.begin().await.map_err(db)?;
    let inserted = sqlx::query(
        "INSERT INTO channels (id, name, description, type, created_by, participants, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (name) DO NOTHING",
    )
    .bind(channel.id.as_uuid())
    .bind(&channel.name)
    .bind(channel.description.as_deref())
    .bind(channel.channel_type.as_str())
    .bind(channel.created_by.map(|id| id.as_uuid()))
    .bind(json(&channel.participants))
    .bind(now.datetime())
    .execute(&mut *tx)
    .await
    .map_err(|error| missing(error, "createdBy: no such agent"))?;
    if inserted.rows_affected() == 0 {
        return Err(StoreError::Conflict(format!("a channel named {:?} exists", channel.name)));
    }
    for participant in &channel.participants {
        sqlx::query(
            "INSERT INTO channel_reads (agent_id, channel_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        )
        .bind(participant.as_uuid())
        .bind(channel.id.as_uuid())
        .execute(&mut *tx)
        .await
        .map_err(|error| missing(error, format!("participants: agent {participant} does not exist")))?;
    }
    let created = channel_get(&mut *tx, channel.id).await?.ok_or_else(|| vanished("channel", channel.id))?;
    tx.commit().await.map_err(db)?;
    Ok(created)
}

pub(crate) async fn channel_get<'e>(
    executor: impl PgExecutor<'e>,
    id: ChannelId,
) -> StoreResult<Option<Channel>> {
    sqlx::query(concat!(channel_select!(), " WHERE id = $1"))
        .bind(id.as_uuid())
        .try_map(channel_from_row)
        .fetch_optional(executor)
        .await
        .map_err(db)
}

pub(crate) async fn channel_list(pool: &PgPool) -> StoreResult<Vec<Channel>> {
    sqlx::query(concat!(channel_select!(), " ORDER BY name"))
        .try_map(channel_from_row)
        .fetch_all(pool)
        .await
        .map_err(db)
}

pub(crate) async fn post(
    pool: &PgPool,
    message: &NewChatMessage,
    now: Timestamp,
) -> StoreResult<ChatMessage> {
    let mut tx = pool.begin().await.map_err(db)?;
    if channel_get(&mut *tx, message.channel_id).await?.is_none() {
        return Err(StoreError::MissingReference(format!("channel {} does not exist", message.channel_id)));
    }
    let task_ids: Vec<_> = message.tasks.iter().map(|task| task.id).collect();
    sqlx::query(
        "INSERT INTO chat_messages (id, channel_id, agent_id, content, reply_to_id, mentions, task_ids, \
             created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(message.id.as_uuid())
    .bind(message.channel_id.as_uuid())
    .bind(message.agent_id.map(|id| id.as_uuid()))
    .bind(&message.content)
    .bind(message.reply_to_id.map(|id| id.as_uuid()))
    .bind(json(&message.mentions))
    .bind(json(&task_ids))
    .bind(now.datetime())
    .execute(&mut *tx)
    .await
    .map_err(|error| missing(error, "agentId or replyToId: no such agent or message"))?;
    for agent in &message.mentions {
        let what = format!("mentions: agent {agent} does not exist");
        sqlx::query(
            "INSERT INTO chat_mentions (agent_id, channel_id, message_id, created_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(agent.as_uuid())
        .bind(message.channel_id.as_uuid())
        .bind(message.id.as_uuid())
        .bind(now.datetime())
        .execute(&mut *tx)
        .await
        .map_err(|error| missing(error, what.clone()))?;
        sqlx::query(
            "INSERT INTO channel_reads (agent_id, channel_id, unread_mentions) VALUES ($1, $2, 1) \
             ON CONFLICT (agent_id, channel_id) DO UPDATE SET unread_mentions = channel_reads.unread_mentions + 1",
        )
        .bind(agent.as_uuid())
        .bind(message.channel_id.as_uuid())
        .execute(&mut *tx)
        .await
        .map_err(|error| missing(error, what))?;
    }
    for task in &message.tasks {
        tasks::insert(&mut tx, task, now).await.map_err(db)?;
        for event in task.creation_events() {
            events::insert(&mut tx, &event, now).await?;
        }
    }
    let posted = message_get(&mut *tx, message.id).await?.ok_or_else(|| vanished("message", message.id))?;
    tx.commit().await.map_err(db)?;
    Ok(posted)
}

pub(crate) async fn message_get<'e>(
    executor: impl PgExecutor<'e>,
    id: ChatMessageId,
) -> StoreResult<Option<ChatMessage>> {
    sqlx::query(concat!(message_select!(), " WHERE id = $1"))
        .bind(id.as_uuid())
        .try_map(message_from_row)
        .fetch_optional(executor)
        .await
        .map_err(db)
}

pub(crate) async fn messages(
    pool: &PgPool,
    channel: ChannelId,
    query: &MessageQuery,
) -> StoreResult<Vec<ChatMessage>> {
    let oldest_first = query.since.is_some();
    let sql = if oldest_first {
        concat!(message_select!(), messages_where!(), " ORDER BY created_at, id LIMIT $5")
    } else {
        concat!(message_select!(), messages_where!(), " ORDER BY created_at DESC, id DESC LIMIT $5")
    };
    let mut found = sqlx::query(sql)
        .bind(channel.as_uuid())
        .bind(query.since.map(|t| t.datetime()))
        .bind(query.before.map(|t| t.datetime()))
        .bind(query.mentioning.map(|id| id.as_uuid()))
        .bind(query.limit)
        .try_map(message_from_row)
        .fetch_all(pool)
        .await
        .map_err(db)?;
    if !oldest_first {
        found.reverse();
    }
    Ok(found)
}

pub(crate) async fn thread(pool: &PgPool, root: ChatMessageId) -> StoreResult<Vec<ChatMessage>> {
    sqlx::query(concat!(message_select!(), " WHERE id = $1 OR reply_to_id = $1 ORDER BY created_at, id"))
        .bind(root.as_uuid())
        .try_map(message_from_row)
        .fetch_all(pool)
        .await
        .map_err(db)
}

pub(crate) async fn last_read(
    pool: &PgPool,
    agent: AgentId,
    channel: ChannelId,
) -> StoreResult<Option<Timestamp>> {
    let row: Option<(Option<chrono::DateTime<chrono::Utc>>,)> =
        sqlx::query_as("SELECT last_read_at FROM channel_reads WHERE agent_id = $1 AND channel_id = $2")
            .bind(agent.as_uuid())
            .bind(channel.as_uuid())
            .fetch_optional(pool)
            .await
            .map_err(db)?;
    Ok(row.and_then(|(at,)| at).map(Timestamp::from_datetime))
}

pub(crate) async fn mark_read(
    pool: &PgPool,
    agent: AgentId,
    channel: ChannelId,
    up_to: Timestamp,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO channel_reads (agent_id, channel_id, last_read_at) VALUES ($1, $2, $3) \
         ON CONFLICT (agent_id, channel_id) DO UPDATE SET \
             last_read_at = greatest(coalesce(channel_reads.last_read_at, $3), $3), \
             processing_since = NULL, lease_expires_at = NULL, \
             unread_mentions = (SELECT count(*) FROM chat_mentions m \
                 WHERE m.agent_id = $1 AND m.channel_id = $2 \
                   AND m.created_at > greatest(coalesce(channel_reads.last_read_at, $3), $3))",
    )
    .bind(agent.as_uuid())
    .bind(channel.as_uuid())
    .bind(up_to.datetime())
    .execute(pool)
    .await
    .map_err(|error| missing(error, format!("no agent {agent} or channel {channel}")))?;
    Ok(())
}

pub(crate) async fn unread_mentions(pool: &PgPool, agent: AgentId) -> StoreResult<Vec<(ChannelId, i64)>> {
    let rows: Vec<(Uuid, i32)> = sqlx::query_as(
        "SELECT channel_id, unread_mentions FROM channel_reads WHERE agent_id = $1 AND unread_mentions > 0 \
         ORDER BY channel_id",
    )
    .bind(agent.as_uuid())
    .fetch_all(pool)
    .await
    .map_err(db)?;
    Ok(rows.into_iter().map(|(id, count)| (ChannelId::from_uuid(id), i64::from(count))).collect())
}

pub(crate) async fn claim(
    tx: &mut PgConnection,
    agent: AgentId,
    now: Timestamp,
    lease_until: Timestamp,
    runner: Option<Uuid>,
) -> StoreResult<Option<Trigger>> {
    let claimed: Vec<(Uuid,)> = sqlx::query_as(
        "UPDATE channel_reads SET processing_since = $2, lease_expires_at = $3, lease_holder = $4, \
                                  deliveries = deliveries + 1 \
         WHERE agent_id = $1 AND unread_mentions > 0 AND processing_since IS NULL \
           AND dead_lettered_at IS NULL RETURNING channel_id",
    )
    .bind(agent.as_uuid())
    .bind(now.datetime())
    .bind(lease_until.datetime())
    .bind(runner)
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    if claimed.is_empty() {
        return Ok(None);
    }
    let mut channel_ids: Vec<ChannelId> = claimed.into_iter().map(|(id,)| ChannelId::from_uuid(id)).collect();
    channel_ids.sort();
    let mut messages = Vec::new();
    for channel in &channel_ids {
        let found = sqlx::query(concat!(
            message_select!(),
            " WHERE id IN ( \
                 SELECT m.message_id FROM chat_mentions m JOIN channel_reads r \
                     ON r.agent_id = m.agent_id AND r.channel_id = m.channel_id \
                 WHERE m.agent_id = $1 AND m.channel_id = $2 \
                   AND (r.last_read_at IS NULL OR m.created_at > r.last_read_at)) \
             ORDER BY created_at, id LIMIT $3"
        ))
        .bind(agent.as_uuid())
        .bind(channel.as_uuid())
        .bind(MENTIONS_PER_TRIGGER)
        .try_map(message_from_row)
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
        messages.extend(found);
    }
    messages.sort_by_key(|message| (message.created_at, message.id));
    Ok(Some(Trigger::UnreadMentions {
        mentions_count: messages.len(),
        claimed_channels: channel_ids,
        messages,
    }))
}

fn parse_json<T: serde::de::DeserializeOwned>(column: &str, text: &str) -> sqlx::Result<T> {
    serde_json::from_str(text).map_err(|error| corrupt(column, error))
}

fn channel_from_row(row: PgRow) -> sqlx::Result<Channel> {
    let channel_type: String = row.try_get("type")?;
    let created_by: Option<Uuid> = row.try_get("created_by")?;
    let participants: String = row.try_get("participants")?;
    Ok(Channel {
        id: ChannelId::from_uuid(row.try_get("id")?),
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        channel_type: ChannelType::parse(&channel_type).map_err(|e| corrupt("type", e))?,
        created_by: created_by.map(AgentId::from_uuid),
        participants: parse_json("participants", &participants)?,
        created_at: Timestamp::from_datetime(row.try_get("created_at")?),
    })
}

fn message_from_row(row: PgRow) -> sqlx::Result<ChatMessage> {
    let agent_id: Option<Uuid> = row.try_get("agent_id")?;
    let reply_to_id: Option<Uuid> = row.try_get("reply_to_id")?;
    let mentions: String = row.try_get("mentions")?;
    let task_ids: String = row.try_get("task_ids")?;
    Ok(ChatMessage {
        id: ChatMessageId::from_uuid(row.try_get("id")?),
        channel_id: ChannelId::from_uuid(row.try_get("channel_id")?),
        agent_id: agent_id.map(AgentId::from_uuid),
        content: row.try_get("content")?,
        reply_to_id: reply_to_id.map(ChatMessageId::from_uuid),
        mentions: parse_json("mentions", &mentions)?,
        task_ids: parse_json("task_ids", &task_ids)?,
        created_at: Timestamp::from_datetime(row.try_get("created_at")?),
    })
}
