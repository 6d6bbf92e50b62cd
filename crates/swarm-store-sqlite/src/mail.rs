//! Agent mail. Sending appends a row (and, for a reply, delivers and answers the
//! replied-to mail in the same transaction); delivery and the poll's `urgent_mail` claim
//! are guarded `UPDATE`s of the recipient's delivery state. The state machine is
//! `swarm_domain::mail`.

use rusqlite::{Connection, Row, params};
use swarm_domain::{
    id::{AgentId, MailId},
    mail::{
        Mail, MailBox, MailCounts, MailDelivery, MailPriority, MailQuery, MailStatus, MailType, NewMail,
        URGENT_TRIGGER_MAX,
    },
    poll::Trigger,
    time::Timestamp,
};
use swarm_store::{StoreError, StoreResult};

use crate::{
    error::{corrupt, db, is_foreign_key_violation},
    rows::Columns,
    sql::{self, Sql},
};

const SELECT_MAIL: &str =
    "SELECT id, from_agent_id, to_agent_id, type, subject, body, priority, awaiting_response,
    in_reply_to, status, read_at, answered_at, lease_expires_at, created_at FROM mail";

pub(crate) fn send(tx: &Connection, mail: &NewMail, now: Timestamp) -> StoreResult<Mail> {
    let inserted = tx.execute(
        "INSERT INTO mail (id, from_agent_id, to_agent_id, type, subject, body, priority, priority_rank,
             awaiting_response, in_reply_to, created_at, wakes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,
                 -- Wakes the recipient: urgent, or the answer to mail it awaits a response to.
                 ?8 = 0 OR EXISTS (SELECT 1 FROM mail p WHERE p.id = ?10 AND p.awaiting_response = 1
                                                       AND p.from_agent_id = ?3))",
        params![
            mail.id.to_string(),
            mail.from_agent_id.to_string(),
            mail.to_agent_id.to_string(),
            mail.mail_type.as_str(),
            mail.subject,
            mail.body,
            mail.priority.as_str(),
            mail.priority.rank(),
            mail.awaiting_response,
            mail.in_reply_to.map(|id| id.to_string()),
            now.unix_millis(),
        ],
    );
    match inserted {
        Ok(_) => {}
        Err(error) if is_foreign_key_violation(&error) => {
            return Err(StoreError::MissingReference("from, to or inReplyTo: no such agent or mail".into()));
        }
        Err(error) => return Err(db(error)),
    }
    if let Some(parent) = mail.in_reply_to {
        // Replying to mail means the replier has seen it, and answers it when it waited;
        // guarded by its from-state like every status change (read mail answered already
        // stays as it was).
        sql::execute(
            tx,
            "UPDATE mail SET status = 'read', read_at = coalesce(read_at, ?1),
                             processing_since = NULL, lease_expires_at = NULL,
                             answered_at = CASE WHEN awaiting_response = 1 THEN coalesce(answered_at, ?1)
                                                ELSE answered_at END
             WHERE id = ?2 AND to_agent_id = ?3
               AND (status IN ('unread', 'processing') OR (awaiting_response = 1 AND answered_at IS NULL))",
            params![now.unix_millis(), parent.to_string(), mail.from_agent_id.to_string()],
        )?;
    }
    get(tx, mail.id)?.ok_or_else(|| corrupt(format!("mail {} vanished", mail.id)))
}

pub(crate) fn stop_alert(
    tx: &Connection,
    agent: AgentId,
    key: &str,
    alert: &NewMail,
    now: Timestamp,
) -> StoreResult<Option<Mail>> {
    let marked = sql::execute(
        tx,
        "UPDATE agents SET stop_alert_key = ?1 WHERE id = ?2 AND stop_alert_key IS NOT ?1",
        params![key, agent.to_string()],
    )?;
    if marked == 0 {
        return Ok(None);
    }
    send(tx, alert, now).map(Some)
}

pub(crate) fn get(connection: &Connection, id: MailId) -> StoreResult<Option<Mail>> {
    sql::optional(connection, &format!("{SELECT_MAIL} WHERE id = ?"), [id.to_string()], mail_from_row)
}

