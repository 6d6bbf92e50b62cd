//! The lead-side claims (inbox, mentions, urgent mail, task results): their leases
//! extended by a heartbeat, released by the runner whose run ended, returned by the
//! rescuer. What differs between the kinds is one table in
//! `swarm_store::sql::held_claims`, shared with SQLite; its names are constants, never
//! input, so the statements are safe to run as text.

use sqlx::{AssertSqlSafe, PgConnection, PgPool};
use swarm_domain::{id::AgentId, lease::LeasePolicy, time::Timestamp};
use swarm_store::{
    HeldItems, Released, StoreResult,
    sql::{
        Dialect,
        held_claims::{ALL, HeldClaim, INBOX, MAIL, MENTIONS, RESULTS, ReleaseScope, Returned},
    },
};
use uuid::Uuid;

use crate::error::db;

/// A heartbeat extends the agent's claims that its runner holds (`runner`) and those no
/// runner holds, never another runner's.
pub(crate) async fn extend_leases(
    tx: &mut PgConnection,
    agent: AgentId,
    lease_until: Timestamp,
    runner: Option<Uuid>,
) -> StoreResult<()> {
    for claim in ALL {
        sqlx::query(AssertSqlSafe(claim.extend_leases(Dialect::Postgres)))
            .bind(lease_until.datetime())
            .bind(agent.as_uuid())
            .bind(runner)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
    }
    Ok(())
}

/// The holder gives back what it still holds: everything (`items: None`) or the items
/// named, in one transaction.
pub(crate) async fn release(
    pool: &PgPool,
    agent: AgentId,
    holder: Uuid,
    items: Option<&HeldItems>,
    max_deliveries: i32,
    now: Timestamp,
) -> StoreResult<Released> {
    let mut tx = pool.begin().await.map_err(db)?;
    let mut released = Released::default();
    for claim in ALL {
        let dead_letters: Vec<bool> = match items {
            None => sqlx::query_scalar(AssertSqlSafe(claim.release(Dialect::Postgres, ReleaseScope::All)))
                .bind(now.datetime())
                .bind(max_deliveries)
                .bind(agent.as_uuid())
                .bind(holder)
                .fetch_all(&mut *tx)
                .await
                .map_err(db)?,
            Some(items) => {
                let named = claim.named(items);
                if named.is_empty() {
                    continue;
                }
                sqlx::query_scalar(AssertSqlSafe(claim.release(Dialect::Postgres, ReleaseScope::Items)))
                    .bind(now.datetime())
                    .bind(max_deliveries)
                    .bind(agent.as_uuid())
                    .bind(holder)
                    .bind(named)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(db)?
            }
        };
        for dead in dead_letters {
            if dead {
                released.dead_lettered += 1;
            } else {
                released.returned += 1;
            }
        }
    }
    tx.commit().await.map_err(db)?;
    Ok(released)
}

/// The rescuer: claims whose lease ran out go back to where a poll finds them.
pub(crate) async fn return_expired(
    pool: &PgPool,
    policy: &LeasePolicy,
    now: Timestamp,
) -> StoreResult<Returned> {
    async fn returned(
        pool: &PgPool,
        claim: &HeldClaim,
        policy: &LeasePolicy,
        now: Timestamp,
    ) -> StoreResult<Vec<AgentId>> {
        let owners: Vec<Uuid> = sqlx::query_scalar(AssertSqlSafe(claim.return_expired(Dialect::Postgres)))
            .bind(now.datetime())
            .bind(policy.max_deliveries)
            .fetch_all(pool)
            .await
            .map_err(db)?;
        Ok(owners.into_iter().map(AgentId::from_uuid).collect())
    }
    Ok(Returned {
        inbox: returned(pool, &INBOX, policy, now).await?,
        mentions: returned(pool, &MENTIONS, policy, now).await?,
        mail: returned(pool, &MAIL, policy, now).await?,
        results: returned(pool, &RESULTS, policy, now).await?,
    })
}

/// Task results nobody will take: the awaiting agent (not a lead) has been offline since
/// before `since` and the task finished before it, or the result was dead-lettered. They
/// go to the lead that is online, with a fresh delivery count; never dropped. Returns
/// the lead once per result.
pub(crate) async fn hand_results_to_lead(pool: &PgPool, since: Timestamp) -> StoreResult<Vec<AgentId>> {
    let leads: Vec<Uuid> = sqlx::query_scalar(
        "UPDATE task_awaits w \
            SET agent_id = (SELECT l.id FROM agents l WHERE l.is_lead AND l.status <> 'offline' \
                            ORDER BY l.id LIMIT 1), \
                deliveries = 0, dead_lettered_at = NULL, processing_since = NULL, \
                lease_expires_at = NULL, lease_holder = NULL \
          WHERE w.delivered_at IS NULL AND w.processing_since IS NULL \
            AND EXISTS (SELECT 1 FROM agents l WHERE l.is_lead AND l.status <> 'offline') \
            AND EXISTS (SELECT 1 FROM agents a WHERE a.id = w.agent_id AND NOT a.is_lead \
                          AND (w.dead_lettered_at IS NOT NULL \
                               OR (a.status = 'offline' AND a.last_seen_at < $1 \
                                   AND EXISTS (SELECT 1 FROM tasks t WHERE t.id = w.task_id \
                                                 AND t.finished_at < $1)))) \
          RETURNING w.agent_id",
    )
    .bind(since.datetime())
    .fetch_all(pool)
    .await
    .map_err(db)?;
    Ok(leads.into_iter().map(AgentId::from_uuid).collect())
}
