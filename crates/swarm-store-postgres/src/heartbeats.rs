//! Heartbeats written in batches: one transaction of six statements for every agent a
//! hub heard from since its last batch, instead of one transaction per heartbeat.
//!
//! Rows are locked in the crate's order, tasks before agents, each table's rows by id
//! (`ORDER BY ... FOR NO KEY UPDATE` in the statement that picks them), so two hubs
//! writing batches over the same agents, or a batch and a claim, do not deadlock.

use std::collections::{BTreeMap, HashSet};

use sqlx::{AssertSqlSafe, PgPool};
use swarm_domain::id::AgentId;
use swarm_store::{Heartbeat, StoreResult, sql::held_claims::ALL};
use uuid::Uuid;

use crate::error::db;

pub(crate) async fn write(pool: &PgPool, beats: &[Heartbeat]) -> StoreResult<Vec<AgentId>> {
    // One beat per agent, its latest, in id order.
    let mut latest: BTreeMap<Uuid, &Heartbeat> = BTreeMap::new();
    for beat in beats {
        let kept = latest.entry(beat.agent.as_uuid()).or_insert(beat);
        if beat.at > kept.at {
            *kept = beat;
        }
    }
    if latest.is_empty() {
        return Ok(Vec::new());
    }
    let agents: Vec<Uuid> = latest.keys().copied().collect();
    let runners: Vec<Option<Uuid>> = latest.values().map(|beat| beat.runner.map(|r| r.as_uuid())).collect();
    let seen: Vec<chrono::DateTime<chrono::Utc>> = latest.values().map(|beat| beat.at.datetime()).collect();
    let until: Vec<chrono::DateTime<chrono::Utc>> =
        latest.values().map(|beat| beat.lease_until.datetime()).collect();

    let mut tx = pool.begin().await.map_err(db)?;
    sqlx::query(
        "UPDATE tasks t SET lease_expires_at = held.until \
         FROM (SELECT h.id, b.until FROM unnest($1::uuid[], $2::timestamptz[]) AS b(agent, until) \
               JOIN agents a ON a.id = b.agent AND a.status <> 'offline' \
               JOIN tasks h ON (h.status = 'in_progress' AND h.agent_id = b.agent) \
                            OR (h.status = 'reviewing' AND h.offered_to = b.agent) \
               WHERE h.lease_expires_at IS NULL OR h.lease_expires_at < b.until \
               ORDER BY h.id FOR NO KEY UPDATE OF h) AS held \
         WHERE t.id = held.id AND t.status IN ('in_progress', 'reviewing') \
           AND (t.lease_expires_at IS NULL OR t.lease_expires_at < held.until)",
    )
    .bind(&agents)
    .bind(&until)
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    for claim in ALL {
        sqlx::query(AssertSqlSafe(claim.extend_leases_in_batch()))
            .bind(&agents)
            .bind(&runners)
            .bind(&until)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
    }
    let applied: Vec<Uuid> = sqlx::query_scalar(
        "UPDATE agents a SET last_seen_at = greatest(a.last_seen_at, live.at), \
                             last_updated_at = greatest(a.last_updated_at, live.at) \
         FROM (SELECT g.id, b.at FROM unnest($1::uuid[], $2::timestamptz[]) AS b(agent, at) \
               JOIN agents g ON g.id = b.agent WHERE g.status <> 'offline' \
               ORDER BY g.id FOR NO KEY UPDATE OF g) AS live \
         WHERE a.id = live.id AND a.status <> 'offline' \
         RETURNING a.id",
    )
    .bind(&agents)
    .bind(&seen)
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)?;
    let applied: HashSet<Uuid> = applied.into_iter().collect();
    Ok(agents.into_iter().filter(|agent| !applied.contains(agent)).map(AgentId::from_uuid).collect())
}
