//! Agents: registration, profile, presence, and the busy/idle status that follows work.

use rusqlite::{Connection, Row, params};
use swarm_domain::agent::Registration;
use swarm_domain::{
    agent::{Agent, AgentStatus, Capacity, NewAgent, ProfileUpdate},
    event::EventType,
    event::NewEvent,
    id::AgentId,
    stats::WorkCounts,
    task::{Task, TaskStatus},
    time::Timestamp,
};
use swarm_store::{Applied, StoreError, StoreResult};

use crate::{
    error::corrupt,
    events,
    rows::{Columns, column},
    sql,
};

/// Every agent read carries its capacity, counted from its `in_progress` tasks (an
/// index probe on `tasks_agent_working`).
macro_rules! select_agent {
    () => {
        "SELECT a.id, a.name, a.is_lead, a.status, a.description, a.role, a.capabilities,
                a.max_tasks, a.created_at, a.last_updated_at, a.status_reason,
                (SELECT count(*) FROM tasks t
                 WHERE t.agent_id = a.id AND t.status = 'in_progress') AS in_progress
         FROM agents a"
    };
}

pub(crate) fn get(connection: &Connection, id: AgentId) -> StoreResult<Option<Agent>> {
    sql::optional(connection, concat!(select_agent!(), " WHERE a.id = ?"), [id.to_string()], from_row)
}

pub(crate) fn list(connection: &Connection) -> StoreResult<Vec<Agent>> {
    sql::all(connection, concat!(select_agent!(), " ORDER BY a.name, a.id"), [], from_row)
}

pub(crate) fn register(tx: &Connection, new: &NewAgent, now: Timestamp) -> StoreResult<Registration> {
    let existing = get(tx, new.id)?;
    // A lead coming back from offline must not make two active leads, whatever the request says.
    let returning_lead =
        existing.as_ref().is_some_and(|agent| agent.is_lead && agent.status == AgentStatus::Offline);
    if new.is_lead || returning_lead {
        ensure_no_other_active_lead(tx, new.id)?;
    }

    if let Some(existing) = existing {
        sql::execute(
            tx,
            "UPDATE agents SET max_tasks = ?1, last_updated_at = ?2, last_seen_at = ?2 WHERE id = ?3",
            params![new.max_tasks, now.unix_millis(), new.id.to_string()],
        )?;
        if existing.status == AgentStatus::Offline {
            settle_status(tx, new.id, now, Wake::Yes)?;
        }
        return Ok(Registration::Existing(get_known(tx, new.id)?));
    }

    ensure_name_free(tx, &new.name, new.id)?;
    let capabilities =
        serde_json::to_string(&new.capabilities).map_err(|error| StoreError::Backend(Box::new(error)))?;
    sql::execute(
        tx,
        "INSERT INTO agents (id, name, is_lead, status, description, role, capabilities,
                             max_tasks, created_at, last_updated_at, last_seen_at)
         VALUES (?1, ?2, ?3, 'idle', ?4, ?5, ?6, ?7, ?8, ?8, ?8)",
        params![
            new.id.to_string(),
            new.name,
            new.is_lead,
            new.description,
            new.role,
            capabilities,
            new.max_tasks,
            now.unix_millis(),
        ],
    )?;
    let joined =
        NewEvent::change(EventType::AgentJoined, Some(new.id), None, None, Some(AgentStatus::Idle.as_str()));
    events::insert(tx, &joined, now)?;
    Ok(Registration::Created(get_known(tx, new.id)?))
}

pub(crate) fn rename(tx: &Connection, id: AgentId, name: &str, now: Timestamp) -> StoreResult<Option<Agent>> {
    if get(tx, id)?.is_none() {
        return Ok(None);
    }
    ensure_name_free(tx, name, id)?;
    sql::execute(
        tx,
        "UPDATE agents SET name = ?, last_updated_at = ? WHERE id = ?",
        params![name, now.unix_millis(), id.to_string()],
    )?;
    Ok(Some(get_known(tx, id)?))
}

