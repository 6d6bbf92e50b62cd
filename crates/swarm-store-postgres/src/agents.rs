//! Agents: registration, profile, presence, and the busy/idle status that follows work.

use sqlx::{PgConnection, PgExecutor, PgPool};
use swarm_domain::agent::Registration;
use swarm_domain::{
    agent::{Agent, AgentStatus, NewAgent, ProfileUpdate},
    event::EventType,
    event::NewEvent,
    id::{AgentId, EventId},
    stats::WorkCounts,
    time::Timestamp,
};
use swarm_store::{Applied, StoreError, StoreResult};
use uuid::Uuid;

use crate::{
    error::{corrupt, db, vanished},
    events,
    rows::{agent_from_row, agent_select},
};

/// The key of the advisory lock that serializes registrations. Row locks cannot make
/// "no other active lead exists" atomic with the insert (there is no row to lock when
/// none exists), and registrations are rare enough to take turns.
const REGISTRATION_LOCK: i64 = 0x7377_6172_6d5f_6c64; // "swarm_ld"

pub(crate) async fn get<'e>(executor: impl PgExecutor<'e>, id: AgentId) -> StoreResult<Option<Agent>> {
    sqlx::query(concat!(agent_select!(), " WHERE a.id = $1"))
        .bind(id.as_uuid())
        .try_map(agent_from_row)
        .fetch_optional(executor)
        .await
        .map_err(db)
}

pub(crate) async fn list(pool: &PgPool) -> StoreResult<Vec<Agent>> {
    sqlx::query(concat!(agent_select!(), " ORDER BY a.name, a.id"))
        .try_map(agent_from_row)
        .fetch_all(pool)
        .await
        .map_err(db)
}

pub(crate) async fn register(pool: &PgPool, new: &NewAgent, now: Timestamp) -> StoreResult<Registration> {
    let mut tx = pool.begin().await.map_err(db)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(REGISTRATION_LOCK)
        .execute(&mut *tx)
        .await
        .map_err(db)?;

    let existing: Option<(String, bool)> =
        sqlx::query_as("SELECT status, is_lead FROM agents WHERE id = $1 FOR NO KEY UPDATE")
            .bind(new.id.as_uuid())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;

    if let Some((status, is_lead)) = existing {
        let status = parse_status(&status)?;
        // A lead coming back must not make two active leads, whatever the request says.
        let becomes_active_lead = is_lead && status == AgentStatus::Offline;
        if new.is_lead || becomes_active_lead {
            ensure_no_other_active_lead(&mut tx, new.id).await?;
        }
        sqlx::query(
            "UPDATE agents SET max_tasks = $2, last_updated_at = $3, last_seen_at = $3 WHERE id = $1",
        )
        .bind(new.id.as_uuid())
        .bind(new.max_tasks)
        .bind(now.datetime())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        if status == AgentStatus::Offline {
            settle_status(&mut tx, new.id, now, Wake::Yes).await?;
        }
        let agent = get_known(&mut tx, new.id).await?;
        tx.commit().await.map_err(db)?;
        return Ok(Registration::Existing(agent));
    }

    if new.is_lead {
        ensure_no_other_active_lead(&mut tx, new.id).await?;
    }
    ensure_name_free(&mut tx, &new.name, new.id).await?;
    sqlx::query(
        "INSERT INTO agents (id, name, is_lead, status, description, role, capabilities, \
                             max_tasks, created_at, last_updated_at, last_seen_at) \
         VALUES ($1, $2, $3, 'idle', $4, $5, $6, $7, $8, $8, $8)",
    )
    .bind(new.id.as_uuid())
    .bind(&new.name)
    .bind(new.is_lead)
    .bind(new.description.as_deref())
    .bind(new.role.as_deref())
    .bind(&new.capabilities)
    .bind(new.max_tasks)
    .bind(now.datetime())
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    let joined =
        NewEvent::change(EventType::AgentJoined, Some(new.id), None, None, Some(AgentStatus::Idle.as_str()));
    events::insert(&mut tx, &joined, now).await?;
    let agent = get_known(&mut tx, new.id).await?;
    tx.commit().await.map_err(db)?;
    Ok(Registration::Created(agent))
}