/// The condition of `mail_outbox_pending` (migration 0020), written as the index has it:
/// SQLite uses a partial index only for a query with this very term.
const PENDING: &str =
    "((awaiting_response = 1 AND answered_at IS NULL) OR (priority = 'urgent' AND status <> 'read'))";

pub(crate) fn list(connection: &Connection, query: &MailQuery) -> StoreResult<Vec<Mail>> {
    list_sql(query).all(connection, mail_from_row)
}

fn list_sql(query: &MailQuery) -> Sql {
    let unread_only = !query.statuses.is_empty() && !query.statuses.contains(&MailStatus::Read);
    // Without statistics SQLite prefers the index whose first column the query names by
    // equality (`mail_inbox`, `mail_outbox`: all of the agent's mail, read or answered
    // long ago) to a partial index of the few rows that match, so the cost grew with the
    // agent's history. Name the partial index where the query's terms imply its condition.
    let index = match (query.agent, query.mailbox) {
        (Some(_), MailBox::Outbox) if query.pending_only => " INDEXED BY mail_outbox_pending",
        (Some(_), MailBox::Inbox) if unread_only => " INDEXED BY mail_undelivered",
        _ => "",
    };
    let mut sql = Sql::new(SELECT_MAIL);
    sql.push(index);
    sql.push(" WHERE 1 = 1");
    if unread_only {
        // Implied by the statuses (mail is unread, processing or read), and the term
        // `mail_undelivered`'s condition needs.
        sql.push(" AND status <> 'read'");
    }
    if let Some(agent) = query.agent {
        let agent = agent.to_string();
        match query.mailbox {
            MailBox::Inbox => sql.push(" AND to_agent_id = ").bind(agent),
            MailBox::Outbox => sql.push(" AND from_agent_id = ").bind(agent),
            MailBox::All => sql
                .push(" AND (to_agent_id = ")
                .bind(agent.clone())
                .push(" OR from_agent_id = ")
                .bind(agent)
                .push(")"),
        };
    }
    if !query.statuses.is_empty() {
        sql.push(" AND status IN (")
            .bind_list(query.statuses.iter().map(|status| status.as_str().to_string()))
            .push(")");
    }
    if !query.priorities.is_empty() {
        sql.push(" AND priority IN (")
            .bind_list(query.priorities.iter().map(|priority| priority.as_str().to_string()))
            .push(")");
    }
    if query.pending_only {
        sql.push(" AND ").push(PENDING);
    }
    let (compare, order) = if query.oldest_first { (">", "ASC") } else { ("<", "DESC") };
    if let Some(after) = query.after {
        sql.push(&format!(" AND (created_at, id) {compare} (SELECT created_at, id FROM mail WHERE id = "))
            .bind(after.to_string())
            .push(")");
    }
    sql.push(&format!(" ORDER BY created_at {order}, id {order} LIMIT ")).bind(query.limit);
    sql
}

pub(crate) fn deliver(
    tx: &Connection,
    recipient: AgentId,
    delivery: &MailDelivery,
    now: Timestamp,
) -> StoreResult<Vec<Mail>> {
    let mut pick = Sql::new("SELECT id FROM mail WHERE to_agent_id = ");
    pick.bind(recipient.to_string()).push(" AND status <> 'read'");
    if !delivery.ids.is_empty() {
        pick.push(" AND id IN (").bind_list(delivery.ids.iter().map(MailId::to_string)).push(")");
    }
    if !delivery.priorities.is_empty() {
        pick.push(" AND (priority IN (")
            .bind_list(delivery.priorities.iter().map(|priority| priority.as_str().to_string()))
            .push(")");
        if delivery.include_waking {
            pick.push(" OR wakes = 1");
        }
        pick.push(")");
    }
    pick.push(" ORDER BY priority_rank, created_at, id LIMIT ").bind(delivery.limit);
    let ids = pick.all(tx, |row| mail_id(row.get::<_, String>(0).map_err(db)?))?;
    let mut delivered = Vec::with_capacity(ids.len());
    for id in ids {
        let marked = sql::execute(
            tx,
            "UPDATE mail SET status = 'read', read_at = ?1, processing_since = NULL, lease_expires_at = NULL
             WHERE id = ?2 AND to_agent_id = ?3 AND status IN ('unread', 'processing')",
            params![now.unix_millis(), id.to_string(), recipient.to_string()],
        )?;
        if marked == 1 {
            delivered.extend(get(tx, id)?);
        }
    }
    Ok(delivered)
}

