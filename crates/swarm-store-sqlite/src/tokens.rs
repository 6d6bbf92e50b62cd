//! Agent tokens: kept as hashes, listed without them, revoked by a guarded `UPDATE`.

use rusqlite::{Connection, Row, params};
use swarm_domain::{
    id::{AgentId, AgentTokenId},
    time::Timestamp,
    token::AgentToken,
};
use swarm_store::{Applied, StoreResult};

use crate::{
    error::corrupt,
    rows::{agent_id, column, get_agent_id, get_timestamp, timestamp},
    sql,
};

const SELECT_TOKEN: &str = "SELECT id, agent_id, created_at, revoked_at FROM agent_tokens";

pub(crate) fn create(tx: &Connection, token: &AgentToken, token_hash: &str) -> StoreResult<bool> {
    // One statement that finds the agent: an unknown agent inserts nothing.
    let inserted = sql::execute(
        tx,
        "INSERT INTO agent_tokens (id, agent_id, token_hash, created_at)
         SELECT ?1, a.id, ?3, ?4 FROM agents a WHERE a.id = ?2",
        params![token.id.to_string(), token.agent_id.to_string(), token_hash, token.created_at.unix_millis()],
    )?;
    Ok(inserted == 1)
}

pub(crate) fn list(connection: &Connection, agent: AgentId) -> StoreResult<Vec<AgentToken>> {
    sql::all(
        connection,
        "SELECT id, agent_id, created_at, revoked_at FROM agent_tokens
         WHERE agent_id = ?1 ORDER BY created_at, id",
        [agent.to_string()],
        from_row,
    )
}

pub(crate) fn revoke(
    tx: &Connection,
    agent: AgentId,
    id: AgentTokenId,
    now: Timestamp,
) -> StoreResult<Applied<AgentToken>> {
    let before = sql::optional(
        tx,
        &format!("{SELECT_TOKEN} WHERE id = ?1 AND agent_id = ?2"),
        [id.to_string(), agent.to_string()],
        from_row,
    )?;
    let Some(before) = before else {
        return Ok(Applied::NotFound);
    };
    let changed = sql::execute(
        tx,
        "UPDATE agent_tokens SET revoked_at = ?1 WHERE id = ?2 AND revoked_at IS NULL",
        params![now.unix_millis(), id.to_string()],
    )?;
    if changed == 0 {
        return Ok(Applied::Refused { current: before });
    }
    let after = AgentToken { revoked_at: Some(now), ..before.clone() };
    Ok(Applied::Changed { before, after })
}

pub(crate) fn agent_of(connection: &Connection, token_hash: &str) -> StoreResult<Option<AgentId>> {
    sql::optional(
        connection,
        "SELECT agent_id FROM agent_tokens WHERE token_hash = ?1 AND revoked_at IS NULL",
        [token_hash],
        |row| agent_id(&column::<String>(row, "agent_id")?),
    )
}

fn from_row(row: &Row<'_>) -> StoreResult<AgentToken> {
    let id = column::<String>(row, "id")?;
    Ok(AgentToken {
        id: AgentTokenId::parse(&id).map_err(|error| corrupt(error.0))?,
        agent_id: get_agent_id(row, "agent_id")?,
        created_at: get_timestamp(row, "created_at")?,
        revoked_at: column::<Option<i64>>(row, "revoked_at")?.map(timestamp).transpose()?,
    })
}

/// Hub settings, each replaced by name, in the caller's transaction.
pub(crate) fn settings_put(tx: &Connection, settings: &[(String, String)]) -> StoreResult<()> {
    for (name, value) in settings {
        sql::execute(
            tx,
            "INSERT INTO hub_settings (name, value) VALUES (?1, ?2)
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            params![name, value],
        )?;
    }
    Ok(())
}

pub(crate) fn settings(connection: &Connection) -> StoreResult<Vec<(String, String)>> {
    sql::all(connection, "SELECT name, value FROM hub_settings", [], |row| {
        Ok((column(row, "name")?, column(row, "value")?))
    })
}
