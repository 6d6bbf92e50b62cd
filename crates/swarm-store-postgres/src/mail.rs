//! Agent mail. Sending appends a row (and, for a reply, delivers and answers the
//! replied-to mail in the same transaction); delivery and the poll's `urgent_mail` claim
//! are guarded `UPDATE`s of the recipient's delivery state, the claim's pick skipping
//! rows another replica holds (`FOR UPDATE SKIP LOCKED`). The state machine is
//! `swarm_domain::mail`.

use sqlx::{PgConnection, PgPool, Postgres, QueryBuilder, Row, postgres::PgRow};
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
use uuid::Uuid;

use crate::error::{corrupt, db, vanished};

macro_rules! mail_columns {
    () => {
        "id, from_agent_id, to_agent_id, type, subject, body, priority, awaiting_response, in_reply_to, \
         status, read_at, answered_at, lease_expires_at, created_at"
    };
}

pub(crate) async fn send(pool: &PgPool, mail: &NewMail, now: Timestamp) -> StoreResult<Mail> {
    let mut tx = pool.begin().await.map_err(db)?;
    let sent = send_in(&mut tx, mail, now).await?;
    tx.commit().await.map_err(db)?;
    Ok(sent)
}

pub(crate) async fn stop_alert(
    pool: &PgPool,
    agent: AgentId,
    key: &str,
    alert: &NewMail,
    now: Timestamp,
) -> StoreResult<Option<Mail>> {
    let mut tx = pool.begin().await.map_err(db)?;
    let marked = sqlx::query(
        "UPDATE agents SET stop_alert_key = $1 WHERE id = $2 AND stop_alert_key IS DISTINCT FROM $1",
    )
    .bind(key)
    .bind(agent.as_uuid())
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    if marked.rows_affected() == 0 {
        return Ok(None);
    }
    let sent = send_in(&mut tx, alert, now).await?;
    tx.commit().await.map_err(db)?;
    Ok(Some(sent))
}

async fn send_in(tx: &mut PgConnection, mail: &NewMail, now: Timestamp) -> StoreResult<Mail> {
    let inserted = sqlx::query(
        "INSERT INTO mail (id, from_agent_id, to_agent_id, type, subject, body, priority, priority_rank, \
             awaiting_response, in_reply_to, created_at, wakes) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, \
                 $8 = 0 OR EXISTS (SELECT 1 FROM mail p WHERE p.id = $10 AND p.awaiting_response \
                                                        AND p.from_agent_id = $3))",
    )
    .bind(mail.id.as_uuid())
    .bind(mail.from_agent_id.as_uuid())
    .bind(mail.to_agent_id.as_uuid())
    .bind(mail.mail_type.as_str())
    .bind(&mail.subject)
    .bind(&mail.body)
    .bind(mail.priority.as_str())
    .bind(mail.priority.rank() as i32)
    .bind(mail.awaiting_response)
    .bind(mail.in_reply_to.map(|id| id.as_uuid()))
    .bind(now.datetime())
    .execute(&mut *tx)
    .await;
    if let Err(error) = inserted {
        return Err(match db(error) {
            StoreError::MissingReference(_) => {
                StoreError::MissingReference("from, to or inReplyTo: no such agent or mail".into())
            }
            other => other,
        });
    }
    if let Some(parent) = mail.in_reply_to {
        // Replying to mail means the replier has seen it, and answers it when it waited;
        // guarded by its from-state like every status change (read mail answered already
        // stays as it was).
        sqlx::query(
            "UPDATE mail SET status = 'read', read_at = coalesce(read_at, $1), \
                             processing_since = NULL, lease_expires_at = NULL, \
                             answered_at = CASE WHEN awaiting_response THEN coalesce(answered_at, $1) \
                                                ELSE answered_at END \
             WHERE id = $2 AND to_agent_id = $3 \
               AND (status IN ('unread', 'processing') OR (awaiting_response AND answered_at IS NULL))",
        )
        .bind(now.datetime())
        .bind(parent.as_uuid())
        .bind(mail.from_agent_id.as_uuid())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    }
    get_in(tx, mail.id).await?.ok_or_else(|| vanished("mail", mail.id))
}

