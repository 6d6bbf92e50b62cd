//! The services registry: one upsert per registration, guarded status changes.

use std::collections::BTreeMap;

use async_trait::async_trait;
use rusqlite::{Connection, Row, params};
use swarm_domain::{
    event::{EventType, NewEvent},
    id::{AgentId, ServiceId},
    registry::{NewService, RegisteredService, ServiceStatus},
    time::Timestamp,
};
use swarm_store::{Applied, ServiceFilter, ServiceRegistry, StoreError, StoreResult};

use crate::{
    SqliteStore,
    error::{corrupt, is_foreign_key_violation},
    events,
    rows::Columns,
    sql::{self, Sql},
};

macro_rules! service_columns {
    () => {
        "id, agent_id, name, port, description, url, health_check_path, status, script, cwd, interpreter,
         args, env, metadata, created_at, last_updated_at"
    };
}

fn from_row(row: &Row<'_>) -> StoreResult<RegisteredService> {
    let mut column = Columns::new(row);
    let id: String = column.take("id")?;
    let id = ServiceId::parse(&id).map_err(|error| corrupt(error.0))?;
    let bad = |what: &str, error: String| corrupt(format!("service {id}: {what}: {error}"));
    let agent_id = column.agent_id("agent_id")?;
    let name = column.take("name")?;
    let port: i64 = column.take("port")?;
    let description = column.take("description")?;
    let url = column.take("url")?;
    let health_check_path = column.take("health_check_path")?;
    let status: String = column.take("status")?;
    let status = ServiceStatus::parse(&status).map_err(|error| bad("status", error.0))?;
    let script = column.take("script")?;
    let cwd = column.take("cwd")?;
    let interpreter = column.take("interpreter")?;
    let args: Option<String> = column.take("args")?;
    let env: Option<String> = column.take("env")?;
    let metadata: String = column.take("metadata")?;
    Ok(RegisteredService {
        id,
        agent_id,
        name,
        port: i32::try_from(port).map_err(|error| bad("port", error.to_string()))?,
        description,
        url,
        health_check_path,
        status,
        script,
        cwd,
        interpreter,
        args: args
            .map(|text| serde_json::from_str::<Vec<String>>(&text))
            .transpose()
            .map_err(|error| bad("args", error.to_string()))?,
        env: env
            .map(|text| serde_json::from_str::<BTreeMap<String, String>>(&text))
            .transpose()
            .map_err(|error| bad("env", error.to_string()))?,
        metadata: serde_json::from_str(&metadata).map_err(|error| bad("metadata", error.to_string()))?,
        created_at: column.timestamp("created_at")?,
        last_updated_at: column.timestamp("last_updated_at")?,
    })
}

fn get(connection: &Connection, id: ServiceId) -> StoreResult<Option<RegisteredService>> {
    sql::optional(
        connection,
        concat!("SELECT ", service_columns!(), " FROM services WHERE id = ?"),
        [id.to_string()],
        from_row,
    )
}

fn json<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|error| corrupt(error.to_string()))
}

fn upsert(tx: &Connection, service: &NewService, now: Timestamp) -> StoreResult<RegisteredService> {
    let args = service.args.as_ref().map(json).transpose()?;
    let env = service.env.as_ref().map(json).transpose()?;
    let stored = sql::optional(
        tx,
        concat!(
            "INSERT INTO services (id, agent_id, name, port, description, url, health_check_path, script, cwd,
                                   interpreter, args, env, metadata, created_at, last_updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?14)
             ON CONFLICT (agent_id, name) DO UPDATE SET
                 port = excluded.port, description = excluded.description, url = excluded.url,
                 health_check_path = excluded.health_check_path, script = excluded.script,
                 cwd = excluded.cwd, interpreter = excluded.interpreter, args = excluded.args,
                 env = excluded.env, metadata = excluded.metadata,
                 last_updated_at = excluded.last_updated_at
             RETURNING ",
            service_columns!()
        ),
        params![
            service.id.to_string(),
            service.agent_id.to_string(),
            service.name,
            service.port,
            service.description,
            service.url,
            service.health_check_path,
            service.script,
            service.cwd,
            service.interpreter,
            args,
            env,
            service.metadata.to_string(),
            now.unix_millis(),
        ],
        from_row,
    );
    let stored = match stored {
        Ok(Some(stored)) => stored,
        Ok(None) => return Err(corrupt(format!("the upsert of service {} returned no row", service.name))),
        Err(StoreError::Backend(error)) if is_fk(&*error) => {
            return Err(StoreError::MissingReference(format!("agent {} does not exist", service.agent_id)));
        }
        Err(error) => return Err(error),
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
    events::insert(tx, &event, now)?;
    Ok(stored)
}

