//! The poll: one read to see whether anything waits for an agent, then one transaction
//! that claims the first kind that has something.
//!
//! Candidates are picked `FOR UPDATE SKIP LOCKED`: concurrent polls (on any replica)
//! each take a different row instead of queueing on the same one, and the outer
//! `UPDATE` repeats the status guard. A kind that starts work first locks the agent's
//! row, so two polls of one agent cannot both pass the capacity count; that wait is for
//! an agent row while holding no task row, and the task pick never waits, so the
//! crate's lock order holds.

use sqlx::{PgConnection, PgPool};
use swarm_domain::{
    agent::AgentStatus,
    id::AgentId,
    poll::{TASKS_FINISHED_MAX, Trigger, TriggerKind},
    time::Timestamp,
};
use swarm_store::{PollView, StoreResult, sql::PollFlags};
use uuid::Uuid;

use crate::{
    agents::{self, Settle, Wake},
    error::db,
    rows::{task_from_row, task_returning, task_select},
};

/// Appended to a query over `tasks t`: every dependency of `t` is completed.
macro_rules! ready {
    () => {
        swarm_store::sql_dependencies_completed!("t")
    };
}

/// A finished task whose assignee is not a lead: what `tasks_finished` reports.
macro_rules! unnotified_worker_task {
    () => {
        " t.notified_at IS NULL AND t.status IN ('completed', 'failed') \
          AND NOT EXISTS (SELECT 1 FROM agents l WHERE l.id = t.agent_id AND l.is_lead)"
    };
}

/// The agent's free slot, checked inside the claim's `UPDATE`; `$1` is the agent.
macro_rules! has_capacity {
    () => {
        " (SELECT count(*) FROM tasks c WHERE c.agent_id = $1 AND c.status = 'in_progress') \
          < (SELECT max_tasks FROM agents WHERE id = $1)"
    };
}

type ViewRow = (
    bool,
    String,
    chrono::DateTime<chrono::Utc>,
    i32,
    i64,
    bool,
    bool,
    bool,
    bool,
    bool,
    bool,
    bool,
    bool,
    bool,
    bool,
);

pub(crate) async fn view(pool: &PgPool, agent: AgentId) -> StoreResult<Option<PollView>> {
    let row: Option<ViewRow> = sqlx::query_as(concat!(
        "SELECT a.is_lead, a.status, a.last_seen_at, a.max_tasks, \
                (SELECT count(*) FROM tasks t WHERE t.agent_id = a.id AND t.status = 'in_progress'), \
                EXISTS (SELECT 1 FROM tasks t WHERE t.offered_to = a.id AND t.status = 'offered'), \
                EXISTS (SELECT 1 FROM tasks t WHERE t.agent_id = a.id AND t.status = 'pending' AND",
        ready!(),
        "), EXISTS (SELECT 1 FROM mail m WHERE m.to_agent_id = a.id AND m.status = 'unread' \
                   AND m.wakes AND m.dead_lettered_at IS NULL), \
           EXISTS (SELECT 1 FROM task_awaits w JOIN tasks t ON t.id = w.task_id \
                   WHERE w.agent_id = a.id AND w.delivered_at IS NULL AND w.processing_since IS NULL \
                     AND w.dead_lettered_at IS NULL \
                     AND t.status IN ('completed', 'failed', 'cancelled')), \
           a.is_lead AND EXISTS (SELECT 1 FROM inbox_messages m WHERE m.agent_id = a.id AND m.status = 'unread'), \
           EXISTS (SELECT 1 FROM channel_reads r WHERE r.agent_id = a.id AND r.unread_mentions > 0 \
                   AND r.processing_since IS NULL AND r.dead_lettered_at IS NULL), \
           a.is_lead AND EXISTS (SELECT 1 FROM tasks t WHERE",
        unnotified_worker_task!(),
        "), a.is_lead AND EXISTS (SELECT 1 FROM task_handoffs h WHERE h.notified_at IS NULL), \
           a.is_lead AND EXISTS (SELECT 1 FROM epics e WHERE e.progress_changes > e.progress_notified \
                                 AND e.status = 'active'), \
           NOT a.is_lead AND EXISTS (SELECT 1 FROM tasks t WHERE t.status = 'unassigned' AND",
        ready!(),
        ") FROM agents a WHERE a.id = $1"
    ))
    .bind(agent.as_uuid())
    .fetch_optional(pool)
    .await
    .map_err(db)?;
    let Some((
        is_lead,
        status,
        last_seen_at,
        max_tasks,
        in_progress,
        offered,
        pending,
        urgent_mail,
        results,
        inbox,
        mentions,
        finished,
        handed_back,
        epic_progress,
        pool,
    )) = row
    else {
        return Ok(None);
    };
    let flags = PollFlags {
        offered,
        pending,
        urgent_mail,
        results,
        inbox,
        mentions,
        finished,
        handed_back,
        epic_progress,
        pool,
    };
    Ok(Some(PollView {
        is_lead,
        status: AgentStatus::parse(&status).map_err(|error| db(crate::error::corrupt("status", error)))?,
        last_seen_at: Timestamp::from_datetime(last_seen_at),
        in_progress,
        max_tasks,
        waiting: flags.waiting(),
    }))
}

