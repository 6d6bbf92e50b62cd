//! Wake-ups between replicas through `LISTEN/NOTIFY`.
//!
//! A change is announced after it committed, off the request's path: the wakes go to one
//! task that sends whatever has gathered as one statement (one `NOTIFY` per distinct
//! payload, in one transaction), so under load many changes share a round trip, and a
//! request never waits for its announcement. Each listening replica reads a batch in one
//! wake-up.

use std::{sync::Arc, time::Duration};

use sqlx::{PgPool, postgres::PgListener};
use swarm_domain::poll::Wake;
use swarm_store::StoreResult;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::poll_cache::PollCache;

/// The `NOTIFY` channel every replica listens on.
const WAKE_CHANNEL: &str = "swarm_wake";
const LISTEN_RETRY: Duration = Duration::from_secs(1);
/// Payloads sent in one statement at most.
const BATCH_MAX: usize = 256;

/// Sends this process's wakes to the other processes on the database.
pub(crate) struct Announcer {
    sender: mpsc::UnboundedSender<String>,
    origin: Uuid,
}

impl Announcer {
    /// Starts the sending task; it ends when the announcer is dropped.
    pub(crate) fn start(pool: PgPool, origin: Uuid) -> Announcer {
        let (sender, receiver) = mpsc::unbounded_channel();
        tokio::spawn(send_batches(pool, receiver));
        Announcer { sender, origin }
    }

    /// Each payload is `<origin>|<wake>`; a replica ignores its own.
    pub(crate) fn announce(&self, wakes: &[Wake]) {
        for wake in wakes {
            // The task ends only when the sender is dropped, which is with `self`.
            let _ = self.sender.send(format!("{}|{}", self.origin, wake.encode()));
        }
    }
}

async fn send_batches(pool: PgPool, mut receiver: mpsc::UnboundedReceiver<String>) {
    let mut batch = Vec::with_capacity(BATCH_MAX);
    while receiver.recv_many(&mut batch, BATCH_MAX).await > 0 {
        batch.sort_unstable();
        batch.dedup();
        let sent = sqlx::query("SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload")
            .bind(WAKE_CHANNEL)
            .bind(&batch)
            .execute(&pool)
            .await;
        if let Err(error) = sent {
            // Polls parked on other replicas then see the change at their next re-read:
            // late, not lost.
            tracing::warn!(%error, changes = batch.len(), "could not tell other processes about changes");
        }
        batch.clear();
    }
}

/// Listen for other replicas' wakes until `sink` closes. A dropped connection may have
/// lost notifications, so reconnecting wakes everyone. Each notification moves the poll
/// cache's generation before it wakes anyone, and the cache serves views only while
/// this listens.
pub(crate) async fn watch_external_changes(
    pool: &PgPool,
    origin: Uuid,
    cache: Arc<PollCache>,
    sink: mpsc::Sender<Wake>,
) -> StoreResult<()> {
    let own_prefix = format!("{origin}|");
    let outcome = watch(pool, &own_prefix, &cache, &sink).await;
    cache.set_listening(false);
    outcome
}

async fn watch(
    pool: &PgPool,
    own_prefix: &str,
    cache: &PollCache,
    sink: &mpsc::Sender<Wake>,
) -> StoreResult<()> {
    loop {
        let mut listener = match listen(pool).await {
            Ok(listener) => listener,
            Err(error) => {
                tracing::warn!(%error, "cannot LISTEN for other replicas' changes; retrying");
                tokio::select! {
                    () = sink.closed() => return Ok(()),
                    () = tokio::time::sleep(LISTEN_RETRY) => continue,
                }
            }
        };
        cache.set_listening(true);
        loop {
            let received = tokio::select! {
                () = sink.closed() => return Ok(()),
                received = listener.try_recv() => received,
            };
            let notification = match received {
                Ok(Some(notification)) => notification,
                // The connection dropped (`Ok(None)`) or failed: notifications may have
                // been lost while it was down. Listen again on a new one.
                Ok(None) | Err(_) => {
                    if let Err(error) = received {
                        tracing::warn!(%error, "lost the LISTEN connection; reconnecting");
                    }
                    cache.set_listening(false);
                    if sink.send(Wake::Everyone).await.is_err() {
                        return Ok(());
                    }
                    break;
                }
            };
            let payload = notification.payload();
            if payload.starts_with(own_prefix) {
                continue;
            }
            cache.changed();
            let wake = Wake::decode(payload.split_once('|').map_or(payload, |(_, wake)| wake));
            if sink.send(wake).await.is_err() {
                return Ok(());
            }
        }
    }
}

async fn listen(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(WAKE_CHANNEL).await?;
    Ok(listener)
}
