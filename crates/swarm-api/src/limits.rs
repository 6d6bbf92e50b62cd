//! Per-caller caps on what stays open: event streams and parked polls. Without them one
//! client (a leaked key, a runaway script) could hold a thousand streams and crowd out
//! every runner. The count lives in this process only: each replica enforces its own
//! share, and losing the count on a restart is harmless (the connections are gone too).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use swarm_service::Caller;

use crate::error::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Held {
    Stream,
    Poll,
}

#[derive(Debug)]
pub struct Limits {
    streams: usize,
    polls: usize,
    open: Mutex<HashMap<(Held, Option<swarm_domain::id::AgentId>), usize>>,
}

impl Limits {
    pub fn new(streams_per_caller: u32, polls_per_caller: u32) -> Arc<Limits> {
        Arc::new(Limits {
            streams: streams_per_caller as usize,
            polls: polls_per_caller as usize,
            open: Mutex::default(),
        })
    }

    /// Limits nobody reaches (embedders that do not care).
    pub fn unlimited() -> Arc<Limits> {
        Limits::new(u32::MAX, u32::MAX)
    }

    /// A slot for `caller`, given back when the slot is dropped; 429 when it holds its
    /// share already.
    pub fn take(self: &Arc<Self>, held: Held, caller: Caller) -> Result<Slot, ApiError> {
        let cap = match held {
            Held::Stream => self.streams,
            Held::Poll => self.polls,
        };
        let key = (held, caller.agent_id());
        let mut open = self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = open.entry(key).or_default();
        if *count >= cap {
            let what = match held {
                Held::Stream => "event streams (GET /api/events)",
                Held::Poll => "waiting polls (GET /api/poll?wait=)",
            };
            return Err(ApiError::TooManyRequests(format!(
                "this caller already holds {cap} open {what}; close one first"
            )));
        }
        *count += 1;
        Ok(Slot { limits: Arc::clone(self), key })
    }
}

/// One open stream or parked poll.
#[derive(Debug)]
pub struct Slot {
    limits: Arc<Limits>,
    key: (Held, Option<swarm_domain::id::AgentId>),
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.limits.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = open.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.key);
            }
        }
    }
}
