//! Agents: registration, profile, presence, and the busy/idle status that follows work.

use sqlx::{SqliteConnection, SqlitePool, sqlite::SqliteRow};
use swarm_domain::agent::Registration;
use swarm_domain::{
    agent::{Agent, AgentStatus, Capacity, NewAgent, ProfileUpdate},
    event::EventType,
    event::NewEvent,
    id::AgentId,
    stats::WorkCounts,
    time::Timestamp,
};
use swarm_store::{StoreError, StoreResult};

use crate::{
    SqliteStore,
    decode::{column, corrupt, db, get_agent_id, get_bool, get_strings, get_timestamp},
    events,
};

/// Every agent read carries its capacity, counted from its `in_progress` tasks (an
/// index probe on `tasks (agent_id, status)`).
macro_rules! select_agent {
    () => {
        "SELECT a.id, a.name, a.is_lead, a.status, a.description, a.role, a.capabilities,
                a.max_tasks, a.created_at, a.last_updated_at,
                (SELECT count(*) FROM tasks t
                 WHERE t.agent_id = a.id AND t.status = 'in_progress') AS in_progress
         FROM agents a"
    };
}

pub(crate) async fn get(conn: &mut SqliteConnection, id: AgentId) -> StoreResult<Option<Agent>> {
    let row = sqlx::query(concat!(select_agent!(), " WHERE a.id = ?"))
        .bind(id.to_string())
        .fetch_optional(conn)
        .await
        .map_err(db)?;
    row.as_ref().map(from_row).transpose()
}

pub(crate) async fn list(pool: &SqlitePool) -> StoreResult<Vec<Agent>> {
    let rows =
        sqlx::query(concat!(select_agent!(), " ORDER BY a.name, a.id")).fetch_all(pool).await.map_err(db)?;
    rows.iter().map(from_row).collect()
}

pub(crate) async fn register(
    store: &SqliteStore,
    new: &NewAgent,
    now: Timestamp,
) -> StoreResult<Registration> {
    let mut tx = store.begin_write().await?;
    let existing = get(&mut tx, new.id).await?;
    // A lead coming back from offline must not make two active leads, whatever the request says.
    let returning_lead =
        existing.as_ref().is_some_and(|agent| agent.is_lead && agent.status == AgentStatus::Offline);
    if new.is_lead || returning_lead {
        ensure_no_other_active_lead(&mut tx, new.id).await?;
    }

    if let Some(existing) = existing {
        sqlx::query("UPDATE agents SET max_tasks = ?, last_updated_at = ?, last_seen_at = ? WHERE id = ?")
            .bind(new.max_tasks)
            .bind(now.unix_millis())
            .bind(now.unix_millis())
            .bind(new.id.to_string())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        if existing.status == AgentStatus::Offline {
            settle_status(&mut tx, new.id, now, Wake::Yes).await?;
        }
        let agent = get_known(&mut tx, new.id).await?;
        tx.commit().await.map_err(db)?;
        return Ok(Registration::Existing(agent));
    }

    ensure_name_free(&mut tx, &new.name, new.id).await?;
    let capabilities =
        serde_json::to_string(&new.capabilities).map_err(|error| StoreError::Backend(Box::new(error)))?;
    sqlx::query(
        "INSERT INTO agents (id, name, is_lead, status, description, role, capabilities,
                             max_tasks, created_at, last_updated_at, last_seen_at)
         VALUES (?, ?, ?, 'idle', ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(new.id.to_string())
    .bind(&new.name)
    .bind(new.is_lead)
    .bind(new.description.as_deref())
    .bind(new.role.as_deref())
    .bind(capabilities)
    .bind(new.max_tasks)
    .bind(now.unix_millis())
    .bind(now.unix_millis())
    .bind(now.unix_millis())
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    let joined = NewEvent::change(EventType::AgentJoined, Some(new.id), None, None, Some("idle"));
    events::insert(&mut tx, &joined, now).await?;
    let agent = get_known(&mut tx, new.id).await?;
    tx.commit().await.map_err(db)?;
    Ok(Registration::Created(agent))
}

pub(crate) async fn rename(
    store: &SqliteStore,
    id: AgentId,
    name: &str,
    now: Timestamp,
) -> StoreResult<Option<Agent>> {
    let mut tx = store.begin_write().await?;
    if get(&mut tx, id).await?.is_none() {
        return Ok(None);
    }
    ensure_name_free(&mut tx, name, id).await?;
    sqlx::query("UPDATE agents SET name = ?, last_updated_at = ? WHERE id = ?")
        .bind(name)
        .bind(now.unix_millis())
        .bind(id.to_string())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    let agent = get_known(&mut tx, id).await?;
    tx.commit().await.map_err(db)?;
    Ok(Some(agent))
}

pub(crate) async fn update_profile(
    store: &SqliteStore,
    id: AgentId,
    update: &ProfileUpdate,
    now: Timestamp,
) -> StoreResult<Option<Agent>> {
    let capabilities = update
        .capabilities
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|error| StoreError::Backend(Box::new(error)))?;
    let mut tx = store.begin_write().await?;
    // A field left out of the update is kept (NULL binds fall back to the column).
    let updated = sqlx::query(
        "UPDATE agents SET description = coalesce(?, description), role = coalesce(?, role),
                           capabilities = coalesce(?, capabilities), last_updated_at = ?
         WHERE id = ?",
    )
    .bind(update.description.as_deref())
    .bind(update.role.as_deref())
    .bind(capabilities)
    .bind(now.unix_millis())
    .bind(id.to_string())
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    if updated.rows_affected() == 0 {
        return Ok(None);
    }
    let agent = get_known(&mut tx, id).await?;
    tx.commit().await.map_err(db)?;
    Ok(Some(agent))
}

