//! Triggers, their sessions, awaited tasks and the `task_result` claim. A firing is
//! one transaction: the guarded `UPDATE` of the trigger (`WHERE next_run_at = <the slot
//! read>` for a scheduled slot: of two replicas that saw the slot due, the second waits
//! on the row lock, then finds the slot moved and updates nothing), the delivery mark,
//! and the task.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor, PgPool, Row, postgres::PgRow};
use swarm_domain::{
    id::{AgentId, TaskId, TriggerId},
    poll::Trigger,
    task::{NewTask, Task},
    time::Timestamp,
    trigger::{SessionMode, TaskAwait, TriggerDef, TriggerSession, TriggerTarget, TriggerType},
};
use swarm_store::{DeliveryMark, FireGuard, FireOutcome, NewTaskAwait, StoreError, StoreResult};
use uuid::Uuid;

use crate::{
    error::{corrupt, db, vanished},
    events, tasks,
};

macro_rules! trigger_select {
    () => {
        "SELECT id, name, description, type, schedule, timezone, interval_ms, run_at, \
         webhook_secret, webhook_public, github_bot, target, prompt, task_type, tags, priority, \
         session_mode, enabled, last_run_at, run_count, next_run_at, created_by, created_at, updated_at, \
         channel \
         FROM triggers"
    };
}

macro_rules! await_select {
    () => {
        "SELECT task_id, agent_id, parent_task_id, trigger_name, session_key, created_at, delivered_at \
         FROM task_awaits"
    };
}

pub(crate) async fn create(pool: &PgPool, trigger: &TriggerDef) -> StoreResult<TriggerDef> {
    let inserted = sqlx::query(
        "INSERT INTO triggers (id, name, description, type, schedule, timezone, interval_ms, run_at, \
             webhook_secret, webhook_public, github_bot, target, prompt, task_type, tags, priority, \
             session_mode, enabled, last_run_at, run_count, next_run_at, created_by, created_at, updated_at, \
             channel) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, \
                 $21, $22, $23, $24, $25) \
         ON CONFLICT (name) DO NOTHING",
    )
    .bind(trigger.id.as_uuid())
    .bind(&trigger.name)
    .bind(trigger.description.as_deref())
    .bind(trigger.kind.as_str())
    .bind(trigger.schedule.as_deref())
    .bind(&trigger.timezone)
    .bind(trigger.interval_ms)
    .bind(trigger.run_at.map(|at| at.datetime()))
    .bind(trigger.webhook_secret.as_deref())
    .bind(trigger.webhook_public)
    .bind(trigger.github_bot.as_deref())
    .bind(trigger.target.encode())
    .bind(&trigger.prompt)
    .bind(trigger.task_type.as_deref())
    .bind(&trigger.tags)
    .bind(trigger.priority)
    .bind(trigger.session_mode.as_str())
    .bind(trigger.enabled)
    .bind(trigger.last_run_at.map(|at| at.datetime()))
    .bind(trigger.run_count)
    .bind(trigger.next_run_at.map(|at| at.datetime()))
    .bind(trigger.created_by.map(|id| id.as_uuid()))
    .bind(trigger.created_at.datetime())
    .bind(trigger.updated_at.datetime())
    .bind(trigger.channel.as_deref())
    .execute(pool)
    .await
    .map_err(db)?;
    if inserted.rows_affected() == 0 {
        return Err(StoreError::Conflict(format!("a trigger named {:?} exists", trigger.name)));
    }
    get_by_id(pool, trigger.id).await?.ok_or_else(|| vanished("trigger", trigger.id))
}

pub(crate) async fn get<'e>(executor: impl PgExecutor<'e>, name: &str) -> StoreResult<Option<TriggerDef>> {
    sqlx::query(concat!(trigger_select!(), " WHERE name = $1"))
        .bind(name)
        .try_map(from_row)
        .fetch_optional(executor)
        .await
        .map_err(db)
}

pub(crate) async fn get_by_id<'e>(
    executor: impl PgExecutor<'e>,
    id: TriggerId,
) -> StoreResult<Option<TriggerDef>> {
    sqlx::query(concat!(trigger_select!(), " WHERE id = $1"))
        .bind(id.as_uuid())
        .try_map(from_row)
        .fetch_optional(executor)
        .await
        .map_err(db)
}

pub(crate) async fn list(pool: &PgPool) -> StoreResult<Vec<TriggerDef>> {
    sqlx::query(concat!(trigger_select!(), " ORDER BY name"))
        .try_map(from_row)
        .fetch_all(pool)
        .await
        .map_err(db)
}

