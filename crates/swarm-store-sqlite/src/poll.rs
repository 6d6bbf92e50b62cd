//! The poll: one read to see whether anything waits for an agent, then one write
//! transaction that claims the first kind that has something. Writes are serialized on
//! the one writer connection (`BEGIN IMMEDIATE`), so each claim's select-then-update is
//! atomic: two polls can never claim the same row.

use rusqlite::{Connection, params};
use swarm_domain::{
    agent::AgentStatus,
    id::AgentId,
    poll::{TASKS_FINISHED_MAX, Trigger, TriggerKind},
    time::Timestamp,
};
use swarm_store::{PollView, StoreResult, sql::PollFlags};

use crate::{
    agents::{self, WorkMoved},
    error::corrupt,
    events,
    rows::{Columns, get_task_id},
    sql,
    tasks::{self, get_known, task_columns},
};

/// Appended to a query over `tasks t`: every dependency of `t` is completed.
macro_rules! ready {
    () => {
        swarm_store::sql_dependencies_completed!("t")
    };
}

/// A finished task whose assignee is not a lead: what `tasks_finished` reports. Its
/// queries name `tasks_unnotified`, the partial index of exactly the finished tasks the lead
/// was not told about: without statistics SQLite prefers the status index's equality and
/// walks every completed task ever stored (5 ms at 21,000 tasks, in the lead's every poll
/// and, worse, in the claim on the writer, which every write waits behind).
macro_rules! unnotified_worker_task {
    () => {
        " t.notified_at IS NULL AND t.status IN ('completed', 'failed')
          AND NOT EXISTS (SELECT 1 FROM agents l WHERE l.id = t.agent_id AND l.is_lead = 1)"
    };
}

/// The agent's free slot, checked inside the claim's `UPDATE`; `?1` is the agent.
macro_rules! has_capacity {
    () => {
        " (SELECT count(*) FROM tasks c WHERE c.agent_id = ?1 AND c.status = 'in_progress')
          < (SELECT max_tasks FROM agents WHERE id = ?1)"
    };
}

type ViewRow = (bool, String, i64, i64, i64, PollFlags);

