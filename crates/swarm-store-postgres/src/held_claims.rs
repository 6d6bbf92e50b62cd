//! The lead-side claims' leases (inbox, mentions, urgent mail): extended by a heartbeat,
//! returned by the rescuer. What differs between the kinds is one table in
//! `swarm_store::sql::held_claims`, shared with SQLite; its names are constants, never
//! input, so the statements are safe to run as text.

use sqlx::{AssertSqlSafe, PgConnection, PgPool};
use swarm_domain::{id::AgentId, time::Timestamp};
use swarm_store::{
    StoreResult,
    sql::{
        Dialect,
        held_claims::{ALL, HeldClaim, INBOX, MAIL, MENTIONS, Returned},
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

/// The rescuer: claims whose lease ran out go back to where a poll finds them.
pub(crate) async fn return_expired(pool: &PgPool, now: Timestamp) -> StoreResult<Returned> {
    async fn returned(pool: &PgPool, claim: &HeldClaim, now: Timestamp) -> StoreResult<Vec<AgentId>> {
        let owners: Vec<Uuid> = sqlx::query_scalar(AssertSqlSafe(claim.return_expired(Dialect::Postgres)))
            .bind(now.datetime())
            .fetch_all(pool)
            .await
            .map_err(db)?;
        Ok(owners.into_iter().map(AgentId::from_uuid).collect())
    }
    Ok(Returned {
        inbox: returned(pool, &INBOX, now).await?,
        mentions: returned(pool, &MENTIONS, now).await?,
        mail: returned(pool, &MAIL, now).await?,
    })
}
