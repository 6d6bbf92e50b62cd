//! Agent tokens (`AGENT_AUTH=token`): created by the operator and shown once, listed
//! and revoked by the operator or the agent itself.

use axum::{
    extract::{Path, State},
    http::StatusCode,
};
use serde::Serialize;
use swarm_domain::{
    id::{AgentId, AgentTokenId},
    time::Timestamp,
    token::AgentToken,
};
use swarm_service::IssuedToken;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    AppState, Json,
    error::{ApiError, ErrorResponses},
    extract::CallerHeader,
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(tokens_create, tokens_list)).routes(routes!(tokens_revoke))
}

/// A token just created. `token` is the secret, shown this once: the hub keeps only its
/// SHA-256.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewTokenResponse {
    id: AgentTokenId,
    /// Send it as `Authorization: Bearer <token>`; it acts as this agent only.
    token: String,
    created_at: Timestamp,
}

impl From<IssuedToken> for NewTokenResponse {
    fn from(issued: IssuedToken) -> Self {
        NewTokenResponse { id: issued.token.id, token: issued.secret, created_at: issued.token.created_at }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TokenListResponse {
    tokens: Vec<AgentToken>,
}

/// Create a token for an agent (operator key only); the token is in this answer only.
#[utoipa::path(post, path = "/api/agents/{id}/tokens", tag = "agents",
    params(("id" = uuid::Uuid, Path, description = "Agent id")),
    responses((status = 201, description = "Created; `token` is shown this once", body = NewTokenResponse),
        ErrorResponses))]
async fn tokens_create(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<NewTokenResponse>), ApiError> {
    let issued = state.service.agent_token_create(caller, AgentId::parse(&id)?).await?;
    Ok((StatusCode::CREATED, Json(issued.into())))
}

/// An agent's tokens: ids and dates, revoked ones with `revokedAt`; never the tokens.
#[utoipa::path(get, path = "/api/agents/{id}/tokens", tag = "agents",
    params(("id" = uuid::Uuid, Path, description = "Agent id")),
    responses((status = 200, body = TokenListResponse), ErrorResponses))]
async fn tokens_list(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
) -> Result<Json<TokenListResponse>, ApiError> {
    let tokens = state.service.agent_token_list(caller, AgentId::parse(&id)?).await?;
    Ok(Json(TokenListResponse { tokens }))
}

/// Revoke a token at once: the next request with it is 401, on every replica.
#[utoipa::path(delete, path = "/api/agents/{id}/tokens/{tokenId}", tag = "agents",
    params(("id" = uuid::Uuid, Path, description = "Agent id"),
        ("tokenId" = uuid::Uuid, Path, description = "Token id")),
    responses((status = 200, description = "Revoked", body = AgentToken), ErrorResponses))]
async fn tokens_revoke(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path((id, token_id)): Path<(String, String)>,
) -> Result<Json<AgentToken>, ApiError> {
    let revoked = state
        .service
        .agent_token_revoke(caller, AgentId::parse(&id)?, AgentTokenId::parse(&token_id)?)
        .await?;
    state.limits.token_revoked(revoked.agent_id);
    Ok(Json(revoked))
}

/// The agent token a request was authenticated by (token mode), for what it holds open.
#[derive(Clone)]
pub(crate) struct PresentedToken {
    pub agent: AgentId,
    pub secret: std::sync::Arc<str>,
}

/// How often an open stream or parked poll checks its token anyway: a revocation made
/// through another replica is not announced here.
const RECHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(15);

/// Resolves once `token` no longer authenticates: at once after a revocation of one of
/// its agent's tokens through this process, within [`RECHECK_EVERY`] after one through
/// another. Never resolves while the token lives (a failed lookup keeps it alive: the
/// database, not the token, is what failed).
pub(crate) async fn until_revoked(state: AppState, token: PresentedToken) {
    let mut revocations = state.limits.revocations();
    loop {
        tokio::select! {
            received = revocations.recv() => match received {
                Ok(agent) if agent != token.agent => continue,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => std::future::pending().await,
            },
            () = tokio::time::sleep(RECHECK_EVERY) => {}
        }
        if let Ok(None) = state.service.agent_token_verify(&token.secret).await {
            return;
        }
    }
}
