//! Secrets at rest: webhook secrets and services' `env` values are stored encrypted
//! under a key derived from the operator key, so that a copy of the database (a backup,
//! a file another user could read, a PostgreSQL dump) does not carry them in clear.
//!
//! The stored form is text, `enc:v1:<base64 of nonce ‖ ciphertext ‖ tag>`:
//! XChaCha20-Poly1305 (a random 24-byte nonce per value, safe to draw at random) under
//! `HKDF-SHA256(operator key)`, with the field's purpose (`webhook_secret`, `env`) as
//! associated data so that a value cannot be moved from one kind of field to another.
//!
//! Webhook secrets are *encrypted*, not hashed as agent tokens are: checking an
//! `X-Hub-Signature-256` is computing the HMAC of the body under the secret itself, so
//! the hub needs the clear secret back; a hash would only check the secret-header form.
//!
//! A service without the key (`--insecure-no-auth`, `swarm mcp` started without one)
//! stores clear values and passes sealed ones through untouched; a hub with the key reads
//! both (the clear ones of an older database too) and seals what is still clear when it
//! starts ([`Service::seal_stored_secrets`]). Changing the operator key makes the sealed
//! values unreadable: webhook secrets must then be set again, and agents register their
//! services again.

use std::collections::BTreeMap;

use base64::{Engine, engine::general_purpose::STANDARD};
use chacha20poly1305::{
    KeyInit, XChaCha20Poly1305, XNonce,
    aead::{Aead, Payload},
};
use swarm_domain::{
    registry::{NewService, RegisteredService},
    trigger::TriggerDef,
};

use crate::{Service, ServiceResult};

/// What a sealed value starts with.
pub const SEALED_PREFIX: &str = "enc:v1:";
/// What a caller who may not read a service's `env` values sees instead of each one.
pub const REDACTED: &str = "<redacted>";
/// An `env` value sealed under another key (or read by a process without the key).
pub const UNREADABLE: &str = "<encrypted: read it through the hub>";

const NONCE_BYTES: usize = 24;
/// HKDF's salt and info: what the derived key is for, so that it is never the key of
/// anything else derived from the operator key.
const HKDF_SALT: &[u8] = b"swarm secrets at rest";
const HKDF_INFO: &[u8] = b"enc:v1 xchacha20poly1305";

const WEBHOOK_SECRET: &[u8] = b"webhook_secret";
const ENV: &[u8] = b"env";

/// The cipher for values at rest, derived from the operator key.
#[derive(Clone)]
pub struct SecretBox {
    cipher: XChaCha20Poly1305,
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretBox(..)")
    }
}

/// A sealed value that does not open: sealed under another key, or altered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable;

impl SecretBox {
    pub fn from_operator_key(operator_key: &str) -> SecretBox {
        let derive = hkdf::Hkdf::<sha2::Sha256>::new(Some(HKDF_SALT), operator_key.as_bytes());
        let mut key = [0u8; 32];
        derive.expand(HKDF_INFO, &mut key).expect("32 bytes is a valid HKDF-SHA256 length");
        SecretBox { cipher: XChaCha20Poly1305::new(&key.into()) }
    }

    /// `clear` as `enc:v1:...`.
    pub fn seal(&self, purpose: &[u8], clear: &str) -> String {
        let mut nonce = [0u8; NONCE_BYTES];
        // Without randomness from the OS the hub cannot work at all (ids, tokens): stop
        // rather than seal under a nonce that might repeat.
        getrandom::fill(&mut nonce).expect("the operating system gives random bytes");
        let sealed = self
            .cipher
            .encrypt(&XNonce::from(nonce), Payload { msg: clear.as_bytes(), aad: purpose })
            .expect("XChaCha20-Poly1305 encrypts any length a field can have");
        let mut bytes = Vec::with_capacity(NONCE_BYTES + sealed.len());
        bytes.extend_from_slice(&nonce);
        bytes.extend_from_slice(&sealed);
        format!("{SEALED_PREFIX}{}", STANDARD.encode(bytes))
    }

    /// The clear text of `stored`: itself when it is not sealed.
    pub fn open(&self, purpose: &[u8], stored: &str) -> Result<String, Unreadable> {
        let Some(encoded) = stored.strip_prefix(SEALED_PREFIX) else {
            return Ok(stored.to_string());
        };
        let bytes = STANDARD.decode(encoded).map_err(|_| Unreadable)?;
        if bytes.len() < NONCE_BYTES {
            return Err(Unreadable);
        }
        let (nonce, sealed) = bytes.split_at(NONCE_BYTES);
        let nonce: [u8; NONCE_BYTES] = nonce.try_into().map_err(|_| Unreadable)?;
        let clear = self
            .cipher
            .decrypt(&XNonce::from(nonce), Payload { msg: sealed, aad: purpose })
            .map_err(|_| Unreadable)?;
        String::from_utf8(clear).map_err(|_| Unreadable)
    }
}

pub fn is_sealed(value: &str) -> bool {
    value.starts_with(SEALED_PREFIX)
}

impl Service {
    /// The same service storing webhook secrets and `env` values sealed under a key
    /// derived from `operator_key` (and reading them back).
    pub fn with_secret_key(mut self, operator_key: &str) -> Self {
        self.secrets = Some(std::sync::Arc::new(SecretBox::from_operator_key(operator_key)));
        self
    }

