//! Triggers, their sessions, awaited tasks and the `task_result` claim. A firing is
//! one write transaction: the guarded `UPDATE` of the trigger (`WHERE next_run_at =
//! <the slot read>` for a scheduled slot), the delivery mark, and the task.

use rusqlite::{Connection, Row, params};
use swarm_domain::{
    id::{AgentId, TaskId, TriggerId},
    poll::Trigger,
    task::{NewTask, Task},
    time::Timestamp,
    trigger::{SessionMode, TaskAwait, TriggerDef, TriggerSession, TriggerTarget, TriggerType},
};
use swarm_store::{DeliveryMark, FireGuard, FireOutcome, NewTaskAwait, StoreError, StoreResult};

use crate::{
    error::{corrupt, db, is_foreign_key_violation},
    rows::Columns,
    sql, tasks,
};

const SELECT_TRIGGER: &str = "SELECT id, name, description, type, schedule, timezone, interval_ms, run_at,
        webhook_secret, webhook_public, github_bot, target, prompt, task_type, tags, priority,
        session_mode, enabled, last_run_at, run_count, next_run_at, created_by, created_at, updated_at,
        channel
    FROM triggers";

const SELECT_AWAIT: &str = "SELECT task_id, agent_id, parent_task_id, trigger_name, session_key, created_at,
        delivered_at FROM task_awaits";

pub(crate) fn create(tx: &Connection, trigger: &TriggerDef) -> StoreResult<TriggerDef> {
    let inserted = sql::execute(
        tx,
        "INSERT INTO triggers (id, name, description, type, schedule, timezone, interval_ms, run_at,
             webhook_secret, webhook_public, github_bot, target, prompt, task_type, tags, priority,
             session_mode, enabled, last_run_at, run_count, next_run_at, created_by, created_at, updated_at,
             channel)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20,
                 ?21, ?22, ?23, ?24, ?25)
         ON CONFLICT (name) DO NOTHING",
        params![
            trigger.id.to_string(),
            trigger.name,
            trigger.description,
            trigger.kind.as_str(),
            trigger.schedule,
            trigger.timezone,
            trigger.interval_ms,
            trigger.run_at.map(|at| at.unix_millis()),
            trigger.webhook_secret,
            trigger.webhook_public,
            trigger.github_bot,
            trigger.target.encode(),
            trigger.prompt,
            trigger.task_type,
            json(&trigger.tags)?,
            trigger.priority,
            trigger.session_mode.as_str(),
            trigger.enabled,
            trigger.last_run_at.map(|at| at.unix_millis()),
            trigger.run_count,
            trigger.next_run_at.map(|at| at.unix_millis()),
            trigger.created_by.map(|id| id.to_string()),
            trigger.created_at.unix_millis(),
            trigger.updated_at.unix_millis(),
            trigger.channel,
        ],
    )?;
    if inserted == 0 {
        return Err(StoreError::Conflict(format!("a trigger named {:?} exists", trigger.name)));
    }
    get_by_id(tx, trigger.id)?.ok_or_else(|| corrupt(format!("trigger {} vanished", trigger.id)))
}

pub(crate) fn get(connection: &Connection, name: &str) -> StoreResult<Option<TriggerDef>> {
    sql::optional(connection, &format!("{SELECT_TRIGGER} WHERE name = ?"), [name], from_row)
}

pub(crate) fn get_by_id(connection: &Connection, id: TriggerId) -> StoreResult<Option<TriggerDef>> {
    sql::optional(connection, &format!("{SELECT_TRIGGER} WHERE id = ?"), [id.to_string()], from_row)
}

pub(crate) fn list(connection: &Connection) -> StoreResult<Vec<TriggerDef>> {
    sql::all(connection, &format!("{SELECT_TRIGGER} ORDER BY name"), [], from_row)
}

pub(crate) fn due(connection: &Connection, now: Timestamp, limit: i64) -> StoreResult<Vec<TriggerDef>> {
    sql::all(
        connection,
        &format!(
            "{SELECT_TRIGGER} WHERE enabled = 1 AND next_run_at IS NOT NULL AND next_run_at <= ?1
             ORDER BY next_run_at, id LIMIT ?2"
        ),
        params![now.unix_millis(), limit],
        from_row,
    )
}