pub(crate) async fn claim(
    pool: &PgPool,
    agent: AgentId,
    kinds: &[TriggerKind],
    now: Timestamp,
    lease_until: Timestamp,
    runner: Option<Uuid>,
) -> StoreResult<Option<(TriggerKind, Trigger)>> {
    let mut tx = pool.begin().await.map_err(db)?;
    let mut agent_locked = false;
    // A kind that would start work past a daily budget yields to the kinds after it; the
    // refusal is the answer only when none of them has anything.
    let mut refused = None;
    for kind in kinds {
        if kind.needs_capacity() && !agent_locked {
            agents::lock_in_order(&mut tx, &mut vec![agent]).await?;
            agent_locked = true;
        }
        if kind.needs_capacity() {
            if refused.is_some() {
                continue;
            }
            if let Some(trigger) = crate::budgets::refuse_if_spent(&mut tx, *kind, agent, now).await? {
                refused = Some((*kind, trigger));
                continue;
            }
        }
        let trigger = match kind {
            TriggerKind::TaskOffered | TriggerKind::TaskAssigned | TriggerKind::PoolTask => {
                claim_task(&mut tx, *kind, agent, now, lease_until).await?
            }
            TriggerKind::UrgentMail => crate::mail::claim(&mut tx, agent, now, lease_until, runner).await?,
            TriggerKind::SlackInboxMessage => {
                crate::inbox::claim(&mut tx, agent, now, lease_until, runner).await?
            }
            TriggerKind::UnreadMentions => {
                crate::chat::claim(&mut tx, agent, now, lease_until, runner).await?
            }
            TriggerKind::TasksFinished => claim_finished(&mut tx, now).await?,
            TriggerKind::TasksHandedBack => crate::handback::claim(&mut tx, now).await?,
            TriggerKind::EpicProgressChanged => crate::epics::claim_progress(&mut tx, now).await?,
            TriggerKind::TaskResult => {
                crate::triggers::claim_result(&mut tx, agent, now, lease_until, runner).await?
            }
            TriggerKind::PoolTasksAvailable => count_pool(&mut tx).await?,
        };
        if let Some(trigger) = trigger {
            tx.commit().await.map_err(db)?;
            return Ok(Some((*kind, trigger)));
        }
    }
    if refused.is_some() {
        // Keeps the refusal's record.
        tx.commit().await.map_err(db)?;
    } else {
        tx.rollback().await.map_err(db)?;
    }
    Ok(refused)
}