pub(crate) async fn due(pool: &PgPool, now: Timestamp, limit: i64) -> StoreResult<Vec<TriggerDef>> {
    sqlx::query(concat!(
        trigger_select!(),
        " WHERE enabled AND next_run_at IS NOT NULL AND next_run_at <= $1 ORDER BY next_run_at, id LIMIT $2"
    ))
    .bind(now.datetime())
    .bind(limit)
    .try_map(from_row)
    .fetch_all(pool)
    .await
    .map_err(db)
}

pub(crate) async fn update(pool: &PgPool, trigger: &TriggerDef) -> StoreResult<Option<TriggerDef>> {
    let updated = sqlx::query(
        "UPDATE triggers SET description = $2, schedule = $3, timezone = $4, interval_ms = $5, \
             run_at = $6, webhook_secret = $7, webhook_public = $8, github_bot = $9, target = $10, \
             prompt = $11, task_type = $12, tags = $13, priority = $14, session_mode = $15, \
             enabled = $16, next_run_at = $17, updated_at = $18, channel = $19 \
         WHERE id = $1",
    )
    .bind(trigger.id.as_uuid())
    .bind(trigger.description.as_deref())
    .bind(trigger.schedule.as_deref())
    .bind(&trigger.timezone)
    .bind(trigger.interval_ms)
    .bind(trigger.run_at.map(|at| at.datetime()))
    .bind(trigger.webhook_secret.as_deref())
    .bind(trigger.webhook_public)
    .bind(trigger.github_bot.as_deref())
    .bind(trigger.target.encode())
    .bind(&trigger.prompt)
    .bind(trigger.task_type.as_deref())
    .bind(&trigger.tags)
    .bind(trigger.priority)
    .bind(trigger.session_mode.as_str())
    .bind(trigger.enabled)
    .bind(trigger.next_run_at.map(|at| at.datetime()))
    .bind(trigger.updated_at.datetime())
    .bind(trigger.channel.as_deref())
    .execute(pool)
    .await
    .map_err(db)?;
    if updated.rows_affected() == 0 {
        return Ok(None);
    }
    get_by_id(pool, trigger.id).await
}

pub(crate) async fn delete(pool: &PgPool, id: TriggerId) -> StoreResult<bool> {
    let mut tx = pool.begin().await.map_err(db)?;
    let deleted: Option<(String,)> = sqlx::query_as("DELETE FROM triggers WHERE id = $1 RETURNING name")
        .bind(id.as_uuid())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
    let Some((name,)) = deleted else {
        return Ok(false);
    };
    sqlx::query("DELETE FROM trigger_sessions WHERE trigger_name = $1")
        .bind(&name)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    // Its sessions are gone, so no result has a session to resume any more.
    sqlx::query("DELETE FROM task_awaits WHERE trigger_name = $1")
        .bind(&name)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    sqlx::query("DELETE FROM webhook_deliveries WHERE trigger_id = $1")
        .bind(id.as_uuid())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    tx.commit().await.map_err(db)?;
    Ok(true)
}

pub(crate) async fn fire(
    pool: &PgPool,
    id: TriggerId,
    guard: FireGuard,
    delivery: Option<&DeliveryMark>,
    task: &NewTask,
    fired_at: Timestamp,
    now: Timestamp,
) -> StoreResult<FireOutcome> {
    let mut tx = pool.begin().await.map_err(db)?;
    // The mark first: a concurrent delivery of the same id waits on it, then finds it.
    // An expired mark is taken over; a live one leaves the row as it is (no row updated).
    if let Some(delivery) = delivery {
        let marked = sqlx::query(
            "INSERT INTO webhook_deliveries (trigger_id, delivery_id, created_at, expires_at) \
             VALUES ($1, $2, $3, $4) \
             ON CONFLICT (trigger_id, delivery_id) DO UPDATE \
             SET created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at \
             WHERE webhook_deliveries.expires_at IS NOT NULL AND webhook_deliveries.expires_at <= $3",
        )
        .bind(id.as_uuid())
        .bind(&delivery.id)
        .bind(now.datetime())
        .bind(delivery.expires_at.map(|at| at.datetime()))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        if marked.rows_affected() == 0 {
            return Ok(FireOutcome::Duplicate);
        }
    }
    let updated = match guard {
        FireGuard::Slot { expected, next } => sqlx::query(
            "UPDATE triggers SET next_run_at = $3, last_run_at = $4, run_count = run_count + 1 \
             WHERE id = $1 AND enabled AND next_run_at = $2",
        )
        .bind(id.as_uuid())
        .bind(expected.datetime())
        .bind(next.map(|at| at.datetime()))
        .bind(fired_at.datetime()),
        FireGuard::Event { require_enabled } => sqlx::query(
            "UPDATE triggers SET last_run_at = $2, run_count = run_count + 1 \
             WHERE id = $1 AND (enabled OR NOT $3)",
        )
        .bind(id.as_uuid())
        .bind(fired_at.datetime())
        .bind(require_enabled),
    }
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    if updated.rows_affected() == 0 {
        tx.rollback().await.map_err(db)?;
        return Ok(match get_by_id(pool, id).await? {
            None => FireOutcome::NotFound,
            Some(trigger) if trigger.enabled && matches!(guard, FireGuard::Slot { .. }) => {
                FireOutcome::NotDue
            }
            Some(_) => FireOutcome::Disabled,
        });
    }
    let created = insert_task(&mut tx, task, now).await?;
    tx.commit().await.map_err(db)?;
    Ok(FireOutcome::Fired(Box::new(created)))
}

