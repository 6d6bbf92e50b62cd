//! Per-caller caps on what stays open: event streams and parked polls. Without them one
//! client (a leaked key, a runaway script) could hold a thousand streams and crowd out
//! every runner. The count lives in this process only: each replica enforces its own
//! share, and losing the count on a restart is harmless (the connections are gone too).

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
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
    /// Webhook deliveries per client address; `None`: no limit.
    webhooks: Option<RateLimit>,
    /// Whether loopback clients count against the webhook rate.
    webhooks_loopback_too: bool,
    /// Agents one of whose tokens was just revoked through this process: the streams and
    /// parked polls that token holds end (`routes::tokens::until_revoked`).
    revocations: tokio::sync::broadcast::Sender<swarm_domain::id::AgentId>,
}

impl Limits {
    pub fn new(streams_per_caller: u32, polls_per_caller: u32) -> Arc<Limits> {
        Limits::with_webhook_rate(streams_per_caller, polls_per_caller, 0, false)
    }

    /// [`Limits::new`] with at most `webhooks_per_minute` webhook deliveries per client
    /// address (in bursts of as many), 0 for no limit; loopback clients (this machine)
    /// count only when `loopback_too`.
    pub fn with_webhook_rate(
        streams_per_caller: u32,
        polls_per_caller: u32,
        webhooks_per_minute: u32,
        loopback_too: bool,
    ) -> Arc<Limits> {
        Arc::new(Limits {
            streams: streams_per_caller as usize,
            polls: polls_per_caller as usize,
            open: Mutex::default(),
            webhooks: (webhooks_per_minute > 0).then(|| RateLimit::per_minute(webhooks_per_minute)),
            webhooks_loopback_too: loopback_too,
            revocations: tokio::sync::broadcast::channel(64).0,
        })
    }

    /// One of `agent`'s tokens was revoked: what a token of it holds open checks its own.
    pub fn token_revoked(&self, agent: swarm_domain::id::AgentId) {
        // No receiver is fine: nothing is held open.
        let _ = self.revocations.send(agent);
    }

    pub fn revocations(&self) -> tokio::sync::broadcast::Receiver<swarm_domain::id::AgentId> {
        self.revocations.subscribe()
    }

    /// Whether `peer` may deliver one more webhook now; else how long until it may.
    pub fn admit_webhook(&self, peer: IpAddr) -> Result<(), Duration> {
        match &self.webhooks {
            Some(_) if !self.webhooks_loopback_too && address_key(peer).is_loopback() => Ok(()),
            Some(limit) => limit.admit(peer, Instant::now()),
            None => Ok(()),
        }
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

/// What one client is counted as: its IPv4 address, or its IPv6 /64 (one subscriber's
/// usual allocation, so a client cannot dodge a per-address cap by changing the low bits).
pub fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(prefix.into())
            }
        },
    }
}

/// A token bucket per client address: `capacity` requests at once, refilled at
/// `capacity` a minute. Hand-written (a map under a lock) rather than a rate-limiting
/// crate: one bucket per address is all that is needed, webhooks are rare next to the
/// runners' requests, and `governor` would bring a dozen crates for it.
#[derive(Debug)]
struct RateLimit {
    capacity: f64,
    per_second: f64,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Above this many addresses, those whose bucket is full again are forgotten (a full
/// bucket is what an unknown address starts with, so nothing is lost).
const PRUNE_ABOVE: usize = 4_096;

impl RateLimit {
    fn per_minute(count: u32) -> Self {
        let capacity = f64::from(count.max(1));
        RateLimit { capacity, per_second: capacity / 60.0, buckets: Mutex::default() }
    }

    fn refilled(&self, bucket: Bucket, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        (bucket.tokens + elapsed * self.per_second).min(self.capacity)
    }

    fn admit(&self, peer: IpAddr, now: Instant) -> Result<(), Duration> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if buckets.len() > PRUNE_ABOVE {
            buckets.retain(|_, bucket| self.refilled(*bucket, now) < self.capacity);
        }
        let bucket = buckets.entry(address_key(peer)).or_insert(Bucket { tokens: self.capacity, at: now });
        let tokens = self.refilled(*bucket, now);
        if tokens >= 1.0 {
            *bucket = Bucket { tokens: tokens - 1.0, at: now };
            return Ok(());
        }
        *bucket = Bucket { tokens, at: now };
        Err(Duration::from_secs_f64((1.0 - tokens) / self.per_second))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_past_the_budget_waits_for_the_refill() {
        let limit = RateLimit::per_minute(3);
        let (one, other): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(limit.admit(one, start), Ok(()));
        }
        let wait = limit.admit(one, start).unwrap_err();
        assert!(wait > Duration::from_secs(19) && wait <= Duration::from_secs(20), "{wait:?}");
        assert_eq!(limit.admit(other, start), Ok(()), "each address has its own budget");
        assert_eq!(limit.admit(one, start + Duration::from_secs(20)), Ok(()), "one request a 20 s");
        assert!(limit.admit(one, start + Duration::from_secs(21)).is_err());
    }

    #[test]
    fn loopback_counts_against_the_webhook_rate_only_when_asked() {
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let by_default = Limits::with_webhook_rate(1, 1, 1, false);
        assert!((0..5).all(|_| by_default.admit_webhook(loopback).is_ok()));
        let remote: IpAddr = "192.0.2.1".parse().unwrap();
        assert!(by_default.admit_webhook(remote).is_ok() && by_default.admit_webhook(remote).is_err());
        let set = Limits::with_webhook_rate(1, 1, 1, true);
        assert!(set.admit_webhook(loopback).is_ok() && set.admit_webhook(loopback).is_err());
    }

    #[test]
    fn an_ipv6_client_is_its_slash_64() {
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(address_key(a), address_key(b));
        assert_ne!(address_key(a), address_key(c));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(address_key(mapped), "192.0.2.7".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn full_buckets_are_forgotten_when_there_are_many() {
        let limit = RateLimit::per_minute(60);
        let start = Instant::now();
        for n in 0..=PRUNE_ABOVE as u32 {
            limit.admit(IpAddr::V4(n.into()), start).unwrap();
        }
        limit.admit("198.51.100.1".parse().unwrap(), start + Duration::from_secs(2)).unwrap();
        assert_eq!(limit.buckets.lock().unwrap().len(), 1, "only the address not yet refilled is kept");
    }
}
