//! Who asked to hear about changes, on a stdio server (one client per process): the
//! 2025 revisions' `resources/subscribe` (notifications on the session), and the
//! 2026-07-28 revision's `subscriptions/listen` streams (notifications on the stream,
//! only the kinds the client asked for).
//!
//! The store has no change feed, so a watcher reads each subscribed resource once a
//! second and tells the subscribers when its document changed: a task changing state,
//! new mail.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use rmcp::{
    Peer, RoleServer,
    model::{ResourceUpdatedNotification, ResourceUpdatedNotificationParam, ServerNotification},
    service::SubscriptionSink,
};

/// How often subscribed resources are read again.
const WATCH_EVERY: Duration = Duration::from_secs(1);

#[derive(Default)]
struct State {
    /// `resources/subscribe`d URIs, and the session to tell.
    legacy: HashSet<String>,
    legacy_peer: Option<Peer<RoleServer>>,
    /// Open `subscriptions/listen` streams.
    listeners: Vec<SubscriptionSink>,
    /// Streams acknowledged to their client but not yet in `listeners`: rmcp acknowledges a
    /// stream before it hands it over, and the client may call `join-swarm` in between.
    acknowledged_not_listening: usize,
    /// The tool list changed while such a stream was on its way: it is told on arrival.
    tool_change_in_between: bool,
    /// The last document seen of each watched URI.
    seen: HashMap<String, String>,
    watching: bool,
}

#[derive(Clone, Default)]
pub struct Subscriptions {
    state: Arc<Mutex<State>>,
}

impl Subscriptions {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `resources/subscribe`, with the document as the subscriber read it (a change from
    /// then on is news); returns whether the watcher must be started.
    pub fn subscribe(&self, uri: String, document: String, peer: Peer<RoleServer>) -> bool {
        let mut state = self.lock();
        state.seen.entry(uri.clone()).or_insert(document);
        state.legacy.insert(uri);
        state.legacy_peer = Some(peer);
        !std::mem::replace(&mut state.watching, true)
    }

    pub fn unsubscribe(&self, uri: &str) {
        let mut state = self.lock();
        state.legacy.remove(uri);
        state.seen.remove(uri);
    }

    /// A `subscriptions/listen` stream that asked for tool list changes is about to be
    /// acknowledged; [`Subscriptions::listen`] follows.
    pub fn acknowledging(&self) {
        self.lock().acknowledged_not_listening += 1;
    }

    /// A `subscriptions/listen` stream opened; returns whether the watcher must be started,
    /// and whether the tool list changed since the stream was acknowledged (tell it now).
    pub fn listen(&self, sink: SubscriptionSink) -> (bool, bool) {
        let mut state = self.lock();
        let wants_tools = sink.accepted().tools_list_changed == Some(true);
        let missed = wants_tools && state.tool_change_in_between;
        if wants_tools {
            state.acknowledged_not_listening = state.acknowledged_not_listening.saturating_sub(1);
            if state.acknowledged_not_listening == 0 {
                state.tool_change_in_between = false;
            }
        }
        state.listeners.push(sink);
        (!std::mem::replace(&mut state.watching, true), missed)
    }

    pub fn stop_listening(&self, sink: &SubscriptionSink) {
        self.lock().listeners.retain(|listener| listener.id() != sink.id());
    }

    /// The tool list changed (a stdio process joined the swarm): tell the streams that
    /// asked for it; a 2025 session is told directly by the caller.
    pub async fn tool_list_changed(&self) {
        let listeners: Vec<SubscriptionSink> = {
            let mut state = self.lock();
            if state.acknowledged_not_listening > 0 {
                state.tool_change_in_between = true;
            }
            state
                .listeners
                .iter()
                .filter(|sink| sink.accepted().tools_list_changed == Some(true))
                .cloned()
                .collect()
        };
        for sink in listeners {
            let _ = sink.notify_tool_list_changed().await;
        }
    }

    fn watched(&self) -> Vec<String> {
        let state = self.lock();
        let mut uris: HashSet<String> = state.legacy.clone();
        for sink in &state.listeners {
            uris.extend(sink.accepted().resource_subscriptions.iter().flatten().cloned());
        }
        uris.into_iter().collect()
    }

    /// Read every watched resource with `read` once a second, forever (the process ends
    /// with its client), and tell its subscribers when it changed.
    pub async fn watch<F, Fut>(self, read: F)
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = Option<String>>,
    {
        loop {
            tokio::time::sleep(WATCH_EVERY).await;
            for uri in self.watched() {
                let Some(document) = read(uri.clone()).await else { continue };
                let changed = {
                    let mut state = self.lock();
                    match state.seen.insert(uri.clone(), document.clone()) {
                        Some(before) => before != document,
                        None => false,
                    }
                };
                if changed {
                    self.updated(&uri).await;
                }
            }
        }
    }

    async fn updated(&self, uri: &str) {
        let notification = || {
            ServerNotification::ResourceUpdatedNotification(ResourceUpdatedNotification::new(
                ResourceUpdatedNotificationParam::new(uri),
            ))
        };
        let (peer, listeners) = {
            let state = self.lock();
            let peer = state.legacy.contains(uri).then(|| state.legacy_peer.clone()).flatten();
            let listeners: Vec<SubscriptionSink> = state
                .listeners
                .iter()
                .filter(|sink| {
                    sink.accepted()
                        .resource_subscriptions
                        .as_ref()
                        .is_some_and(|uris| uris.iter().any(|u| u == uri))
                })
                .cloned()
                .collect();
            (peer, listeners)
        };
        if let Some(peer) = peer {
            let _ = peer.send_notification(notification()).await;
        }
        for sink in listeners {
            let _ = sink.send(notification()).await;
        }
    }
}