pub(crate) async fn get(pool: &PgPool, id: MailId) -> StoreResult<Option<Mail>> {
    let mut connection = pool.acquire().await.map_err(db)?;
    get_in(&mut connection, id).await
}

async fn get_in(connection: &mut PgConnection, id: MailId) -> StoreResult<Option<Mail>> {
    sqlx::query(concat!("SELECT ", mail_columns!(), " FROM mail WHERE id = $1"))
        .bind(id.as_uuid())
        .try_map(mail_from_row)
        .fetch_optional(&mut *connection)
        .await
        .map_err(db)
}

pub(crate) async fn list(pool: &PgPool, query: &MailQuery) -> StoreResult<Vec<Mail>> {
    let mut sql: QueryBuilder<Postgres> =
        QueryBuilder::new(concat!("SELECT ", mail_columns!(), " FROM mail WHERE TRUE"));
    if let Some(agent) = query.agent {
        match query.mailbox {
            MailBox::Inbox => sql.push(" AND to_agent_id = ").push_bind(agent.as_uuid()),
            MailBox::Outbox => sql.push(" AND from_agent_id = ").push_bind(agent.as_uuid()),
            MailBox::All => sql
                .push(" AND (to_agent_id = ")
                .push_bind(agent.as_uuid())
                .push(" OR from_agent_id = ")
                .push_bind(agent.as_uuid())
                .push(")"),
        };
    }
    if !query.statuses.is_empty() {
        let statuses: Vec<&str> = query.statuses.iter().map(MailStatus::as_str).collect();
        sql.push(" AND status = ANY(").push_bind(statuses).push(")");
    }
    if !query.priorities.is_empty() {
        let priorities: Vec<&str> = query.priorities.iter().map(MailPriority::as_str).collect();
        sql.push(" AND priority = ANY(").push_bind(priorities).push(")");
    }
    if query.pending_only {
        sql.push(
            " AND ((awaiting_response AND answered_at IS NULL) OR (priority = 'urgent' AND status <> 'read'))",
        );
    }
    let (compare, order) = if query.oldest_first { (">", "ASC") } else { ("<", "DESC") };
    if let Some(after) = query.after {
        sql.push(format_args!(
            " AND (created_at, id) {compare} (SELECT created_at, id FROM mail WHERE id = "
        ))
        .push_bind(after.as_uuid())
        .push(")");
    }
    sql.push(format_args!(" ORDER BY created_at {order}, id {order} LIMIT ")).push_bind(query.limit);
    sql.build().try_map(mail_from_row).fetch_all(pool).await.map_err(db)
}

pub(crate) async fn deliver(
    pool: &PgPool,
    recipient: AgentId,
    delivery: &MailDelivery,
    now: Timestamp,
) -> StoreResult<Vec<Mail>> {
    let ids: Vec<Uuid> = delivery.ids.iter().map(MailId::as_uuid).collect();
    let priorities: Vec<&str> = delivery.priorities.iter().map(MailPriority::as_str).collect();
    // The guard is in the UPDATE: a piece delivered by a concurrent call is skipped there.
    let mut delivered: Vec<Mail> = sqlx::query(concat!(
        "UPDATE mail SET status = 'read', read_at = $1, processing_since = NULL, lease_expires_at = NULL \
         WHERE status IN ('unread', 'processing') AND id IN ( \
             SELECT id FROM mail WHERE to_agent_id = $2 AND status <> 'read' \
               AND (cardinality($3::uuid[]) = 0 OR id = ANY($3)) \
               AND (cardinality($4::text[]) = 0 OR priority = ANY($4) OR ($6 AND wakes)) \
             ORDER BY priority_rank, created_at, id LIMIT $5 FOR UPDATE) \
         RETURNING ",
        mail_columns!()
    ))
    .bind(now.datetime())
    .bind(recipient.as_uuid())
    .bind(ids)
    .bind(priorities)
    .bind(delivery.limit)
    .bind(delivery.include_waking)
    .try_map(mail_from_row)
    .fetch_all(pool)
    .await
    .map_err(db)?;
    delivered.sort_by_key(|mail| (mail.priority.rank(), mail.created_at, mail.id));
    Ok(delivered)
}

