//! Issue trackers: a task created with its link and its delivery mark in one write, and
//! its report taken, failed and marked done by guarded statements.

use async_trait::async_trait;
use rusqlite::{Connection, Row, params};
use swarm_domain::{id::TaskId, task::NewTask, time::Timestamp};
use swarm_store::{
    StoreResult, TrackerLink, TrackerReportDue, TrackerStore, TrackerSync, TrackerTaskCreated,
};

use crate::{SqliteStore, rows::Columns, sql, tasks};

const SYNC_COLUMNS: &str = "s.provider, s.entity_type, s.provider_entity_type, s.swarm_id, s.external_id, \
     s.external_identifier, s.external_url, s.last_delivery_id, s.last_synced_status, s.last_synced_at, \
     s.created_at, s.report_attempts, s.report_error, s.reported_at";

fn mark_delivery(tx: &Connection, provider: &str, delivery_id: &str, now: Timestamp) -> StoreResult<bool> {
    let inserted = sql::execute(
        tx,
        "INSERT INTO tracker_deliveries (provider, delivery_id, created_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (provider, delivery_id) DO NOTHING",
        params![provider, delivery_id, now.unix_millis()],
    )?;
    Ok(inserted == 1)
}

fn task_create(
    tx: &Connection,
    task: &NewTask,
    link: &TrackerLink,
    delivery_id: &str,
    now: Timestamp,
) -> StoreResult<TrackerTaskCreated> {
    if !mark_delivery(tx, &link.provider, delivery_id, now)? {
        return Ok(TrackerTaskCreated::Duplicate);
    }
    let created = tasks::create(tx, task, now)?;
    sql::execute(
        tx,
        "INSERT INTO tracker_sync (provider, provider_entity_type, swarm_id, external_id,
                                   external_identifier, external_url, last_delivery_id,
                                   last_synced_at, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
        params![
            link.provider,
            link.provider_entity_type,
            task.id.to_string(),
            link.external_id,
            link.external_identifier,
            link.external_url,
            delivery_id,
            now.unix_millis()
        ],
    )?;
    Ok(TrackerTaskCreated::Created(Box::new(created)))
}

fn get(connection: &Connection, provider: &str, task: TaskId) -> StoreResult<Option<TrackerSync>> {
    sql::optional(
        connection,
        &format!("SELECT {SYNC_COLUMNS} FROM tracker_sync s WHERE s.provider = ?1 AND s.swarm_id = ?2"),
        params![provider, task.to_string()],
        from_row,
    )
}

fn by_external(connection: &Connection, provider: &str, external_id: &str) -> StoreResult<Vec<TrackerSync>> {
    sql::all(
        connection,
        &format!(
            "SELECT {SYNC_COLUMNS} FROM tracker_sync s WHERE s.provider = ?1 AND s.external_id = ?2
             ORDER BY s.created_at DESC, s.swarm_id DESC"
        ),
        params![provider, external_id],
        from_row,
    )
}

fn report_due(
    connection: &Connection,
    provider: &str,
    holder: &str,
    now: Timestamp,
    max_attempts: i32,
    limit: i64,
) -> StoreResult<Vec<TrackerReportDue>> {
    let due = sql::all(
        connection,
        &format!(
            "SELECT {SYNC_COLUMNS} FROM tracker_sync s JOIN tasks t ON t.id = s.swarm_id
             WHERE s.provider = ?1 AND s.reported_at IS NULL
               AND (s.report_lease_until IS NULL OR s.report_lease_until <= ?2 OR s.report_holder = ?5)
               AND s.report_attempts < ?3
               AND t.status IN ('completed', 'failed', 'cancelled')
             ORDER BY t.finished_at, t.id LIMIT ?4"
        ),
        params![provider, now.unix_millis(), max_attempts, limit, holder],
        from_row,
    )?;
    let mut reports = Vec::with_capacity(due.len());
    for sync in due {
        if let Some(task) = tasks::get(connection, sync.task_id)? {
            reports.push(TrackerReportDue { sync, task });
        }
    }
    Ok(reports)
}

fn report_claim(
    tx: &Connection,
    provider: &str,
    task: TaskId,
    holder: &str,
    lease_until: Timestamp,
    now: Timestamp,
) -> StoreResult<bool> {
    let taken = sql::execute(
        tx,
        "UPDATE tracker_sync SET report_holder = ?3, report_lease_until = ?4
         WHERE provider = ?1 AND swarm_id = ?2 AND reported_at IS NULL
           AND (report_lease_until IS NULL OR report_lease_until <= ?5 OR report_holder = ?3)",
        params![provider, task.to_string(), holder, lease_until.unix_millis(), now.unix_millis()],
    )?;
    Ok(taken == 1)
}

fn report_done(tx: &Connection, provider: &str, task: TaskId, now: Timestamp) -> StoreResult<bool> {
    let done = sql::execute(
        tx,
        "UPDATE tracker_sync SET reported_at = ?3, last_synced_at = ?3, report_lease_until = NULL,
                                 report_error = NULL
         WHERE provider = ?1 AND swarm_id = ?2 AND reported_at IS NULL",
        params![provider, task.to_string(), now.unix_millis()],
    )?;
    Ok(done == 1)
}

fn report_failed(
    tx: &Connection,
    provider: &str,
    task: TaskId,
    holder: &str,
    error: &str,
    retry_at: Timestamp,
) -> StoreResult<bool> {
    let kept = sql::execute(
        tx,
        "UPDATE tracker_sync SET report_attempts = report_attempts + 1, report_error = ?4,
                                 report_lease_until = ?5, report_holder = NULL
         WHERE provider = ?1 AND swarm_id = ?2 AND reported_at IS NULL AND report_holder = ?3",
        params![provider, task.to_string(), holder, error, retry_at.unix_millis()],
    )?;
    Ok(kept == 1)
}