pub(crate) async fn rename(
    pool: &PgPool,
    id: AgentId,
    name: &str,
    now: Timestamp,
) -> StoreResult<Option<Agent>> {
    let mut tx = pool.begin().await.map_err(db)?;
    if lock_status(&mut tx, id).await?.is_none() {
        return Ok(None);
    }
    ensure_name_free(&mut tx, name, id).await?;
    // A rename racing past the check above still hits the unique index: `db` turns that
    // into a Conflict too, only with a less specific message.
    sqlx::query("UPDATE agents SET name = $2, last_updated_at = $3 WHERE id = $1")
        .bind(id.as_uuid())
        .bind(name)
        .bind(now.datetime())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    let agent = get_known(&mut tx, id).await?;
    tx.commit().await.map_err(db)?;
    Ok(Some(agent))
}

pub(crate) async fn set_status_reason(
    pool: &PgPool,
    id: AgentId,
    reason: Option<&str>,
    now: Timestamp,
) -> StoreResult<Applied<Agent>> {
    let mut tx = pool.begin().await.map_err(db)?;
    if lock_status(&mut tx, id).await?.is_none() {
        return Ok(Applied::NotFound);
    }
    let before = get_known(&mut tx, id).await?;
    let updated = sqlx::query(
        "UPDATE agents SET status_reason = $2, last_updated_at = $3 \
         WHERE id = $1 AND status_reason IS DISTINCT FROM $2",
    )
    .bind(id.as_uuid())
    .bind(reason)
    .bind(now.datetime())
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    if updated.rows_affected() == 0 {
        return Ok(Applied::Refused { current: before });
    }
    log_status_reason(&mut tx, id, before.status_reason.as_deref(), reason, now).await?;
    let after = get_known(&mut tx, id).await?;
    tx.commit().await.map_err(db)?;
    Ok(Applied::Changed { before, after })
}

async fn log_status_reason(
    conn: &mut PgConnection,
    id: AgentId,
    old: Option<&str>,
    new: Option<&str>,
    now: Timestamp,
) -> StoreResult<()> {
    let event = NewEvent::change(EventType::AgentStatusReason, Some(id), None, old, new);
    events::insert(conn, &event, now).await
}

pub(crate) async fn update_profile(
    pool: &PgPool,
    id: AgentId,
    update: &ProfileUpdate,
    now: Timestamp,
) -> StoreResult<Option<Agent>> {
    let mut tx = pool.begin().await.map_err(db)?;
    // A field left out of the update is kept: NULL falls back to the column.
    let updated = sqlx::query(
        "UPDATE agents SET description = coalesce($2, description), role = coalesce($3, role), \
                           capabilities = coalesce($4, capabilities), last_updated_at = $5 \
         WHERE id = $1",
    )
    .bind(id.as_uuid())
    .bind(update.description.as_deref())
    .bind(update.role.as_deref())
    .bind(update.capabilities.as_ref())
    .bind(now.datetime())
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
    pool: &PgPool,
    id: AgentId,
    now: Timestamp,
    lease_until: Timestamp,
    runner: Option<Uuid>,
) -> StoreResult<Option<Agent>> {
    let mut tx = pool.begin().await.map_err(db)?;
    // Task rows before the agent row, the crate's lock order.
    sqlx::query(
        "UPDATE tasks SET lease_expires_at = $2 \
         WHERE (status = 'in_progress' AND agent_id = $1) OR (status = 'reviewing' AND offered_to = $1)",
    )
    .bind(id.as_uuid())
    .bind(lease_until.datetime())
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    crate::held_claims::extend_leases(&mut tx, id, lease_until, runner).await?;
    // An offline lead coming back is a registration in disguise: take the registration
    // lock first (the order `register` uses: lock, then row) so two leads cannot both be
    // active. Heartbeats of everyone else never touch that lock.
    let seen: Option<(bool, String)> = sqlx::query_as("SELECT is_lead, status FROM agents WHERE id = $1")
        .bind(id.as_uuid())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
    let Some((is_lead, seen_status)) = seen else {
        return Ok(None);
    };
    if is_lead && seen_status == AgentStatus::Offline.as_str() {
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(REGISTRATION_LOCK)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
    }
    let Some(status) = lock_status(&mut tx, id).await? else {
        return Ok(None);
    };
    if is_lead && status == AgentStatus::Offline {
        ensure_no_other_active_lead(&mut tx, id).await?;
    }
    sqlx::query("UPDATE agents SET last_updated_at = $2, last_seen_at = $2 WHERE id = $1")
        .bind(id.as_uuid())
        .bind(now.datetime())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    if status == AgentStatus::Offline {
        settle_status(&mut tx, id, now, Wake::Yes).await?;
    }
    let agent = get_known(&mut tx, id).await?;
    tx.commit().await.map_err(db)?;
    Ok(Some(agent))
}

