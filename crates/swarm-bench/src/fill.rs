//! `swarm bench --fill N`: the scale run (issue 22). Before the measurements, the scratch
//! database of the hub the bench started gets a history: agents that came and went and N
//! tasks they finished, each with its events, written in bulk by `INSERT ... SELECT` into
//! the tables the hub itself migrated (the store's own schema, not a copy of it), in
//! batches of one transaction each. Going through the API would take an hour for a
//! million tasks; this takes minutes, and the hub then serves the measurements on it.
//!
//! The rows are what the hub writes for a task created by the operator for an agent and
//! finished by it: the task (completed, its outcome reported to the lead) and three
//! events (created, in progress, completed). The filler agents are offline, as most
//! agents of a long-lived hub are, so that no background pass of the hub moves them while
//! it is measured.

use std::{path::PathBuf, time::Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use sqlx::Connection;

use super::hub::{Http, Target};

/// Tasks written per transaction.
const BATCH: u64 = 50_000;
/// The filled history ends this long before the fill (milliseconds): older than any
/// retention window the bench's hub could run with (it runs none by default).
const HISTORY_MS: i64 = 3_600_000;

/// Where the scratch database of a hub the bench started lives.
#[derive(Debug, Clone)]
pub(crate) enum Database {
    SqliteFile(PathBuf),
    Postgres { url: String },
}

/// What the fill wrote, and how big the database is.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Fill {
    pub agents: u64,
    pub tasks: u64,
    pub events: u64,
    pub seconds: f64,
    /// After the fill (SQLite: the file and its WAL; PostgreSQL: `pg_database_size`).
    pub bytes_filled: u64,
    /// After the measurements.
    pub bytes_after: Option<u64>,
}

/// What to write.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub agents: u64,
    pub tasks: u64,
}

pub(crate) async fn fill(database: &Database, shape: Shape) -> anyhow::Result<Fill> {
    let started = Instant::now();
    // Ids of this run's rows: UUIDs whose first group is random, so two fills of one
    // database never collide.
    let tag = u32::from_str_radix(&uuid::Uuid::new_v4().simple().to_string()[..8], 16)?;
    let now = chrono_millis();
    let progress = move |done: u64| {
        eprintln!("bench: filled {done} of {} tasks ({:.0} s)", shape.tasks, started.elapsed().as_secs_f64());
    };
    match database {
        Database::SqliteFile(path) => {
            let path = path.clone();
            tokio::task::spawn_blocking(move || sqlite::fill(&path, shape, tag, now, progress))
                .await
                .context("the SQLite fill stopped")??;
        }
        Database::Postgres { url } => postgres::fill(url, shape, tag, now, progress).await?,
    }
    Ok(Fill {
        agents: shape.agents,
        tasks: shape.tasks,
        events: shape.tasks * 3,
        seconds: started.elapsed().as_secs_f64(),
        bytes_filled: size(database).await?,
        bytes_after: None,
    })
}

/// The hub reads what was written: its stats count the tasks and agents, and it decodes
/// the newest task of its listing (ids, times and statuses as it writes them itself).
pub(crate) async fn check(target: &Target, shape: Shape) -> anyhow::Result<()> {
    let http = Http::new(target);
    let stats: serde_json::Value =
        http.get("/api/stats", None).await.context("GET /api/stats after the fill")?;
    let count = |value: &serde_json::Value| value.as_u64().unwrap_or_default();
    let (tasks, agents) = (count(&stats["tasks"]["completed"]), count(&stats["agents"]["offline"]));
    if tasks < shape.tasks || agents < shape.agents {
        bail!(
            "after the fill the hub counts {tasks} completed tasks and {agents} offline agents, \
             not at least {} and {}",
            shape.tasks,
            shape.agents
        );
    }
    let page: serde_json::Value =
        http.get("/api/tasks?limit=1", None).await.context("GET /api/tasks after the fill")?;
    let newest = &page["tasks"][0];
    if newest["status"] != "completed"
        || !newest["task"].as_str().is_some_and(|text| text.starts_with("filled task"))
    {
        bail!("the hub's newest task after the fill is not a filled one: {newest}");
    }
    Ok(())
}

/// The database's size on disk now.
pub(crate) async fn size(database: &Database) -> anyhow::Result<u64> {
    match database {
        Database::SqliteFile(path) => {
            let file = |suffix: &str| {
                let mut name = path.clone().into_os_string();
                name.push(suffix);
                std::fs::metadata(PathBuf::from(name)).map_or(0, |metadata| metadata.len())
            };
            Ok(file("") + file("-wal"))
        }
        Database::Postgres { url } => {
            let mut connection = sqlx::PgConnection::connect(url).await?;
            let (bytes,): (i64,) = sqlx::query_as("SELECT pg_database_size(current_database())")
                .fetch_one(&mut connection)
                .await?;
            connection.close().await.ok();
            Ok(u64::try_from(bytes).unwrap_or_default())
        }
    }
}

