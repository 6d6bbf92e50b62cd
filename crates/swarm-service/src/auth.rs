//! Who a request speaks for: the identity mode (`AGENT_AUTH`), agent tokens, and the
//! one rule that turns a request's credential and its `X-Agent-ID` into a [`Caller`].
//! Both adapters (REST, MCP over HTTP) apply the same rule through [`Authenticated`].
//!
//! A token is 32 random bytes (256 bits), so a fast hash (SHA-256) is enough to keep it:
//! there is nothing to guess, and a slow KDF would cost every request. The token is
//! looked up on every request by its hash (one probe of a unique index) and nothing is
//! cached, so a revocation holds at the next request on every replica.

use sha2::{Digest, Sha256};
use swarm_domain::{
    agent::Registration,
    id::{AgentId, AgentTokenId},
    token::AgentToken,
};
use swarm_store::Applied;

use crate::{Caller, RegisterInput, Service, ServiceError, ServiceResult};

/// What names the calling agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AgentAuth {
    /// The reference's: `X-Agent-ID` names the agent and is believed; whoever holds the
    /// operator key may act as any agent.
    #[default]
    Header,
    /// Each agent proves who it is with its own token; the operator key administers
    /// but does not act as an agent.
    Token,
}

impl AgentAuth {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "header" => Ok(AgentAuth::Header),
            "token" => Ok(AgentAuth::Token),
            other => Err(format!("agent auth must be header or token, got {other:?}")),
        }
    }
    pub fn as_str(&self) -> &'static str {
        match self {
            AgentAuth::Header => "header",
            AgentAuth::Token => "token",
        }
    }
}

/// What a request's `Authorization` proved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// The operator key (or no key on an open hub, or a public path).
    Operator,
    /// A live token of this agent (token mode only).
    Agent(AgentId),
}

/// A request's credential under the hub's mode; the adapters' edge attaches it to the
/// request, and each handler turns it into a [`Caller`] with its `X-Agent-ID`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Authenticated {
    pub mode: AgentAuth,
    pub credential: Credential,
}

impl Authenticated {
    /// The caller of a request whose `X-Agent-ID` is `named`. In token mode a token acts
    /// as its own agent only, and the operator key cannot act as any agent (403).
    pub fn caller(&self, named: Option<AgentId>) -> ServiceResult<Caller> {
        match (self.mode, self.credential, named) {
            (AgentAuth::Header, _, Some(id)) => Ok(Caller::Agent(id)),
            (AgentAuth::Header, _, None) => Ok(Caller::Operator),
            (AgentAuth::Token, Credential::Agent(own), None) => Ok(Caller::Agent(own)),
            (AgentAuth::Token, Credential::Agent(own), Some(id)) if id == own => Ok(Caller::Agent(own)),
            (AgentAuth::Token, Credential::Agent(own), Some(id)) => Err(ServiceError::Forbidden(format!(
                "this token belongs to agent {own}; it cannot act as agent {id} (X-Agent-ID)"
            ))),
            (AgentAuth::Token, Credential::Operator, Some(id)) => Err(operator_cannot_act_as(id)),
            (AgentAuth::Token, Credential::Operator, None) => Ok(Caller::Operator),
        }
    }
}

/// The refusal that tells the operator which credential to use instead.
pub fn operator_cannot_act_as(id: AgentId) -> ServiceError {
    ServiceError::Forbidden(format!(
        "the hub runs with AGENT_AUTH=token: the operator key cannot act as agent {id}; send that agent's \
         token instead (Authorization: Bearer <token>), created with POST /api/agents/{id}/tokens or \
         `swarm agent token create {id}`"
    ))
}

/// A token just created: the secret is in here and nowhere else (shown once).
#[derive(Debug, Clone)]
pub struct IssuedToken {
    pub token: AgentToken,
    pub secret: String,
}

/// Every token starts so: a request's bearer that does not is not looked up.
pub const TOKEN_PREFIX: &str = "swt_";

fn hash_of(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

fn new_secret() -> ServiceResult<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|error| {
        ServiceError::Unavailable(format!("no randomness for a token from the operating system: {error}"))
    })?;
    Ok(format!("{TOKEN_PREFIX}{}", hex::encode(bytes)))
}

impl Service {
    /// The same service in identity mode `mode`.
    pub fn with_agent_auth(mut self, mode: AgentAuth) -> Self {
        self.agent_auth = mode;
        self
    }

    pub fn agent_auth(&self) -> AgentAuth {
        self.agent_auth
    }

    /// The agent whose live token `secret` is, or `None` (unknown, revoked, not a token).
    pub async fn agent_token_verify(&self, secret: &str) -> ServiceResult<Option<AgentId>> {
        if !secret.starts_with(TOKEN_PREFIX) {
            return Ok(None);
        }
        Ok(self.store.agent_token_agent(&hash_of(secret)).await?)
    }

    /// A new token for `agent`, for the operator only.
    pub async fn agent_token_create(&self, caller: Caller, agent: AgentId) -> ServiceResult<IssuedToken> {
        if caller != Caller::Operator {
            return Err(ServiceError::Forbidden("agent tokens are created with the operator key".into()));
        }
        self.issue_token(agent).await
    }