pub(crate) fn set_status_reason(
    tx: &Connection,
    id: AgentId,
    reason: Option<&str>,
    now: Timestamp,
) -> StoreResult<Applied<Agent>> {
    let Some(before) = get(tx, id)? else {
        return Ok(Applied::NotFound);
    };
    let updated = sql::execute(
        tx,
        "UPDATE agents SET status_reason = ?1, last_updated_at = ?2 WHERE id = ?3 AND status_reason IS NOT ?1",
        params![reason, now.unix_millis(), id.to_string()],
    )?;
    if updated == 0 {
        return Ok(Applied::Refused { current: before });
    }
    log_status_reason(tx, id, before.status_reason.as_deref(), reason, now)?;
    Ok(Applied::Changed { before, after: get_known(tx, id)? })
}

/// The agent took work: whatever stopped it before is over (the poll's claims call this
/// in their transaction).
pub(crate) fn clear_status_reason(tx: &Connection, id: AgentId, now: Timestamp) -> StoreResult<()> {
    let reason: Option<String> = sql::optional(
        tx,
        "SELECT status_reason FROM agents WHERE id = ? AND status_reason IS NOT NULL",
        [id.to_string()],
        |row| column(row, "status_reason"),
    )?;
    let Some(reason) = reason else { return Ok(()) };
    let cleared = sql::execute(
        tx,
        "UPDATE agents SET status_reason = NULL WHERE id = ? AND status_reason IS NOT NULL",
        [id.to_string()],
    )?;
    if cleared == 1 {
        log_status_reason(tx, id, Some(&reason), None, now)?;
    }
    Ok(())
}

fn log_status_reason(
    tx: &Connection,
    id: AgentId,
    old: Option<&str>,
    new: Option<&str>,
    now: Timestamp,
) -> StoreResult<()> {
    let event = NewEvent::change(EventType::AgentStatusReason, Some(id), None, old, new);
    events::insert(tx, &event, now)
}

pub(crate) fn update_profile(
    tx: &Connection,
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
    // A field left out of the update is kept (NULL binds fall back to the column).
    let updated = sql::execute(
        tx,
        "UPDATE agents SET description = coalesce(?, description), role = coalesce(?, role),
                           capabilities = coalesce(?, capabilities), last_updated_at = ?
         WHERE id = ?",
        params![update.description, update.role, capabilities, now.unix_millis(), id.to_string()],
    )?;
    if updated == 0 {
        return Ok(None);
    }
    Ok(Some(get_known(tx, id)?))
}

pub(crate) fn heartbeat(
    tx: &Connection,
    id: AgentId,
    now: Timestamp,
    lease_until: Timestamp,
    runner: Option<&str>,
) -> StoreResult<Option<Agent>> {
    let Some(agent) = get(tx, id)? else {
        return Ok(None);
    };
    if agent.is_lead && agent.status == AgentStatus::Offline {
        ensure_no_other_active_lead(tx, id)?;
    }
    sql::execute(
        tx,
        "UPDATE agents SET last_updated_at = ?1, last_seen_at = ?1 WHERE id = ?2",
        params![now.unix_millis(), id.to_string()],
    )?;
    sql::execute(
        tx,
        "UPDATE tasks SET lease_expires_at = ?1
         WHERE (status = 'in_progress' AND agent_id = ?2) OR (status = 'reviewing' AND offered_to = ?2)",
        params![lease_until.unix_millis(), id.to_string()],
    )?;
    crate::held_claims::extend_leases(tx, id, lease_until, runner)?;
    if agent.status == AgentStatus::Offline {
        settle_status(tx, id, now, Wake::Yes)?;
    }
    Ok(Some(get_known(tx, id)?))
}

/// Conflict when a lead other than `id` is not offline: one active lead per swarm.
fn ensure_no_other_active_lead(tx: &Connection, id: AgentId) -> StoreResult<()> {
    let active_lead: Option<(String, String)> = sql::optional(
        tx,
        "SELECT id, name FROM agents
         WHERE is_lead = 1 AND status <> 'offline' AND id <> ? LIMIT 1",
        [id.to_string()],
        |row| Ok((column(row, "id")?, column(row, "name")?)),
    )?;
    match active_lead {
        Some((lead_id, lead_name)) => Err(StoreError::Conflict(format!(
            "a lead is already registered: {lead_name} ({lead_id}); \
             only one lead may be active at a time"
        ))),
        None => Ok(()),
    }
}