fn status_synced(
    tx: &Connection,
    provider: &str,
    task: TaskId,
    from: Option<&str>,
    to: &str,
    now: Timestamp,
) -> StoreResult<bool> {
    let moved = sql::execute(
        tx,
        "UPDATE tracker_sync SET last_synced_status = ?4, last_synced_at = ?5
         WHERE provider = ?1 AND swarm_id = ?2 AND last_synced_status IS ?3",
        params![provider, task.to_string(), from, to, now.unix_millis()],
    )?;
    Ok(moved == 1)
}

fn from_row(row: &Row<'_>) -> StoreResult<TrackerSync> {
    let mut column = Columns::new(row);
    Ok(TrackerSync {
        provider: column.take("provider")?,
        entity_type: column.take("entity_type")?,
        provider_entity_type: column.take("provider_entity_type")?,
        task_id: column.task_id("swarm_id")?,
        external_id: column.take("external_id")?,
        external_identifier: column.take("external_identifier")?,
        external_url: column.take("external_url")?,
        last_delivery_id: column.take("last_delivery_id")?,
        last_synced_status: column.take("last_synced_status")?,
        last_synced_at: column.timestamp("last_synced_at")?,
        created_at: column.timestamp("created_at")?,
        report_attempts: column.take("report_attempts")?,
        report_error: column.take("report_error")?,
        reported_at: column.opt_timestamp("reported_at")?,
    })
}

fn pull_requests_record(tx: &Connection, task: TaskId, urls: &[String], now: Timestamp) -> StoreResult<()> {
    for url in urls {
        sql::execute(
            tx,
            "INSERT INTO task_pull_requests (task_id, url, recorded_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (task_id, url) DO NOTHING",
            params![task.to_string(), url, now.unix_millis()],
        )?;
    }
    Ok(())
}

fn pull_requests(connection: &Connection, task: TaskId) -> StoreResult<Vec<String>> {
    sql::all(
        connection,
        "SELECT url FROM task_pull_requests WHERE task_id = ?1 ORDER BY recorded_at, rowid",
        [task.to_string()],
        |row| row.get(0).map_err(crate::error::db),
    )
}

#[async_trait]
impl TrackerStore for SqliteStore {
    async fn task_pull_requests_record(
        &self,
        task: TaskId,
        urls: &[String],
        now: Timestamp,
    ) -> StoreResult<()> {
        let urls = urls.to_vec();
        self.database.write(move |tx| pull_requests_record(tx, task, &urls, now)).await
    }

    async fn task_pull_requests(&self, task: TaskId) -> StoreResult<Vec<String>> {
        self.database.read(|connection| pull_requests(connection, task))
    }

    async fn tracker_task_create(
        &self,
        task: &NewTask,
        link: &TrackerLink,
        delivery_id: &str,
        now: Timestamp,
    ) -> StoreResult<TrackerTaskCreated> {
        let (task, link, delivery_id) = (task.clone(), link.clone(), delivery_id.to_string());
        self.database.write(move |tx| task_create(tx, &task, &link, &delivery_id, now)).await
    }

    async fn tracker_delivery_mark(
        &self,
        provider: &str,
        delivery_id: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let (provider, delivery_id) = (provider.to_string(), delivery_id.to_string());
        self.database.write(move |tx| mark_delivery(tx, &provider, &delivery_id, now)).await
    }

    async fn tracker_sync_get(&self, provider: &str, task: TaskId) -> StoreResult<Option<TrackerSync>> {
        self.database.read(|connection| get(connection, provider, task))
    }

    async fn tracker_sync_by_external(
        &self,
        provider: &str,
        external_id: &str,
    ) -> StoreResult<Vec<TrackerSync>> {
        self.database.read(|connection| by_external(connection, provider, external_id))
    }

    async fn tracker_report_due(
        &self,
        provider: &str,
        holder: &str,
        now: Timestamp,
        max_attempts: i32,
        limit: i64,
    ) -> StoreResult<Vec<TrackerReportDue>> {
        let (provider, holder) = (provider.to_string(), holder.to_string());
        self.database
            .read_snapshot(move |snapshot| report_due(snapshot, &provider, &holder, now, max_attempts, limit))
            .await
    }

    async fn tracker_report_claim(
        &self,
        provider: &str,
        task: TaskId,
        holder: &str,
        lease_until: Timestamp,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let (provider, holder) = (provider.to_string(), holder.to_string());
        self.database.write(move |tx| report_claim(tx, &provider, task, &holder, lease_until, now)).await
    }

    async fn tracker_report_done(&self, provider: &str, task: TaskId, now: Timestamp) -> StoreResult<bool> {
        let provider = provider.to_string();
        self.database.write(move |tx| report_done(tx, &provider, task, now)).await
    }

    async fn tracker_report_failed(
        &self,
        provider: &str,
        task: TaskId,
        holder: &str,
        error: &str,
        retry_at: Timestamp,
    ) -> StoreResult<bool> {
        let (provider, holder, error) = (provider.to_string(), holder.to_string(), error.to_string());
        self.database.write(move |tx| report_failed(tx, &provider, task, &holder, &error, retry_at)).await
    }

    async fn tracker_status_synced(
        &self,
        provider: &str,
        task: TaskId,
        from: Option<&str>,
        to: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let (provider, from, to) = (provider.to_string(), from.map(str::to_string), to.to_string());
        self.database.write(move |tx| status_synced(tx, &provider, task, from.as_deref(), &to, now)).await
    }
}
