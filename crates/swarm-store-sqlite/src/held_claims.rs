//! The lead-side claims (inbox, mentions, urgent mail, task results): their leases
//! extended by a heartbeat, released by the runner whose run ended, returned by the
//! rescuer. What differs between the kinds is one table in
//! `swarm_store::sql::held_claims`, shared with PostgreSQL.

use rusqlite::{Connection, params};
use swarm_domain::{id::AgentId, lease::LeasePolicy, time::Timestamp};
use swarm_store::{
    HeldItems, Released, StoreResult,
    sql::{
        Dialect,
        held_claims::{ALL, HeldClaim, INBOX, MAIL, MENTIONS, RESULTS, ReleaseScope, Returned},
    },
};

use crate::{error::db, rows::agent_id, sql};

/// A heartbeat extends the agent's claims that its runner holds (`runner`) and those no
/// runner holds, never another runner's.
pub(crate) fn extend_leases(
    tx: &Connection,
    agent: AgentId,
    lease_until: Timestamp,
    runner: Option<&str>,
) -> StoreResult<()> {
    for claim in ALL {
        sql::execute(
            tx,
            &claim.extend_leases(Dialect::Sqlite),
            params![lease_until.unix_millis(), agent.to_string(), runner],
        )?;
    }
    Ok(())
}

/// The holder gives back what it still holds: everything (`items: None`) or the items named.
pub(crate) fn release(
    tx: &Connection,
    agent: AgentId,
    holder: &str,
    items: Option<&HeldItems>,
    max_deliveries: i32,
    now: Timestamp,
) -> StoreResult<Released> {
    let mut released = Released::default();
    for claim in ALL {
        let dead_letters: Vec<bool> = match items {
            None => sql::all(
                tx,
                &claim.release(Dialect::Sqlite, ReleaseScope::All),
                params![now.unix_millis(), max_deliveries, agent.to_string(), holder],
                |row| row.get(0).map_err(db),
            )?,
            Some(items) => {
                let named: Vec<String> = claim.named(items).iter().map(ToString::to_string).collect();
                if named.is_empty() {
                    continue;
                }
                // Ids are UUIDs: their JSON array needs no escaping.
                let named = format!("[\"{}\"]", named.join("\",\""));
                sql::all(
                    tx,
                    &claim.release(Dialect::Sqlite, ReleaseScope::Items),
                    params![now.unix_millis(), max_deliveries, agent.to_string(), holder, named],
                    |row| row.get(0).map_err(db),
                )?
            }
        };
        for dead in dead_letters {
            if dead {
                released.dead_lettered += 1;
            } else {
                released.returned += 1;
            }
        }
    }
    Ok(released)
}

/// The rescuer: claims whose lease ran out go back to where a poll finds them.
pub(crate) fn return_expired(tx: &Connection, policy: &LeasePolicy, now: Timestamp) -> StoreResult<Returned> {
    let returned = |claim: &HeldClaim| {
        sql::all(
            tx,
            &claim.return_expired(Dialect::Sqlite),
            params![now.unix_millis(), policy.max_deliveries],
            |row| agent_id(&row.get::<_, String>(0).map_err(db)?),
        )
    };
    Ok(Returned {
        inbox: returned(&INBOX)?,
        mentions: returned(&MENTIONS)?,
        mail: returned(&MAIL)?,
        results: returned(&RESULTS)?,
    })
}

/// Task results nobody will take: the awaiting agent (not a lead) has been offline since
/// before `since` and the task finished before it, or the result was dead-lettered. They
/// go to the lead that is online, with a fresh delivery count; never dropped. Returns
/// the lead once per result.
pub(crate) fn hand_results_to_lead(tx: &Connection, since: Timestamp) -> StoreResult<Vec<AgentId>> {
    sql::all(
        tx,
        "UPDATE task_awaits
            SET agent_id = (SELECT l.id FROM agents l WHERE l.is_lead = 1 AND l.status <> 'offline'
                            ORDER BY l.id LIMIT 1),
                deliveries = 0, dead_lettered_at = NULL, processing_since = NULL,
                lease_expires_at = NULL, lease_holder = NULL
          WHERE delivered_at IS NULL AND processing_since IS NULL
            AND EXISTS (SELECT 1 FROM agents l WHERE l.is_lead = 1 AND l.status <> 'offline')
            AND EXISTS (SELECT 1 FROM agents a WHERE a.id = task_awaits.agent_id AND a.is_lead = 0
                          AND (task_awaits.dead_lettered_at IS NOT NULL
                               OR (a.status = 'offline' AND a.last_seen_at < ?1
                                   AND EXISTS (SELECT 1 FROM tasks t WHERE t.id = task_awaits.task_id
                                                 AND t.finished_at < ?1))))
          RETURNING agent_id",
        [since.unix_millis()],
        |row| agent_id(&row.get::<_, String>(0).map_err(db)?),
    )
}

/// Whether a rescue pass would return any held claim: a read, so most passes take no
/// write lock.
pub(crate) fn anything_expired(connection: &Connection, now: Timestamp) -> StoreResult<bool> {
    let probes: Vec<String> = ALL
        .iter()
        .map(|claim| {
            format!(
                "EXISTS (SELECT 1 FROM {} WHERE lease_expires_at IS NOT NULL AND lease_expires_at < ?1)",
                claim.table()
            )
        })
        .collect();
    sql::scalar(connection, &format!("SELECT {}", probes.join(" OR ")), [now.unix_millis()])
}

