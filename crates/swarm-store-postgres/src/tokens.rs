//! Agent tokens: kept as hashes, listed without them, revoked by a guarded `UPDATE`.

use chrono::{DateTime, Utc};
use sqlx::{PgPool, Row, postgres::PgRow};
use swarm_domain::{
    id::{AgentId, AgentTokenId},
    time::Timestamp,
    token::AgentToken,
};
use swarm_store::{Applied, StoreResult};
use uuid::Uuid;

use crate::error::db;

pub(crate) async fn create(pool: &PgPool, token: &AgentToken, token_hash: &str) -> StoreResult<bool> {
    // One statement that finds the agent: an unknown agent inserts nothing.
    let inserted = sqlx::query(
        "INSERT INTO agent_tokens (id, agent_id, token_hash, created_at)
         SELECT $1, a.id, $3, $4 FROM agents a WHERE a.id = $2",
    )
    .bind(token.id.as_uuid())
    .bind(token.agent_id.as_uuid())
    .bind(token_hash)
    .bind(token.created_at.datetime())
    .execute(pool)
    .await
    .map_err(db)?;
    Ok(inserted.rows_affected() == 1)
}

pub(crate) async fn list(pool: &PgPool, agent: AgentId) -> StoreResult<Vec<AgentToken>> {
    sqlx::query(
        "SELECT id, agent_id, created_at, revoked_at FROM agent_tokens
         WHERE agent_id = $1 ORDER BY created_at, id",
    )
    .bind(agent.as_uuid())
    .try_map(from_row)
    .fetch_all(pool)
    .await
    .map_err(db)
}

pub(crate) async fn revoke(
    pool: &PgPool,
    agent: AgentId,
    id: AgentTokenId,
    now: Timestamp,
) -> StoreResult<Applied<AgentToken>> {
    // Guarded by `revoked_at IS NULL`; when it refuses, the row as it stands says why.
    let revoked = sqlx::query(
        "UPDATE agent_tokens SET revoked_at = $3
         WHERE id = $1 AND agent_id = $2 AND revoked_at IS NULL
         RETURNING id, agent_id, created_at, revoked_at",
    )
    .bind(id.as_uuid())
    .bind(agent.as_uuid())
    .bind(now.datetime())
    .try_map(from_row)
    .fetch_optional(pool)
    .await
    .map_err(db)?;
    if let Some(after) = revoked {
        let before = AgentToken { revoked_at: None, ..after.clone() };
        return Ok(Applied::Changed { before, after });
    }
    let current = sqlx::query(
        "SELECT id, agent_id, created_at, revoked_at FROM agent_tokens WHERE id = $1 AND agent_id = $2",
    )
    .bind(id.as_uuid())
    .bind(agent.as_uuid())
    .try_map(from_row)
    .fetch_optional(pool)
    .await
    .map_err(db)?;
    Ok(match current {
        Some(current) => Applied::Refused { current },
        None => Applied::NotFound,
    })
}

pub(crate) async fn agent_of(pool: &PgPool, token_hash: &str) -> StoreResult<Option<AgentId>> {
    let id: Option<Uuid> =
        sqlx::query_scalar("SELECT agent_id FROM agent_tokens WHERE token_hash = $1 AND revoked_at IS NULL")
            .bind(token_hash)
            .fetch_optional(pool)
            .await
            .map_err(db)?;
    Ok(id.map(AgentId::from_uuid))
}

fn from_row(row: PgRow) -> sqlx::Result<AgentToken> {
    let created_at: DateTime<Utc> = row.try_get("created_at")?;
    let revoked_at: Option<DateTime<Utc>> = row.try_get("revoked_at")?;
    Ok(AgentToken {
        id: AgentTokenId::from_uuid(row.try_get("id")?),
        agent_id: AgentId::from_uuid(row.try_get("agent_id")?),
        created_at: Timestamp::from_datetime(created_at),
        revoked_at: revoked_at.map(Timestamp::from_datetime),
    })
}

/// Hub settings, each replaced by name, in one transaction.
pub(crate) async fn settings_put(pool: &PgPool, settings: &[(&str, &str)]) -> StoreResult<()> {
    let mut tx = pool.begin().await.map_err(db)?;
    for (name, value) in settings {
        sqlx::query(
            "INSERT INTO hub_settings (name, value) VALUES ($1, $2)
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        )
        .bind(name)
        .bind(value)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    }
    tx.commit().await.map_err(db)
}

pub(crate) async fn settings(pool: &PgPool) -> StoreResult<Vec<(String, String)>> {
    let rows = sqlx::query("SELECT name, value FROM hub_settings").fetch_all(pool).await.map_err(db)?;
    rows.iter()
        .map(|row| Ok((row.try_get::<String, _>(0).map_err(db)?, row.try_get::<String, _>(1).map_err(db)?)))
        .collect()
}
