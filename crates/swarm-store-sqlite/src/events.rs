//! The event log: appended inside the transaction of the change it records.

use rusqlite::{Connection, Row, params};
use swarm_domain::{
    event::{Event, EventType, NewEvent},
    id::EventId,
    time::Timestamp,
};
use swarm_store::{EventFilter, StoreResult};

use crate::{
    error::{corrupt, db},
    rows::Columns,
    sql::{self, Sql},
};

pub(crate) fn insert(tx: &Connection, event: &NewEvent, now: Timestamp) -> StoreResult<()> {
    let metadata = event.metadata.as_ref().map(serde_json::Value::to_string);
    sql::execute(
        tx,
        "INSERT INTO events (id, event_type, agent_id, task_id, old_value, new_value, metadata, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        params![
            EventId::new_v7().to_string(),
            event.event_type.as_str(),
            event.agent_id.map(|id| id.to_string()),
            event.task_id.map(|id| id.to_string()),
            event.old_value,
            event.new_value,
            metadata,
            now.unix_millis(),
        ],
    )?;
    Ok(())
}

/// Newest first. By agent (and no task), the page comes from two places: the batches in
/// `agent_events`, and the events after the last batch, read by number. Both are read in
/// the caller's snapshot, so an event is in exactly one of them.
pub(crate) fn list(connection: &Connection, filter: &EventFilter) -> StoreResult<Vec<Event>> {
    let limit = filter.limit.max(0);
    let Some(agent_id) = filter.agent_id.filter(|_| filter.task_id.is_none()) else {
        let mut query = Sql::new(&format!("SELECT {COLUMNS} FROM events WHERE "));
        push_known_kinds(&mut query);
        if let Some(agent_id) = filter.agent_id {
            query.push(" AND agent_id = ").bind(agent_id.to_string());
        }
        if let Some(task_id) = filter.task_id {
            query.push(" AND task_id = ").bind(task_id.to_string());
        }
        query.push(" ORDER BY created_at DESC, id DESC LIMIT ").bind(limit);
        return query.all(connection, from_row);
    };
    let indexed_through: i64 = sql::scalar(connection, "SELECT through_seq FROM agent_events_indexed", [])?;

    // NOT INDEXED keeps SQLite on the rowid range (the few events after the last batch):
    // otherwise it may walk the whole log by time to spare itself the sort, which on an
    // agent with nothing in the range reads every event (15 ms for 240,000).
    let mut latest = Sql::new(&format!("SELECT {COLUMNS} FROM events NOT INDEXED WHERE seq > "));
    latest.bind(indexed_through).push(" AND agent_id = ").bind(agent_id.to_string()).push(" AND ");
    push_known_kinds(&mut latest);
    latest.push(" ORDER BY created_at DESC, id DESC LIMIT ").bind(limit);
    let mut events = latest.all(connection, from_row)?;

    let mut batched = Sql::new(&format!(
        "SELECT {JOINED_COLUMNS} FROM agent_events a CROSS JOIN events e ON e.seq = a.event_seq
         WHERE a.agent_id = "
    ));
    batched.bind(agent_id.to_string()).push(" AND e.");
    push_known_kinds(&mut batched);
    batched.push(" ORDER BY a.created_at DESC, e.id DESC LIMIT ").bind(limit);
    events.extend(batched.all(connection, from_row)?);

    events.sort_by_key(|event| std::cmp::Reverse((event.created_at, event.id)));
    events.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok(events)
}

const COLUMNS: &str = "id, event_type, agent_id, task_id, old_value, new_value, metadata, created_at";
const JOINED_COLUMNS: &str =
    "e.id, e.event_type, e.agent_id, e.task_id, e.old_value, e.new_value, e.metadata, e.created_at";

/// Kinds written by a newer swarm sharing the file are left out rather than failing the
/// whole page; the domain has no generic kind to read them as.
fn push_known_kinds(query: &mut Sql) {
    query
        .push("event_type IN (")
        .bind_list(EventType::ALL.iter().map(|kind| kind.as_str().to_string()))
        .push(")");
}

/// Events per batch at most, so that a batch after a long pause (or the first after an
/// upgrade) holds the writer for milliseconds, not seconds. It is more than a busy hub
/// logs between two batches.
const AGENT_EVENTS_BATCH: i64 = 50_000;

/// Copy the events logged since the last batch into `agent_events`, in one transaction
/// of its own; whether every event is in now (`false`: the batch stopped at its size and
/// another should follow). Runs on the writer, between groups (`database::run_writer`).
/// Another process on the same file may run it too: the write lock orders the batches,
/// and each starts where the last one ended.
pub(crate) fn index_agent_events(writer: &Connection) -> StoreResult<bool> {
    let through: i64 = sql::scalar(writer, "SELECT through_seq FROM agent_events_indexed", [])?;
    let newest: i64 = sql::scalar(writer, "SELECT coalesce(max(seq), 0) FROM events", [])?;
    if newest <= through {
        return Ok(true);
    }
    writer.execute_batch("BEGIN IMMEDIATE").map_err(db)?;
    let batch = (|| -> StoreResult<bool> {
        // Read again under the write lock: another process may have run a batch.
        let from: i64 = sql::scalar(writer, "SELECT through_seq FROM agent_events_indexed", [])?;
        let newest: i64 = sql::scalar(writer, "SELECT coalesce(max(seq), 0) FROM events", [])?;
        let to = newest.min(from.saturating_add(AGENT_EVENTS_BATCH));
        sql::execute(
            writer,
            "INSERT OR IGNORE INTO agent_events (agent_id, created_at, event_seq)
             SELECT agent_id, created_at, seq FROM events
             WHERE seq > ?1 AND seq <= ?2 AND agent_id IS NOT NULL",
            params![from, to],
        )?;
        sql::execute(
            writer,
            "UPDATE agent_events_indexed SET through_seq = ?1 WHERE through_seq < ?1",
            [to],
        )?;
        Ok(to == newest)
    })();
    let end = if batch.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let ended = writer.execute_batch(end).map_err(db);
    if ended.is_err() && !writer.is_autocommit() {
        let _ = writer.execute_batch("ROLLBACK");
    }
    batch.and_then(|caught_up| ended.map(|()| caught_up))
}

fn from_row(row: &Row<'_>) -> StoreResult<Event> {
    let mut column = Columns::new(row);
    let id: String = column.take("id")?;
    let event_type: String = column.take("event_type")?;
    let agent_id = column.opt_agent_id("agent_id")?;
    let task_id = column.opt_task_id("task_id")?;
    let old_value = column.take("old_value")?;
    let new_value = column.take("new_value")?;
    let metadata = column
        .take::<Option<String>>("metadata")?
        .map(|text| serde_json::from_str(&text))
        .transpose()
        .map_err(|error| corrupt(format!("event {id} has metadata that is not JSON: {error}")))?;
    Ok(Event {
        id: EventId::parse(&id).map_err(|error| corrupt(error.0))?,
        event_type: EventType::parse(&event_type)
            .ok_or_else(|| corrupt(format!("event {id} has an unknown type {event_type:?}")))?,
        agent_id,
        task_id,
        old_value,
        new_value,
        metadata,
        created_at: column.timestamp("created_at")?,
    })
}
