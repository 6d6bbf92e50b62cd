//! Issue trackers: a task created with its link and its delivery mark in one
//! transaction, and its report taken, failed and marked done by guarded statements.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Row, postgres::PgRow};
use swarm_domain::{id::TaskId, task::NewTask, time::Timestamp};
use swarm_store::{
    StoreResult, TrackerLink, TrackerReportDue, TrackerStore, TrackerSync, TrackerTaskCreated,
};

use crate::{PgStore, error::db, events, tasks};

macro_rules! sync_columns {
    () => {
        "s.provider, s.entity_type, s.provider_entity_type, s.swarm_id, s.external_id, \
         s.external_identifier, s.external_url, s.last_delivery_id, s.last_synced_status, s.last_synced_at, \
         s.created_at, s.report_attempts, s.report_error, s.reported_at"
    };
}

fn from_row(row: PgRow) -> sqlx::Result<TrackerSync> {
    let time = |name: &str| -> sqlx::Result<Timestamp> {
        Ok(Timestamp::from_datetime(row.try_get::<DateTime<Utc>, _>(name)?))
    };
    Ok(TrackerSync {
        provider: row.try_get("provider")?,
        entity_type: row.try_get("entity_type")?,
        provider_entity_type: row.try_get("provider_entity_type")?,
        task_id: TaskId::from_uuid(row.try_get("swarm_id")?),
        external_id: row.try_get("external_id")?,
        external_identifier: row.try_get("external_identifier")?,
        external_url: row.try_get("external_url")?,
        last_delivery_id: row.try_get("last_delivery_id")?,
        last_synced_status: row.try_get("last_synced_status")?,
        last_synced_at: time("last_synced_at")?,
        created_at: time("created_at")?,
        report_attempts: row.try_get("report_attempts")?,
        report_error: row.try_get("report_error")?,
        reported_at: row.try_get::<Option<DateTime<Utc>>, _>("reported_at")?.map(Timestamp::from_datetime),
    })
}

async fn mark_delivery(
    conn: &mut PgConnection,
    provider: &str,
    delivery_id: &str,
    now: Timestamp,
) -> StoreResult<bool> {
    // A concurrent insert of the same delivery waits on the key, then does nothing.
    let inserted = sqlx::query(
        "INSERT INTO tracker_deliveries (provider, delivery_id, created_at) VALUES ($1, $2, $3)
         ON CONFLICT (provider, delivery_id) DO NOTHING",
    )
    .bind(provider)
    .bind(delivery_id)
    .bind(now.datetime())
    .execute(conn)
    .await
    .map_err(db)?;
    Ok(inserted.rows_affected() == 1)
}

#[async_trait]
impl TrackerStore for PgStore {
    async fn task_pull_requests_record(
        &self,
        task: TaskId,
        urls: &[String],
        now: Timestamp,
    ) -> StoreResult<()> {
        if urls.is_empty() {
            return Ok(());
        }
        // One statement; the order of the list is kept in recorded_at's tie by ordinality.
        sqlx::query(
            "INSERT INTO task_pull_requests (task_id, url, recorded_at)
             SELECT $1, u.url, $3 + (u.ord - 1) * interval '1 microsecond'
             FROM unnest($2::text[]) WITH ORDINALITY AS u(url, ord)
             ON CONFLICT (task_id, url) DO NOTHING",
        )
        .bind(task.as_uuid())
        .bind(urls)
        .bind(now.datetime())
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn task_pull_requests(&self, task: TaskId) -> StoreResult<Vec<String>> {
        sqlx::query_scalar("SELECT url FROM task_pull_requests WHERE task_id = $1 ORDER BY recorded_at, url")
            .bind(task.as_uuid())
            .fetch_all(&self.pool)
            .await
            .map_err(db)
    }

    async fn tracker_task_create(
        &self,
        task: &NewTask,
        link: &TrackerLink,
        delivery_id: &str,
        now: Timestamp,
    ) -> StoreResult<TrackerTaskCreated> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        if !mark_delivery(&mut tx, &link.provider, delivery_id, now).await? {
            return Ok(TrackerTaskCreated::Duplicate);
        }
        tasks::insert(&mut tx, task, now).await.map_err(db)?;
        for event in task.creation_events() {
            events::insert(&mut tx, &event, now).await?;
        }
        sqlx::query(
            "INSERT INTO tracker_sync (provider, provider_entity_type, swarm_id, external_id,
                                       external_identifier, external_url, last_delivery_id,
                                       last_synced_at, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
        )
        .bind(&link.provider)
        .bind(&link.provider_entity_type)
        .bind(task.id.as_uuid())
        .bind(&link.external_id)
        .bind(&link.external_identifier)
        .bind(&link.external_url)
        .bind(delivery_id)
        .bind(now.datetime())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        let created = tasks::get_known(&mut tx, task.id).await?;
        tx.commit().await.map_err(db)?;
        self.poll_cache.changed();
        Ok(TrackerTaskCreated::Created(Box::new(created)))
    }

