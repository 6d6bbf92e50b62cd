//! The services registry: one upsert per registration, guarded status changes.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor, Postgres, QueryBuilder, Row, postgres::PgRow, types::Json};
use swarm_domain::{
    event::{EventType, NewEvent},
    id::{AgentId, ServiceId},
    registry::{NewService, RegisteredService, ServiceStatus},
    time::Timestamp,
};
use swarm_store::{Applied, ServiceFilter, ServiceRegistry, StoreError, StoreResult};
use uuid::Uuid;

use crate::{
    PgStore,
    error::{corrupt, db, vanished, violated_constraint},
    events,
};

macro_rules! service_columns {
    () => {
        "id, agent_id, name, port, description, url, health_check_path, status, script, cwd, interpreter, \
         args, env, metadata, created_at, last_updated_at"
    };
}

fn from_row(row: PgRow) -> sqlx::Result<RegisteredService> {
    let status: String = row.try_get("status")?;
    let env: Option<Json<BTreeMap<String, String>>> = row.try_get("env")?;
    let metadata: Json<serde_json::Value> = row.try_get("metadata")?;
    Ok(RegisteredService {
        id: ServiceId::from_uuid(row.try_get("id")?),
        agent_id: AgentId::from_uuid(row.try_get("agent_id")?),
        name: row.try_get("name")?,
        port: row.try_get("port")?,
        description: row.try_get("description")?,
        url: row.try_get("url")?,
        health_check_path: row.try_get("health_check_path")?,
        status: ServiceStatus::parse(&status).map_err(|error| corrupt("status", error))?,
        script: row.try_get("script")?,
        cwd: row.try_get("cwd")?,
        interpreter: row.try_get("interpreter")?,
        args: row.try_get("args")?,
        env: env.map(|Json(env)| env),
        metadata: metadata.0,
        created_at: Timestamp::from_datetime(row.try_get::<DateTime<Utc>, _>("created_at")?),
        last_updated_at: Timestamp::from_datetime(row.try_get::<DateTime<Utc>, _>("last_updated_at")?),
    })
}

async fn get<'e>(executor: impl PgExecutor<'e>, id: ServiceId) -> StoreResult<Option<RegisteredService>> {
    sqlx::query(concat!("SELECT ", service_columns!(), " FROM services WHERE id = $1"))
        .bind(id.as_uuid())
        .try_map(from_row)
        .fetch_optional(executor)
        .await
        .map_err(db)
}

async fn upsert(
    conn: &mut PgConnection,
    service: &NewService,
    now: Timestamp,
) -> StoreResult<RegisteredService> {
    let stored = sqlx::query(concat!(
        "INSERT INTO services (id, agent_id, name, port, description, url, health_check_path, script, cwd, \
                               interpreter, args, env, metadata, created_at, last_updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14) \
         ON CONFLICT (agent_id, name) DO UPDATE SET \
             port = excluded.port, description = excluded.description, url = excluded.url, \
             health_check_path = excluded.health_check_path, script = excluded.script, \
             cwd = excluded.cwd, interpreter = excluded.interpreter, args = excluded.args, \
             env = excluded.env, metadata = excluded.metadata, \
             last_updated_at = excluded.last_updated_at \
         RETURNING ",
        service_columns!()
    ))
    .bind(service.id.as_uuid())
    .bind(service.agent_id.as_uuid())
    .bind(&service.name)
    .bind(service.port)
    .bind(service.description.as_deref())
    .bind(service.url.as_deref())
    .bind(&service.health_check_path)
    .bind(&service.script)
    .bind(service.cwd.as_deref())
    .bind(service.interpreter.as_deref())
    .bind(service.args.as_deref())
    .bind(service.env.as_ref().map(Json))
    .bind(Json(&service.metadata))
    .bind(now.datetime())
    .try_map(from_row)
    .fetch_one(&mut *conn)
    .await;
    let stored = match stored {
        Ok(stored) => stored,
        Err(error) if violated_constraint(&error).as_deref() == Some("services_agent_id_fkey") => {
            return Err(StoreError::MissingReference(format!("agent {} does not exist", service.agent_id)));
        }
        Err(error) => return Err(db(error)),
    };
    let event = NewEvent {
        metadata: Some(serde_json::json!({ "serviceId": stored.id })),
        ..NewEvent::change(
            EventType::ServiceRegistered,
            Some(service.agent_id),
            None,
            None,
            Some(&stored.name),
        )
    };
    events::insert(&mut *conn, &event, now).await?;
    Ok(stored)
}