pub(crate) async fn close(pool: &PgPool, id: AgentId, now: Timestamp) -> StoreResult<Option<Agent>> {
    let mut tx = pool.begin().await.map_err(db)?;
    let Some(status) = lock_status(&mut tx, id).await? else {
        return Ok(None);
    };
    if status != AgentStatus::Offline {
        sqlx::query("UPDATE agents SET status = 'offline', last_updated_at = $2 WHERE id = $1 AND status <> 'offline'")
            .bind(id.as_uuid())
            .bind(now.datetime())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let left = NewEvent::change(
            EventType::AgentLeft,
            Some(id),
            None,
            Some(status.as_str()),
            Some(AgentStatus::Offline.as_str()),
        );
        events::insert(&mut tx, &left, now).await?;
    }
    let agent = get_known(&mut tx, id).await?;
    tx.commit().await.map_err(db)?;
    Ok(Some(agent))
}

pub(crate) async fn work_counts(pool: &PgPool, id: AgentId) -> StoreResult<WorkCounts> {
    let (offered_to_me, pool_count, in_progress): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM tasks WHERE offered_to = $1 AND status = 'offered'), \
                (SELECT count(*) FROM tasks WHERE status = 'unassigned'), \
                (SELECT count(*) FROM tasks WHERE agent_id = $1 AND status = 'in_progress')",
    )
    .bind(id.as_uuid())
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
/// change. The caller holds the agent's row lock, so the count is not racing another
/// transaction's change of this agent's work.
pub(crate) async fn settle_status(
    conn: &mut PgConnection,
    id: AgentId,
    now: Timestamp,
    wake: Wake,
) -> StoreResult<()> {
    let settled = settle(conn, id, now, Settle { status: Some(wake), clear_reason: false }).await?;
    events::insert_all(conn, &settled, now).await
}

/// What [`settle`] brings in line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settle {
    /// The busy/idle status, to follow the agent's work (`None`: leave it).
    pub status: Option<Wake>,
    /// Clear the reason it gave for stopping: it takes work again.
    pub clear_reason: bool,
}

/// The guarded `UPDATE` of [`settle`] and [`settle_and_log`], with its `cur` (the agent as
/// it is and the status its `in_progress` tasks call for) and without its `RETURNING`:
/// `$1` the agent, `$2` now, `$3` whether to settle the status, `$4` whether an offline
/// agent wakes, `$5` whether to clear the status reason.
macro_rules! settle_update {
    () => {
        "WITH cur AS ( \
             SELECT a.id, a.status, a.status_reason, \
                    CASE WHEN NOT $3 OR (a.status = 'offline' AND NOT $4) THEN a.status \
                         WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.agent_id = a.id AND t.status = 'in_progress') \
                         THEN 'busy' ELSE 'idle' END AS target \
             FROM agents a WHERE a.id = $1) \
         UPDATE agents a SET status = cur.target, \
                last_updated_at = CASE WHEN cur.target <> cur.status THEN $2 ELSE a.last_updated_at END, \
                status_reason = CASE WHEN $5 THEN NULL ELSE a.status_reason END \
         FROM cur \
         WHERE a.id = cur.id AND a.status = cur.status \
           AND (cur.target <> cur.status OR ($5 AND cur.status_reason IS NOT NULL))"
    };
}