/// Whether any task result waits for a hand-over to the lead (see [`hand_results_to_lead`]).
pub(crate) fn results_to_hand_over(connection: &Connection, since: Timestamp) -> StoreResult<bool> {
    sql::scalar(
        connection,
        "SELECT EXISTS (SELECT 1 FROM task_awaits w JOIN agents a ON a.id = w.agent_id
                        WHERE w.delivered_at IS NULL AND w.processing_since IS NULL AND a.is_lead = 0
                          AND (w.dead_lettered_at IS NOT NULL OR (a.status = 'offline' AND a.last_seen_at < ?1)))
            AND EXISTS (SELECT 1 FROM agents l WHERE l.is_lead = 1 AND l.status <> 'offline')",
        [since.unix_millis()],
    )
}

#[cfg(test)]
mod tests {
    use rusqlite::{Connection, StatementStatus, params};
    use swarm_store::sql::{Dialect, held_claims::ALL};

    /// The virtual machine steps of each claim's lease extension (a heartbeat's), for `agent`.
    fn extension_steps(connection: &Connection, agent: &str) -> Vec<(String, i32)> {
        ALL.iter()
            .map(|claim| {
                let sql = claim.extend_leases(Dialect::Sqlite);
                let mut statement = connection.prepare(&sql).unwrap();
                statement.execute(params![1_000_000, agent, "runner"]).unwrap();
                (sql, statement.get_status(StatementStatus::VmStep))
            })
            .collect()
    }

    /// A heartbeat finds what the agent holds without reading what it was ever sent: the
    /// mail it read, the results delivered to it, the Slack messages it answered. Walking
    /// them put a stall that grew with the mailbox on the writer, every write queued behind
    /// it: the soak's `poll` and `create a task` p99 climbed with it (issue 25).
    #[tokio::test]
    async fn a_heartbeat_does_not_read_the_agent_s_history() {
        let (_dir, connection) = crate::test_file::migrated().await;
        connection.pragma_update(None, "foreign_keys", false).unwrap();
        connection
            .execute_batch(
                "INSERT INTO agents (id, name, is_lead, status, created_at, last_updated_at)
                     VALUES ('agent', 'agent', 1, 'idle', 0, 0), ('other', 'other', 0, 'idle', 0, 0);
                 INSERT INTO mail (id, from_agent_id, to_agent_id, type, subject, body, priority,
                                   priority_rank, status, processing_since, lease_expires_at, created_at)
                     VALUES ('held-mail', 'other', 'agent', 'message', 's', 'b', 'urgent', 0,
                             'processing', 1, 2, 1);
                 INSERT INTO task_awaits (task_id, agent_id, parent_task_id, trigger_name, session_key,
                                          created_at, processing_since, lease_expires_at)
                     VALUES ('held-task', 'agent', 'parent', 't', 'k', 1, 1, 2);
                 INSERT INTO inbox_messages (id, agent_id, content, status, lease_expires_at,
                                             created_at, last_updated_at)
                     VALUES ('held-message', 'agent', 'hi', 'processing', 2, 1, 1);",
            )
            .unwrap();
        let before = extension_steps(&connection, "agent");

        connection
            .execute_batch(
                "WITH RECURSIVE n (value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM n WHERE value < 5000)
                 INSERT INTO mail (id, from_agent_id, to_agent_id, type, subject, body, priority,
                                   priority_rank, status, read_at, created_at)
                     SELECT 'mail-' || value, 'other', 'agent', 'message', 's', 'b', 'normal', 1,
                            'read', value, value FROM n;
                 WITH RECURSIVE n (value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM n WHERE value < 5000)
                 INSERT INTO task_awaits (task_id, agent_id, parent_task_id, trigger_name, session_key,
                                          created_at, delivered_at)
                     SELECT 'task-' || value, 'agent', 'parent', 't', 'k', value, value FROM n;
                 WITH RECURSIVE n (value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM n WHERE value < 5000)
                 INSERT INTO inbox_messages (id, agent_id, content, status, created_at, last_updated_at)
                     SELECT 'message-' || value, 'agent', 'hi', 'responded', value, value FROM n;",
            )
            .unwrap();
        // An index search may take a step or two more in a bigger tree; a walk takes 5,000.
        for ((sql, steps_before), (_, steps_after)) in
            before.iter().zip(extension_steps(&connection, "agent"))
        {
            assert!(
                steps_after <= steps_before + 10,
                "5,000 more handled items took {steps_before} steps to {steps_after}: {sql}"
            );
        }

        let extended: i64 = connection
            .query_row(
                "SELECT (SELECT count(*) FROM mail WHERE lease_expires_at = 1000000)
                      + (SELECT count(*) FROM task_awaits WHERE lease_expires_at = 1000000)
                      + (SELECT count(*) FROM inbox_messages WHERE lease_expires_at = 1000000)",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(extended, 3, "the held mail, result and message each had their lease extended");
    }
}