pub(crate) fn counts(connection: &Connection, agent: AgentId) -> StoreResult<MailCounts> {
    let agent = agent.to_string();
    let by_priority = sql::all(
        connection,
        "SELECT priority_rank, count(*) FROM mail WHERE to_agent_id = ? AND status <> 'read' GROUP BY priority_rank",
        [&agent],
        |row| Ok((row.get::<_, i64>(0).map_err(db)?, row.get::<_, i64>(1).map_err(db)?)),
    )?;
    let mut counts = MailCounts::default();
    for (rank, count) in by_priority {
        match rank {
            0 => counts.urgent = count,
            1 => counts.normal = count,
            _ => counts.low += count,
        }
    }
    counts.unread = counts.urgent + counts.normal + counts.low;
    counts.awaiting_response = sql::scalar(
        connection,
        "SELECT count(*) FROM mail WHERE from_agent_id = ? AND awaiting_response = 1 AND answered_at IS NULL",
        [&agent],
    )?;
    Ok(counts)
}

/// The `urgent_mail` claim: the oldest unread mail that wakes its recipient (urgent, or
/// a reply it awaits) → `processing` with a lease.
pub(crate) fn claim(
    tx: &Connection,
    agent: AgentId,
    now: Timestamp,
    lease_until: Timestamp,
    runner: Option<&str>,
) -> StoreResult<Option<Trigger>> {
    let mut mail = sql::all(
        tx,
        &format!(
            "UPDATE mail SET status = 'processing', processing_since = ?2, lease_expires_at = ?3, lease_holder = ?5,
                             deliveries = deliveries + 1
             WHERE status = 'unread' AND id IN (
                 SELECT id FROM mail INDEXED BY mail_waking WHERE to_agent_id = ?1 AND status = 'unread' AND wakes = 1
                                       AND dead_lettered_at IS NULL
                 ORDER BY created_at, id LIMIT ?4)
             RETURNING {}",
            SELECT_MAIL.trim_start_matches("SELECT ").trim_end_matches(" FROM mail")
        ),
        params![agent.to_string(), now.unix_millis(), lease_until.unix_millis(), URGENT_TRIGGER_MAX, runner],
        mail_from_row,
    )?;
    if mail.is_empty() {
        return Ok(None);
    }
    mail.sort_by_key(|mail| (mail.created_at, mail.id));
    Ok(Some(Trigger::UrgentMail { count: mail.len(), mail }))
}

fn mail_id(text: String) -> StoreResult<MailId> {
    MailId::parse(&text).map_err(|error| corrupt(error.0))
}

fn mail_from_row(row: &Row<'_>) -> StoreResult<Mail> {
    let mut column = Columns::new(row);
    let id = mail_id(column.take("id")?)?;
    let from_agent_id = column.agent_id("from_agent_id")?;
    let to_agent_id = column.agent_id("to_agent_id")?;
    let bad = |error: swarm_domain::Invalid| corrupt(format!("mail {id}: {error}"));
    let mail_type = MailType::parse(&column.take::<String>("type")?).map_err(bad)?;
    let subject = column.take("subject")?;
    let body = column.take("body")?;
    let priority = MailPriority::parse(&column.take::<String>("priority")?).map_err(bad)?;
    let awaiting_response = column.bool("awaiting_response")?;
    let in_reply_to = column.take::<Option<String>>("in_reply_to")?.map(mail_id).transpose()?;
    let status = MailStatus::parse(&column.take::<String>("status")?).map_err(bad)?;
    Ok(Mail {
        id,
        from_agent_id,
        to_agent_id,
        mail_type,
        subject,
        body,
        priority,
        awaiting_response,
        in_reply_to,
        status,
        read_at: column.opt_timestamp("read_at")?,
        answered_at: column.opt_timestamp("answered_at")?,
        lease_expires_at: column.opt_timestamp("lease_expires_at")?,
        created_at: column.timestamp("created_at")?,
    })
}