async fn set_status(
    conn: &mut PgConnection,
    id: ServiceId,
    from: ServiceStatus,
    to: ServiceStatus,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Applied<RegisteredService>> {
    let Some(before) = get(&mut *conn, id).await? else {
        return Ok(Applied::NotFound);
    };
    let changed =
        sqlx::query("UPDATE services SET status = $3, last_updated_at = $4 WHERE id = $1 AND status = $2")
            .bind(id.as_uuid())
            .bind(from.as_str())
            .bind(to.as_str())
            .bind(now.datetime())
            .execute(&mut *conn)
            .await
            .map_err(db)?;
    if changed.rows_affected() == 0 {
        return Ok(Applied::Refused { current: before });
    }
    let event = NewEvent {
        metadata: Some(serde_json::json!({ "serviceId": id, "name": before.name })),
        ..NewEvent::change(
            EventType::ServiceStatusChange,
            actor,
            None,
            Some(from.as_str()),
            Some(to.as_str()),
        )
    };
    events::insert(&mut *conn, &event, now).await?;
    let after = get(&mut *conn, id).await?.ok_or_else(|| vanished("service", id))?;
    Ok(Applied::Changed { before, after })
}

/// Delete the service; `false` when another transaction deleted it first.
async fn delete(conn: &mut PgConnection, id: ServiceId) -> StoreResult<bool> {
    let deleted: Option<Uuid> = sqlx::query_scalar("DELETE FROM services WHERE id = $1 RETURNING id")
        .bind(id.as_uuid())
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    Ok(deleted.is_some())
}

#[async_trait]
impl ServiceRegistry for PgStore {
    async fn service_upsert(&self, service: &NewService, now: Timestamp) -> StoreResult<RegisteredService> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        let stored = upsert(&mut tx, service, now).await?;
        tx.commit().await.map_err(db)?;
        Ok(stored)
    }

    async fn service_get(&self, id: ServiceId) -> StoreResult<Option<RegisteredService>> {
        get(&self.pool, id).await
    }

    async fn service_list(&self, filter: &ServiceFilter) -> StoreResult<Vec<RegisteredService>> {
        let mut query = QueryBuilder::<Postgres>::new(concat!(
            "SELECT ",
            service_columns!(),
            " FROM services WHERE TRUE"
        ));
        if let Some(status) = filter.status {
            query.push(" AND status = ").push_bind(status.as_str());
        }
        if let Some(agent) = filter.agent_id {
            query.push(" AND agent_id = ").push_bind(agent.as_uuid());
        }
        if let Some(name) = &filter.name {
            query.push(" AND strpos(lower(name), ").push_bind(name.to_lowercase()).push(") > 0");
        }
        query.push(" ORDER BY agent_id, name");
        query.build().try_map(from_row).fetch_all(&self.pool).await.map_err(db)
    }

    async fn service_set_status(
        &self,
        id: ServiceId,
        from: ServiceStatus,
        to: ServiceStatus,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<RegisteredService>> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        let applied = set_status(&mut tx, id, from, to, actor, now).await?;
        tx.commit().await.map_err(db)?;
        Ok(applied)
    }

    async fn service_delete(
        &self,
        id: ServiceId,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Option<RegisteredService>> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        let Some(service) = get(&mut *tx, id).await? else {
            tx.rollback().await.map_err(db)?;
            return Ok(None);
        };
        if !delete(&mut tx, id).await? {
            tx.rollback().await.map_err(db)?;
            return Ok(None);
        }
        let event = NewEvent {
            metadata: Some(serde_json::json!({ "serviceId": id })),
            ..NewEvent::change(EventType::ServiceUnregistered, actor, None, Some(&service.name), None)
        };
        events::insert(&mut tx, &event, now).await?;
        tx.commit().await.map_err(db)?;
        Ok(Some(service))
    }
}
