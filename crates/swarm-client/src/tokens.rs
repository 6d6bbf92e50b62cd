//! Agent tokens (`AGENT_AUTH=token`): create (the token is in that answer only), list,
//! revoke.

use reqwest::Method;
use serde::{Deserialize, Serialize};
use swarm_domain::id::{AgentId, AgentTokenId};

use crate::{Client, ClientError};

/// A token just created; `token` is shown this once.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewToken {
    pub id: AgentTokenId,
    pub token: String,
    pub created_at: String,
}

/// A token as listed: no secret.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenInfo {
    pub id: AgentTokenId,
    pub agent_id: AgentId,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenList {
    pub tokens: Vec<TokenInfo>,
}

impl Client {
    /// `POST /api/agents/:id/tokens` (operator key).
    pub async fn create_token(&self, agent: AgentId) -> Result<NewToken, ClientError> {
        self.post_json(&format!("/api/agents/{agent}/tokens"), &serde_json::json!({})).await
    }

    /// `GET /api/agents/:id/tokens`.
    pub async fn list_tokens(&self, agent: AgentId) -> Result<TokenList, ClientError> {
        self.get_json(&format!("/api/agents/{agent}/tokens"), &[]).await
    }

    /// `DELETE /api/agents/:id/tokens/:tokenId`: refused from the next request on.
    pub async fn revoke_token(&self, agent: AgentId, token: AgentTokenId) -> Result<TokenInfo, ClientError> {
        let path = format!("/api/agents/{agent}/tokens/{token}");
        let answer = self.send::<()>(Method::DELETE, &path, &[], None).await?;
        self.decode(Method::DELETE, &path, &answer)
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
struct PrivateFiles {
    files: Vec<String>,
}

impl Client {
    /// `GET /api/hub/private-files`: the hub's database and key files. Empty from a hub
    /// that does not say (an older swarm, the reference).
    pub async fn hub_private_files(&self) -> Result<Vec<std::path::PathBuf>, ClientError> {
        match self.get_json::<PrivateFiles>("/api/hub/private-files", &[]).await {
            Ok(listed) => Ok(listed.files.into_iter().map(std::path::PathBuf::from).collect()),
            Err(error) if error.status() == Some(reqwest::StatusCode::NOT_FOUND) => Ok(Vec::new()),
            Err(error) => Err(error),
        }
    }
}
