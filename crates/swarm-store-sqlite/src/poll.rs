//! The poll: one read to see whether anything waits for an agent, then one write
//! transaction that claims the first kind that has something. Writes are serialized on
//! the one write connection (`BEGIN IMMEDIATE`), so each claim's select-then-update is
//! atomic: two polls can never claim the same row.

use sqlx::{SqliteConnection, SqlitePool};
use swarm_domain::{
    agent::AgentStatus,
    id::AgentId,
    poll::{TASKS_FINISHED_MAX, Trigger, TriggerKind},
    time::Timestamp,
};
use swarm_store::{PollView, StoreResult};

use crate::{
    SqliteStore,
    agents::{self, Wake},
    decode::{corrupt, db, task_id},
    events,
    tasks::get_known,
};

/// Appended to a query over `tasks t`: every dependency of `t` is completed.
macro_rules! ready {
    () => {
        " NOT EXISTS (SELECT 1 FROM task_dependencies d JOIN tasks dt ON dt.id = d.depends_on_task_id
                      WHERE d.task_id = t.id AND dt.status <> 'completed')"
    };
}

/// A finished task whose assignee is not a lead: what `tasks_finished` reports.
macro_rules! unnotified_worker_task {
    () => {
        " t.notified_at IS NULL AND t.status IN ('completed', 'failed')
          AND NOT EXISTS (SELECT 1 FROM agents l WHERE l.id = t.agent_id AND l.is_lead = 1)"
    };
}

/// The agent's free slot, checked inside the claim's `UPDATE`; `?1` is the agent.
macro_rules! has_capacity {
    () => {
        " (SELECT count(*) FROM tasks c WHERE c.agent_id = ?1 AND c.status = 'in_progress')
          < (SELECT max_tasks FROM agents WHERE id = ?1)"
    };
}

type ViewRow = (bool, String, i64, i64, i64, bool, bool, bool, bool);