/// The agent's busy/idle status brought in line with its `in_progress` tasks, and its
/// status reason cleared when asked, in one guarded `UPDATE` (the from-status read in
/// the same statement is in its `WHERE`). Returns the events to log with the change,
/// for the caller to write together with its own.
pub(crate) async fn settle(
    conn: &mut PgConnection,
    id: AgentId,
    now: Timestamp,
    settle: Settle,
) -> StoreResult<Vec<NewEvent>> {
    if settle.status.is_none() && !settle.clear_reason {
        return Ok(Vec::new());
    }
    let row: Option<(String, String, Option<String>)> =
        sqlx::query_as(concat!(settle_update!(), " RETURNING cur.status, cur.target, cur.status_reason"))
            .bind(id.as_uuid())
            .bind(now.datetime())
            .bind(settle.status.is_some())
            .bind(settle.status == Some(Wake::Yes))
            .bind(settle.clear_reason)
            .fetch_optional(&mut *conn)
            .await
            .map_err(db)?;
    let Some((old, new, old_reason)) = row else {
        return Ok(Vec::new());
    };
    let mut logged = Vec::new();
    if old != new {
        let (old, new) = (parse_status(&old)?, parse_status(&new)?);
        logged.push(NewEvent::change(
            EventType::AgentStatusChange,
            Some(id),
            None,
            Some(old.as_str()),
            Some(new.as_str()),
        ));
    }
    if settle.clear_reason && old_reason.is_some() {
        logged.push(NewEvent::change(
            EventType::AgentStatusReason,
            Some(id),
            None,
            old_reason.as_deref(),
            None,
        ));
    }
    Ok(logged)
}

/// [`settle`] and the transaction's other events (`logged`, written first) in one
/// statement: a claim or a finish ends with one round trip, not two.
pub(crate) async fn settle_and_log(
    conn: &mut PgConnection,
    id: AgentId,
    now: Timestamp,
    settle: Settle,
    logged: &[NewEvent],
) -> StoreResult<()> {
    let columns = events::Columns::of(logged);
    // Drawn after the others': v7 ids keep the order the events happened in.
    let (status_event, reason_event) = (EventId::new_v7().as_uuid(), EventId::new_v7().as_uuid());
    let query = sqlx::query(
        concat!(
            "WITH upd AS (",
            settle_update!(),
            " RETURNING cur.status AS old, cur.target AS new, cur.status_reason AS old_reason), \
         logged AS ( \
             INSERT INTO events (id, event_type, agent_id, task_id, old_value, new_value, metadata, created_at) \
             SELECT u.id, u.event_type, u.agent_id, u.task_id, u.old_value, u.new_value, u.metadata, $2 \
             FROM unnest($8::uuid[], $9::text[], $10::uuid[], $11::uuid[], $12::text[], $13::text[], $14::jsonb[]) \
                  AS u(id, event_type, agent_id, task_id, old_value, new_value, metadata) \
             UNION ALL \
             SELECT $6::uuid, $15::text, $1, NULL::uuid, upd.old, upd.new, NULL::jsonb, $2 FROM upd \
             WHERE upd.old <> upd.new \
             UNION ALL \
             SELECT $7::uuid, $16::text, $1, NULL::uuid, upd.old_reason, NULL::text, NULL::jsonb, $2 FROM upd \
             WHERE $5 AND upd.old_reason IS NOT NULL) \
         SELECT old, new FROM upd"
        ),
    )
    .bind(id.as_uuid())
    .bind(now.datetime())
    .bind(settle.status.is_some())
    .bind(settle.status == Some(Wake::Yes))
    .bind(settle.clear_reason)
    .bind(status_event)
    .bind(reason_event);
    let changed: Option<(String, String)> = columns
        .bind_to(query)
        .bind(EventType::AgentStatusChange.as_str())
        .bind(EventType::AgentStatusReason.as_str())
        .try_map(|row: sqlx::postgres::PgRow| {
            use sqlx::Row;
            Ok((row.try_get(0)?, row.try_get(1)?))
        })
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    // What the statement wrote must be statuses the domain knows.
    if let Some((old, new)) = changed {
        parse_status(&old)?;
        parse_status(&new)?;
    }
    Ok(())
}