#[cfg(test)]
mod tests {
    use rusqlite::{Connection, params};
    use swarm_domain::{
        id::{AgentId, MailId},
        mail::{MailBox, MailQuery, MailStatus},
    };

    use super::list_sql;

    /// `count` more mails from `from` to `to`, read, answered and not urgent: history.
    fn old_mail(connection: &Connection, from: &str, to: &str, first: i64, count: i64) {
        connection
            .execute(
                "WITH RECURSIVE n (value) AS (SELECT ?3 UNION ALL SELECT value + 1 FROM n WHERE value < ?3 + ?4 - 1)
                 INSERT INTO mail (id, from_agent_id, to_agent_id, type, subject, body, priority, priority_rank,
                                   awaiting_response, status, read_at, answered_at, created_at)
                 SELECT printf('mail-%08d', value), ?1, ?2, 'fyi', 's', 'b', 'normal', 1,
                        1, 'read', value, value, value
                 FROM n",
                params![from, to, first, count],
            )
            .unwrap();
    }

    /// What a finishing worker's coordinator is told about (the mail it sent that waits,
    /// its unread mail) is found without reading the agent's history: the cost of a
    /// finish must not grow with the mail an agent ever sent or read (issue 25's soak).
    #[tokio::test]
    async fn pending_and_unread_mail_are_found_without_reading_the_history() {
        let (_dir, connection) = crate::test_file::migrated().await;
        let (worker, peer) = (AgentId::new_v7(), AgentId::new_v7());
        let (waits, unread_id) = (MailId::new_v7(), MailId::new_v7());
        for (id, name) in [(worker, "worker"), (peer, "peer")] {
            connection
                .execute(
                    "INSERT INTO agents (id, name, is_lead, status, created_at, last_updated_at)
                     VALUES (?1, ?2, 0, 'idle', 0, 0)",
                    params![id.to_string(), name],
                )
                .unwrap();
        }
        // What is pending is the newest: a walk of the whole mailbox meets the history first.
        connection
            .execute_batch(&format!(
                "INSERT INTO mail (id, from_agent_id, to_agent_id, type, subject, body, priority, priority_rank,
                                   awaiting_response, status, created_at)
                 VALUES ('{waits}', '{worker}', '{peer}', 'question', 's', 'b', 'normal', 1, 1, 'read', 9000000),
                        ('{unread_id}', '{peer}', '{worker}', 'fyi', 's', 'b', 'normal', 1, 0, 'unread', 9000001);"
            ))
            .unwrap();
        let pending = MailQuery {
            agent: Some(worker),
            mailbox: MailBox::Outbox,
            pending_only: true,
            oldest_first: true,
            limit: 20,
            ..MailQuery::default()
        };
        let unread = MailQuery {
            agent: Some(worker),
            mailbox: MailBox::Inbox,
            statuses: MailStatus::UNDELIVERED.to_vec(),
            oldest_first: true,
            limit: 20,
            ..MailQuery::default()
        };
        let steps = || (list_sql(&pending).steps(&connection), list_sql(&unread).steps(&connection));
        let before = steps();

        old_mail(&connection, &worker.to_string(), &peer.to_string(), 1, 3_000);
        old_mail(&connection, &peer.to_string(), &worker.to_string(), 10_000, 3_000);
        assert_eq!(before, steps(), "3,000 old mails each way changed the work of the lists");

        let found = |query: &MailQuery| -> Vec<MailId> {
            let rows = list_sql(query).all(&connection, super::mail_from_row).unwrap();
            rows.into_iter().map(|mail| mail.id).collect()
        };
        assert_eq!(found(&pending), [waits]);
        assert_eq!(found(&unread), [unread_id]);
    }
}
