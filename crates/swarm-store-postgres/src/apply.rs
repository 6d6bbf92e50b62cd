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
use swarm_store::{Applied, StoreResult, TaskWaiters};
use uuid::Uuid;

use crate::{
    agents::{self, Wake},
    error::db,
    events,
    rows::{task_from_row, task_select},
    tasks::{self, get_known},
};

pub(crate) async fn apply(
    pool: &PgPool,
    id: TaskId,
    change: &TaskChange,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Applied<Task>> {
    let mut tx = pool.begin().await.map_err(db)?;
    let applied = apply_in(&mut tx, id, change, actor, now).await?;
    end(tx, &applied).await?;
    Ok(applied)
}

/// [`apply`], and the waiters of a task the change finished, read in the same
/// transaction: the finish needs no second round trip for them.
pub(crate) async fn apply_with_waiters(
    pool: &PgPool,
    id: TaskId,
    change: &TaskChange,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<(Applied<Task>, Option<TaskWaiters>)> {
    let mut tx = pool.begin().await.map_err(db)?;
    let applied = apply_in(&mut tx, id, change, actor, now).await?;
    let waiters = match &applied {
        Applied::Changed { after, .. } if after.status.is_finished() => {
            Some(tasks::waiters(&mut *tx, id).await?)
        }
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

async fn apply_in(
    tx: &mut PgConnection,
    id: TaskId,
    change: &TaskChange,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Applied<Task>> {
    let Some(before) = lock_task(tx, id).await? else {
        return Ok(Applied::NotFound);
    };

    let assignee_after = match change.updates.agent_id {
        FieldUpdate::Keep => before.agent_id,
        FieldUpdate::Set(agent) => Some(agent),
        FieldUpdate::Clear => None,
    };
    // Every agent row this transaction may write or must count for, locked up front in
    // id order: the capacity guard and the status updates below then cannot deadlock.
    let mut involved: Vec<AgentId> =
        [change.guard.capacity_of, before.agent_id, assignee_after].into_iter().flatten().collect();
    agents::lock_in_order(tx, &mut involved).await?;

    let mut update = guarded_update(id, change, now);
    let changed: Option<Uuid> = update.build_query_scalar().fetch_optional(&mut *tx).await.map_err(db)?;
    if changed.is_none() {
        return Ok(Applied::Refused { current: before });
    }

    for event in change.events(id, actor, before.status) {
        events::insert(tx, &event, now).await?;
    }
    let mut assignees: Vec<AgentId> = [before.agent_id, assignee_after].into_iter().flatten().collect();
    assignees.dedup();
    for agent in assignees {
        agents::settle_status(tx, agent, now, Wake::No).await?;
    }

    let after = get_known(tx, id).await?;
    Ok(Applied::Changed { before, after })
}

/// `UPDATE tasks SET <to, updates> WHERE id AND status IN <from> AND <guard> RETURNING id`.
/// The shape follows the change; every value is a bound parameter.
fn guarded_update(id: TaskId, change: &TaskChange, now: Timestamp) -> QueryBuilder<Postgres> {
    let updates = &change.updates;
    let mut query = QueryBuilder::<Postgres>::new("UPDATE tasks SET status = ");
    query.push_bind(change.to.as_str());
    query.push(", last_updated_at = ").push_bind(now.datetime());
    match updates.agent_id {
        FieldUpdate::Keep => {}
        FieldUpdate::Set(agent) => {
            query.push(", agent_id = ").push_bind(agent.as_uuid());
        }
        FieldUpdate::Clear => {
            query.push(", agent_id = NULL");
        }
    }
    match updates.offered_to {
        FieldUpdate::Keep => {}
        FieldUpdate::Set(agent) => {
            query.push(", offered_to = ").push_bind(agent.as_uuid());
        }
        FieldUpdate::Clear => {
            query.push(", offered_to = NULL");
        }
    }
    if updates.set_accepted_at {
        query.push(", accepted_at = ").push_bind(now.datetime());
    }
    if updates.set_finished_at {
        query.push(", finished_at = ").push_bind(now.datetime());
    }
    match updates.lease_expires_at {
        FieldUpdate::Keep => {}
        FieldUpdate::Set(until) => {
            query.push(", lease_expires_at = ").push_bind(until.datetime());
        }
        FieldUpdate::Clear => {
            query.push(", lease_expires_at = NULL");
        }
    }
    if let Some(from_pool) = updates.from_pool {
        query.push(", from_pool = ").push_bind(from_pool);
    }
    if let Some(output) = &updates.output {
        query.push(", output = ").push_bind(output.clone());
    }
    if let Some(reason) = &updates.failure_reason {
        query.push(", failure_reason = ").push_bind(reason.clone());
    }
    if let Some(reason) = &updates.rejection_reason {
        query.push(", rejection_reason = ").push_bind(reason.clone());
    }

    let from: Vec<&str> = change.from.iter().map(TaskStatus::as_str).collect();
    query.push(" WHERE id = ").push_bind(id.as_uuid());
    query.push(" AND status = ANY(").push_bind(from).push(")");
    let guard = &change.guard;
    if let Some(assignee) = guard.assignee {
        query.push(" AND agent_id = ").push_bind(assignee.as_uuid());
    }
    if let Some(offered_to) = guard.offered_to {
        query.push(" AND offered_to = ").push_bind(offered_to.as_uuid());
    }
    if guard.dependencies_completed {
        query.push(
            " AND NOT EXISTS (SELECT 1 FROM task_dependencies d \
              JOIN tasks dt ON dt.id = d.depends_on_task_id \
              WHERE d.task_id = tasks.id AND dt.status <> 'completed')",
        );
    }
    if let Some(agent) = guard.capacity_of {
        query
            .push(" AND (SELECT count(*) FROM tasks c WHERE c.agent_id = ")
            .push_bind(agent.as_uuid())
            .push(" AND c.status = 'in_progress') < (SELECT a.max_tasks FROM agents a WHERE a.id = ")
            .push_bind(agent.as_uuid())
            .push(")");
    }
    query.push(" RETURNING id");
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
    let changed: Option<Uuid> = sqlx::query_scalar(
        "UPDATE tasks SET progress = $2, last_updated_at = $3 \
         WHERE id = $1 AND status NOT IN ('completed', 'failed', 'cancelled') \
           AND ($4::uuid IS NULL OR agent_id = $4) \
         RETURNING id",
    )
    .bind(id.as_uuid())
    .bind(progress)
    .bind(now.datetime())
    .bind(assignee.map(|agent| agent.as_uuid()))
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
