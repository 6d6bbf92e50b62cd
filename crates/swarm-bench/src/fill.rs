//! `swarm-bench --fill N`: the scale run (issue 22). Before its hub starts, the scratch
//! database gets a history: agents that came and went and N tasks they finished, each
//! with its events, written through the store (`swarm_store::Store`, the trait the hub
//! writes through), never around it. The hub then starts on that database, as a
//! long-lived hub restarts on its own, and serves the measurements on it.
//!
//! Each task lives what the hub writes for a task created by the operator for an agent
//! and finished by it: `task_create` (pending, `task_created` logged), `task_apply` of
//! start and of a completed finish (each a `task_status_change`), and the lead told of
//! it (a lead's `tasks_finished` claim sets `notifiedAt`). Many tasks are in flight at
//! once (the SQLite store groups concurrent writes into one commit, PostgreSQL spreads
//! them over its pool), each agent's tasks one after the other, as its one slot allows.
//! The filler agents and the one lead that was told end offline, as most agents of a
//! long-lived hub are, so that no background pass of the hub moves them while it is
//! measured.

use std::{path::PathBuf, sync::Arc, time::Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use sqlx::Connection;
use swarm_domain::{
    agent::NewAgent,
    id::{AgentId, TaskId},
    poll::TriggerKind,
    task::{FinishOutcome, NewTask, PRIORITY_DEFAULT, TaskAction, TaskOrigin, TaskStatus},
    time::Timestamp,
};
use swarm_store::{Applied, Store};
use tokio::task::JoinSet;

use super::hub::{Database, Http, Target};

/// Tasks written before each progress line and the lead's catching up.
const BATCH: u64 = 50_000;
/// Tasks in flight at once (each agent's one after the other).
const IN_FLIGHT: u64 = 64;
/// PostgreSQL connections of the fill (a shared server has to fit them).
const IN_FLIGHT_PG: u32 = 32;
/// The filled history ends this long before the fill (milliseconds): older than any
/// retention window the bench's hub could run with (it runs none by default).
const HISTORY_MS: i64 = 3_600_000;
/// Task `i` was created `HISTORY_MS + (tasks - i) * STEP_MS` before now, started half a
/// second later and finished a second later, by agent `i % agents`.
const STEP_MS: i64 = 100;

/// What the fill wrote, and how big the database is.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Fill {
    pub agents: u64,
    pub tasks: u64,
    /// The tasks' events: created, started, finished.
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
    match database {
        Database::SqliteFile(path) => {
            let store = swarm_store_sqlite::SqliteStore::open(path)
                .await
                .with_context(|| format!("cannot open {}", path.display()))?;
            let store = Arc::new(store);
            let written = write(store.clone(), shape, started).await;
            // The event log's index by agent, as the hub's writer would have kept it.
            let indexed = store.index_agent_events().await;
            store.close().await;
            drop(store);
            written?;
            indexed?;
            // The WAL the fill's thousands of commits grew, copied into the file and
            // emptied: the size reported is the history's, as a hub that restarts finds it.
            let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
            let mut connection = sqlx::SqliteConnection::connect_with(&options).await?;
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&mut connection).await?;
            connection.close().await.ok();
        }
        Database::Postgres { url } => {
            // A commit need not wait for its flush: a fill cut short is a scratch run
            // failed anyway, and the VACUUM below ends with everything on disk.
            let mut fill_url = reqwest::Url::parse(url).context("the scratch database's URL")?;
            fill_url.query_pairs_mut().append_pair("options", "-c synchronous_commit=off");
            let store = swarm_store_postgres::PgStore::connect_with(fill_url.as_str(), IN_FLIGHT_PG)
                .await
                .context("cannot connect to fill the database")?;
            let store = Arc::new(store);
            let written = write(store.clone(), shape, started).await;
            store.close().await;
            written?;
            // What autovacuum would have done to a database that grew this way over
            // months: the planner sees the tables as they are.
            let mut connection = sqlx::PgConnection::connect(url).await?;
            sqlx::query("VACUUM ANALYZE agents, tasks, events").execute(&mut connection).await?;
            connection.close().await.ok();
        }
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

/// The agents, then the tasks batch by batch, the lead told of each batch's.
async fn write<S: Store>(store: Arc<S>, shape: Shape, started: Instant) -> anyhow::Result<()> {
    // Names of this run's agents carry a random tag, so two fills of one database never
    // collide.
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let now = Timestamp::unix_millis_now();
    let start = now - HISTORY_MS - i64::try_from(shape.tasks)? * STEP_MS;
    let at = |millis: i64| Timestamp::from_unix_millis(millis).context("a time out of range");

    let agents = Arc::new(register_agents(&store, tag, shape.agents, at(start)?).await?);
    let lead = AgentId::new_v7();
    let lead_agent = NewAgent::parse(lead, &format!("fill-{tag}-lead"), true, None, None, None, None)
        .map_err(|err| anyhow::anyhow!("the filler lead: {err}"))?;
    store.agent_register(&lead_agent, at(start)?).await.context("cannot register the filler lead")?;

    let mut done = 0;
    while done < shape.tasks {
        let count = BATCH.min(shape.tasks - done);
        let batch = done..done + count;
        // Lane `l` writes the tasks of the agents `a` with `a % lanes == l`, in order.
        let lanes = IN_FLIGHT.min(shape.agents).min(count);
        let mut writers = JoinSet::new();
        for lane in 0..lanes {
            let (store, agents, batch) = (store.clone(), agents.clone(), batch.clone());
            writers.spawn(async move {
                for i in batch.filter(|i| (i % shape.agents) % lanes == lane) {
                    let agent = agents[usize::try_from(i % shape.agents)?];
                    let created = start + i64::try_from(i)? * STEP_MS;
                    finished_task(&*store, i, agent, created).await?;
                }
                anyhow::Ok(())
            });
        }
        while let Some(written) = writers.join_next().await {
            written.context("a fill task stopped")??;
        }
        done += count;
        // The lead is told of the batch's tasks, 50 a claim, as its polls would have.
        let told = at(start + i64::try_from(done)? * STEP_MS + 1_100)?;
        while store.poll_claim(lead, &[TriggerKind::TasksFinished], told, told).await?.is_some() {}
        eprintln!("bench: filled {done} of {} tasks ({:.0} s)", shape.tasks, started.elapsed().as_secs_f64());
    }
    store.agent_close(lead, at(start + i64::try_from(shape.tasks)? * STEP_MS + 2_000)?).await?;
    Ok(())
}

async fn register_agents<S: Store>(
    store: &Arc<S>,
    tag: &str,
    count: u64,
    at: Timestamp,
) -> anyhow::Result<Vec<AgentId>> {
    let ids: Arc<Vec<AgentId>> = Arc::new((0..count).map(|_| AgentId::new_v7()).collect());
    let lanes = IN_FLIGHT.min(count);
    let mut writers = JoinSet::new();
    for lane in 0..lanes {
        let (store, ids, tag) = (store.clone(), ids.clone(), tag.to_string());
        writers.spawn(async move {
            for i in (lane..count).step_by(usize::try_from(lanes)?) {
                let id = ids[usize::try_from(i)?];
                let agent =
                    NewAgent::parse(id, &format!("fill-{tag}-agent-{i}"), false, None, None, None, Some(1))
                        .map_err(|err| anyhow::anyhow!("a filler agent: {err}"))?;
                store.agent_register(&agent, at).await.context("cannot register the filler agents")?;
                store.agent_close(id, at).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(written) = writers.join_next().await {
        written.context("a fill task stopped")??;
    }
    Ok(Arc::into_inner(ids).unwrap_or_default())
}

/// Task `i`, created for `agent` at `created`, started by it half a second later and
/// completed half a second after that.
async fn finished_task<S: Store + ?Sized>(
    store: &S,
    i: u64,
    agent: AgentId,
    created: i64,
) -> anyhow::Result<()> {
    let at = |millis: i64| Timestamp::from_unix_millis(millis).context("a time out of range");
    // Ids are UUID v7 of their creation time, as the hub's are.
    let id = TaskId::from_uuid(uuid::Uuid::new_v7(uuid::Timestamp::from_unix(
        uuid::NoContext,
        u64::try_from(created / 1_000)?,
        u32::try_from((created % 1_000) * 1_000_000)?,
    )));
    let task = NewTask {
        id,
        task: format!("filled task {i}: build the thing and report back"),
        status: TaskStatus::Pending,
        agent_id: Some(agent),
        creator_agent_id: None,
        offered_to: None,
        source: "api".to_string(),
        task_type: None,
        tags: Vec::new(),
        priority: PRIORITY_DEFAULT,
        depends_on: Vec::new(),
        epic_id: None,
        origin: TaskOrigin::default(),
    };
    store.task_create(&task, at(created)?).await.context("cannot write a task")?;
    let start = TaskAction::Start { agent }.change();
    let finish = TaskAction::Finish {
        assignee: Some(agent),
        outcome: FinishOutcome::Completed { output: Some("done".to_string()) },
    }
    .change();
    for (change, millis) in [(start, created + 500), (finish, created + 1_000)] {
        match store.task_apply(id, &change, Some(agent), at(millis)?).await? {
            Applied::Changed { .. } => {}
            Applied::Refused { current } => {
                bail!("filled task {i} is {}, so it cannot become {}", current.status, change.to)
            }
            Applied::NotFound => bail!("filled task {i} is gone"),
        }
    }
    Ok(())
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
