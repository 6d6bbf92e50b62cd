//! Channels (agent chat). A post writes the message, its mention rows, the mentioned
//! agents' unread counts and any `/task` tasks on the writer connection, in one
//! transaction; the `unread_mentions` claim is one guarded `UPDATE` of the read state.

use rusqlite::{Connection, Row, params};
use swarm_domain::{
    chat::{Channel, ChannelType, ChatMessage, MessageQuery, NewChannel, NewChatMessage},
    id::{AgentId, ChannelId, ChatMessageId},
    poll::Trigger,
    time::Timestamp,
};
use swarm_store::{StoreError, StoreResult};

use crate::{
    error::{corrupt, db, is_foreign_key_violation},
    rows::{Columns, timestamp},
    sql::{self, Sql},
    tasks,
};

const SELECT_CHANNEL: &str =
    "SELECT id, name, description, type, created_by, participants, created_at FROM channels";
const SELECT_MESSAGE: &str = "SELECT id, channel_id, agent_id, content, reply_to_id, mentions, task_ids, created_at FROM chat_messages";
/// At most this many mentioning messages are handed over in one `unread_mentions` trigger.
const MENTIONS_PER_TRIGGER: i64 = 50;

fn json<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|error| corrupt(error.to_string()))
}

pub(crate) fn channel_create(tx: &Connection, channel: &NewChannel, now: Timestamp) -> StoreResult<Channel> {
    let inserted = sql::execute(
        tx,
        "INSERT INTO channels (id, name, description, type, created_by, participants, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (name) DO NOTHING",
        params![
            channel.id.to_string(),
            channel.name,
            channel.description,
            channel.channel_type.as_str(),
            channel.created_by.map(|id| id.to_string()),
            json(&channel.participants)?,
            now.unix_millis(),
        ],
    );
    match inserted {
        Ok(0) => return Err(StoreError::Conflict(format!("a channel named {:?} exists", channel.name))),
        Ok(_) => {}
        Err(error) => return Err(error),
    }
    for participant in &channel.participants {
        // A participant must be an agent: checked by the foreign key of its read state.
        let created = tx.execute(
            "INSERT INTO channel_reads (agent_id, channel_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            params![participant.to_string(), channel.id.to_string()],
        );
        match created {
            Ok(_) => {}
            Err(error) if is_foreign_key_violation(&error) => {
                return Err(StoreError::MissingReference(format!(
                    "participants: agent {participant} does not exist"
                )));
            }
            Err(error) => return Err(db(error)),
        }
    }
    channel_get(tx, channel.id)?.ok_or_else(|| corrupt(format!("channel {} vanished", channel.id)))
}

pub(crate) fn channel_get(connection: &Connection, id: ChannelId) -> StoreResult<Option<Channel>> {
    sql::optional(connection, &format!("{SELECT_CHANNEL} WHERE id = ?"), [id.to_string()], channel_from_row)
}

pub(crate) fn channel_list(connection: &Connection) -> StoreResult<Vec<Channel>> {
    sql::all(connection, &format!("{SELECT_CHANNEL} ORDER BY name"), [], channel_from_row)
}

pub(crate) fn post(tx: &Connection, message: &NewChatMessage, now: Timestamp) -> StoreResult<ChatMessage> {
    let missing = |what: String| StoreError::MissingReference(what);
    if channel_get(tx, message.channel_id)?.is_none() {
        return Err(missing(format!("channel {} does not exist", message.channel_id)));
    }
    let task_ids: Vec<_> = message.tasks.iter().map(|task| task.id).collect();
    let inserted = tx.execute(
        "INSERT INTO chat_messages (id, channel_id, agent_id, content, reply_to_id, mentions, task_ids,
             created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            message.id.to_string(),
            message.channel_id.to_string(),
            message.agent_id.map(|id| id.to_string()),
            message.content,
            message.reply_to_id.map(|id| id.to_string()),
            json(&message.mentions)?,
            json(&task_ids)?,
            now.unix_millis(),
        ],
    );
    match inserted {
        Ok(_) => {}
        Err(error) if is_foreign_key_violation(&error) => {
            return Err(missing("agentId or replyToId: no such agent or message".into()));
        }
        Err(error) => return Err(db(error)),
    }
    for agent in &message.mentions {
        let mentioned = tx
            .execute(
                "INSERT INTO chat_mentions (agent_id, channel_id, message_id, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![agent.to_string(), message.channel_id.to_string(), message.id.to_string(), now.unix_millis()],
            )
            .and_then(|_| {
                tx.execute(
                    "INSERT INTO channel_reads (agent_id, channel_id, unread_mentions) VALUES (?1, ?2, 1)
                     ON CONFLICT (agent_id, channel_id)
                     DO UPDATE SET unread_mentions = channel_reads.unread_mentions + 1",
                    params![agent.to_string(), message.channel_id.to_string()],
                )
            });
        match mentioned {
            Ok(_) => {}
            Err(error) if is_foreign_key_violation(&error) => {
                return Err(missing(format!("mentions: agent {agent} does not exist")));
            }
            Err(error) => return Err(db(error)),
        }
    }
    for task in &message.tasks {
        tasks::create(tx, task, now)?;
    }
    message_get(tx, message.id)?.ok_or_else(|| corrupt(format!("message {} vanished", message.id)))
}