pub(crate) fn update(tx: &Connection, trigger: &TriggerDef) -> StoreResult<Option<TriggerDef>> {
    let updated = sql::execute(
        tx,
        "UPDATE triggers SET description = ?2, schedule = ?3, timezone = ?4, interval_ms = ?5,
             run_at = ?6, webhook_secret = ?7, webhook_public = ?8, github_bot = ?9, target = ?10,
             prompt = ?11, task_type = ?12, tags = ?13, priority = ?14, session_mode = ?15,
             enabled = ?16, next_run_at = ?17, updated_at = ?18, channel = ?19
         WHERE id = ?1",
        params![
            trigger.id.to_string(),
            trigger.description,
            trigger.schedule,
            trigger.timezone,
            trigger.interval_ms,
            trigger.run_at.map(|at| at.unix_millis()),
            trigger.webhook_secret,
            trigger.webhook_public,
            trigger.github_bot,
            trigger.target.encode(),
            trigger.prompt,
            trigger.task_type,
            json(&trigger.tags)?,
            trigger.priority,
            trigger.session_mode.as_str(),
            trigger.enabled,
            trigger.next_run_at.map(|at| at.unix_millis()),
            trigger.updated_at.unix_millis(),
            trigger.channel,
        ],
    )?;
    if updated == 0 {
        return Ok(None);
    }
    get_by_id(tx, trigger.id)
}

pub(crate) fn delete(tx: &Connection, id: TriggerId) -> StoreResult<bool> {
    let Some(trigger) = get_by_id(tx, id)? else {
        return Ok(false);
    };
    sql::execute(tx, "DELETE FROM trigger_sessions WHERE trigger_name = ?", [&trigger.name])?;
    // Its sessions are gone, so no result has a session to resume any more.
    sql::execute(tx, "DELETE FROM task_awaits WHERE trigger_name = ?", [&trigger.name])?;
    sql::execute(tx, "DELETE FROM webhook_deliveries WHERE trigger_id = ?", [id.to_string()])?;
    Ok(sql::execute(tx, "DELETE FROM triggers WHERE id = ?", [id.to_string()])? == 1)
}

pub(crate) fn fire(
    tx: &Connection,
    id: TriggerId,
    guard: FireGuard,
    delivery: Option<&DeliveryMark>,
    task: &NewTask,
    fired_at: Timestamp,
    now: Timestamp,
) -> StoreResult<FireOutcome> {
    let Some(trigger) = get_by_id(tx, id)? else {
        return Ok(FireOutcome::NotFound);
    };
    // The writer holds the write lock: nothing can mark this delivery between the
    // check and the insert below. A mark that expired does not count.
    if let Some(delivery) = delivery {
        let seen: bool = sql::scalar(
            tx,
            "SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE trigger_id = ?1 AND delivery_id = ?2
             AND (expires_at IS NULL OR expires_at > ?3))",
            params![id.to_string(), delivery.id, now.unix_millis()],
        )?;
        if seen {
            return Ok(FireOutcome::Duplicate);
        }
    }
    let updated = match guard {
        FireGuard::Slot { expected, next } => sql::execute(
            tx,
            "UPDATE triggers SET next_run_at = ?3, last_run_at = ?4, run_count = run_count + 1
             WHERE id = ?1 AND enabled = 1 AND next_run_at = ?2",
            params![
                id.to_string(),
                expected.unix_millis(),
                next.map(|at| at.unix_millis()),
                fired_at.unix_millis()
            ],
        )?,
        FireGuard::Event { require_enabled } => sql::execute(
            tx,
            "UPDATE triggers SET last_run_at = ?2, run_count = run_count + 1
             WHERE id = ?1 AND (enabled = 1 OR ?3 = 0)",
            params![id.to_string(), fired_at.unix_millis(), require_enabled],
        )?,
    };
    if updated == 0 {
        return Ok(match guard {
            FireGuard::Slot { .. } if trigger.enabled => FireOutcome::NotDue,
            _ => FireOutcome::Disabled,
        });
    }
    if let Some(delivery) = delivery {
        // Replaces an expired mark of the same id.
        sql::execute(
            tx,
            "INSERT OR REPLACE INTO webhook_deliveries (trigger_id, delivery_id, created_at, expires_at)
             VALUES (?1, ?2, ?3, ?4)",
            params![
                id.to_string(),
                delivery.id,
                now.unix_millis(),
                delivery.expires_at.map(|at| at.unix_millis())
            ],
        )?;
    }
    Ok(FireOutcome::Fired(Box::new(tasks::create(tx, task, now)?)))
}