pub(crate) async fn heartbeat(
    store: &SqliteStore,
    id: AgentId,
    now: Timestamp,
    lease_until: Timestamp,
) -> StoreResult<Option<Agent>> {
    let mut tx = store.begin_write().await?;
    let Some(agent) = get(&mut tx, id).await? else {
        return Ok(None);
    };
    if agent.is_lead && agent.status == AgentStatus::Offline {
        ensure_no_other_active_lead(&mut tx, id).await?;
    }
    sqlx::query("UPDATE agents SET last_updated_at = ?, last_seen_at = ? WHERE id = ?")
        .bind(now.unix_millis())
        .bind(now.unix_millis())
        .bind(id.to_string())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    sqlx::query(
        "UPDATE tasks SET lease_expires_at = ?1
         WHERE (status = 'in_progress' AND agent_id = ?2) OR (status = 'reviewing' AND offered_to = ?2)",
    )
    .bind(lease_until.unix_millis())
    .bind(id.to_string())
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    if agent.status == AgentStatus::Offline {
        settle_status(&mut tx, id, now, Wake::Yes).await?;
    }
    let agent = get_known(&mut tx, id).await?;
    tx.commit().await.map_err(db)?;
    Ok(Some(agent))
}

/// Conflict when a lead other than `id` is not offline: one active lead per swarm.
async fn ensure_no_other_active_lead(tx: &mut SqliteConnection, id: AgentId) -> StoreResult<()> {
    let active_lead: Option<(String, String)> = sqlx::query_as(
        "SELECT id, name FROM agents
         WHERE is_lead = 1 AND status <> 'offline' AND id <> ? LIMIT 1",
    )
    .bind(id.to_string())
    .fetch_optional(&mut *tx)
    .await
    .map_err(db)?;
    match active_lead {
        Some((lead_id, lead_name)) => Err(StoreError::Conflict(format!(
            "a lead is already registered: {lead_name} ({lead_id}); \
             only one lead may be active at a time"
        ))),
        None => Ok(()),
    }
}

pub(crate) async fn close(store: &SqliteStore, id: AgentId, now: Timestamp) -> StoreResult<Option<Agent>> {
    let mut tx = store.begin_write().await?;
    let Some(agent) = get(&mut tx, id).await? else {
        return Ok(None);
    };
    if agent.status == AgentStatus::Offline {
        return Ok(Some(agent));
    }
    sqlx::query(
        "UPDATE agents SET status = 'offline', last_updated_at = ? WHERE id = ? AND status <> 'offline'",
    )
    .bind(now.unix_millis())
    .bind(id.to_string())
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    let left = NewEvent::change(
        EventType::AgentLeft,
        Some(id),
        None,
        Some(agent.status.as_str()),
        Some(AgentStatus::Offline.as_str()),
    );
    events::insert(&mut tx, &left, now).await?;
    let agent = get_known(&mut tx, id).await?;
    tx.commit().await.map_err(db)?;
    Ok(Some(agent))
}