/// Lock the rows of `ids` in id order (the one order every transaction uses).
pub(crate) async fn lock_in_order(conn: &mut PgConnection, ids: &mut Vec<AgentId>) -> StoreResult<()> {
    ids.sort();
    ids.dedup();
    if ids.is_empty() {
        return Ok(());
    }
    // One agent, the common case (every claim and finish), gets its own statement: with
    // an array parameter PostgreSQL planned the prepared statement afresh on every
    // execution (a custom plan is always cheaper for it), two plans per claim cycle.
    let query = match ids.as_slice() {
        [one] => sqlx::query("SELECT 1 FROM agents WHERE id = $1 FOR NO KEY UPDATE").bind(one.as_uuid()),
        _ => {
            let uuids: Vec<Uuid> = ids.iter().map(AgentId::as_uuid).collect();
            sqlx::query("SELECT 1 FROM agents WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE").bind(uuids)
        }
    };
    query.execute(conn).await.map_err(db)?;
    Ok(())
}

async fn lock_status(conn: &mut PgConnection, id: AgentId) -> StoreResult<Option<AgentStatus>> {
    let status: Option<String> =
        sqlx::query_scalar("SELECT status FROM agents WHERE id = $1 FOR NO KEY UPDATE")
            .bind(id.as_uuid())
            .fetch_optional(conn)
            .await
            .map_err(db)?;
    status.as_deref().map(parse_status).transpose()
}

async fn ensure_no_other_active_lead(conn: &mut PgConnection, id: AgentId) -> StoreResult<()> {
    let active_lead: Option<(Uuid, String)> = sqlx::query_as(
        "SELECT id, name FROM agents WHERE is_lead AND status <> 'offline' AND id <> $1 \
         ORDER BY created_at LIMIT 1",
    )
    .bind(id.as_uuid())
    .fetch_optional(conn)
    .await
    .map_err(db)?;
    match active_lead {
        Some((lead_id, lead_name)) => Err(StoreError::Conflict(format!(
            "a lead is already registered: {lead_name} ({lead_id}); only one lead may be active at a time"
        ))),
        None => Ok(()),
    }
}

async fn ensure_name_free(conn: &mut PgConnection, name: &str, id: AgentId) -> StoreResult<()> {
    let holder: Option<Uuid> = sqlx::query_scalar("SELECT id FROM agents WHERE name = $1 AND id <> $2")
        .bind(name)
        .bind(id.as_uuid())
        .fetch_optional(conn)
        .await
        .map_err(db)?;
    match holder {
        Some(holder) => Err(StoreError::Conflict(format!("agent name '{name}' is taken by agent {holder}"))),
        None => Ok(()),
    }
}

/// Read back a row this transaction just wrote.
async fn get_known(conn: &mut PgConnection, id: AgentId) -> StoreResult<Agent> {
    get(conn, id).await?.ok_or_else(|| vanished("agent", id))
}

fn parse_status(text: &str) -> StoreResult<AgentStatus> {
    AgentStatus::parse(text).map_err(|err| db(corrupt("status", err)))
}