fn is_fk(error: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    error.downcast_ref::<rusqlite::Error>().is_some_and(is_foreign_key_violation)
}

fn set_status(
    tx: &Connection,
    id: ServiceId,
    from: ServiceStatus,
    to: ServiceStatus,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Applied<RegisteredService>> {
    let Some(before) = get(tx, id)? else {
        return Ok(Applied::NotFound);
    };
    let changed = sql::execute(
        tx,
        "UPDATE services SET status = ?3, last_updated_at = ?4 WHERE id = ?1 AND status = ?2",
        params![id.to_string(), from.as_str(), to.as_str(), now.unix_millis()],
    )?;
    if changed == 0 {
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
    events::insert(tx, &event, now)?;
    let after = get(tx, id)?.ok_or_else(|| corrupt(format!("service {id} vanished")))?;
    Ok(Applied::Changed { before, after })
}

fn delete(
    tx: &Connection,
    id: ServiceId,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Option<RegisteredService>> {
    let Some(service) = get(tx, id)? else {
        return Ok(None);
    };
    if sql::execute(tx, "DELETE FROM services WHERE id = ?", [id.to_string()])? == 0 {
        return Ok(None);
    }
    let event = NewEvent {
        metadata: Some(serde_json::json!({ "serviceId": id })),
        ..NewEvent::change(EventType::ServiceUnregistered, actor, None, Some(&service.name), None)
    };
    events::insert(tx, &event, now)?;
    Ok(Some(service))
}

fn list(connection: &Connection, filter: &ServiceFilter) -> StoreResult<Vec<RegisteredService>> {
    let mut query = Sql::new(concat!("SELECT ", service_columns!(), " FROM services WHERE 1 = 1"));
    if let Some(status) = filter.status {
        query.push(" AND status = ").bind(status.as_str().to_string());
    }
    if let Some(agent) = filter.agent_id {
        query.push(" AND agent_id = ").bind(agent.to_string());
    }
    if let Some(name) = &filter.name {
        query.push(" AND instr(lower(name), ").bind(name.to_lowercase()).push(") > 0");
    }
    query.push(" ORDER BY agent_id, name");
    query.all(connection, from_row)
}

#[async_trait]
impl ServiceRegistry for SqliteStore {
    async fn service_upsert(&self, service: &NewService, now: Timestamp) -> StoreResult<RegisteredService> {
        let service = service.clone();
        self.database.write(move |tx| upsert(tx, &service, now)).await
    }

    async fn service_get(&self, id: ServiceId) -> StoreResult<Option<RegisteredService>> {
        self.database.read(|connection| get(connection, id))
    }

    async fn service_list(&self, filter: &ServiceFilter) -> StoreResult<Vec<RegisteredService>> {
        let filter = filter.clone();
        self.database.read_snapshot(move |snapshot| list(snapshot, &filter)).await
    }

    async fn service_set_status(
        &self,
        id: ServiceId,
        from: ServiceStatus,
        to: ServiceStatus,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<RegisteredService>> {
        self.database.write(move |tx| set_status(tx, id, from, to, actor, now)).await
    }

    async fn service_delete(
        &self,
        id: ServiceId,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Option<RegisteredService>> {
        self.database.write(move |tx| delete(tx, id, actor, now)).await
    }
}