pub(crate) async fn view(pool: &SqlitePool, agent: AgentId) -> StoreResult<Option<PollView>> {
    let row: Option<ViewRow> = sqlx::query_as(concat!(
        "SELECT a.is_lead, a.status, a.last_seen_at, a.max_tasks,
                (SELECT count(*) FROM tasks t WHERE t.agent_id = a.id AND t.status = 'in_progress'),
                EXISTS (SELECT 1 FROM tasks t WHERE t.offered_to = a.id AND t.status = 'offered'),
                EXISTS (SELECT 1 FROM tasks t WHERE t.agent_id = a.id AND t.status = 'pending' AND",
        ready!(),
        "),
                a.is_lead = 1 AND EXISTS (SELECT 1 FROM tasks t WHERE",
        unnotified_worker_task!(),
        "),
                a.is_lead = 0 AND EXISTS (SELECT 1 FROM tasks t WHERE t.status = 'unassigned' AND",
        ready!(),
        ")
         FROM agents a WHERE a.id = ?"
    ))
    .bind(agent.to_string())
    .fetch_optional(pool)
    .await
    .map_err(db)?;
    let Some((is_lead, status, last_seen_at, max_tasks, in_progress, offered, pending, finished, pool)) = row
    else {
        return Ok(None);
    };
    let mut waiting = Vec::new();
    let found = [
        (offered, TriggerKind::TaskOffered),
        (pending, TriggerKind::TaskAssigned),
        (finished, TriggerKind::TasksFinished),
        (pool, TriggerKind::PoolTask),
        (pool, TriggerKind::PoolTasksAvailable),
    ];
    waiting.extend(found.into_iter().filter(|(yes, _)| *yes).map(|(_, kind)| kind));
    Ok(Some(PollView {
        is_lead,
        status: AgentStatus::parse(&status).map_err(|error| corrupt(format!("agent {agent}: {error}")))?,
        last_seen_at: Timestamp::from_unix_millis(last_seen_at)
            .ok_or_else(|| corrupt(format!("agent {agent}: bad last_seen_at {last_seen_at}")))?,
        in_progress,
        max_tasks: i32::try_from(max_tasks).map_err(|_| corrupt(format!("agent {agent}: bad max_tasks")))?,
        waiting,
    }))
}

pub(crate) async fn claim(
    store: &SqliteStore,
    agent: AgentId,
    kinds: &[TriggerKind],
    now: Timestamp,
    lease_until: Timestamp,
) -> StoreResult<Option<(TriggerKind, Trigger)>> {
    let mut tx = store.begin_write().await?;
    for kind in kinds {
        let trigger = match kind {
            TriggerKind::TaskOffered | TriggerKind::TaskAssigned | TriggerKind::PoolTask => {
                claim_task(&mut tx, *kind, agent, now, lease_until).await?
            }
            TriggerKind::TasksFinished => claim_finished(&mut tx, now).await?,
            TriggerKind::PoolTasksAvailable => count_pool(&mut tx).await?,
        };
        if let Some(trigger) = trigger {
            tx.commit().await.map_err(db)?;
            return Ok(Some((*kind, trigger)));
        }
    }
    tx.rollback().await.map_err(db)?;
    Ok(None)
}

/// Pick the kind's best candidate and move it in one guarded `UPDATE ... WHERE id =
/// (SELECT ...)`; log it and settle the agent's busy/idle status.
async fn claim_task(
    tx: &mut SqliteConnection,
    kind: TriggerKind,
    agent: AgentId,
    now: Timestamp,
    lease_until: Timestamp,
) -> StoreResult<Option<Trigger>> {
    let sql = match kind {
        TriggerKind::TaskOffered => {
            "UPDATE tasks SET status = 'reviewing', last_updated_at = ?2, lease_expires_at = ?3
             WHERE status = 'offered' AND id = (
                 SELECT t.id FROM tasks t WHERE t.offered_to = ?1 AND t.status = 'offered'
                 ORDER BY t.offered_at, t.created_at, t.id LIMIT 1)
             RETURNING id"
        }
        TriggerKind::TaskAssigned => concat!(
            "UPDATE tasks SET status = 'in_progress', last_updated_at = ?2, lease_expires_at = ?3
             WHERE status = 'pending' AND id = (
                 SELECT t.id FROM tasks t WHERE t.agent_id = ?1 AND t.status = 'pending' AND",
            ready!(),
            "    ORDER BY t.priority DESC, t.created_at, t.id LIMIT 1)
             AND",
            has_capacity!(),
            " RETURNING id"
        ),
        TriggerKind::PoolTask => concat!(
            "UPDATE tasks SET status = 'in_progress', agent_id = ?1, from_pool = 1,
                              last_updated_at = ?2, lease_expires_at = ?3
             WHERE status = 'unassigned' AND id = (
                 SELECT t.id FROM tasks t WHERE t.status = 'unassigned' AND",
            ready!(),
            "    ORDER BY t.priority DESC, t.created_at, t.id LIMIT 1)
             AND",
            has_capacity!(),
            " RETURNING id"
        ),
        TriggerKind::TasksFinished | TriggerKind::PoolTasksAvailable => return Ok(None),
    };
    let claimed: Option<String> = sqlx::query_scalar(sql)
        .bind(agent.to_string())
        .bind(now.unix_millis())
        .bind(lease_until.unix_millis())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
    let Some(id) = claimed else {
        return Ok(None);
    };
    let id = task_id(&id)?;
    for event in kind.claim_events(id, agent) {
        events::insert(tx, &event, now).await?;
    }
    if kind.needs_capacity() {
        agents::settle_status(tx, agent, now, Wake::No).await?;
    }
    let task = get_known(tx, id).await?;
    Ok(kind.task_trigger(task))
}

async fn claim_finished(tx: &mut SqliteConnection, now: Timestamp) -> StoreResult<Option<Trigger>> {
    let ids: Vec<String> = sqlx::query_scalar(concat!(
        "SELECT t.id FROM tasks t WHERE",
        unnotified_worker_task!(),
        " ORDER BY t.finished_at, t.id LIMIT ?"
    ))
    .bind(TASKS_FINISHED_MAX)
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    if ids.is_empty() {
        return Ok(None);
    }
    let mut tasks = Vec::with_capacity(ids.len());
    for id in &ids {
        let marked = sqlx::query("UPDATE tasks SET notified_at = ? WHERE id = ? AND notified_at IS NULL")
            .bind(now.unix_millis())
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        if marked.rows_affected() == 1 {
            tasks.push(get_known(tx, task_id(id)?).await?);
        }
    }
    if tasks.is_empty() {
        return Ok(None);
    }
    Ok(Some(Trigger::TasksFinished { count: tasks.len(), tasks }))
}

async fn count_pool(tx: &mut SqliteConnection) -> StoreResult<Option<Trigger>> {
    let count: i64 = sqlx::query_scalar(concat!(
        "SELECT count(*) FROM tasks t WHERE t.status = 'unassigned' AND",
        ready!()
    ))
    .fetch_one(&mut *tx)
    .await
    .map_err(db)?;
    Ok((count > 0).then_some(Trigger::PoolTasksAvailable { count }))
}
