//! The lead-side claims: inbox messages (`slack_inbox_message`), mentioning channels
//! (`unread_mentions`) and urgent mail (`urgent_mail`). Each kind is claimed by its own
//! module's poll claim, with a lease held by the polling runner (`lease_holder`); their
//! leases are extended, run out and come back the same way, which is this module: one
//! table of what differs (names), one statement shape each.

use sqlx::{AssertSqlSafe, PgConnection, PgPool};
use swarm_domain::{id::AgentId, time::Timestamp};
use swarm_store::StoreResult;
use uuid::Uuid;

use crate::error::db;

/// One kind of held claim, by the names that differ. Every name is a constant of this
/// module, never input: the statements built from them are safe.
struct HeldClaim {
    table: &'static str,
    /// The agent the rows belong to.
    owner: &'static str,
    /// The rows a poll has claimed.
    claimed: &'static str,
    /// What returns a row to where a poll finds it (`$1` is now).
    release: &'static str,
}

const INBOX: HeldClaim = HeldClaim {
    table: "inbox_messages",
    owner: "agent_id",
    claimed: "status = 'processing'",
    release: "status = 'unread', last_updated_at = $1",
};
const MENTIONS: HeldClaim = HeldClaim {
    table: "channel_reads",
    owner: "agent_id",
    claimed: "processing_since IS NOT NULL",
    release: "processing_since = NULL",
};
const MAIL: HeldClaim = HeldClaim {
    table: "mail",
    owner: "to_agent_id",
    claimed: "status = 'processing'",
    release: "status = 'unread', processing_since = NULL",
};
const ALL: [&HeldClaim; 3] = [&INBOX, &MENTIONS, &MAIL];

/// Agents whose held claims came back, by kind, once per row.
pub(crate) struct Returned {
    pub inbox: Vec<AgentId>,
    pub mentions: Vec<AgentId>,
    pub mail: Vec<AgentId>,
}

/// A heartbeat extends the agent's claims that its runner holds (`runner`) and those no
/// runner holds, never another runner's.
pub(crate) async fn extend_leases(
    tx: &mut PgConnection,
    agent: AgentId,
    lease_until: Timestamp,
    runner: Option<Uuid>,
) -> StoreResult<()> {
    for claim in ALL {
        let statement = format!(
            "UPDATE {table} SET lease_expires_at = $1 WHERE {owner} = $2 AND {claimed} \
             AND (lease_holder IS NULL OR lease_holder = $3)",
            table = claim.table,
            owner = claim.owner,
            claimed = claim.claimed,
        );
        sqlx::query(AssertSqlSafe(statement))
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
        let statement = format!(
            "UPDATE {table} SET {release}, lease_expires_at = NULL \
             WHERE {claimed} AND lease_expires_at IS NOT NULL AND lease_expires_at < $1 \
             RETURNING {owner}",
            table = claim.table,
            release = claim.release,
            claimed = claim.claimed,
            owner = claim.owner,
        );
        let owners: Vec<Uuid> = sqlx::query_scalar(AssertSqlSafe(statement))
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