    async fn issue_token(&self, agent: AgentId) -> ServiceResult<IssuedToken> {
        let secret = new_secret()?;
        let token = AgentToken {
            id: AgentTokenId::new_v7(),
            agent_id: agent,
            created_at: self.clock.now(),
            revoked_at: None,
        };
        if !self.store.agent_token_create(&token, &hash_of(&secret)).await? {
            return Err(crate::agents::unknown_agent(agent));
        }
        Ok(IssuedToken { token, secret })
    }

    /// The agent's tokens (ids and dates), for the operator or the agent itself.
    pub async fn agent_token_list(&self, caller: Caller, agent: AgentId) -> ServiceResult<Vec<AgentToken>> {
        require_operator_or_self(caller, agent, "list the tokens of")?;
        self.agent_get(agent).await?;
        Ok(self.store.agent_token_list(agent).await?)
    }

    /// Revoke one of the agent's tokens, for the operator or the agent itself; the next
    /// request with it is refused. Revoking a revoked token is a 409.
    pub async fn agent_token_revoke(
        &self,
        caller: Caller,
        agent: AgentId,
        id: AgentTokenId,
    ) -> ServiceResult<AgentToken> {
        require_operator_or_self(caller, agent, "revoke the tokens of")?;
        match self.store.agent_token_revoke(agent, id, self.clock.now()).await? {
            Applied::Changed { after, .. } => Ok(after),
            Applied::Refused { .. } => Err(ServiceError::Conflict(format!("token {id} is already revoked"))),
            Applied::NotFound => Err(ServiceError::NotFound(format!("agent {agent} has no token {id}"))),
        }
    }

    /// Registration under the hub's identity mode. `named` is the id asked for
    /// (`X-Agent-ID`, MCP's `requestedId`). In token mode an agent's token registers that
    /// agent only, and the operator key registers new agents only, each with a first
    /// token; bringing back an agent that exists needs that agent's token.
    pub async fn agent_register_as(
        &self,
        auth: Authenticated,
        named: Option<AgentId>,
        input: RegisterInput,
    ) -> ServiceResult<(Registration, Option<IssuedToken>)> {
        if auth.mode == AgentAuth::Header {
            return Ok((self.agent_register(named, input).await?, None));
        }
        match auth.credential {
            Credential::Agent(own) => {
                let id = auth.caller(named)?.agent_id().unwrap_or(own);
                Ok((self.agent_register(Some(id), input).await?, None))
            }
            Credential::Operator => {
                if let Some(id) = named
                    && self.store.agent_get(id).await?.is_some()
                {
                    return Err(ServiceError::Forbidden(format!(
                        "agent {id} is registered: registering it again needs its own token \
                         (Authorization: Bearer <token>); the operator can create one with \
                         POST /api/agents/{id}/tokens"
                    )));
                }
                let registration = self.agent_register(named, input).await?;
                let token = match &registration {
                    Registration::Created(agent) => Some(self.issue_token(agent.id).await?),
                    // Registered by someone else in between: its token is theirs to ask for.
                    Registration::Existing(_) => None,
                };
                Ok((registration, token))
            }
        }
    }
}

fn require_operator_or_self(caller: Caller, agent: AgentId, verb: &str) -> ServiceResult<()> {
    match caller {
        Caller::Operator => Ok(()),
        Caller::Agent(id) if id == agent => Ok(()),
        Caller::Agent(_) => Err(ServiceError::Forbidden(format!(
            "only the operator or the agent itself may {verb} agent {agent}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_mode_keeps_each_credential_to_its_own_agent() {
        let (a, b) = (AgentId::new_v7(), AgentId::new_v7());
        let token_of_a = Authenticated { mode: AgentAuth::Token, credential: Credential::Agent(a) };
        assert_eq!(token_of_a.caller(None).unwrap(), Caller::Agent(a));
        assert_eq!(token_of_a.caller(Some(a)).unwrap(), Caller::Agent(a));
        assert!(matches!(token_of_a.caller(Some(b)), Err(ServiceError::Forbidden(_))));

        let operator = Authenticated { mode: AgentAuth::Token, credential: Credential::Operator };
        assert_eq!(operator.caller(None).unwrap(), Caller::Operator);
        match operator.caller(Some(a)) {
            Err(ServiceError::Forbidden(message)) => assert!(message.contains("token"), "{message}"),
            other => panic!("expected 403, got {other:?}"),
        }

        // Header mode believes the header, as the reference does.
        let header = Authenticated { mode: AgentAuth::Header, credential: Credential::Operator };
        assert_eq!(header.caller(Some(b)).unwrap(), Caller::Agent(b));
    }

    #[test]
    fn secrets_are_random_prefixed_and_hashed() {
        let (one, two) = (new_secret().unwrap(), new_secret().unwrap());
        assert_ne!(one, two);
        assert!(one.starts_with(TOKEN_PREFIX) && one.len() == TOKEN_PREFIX.len() + 64);
        assert_eq!(hash_of(&one).len(), 64);
        assert_ne!(hash_of(&one), one);
    }
}