fn chrono_millis() -> i64 {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}

/// Task `i` was created `HISTORY_MS + (tasks - i) * STEP` before now and finished a
/// second later, by agent `i % agents`.
const STEP_MS: i64 = 100;

mod sqlite {
    use std::path::Path;

    use anyhow::Context;
    use rusqlite::{Connection, params};

    use super::{BATCH, HISTORY_MS, STEP_MS, Shape};

    /// A UUID of this run: the tag, then `kind` (1 agents, 2 tasks, 3 events), then `i`.
    /// `printf` gives SQLite the hex digits.
    macro_rules! uuid {
        ($kind:literal, $i:literal) => {
            concat!("printf('%08x-0000-7000-8", $kind, "00-%012x', ?1, ", $i, ")")
        };
    }

    pub(super) fn fill(
        path: &Path,
        shape: Shape,
        tag: u32,
        now: i64,
        progress: impl Fn(u64),
    ) -> anyhow::Result<()> {
        let mut connection =
            Connection::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        connection.busy_timeout(std::time::Duration::from_secs(30))?;
        let start = now - HISTORY_MS - i64::try_from(shape.tasks)? * STEP_MS;
        let (agents, tasks, batch) =
            (i64::try_from(shape.agents)?, i64::try_from(shape.tasks)?, i64::try_from(BATCH)?);
        let tx = connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute(
            concat!(
                "WITH RECURSIVE n (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?2)
                 INSERT INTO agents (id, name, is_lead, status, max_tasks, created_at, last_updated_at, last_seen_at)
                 SELECT ",
                uuid!("1", "i"),
                ", printf('fill-%08x-agent-%d', ?1, i), 0, 'offline', 1, ?3, ?3, ?3 FROM n"
            ),
            params![tag, agents, start],
        )
        .context("cannot write the agents")?;
        tx.commit()?;
        let mut done = 0;
        while done < tasks {
            let count = batch.min(tasks - done);
            let tx = connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            tx.execute(
                concat!(
                    "WITH RECURSIVE n (i) AS (SELECT ?2 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?2 + ?3)
                     INSERT INTO tasks (id, agent_id, task, status, source, priority, created_at, last_updated_at,
                                        finished_at, notified_at, output)
                     SELECT ",
                    uuid!("2", "i"),
                    ", ",
                    uuid!("1", "i % ?4"),
                    ", printf('filled task %d: build the thing and report back', i), 'completed', 'api', 50,
                       ?5 + i * ?6, ?5 + i * ?6 + 1000, ?5 + i * ?6 + 1000, ?5 + i * ?6 + 1100, 'done'
                     FROM n"
                ),
                params![tag, done, count, agents, start, STEP_MS],
            )
            .context("cannot write the tasks")?;
            // Three events per task: created (by the operator), in progress and completed
            // (by its agent). The agent's events go into the index by agent the way the
            // writer's batches put them there.
            tx.execute(
                concat!(
                    "WITH RECURSIVE n (i) AS (SELECT ?2 * 3 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < (?2 + ?3) * 3)
                     INSERT INTO events (id, event_type, agent_id, task_id, old_value, new_value, created_at)
                     SELECT ",
                    uuid!("3", "i"),
                    ", CASE i % 3 WHEN 0 THEN 'task_created' ELSE 'task_status_change' END,
                       CASE WHEN i % 3 = 0 THEN NULL ELSE ",
                    uuid!("1", "(i / 3) % ?4"),
                    " END, ",
                    uuid!("2", "i / 3"),
                    ", CASE i % 3 WHEN 0 THEN NULL WHEN 1 THEN 'pending' ELSE 'in_progress' END,
                       CASE i % 3 WHEN 0 THEN 'pending' WHEN 1 THEN 'in_progress' ELSE 'completed' END,
                       ?5 + (i / 3) * ?6 + (i % 3) * 500
                     FROM n"
                ),
                params![tag, done, count, agents, start, STEP_MS],
            )
            .context("cannot write the events")?;
            let through: i64 =
                tx.query_row("SELECT through_seq FROM agent_events_indexed", [], |row| row.get(0))?;
            tx.execute(
                "INSERT OR IGNORE INTO agent_events (agent_id, created_at, event_seq)
                 SELECT agent_id, created_at, seq FROM events WHERE seq > ?1 AND agent_id IS NOT NULL",
                [through],
            )?;
            tx.execute(
                "UPDATE agent_events_indexed SET through_seq = (SELECT coalesce(max(seq), 0) FROM events)",
                [],
            )?;
            tx.commit()?;
            done += count;
            // Keep the WAL from growing by the whole fill.
            connection.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
            progress(u64::try_from(done)?);
        }
        Ok(())
    }
}