/// What waits for the agent `?`, kind by kind.
const VIEW: &str = concat!(
            "SELECT a.is_lead, a.status, a.last_seen_at, a.max_tasks,
                (SELECT count(*) FROM tasks t WHERE t.agent_id = a.id AND t.status = 'in_progress')
                    AS in_progress,
                EXISTS (SELECT 1 FROM tasks t WHERE t.offered_to = a.id AND t.status = 'offered') AS offered,
                EXISTS (SELECT 1 FROM tasks t WHERE t.agent_id = a.id AND t.status = 'pending' AND",
            ready!(),
            ") AS pending,
                EXISTS (SELECT 1 FROM mail m WHERE m.to_agent_id = a.id AND m.status = 'unread'
                                               AND m.wakes = 1 AND m.dead_lettered_at IS NULL)
                    AS urgent_mail,
                EXISTS (SELECT 1 FROM task_awaits w JOIN tasks t ON t.id = w.task_id
                        WHERE w.agent_id = a.id AND w.delivered_at IS NULL AND w.processing_since IS NULL
                          AND w.dead_lettered_at IS NULL
                          AND (t.status = 'completed' OR t.status = 'failed' OR t.status = 'cancelled')) AS results,
                a.is_lead = 1 AND EXISTS (SELECT 1 FROM inbox_messages m
                                          WHERE m.agent_id = a.id AND m.status = 'unread') AS inbox,
                EXISTS (SELECT 1 FROM channel_reads r WHERE r.agent_id = a.id AND r.unread_mentions > 0
                                                        AND r.processing_since IS NULL
                                                        AND r.dead_lettered_at IS NULL) AS mentions,
                a.is_lead = 1 AND EXISTS (SELECT 1 FROM tasks t INDEXED BY tasks_unnotified WHERE",
            unnotified_worker_task!(),
            ") AS finished,
                a.is_lead = 1 AND EXISTS (SELECT 1 FROM task_handoffs h WHERE h.notified_at IS NULL)
                    AS handed_back,
                a.is_lead = 1 AND EXISTS (SELECT 1 FROM epics e WHERE e.progress_changes > e.progress_notified
                                                                AND e.status = 'active') AS epic_progress,
                a.is_lead = 0 AND EXISTS (SELECT 1 FROM tasks t WHERE t.status = 'unassigned' AND",
            ready!(),
            ") AS pool
         FROM agents a WHERE a.id = ?"
);

/// The finished tasks `tasks_finished` reports next, oldest first; `?` is how many.
const UNNOTIFIED: &str = concat!(
    "SELECT t.id FROM tasks t INDEXED BY tasks_unnotified WHERE",
    unnotified_worker_task!(),
    " ORDER BY t.finished_at, t.id LIMIT ?"
);

pub(crate) fn view(connection: &Connection, agent: AgentId) -> StoreResult<Option<PollView>> {
    let row: Option<ViewRow> = sql::optional(connection, VIEW, [agent.to_string()], |row| {
        let mut column = Columns::new(row);
        Ok((
            column.bool("is_lead")?,
            column.take("status")?,
            column.take("last_seen_at")?,
            column.take("max_tasks")?,
            column.take("in_progress")?,
            PollFlags {
                offered: column.bool("offered")?,
                pending: column.bool("pending")?,
                urgent_mail: column.bool("urgent_mail")?,
                results: column.bool("results")?,
                inbox: column.bool("inbox")?,
                mentions: column.bool("mentions")?,
                finished: column.bool("finished")?,
                handed_back: column.bool("handed_back")?,
                epic_progress: column.bool("epic_progress")?,
                pool: column.bool("pool")?,
            },
        ))
    })?;
    let Some((is_lead, status, last_seen_at, max_tasks, in_progress, flags)) = row else {
        return Ok(None);
    };
    Ok(Some(PollView {
        is_lead,
        status: AgentStatus::parse(&status).map_err(|error| corrupt(format!("agent {agent}: {error}")))?,
        last_seen_at: Timestamp::from_unix_millis(last_seen_at)
            .ok_or_else(|| corrupt(format!("agent {agent}: bad last_seen_at {last_seen_at}")))?,
        in_progress,
        max_tasks: i32::try_from(max_tasks).map_err(|_| corrupt(format!("agent {agent}: bad max_tasks")))?,
        waiting: flags.waiting(),
    }))
}

pub(crate) fn claim(
    tx: &Connection,
    agent: AgentId,
    kinds: &[TriggerKind],
    now: Timestamp,
    lease_until: Timestamp,
    runner: Option<&str>,
) -> StoreResult<Option<(TriggerKind, Trigger)>> {
    // A kind that would start work past a daily budget yields to the kinds after it; the
    // refusal is the answer only when none of them has anything.
    let mut refused = None;
    for kind in kinds {
        if kind.needs_capacity() {
            if refused.is_some() {
                continue;
            }
            if let Some(trigger) = crate::budgets::refuse_if_spent(tx, *kind, agent, now)? {
                refused = Some((*kind, trigger));
                continue;
            }
        }
        let trigger = match kind {
            TriggerKind::TaskOffered | TriggerKind::TaskAssigned | TriggerKind::PoolTask => {
                claim_task(tx, *kind, agent, now, lease_until)?
            }
            TriggerKind::UrgentMail => crate::mail::claim(tx, agent, now, lease_until, runner)?,
            TriggerKind::SlackInboxMessage => crate::inbox::claim(tx, agent, now, lease_until, runner)?,
            TriggerKind::UnreadMentions => crate::chat::claim(tx, agent, now, lease_until, runner)?,
            TriggerKind::TasksFinished => claim_finished(tx, now)?,
            TriggerKind::TasksHandedBack => crate::handback::claim(tx, now)?,
            TriggerKind::EpicProgressChanged => crate::epics::claim_progress(tx, now)?,
            TriggerKind::TaskResult => crate::triggers::claim_result(tx, agent, now, lease_until, runner)?,
            TriggerKind::PoolTasksAvailable => count_pool(tx)?,
        };
        if let Some(trigger) = trigger {
            return Ok(Some((*kind, trigger)));
        }
    }
    Ok(refused)
}

/// Pick the kind's best candidate and move it in one guarded `UPDATE ... WHERE id =
/// (SELECT ...)`; log it and settle the agent's busy/idle status. `OR FAIL`: see
/// `apply::guarded_update`.
fn claim_task(
    tx: &Connection,
    kind: TriggerKind,
    agent: AgentId,
    now: Timestamp,
    lease_until: Timestamp,
) -> StoreResult<Option<Trigger>> {
    let sql = match kind {
        TriggerKind::TaskOffered => {
            concat!(
                "UPDATE OR FAIL tasks SET status = 'reviewing', last_updated_at = ?2, lease_expires_at = ?3
                 WHERE status = 'offered' AND id = (
                     SELECT t.id FROM tasks t WHERE t.offered_to = ?1 AND t.status = 'offered'
                     ORDER BY t.offered_at, t.created_at, t.id LIMIT 1)
                 RETURNING ",
                task_columns!("tasks")
            )
        }
        TriggerKind::TaskAssigned => concat!(
            "UPDATE OR FAIL tasks SET status = 'in_progress', last_updated_at = ?2, lease_expires_at = ?3
             WHERE status = 'pending' AND id = (
                 SELECT t.id FROM tasks t WHERE t.agent_id = ?1 AND t.status = 'pending' AND",
            ready!(),
            "    ORDER BY t.priority DESC, t.created_at, t.id LIMIT 1)
             AND",
            has_capacity!(),
            " RETURNING ",
            task_columns!("tasks")
        ),
        // Without statistics SQLite prefers the status index's equality, then sorts the
        // pool by id in a temporary b-tree; `tasks_pool` holds the whole claim order.
        TriggerKind::PoolTask => concat!(
            "UPDATE OR FAIL tasks SET status = 'in_progress', agent_id = ?1, from_pool = 1,
                              last_updated_at = ?2, lease_expires_at = ?3
             WHERE status = 'unassigned' AND id = (
                 SELECT t.id FROM tasks t INDEXED BY tasks_pool WHERE t.status = 'unassigned' AND",
            ready!(),
            "    ORDER BY t.priority DESC, t.created_at, t.id LIMIT 1)
             AND",
            has_capacity!(),
            " RETURNING ",
            task_columns!("tasks")
        ),
        TriggerKind::UrgentMail
        | TriggerKind::SlackInboxMessage
        | TriggerKind::UnreadMentions
        | TriggerKind::TasksFinished
        | TriggerKind::TasksHandedBack
        | TriggerKind::EpicProgressChanged
        | TriggerKind::TaskResult
        | TriggerKind::PoolTasksAvailable => return Ok(None),
    };
    // The row as the claim left it comes back with it: no second read.
    let claimed = sql::optional(
        tx,
        sql,
        params![agent.to_string(), now.unix_millis(), lease_until.unix_millis()],
        tasks::from_row,
    )?;
    let Some(task) = claimed else {
        return Ok(None);
    };
    let id = task.id;
    debug_assert_eq!(
        Some(&task),
        tasks::get(tx, id)?.as_ref(),
        "the claim returned another row than it left"
    );
    for event in kind.claim_events(id, agent) {
        events::insert(tx, &event, now)?;
    }
    if kind.needs_capacity() {
        // The claim made the task `in_progress` for this agent.
        agents::settle_after(tx, agent, WorkMoved::Took, now)?;
    }
    // It takes work again: why it had stopped no longer holds.
    agents::clear_status_reason(tx, agent, now)?;
    Ok(kind.task_trigger(task))
}

fn claim_finished(tx: &Connection, now: Timestamp) -> StoreResult<Option<Trigger>> {
    let ids = sql::all(tx, UNNOTIFIED, [TASKS_FINISHED_MAX], |row| get_task_id(row, "id"))?;
    let mut tasks = Vec::with_capacity(ids.len());
    for id in ids {
        let marked = sql::execute(
            tx,
            "UPDATE tasks SET notified_at = ? WHERE id = ? AND notified_at IS NULL",
            params![now.unix_millis(), id.to_string()],
        )?;
        if marked == 1 {
            tasks.push(get_known(tx, id)?);
        }
    }
    if tasks.is_empty() {
        return Ok(None);
    }
    Ok(Some(Trigger::TasksFinished { count: tasks.len(), tasks }))
}

fn count_pool(tx: &Connection) -> StoreResult<Option<Trigger>> {
    let count: i64 = sql::scalar(
        tx,
        concat!("SELECT count(*) FROM tasks t WHERE t.status = 'unassigned' AND", ready!()),
        [],
    )?;
    Ok((count > 0).then_some(Trigger::PoolTasksAvailable { count }))
}

#[cfg(test)]
mod tests {
    use rusqlite::{Connection, StatementStatus, params};

    use super::{UNNOTIFIED, VIEW};

    /// The virtual machine steps of one run of `sql` to its end.
    fn steps(connection: &Connection, sql: &str, parameter: &dyn rusqlite::ToSql) -> i32 {
        let mut statement = connection.prepare(sql).unwrap();
        let mut rows = statement.query([parameter]).unwrap();
        while rows.next().unwrap().is_some() {}
        drop(rows);
        statement.get_status(StatementStatus::VmStep)
    }

    /// `count` more finished tasks of `agent`, the lead told about each (`notified` set) or not.
    fn finish_tasks(connection: &Connection, agent: &str, from: i64, count: i64, notified: bool) {
        connection
            .execute(
                "WITH RECURSIVE n (value) AS (SELECT ?2 UNION ALL SELECT value + 1 FROM n WHERE value < ?2 + ?3 - 1)
                 INSERT INTO tasks (id, agent_id, task, status, source, created_at, last_updated_at,
                                    finished_at, notified_at)
                 SELECT printf('task-%08d', value), ?1, 'done', 'completed', 'api', value, value, value,
                        CASE WHEN ?4 THEN value END
                 FROM n",
                params![agent, from, count, notified],
            )
            .unwrap();
    }

    /// The lead's poll (whether finished tasks wait, and which) reads the tasks it was not
    /// told about, not every task that ever finished: its cost must not grow with the
    /// history, or the soak's p99 climbs with the database (issue 25).
    #[tokio::test]
    async fn the_lead_s_finished_tasks_are_found_without_reading_the_history() {
        let (_dir, connection) = crate::test_file::migrated().await;
        connection
            .execute_batch(
                "INSERT INTO agents (id, name, is_lead, status, created_at, last_updated_at)
                     VALUES ('lead', 'lead', 1, 'idle', 0, 0), ('worker', 'worker', 0, 'idle', 0, 0);",
            )
            .unwrap();
        // The ones to report are the newest: a walk of all finished tasks meets every
        // older one first.
        finish_tasks(&connection, "worker", 9_000_001, 3, false);
        let lead: &dyn rusqlite::ToSql = &"lead";
        let batch: &dyn rusqlite::ToSql = &swarm_domain::poll::TASKS_FINISHED_MAX;
        let before = (steps(&connection, VIEW, lead), steps(&connection, UNNOTIFIED, batch));

        finish_tasks(&connection, "worker", 1, 5_000, true);
        let after = (steps(&connection, VIEW, lead), steps(&connection, UNNOTIFIED, batch));
        assert_eq!(before, after, "5,000 more tasks the lead was told about changed the work of its poll");
        let ids: Vec<String> = connection
            .prepare(UNNOTIFIED)
            .unwrap()
            .query_map([batch], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(ids, ["task-09000001", "task-09000002", "task-09000003"]);
    }
}