pub(crate) fn session_get(
    connection: &Connection,
    name: &str,
    key: &str,
) -> StoreResult<Option<TriggerSession>> {
    sql::optional(
        connection,
        "SELECT trigger_name, session_key, session_id, updated_at FROM trigger_sessions
         WHERE trigger_name = ?1 AND session_key = ?2",
        params![name, key],
        session_from_row,
    )
}

pub(crate) fn session_set(
    tx: &Connection,
    name: &str,
    key: &str,
    session_id: &str,
    now: Timestamp,
) -> StoreResult<TriggerSession> {
    sql::execute(
        tx,
        "INSERT INTO trigger_sessions (trigger_name, session_key, session_id, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (trigger_name, session_key) DO UPDATE SET session_id = ?3, updated_at = ?4",
        params![name, key, session_id, now.unix_millis()],
    )?;
    session_get(tx, name, key)?.ok_or_else(|| corrupt("trigger session vanished".into()))
}

pub(crate) fn create_awaited(
    tx: &Connection,
    task: &NewTask,
    awaiting: &NewTaskAwait,
    now: Timestamp,
) -> StoreResult<Task> {
    let created = tasks::create(tx, task, now)?;
    let inserted = tx.execute(
        "INSERT INTO task_awaits (task_id, agent_id, parent_task_id, trigger_name, session_key, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            task.id.to_string(),
            awaiting.agent_id.to_string(),
            awaiting.parent_task_id.to_string(),
            awaiting.trigger_name,
            awaiting.session_key,
            now.unix_millis()
        ],
    );
    match inserted {
        Ok(_) => Ok(created),
        Err(error) if is_foreign_key_violation(&error) => {
            Err(StoreError::MissingReference("the awaiting agent or its trigger task does not exist".into()))
        }
        Err(error) => Err(db(error)),
    }
}

pub(crate) fn await_get(connection: &Connection, task_id: TaskId) -> StoreResult<Option<TaskAwait>> {
    sql::optional(
        connection,
        &format!("{SELECT_AWAIT} WHERE task_id = ?"),
        [task_id.to_string()],
        await_from_row,
    )
}

pub(crate) fn await_deliver(
    tx: &Connection,
    task_id: TaskId,
    agent: AgentId,
    now: Timestamp,
) -> StoreResult<bool> {
    let updated = sql::execute(
        tx,
        "UPDATE task_awaits SET delivered_at = ?3, processing_since = NULL, lease_expires_at = NULL
         WHERE task_id = ?1 AND agent_id = ?2 AND delivered_at IS NULL",
        params![task_id.to_string(), agent.to_string(), now.unix_millis()],
    )?;
    Ok(updated == 1)
}

