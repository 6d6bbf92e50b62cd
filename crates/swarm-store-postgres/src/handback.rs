//! Work of agents that stayed offline, handed on by the rescuer (issue 25), and the
//! lead's `tasks_handed_back` claim. The rules are `swarm_domain::handback`; each move
//! is its own transaction around the shared guarded task update (`apply::apply_in`),
//! so replicas rescuing at once move each task once, and a holder that came back in the
//! meantime keeps its work.

use sqlx::{PgConnection, PgPool};
use swarm_domain::{
    handback::{self, HANDOFFS_TRIGGER_MAX, HandBackBy, HandBackTo, HandedBack, Handoff},
    id::{AgentId, TaskId},
    lease::LeasePolicy,
    poll::Trigger,
    task::{Task, TaskChange, TaskStatus},
    time::Timestamp,
};
use swarm_store::{Applied, StoreResult};
use uuid::Uuid;

use crate::{
    apply,
    error::{corrupt, db},
    tasks::get_known,
};

/// At most this many tasks are moved per pass; the next pass takes the rest.
const HAND_BACK_BATCH: i64 = 500;

/// The tasks gone agents hold or were offered: `$1` is the time they must have been
/// last heard of before.
macro_rules! held_by_gone {
    () => {
        "\
    SELECT t.id, t.status, g.id AS holder, t.from_pool, FALSE AS offer \
      FROM agents g JOIN tasks t ON t.agent_id = g.id \
     WHERE g.status = 'offline' AND g.last_seen_at < $1 AND t.status IN ('pending', 'in_progress') \
    UNION ALL \
    SELECT t.id, t.status, g.id AS holder, t.from_pool, TRUE AS offer \
      FROM agents g JOIN tasks t ON t.offered_to = g.id \
     WHERE g.status = 'offline' AND g.last_seen_at < $1 AND t.status IN ('offered', 'reviewing')"
    };
}

type Candidate = (Uuid, String, Uuid, bool, bool);

pub(crate) async fn hand_back(
    pool: &PgPool,
    policy: &LeasePolicy,
    now: Timestamp,
) -> StoreResult<Vec<HandedBack>> {
    let Some(seen_before) = policy.gone_before(now) else {
        return Ok(Vec::new());
    };
    let candidates: Vec<Candidate> = sqlx::query_as(concat!(held_by_gone!(), " LIMIT $2"))
        .bind(seen_before.datetime())
        .bind(HAND_BACK_BATCH)
        .fetch_all(pool)
        .await
        .map_err(db)?;
    let mut moved = Vec::new();
    for (task_id, status, holder, from_pool, offer) in candidates {
        let (task_id, holder) = (TaskId::from_uuid(task_id), AgentId::from_uuid(holder));
        let from = TaskStatus::parse(&status).map_err(|error| db(corrupt("status", error)))?;
        let to = HandBackTo::for_rescue(from_pool, from);
        let reason = handback::rescue_reason(policy.reassign_after.as_secs(), to.status());
        let change = handback::change(holder, offer, to, HandBackBy::Rescuer { seen_before }, &reason);
        let mut tx = pool.begin().await.map_err(db)?;
        // The read above took no lock: the guarded update repeats every condition.
        let (Applied::Changed { after, .. }, _) =
            apply::apply_in(&mut tx, task_id, &change, None, now).await?
        else {
            tx.rollback().await.map_err(db)?;
            continue;
        };
        record(&mut tx, task_id, holder, from, after.status, &reason, now).await?;
        tx.commit().await.map_err(db)?;
        moved.push(HandedBack { task_id, holder, from, to: after.status });
    }
    Ok(moved)
}

/// An agent gives back its own task with a reason: the change and, when it applies, the
/// move for the lead (`Store::task_give_back`).
pub(crate) async fn give_back(
    pool: &PgPool,
    task_id: TaskId,
    change: &TaskChange,
    agent: AgentId,
    reason: &str,
    now: Timestamp,
) -> StoreResult<Applied<Task>> {
    let mut tx = pool.begin().await.map_err(db)?;
    let (applied, _) = apply::apply_in(&mut tx, task_id, change, Some(agent), now).await?;
    let Applied::Changed { before, after } = &applied else {
        tx.rollback().await.map_err(db)?;
        return Ok(applied);
    };
    record(&mut tx, task_id, agent, before.status, after.status, reason, now).await?;
    tx.commit().await.map_err(db)?;
    Ok(applied)
}

/// One move, for the lead's next `tasks_handed_back`.
async fn record(
    tx: &mut PgConnection,
    task_id: TaskId,
    holder: AgentId,
    from: TaskStatus,
    to: TaskStatus,
    reason: &str,
    now: Timestamp,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO task_handoffs (task_id, from_agent_id, from_status, to_status, reason, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(task_id.as_uuid())
    .bind(holder.as_uuid())
    .bind(from.as_str())
    .bind(to.as_str())
    .bind(reason)
    .bind(now.datetime())
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    Ok(())
}

type HandoffRow = (Uuid, Uuid, String, String, String, chrono::DateTime<chrono::Utc>);

/// The lead's claim: the oldest unreported moves, marked in one guarded `UPDATE`.
pub(crate) async fn claim(tx: &mut PgConnection, now: Timestamp) -> StoreResult<Option<Trigger>> {
    let rows: Vec<HandoffRow> = sqlx::query_as(
        // MATERIALIZED: the planner must not rescan the pick and mark more than LIMIT.
        "WITH picked AS MATERIALIZED ( \
             SELECT id FROM task_handoffs WHERE notified_at IS NULL \
             ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) \
         UPDATE task_handoffs h SET notified_at = $1 FROM picked \
         WHERE h.id = picked.id AND h.notified_at IS NULL \
         RETURNING h.task_id, h.from_agent_id, h.from_status, h.to_status, h.reason, h.created_at",
    )
    .bind(now.datetime())
    .bind(HANDOFFS_TRIGGER_MAX)
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    let mut handoffs = Vec::with_capacity(rows.len());
    for (task_id, from_agent_id, from_status, to_status, reason, created_at) in rows {
        let status = |text: &str| TaskStatus::parse(text).map_err(|error| db(corrupt("status", error)));
        handoffs.push(Handoff {
            task: get_known(tx, TaskId::from_uuid(task_id)).await?,
            from_agent_id: AgentId::from_uuid(from_agent_id),
            from_status: status(&from_status)?,
            to_status: status(&to_status)?,
            reason,
            handed_back_at: Timestamp::from_datetime(created_at),
        });
    }
    if handoffs.is_empty() {
        return Ok(None);
    }
    handoffs.sort_by_key(|handoff| handoff.handed_back_at);
    Ok(Some(Trigger::TasksHandedBack { count: handoffs.len(), handoffs }))
}
