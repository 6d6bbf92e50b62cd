//! Agent tokens (`AGENT_AUTH=token`): a credential that acts as one agent only. The
//! secret itself never lives here or in the database; only its hash is kept, and a
//! token as listed is its id and dates.

use serde::Serialize;

use crate::{
    id::{AgentId, AgentTokenId},
    time::Timestamp,
};

/// A token as the hub keeps and lists it: no secret, no hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentToken {
    pub id: AgentTokenId,
    pub agent_id: AgentId,
    pub created_at: Timestamp,
    /// Set once revoked; a revoked token is refused (401) from then on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<Timestamp>,
}