pub(crate) fn message_get(connection: &Connection, id: ChatMessageId) -> StoreResult<Option<ChatMessage>> {
    sql::optional(connection, &format!("{SELECT_MESSAGE} WHERE id = ?"), [id.to_string()], message_from_row)
}

pub(crate) fn messages(
    connection: &Connection,
    channel: ChannelId,
    query: &MessageQuery,
) -> StoreResult<Vec<ChatMessage>> {
    let mut sql = Sql::default();
    sql.push(SELECT_MESSAGE);
    sql.push(" WHERE channel_id = ");
    sql.bind(channel.to_string());
    if let Some(since) = query.since {
        sql.push(" AND created_at > ");
        sql.bind(since.unix_millis());
    }
    if let Some(before) = query.before {
        sql.push(" AND created_at < ");
        sql.bind(before.unix_millis());
    }
    if let Some(agent) = query.mentioning {
        sql.push(" AND id IN (SELECT message_id FROM chat_mentions WHERE agent_id = ");
        sql.bind(agent.to_string());
        sql.push(" AND channel_id = ");
        sql.bind(channel.to_string());
        sql.push(")");
    }
    let oldest_first = query.since.is_some();
    sql.push(if oldest_first {
        " ORDER BY created_at, id LIMIT "
    } else {
        " ORDER BY created_at DESC, id DESC LIMIT "
    });
    sql.bind(query.limit);
    let mut found = sql.all(connection, message_from_row)?;
    if !oldest_first {
        found.reverse();
    }
    Ok(found)
}

pub(crate) fn thread(connection: &Connection, root: ChatMessageId) -> StoreResult<Vec<ChatMessage>> {
    sql::all(
        connection,
        &format!("{SELECT_MESSAGE} WHERE id = ?1 OR reply_to_id = ?1 ORDER BY created_at, id"),
        [root.to_string()],
        message_from_row,
    )
}

pub(crate) fn last_read(
    connection: &Connection,
    agent: AgentId,
    channel: ChannelId,
) -> StoreResult<Option<Timestamp>> {
    let millis: Option<Option<i64>> = sql::optional(
        connection,
        "SELECT last_read_at FROM channel_reads WHERE agent_id = ?1 AND channel_id = ?2",
        params![agent.to_string(), channel.to_string()],
        |row| row.get(0).map_err(db),
    )?;
    millis.flatten().map(timestamp).transpose()
}

pub(crate) fn mark_read(
    tx: &Connection,
    agent: AgentId,
    channel: ChannelId,
    up_to: Timestamp,
) -> StoreResult<()> {
    let marked = tx.execute(
        "INSERT INTO channel_reads (agent_id, channel_id, last_read_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (agent_id, channel_id) DO UPDATE SET
             last_read_at = max(coalesce(channel_reads.last_read_at, ?3), ?3),
             processing_since = NULL, lease_expires_at = NULL",
        params![agent.to_string(), channel.to_string(), up_to.unix_millis()],
    );
    match marked {
        Ok(_) => {}
        Err(error) if is_foreign_key_violation(&error) => {
            return Err(StoreError::MissingReference(format!("no agent {agent} or channel {channel}")));
        }
        Err(error) => return Err(db(error)),
    }
    sql::execute(
        tx,
        "UPDATE channel_reads SET unread_mentions = (
             SELECT count(*) FROM chat_mentions m
             WHERE m.agent_id = ?1 AND m.channel_id = ?2 AND m.created_at > channel_reads.last_read_at)
         WHERE agent_id = ?1 AND channel_id = ?2",
        params![agent.to_string(), channel.to_string()],
    )?;
    Ok(())
}

