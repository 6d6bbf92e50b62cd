//! The rescuer's pass and the watch for other processes' writes.

use std::time::Duration;

use sqlx::SqlitePool;
use swarm_domain::{
    lease::{ExpiredClaim, Expiry, LeasePolicy, RescueReport, on_expiry, silent_agent_event},
    poll::Wake,
    task::TaskStatus,
    time::Timestamp,
};
use swarm_store::StoreResult;
use tokio::sync::mpsc;

use crate::{
    SqliteStore,
    agents::{self, Wake as Presence},
    decode::{agent_id, corrupt, db, task_id},
    events,
};

/// At most this many expired claims are returned per pass; the next pass takes the rest.
const RESCUE_BATCH: i64 = 500;
/// How often another process's commits are looked for.
const EXTERNAL_CHANGE_INTERVAL: Duration = Duration::from_millis(200);

type ExpiredRow = (String, String, Option<String>, Option<String>, bool, i64);

pub(crate) async fn rescue(
    store: &SqliteStore,
    policy: &LeasePolicy,
    now: Timestamp,
) -> StoreResult<RescueReport> {
    let silent_since = now.minus_millis(policy.period_millis());
    // A read first: most passes find nothing and should not take the write lock.
    if !anything_to_rescue(&store.read, now, silent_since).await? {
        return Ok(RescueReport::default());
    }

    let mut tx = store.begin_write().await?;
    let mut report = RescueReport::default();
    let expired: Vec<ExpiredRow> = sqlx::query_as(
        "SELECT id, status, agent_id, offered_to, from_pool, lease_losses FROM tasks
         WHERE lease_expires_at IS NOT NULL AND lease_expires_at < ?
           AND status IN ('reviewing', 'in_progress')
         ORDER BY lease_expires_at LIMIT ?",
    )
    .bind(now.unix_millis())
    .bind(RESCUE_BATCH)
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;

    for (id, status, assignee, offered_to, from_pool, losses) in expired {
        let id = task_id(&id)?;
        let from = TaskStatus::parse(&status).map_err(|error| corrupt(format!("task {id}: {error}")))?;
        let assignee = assignee.as_deref().map(agent_id).transpose()?;
        let offered_to = offered_to.as_deref().map(agent_id).transpose()?;
        let losses = i32::try_from(losses + 1).unwrap_or(i32::MAX);
        let Some(expiry) = on_expiry(from, from_pool, losses, policy) else {
            continue;
        };
        let holder = if from == TaskStatus::Reviewing { offered_to } else { assignee };
        let (clear_assignee, failure_reason) = match &expiry {
            Expiry::Return { clear_assignee, .. } => (*clear_assignee, None),
            Expiry::Fail { reason } => (false, Some(reason.clone())),
        };
        let to = expiry.status();
        let updated = sqlx::query(
            "UPDATE tasks SET status = ?1, lease_expires_at = NULL, lease_losses = ?2, last_updated_at = ?3,
                    agent_id = CASE WHEN ?4 THEN NULL ELSE agent_id END,
                    from_pool = CASE WHEN ?4 THEN 0 ELSE from_pool END,
                    finished_at = CASE WHEN ?5 IS NULL THEN finished_at ELSE ?3 END,
                    failure_reason = coalesce(?5, failure_reason)
             WHERE id = ?6 AND status = ?7 AND lease_expires_at < ?3",
        )
        .bind(to.as_str())
        .bind(losses)
        .bind(now.unix_millis())
        .bind(clear_assignee)
        .bind(failure_reason)
        .bind(id.to_string())
        .bind(from.as_str())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        if updated.rows_affected() == 0 {
            continue;
        }
        for event in expiry.events(id, holder, from, losses) {
            events::insert(&mut tx, &event, now).await?;
        }
        if let Some(holder) = holder {
            agents::settle_status(&mut tx, holder, now, Presence::No).await?;
        }
        let agent_after = if clear_assignee { None } else { assignee };
        report.expired.push(ExpiredClaim {
            task_id: id,
            holder,
            from,
            to,
            offered_to,
            agent_id: agent_after,
        });
    }

    let silent: Vec<(String, String)> = sqlx::query_as(
        "SELECT id, status FROM agents WHERE status <> 'offline' AND last_seen_at < ? ORDER BY id",
    )
    .bind(silent_since.unix_millis())
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    for (id, status) in silent {
        let updated = sqlx::query(
            "UPDATE agents SET status = 'offline', last_updated_at = ?
             WHERE id = ? AND status = ? AND last_seen_at < ?",
        )
        .bind(now.unix_millis())
        .bind(&id)
        .bind(&status)
        .bind(silent_since.unix_millis())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        if updated.rows_affected() == 1 {
            let agent = agent_id(&id)?;
            events::insert(&mut tx, &silent_agent_event(agent, &status, policy), now).await?;
            report.silenced.push(agent);
        }
    }
    tx.commit().await.map_err(db)?;
    Ok(report)
}

async fn anything_to_rescue(pool: &SqlitePool, now: Timestamp, silent_since: Timestamp) -> StoreResult<bool> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM tasks WHERE lease_expires_at IS NOT NULL AND lease_expires_at < ?)
             OR EXISTS (SELECT 1 FROM agents WHERE status <> 'offline' AND last_seen_at < ?)",
    )
    .bind(now.unix_millis())
    .bind(silent_since.unix_millis())
    .fetch_one(pool)
    .await
    .map_err(db)
}

/// SQLite has no notifications between processes. `PRAGMA data_version` changes on a
/// connection whenever *another* connection committed; asked on the write connection
/// (the only one of this process that writes), it changes exactly when another process
/// wrote. What changed is unknown, so everyone is woken.
pub(crate) async fn watch_external_changes(store: &SqliteStore, sink: mpsc::Sender<Wake>) -> StoreResult<()> {
    let mut last: Option<i64> = None;
    let mut ticks = tokio::time::interval(EXTERNAL_CHANGE_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if sink.is_closed() {
            return Ok(());
        }
        let version: i64 = match sqlx::query_scalar("PRAGMA data_version").fetch_one(&store.write).await {
            Ok(version) => version,
            Err(error) => {
                tracing::warn!(%error, "cannot read the SQLite data version; will retry");
                continue;
            }
        };
        if last.is_some_and(|last| last != version) && sink.send(Wake::Everyone).await.is_err() {
            return Ok(());
        }
        last = Some(version);
    }
}
