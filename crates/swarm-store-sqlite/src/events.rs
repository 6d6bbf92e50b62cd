//! The event log: appended inside the transaction of the change it records.

use rusqlite::{Connection, Row, params};
use swarm_domain::{
    event::{Event, EventType, NewEvent},
    id::EventId,
    time::Timestamp,
};
use swarm_store::{EventFilter, StoreResult};

use crate::{
    decode::{Columns, corrupt},
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

pub(crate) fn list(connection: &Connection, filter: &EventFilter) -> StoreResult<Vec<Event>> {
    let mut query = Sql::new(
        "SELECT id, event_type, agent_id, task_id, old_value, new_value, metadata, created_at
         FROM events WHERE event_type IN (",
    );
    // Kinds written by a newer swarm sharing the file are left out rather than failing
    // the whole page; the domain has no generic kind to read them as.
    query.bind_list(EventType::ALL.iter().map(|kind| kind.as_str().to_string())).push(")");
    if let Some(agent_id) = filter.agent_id {
        query.push(" AND agent_id = ").bind(agent_id.to_string());
    }
    if let Some(task_id) = filter.task_id {
        query.push(" AND task_id = ").bind(task_id.to_string());
    }
    query.push(" ORDER BY created_at DESC, id DESC LIMIT ").bind(filter.limit.max(0));
    query.all(connection, from_row)
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