pub(crate) fn unread_mentions(connection: &Connection, agent: AgentId) -> StoreResult<Vec<(ChannelId, i64)>> {
    sql::all(
        connection,
        "SELECT channel_id, unread_mentions FROM channel_reads WHERE agent_id = ? AND unread_mentions > 0
         ORDER BY channel_id",
        [agent.to_string()],
        |row| {
            let mut column = Columns::new(row);
            let id: String = column.take("channel_id")?;
            let id = ChannelId::parse(&id).map_err(|error| corrupt(error.0))?;
            Ok((id, column.take("unread_mentions")?))
        },
    )
}

/// The poll's claim: every channel where the agent has unread mentions and no claim.
pub(crate) fn claim(
    tx: &Connection,
    agent: AgentId,
    now: Timestamp,
    lease_until: Timestamp,
    runner: Option<&str>,
) -> StoreResult<Option<Trigger>> {
    let channel_ids: Vec<ChannelId> = sql::all(
        tx,
        "UPDATE channel_reads SET processing_since = ?2, lease_expires_at = ?3, lease_holder = ?4,
                                  deliveries = deliveries + 1
         WHERE agent_id = ?1 AND unread_mentions > 0 AND processing_since IS NULL
           AND dead_lettered_at IS NULL
         RETURNING channel_id",
        params![agent.to_string(), now.unix_millis(), lease_until.unix_millis(), runner],
        |row| {
            let text: String = row.get(0).map_err(db)?;
            ChannelId::parse(&text).map_err(|error| corrupt(error.0))
        },
    )?;
    if channel_ids.is_empty() {
        return Ok(None);
    }
    let mut messages = Vec::new();
    for channel in &channel_ids {
        messages.extend(sql::all(
            tx,
            &format!(
                "{SELECT_MESSAGE} WHERE id IN (
                     SELECT m.message_id FROM chat_mentions m JOIN channel_reads r
                         ON r.agent_id = m.agent_id AND r.channel_id = m.channel_id
                     WHERE m.agent_id = ?1 AND m.channel_id = ?2
                       AND m.created_at > coalesce(r.last_read_at, -1))
                 ORDER BY created_at, id LIMIT ?3"
            ),
            params![agent.to_string(), channel.to_string(), MENTIONS_PER_TRIGGER],
            message_from_row,
        )?);
    }
    messages.sort_by_key(|message| (message.created_at, message.id));
    let mut channel_ids = channel_ids;
    channel_ids.sort();
    Ok(Some(Trigger::UnreadMentions {
        mentions_count: messages.len(),
        claimed_channels: channel_ids,
        messages,
    }))
}

fn parse_json<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|error| corrupt(format!("{what}: {error}")))
}

fn channel_from_row(row: &Row<'_>) -> StoreResult<Channel> {
    let mut column = Columns::new(row);
    let id: String = column.take("id")?;
    let id = ChannelId::parse(&id).map_err(|error| corrupt(error.0))?;
    let name = column.take("name")?;
    let description = column.take("description")?;
    let channel_type: String = column.take("type")?;
    let created_by: Option<String> = column.take("created_by")?;
    let participants: String = column.take("participants")?;
    Ok(Channel {
        id,
        name,
        description,
        channel_type: ChannelType::parse(&channel_type).map_err(|error| corrupt(error.0))?,
        created_by: created_by
            .map(|text| AgentId::parse(&text))
            .transpose()
            .map_err(|error| corrupt(error.0))?,
        participants: parse_json("participants", &participants)?,
        created_at: column.timestamp("created_at")?,
    })
}

fn message_from_row(row: &Row<'_>) -> StoreResult<ChatMessage> {
    let mut column = Columns::new(row);
    let id: String = column.take("id")?;
    let channel_id: String = column.take("channel_id")?;
    let agent_id: Option<String> = column.take("agent_id")?;
    let content = column.take("content")?;
    let reply_to_id: Option<String> = column.take("reply_to_id")?;
    let mentions: String = column.take("mentions")?;
    let task_ids: String = column.take("task_ids")?;
    let bad = |error: swarm_domain::Invalid| corrupt(error.0);
    Ok(ChatMessage {
        id: ChatMessageId::parse(&id).map_err(bad)?,
        channel_id: ChannelId::parse(&channel_id).map_err(bad)?,
        agent_id: agent_id.map(|text| AgentId::parse(&text)).transpose().map_err(bad)?,
        content,
        reply_to_id: reply_to_id.map(|text| ChatMessageId::parse(&text)).transpose().map_err(bad)?,
        mentions: parse_json("mentions", &mentions)?,
        task_ids: parse_json("task_ids", &task_ids)?,
        created_at: column.timestamp("created_at")?,
    })
}
