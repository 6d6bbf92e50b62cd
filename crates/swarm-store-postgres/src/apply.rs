//! Task transitions: one guarded `UPDATE` per [`TaskChange`], in one transaction with
//! its event log rows and the busy/idle status of the agents whose work changed.
//!
//! Why the locks: READ COMMITTED re-evaluates an `UPDATE`'s `WHERE` on the newest row
//! version, which makes the status guard safe on its own, but the capacity guard counts
//! *other* task rows. Two starts for one agent could both count the same in_progress
//! total and both pass. Every transaction that can move a task into `in_progress` for an
//! agent carries that agent in `capacity_of` and takes the agent's row lock before the
//! `UPDATE`, so they take turns and each counts what the previous one committed.

use sqlx::{PgConnection, PgPool, Postgres, QueryBuilder, Transaction};
use swarm_domain::{
    event::EventType,
    event::NewEvent,
    id::{AgentId, TaskId},
    task::{FieldUpdate, Task, TaskChange, TaskStatus},
    time::Timestamp,
};
use swarm_store::{
    Applied, StoreResult, TaskWaiters,
    sql::task_update::{self, Piece, Value},
};
use uuid::Uuid;

use crate::{
    agents::{self, Settle, Wake},
    error::db,
    events,
    rows::{task_from_row, task_select},
    tasks::get_known,
};