async fn claim_task(
    tx: &mut PgConnection,
    kind: TriggerKind,
    agent: AgentId,
    now: Timestamp,
    lease_until: Timestamp,
) -> StoreResult<Option<Trigger>> {
    let sql = match kind {
        TriggerKind::TaskOffered => concat!(
            "UPDATE tasks SET status = 'reviewing', last_updated_at = $2, lease_expires_at = $3 \
             WHERE status = 'offered' AND id = ( \
                 SELECT t.id FROM tasks t WHERE t.offered_to = $1 AND t.status = 'offered' \
                 ORDER BY t.offered_at, t.created_at, t.id LIMIT 1 FOR UPDATE SKIP LOCKED) \
             RETURNING ",
            task_returning!()
        ),
        TriggerKind::TaskAssigned => concat!(
            "UPDATE tasks SET status = 'in_progress', last_updated_at = $2, lease_expires_at = $3 \
             WHERE status = 'pending' AND id = ( \
                 SELECT t.id FROM tasks t WHERE t.agent_id = $1 AND t.status = 'pending' AND",
            ready!(),
            "    ORDER BY t.priority DESC, t.created_at, t.id LIMIT 1 FOR UPDATE OF t SKIP LOCKED) \
             AND",
            has_capacity!(),
            " RETURNING ",
            task_returning!()
        ),
        TriggerKind::PoolTask => concat!(
            "UPDATE tasks SET status = 'in_progress', agent_id = $1, from_pool = TRUE, \
                              last_updated_at = $2, lease_expires_at = $3 \
             WHERE status = 'unassigned' AND id = ( \
                 SELECT t.id FROM tasks t WHERE t.status = 'unassigned' AND",
            ready!(),
            "    ORDER BY t.priority DESC, t.created_at, t.id LIMIT 1 FOR UPDATE OF t SKIP LOCKED) \
             AND",
            has_capacity!(),
            " RETURNING ",
            task_returning!()
        ),
        TriggerKind::SlackInboxMessage
        | TriggerKind::UrgentMail
        | TriggerKind::UnreadMentions
        | TriggerKind::TasksFinished
        | TriggerKind::TasksHandedBack
        | TriggerKind::EpicProgressChanged
        | TriggerKind::TaskResult
        | TriggerKind::PoolTasksAvailable => return Ok(None),
    };
    // The row as the claim left it comes back with it: no second read.
    let claimed = sqlx::query(sql)
        .bind(agent.as_uuid())
        .bind(now.datetime())
        .bind(lease_until.datetime())
        .try_map(task_from_row)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
    let Some(task) = claimed else {
        return Ok(None);
    };
    #[cfg(debug_assertions)]
    {
        let stored = crate::tasks::get(&mut *tx, task.id).await?;
        debug_assert_eq!(Some(&task), stored.as_ref(), "the claim returned another row than it left");
    }
    // It takes work again: why it had stopped no longer holds.
    let settle = Settle { status: kind.needs_capacity().then_some(Wake::No), clear_reason: true };
    agents::settle_and_log(tx, agent, now, settle, &kind.claim_events(task.id, agent)).await?;
    Ok(kind.task_trigger(task))
}

async fn claim_finished(tx: &mut PgConnection, now: Timestamp) -> StoreResult<Option<Trigger>> {
    let ids: Vec<Uuid> = sqlx::query_scalar(concat!(
        // MATERIALIZED: as a plain `IN (subquery)` the planner may rescan the subquery
        // and mark more than LIMIT rows.
        "WITH picked AS MATERIALIZED ( \
             SELECT t.id FROM tasks t WHERE",
        unnotified_worker_task!(),
        "    ORDER BY t.finished_at, t.id LIMIT $2 FOR UPDATE OF t SKIP LOCKED) \
         UPDATE tasks SET notified_at = $1 FROM picked \
         WHERE tasks.id = picked.id AND tasks.notified_at IS NULL \
         RETURNING tasks.id"
    ))
    .bind(now.datetime())
    .bind(TASKS_FINISHED_MAX)
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    if ids.is_empty() {
        return Ok(None);
    }
    let tasks = sqlx::query(concat!(task_select!(), " WHERE t.id = ANY($1) ORDER BY t.finished_at, t.id"))
        .bind(&ids)
        .try_map(task_from_row)
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
    Ok(Some(Trigger::TasksFinished { count: tasks.len(), tasks }))
}

async fn count_pool(tx: &mut PgConnection) -> StoreResult<Option<Trigger>> {
    let count: i64 = sqlx::query_scalar(concat!(
        "SELECT count(*) FROM tasks t WHERE t.status = 'unassigned' AND",
        ready!()
    ))
    .fetch_one(&mut *tx)
    .await
    .map_err(db)?;
    Ok((count > 0).then_some(Trigger::PoolTasksAvailable { count }))
}