async fn insert_task(tx: &mut PgConnection, task: &NewTask, now: Timestamp) -> StoreResult<Task> {
    tasks::insert(&mut *tx, task, now).await.map_err(db)?;
    for event in task.creation_events() {
        events::insert(&mut *tx, &event, now).await?;
    }
    tasks::get_known(&mut *tx, task.id).await
}

pub(crate) async fn session_get<'e>(
    executor: impl PgExecutor<'e>,
    name: &str,
    key: &str,
) -> StoreResult<Option<TriggerSession>> {
    sqlx::query(
        "SELECT trigger_name, session_key, session_id, updated_at FROM trigger_sessions \
         WHERE trigger_name = $1 AND session_key = $2",
    )
    .bind(name)
    .bind(key)
    .try_map(session_from_row)
    .fetch_optional(executor)
    .await
    .map_err(db)
}

pub(crate) async fn session_set(
    pool: &PgPool,
    name: &str,
    key: &str,
    session_id: &str,
    now: Timestamp,
) -> StoreResult<TriggerSession> {
    sqlx::query(
        "INSERT INTO trigger_sessions (trigger_name, session_key, session_id, updated_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (trigger_name, session_key) DO UPDATE SET session_id = $3, updated_at = $4 \
         RETURNING trigger_name, session_key, session_id, updated_at",
    )
    .bind(name)
    .bind(key)
    .bind(session_id)
    .bind(now.datetime())
    .try_map(session_from_row)
    .fetch_one(pool)
    .await
    .map_err(db)
}

pub(crate) async fn create_awaited(
    pool: &PgPool,
    task: &NewTask,
    awaiting: &NewTaskAwait,
    now: Timestamp,
) -> StoreResult<Task> {
    let mut tx = pool.begin().await.map_err(db)?;
    let created = insert_task(&mut tx, task, now).await?;
    sqlx::query(
        "INSERT INTO task_awaits (task_id, agent_id, parent_task_id, trigger_name, session_key, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(task.id.as_uuid())
    .bind(awaiting.agent_id.as_uuid())
    .bind(awaiting.parent_task_id.as_uuid())
    .bind(&awaiting.trigger_name)
    .bind(&awaiting.session_key)
    .bind(now.datetime())
    .execute(&mut *tx)
    .await
    .map_err(|error| match db(error) {
        StoreError::MissingReference(_) => {
            StoreError::MissingReference("the awaiting agent or its trigger task does not exist".into())
        }
        other => other,
    })?;
    tx.commit().await.map_err(db)?;
    Ok(created)
}

pub(crate) async fn await_get<'e>(
    executor: impl PgExecutor<'e>,
    task_id: TaskId,
) -> StoreResult<Option<TaskAwait>> {
    sqlx::query(concat!(await_select!(), " WHERE task_id = $1"))
        .bind(task_id.as_uuid())
        .try_map(await_from_row)
        .fetch_optional(executor)
        .await
        .map_err(db)
}

pub(crate) async fn await_deliver(
    pool: &PgPool,
    task_id: TaskId,
    agent: AgentId,
    now: Timestamp,
) -> StoreResult<bool> {
    let updated = sqlx::query(
        "UPDATE task_awaits SET delivered_at = $3, processing_since = NULL, lease_expires_at = NULL \
         WHERE task_id = $1 AND agent_id = $2 AND delivered_at IS NULL",
    )
    .bind(task_id.as_uuid())
    .bind(agent.as_uuid())
    .bind(now.datetime())
    .execute(pool)
    .await
    .map_err(db)?;
    Ok(updated.rows_affected() == 1)
}