pub(crate) async fn apply(
    pool: &PgPool,
    id: TaskId,
    change: &TaskChange,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Applied<Task>> {
    let mut tx = pool.begin().await.map_err(db)?;
    let (applied, _) = apply_in(&mut tx, id, change, actor, now).await?;
    end(tx, &applied).await?;
    Ok(applied)
}

/// [`apply`], and the waiters of a task the change finished, read by the guarded
/// `UPDATE` itself: the finish needs no second round trip for them.
pub(crate) async fn apply_with_waiters(
    pool: &PgPool,
    id: TaskId,
    change: &TaskChange,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<(Applied<Task>, Option<TaskWaiters>)> {
    let mut tx = pool.begin().await.map_err(db)?;
    let (applied, waiters) = apply_in(&mut tx, id, change, actor, now).await?;
    let waiters = match &applied {
        Applied::Changed { after, .. } if after.status.is_finished() => waiters,
        _ => None,
    };
    end(tx, &applied).await?;
    Ok((applied, waiters))
}

/// Commit what changed; a refusal wrote nothing and only gives its locks back.
async fn end(tx: Transaction<'_, Postgres>, applied: &Applied<Task>) -> StoreResult<()> {
    match applied {
        Applied::Changed { .. } => tx.commit().await.map_err(db),
        Applied::NotFound | Applied::Refused { .. } => tx.rollback().await.map_err(db),
    }
}

/// The change and, when it was made, who waits for the task (read after the change, in
/// the same statement).
pub(crate) async fn apply_in(
    tx: &mut PgConnection,
    id: TaskId,
    change: &TaskChange,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<(Applied<Task>, Option<TaskWaiters>)> {
    let new_assignee = match change.updates.agent_id {
        FieldUpdate::Set(agent) => Some(agent),
        FieldUpdate::Keep | FieldUpdate::Clear => None,
    };
    let Some(before) = lock_task_and_agents(tx, id, change.guard.capacity_of, new_assignee).await? else {
        return Ok((Applied::NotFound, None));
    };

    let mut update = guarded_update(id, change, now);
    let changed: Option<(Uuid, bool, Option<Uuid>, bool)> =
        update.build_query_as().fetch_optional(&mut *tx).await.map_err(db)?;
    let Some((_, has_dependents, awaiting_agent, assignee_mail_pending)) = changed else {
        return Ok((Applied::Refused { current: before }, None));
    };
    let waiters = TaskWaiters {
        has_dependents,
        awaiting_agent: awaiting_agent.map(AgentId::from_uuid),
        assignee_mail_pending,
    };

    let after = change.applied_to(&before, now);
    #[cfg(debug_assertions)]
    {
        // Every test run checks that the row and its in-memory image agree.
        let stored = crate::tasks::get(&mut *tx, id).await?;
        debug_assert_eq!(Some(&after), stored.as_ref(), "the stored task differs from its image");
    }
    let mut logged = change.events(id, actor, before.status);
    // Only an agent whose in_progress work this moved can change between busy and idle.
    let holder = |task: &Task| task.agent_id.filter(|_| task.status == TaskStatus::InProgress);
    let (gave, took) = (holder(&before), holder(&after));
    let moved: Vec<AgentId> =
        if gave == took { Vec::new() } else { [gave, took].into_iter().flatten().collect() };
    let settle = Settle { status: Some(Wake::No), clear_reason: false };
    match moved.split_last() {
        // The last settle writes every event of the transaction with its own.
        Some((last, others)) => {
            for agent in others {
                logged.extend(agents::settle(tx, *agent, now, settle).await?);
            }
            agents::settle_and_log(tx, *last, now, settle, &logged).await?;
        }
        None => events::insert_all(tx, &logged, now).await?,
    }
    Ok((Applied::Changed { before, after }, Some(waiters)))
}

/// The change's guarded update ([`task_update::plan`]) with PostgreSQL's placeholders
/// and column types. It returns the id, so that a refusal is told from a change, and who
/// waits for the task.
fn guarded_update(id: TaskId, change: &TaskChange, now: Timestamp) -> QueryBuilder<Postgres> {
    let mut query = QueryBuilder::<Postgres>::new("");
    for piece in task_update::plan(id, change, now) {
        match piece {
            Piece::Sql(text) => {
                query.push(text);
            }
            Piece::Bind(Value::Status(status)) => {
                query.push_bind(status.as_str());
            }
            Piece::Bind(Value::Time(at)) => {
                query.push_bind(at.datetime());
            }
            Piece::Bind(Value::Agent(agent)) => {
                query.push_bind(agent.as_uuid());
            }
            Piece::Bind(Value::Task(task)) => {
                query.push_bind(task.as_uuid());
            }
            Piece::Bind(Value::Bool(yes)) => {
                query.push_bind(yes);
            }
            Piece::Bind(Value::Text(text)) => {
                query.push_bind(text);
            }
            Piece::StatusIn(statuses) => {
                let names: Vec<&str> = statuses.iter().map(TaskStatus::as_str).collect();
                query.push("status = ANY(").push_bind(names).push(")");
            }
        }
    }
    query.push(concat!(
        " RETURNING id, \
         EXISTS (SELECT 1 FROM task_dependencies WHERE depends_on_task_id = tasks.id), \
         (SELECT agent_id FROM task_awaits WHERE task_id = tasks.id), ",
        assignee_mail_pending!()
    ));
    query
}

/// Guarded by the task not being finished (finished is final: a late note must not
/// revive it) and, when given, by the assignee.
pub(crate) async fn set_progress(
    pool: &PgPool,
    id: TaskId,
    progress: &str,
    assignee: Option<AgentId>,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Applied<Task>> {
    let mut tx = pool.begin().await.map_err(db)?;
    let Some(before) = lock_task(&mut tx, id).await? else {
        return Ok(Applied::NotFound);
    };
    let finished: Vec<&str> = TaskStatus::FINISHED.iter().map(TaskStatus::as_str).collect();
    let changed: Option<Uuid> = sqlx::query_scalar(
        "UPDATE tasks SET progress = $2, last_updated_at = $3 \
         WHERE id = $1 AND status <> ALL($5) \
           AND ($4::uuid IS NULL OR agent_id = $4) \
         RETURNING id",
    )
    .bind(id.as_uuid())
    .bind(progress)
    .bind(now.datetime())
    .bind(assignee.map(|agent| agent.as_uuid()))
    .bind(finished)
    .fetch_optional(&mut *tx)
    .await
    .map_err(db)?;
    if changed.is_none() {
        tx.rollback().await.map_err(db)?;
        return Ok(Applied::Refused { current: before });
    }
    let noted = NewEvent::change(EventType::TaskProgress, actor, Some(id), None, Some(progress));
    events::insert(&mut tx, &noted, now).await?;
    let after = get_known(&mut tx, id).await?;
    tx.commit().await.map_err(db)?;
    Ok(Applied::Changed { before, after })
}

/// Guarded by the status: only a task nobody has taken up may change its text.
pub(crate) async fn edit_text(
    pool: &PgPool,
    id: TaskId,
    text: &str,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Applied<Task>> {
    let mut tx = pool.begin().await.map_err(db)?;
    let Some(before) = lock_task(&mut tx, id).await? else {
        return Ok(Applied::NotFound);
    };
    let editable: Vec<&str> = TaskStatus::EDITABLE.iter().map(TaskStatus::as_str).collect();
    let changed: Option<Uuid> = sqlx::query_scalar(
        "UPDATE tasks SET task = $2, last_updated_at = $3 WHERE id = $1 AND status = ANY($4) RETURNING id",
    )
    .bind(id.as_uuid())
    .bind(text)
    .bind(now.datetime())
    .bind(editable)
    .fetch_optional(&mut *tx)
    .await
    .map_err(db)?;
    if changed.is_none() {
        tx.rollback().await.map_err(db)?;
        return Ok(Applied::Refused { current: before });
    }
    let edited = NewEvent::change(EventType::TaskEdited, actor, Some(id), None, None);
    events::insert(&mut tx, &edited, now).await?;
    let after = get_known(&mut tx, id).await?;
    tx.commit().await.map_err(db)?;
    Ok(Applied::Changed { before, after })
}

pub(crate) async fn set_priority(
    pool: &PgPool,
    id: TaskId,
    priority: i32,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Applied<Task>> {
    let mut tx = pool.begin().await.map_err(db)?;
    let Some(before) = lock_task(&mut tx, id).await? else {
        return Ok(Applied::NotFound);
    };
    let finished: Vec<&str> = TaskStatus::FINISHED.iter().map(TaskStatus::as_str).collect();
    let changed: Option<Uuid> = sqlx::query_scalar(
        "UPDATE tasks SET priority = $2, last_updated_at = $3 WHERE id = $1 AND NOT (status = ANY($4)) RETURNING id",
    )
    .bind(id.as_uuid())
    .bind(priority)
    .bind(now.datetime())
    .bind(finished)
    .fetch_optional(&mut *tx)
    .await
    .map_err(db)?;
    if changed.is_none() {
        tx.rollback().await.map_err(db)?;
        return Ok(Applied::Refused { current: before });
    }
    let (old, new) = (before.priority.to_string(), priority.to_string());
    let edited = NewEvent::change(EventType::TaskEdited, actor, Some(id), Some(&old), Some(&new));
    events::insert(&mut tx, &edited, now).await?;
    let after = get_known(&mut tx, id).await?;
    tx.commit().await.map_err(db)?;
    Ok(Applied::Changed { before, after })
}

/// The task as it stands, its row locked until the transaction ends, and then, in the
/// same statement, every agent row the change may write or must count for (`capacity_of`,
/// the assignee before, `new_assignee`), in id order: the capacity guard and the status
/// updates that follow then cannot deadlock, and the crate's lock order (task rows
/// before agent rows) holds. One round trip instead of two. The guarded `UPDATE` that
/// counts the agent's work is a later statement, so it reads with a snapshot taken after
/// these locks were granted.
async fn lock_task_and_agents(
    tx: &mut PgConnection,
    id: TaskId,
    capacity_of: Option<AgentId>,
    new_assignee: Option<AgentId>,
) -> StoreResult<Option<Task>> {
    // MATERIALIZED, and the agents' CTE read by the outer query: a CTE that is not read
    // is never run, and its locks would not be taken.
    sqlx::query(concat!(
        "WITH locked AS MATERIALIZED (",
        task_select!(),
        " WHERE t.id = $1 FOR NO KEY UPDATE OF t), \
         involved AS MATERIALIZED ( \
             SELECT a.id FROM agents a \
             WHERE a.id = ANY(ARRAY[$2::uuid, $3::uuid, (SELECT agent_id FROM locked)]) \
             ORDER BY a.id FOR NO KEY UPDATE) \
         SELECT locked.*, (SELECT count(*) FROM involved) AS agents_locked FROM locked"
    ))
    .bind(id.as_uuid())
    .bind(capacity_of.map(|agent| agent.as_uuid()))
    .bind(new_assignee.map(|agent| agent.as_uuid()))
    .try_map(task_from_row)
    .fetch_optional(tx)
    .await
    .map_err(db)
}

/// The task as it stands, its row locked until the transaction ends, so the guarded
/// update that follows sees no concurrent change to it.
async fn lock_task(tx: &mut sqlx::PgConnection, id: TaskId) -> StoreResult<Option<Task>> {
    sqlx::query(concat!(task_select!(), " WHERE t.id = $1 FOR NO KEY UPDATE OF t"))
        .bind(id.as_uuid())
        .try_map(task_from_row)
        .fetch_optional(tx)
        .await
        .map_err(db)
}
