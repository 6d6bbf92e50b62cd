//! The lead-side claims: inbox messages (`slack_inbox_message`), mentioning channels
//! (`unread_mentions`) and urgent mail (`urgent_mail`). Each kind is claimed by its own
//! module's poll claim, with a lease held by the polling runner (`lease_holder`); their
//! leases are extended, run out and come back the same way, which is this module: one
//! table of what differs (names), one statement shape each.

use rusqlite::{Connection, params};
use swarm_domain::{id::AgentId, time::Timestamp};
use swarm_store::StoreResult;

use crate::{error::db, rows::agent_id, sql};

/// One kind of held claim, by the names that differ.
struct HeldClaim {
    table: &'static str,
    /// The agent the rows belong to.
    owner: &'static str,
    /// The rows a poll has claimed.
    claimed: &'static str,
    /// What returns a row to where a poll finds it (`?1` is now).
    release: &'static str,
}

const INBOX: HeldClaim = HeldClaim {
    table: "inbox_messages",
    owner: "agent_id",
    claimed: "status = 'processing'",
    release: "status = 'unread', last_updated_at = ?1",
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
pub(crate) fn extend_leases(
    tx: &Connection,
    agent: AgentId,
    lease_until: Timestamp,
    runner: Option<&str>,
) -> StoreResult<()> {
    for claim in ALL {
        sql::execute(
            tx,
            &format!(
                "UPDATE {table} SET lease_expires_at = ?1 WHERE {owner} = ?2 AND {claimed}
                     AND (lease_holder IS NULL OR lease_holder = ?3)",
                table = claim.table,
                owner = claim.owner,
                claimed = claim.claimed,
            ),
            params![lease_until.unix_millis(), agent.to_string(), runner],
        )?;
    }
    Ok(())
}

/// The rescuer: claims whose lease ran out go back to where a poll finds them.
pub(crate) fn return_expired(tx: &Connection, now: Timestamp) -> StoreResult<Returned> {
    let returned = |claim: &HeldClaim| {
        sql::all(
            tx,
            &format!(
                "UPDATE {table} SET {release}, lease_expires_at = NULL
                 WHERE {claimed} AND lease_expires_at IS NOT NULL AND lease_expires_at < ?1
                 RETURNING {owner}",
                table = claim.table,
                release = claim.release,
                claimed = claim.claimed,
                owner = claim.owner,
            ),
            [now.unix_millis()],
            |row| agent_id(&row.get::<_, String>(0).map_err(db)?),
        )
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
                claim.table
            )
        })
        .collect();
    sql::scalar(connection, &format!("SELECT {}", probes.join(" OR ")), [now.unix_millis()])
}
