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
    insert_raw(conn, event, now).await.map_err(db)
}

async fn insert_raw(conn: &mut PgConnection, event: &NewEvent, now: Timestamp) -> Result<(), sqlx::Error> {
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
    .await?;
    Ok(())
}

/// Several events in one statement: a transaction logs its changes in one round trip.
pub(crate) async fn insert_all(
    conn: &mut PgConnection,
    events: &[NewEvent],
    now: Timestamp,
) -> StoreResult<()> {
    insert_all_raw(conn, events, now).await.map_err(db)
}

pub(crate) async fn insert_all_raw(
    conn: &mut PgConnection,
    events: &[NewEvent],
    now: Timestamp,
) -> Result<(), sqlx::Error> {
    match events {
        [] => {}
        [event] => insert_raw(conn, event, now).await?,
        _ => {
            let query = sqlx::query(
                "INSERT INTO events (id, event_type, agent_id, task_id, old_value, new_value, metadata, created_at) \
                 SELECT u.id, u.event_type, u.agent_id, u.task_id, u.old_value, u.new_value, u.metadata, $8 \
                 FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::uuid[], $5::text[], $6::text[], $7::jsonb[]) \
                      AS u(id, event_type, agent_id, task_id, old_value, new_value, metadata)",
            );
            Columns::of(events).bind_to(query).bind(now.datetime()).execute(conn).await?;
        }
    }
    Ok(())
}

type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// Events as one array per column, for `unnest`. Ids are drawn in order, so the rows keep
/// the order they were given in (v7 ids sort by creation).
pub(crate) struct Columns {
    ids: Vec<uuid::Uuid>,
    event_types: Vec<&'static str>,
    agent_ids: Vec<Option<uuid::Uuid>>,
    task_ids: Vec<Option<uuid::Uuid>>,
    old_values: Vec<Option<String>>,
    new_values: Vec<Option<String>>,
    metadata: Vec<Option<serde_json::Value>>,
}

impl Columns {
    pub(crate) fn of(events: &[NewEvent]) -> Columns {
        Columns {
            ids: events.iter().map(|_| EventId::new_v7().as_uuid()).collect(),
            event_types: events.iter().map(|event| event.event_type.as_str()).collect(),
            agent_ids: events.iter().map(|event| event.agent_id.map(|id| id.as_uuid())).collect(),
            task_ids: events.iter().map(|event| event.task_id.map(|id| id.as_uuid())).collect(),
            old_values: events.iter().map(|event| event.old_value.clone()).collect(),
            new_values: events.iter().map(|event| event.new_value.clone()).collect(),
            metadata: events.iter().map(|event| event.metadata.clone()).collect(),
        }
    }

    /// Binds the seven arrays as the query's next parameters, in column order.
    pub(crate) fn bind_to(self, query: PgQuery<'_>) -> PgQuery<'_> {
        query
            .bind(self.ids)
            .bind(self.event_types)
            .bind(self.agent_ids)
            .bind(self.task_ids)
            .bind(self.old_values)
            .bind(self.new_values)
            .bind(self.metadata)
    }
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
