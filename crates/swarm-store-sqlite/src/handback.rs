//! Work of agents that stayed offline, handed on by the rescuer (issue 25), and the
//! lead's `tasks_handed_back` claim. The rules are `swarm_domain::handback`; each move
//! is the shared guarded task update (`apply::apply`), so the holder coming back in the
//! meantime makes it change nothing.

use rusqlite::{Connection, params};
use swarm_domain::{
    handback::{self, HANDOFFS_TRIGGER_MAX, HandBackBy, HandBackTo, HandedBack, Handoff},
    id::{AgentId, TaskId},
    lease::LeasePolicy,
    poll::Trigger,
    task::{Task, TaskChange, TaskStatus},
    time::Timestamp,
};
use swarm_store::{Applied, StoreResult};

use crate::{
    apply,
    error::corrupt,
    rows::{Columns, timestamp},
    sql,
    tasks::get_known,
};

/// At most this many tasks are moved per pass; the next pass takes the rest.
const HAND_BACK_BATCH: i64 = 500;

/// The tasks gone agents hold or were offered: `?1` is the time they must have been
/// last heard of before. Two arms so that each is an index probe per gone agent.
const HELD_BY_GONE: &str = "
    SELECT t.id, t.status, g.id AS holder, t.from_pool, 0 AS offer
      FROM agents g JOIN tasks t ON t.agent_id = g.id
     WHERE g.status = 'offline' AND g.last_seen_at < ?1 AND (t.status = 'pending' OR t.status = 'in_progress')
    UNION ALL
    SELECT t.id, t.status, g.id AS holder, t.from_pool, 1 AS offer
      FROM agents g JOIN tasks t ON t.offered_to = g.id
     WHERE g.status = 'offline' AND g.last_seen_at < ?1 AND (t.status = 'offered' OR t.status = 'reviewing')";

pub(crate) fn anything_to_hand_back(
    connection: &Connection,
    policy: &LeasePolicy,
    now: Timestamp,
) -> StoreResult<bool> {
    let Some(seen_before) = policy.gone_before(now) else {
        return Ok(false);
    };
    sql::scalar(connection, &format!("SELECT EXISTS ({HELD_BY_GONE})"), [seen_before.unix_millis()])
}

pub(crate) fn hand_back(
    tx: &Connection,
    policy: &LeasePolicy,
    now: Timestamp,
) -> StoreResult<Vec<HandedBack>> {
    let Some(seen_before) = policy.gone_before(now) else {
        return Ok(Vec::new());
    };
    let candidates = sql::all(
        tx,
        &format!("{HELD_BY_GONE} LIMIT ?2"),
        params![seen_before.unix_millis(), HAND_BACK_BATCH],
        |row| {
            let mut column = Columns::new(row);
            let id = column.task_id("id")?;
            let status: String = column.take("status")?;
            Ok((
                id,
                TaskStatus::parse(&status).map_err(|error| corrupt(format!("task status: {error}")))?,
                column.agent_id("holder")?,
                column.bool("from_pool")?,
                column.bool("offer")?,
            ))
        },
    )?;
    let mut moved = Vec::new();
    for (task_id, from, holder, from_pool, offer) in candidates {
        let to = HandBackTo::for_rescue(from_pool, from);
        let reason = handback::rescue_reason(policy.reassign_after.as_secs(), to.status());
        let change = handback::change(holder, offer, to, HandBackBy::Rescuer { seen_before }, &reason);
        let Applied::Changed { after, .. } = apply::apply(tx, task_id, &change, None, now)? else {
            continue;
        };
        record(tx, task_id, holder, from, after.status, &reason, now)?;
        moved.push(HandedBack { task_id, holder, from, to: after.status });
    }
    Ok(moved)
}

/// An agent gives back its own task with a reason: the change and, when it applies, the
/// move for the lead (`Store::task_give_back`).
pub(crate) fn give_back(
    tx: &Connection,
    task_id: TaskId,
    change: &TaskChange,
    agent: AgentId,
    reason: &str,
    now: Timestamp,
) -> StoreResult<Applied<Task>> {
    let applied = apply::apply(tx, task_id, change, Some(agent), now)?;
    if let Applied::Changed { before, after } = &applied {
        record(tx, task_id, agent, before.status, after.status, reason, now)?;
    }
    Ok(applied)
}

/// One move, for the lead's next `tasks_handed_back`.
fn record(
    tx: &Connection,
    task_id: TaskId,
    holder: AgentId,
    from: TaskStatus,
    to: TaskStatus,
    reason: &str,
    now: Timestamp,
) -> StoreResult<()> {
    sql::execute(
        tx,
        "INSERT INTO task_handoffs (task_id, from_agent_id, from_status, to_status, reason, created_at)
         VALUES (?, ?, ?, ?, ?, ?)",
        params![
            task_id.to_string(),
            holder.to_string(),
            from.as_str(),
            to.as_str(),
            reason,
            now.unix_millis()
        ],
    )?;
    Ok(())
}

type HandoffRow = (i64, TaskId, AgentId, String, String, String, i64);

/// The lead's claim: the oldest unreported moves, each marked under its own guard.
pub(crate) fn claim(tx: &Connection, now: Timestamp) -> StoreResult<Option<Trigger>> {
    let rows: Vec<HandoffRow> = sql::all(
        tx,
        "SELECT id, task_id, from_agent_id, from_status, to_status, reason, created_at
           FROM task_handoffs WHERE notified_at IS NULL ORDER BY id LIMIT ?",
        [HANDOFFS_TRIGGER_MAX],
        |row| {
            let mut column = Columns::new(row);
            Ok((
                column.take("id")?,
                column.task_id("task_id")?,
                column.agent_id("from_agent_id")?,
                column.take("from_status")?,
                column.take("to_status")?,
                column.take("reason")?,
                column.take("created_at")?,
            ))
        },
    )?;
    let mut handoffs = Vec::with_capacity(rows.len());
    for (id, task_id, from_agent_id, from_status, to_status, reason, created_at) in rows {
        let marked = sql::execute(
            tx,
            "UPDATE task_handoffs SET notified_at = ? WHERE id = ? AND notified_at IS NULL",
            params![now.unix_millis(), id],
        )?;
        if marked == 0 {
            continue;
        }
        let status =
            |text: &str| TaskStatus::parse(text).map_err(|error| corrupt(format!("hand-off {id}: {error}")));
        handoffs.push(Handoff {
            task: get_known(tx, task_id)?,
            from_agent_id,
            from_status: status(&from_status)?,
            to_status: status(&to_status)?,
            reason,
            handed_back_at: timestamp(created_at)?,
        });
    }
    if handoffs.is_empty() {
        return Ok(None);
    }
    Ok(Some(Trigger::TasksHandedBack { count: handoffs.len(), handoffs }))
}