/// The poll's `task_result`: the agent's oldest awaited task that finished, claimed
/// with `processing_since` and a lease.
pub(crate) fn claim_result(
    tx: &Connection,
    agent: AgentId,
    now: Timestamp,
    lease_until: Timestamp,
    runner: Option<&str>,
) -> StoreResult<Option<Trigger>> {
    let claimed = sql::optional(
        tx,
        "UPDATE task_awaits SET processing_since = ?2, lease_expires_at = ?3, lease_holder = ?4,
                                deliveries = deliveries + 1
         WHERE task_id = (
             SELECT w.task_id FROM task_awaits w JOIN tasks t ON t.id = w.task_id
             WHERE w.agent_id = ?1 AND w.delivered_at IS NULL AND w.processing_since IS NULL
               AND w.dead_lettered_at IS NULL
               AND (t.status = 'completed' OR t.status = 'failed' OR t.status = 'cancelled')
             ORDER BY t.finished_at, w.task_id LIMIT 1)
           AND processing_since IS NULL
         RETURNING task_id",
        params![agent.to_string(), now.unix_millis(), lease_until.unix_millis(), runner],
        |row| crate::rows::get_task_id(row, "task_id"),
    )?;
    let Some(task_id) = claimed else {
        return Ok(None);
    };
    let awaiting = await_get(tx, task_id)?.ok_or_else(|| corrupt(format!("await of {task_id} vanished")))?;
    let task = tasks::get_known(tx, task_id)?;
    let session = session_get(tx, &awaiting.trigger_name, &awaiting.session_key)?;
    Ok(Some(Trigger::TaskResult {
        task_id,
        task,
        parent_task_id: awaiting.parent_task_id,
        trigger_name: awaiting.trigger_name,
        session_key: awaiting.session_key,
        session_id: session.map(|session| session.session_id),
    }))
}

fn json<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|error| corrupt(error.to_string()))
}

fn from_row(row: &Row<'_>) -> StoreResult<TriggerDef> {
    let mut column = Columns::new(row);
    let id: String = column.take("id")?;
    let id = TriggerId::parse(&id).map_err(|error| corrupt(error.0))?;
    let name = column.take("name")?;
    let description = column.take("description")?;
    let kind: String = column.take("type")?;
    let kind = TriggerType::parse(&kind).map_err(|error| corrupt(error.0))?;
    let schedule = column.take("schedule")?;
    let timezone = column.take("timezone")?;
    let interval_ms = column.take("interval_ms")?;
    let run_at = column.opt_timestamp("run_at")?;
    let webhook_secret = column.take("webhook_secret")?;
    let webhook_public = column.bool("webhook_public")?;
    let github_bot = column.take("github_bot")?;
    let target: String = column.take("target")?;
    let target = TriggerTarget::parse(&target).map_err(|error| corrupt(error.0))?;
    let prompt = column.take("prompt")?;
    let task_type = column.take("task_type")?;
    let tags = column.strings("tags")?;
    let priority = column.take("priority")?;
    let session_mode: String = column.take("session_mode")?;
    let session_mode = SessionMode::parse(&session_mode).map_err(|error| corrupt(error.0))?;
    Ok(TriggerDef {
        id,
        name,
        description,
        kind,
        schedule,
        timezone,
        interval_ms,
        run_at,
        webhook_secret,
        webhook_public,
        github_bot,
        target,
        prompt,
        task_type,
        tags,
        priority,
        session_mode,
        enabled: column.bool("enabled")?,
        last_run_at: column.opt_timestamp("last_run_at")?,
        run_count: column.take("run_count")?,
        next_run_at: column.opt_timestamp("next_run_at")?,
        created_by: column.opt_agent_id("created_by")?,
        created_at: column.timestamp("created_at")?,
        updated_at: column.timestamp("updated_at")?,
        channel: column.take("channel")?,
    })
}

fn session_from_row(row: &Row<'_>) -> StoreResult<TriggerSession> {
    let mut column = Columns::new(row);
    Ok(TriggerSession {
        trigger_name: column.take("trigger_name")?,
        session_key: column.take("session_key")?,
        session_id: column.take("session_id")?,
        updated_at: column.timestamp("updated_at")?,
    })
}

fn await_from_row(row: &Row<'_>) -> StoreResult<TaskAwait> {
    let mut column = Columns::new(row);
    Ok(TaskAwait {
        task_id: column.task_id("task_id")?,
        agent_id: column.agent_id("agent_id")?,
        parent_task_id: column.task_id("parent_task_id")?,
        trigger_name: column.take("trigger_name")?,
        session_key: column.take("session_key")?,
        created_at: column.timestamp("created_at")?,
        delivered_at: column.opt_timestamp("delivered_at")?,
    })
}
