//! The rescuer's pass and the watch for other processes' writes.

use std::time::Duration;

use rusqlite::{Connection, params};
use swarm_domain::{
    id::{AgentId, TaskId},
    lease::{ExpiredClaim, Expiry, LeasePolicy, RescueReport, on_expiry, silent_agent_event},
    poll::Wake,
    task::TaskStatus,
    time::Timestamp,
};
use swarm_store::StoreResult;
use tokio::sync::mpsc;

use crate::{
    agents::{self, Wake as Presence},
    database::Database,
    error::{corrupt, db},
    events,
    rows::{column, get_agent_id, get_bool, get_opt_agent_id, get_task_id},
    sql,
};

/// At most this many expired claims are returned per pass; the next pass takes the rest.
const RESCUE_BATCH: i64 = 500;
/// How often another process's commits are looked for.
const EXTERNAL_CHANGE_INTERVAL: Duration = Duration::from_millis(200);

type ExpiredRow = (TaskId, String, Option<AgentId>, Option<AgentId>, bool, i64);

pub(crate) fn rescue(tx: &Connection, policy: &LeasePolicy, now: Timestamp) -> StoreResult<RescueReport> {
    let silent_since = now.minus_millis(policy.period_millis());
    let mut report = RescueReport::default();
    let expired: Vec<ExpiredRow> = sql::all(
        tx,
        "SELECT id, status, agent_id, offered_to, from_pool, lease_losses FROM tasks
         WHERE lease_expires_at IS NOT NULL AND lease_expires_at < ?
           AND status IN ('reviewing', 'in_progress')
         ORDER BY lease_expires_at LIMIT ?",
        params![now.unix_millis(), RESCUE_BATCH],
        |row| {
            Ok((
                get_task_id(row, "id")?,
                column(row, "status")?,
                get_opt_agent_id(row, "agent_id")?,
                get_opt_agent_id(row, "offered_to")?,
                get_bool(row, "from_pool")?,
                column(row, "lease_losses")?,
            ))
        },
    )?;

    for (id, status, assignee, offered_to, from_pool, losses) in expired {
        let from = TaskStatus::parse(&status).map_err(|error| corrupt(format!("task {id}: {error}")))?;
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
        let updated = sql::execute(
            tx,
            "UPDATE tasks SET status = ?1, lease_expires_at = NULL, lease_losses = ?2, last_updated_at = ?3,
                    agent_id = CASE WHEN ?4 THEN NULL ELSE agent_id END,
                    from_pool = CASE WHEN ?4 THEN 0 ELSE from_pool END,
                    finished_at = CASE WHEN ?5 IS NULL THEN finished_at ELSE ?3 END,
                    failure_reason = coalesce(?5, failure_reason)
             WHERE id = ?6 AND status = ?7 AND lease_expires_at < ?3",
            params![
                to.as_str(),
                losses,
                now.unix_millis(),
                clear_assignee,
                failure_reason,
                id.to_string(),
                from.as_str(),
            ],
        )?;
        if updated == 0 {
            continue;
        }
        for event in expiry.events(id, holder, from, losses) {
            events::insert(tx, &event, now)?;
        }
        if let Some(holder) = holder {
            agents::settle_status(tx, holder, now, Presence::No)?;
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

    let held = crate::held_claims::return_expired(tx, policy, now)?;
    report.inbox_returned_to = held.inbox;
    report.mentions_returned_to = held.mentions;
    report.mail_returned_to = held.mail;
    report.results_returned_to = held.results;
    report.results_handed_to =
        crate::held_claims::hand_results_to_lead(tx, now.minus_millis(handoff_millis(policy)))?;

    let silent: Vec<(AgentId, String)> = sql::all(
        tx,
        "SELECT id, status FROM agents WHERE status <> 'offline' AND last_seen_at < ? ORDER BY id",
        [silent_since.unix_millis()],
        |row| Ok((get_agent_id(row, "id")?, column(row, "status")?)),
    )?;
    for (agent, status) in silent {
        let updated = sql::execute(
            tx,
            "UPDATE agents SET status = 'offline', last_updated_at = ?
             WHERE id = ? AND status = ? AND last_seen_at < ?",
            params![now.unix_millis(), agent.to_string(), status, silent_since.unix_millis()],
        )?;
        if updated == 1 {
            events::insert(tx, &silent_agent_event(agent, &status, policy), now)?;
            report.silenced.push(agent);
        }
    }
    // After silencing: an agent judged gone in this pass is offline already.
    report.handed_back = crate::handback::hand_back(tx, policy, now)?;
    Ok(report)
}

/// A result hand-over's delay, in the store's milliseconds.
fn handoff_millis(policy: &LeasePolicy) -> i64 {
    i64::try_from(policy.result_handoff.as_millis()).unwrap_or(i64::MAX)
}

/// Whether a pass would find anything: a read, so that most passes take no write lock.
pub(crate) fn anything_to_rescue(
    connection: &Connection,
    policy: &LeasePolicy,
    now: Timestamp,
    silent_since: Timestamp,
) -> StoreResult<bool> {
    if crate::held_claims::anything_expired(connection, now)?
        || crate::held_claims::results_to_hand_over(connection, now.minus_millis(handoff_millis(policy)))?
        || crate::handback::anything_to_hand_back(connection, policy, now)?
    {
        return Ok(true);
    }
    sql::scalar(
        connection,
        "SELECT EXISTS (SELECT 1 FROM tasks WHERE lease_expires_at IS NOT NULL AND lease_expires_at < ?)
             OR EXISTS (SELECT 1 FROM agents WHERE status <> 'offline' AND last_seen_at < ?)",
        [now.unix_millis(), silent_since.unix_millis()],
    )
}

/// SQLite has no notifications between processes. `PRAGMA data_version` changes on a
/// connection whenever *another* connection committed; asked on the write connection
/// (the only one of this process that writes), it changes exactly when another process
/// wrote. What changed is unknown, so everyone is woken.
pub(crate) async fn watch_external_changes(database: &Database, sink: mpsc::Sender<Wake>) -> StoreResult<()> {
    let mut last: Option<i64> = None;
    let mut ticks = tokio::time::interval(EXTERNAL_CHANGE_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if sink.is_closed() {
            return Ok(());
        }
        let version = database
            .on_writer(|writer| {
                writer.query_row("PRAGMA data_version", [], |row| row.get::<_, i64>(0)).map_err(db)
            })
            .await;
        let version = match version {
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