    /// Whether values at rest are sealed by this service.
    pub fn seals_secrets(&self) -> bool {
        self.secrets.is_some()
    }

    /// `trigger` as the store keeps it: its webhook secret sealed, when there is a key.
    pub(crate) fn seal_trigger(&self, mut trigger: TriggerDef) -> TriggerDef {
        if let (Some(secrets), Some(secret)) = (&self.secrets, &trigger.webhook_secret) {
            trigger.webhook_secret = Some(secrets.seal(WEBHOOK_SECRET, secret));
        }
        trigger
    }

    /// `trigger` as read from the store, its webhook secret in clear. A secret sealed
    /// under another key is dropped (with a warning), so the webhook refuses every
    /// request until its secret is set again; without a key a sealed secret is kept as it
    /// is, so that changing another field of the trigger keeps it.
    pub(crate) fn open_trigger(&self, mut trigger: TriggerDef) -> TriggerDef {
        if let (Some(secrets), Some(stored)) = (&self.secrets, &trigger.webhook_secret) {
            match secrets.open(WEBHOOK_SECRET, stored) {
                Ok(clear) => trigger.webhook_secret = Some(clear),
                Err(Unreadable) => {
                    tracing::warn!(
                        trigger = %trigger.name,
                        "the webhook secret of this trigger was sealed under another operator key: \
                         it refuses every request until its webhookSecret is set again"
                    );
                    trigger.webhook_secret = None;
                }
            }
        }
        trigger
    }

    /// `service` as the store keeps it: its `env` values sealed, when there is a key.
    pub(crate) fn seal_service(&self, mut service: NewService) -> NewService {
        if let (Some(secrets), Some(env)) = (&self.secrets, service.env.as_mut()) {
            for value in env.values_mut() {
                *value = secrets.seal(ENV, value);
            }
        }
        service
    }

    /// `service` as read from the store: its `env` values in clear when `readable` (the
    /// caller is its agent, the lead or the operator), else each one [`REDACTED`].
    pub(crate) fn open_service(&self, mut service: RegisteredService, readable: bool) -> RegisteredService {
        if let Some(env) = service.env.as_mut() {
            for value in env.values_mut() {
                *value = if !readable {
                    REDACTED.to_string()
                } else if !is_sealed(value) {
                    std::mem::take(value)
                } else {
                    match &self.secrets {
                        Some(secrets) => {
                            secrets.open(ENV, value).unwrap_or_else(|Unreadable| UNREADABLE.to_string())
                        }
                        None => UNREADABLE.to_string(),
                    }
                };
            }
        }
        service
    }

    /// Seals the webhook secrets and `env` values still stored in clear (written by an
    /// older swarm, or by a process without the key). The hub runs it once as it starts.
    /// Returns how many triggers and services it sealed.
    pub async fn seal_stored_secrets(&self) -> ServiceResult<(usize, usize)> {
        let Some(secrets) = &self.secrets else { return Ok((0, 0)) };
        let mut triggers = 0;
        for trigger in self.store.trigger_list().await? {
            if trigger.webhook_secret.as_deref().is_some_and(|secret| !is_sealed(secret)) {
                // Only webhook triggers have secrets, and no schedule fires them: writing
                // the row back races no scheduled slot.
                self.store.trigger_update(&self.seal_trigger(trigger)).await?;
                triggers += 1;
            }
        }
        let mut services = 0;
        let everything = swarm_store::ServiceFilter::default();
        for service in self.store.service_list(&everything).await? {
            let Some(env) = &service.env else { continue };
            if env.values().all(|value| is_sealed(value)) {
                continue;
            }
            let env: BTreeMap<String, String> = env
                .iter()
                .map(|(name, value)| {
                    let value = if is_sealed(value) { value.clone() } else { secrets.seal(ENV, value) };
                    (name.clone(), value)
                })
                .collect();
            let sealed = NewService {
                id: service.id,
                agent_id: service.agent_id,
                name: service.name,
                port: service.port,
                description: service.description,
                url: service.url,
                health_check_path: service.health_check_path,
                script: service.script,
                cwd: service.cwd,
                interpreter: service.interpreter,
                args: service.args,
                env: Some(env),
                metadata: service.metadata,
            };
            self.store.service_upsert(&sealed, service.last_updated_at).await?;
            services += 1;
        }
        Ok((triggers, services))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_under_its_key_and_purpose_only() {
        let secrets = SecretBox::from_operator_key("swk_one");
        let sealed = secrets.seal(ENV, "postgres://user:pw@db/app");
        assert!(sealed.starts_with(SEALED_PREFIX) && !sealed.contains("pw@db"), "{sealed}");
        assert_eq!(secrets.open(ENV, &sealed).unwrap(), "postgres://user:pw@db/app");
        assert_ne!(secrets.seal(ENV, "same"), secrets.seal(ENV, "same"), "a nonce per value");
        assert_eq!(secrets.open(WEBHOOK_SECRET, &sealed), Err(Unreadable));
        assert_eq!(SecretBox::from_operator_key("swk_two").open(ENV, &sealed), Err(Unreadable));
        assert_eq!(secrets.open(ENV, "enc:v1:AAAA"), Err(Unreadable));
        assert_eq!(secrets.open(ENV, "still clear").unwrap(), "still clear");
    }
}
