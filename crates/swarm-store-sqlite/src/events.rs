//! The event log: appended inside the transaction of the change it records.

use sqlx::{QueryBuilder, Sqlite, SqliteConnection, SqlitePool, sqlite::SqliteRow};
use swarm_domain::{
    event::{Event, EventType, NewEvent},
    id::EventId,
    time::Timestamp,
};
use swarm_store::{EventFilter, StoreResult};

use crate::decode::{column, corrupt, db, get_opt_agent_id, get_opt_task_id, get_timestamp};

pub(crate) async fn insert(conn: &mut SqliteConnection, event: &NewEvent, now: Timestamp) -> StoreResult<()> {
    let metadata = event.metadata.as_ref().map(serde_json::Value::to_string);
    sqlx::query(
        "INSERT INTO events (id, event_type, agent_id, task_id, old_value, new_value, metadata, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(EventId::new_v7().to_string())
    .bind(event.event_type.as_str())
    .bind(event.agent_id.map(|id| id.to_string()))
    .bind(event.task_id.map(|id| id.to_string()))
    .bind(event.old_value.as_deref())
    .bind(event.new_value.as_deref())
    .bind(metadata)
    .bind(now.unix_millis())
    .execute(conn)
    .await
    .map_err(db)?;
    Ok(())
}

pub(crate) async fn list(pool: &SqlitePool, filter: &EventFilter) -> StoreResult<Vec<Event>> {
    let mut query = QueryBuilder::<Sqlite>::new(
        "SELECT id, event_type, agent_id, task_id, old_value, new_value, metadata, created_at
         FROM events WHERE event_type IN (",
    );
    // Kinds written by a newer swarm sharing the file are left out rather than failing
    // the whole page; the domain has no generic kind to read them as.
    let mut kinds = query.separated(", ");
    for kind in EventType::ALL {
        kinds.push_bind(kind.as_str());
    }
    query.push(")");
    if let Some(agent_id) = filter.agent_id {
        query.push(" AND agent_id = ").push_bind(agent_id.to_string());
    }
    if let Some(task_id) = filter.task_id {
        query.push(" AND task_id = ").push_bind(task_id.to_string());
    }
    query.push(" ORDER BY created_at DESC, id DESC LIMIT ").push_bind(filter.limit.max(0));
    let rows = query.build().fetch_all(pool).await.map_err(db)?;
    rows.iter().map(from_row).collect()
}

fn from_row(row: &SqliteRow) -> StoreResult<Event> {
    let id: String = column(row, "id")?;
    let event_type: String = column(row, "event_type")?;
    let metadata = column::<Option<String>>(row, "metadata")?
        .map(|text| serde_json::from_str(&text))
        .transpose()
        .map_err(|error| corrupt(format!("event {id} has metadata that is not JSON: {error}")))?;
    Ok(Event {
        id: EventId::parse(&id).map_err(|error| corrupt(error.0))?,
        event_type: EventType::parse(&event_type)
            .ok_or_else(|| corrupt(format!("event {id} has an unknown type {event_type:?}")))?,
        agent_id: get_opt_agent_id(row, "agent_id")?,
        task_id: get_opt_task_id(row, "task_id")?,
        old_value: column(row, "old_value")?,
        new_value: column(row, "new_value")?,
        metadata,
        created_at: get_timestamp(row, "created_at")?,
    })
}
