//! The rescuer's pass.
//!
//! Replicas may rescue at the same time: expired rows are picked `FOR UPDATE SKIP
//! LOCKED`, so each is handled by one of them, and every update repeats its guard.

use sqlx::PgPool;
use swarm_domain::{
    id::{AgentId, TaskId},
    lease::{ExpiredClaim, Expiry, LeasePolicy, RescueReport, on_expiry, silent_agent_event},
    task::TaskStatus,
    time::Timestamp,
};
use swarm_store::StoreResult;
use uuid::Uuid;

use crate::{
    agents::{self, Wake as Presence},
    error::{corrupt, db},
    events,
};

const RESCUE_BATCH: i64 = 500;

type ExpiredRow = (Uuid, String, Option<Uuid>, Option<Uuid>, bool, i32);

pub(crate) async fn rescue(pool: &PgPool, policy: &LeasePolicy, now: Timestamp) -> StoreResult<RescueReport> {
    let expired = expire_leases(pool, policy, now).await?;
    let held = crate::held_claims::return_expired(pool, policy, now).await?;
    let handoff = i64::try_from(policy.result_handoff.as_millis()).unwrap_or(i64::MAX);
    let results_handed_to = crate::held_claims::hand_results_to_lead(pool, now.minus_millis(handoff)).await?;
    let silenced = silence_agents(pool, policy, now).await?;
    // After silencing: an agent judged gone in this pass is offline already.
    let handed_back = crate::handback::hand_back(pool, policy, now).await?;
    Ok(RescueReport {
        handed_back,
        expired,
        silenced,
        inbox_returned_to: held.inbox,
        mentions_returned_to: held.mentions,
        mail_returned_to: held.mail,
        results_returned_to: held.results,
        results_handed_to,
    })
}

async fn expire_leases(
    pool: &PgPool,
    policy: &LeasePolicy,
    now: Timestamp,
) -> StoreResult<Vec<ExpiredClaim>> {
    let mut tx = pool.begin().await.map_err(db)?;
    let rows: Vec<ExpiredRow> = sqlx::query_as(
        "SELECT id, status, agent_id, offered_to, from_pool, lease_losses FROM tasks \
         WHERE lease_expires_at < $1 AND status IN ('reviewing', 'in_progress') \
         ORDER BY lease_expires_at LIMIT $2 FOR NO KEY UPDATE SKIP LOCKED",
    )
    .bind(now.datetime())
    .bind(RESCUE_BATCH)
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    if rows.is_empty() {
        tx.rollback().await.map_err(db)?;
        return Ok(Vec::new());
    }

    let mut expired = Vec::new();
    let mut holders: Vec<AgentId> = Vec::new();
    for (id, status, assignee, offered_to, from_pool, losses) in rows {
        let id = TaskId::from_uuid(id);
        let from = TaskStatus::parse(&status).map_err(|error| db(corrupt("status", error)))?;
        let assignee = assignee.map(AgentId::from_uuid);
        let offered_to = offered_to.map(AgentId::from_uuid);
        let losses = losses.saturating_add(1);
        let Some(expiry) = on_expiry(from, from_pool, losses, policy) else {
            continue;
        };
        let holder = if from == TaskStatus::Reviewing { offered_to } else { assignee };
        let (clear_assignee, failure_reason) = match &expiry {
            Expiry::Return { clear_assignee, .. } => (*clear_assignee, None),
            Expiry::Fail { reason } => (false, Some(reason.clone())),
        };
        let to = expiry.status();
        let updated = sqlx::query(
            "UPDATE tasks SET status = $1, lease_expires_at = NULL, lease_losses = $2, last_updated_at = $3, \
                    agent_id = CASE WHEN $4 THEN NULL ELSE agent_id END, \
                    from_pool = CASE WHEN $4 THEN FALSE ELSE from_pool END, \
                    finished_at = CASE WHEN $5::text IS NULL THEN finished_at ELSE $3 END, \
                    failure_reason = coalesce($5, failure_reason) \
             WHERE id = $6 AND status = $7 AND lease_expires_at < $3",
        )
        .bind(to.as_str())
        .bind(losses)
        .bind(now.datetime())
        .bind(clear_assignee)
        .bind(failure_reason)
        .bind(id.as_uuid())
        .bind(from.as_str())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        if updated.rows_affected() == 0 {
            continue;
        }
        for event in expiry.events(id, holder, from, losses) {
            events::insert(&mut tx, &event, now).await?;
        }
        holders.extend(holder);
        let agent_after = if clear_assignee { None } else { assignee };
        expired.push(ExpiredClaim { task_id: id, holder, from, to, offered_to, agent_id: agent_after });
    }
    // Task rows first, then agent rows in id order: the crate's lock order.
    agents::lock_in_order(&mut tx, &mut holders).await?;
    for holder in holders {
        agents::settle_status(&mut tx, holder, now, Presence::No).await?;
    }
    tx.commit().await.map_err(db)?;
    Ok(expired)
}

async fn silence_agents(pool: &PgPool, policy: &LeasePolicy, now: Timestamp) -> StoreResult<Vec<AgentId>> {
    let silent_since = now.minus_millis(policy.period_millis());
    let mut tx = pool.begin().await.map_err(db)?;
    let silent: Vec<(Uuid, String)> = sqlx::query_as(
        "WITH silent AS ( \
             SELECT id, status FROM agents WHERE status <> 'offline' AND last_seen_at < $1 \
             ORDER BY id FOR NO KEY UPDATE SKIP LOCKED) \
         UPDATE agents a SET status = 'offline', last_updated_at = $2 FROM silent \
         WHERE a.id = silent.id AND a.status = silent.status \
         RETURNING a.id, silent.status",
    )
    .bind(silent_since.datetime())
    .bind(now.datetime())
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    let mut silenced = Vec::with_capacity(silent.len());
    for (id, old_status) in silent {
        let agent = AgentId::from_uuid(id);
        events::insert(&mut tx, &silent_agent_event(agent, &old_status, policy), now).await?;
        silenced.push(agent);
    }
    tx.commit().await.map_err(db)?;
    Ok(silenced)
}