pub(crate) async fn counts(pool: &PgPool, agent: AgentId) -> StoreResult<MailCounts> {
    let (urgent, normal, low, awaiting): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE priority_rank = 0), count(*) FILTER (WHERE priority_rank = 1), \
                count(*) FILTER (WHERE priority_rank = 2), \
                (SELECT count(*) FROM mail WHERE from_agent_id = $1 AND awaiting_response \
                                             AND answered_at IS NULL) \
         FROM mail WHERE to_agent_id = $1 AND status <> 'read'",
    )
    .bind(agent.as_uuid())
    .fetch_one(pool)
    .await
    .map_err(db)?;
    Ok(MailCounts { unread: urgent + normal + low, urgent, normal, low, awaiting_response: awaiting })
}

/// The `urgent_mail` claim: the oldest unread urgent mail → `processing` with a lease.
pub(crate) async fn claim(
    tx: &mut PgConnection,
    agent: AgentId,
    now: Timestamp,
    lease_until: Timestamp,
    runner: Option<Uuid>,
) -> StoreResult<Option<Trigger>> {
    let mut mail: Vec<Mail> = sqlx::query(concat!(
        "UPDATE mail SET status = 'processing', processing_since = $2, lease_expires_at = $3, lease_holder = $5, \
                         deliveries = deliveries + 1 \
         WHERE status = 'unread' AND id IN ( \
             SELECT id FROM mail WHERE to_agent_id = $1 AND status = 'unread' AND wakes \
                                   AND dead_lettered_at IS NULL \
             ORDER BY created_at, id LIMIT $4 FOR UPDATE SKIP LOCKED) \
         RETURNING ",
        mail_columns!()
    ))
    .bind(agent.as_uuid())
    .bind(now.datetime())
    .bind(lease_until.datetime())
    .bind(URGENT_TRIGGER_MAX)
    .bind(runner)
    .try_map(mail_from_row)
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    if mail.is_empty() {
        return Ok(None);
    }
    mail.sort_by_key(|mail| (mail.created_at, mail.id));
    Ok(Some(Trigger::UrgentMail { count: mail.len(), mail }))
}

fn mail_from_row(row: PgRow) -> sqlx::Result<Mail> {
    let mail_type: String = row.try_get("type")?;
    let priority: String = row.try_get("priority")?;
    let status: String = row.try_get("status")?;
    let in_reply_to: Option<Uuid> = row.try_get("in_reply_to")?;
    let timestamp = |column: &str| -> sqlx::Result<Option<Timestamp>> {
        Ok(row.try_get::<Option<chrono::DateTime<chrono::Utc>>, _>(column)?.map(Timestamp::from_datetime))
    };
    Ok(Mail {
        id: MailId::from_uuid(row.try_get("id")?),
        from_agent_id: AgentId::from_uuid(row.try_get("from_agent_id")?),
        to_agent_id: AgentId::from_uuid(row.try_get("to_agent_id")?),
        mail_type: MailType::parse(&mail_type).map_err(|e| corrupt("type", e))?,
        subject: row.try_get("subject")?,
        body: row.try_get("body")?,
        priority: MailPriority::parse(&priority).map_err(|e| corrupt("priority", e))?,
        awaiting_response: row.try_get("awaiting_response")?,
        in_reply_to: in_reply_to.map(MailId::from_uuid),
        status: MailStatus::parse(&status).map_err(|e| corrupt("status", e))?,
        read_at: timestamp("read_at")?,
        answered_at: timestamp("answered_at")?,
        lease_expires_at: timestamp("lease_expires_at")?,
        created_at: Timestamp::from_datetime(row.try_get("created_at")?),
    })
}