pub(crate) fn close(tx: &Connection, id: AgentId, now: Timestamp) -> StoreResult<Option<Agent>> {
    let Some(agent) = get(tx, id)? else {
        return Ok(None);
    };
    if agent.status == AgentStatus::Offline {
        return Ok(Some(agent));
    }
    sql::execute(
        tx,
        "UPDATE agents SET status = 'offline', last_updated_at = ? WHERE id = ? AND status <> 'offline'",
        params![now.unix_millis(), id.to_string()],
    )?;
    let left = NewEvent::change(
        EventType::AgentLeft,
        Some(id),
        None,
        Some(agent.status.as_str()),
        Some(AgentStatus::Offline.as_str()),
    );
    events::insert(tx, &left, now)?;
    Ok(Some(get_known(tx, id)?))
}

pub(crate) fn work_counts(connection: &Connection, id: AgentId) -> StoreResult<WorkCounts> {
    let counts = sql::optional(
        connection,
        "SELECT (SELECT count(*) FROM tasks WHERE offered_to = ?1 AND status = 'offered') AS offered,
                (SELECT count(*) FROM tasks WHERE status = 'unassigned') AS pool,
                (SELECT count(*) FROM tasks WHERE agent_id = ?1 AND status = 'in_progress') AS in_progress",
        [id.to_string()],
        |row| {
            Ok(WorkCounts {
                offered_to_me: column(row, "offered")?,
                pool: column(row, "pool")?,
                in_progress: column(row, "in_progress")?,
            })
        },
    )?;
    Ok(counts.unwrap_or(WorkCounts { offered_to_me: 0, pool: 0, in_progress: 0 }))
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
pub(crate) fn settle_status(tx: &Connection, id: AgentId, now: Timestamp, wake: Wake) -> StoreResult<()> {
    if wake == Wake::No {
        return settle_present(tx, id, now);
    }
    // An agent coming back may be offline: read what it was before deciding.
    let row: Option<(String, i64)> = sql::optional(
        tx,
        "SELECT a.status, (SELECT count(*) FROM tasks t
                           WHERE t.agent_id = a.id AND t.status = 'in_progress') AS in_progress
         FROM agents a WHERE a.id = ?",
        [id.to_string()],
        |row| Ok((column(row, "status")?, column(row, "in_progress")?)),
    )?;
    let Some((status, in_progress)) = row else {
        return Ok(());
    };
    let status = parse_status(&status)?;
    let target = AgentStatus::for_work(in_progress);
    if status == target {
        return Ok(());
    }
    let updated = sql::execute(
        tx,
        "UPDATE agents SET status = ?, last_updated_at = ? WHERE id = ? AND status = ?",
        params![target.as_str(), now.unix_millis(), id.to_string(), status.as_str()],
    )?;
    if updated == 0 {
        return Ok(());
    }
    log_status_change(tx, id, status, target, now)
}

/// The two ways a present agent's status follows its work: one guarded `UPDATE` each,
/// with no read first. The `EXISTS` is [`AgentStatus::for_work`].
const BECOMES_BUSY: &str =
    "UPDATE agents SET status = 'busy', last_updated_at = ?2 WHERE id = ?1 AND status = 'idle'
       AND EXISTS (SELECT 1 FROM tasks t WHERE t.agent_id = ?1 AND t.status = 'in_progress')";
const BECOMES_IDLE: &str =
    "UPDATE agents SET status = 'idle', last_updated_at = ?2 WHERE id = ?1 AND status = 'busy'
       AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.agent_id = ?1 AND t.status = 'in_progress')";

/// [`settle_status`] for an agent that is not coming back: a present agent only flips
/// between `busy` and `idle`.
fn settle_present(tx: &Connection, id: AgentId, now: Timestamp) -> StoreResult<()> {
    for moved in [WorkMoved::Took, WorkMoved::Gave] {
        if flip(tx, id, moved, now)? {
            return Ok(());
        }
    }
    Ok(())
}

/// Which way a write moved an agent's `in_progress` tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkMoved {
    /// It took one: it may go from `idle` to `busy`.
    Took,
    /// One left it: it may go from `busy` to `idle`.
    Gave,
}