/// The poll's `task_result`: the agent's oldest awaited task that finished, claimed with
/// `processing_since` and a lease (`SKIP LOCKED`: concurrent polls take different rows).
pub(crate) async fn claim_result(
    tx: &mut PgConnection,
    agent: AgentId,
    now: Timestamp,
    lease_until: Timestamp,
    runner: Option<Uuid>,
) -> StoreResult<Option<Trigger>> {
    let claimed: Option<(Uuid,)> = sqlx::query_as(
        "UPDATE task_awaits SET processing_since = $2, lease_expires_at = $3, lease_holder = $4, \
                                deliveries = deliveries + 1 \
         WHERE task_id = ( \
             SELECT w.task_id FROM task_awaits w JOIN tasks t ON t.id = w.task_id \
             WHERE w.agent_id = $1 AND w.delivered_at IS NULL AND w.processing_since IS NULL \
               AND w.dead_lettered_at IS NULL \
               AND t.status IN ('completed', 'failed', 'cancelled') \
             ORDER BY t.finished_at, w.task_id LIMIT 1 FOR UPDATE OF w SKIP LOCKED) \
           AND processing_since IS NULL \
         RETURNING task_id",
    )
    .bind(agent.as_uuid())
    .bind(now.datetime())
    .bind(lease_until.datetime())
    .bind(runner)
    .fetch_optional(&mut *tx)
    .await
    .map_err(db)?;
    let Some((task_id,)) = claimed else {
        return Ok(None);
    };
    let task_id = TaskId::from_uuid(task_id);
    let awaiting = await_get(&mut *tx, task_id).await?.ok_or_else(|| vanished("task await", task_id))?;
    let task = tasks::get_known(&mut *tx, task_id).await?;
    let session = session_get(&mut *tx, &awaiting.trigger_name, &awaiting.session_key).await?;
    Ok(Some(Trigger::TaskResult {
        task_id,
        task,
        parent_task_id: awaiting.parent_task_id,
        trigger_name: awaiting.trigger_name,
        session_key: awaiting.session_key,
        session_id: session.map(|session| session.session_id),
    }))
}

fn at(row: &PgRow, column: &str) -> sqlx::Result<Option<Timestamp>> {
    let at: Option<DateTime<Utc>> = row.try_get(column)?;
    Ok(at.map(Timestamp::from_datetime))
}

fn at_required(row: &PgRow, column: &str) -> sqlx::Result<Timestamp> {
    let at: DateTime<Utc> = row.try_get(column)?;
    Ok(Timestamp::from_datetime(at))
}

fn from_row(row: PgRow) -> sqlx::Result<TriggerDef> {
    let kind: String = row.try_get("type")?;
    let target: String = row.try_get("target")?;
    let session_mode: String = row.try_get("session_mode")?;
    let created_by: Option<Uuid> = row.try_get("created_by")?;
    Ok(TriggerDef {
        id: TriggerId::from_uuid(row.try_get("id")?),
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        kind: TriggerType::parse(&kind).map_err(|error| corrupt("type", error))?,
        schedule: row.try_get("schedule")?,
        timezone: row.try_get("timezone")?,
        interval_ms: row.try_get("interval_ms")?,
        run_at: at(&row, "run_at")?,
        webhook_secret: row.try_get("webhook_secret")?,
        webhook_public: row.try_get("webhook_public")?,
        github_bot: row.try_get("github_bot")?,
        target: TriggerTarget::parse(&target).map_err(|error| corrupt("target", error))?,
        prompt: row.try_get("prompt")?,
        task_type: row.try_get("task_type")?,
        tags: row.try_get("tags")?,
        priority: row.try_get("priority")?,
        session_mode: SessionMode::parse(&session_mode).map_err(|error| corrupt("session_mode", error))?,
        enabled: row.try_get("enabled")?,
        last_run_at: at(&row, "last_run_at")?,
        run_count: row.try_get("run_count")?,
        next_run_at: at(&row, "next_run_at")?,
        created_by: created_by.map(AgentId::from_uuid),
        created_at: at_required(&row, "created_at")?,
        updated_at: at_required(&row, "updated_at")?,
        channel: row.try_get("channel")?,
    })
}

fn session_from_row(row: PgRow) -> sqlx::Result<TriggerSession> {
    Ok(TriggerSession {
        trigger_name: row.try_get("trigger_name")?,
        session_key: row.try_get("session_key")?,
        session_id: row.try_get("session_id")?,
        updated_at: at_required(&row, "updated_at")?,
    })
}

fn await_from_row(row: PgRow) -> sqlx::Result<TaskAwait> {
    Ok(TaskAwait {
        task_id: TaskId::from_uuid(row.try_get("task_id")?),
        agent_id: AgentId::from_uuid(row.try_get("agent_id")?),
        parent_task_id: TaskId::from_uuid(row.try_get("parent_task_id")?),
        trigger_name: row.try_get("trigger_name")?,
        session_key: row.try_get("session_key")?,
        created_at: at_required(&row, "created_at")?,
        delivered_at: at(&row, "delivered_at")?,
    })
}
