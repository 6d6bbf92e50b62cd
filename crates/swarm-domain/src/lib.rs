//! Plain types and state machines of swarm.
//!
//! Architecture invariant: this crate does no I/O. It knows nothing of SQL,
//! HTTP or JSON-over-the-wire beyond the serde shapes the wire keeps (docs/compatibility.md).

pub mod agent;
pub mod budget;
pub mod chat;
pub mod costs;
pub mod epic;
pub mod event;
pub mod evidence;
pub mod handback;
pub mod id;
pub mod inbox;
pub mod lease;
pub mod local_key;
pub mod mail;
pub mod mcp_task;
pub mod poll;
pub mod prompts;
pub mod registry;
pub mod retention;
pub mod session;
pub mod stats;
pub mod steering;
pub mod task;
pub mod time;
pub mod token;
pub mod trigger;
pub mod untrusted;
pub mod wire;

use std::fmt;

/// A value a user supplied that breaks a rule. The message is shown to the user as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

impl Invalid {
    pub fn new(message: impl fmt::Display) -> Self {
        Invalid(message.to_string())
    }
}

/// PostgreSQL cannot store NUL in text, and no legitimate name, task or note needs it:
/// refuse it the same way on both backends.
pub fn reject_nul(field: &str, text: &str) -> Result<(), Invalid> {
    if text.contains('\0') {
        Err(Invalid(format!("{field} must not contain NUL characters")))
    } else {
        Ok(())
    }
}
