//! The event log: appended inside the transaction of the change it records.

use sqlx::{PgConnection, PgPool, Postgres, QueryBuilder};
use swarm_domain::{
    event::{Event, EventType, NewEvent},
    id::EventId,
    time::Timestamp,
};
use swarm_store::{EventFilter, StoreResult};

use crate::{
    error::db,
    rows::{event_from_row, event_select},
};

/// Ids are v7: within one timestamp they still sort in the order they were written,
/// which `ORDER BY created_at DESC, id DESC` relies on.
pub(crate) async fn insert(conn: &mut PgConnection, event: &NewEvent, now: Timestamp) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO events (id, event_type, agent_id, task_id, old_value, new_value, metadata, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(EventId::new_v7().as_uuid())
    .bind(event.event_type.as_str())
    .bind(event.agent_id.map(|id| id.as_uuid()))
    .bind(event.task_id.map(|id| id.as_uuid()))
    .bind(event.old_value.as_deref())
    .bind(event.new_value.as_deref())
    .bind(event.metadata.as_ref())
    .bind(now.datetime())
    .execute(conn)
    .await
    .map_err(db)?;
    Ok(())
}

pub(crate) async fn list(pool: &PgPool, filter: &EventFilter) -> StoreResult<Vec<Event>> {
    // Kinds written by a newer version sharing the database are left out rather than
    // failing the whole page: the domain has no generic kind to read them as.
    let known: Vec<&str> = EventType::ALL.iter().map(EventType::as_str).collect();
    let mut query = QueryBuilder::<Postgres>::new(concat!(event_select!(), " WHERE e.event_type = ANY("));
    query.push_bind(known).push(")");
    if let Some(agent_id) = filter.agent_id {
        query.push(" AND e.agent_id = ").push_bind(agent_id.as_uuid());
    }
    if let Some(task_id) = filter.task_id {
        query.push(" AND e.task_id = ").push_bind(task_id.as_uuid());
    }
    query.push(" ORDER BY e.created_at DESC, e.id DESC LIMIT ").push_bind(filter.limit.max(0));
    query.build().try_map(event_from_row).fetch_all(pool).await.map_err(db)
}
