//! Heartbeats written in batches: one transaction on the writer thread for every agent
//! a hub heard from since its last batch, instead of one transaction per heartbeat.

use std::collections::BTreeMap;

use rusqlite::{Connection, params};
use swarm_domain::id::AgentId;
use swarm_store::{
    Heartbeat, StoreResult,
    sql::{Dialect, held_claims::ALL},
};

use crate::sql;

pub(crate) fn write(tx: &Connection, beats: &[Heartbeat]) -> StoreResult<Vec<AgentId>> {
    // One beat per agent, its latest, in id order.
    let mut latest: BTreeMap<AgentId, &Heartbeat> = BTreeMap::new();
    for beat in beats {
        let kept = latest.entry(beat.agent).or_insert(beat);
        if beat.at > kept.at {
            *kept = beat;
        }
    }
    // A lease never moves back: the held claims' statement with one more guard.
    let extend_held: Vec<String> = ALL
        .iter()
        .map(|claim| {
            format!(
                "{} AND (lease_expires_at IS NULL OR lease_expires_at < ?1)",
                claim.extend_leases(Dialect::Sqlite)
            )
        })
        .collect();
    let mut not_applied = Vec::new();
    for (agent, beat) in latest {
        let id = agent.to_string();
        let status: Option<String> =
            sql::optional(tx, "SELECT status FROM agents WHERE id = ?", [&id], |row| {
                crate::rows::column(row, "status")
            })?;
        if status.as_deref().is_none_or(|status| status == "offline") {
            not_applied.push(agent);
            continue;
        }
        let until = beat.lease_until.unix_millis();
        sql::execute(
            tx,
            "UPDATE tasks SET lease_expires_at = ?1
             WHERE ((status = 'in_progress' AND agent_id = ?2) OR (status = 'reviewing' AND offered_to = ?2))
               AND (lease_expires_at IS NULL OR lease_expires_at < ?1)",
            params![until, id],
        )?;
        let runner = beat.runner.map(|runner| runner.to_string());
        for statement in &extend_held {
            sql::execute(tx, statement, params![until, id, runner])?;
        }
        sql::execute(
            tx,
            "UPDATE agents SET last_seen_at = max(last_seen_at, ?1), last_updated_at = max(last_updated_at, ?1)
             WHERE id = ?2 AND status <> 'offline'",
            params![beat.at.unix_millis(), id],
        )?;
    }
    Ok(not_applied)
}
