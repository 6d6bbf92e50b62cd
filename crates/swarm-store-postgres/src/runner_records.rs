//! The newest reference runner's bookkeeping: runner records and the worker event log.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{Postgres, QueryBuilder, Row, postgres::PgRow, types::Json};
use swarm_domain::{id::EventId, time::Timestamp};
use swarm_store::{
    NewWorkerEvent, RecordArea, RunnerRecord, RunnerRecords, StoreResult, WorkerEvent, WorkerEventFilter,
};

use crate::{PgStore, error::db};

fn time(row: &PgRow, name: &str) -> sqlx::Result<Timestamp> {
    Ok(Timestamp::from_datetime(row.try_get::<DateTime<Utc>, _>(name)?))
}

fn event_from_row(row: PgRow) -> sqlx::Result<WorkerEvent> {
    let data: Option<Json<Value>> = row.try_get("data")?;
    Ok(WorkerEvent {
        id: EventId::from_uuid(row.try_get("id")?),
        event: NewWorkerEvent {
            category: row.try_get("category")?,
            event: row.try_get("event")?,
            status: row.try_get("status")?,
            source: row.try_get("source")?,
            agent_id: row.try_get("agent_id")?,
            task_id: row.try_get("task_id")?,
            session_id: row.try_get("session_id")?,
            parent_event_id: row.try_get("parent_event_id")?,
            numeric_value: row.try_get("numeric_value")?,
            duration_ms: row.try_get("duration_ms")?,
            data: data.map(|data| data.0),
        },
        created_at: time(&row, "created_at")?,
    })
}

#[async_trait]
impl RunnerRecords for PgStore {
    async fn record_put(&self, record: &RunnerRecord) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO runner_records (area, owner_id, name, body, updated_at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (area, owner_id, name) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at",
        )
        .bind(record.area.as_str())
        .bind(&record.owner_id)
        .bind(&record.name)
        .bind(Json(&record.body))
        .bind(record.updated_at.datetime())
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn record_list(
        &self,
        area: RecordArea,
        owner_id: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<RunnerRecord>> {
        let mut query = QueryBuilder::<Postgres>::new(
            "SELECT owner_id, name, body, updated_at FROM runner_records WHERE area = ",
        );
        query.push_bind(area.as_str());
        if let Some(owner_id) = owner_id {
            query.push(" AND owner_id = ").push_bind(owner_id.to_string());
        }
        query.push(" ORDER BY updated_at DESC, name DESC LIMIT ").push_bind(limit.max(0));
        query
            .build()
            .try_map(move |row: PgRow| {
                let body: Json<Value> = row.try_get("body")?;
                Ok(RunnerRecord {
                    area,
                    owner_id: row.try_get("owner_id")?,
                    name: row.try_get("name")?,
                    body: body.0,
                    updated_at: time(&row, "updated_at")?,
                })
            })
            .fetch_all(&self.pool)
            .await
            .map_err(db)
    }

    async fn record_delete(&self, area: RecordArea, owner_id: &str, name: Option<&str>) -> StoreResult<u64> {
        let done = sqlx::query(
            "DELETE FROM runner_records WHERE area = $1 AND owner_id = $2 AND ($3::text IS NULL OR name = $3)",
        )
        .bind(area.as_str())
        .bind(owner_id)
        .bind(name)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(done.rows_affected())
    }

    async fn worker_events_append(&self, events: &[NewWorkerEvent], now: Timestamp) -> StoreResult<u64> {
        if events.is_empty() {
            return Ok(0);
        }
        let mut query = QueryBuilder::<Postgres>::new(
            "INSERT INTO worker_events (id, category, event, status, source, agent_id, task_id, session_id,
                 parent_event_id, numeric_value, duration_ms, data, created_at) ",
        );
        query.push_values(events, |mut row, event| {
            row.push_bind(EventId::new_v7().as_uuid())
                .push_bind(&event.category)
                .push_bind(&event.event)
                .push_bind(&event.status)
                .push_bind(&event.source)
                .push_bind(&event.agent_id)
                .push_bind(&event.task_id)
                .push_bind(&event.session_id)
                .push_bind(&event.parent_event_id)
                .push_bind(event.numeric_value)
                .push_bind(event.duration_ms)
                .push_bind(event.data.as_ref().map(Json))
                .push_bind(now.datetime());
        });
        let done = query.build().execute(&self.pool).await.map_err(db)?;
        Ok(done.rows_affected())
    }

    async fn worker_event_list(&self, filter: &WorkerEventFilter) -> StoreResult<Vec<WorkerEvent>> {
        let mut query = QueryBuilder::<Postgres>::new(
            "SELECT id, category, event, status, source, agent_id, task_id, session_id, parent_event_id,
                 numeric_value, duration_ms, data, created_at FROM worker_events WHERE TRUE",
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
                query.push(format!(" AND {column} = ")).push_bind(value.clone());
            }
        }
        if let Some(field) = &filter.data_field {
            query.push(" AND data->>'field' = ").push_bind(field.clone());
        }
        if let Some(since) = filter.since {
            query.push(" AND created_at >= ").push_bind(since.datetime());
        }
        if let Some(until) = filter.until {
            query.push(" AND created_at <= ").push_bind(until.datetime());
        }
        query.push(" ORDER BY created_at DESC, id DESC LIMIT ").push_bind(filter.limit.max(0));
        query.build().try_map(event_from_row).fetch_all(&self.pool).await.map_err(db)
    }
}