mod postgres {
    use anyhow::Context;
    use sqlx::{Connection, PgConnection};

    use super::{BATCH, HISTORY_MS, STEP_MS, Shape};

    /// A UUID of this run: the tag, then `kind` (1 agents, 2 tasks, 3 events), then `i`.
    macro_rules! uuid {
        ($kind:literal, $i:literal) => {
            concat!(
                "(lpad(to_hex($1::bigint), 8, '0') || '-0000-7000-8",
                $kind,
                "00-' || lpad(to_hex(",
                $i,
                "), 12, '0'))::uuid"
            )
        };
    }

    /// Milliseconds since the epoch as a `timestamptz`.
    macro_rules! at {
        ($millis:literal) => {
            concat!("to_timestamp((", $millis, ")::double precision / 1000)")
        };
    }

    pub(super) async fn fill(
        url: &str,
        shape: Shape,
        tag: u32,
        now: i64,
        progress: impl Fn(u64),
    ) -> anyhow::Result<()> {
        let mut connection =
            PgConnection::connect(url).await.context("cannot connect to fill the database")?;
        let start = now - HISTORY_MS - i64::try_from(shape.tasks)? * STEP_MS;
        let (tag, agents, tasks) =
            (i64::from(tag), i64::try_from(shape.agents)?, i64::try_from(shape.tasks)?);
        sqlx::query(concat!(
            "INSERT INTO agents (id, name, is_lead, status, max_tasks, created_at, last_updated_at, last_seen_at)
             SELECT ",
            uuid!("1", "i"),
            ", 'fill-' || lpad(to_hex($1::bigint), 8, '0') || '-agent-' || i, false, 'offline', 1, ",
            at!("$3"),
            ", ",
            at!("$3"),
            ", ",
            at!("$3"),
            " FROM generate_series(0, $2 - 1) AS i"
        ))
        .bind(tag)
        .bind(agents)
        .bind(start)
        .execute(&mut connection)
        .await
        .context("cannot write the agents")?;
        let mut done: i64 = 0;
        while done < tasks {
            let count = i64::try_from(BATCH)?.min(tasks - done);
            let mut tx = connection.begin().await?;
            sqlx::query(concat!(
                "INSERT INTO tasks (id, agent_id, task, status, source, priority, created_at, last_updated_at,
                                    finished_at, notified_at, output)
                 SELECT ",
                uuid!("2", "i"),
                ", ",
                uuid!("1", "i % $4"),
                ", 'filled task ' || i || ': build the thing and report back', 'completed', 'api', 50, ",
                at!("$5 + i * $6"),
                ", ",
                at!("$5 + i * $6 + 1000"),
                ", ",
                at!("$5 + i * $6 + 1000"),
                ", ",
                at!("$5 + i * $6 + 1100"),
                ", 'done' FROM generate_series($2, $2 + $3 - 1) AS i"
            ))
            .bind(tag)
            .bind(done)
            .bind(count)
            .bind(agents)
            .bind(start)
            .bind(STEP_MS)
            .execute(&mut *tx)
            .await
            .context("cannot write the tasks")?;
            sqlx::query(concat!(
                "INSERT INTO events (id, event_type, agent_id, task_id, old_value, new_value, created_at)
                 SELECT ",
                uuid!("3", "i"),
                ", CASE i % 3 WHEN 0 THEN 'task_created' ELSE 'task_status_change' END,
                   CASE WHEN i % 3 = 0 THEN NULL ELSE ",
                uuid!("1", "(i / 3) % $4"),
                " END, ",
                uuid!("2", "i / 3"),
                ", CASE i % 3 WHEN 0 THEN NULL WHEN 1 THEN 'pending' ELSE 'in_progress' END,
                   CASE i % 3 WHEN 0 THEN 'pending' WHEN 1 THEN 'in_progress' ELSE 'completed' END, ",
                at!("$5 + (i / 3) * $6 + (i % 3) * 500"),
                " FROM generate_series($2 * 3, ($2 + $3) * 3 - 1) AS i"
            ))
            .bind(tag)
            .bind(done)
            .bind(count)
            .bind(agents)
            .bind(start)
            .bind(STEP_MS)
            .execute(&mut *tx)
            .await
            .context("cannot write the events")?;
            tx.commit().await?;
            done += count;
            progress(u64::try_from(done)?);
        }
        // What autovacuum would have done to a database that grew this way over months:
        // the planner sees the tables as they are.
        sqlx::query("VACUUM ANALYZE agents, tasks, events").execute(&mut connection).await?;
        connection.close().await.ok();
        Ok(())
    }
}
