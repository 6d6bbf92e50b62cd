//! The newest reference runner's bookkeeping: runner records and the worker event log.

use async_trait::async_trait;
use rusqlite::{Connection, Row, params};
use serde_json::Value;
use swarm_domain::{id::EventId, time::Timestamp};
use swarm_store::{
    NewWorkerEvent, RecordArea, RunnerRecord, RunnerRecords, StoreResult, WorkerEvent, WorkerEventFilter,
};

use crate::{
    SqliteStore,
    error::corrupt,
    rows::Columns,
    sql::{self, Sql},
};

fn json(what: &str, text: &str) -> StoreResult<Value> {
    serde_json::from_str(text).map_err(|error| corrupt(format!("{what} is not JSON: {error}")))
}

fn record_from_row(area: RecordArea) -> impl Fn(&Row<'_>) -> StoreResult<RunnerRecord> {
    move |row| {
        let mut column = Columns::new(row);
        let owner_id = column.take("owner_id")?;
        let name = column.take("name")?;
        let body: String = column.take("body")?;
        Ok(RunnerRecord {
            area,
            owner_id,
            name,
            body: json("a runner record", &body)?,
            updated_at: column.timestamp("updated_at")?,
        })
    }
}

fn put(tx: &Connection, record: &RunnerRecord) -> StoreResult<()> {
    sql::execute(
        tx,
        "INSERT INTO runner_records (area, owner_id, name, body, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (area, owner_id, name) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at",
        params![
            record.area.as_str(),
            record.owner_id,
            record.name,
            record.body.to_string(),
            record.updated_at.unix_millis()
        ],
    )?;
    Ok(())
}

fn list(
    connection: &Connection,
    area: RecordArea,
    owner_id: Option<&str>,
    limit: i64,
) -> StoreResult<Vec<RunnerRecord>> {
    let mut query = Sql::new("SELECT owner_id, name, body, updated_at FROM runner_records WHERE area = ");
    query.bind(area.as_str().to_string());
    if let Some(owner_id) = owner_id {
        query.push(" AND owner_id = ").bind(owner_id.to_string());
    }
    query.push(" ORDER BY updated_at DESC, name DESC LIMIT ").bind(limit.max(0));
    query.all(connection, record_from_row(area))
}

fn delete(tx: &Connection, area: RecordArea, owner_id: &str, name: Option<&str>) -> StoreResult<u64> {
    let removed = match name {
        Some(name) => sql::execute(
            tx,
            "DELETE FROM runner_records WHERE area = ?1 AND owner_id = ?2 AND name = ?3",
            params![area.as_str(), owner_id, name],
        )?,
        None => sql::execute(
            tx,
            "DELETE FROM runner_records WHERE area = ?1 AND owner_id = ?2",
            params![area.as_str(), owner_id],
        )?,
    };
    Ok(removed as u64)
}

fn append(tx: &Connection, events: &[NewWorkerEvent], now: Timestamp) -> StoreResult<u64> {
    for event in events {
        sql::execute(
            tx,
            "INSERT INTO worker_events (id, category, event, status, source, agent_id, task_id, session_id,
                 parent_event_id, numeric_value, duration_ms, data, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            params![
                EventId::new_v7().to_string(),
                event.category,
                event.event,
                event.status,
                event.source,
                event.agent_id,
                event.task_id,
                event.session_id,
                event.parent_event_id,
                event.numeric_value,
                event.duration_ms,
                event.data.as_ref().map(Value::to_string),
                now.unix_millis(),
            ],
        )?;
    }
    Ok(events.len() as u64)
}

fn event_from_row(row: &Row<'_>) -> StoreResult<WorkerEvent> {
    let mut column = Columns::new(row);
    let id: String = column.take("id")?;
    let id = EventId::parse(&id).map_err(|error| corrupt(error.0))?;
    let category = column.take("category")?;
    let event = column.take("event")?;
    let status = column.take("status")?;
    let source = column.take("source")?;
    let agent_id = column.take("agent_id")?;
    let task_id = column.take("task_id")?;
    let session_id = column.take("session_id")?;
    let parent_event_id = column.take("parent_event_id")?;
    let numeric_value = column.take("numeric_value")?;
    let duration_ms = column.take("duration_ms")?;
    let data: Option<String> = column.take("data")?;
    Ok(WorkerEvent {
        id,
        event: NewWorkerEvent {
            category,
            event,
            status,
            source,
            agent_id,
            task_id,
            session_id,
            parent_event_id,
            numeric_value,
            duration_ms,
            data: data.as_deref().map(|text| json("a worker event's data", text)).transpose()?,
        },
        created_at: column.timestamp("created_at")?,
    })
}

fn events(connection: &Connection, filter: &WorkerEventFilter) -> StoreResult<Vec<WorkerEvent>> {
    let mut query = Sql::new(
        "SELECT id, category, event, status, source, agent_id, task_id, session_id, parent_event_id,
             numeric_value, duration_ms, data, created_at FROM worker_events WHERE 1 = 1",
    );
    let columns = [
        ("category", &filter.category),
        ("event", &filter.event),
        ("status", &filter.status),
        ("source", &filter.source),
        ("agent_id", &filter.agent_id),
        ("task_id", &filter.task_id),
        ("session_id", &filter.session_id),
    ];
    for (column, value) in columns {
        if let Some(value) = value {
            query.push(&format!(" AND {column} = ")).bind(value.clone());
        }
    }
    if let Some(field) = &filter.data_field {
        query.push(" AND json_extract(data, '$.field') = ").bind(field.clone());
    }
    if let Some(since) = filter.since {
        query.push(" AND created_at >= ").bind(since.unix_millis());
    }
    if let Some(until) = filter.until {
        query.push(" AND created_at <= ").bind(until.unix_millis());
    }
    query.push(" ORDER BY created_at DESC, id DESC LIMIT ").bind(filter.limit.max(0));
    query.all(connection, event_from_row)
}

#[async_trait]
impl RunnerRecords for SqliteStore {
    async fn record_put(&self, record: &RunnerRecord) -> StoreResult<()> {
        let record = record.clone();
        self.database.write(move |tx| put(tx, &record)).await
    }

    async fn record_list(
        &self,
        area: RecordArea,
        owner_id: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<RunnerRecord>> {
        self.database.read(|connection| list(connection, area, owner_id, limit))
    }

    async fn record_delete(&self, area: RecordArea, owner_id: &str, name: Option<&str>) -> StoreResult<u64> {
        let owner_id = owner_id.to_string();
        let name = name.map(str::to_string);
        self.database.write(move |tx| delete(tx, area, &owner_id, name.as_deref())).await
    }

    async fn worker_events_append(&self, events: &[NewWorkerEvent], now: Timestamp) -> StoreResult<u64> {
        let events = events.to_vec();
        self.database.write(move |tx| append(tx, &events, now)).await
    }

    async fn worker_event_list(&self, filter: &WorkerEventFilter) -> StoreResult<Vec<WorkerEvent>> {
        self.database.read(|connection| events(connection, filter))
    }
}