impl WorkMoved {
    /// How a task's change moved its holders' work: its `in_progress` holder before
    /// gave it up, its holder after took it. Nothing when the holder stays the same.
    pub(crate) fn by(before: &Task, after: &Task) -> impl Iterator<Item = (AgentId, WorkMoved)> {
        let holder = |task: &Task| task.agent_id.filter(|_| task.status == TaskStatus::InProgress);
        let (gave, took) = (holder(before), holder(after));
        let moved = gave != took;
        gave.filter(|_| moved)
            .map(|agent| (agent, WorkMoved::Gave))
            .into_iter()
            .chain(took.filter(|_| moved).map(|agent| (agent, WorkMoved::Took)))
    }
}

/// [`settle_status`] when the caller knows which way the agent's work moved, which every
/// claim and finish does: one guarded `UPDATE`, not two.
pub(crate) fn settle_after(
    tx: &Connection,
    id: AgentId,
    moved: WorkMoved,
    now: Timestamp,
) -> StoreResult<()> {
    flip(tx, id, moved, now).map(|_| ())
}

/// The flip `moved` may cause, logged when it happened; whether it did.
fn flip(tx: &Connection, id: AgentId, moved: WorkMoved, now: Timestamp) -> StoreResult<bool> {
    let (from, to, flip) = match moved {
        WorkMoved::Took => (AgentStatus::Idle, AgentStatus::Busy, BECOMES_BUSY),
        WorkMoved::Gave => (AgentStatus::Busy, AgentStatus::Idle, BECOMES_IDLE),
    };
    if sql::execute(tx, flip, params![id.to_string(), now.unix_millis()])? == 0 {
        return Ok(false);
    }
    log_status_change(tx, id, from, to, now)?;
    Ok(true)
}

fn log_status_change(
    tx: &Connection,
    id: AgentId,
    from: AgentStatus,
    to: AgentStatus,
    now: Timestamp,
) -> StoreResult<()> {
    let change = NewEvent::change(
        EventType::AgentStatusChange,
        Some(id),
        None,
        Some(from.as_str()),
        Some(to.as_str()),
    );
    events::insert(tx, &change, now)
}

fn ensure_name_free(tx: &Connection, name: &str, id: AgentId) -> StoreResult<()> {
    let holder: Option<String> = sql::optional(
        tx,
        "SELECT id FROM agents WHERE name = ? AND id <> ?",
        params![name, id.to_string()],
        |row| column(row, "id"),
    )?;
    match holder {
        Some(holder) => Err(StoreError::Conflict(format!("agent name '{name}' is taken by agent {holder}"))),
        None => Ok(()),
    }
}

/// Read back a row this transaction just wrote.
fn get_known(tx: &Connection, id: AgentId) -> StoreResult<Agent> {
    get(tx, id)?.ok_or_else(|| corrupt(format!("agent {id} vanished inside its own transaction")))
}

fn parse_status(text: &str) -> StoreResult<AgentStatus> {
    AgentStatus::parse(text).map_err(|error| corrupt(error.0))
}

fn from_row(row: &Row<'_>) -> StoreResult<Agent> {
    let mut column = Columns::new(row);
    let id = column.agent_id("id")?;
    let name = column.take("name")?;
    let is_lead = column.bool("is_lead")?;
    let status = parse_status(&column.take::<String>("status")?)?;
    let description = column.take("description")?;
    let role = column.take("role")?;
    let capabilities = column.strings("capabilities")?;
    let max_tasks: i64 = column.take("max_tasks")?;
    let max_tasks =
        i32::try_from(max_tasks).map_err(|_| corrupt(format!("max_tasks out of range: {max_tasks}")))?;
    let created_at = column.timestamp("created_at")?;
    let last_updated_at = column.timestamp("last_updated_at")?;
    let status_reason = column.take("status_reason")?;
    let in_progress = column.take("in_progress")?;
    Ok(Agent {
        id,
        name,
        is_lead,
        status,
        description,
        role,
        capabilities,
        max_tasks,
        created_at,
        last_updated_at,
        capacity: Capacity::new(in_progress, max_tasks),
        status_reason,
    })
}
