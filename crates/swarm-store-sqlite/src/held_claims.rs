//! The lead-side claims' leases (inbox, mentions, urgent mail): extended by a heartbeat,
//! returned by the rescuer. What differs between the kinds is one table in
//! `swarm_store::sql::held_claims`, shared with PostgreSQL.

use rusqlite::{Connection, params};
use swarm_domain::{id::AgentId, time::Timestamp};
use swarm_store::{
    StoreResult,
    sql::{
        Dialect,
        held_claims::{ALL, HeldClaim, INBOX, MAIL, MENTIONS, Returned},
    },
};

use crate::{error::db, rows::agent_id, sql};

/// A heartbeat extends the agent's claims that its runner holds (`runner`) and those no
/// runner holds, never another runner's.
pub(crate) fn extend_leases(
    tx: &Connection,
    agent: AgentId,
    lease_until: Timestamp,
    runner: Option<&str>,
) -> StoreResult<()> {
    for claim in ALL {
        sql::execute(
            tx,
            &claim.extend_leases(Dialect::Sqlite),
            params![lease_until.unix_millis(), agent.to_string(), runner],
        )?;
    }
    Ok(())
}

/// The rescuer: claims whose lease ran out go back to where a poll finds them.
pub(crate) fn return_expired(tx: &Connection, now: Timestamp) -> StoreResult<Returned> {
    let returned = |claim: &HeldClaim| {
        sql::all(tx, &claim.return_expired(Dialect::Sqlite), [now.unix_millis()], |row| {
            agent_id(&row.get::<_, String>(0).map_err(db)?)
        })
    };
    Ok(Returned { inbox: returned(&INBOX)?, mentions: returned(&MENTIONS)?, mail: returned(&MAIL)? })
}

/// Whether a rescue pass would return any held claim: a read, so most passes take no
/// write lock.
pub(crate) fn anything_expired(connection: &Connection, now: Timestamp) -> StoreResult<bool> {
    let probes: Vec<String> = ALL
        .iter()
        .map(|claim| {
            format!(
                "EXISTS (SELECT 1 FROM {} WHERE lease_expires_at IS NOT NULL AND lease_expires_at < ?1)",
                claim.table()
            )
        })
        .collect();
    sql::scalar(connection, &format!("SELECT {}", probes.join(" OR ")), [now.unix_millis()])
}