pub(crate) async fn work_counts(pool: &SqlitePool, id: AgentId) -> StoreResult<WorkCounts> {
    let (offered_to_me, pool_count, in_progress): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM tasks WHERE offered_to = ? AND status = 'offered'),
                (SELECT count(*) FROM tasks WHERE status = 'unassigned'),
                (SELECT count(*) FROM tasks WHERE agent_id = ? AND status = 'in_progress')",
    )
    .bind(id.to_string())
    .bind(id.to_string())
    .fetch_one(pool)
    .await
    .map_err(db)?;
    Ok(WorkCounts { offered_to_me, pool: pool_count, in_progress })
}

/// Whether [`settle_status`] may bring an `offline` agent back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// The agent itself showed up (registration, heartbeat).
    Yes,
    /// Someone else's action touched its work; an absent agent stays `offline`.
    No,
}

/// Set the agent `busy` when it holds an `in_progress` task, else `idle`, logging the
/// change. Callers run it inside the write transaction that changed the agent's work.
pub(crate) async fn settle_status(
    conn: &mut SqliteConnection,
    id: AgentId,
    now: Timestamp,
    wake: Wake,
) -> StoreResult<()> {
    let row: Option<(String, i64)> = sqlx::query_as(
        "SELECT a.status, (SELECT count(*) FROM tasks t
                           WHERE t.agent_id = a.id AND t.status = 'in_progress')
         FROM agents a WHERE a.id = ?",
    )
    .bind(id.to_string())
    .fetch_optional(&mut *conn)
    .await
    .map_err(db)?;
    let Some((status, in_progress)) = row else {
        return Ok(());
    };
    let status = parse_status(&status)?;
    let target = AgentStatus::for_work(in_progress);
    if status == target || (status == AgentStatus::Offline && wake == Wake::No) {
        return Ok(());
    }
    let updated =
        sqlx::query("UPDATE agents SET status = ?, last_updated_at = ? WHERE id = ? AND status = ?")
            .bind(target.as_str())
            .bind(now.unix_millis())
            .bind(id.to_string())
            .bind(status.as_str())
            .execute(&mut *conn)
            .await
            .map_err(db)?;
    if updated.rows_affected() == 0 {
        return Ok(());
    }
    let change = NewEvent::change(
        EventType::AgentStatusChange,
        Some(id),
        None,
        Some(status.as_str()),
        Some(target.as_str()),
    );
    events::insert(conn, &change, now).await
}

async fn ensure_name_free(conn: &mut SqliteConnection, name: &str, id: AgentId) -> StoreResult<()> {
    let holder: Option<String> = sqlx::query_scalar("SELECT id FROM agents WHERE name = ? AND id <> ?")
        .bind(name)
        .bind(id.to_string())
        .fetch_optional(conn)
        .await
        .map_err(db)?;
    match holder {
        Some(holder) => Err(StoreError::Conflict(format!("agent name '{name}' is taken by agent {holder}"))),
        None => Ok(()),
    }
}

/// Read back a row this transaction just wrote.
async fn get_known(conn: &mut SqliteConnection, id: AgentId) -> StoreResult<Agent> {
    get(conn, id).await?.ok_or_else(|| corrupt(format!("agent {id} vanished inside its own transaction")))
}

fn parse_status(text: &str) -> StoreResult<AgentStatus> {
    AgentStatus::parse(text).map_err(|error| corrupt(error.0))
}

fn from_row(row: &SqliteRow) -> StoreResult<Agent> {
    let max_tasks: i64 = column(row, "max_tasks")?;
    let max_tasks =
        i32::try_from(max_tasks).map_err(|_| corrupt(format!("max_tasks out of range: {max_tasks}")))?;
    Ok(Agent {
        id: get_agent_id(row, "id")?,
        name: column(row, "name")?,
        is_lead: get_bool(row, "is_lead")?,
        status: parse_status(&column::<String>(row, "status")?)?,
        description: column(row, "description")?,
        role: column(row, "role")?,
        capabilities: get_strings(row, "capabilities")?,
        max_tasks,
        created_at: get_timestamp(row, "created_at")?,
        last_updated_at: get_timestamp(row, "last_updated_at")?,
        capacity: Capacity::new(column(row, "in_progress")?, max_tasks),
    })
}
