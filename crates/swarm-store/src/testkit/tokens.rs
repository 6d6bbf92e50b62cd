//! Agent tokens: kept by hash, found only while live, revoked once, listed per agent.

use std::sync::Arc;

use crate::{Applied, Store};
use swarm_domain::{
    id::{AgentId, AgentTokenId},
    token::AgentToken,
};

use super::Fixture;

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_tokens {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            tokens,
            [
                a_token_finds_its_agent_until_revoked,
                a_token_needs_a_registered_agent,
                revoke_is_guarded_and_scoped_to_the_agent,
                list_is_per_agent_oldest_first,
                hub_settings_are_replaced_by_name,
            ],
            multi_thread: []
        );
    };
}

fn token(fx: &Fixture, agent: AgentId) -> AgentToken {
    AgentToken { id: AgentTokenId::new_v7(), agent_id: agent, created_at: fx.now(), revoked_at: None }
}

pub async fn a_token_finds_its_agent_until_revoked(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("w").await;
    let kept = token(&fx, agent);
    assert!(fx.store.agent_token_create(&kept, "hash-1").await.unwrap());
    assert_eq!(fx.store.agent_token_agent("hash-1").await.unwrap(), Some(agent));
    assert_eq!(fx.store.agent_token_agent("hash-2").await.unwrap(), None, "an unknown hash is no one");

    let now = fx.now();
    match fx.store.agent_token_revoke(agent, kept.id, now).await.unwrap() {
        Applied::Changed { before, after } => {
            assert_eq!(before.revoked_at, None);
            assert_eq!(after.revoked_at, Some(now));
        }
        other => panic!("expected Changed, got {other:?}"),
    }
    assert_eq!(fx.store.agent_token_agent("hash-1").await.unwrap(), None, "a revoked token is no one");
}

pub async fn a_token_needs_a_registered_agent(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let stranger = token(&fx, AgentId::new_v7());
    assert!(!fx.store.agent_token_create(&stranger, "hash-x").await.unwrap());
    assert_eq!(fx.store.agent_token_agent("hash-x").await.unwrap(), None);
}

pub async fn revoke_is_guarded_and_scoped_to_the_agent(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let (a, b) = (fx.worker("a").await, fx.worker("b").await);
    let of_a = token(&fx, a);
    assert!(fx.store.agent_token_create(&of_a, "hash-a").await.unwrap());

    // Another agent's id does not reach A's token.
    assert_eq!(fx.store.agent_token_revoke(b, of_a.id, fx.now()).await.unwrap(), Applied::NotFound);
    assert_eq!(fx.store.agent_token_agent("hash-a").await.unwrap(), Some(a));

    let first = fx.now();
    assert!(matches!(fx.store.agent_token_revoke(a, of_a.id, first).await.unwrap(), Applied::Changed { .. }));
    match fx.store.agent_token_revoke(a, of_a.id, fx.now()).await.unwrap() {
        Applied::Refused { current } => {
            assert_eq!(current.revoked_at, Some(first), "the first revocation stands")
        }
        other => panic!("expected Refused, got {other:?}"),
    }
}

pub async fn list_is_per_agent_oldest_first(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let (a, b) = (fx.worker("a").await, fx.worker("b").await);
    let (first, second, of_b) = (token(&fx, a), token(&fx, a), token(&fx, b));
    for (kept, hash) in [(&first, "h1"), (&second, "h2"), (&of_b, "h3")] {
        assert!(fx.store.agent_token_create(kept, hash).await.unwrap());
    }
    assert_eq!(fx.store.agent_token_list(a).await.unwrap(), vec![first, second]);
    assert_eq!(fx.store.agent_token_list(b).await.unwrap(), vec![of_b]);
}

/// Hub settings live beside the tokens: both are what every process must agree on about
/// who is who.
pub async fn hub_settings_are_replaced_by_name(store: Arc<dyn Store>) {
    assert!(store.hub_settings().await.unwrap().is_empty(), "a new database has no settings");
    store.hub_settings_put(&[("agent_auth", "header"), ("lease", "{\"periodMs\":1000}")]).await.unwrap();
    store.hub_settings_put(&[("agent_auth", "token")]).await.unwrap();
    let mut settings = store.hub_settings().await.unwrap();
    settings.sort();
    assert_eq!(
        settings,
        vec![
            ("agent_auth".to_string(), "token".to_string()),
            ("lease".to_string(), "{\"periodMs\":1000}".to_string()),
        ]
    );
}