    async fn tracker_delivery_mark(
        &self,
        provider: &str,
        delivery_id: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        mark_delivery(&mut conn, provider, delivery_id, now).await
    }

    async fn tracker_sync_get(&self, provider: &str, task: TaskId) -> StoreResult<Option<TrackerSync>> {
        sqlx::query(concat!(
            "SELECT ",
            sync_columns!(),
            " FROM tracker_sync s WHERE s.provider = $1 AND s.swarm_id = $2"
        ))
        .bind(provider)
        .bind(task.as_uuid())
        .try_map(from_row)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)
    }

    async fn tracker_sync_by_external(
        &self,
        provider: &str,
        external_id: &str,
    ) -> StoreResult<Vec<TrackerSync>> {
        sqlx::query(concat!(
            "SELECT ",
            sync_columns!(),
            " FROM tracker_sync s WHERE s.provider = $1 AND s.external_id = $2 \
              ORDER BY s.created_at DESC, s.swarm_id DESC"
        ))
        .bind(provider)
        .bind(external_id)
        .try_map(from_row)
        .fetch_all(&self.pool)
        .await
        .map_err(db)
    }

    async fn tracker_report_due(
        &self,
        provider: &str,
        holder: &str,
        now: Timestamp,
        max_attempts: i32,
        limit: i64,
    ) -> StoreResult<Vec<TrackerReportDue>> {
        let due: Vec<TrackerSync> = sqlx::query(concat!(
            "SELECT ",
            sync_columns!(),
            " FROM tracker_sync s JOIN tasks t ON t.id = s.swarm_id \
              WHERE s.provider = $1 AND s.reported_at IS NULL \
                AND (s.report_lease_until IS NULL OR s.report_lease_until <= $2 OR s.report_holder = $5) \
                AND s.report_attempts < $3 \
                AND t.status IN ('completed', 'failed', 'cancelled') \
              ORDER BY t.finished_at, t.id LIMIT $4"
        ))
        .bind(provider)
        .bind(now.datetime())
        .bind(max_attempts)
        .bind(limit)
        .bind(holder)
        .try_map(from_row)
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        let mut reports = Vec::with_capacity(due.len());
        for sync in due {
            if let Some(task) = tasks::get(&self.pool, sync.task_id).await? {
                reports.push(TrackerReportDue { sync, task });
            }
        }
        Ok(reports)
    }

    async fn tracker_report_claim(
        &self,
        provider: &str,
        task: TaskId,
        holder: &str,
        lease_until: Timestamp,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let taken = sqlx::query(
            "UPDATE tracker_sync SET report_holder = $3, report_lease_until = $4
             WHERE provider = $1 AND swarm_id = $2 AND reported_at IS NULL
               AND (report_lease_until IS NULL OR report_lease_until <= $5 OR report_holder = $3)",
        )
        .bind(provider)
        .bind(task.as_uuid())
        .bind(holder)
        .bind(lease_until.datetime())
        .bind(now.datetime())
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(taken.rows_affected() == 1)
    }

    async fn tracker_report_done(&self, provider: &str, task: TaskId, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE tracker_sync SET reported_at = $3, last_synced_at = $3, report_lease_until = NULL,
                                     report_error = NULL
             WHERE provider = $1 AND swarm_id = $2 AND reported_at IS NULL",
        )
        .bind(provider)
        .bind(task.as_uuid())
        .bind(now.datetime())
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(done.rows_affected() == 1)
    }

    async fn tracker_report_failed(
        &self,
        provider: &str,
        task: TaskId,
        holder: &str,
        error: &str,
        retry_at: Timestamp,
    ) -> StoreResult<bool> {
        let kept = sqlx::query(
            "UPDATE tracker_sync SET report_attempts = report_attempts + 1, report_error = $4,
                                     report_lease_until = $5, report_holder = NULL
             WHERE provider = $1 AND swarm_id = $2 AND reported_at IS NULL AND report_holder = $3",
        )
        .bind(provider)
        .bind(task.as_uuid())
        .bind(holder)
        .bind(error)
        .bind(retry_at.datetime())
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(kept.rows_affected() == 1)
    }

    async fn tracker_status_synced(
        &self,
        provider: &str,
        task: TaskId,
        from: Option<&str>,
        to: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let moved = sqlx::query(
            "UPDATE tracker_sync SET last_synced_status = $4, last_synced_at = $5
             WHERE provider = $1 AND swarm_id = $2 AND last_synced_status IS NOT DISTINCT FROM $3",
        )
        .bind(provider)
        .bind(task.as_uuid())
        .bind(from)
        .bind(to)
        .bind(now.datetime())
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(moved.rows_affected() == 1)
    }
}
