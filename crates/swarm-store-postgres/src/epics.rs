//! Epics, their task counts, tasks joining and leaving them, and the lead's
//! `epic_progress_changed` claim. The counts come with every read of an epic, from
//! correlated subqueries on `tasks_epic`: one statement, so they always agree.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor, Postgres, QueryBuilder, Row, postgres::PgRow};
use swarm_domain::{
    epic::{EPIC_PROGRESS_TRIGGER_MAX, Epic, EpicProgress, EpicStatus, EpicWithProgress, TaskStats},
    event::{EventType, NewEvent},
    id::{AgentId, ChannelId, EpicId, TaskId},
    poll::Trigger,
    task::Task,
    time::Timestamp,
};
use swarm_store::{Applied, EpicFilter, EpicStore, StoreError, StoreResult};
use uuid::Uuid;

use crate::{
    PgStore,
    error::{corrupt, db, vanished, violated_constraint},
    events,
    rows::{task_from_row, task_select},
    tasks,
};

macro_rules! epic_select {
    () => {
        "SELECT e.id, e.name, e.goal, e.description, e.prd, e.plan, e.status, e.priority, e.tags, \
                e.created_by_agent_id, e.lead_agent_id, e.channel_id, e.slack_channel_id, e.slack_thread_ts, \
                e.github_repo, e.github_milestone, e.created_at, e.last_updated_at, e.started_at, \
                e.completed_at, \
                (SELECT count(*) FROM tasks t WHERE t.epic_id = e.id) AS total, \
                (SELECT count(*) FROM tasks t WHERE t.epic_id = e.id AND t.status = 'completed') AS completed, \
                (SELECT count(*) FROM tasks t WHERE t.epic_id = e.id AND t.status = 'failed') AS failed, \
                (SELECT count(*) FROM tasks t WHERE t.epic_id = e.id AND t.status = 'in_progress') AS in_progress, \
                (SELECT count(*) FROM tasks t WHERE t.epic_id = e.id AND t.status = 'pending') AS pending \
         FROM epics e"
    };
}

fn from_row(row: PgRow) -> sqlx::Result<EpicWithProgress> {
    let status: String = row.try_get("status")?;
    let at = |column: &str| -> sqlx::Result<Timestamp> {
        Ok(Timestamp::from_datetime(row.try_get::<DateTime<Utc>, _>(column)?))
    };
    let optional_at = |column: &str| -> sqlx::Result<Option<Timestamp>> {
        Ok(row.try_get::<Option<DateTime<Utc>>, _>(column)?.map(Timestamp::from_datetime))
    };
    let agent = |column: &str| -> sqlx::Result<Option<AgentId>> {
        Ok(row.try_get::<Option<Uuid>, _>(column)?.map(AgentId::from_uuid))
    };
    let epic = Epic {
        id: EpicId::from_uuid(row.try_get("id")?),
        name: row.try_get("name")?,
        goal: row.try_get("goal")?,
        description: row.try_get("description")?,
        prd: row.try_get("prd")?,
        plan: row.try_get("plan")?,
        status: EpicStatus::parse(&status).map_err(|error| corrupt("status", error))?,
        priority: row.try_get("priority")?,
        tags: row.try_get("tags")?,
        created_by_agent_id: agent("created_by_agent_id")?,
        lead_agent_id: agent("lead_agent_id")?,
        channel_id: row.try_get::<Option<Uuid>, _>("channel_id")?.map(ChannelId::from_uuid),
        slack_channel_id: row.try_get("slack_channel_id")?,
        slack_thread_ts: row.try_get("slack_thread_ts")?,
        github_repo: row.try_get("github_repo")?,
        github_milestone: row.try_get("github_milestone")?,
        created_at: at("created_at")?,
        last_updated_at: at("last_updated_at")?,
        started_at: optional_at("started_at")?,
        completed_at: optional_at("completed_at")?,
    };
    let stats = TaskStats {
        total: row.try_get("total")?,
        completed: row.try_get("completed")?,
        failed: row.try_get("failed")?,
        in_progress: row.try_get("in_progress")?,
        pending: row.try_get("pending")?,
    };
    Ok(EpicWithProgress::new(epic, stats))
}

async fn get<'e>(executor: impl PgExecutor<'e>, id: EpicId) -> StoreResult<Option<EpicWithProgress>> {
    sqlx::query(concat!(epic_select!(), " WHERE e.id = $1"))
        .bind(id.as_uuid())
        .try_map(from_row)
        .fetch_optional(executor)
        .await
        .map_err(db)
}

/// A constraint the caller's input broke, named; anything else stays a backend error.
fn write_error(epic: &Epic, error: sqlx::Error) -> StoreError {
    match violated_constraint(&error).as_deref() {
        Some("epics_lead_agent_id_fkey") => StoreError::MissingReference(format!(
            "leadAgentId: agent {} does not exist",
            epic.lead_agent_id.map(|id| id.to_string()).unwrap_or_default()
        )),
        Some("epics_name_key") => StoreError::Conflict(format!("an epic named {:?} exists", epic.name)),
        Some("epics_created_by_agent_id_fkey") => {
            StoreError::MissingReference("the creating agent does not exist".into())
        }
        _ => db(error),
    }
}

async fn create(conn: &mut PgConnection, epic: &Epic) -> StoreResult<Epic> {
    let inserted = sqlx::query(
        "INSERT INTO epics (id, name, goal, description, prd, plan, status, priority, tags, \
                            created_by_agent_id, lead_agent_id, channel_id, slack_channel_id, \
                            slack_thread_ts, github_repo, github_milestone, created_at, last_updated_at, \
                            started_at, completed_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20) \
         ON CONFLICT (name) DO NOTHING",
    )
    .bind(epic.id.as_uuid())
    .bind(&epic.name)
    .bind(&epic.goal)
    .bind(epic.description.as_deref())
    .bind(epic.prd.as_deref())
    .bind(epic.plan.as_deref())
    .bind(epic.status.as_str())
    .bind(epic.priority)
    .bind(&epic.tags)
    .bind(epic.created_by_agent_id.map(|id| id.as_uuid()))
    .bind(epic.lead_agent_id.map(|id| id.as_uuid()))
    .bind(epic.channel_id.map(|id| id.as_uuid()))
    .bind(epic.slack_channel_id.as_deref())
    .bind(epic.slack_thread_ts.as_deref())
    .bind(epic.github_repo.as_deref())
    .bind(epic.github_milestone.as_deref())
    .bind(epic.created_at.datetime())
    .bind(epic.last_updated_at.datetime())
    .bind(epic.started_at.map(|at| at.datetime()))
    .bind(epic.completed_at.map(|at| at.datetime()))
    .execute(&mut *conn)
    .await;
    match inserted {
        Ok(done) if done.rows_affected() == 0 => {
            Err(StoreError::Conflict(format!("an epic named {:?} exists", epic.name)))
        }
        Ok(_) => Ok(get(&mut *conn, epic.id).await?.ok_or_else(|| vanished("epic", epic.id))?.epic),
        Err(error) => Err(write_error(epic, error)),
    }
}

async fn update(conn: &mut PgConnection, epic: &Epic, read_at: Timestamp) -> StoreResult<Applied<Epic>> {
    let Some(before) = get(&mut *conn, epic.id).await? else {
        return Ok(Applied::NotFound);
    };
    let changed = sqlx::query(
        "UPDATE epics SET name = $2, goal = $3, description = $4, prd = $5, plan = $6, status = $7, \
                          priority = $8, tags = $9, lead_agent_id = $10, slack_channel_id = $11, \
                          slack_thread_ts = $12, github_repo = $13, github_milestone = $14, \
                          last_updated_at = $15, started_at = $16, completed_at = $17 \
         WHERE id = $1 AND last_updated_at = $18",
    )
    .bind(epic.id.as_uuid())
    .bind(&epic.name)
    .bind(&epic.goal)
    .bind(epic.description.as_deref())
    .bind(epic.prd.as_deref())
    .bind(epic.plan.as_deref())
    .bind(epic.status.as_str())
    .bind(epic.priority)
    .bind(&epic.tags)
    .bind(epic.lead_agent_id.map(|id| id.as_uuid()))
    .bind(epic.slack_channel_id.as_deref())
    .bind(epic.slack_thread_ts.as_deref())
    .bind(epic.github_repo.as_deref())
    .bind(epic.github_milestone.as_deref())
    .bind(epic.last_updated_at.datetime())
    .bind(epic.started_at.map(|at| at.datetime()))
    .bind(epic.completed_at.map(|at| at.datetime()))
    .bind(read_at.datetime())
    .execute(&mut *conn)
    .await;
    match changed {
        Ok(done) if done.rows_affected() == 0 => Ok(Applied::Refused { current: before.epic }),
        Ok(_) => {
            let after = get(&mut *conn, epic.id).await?.ok_or_else(|| vanished("epic", epic.id))?;
            Ok(Applied::Changed { before: before.epic, after: after.epic })
        }
        Err(error) => Err(write_error(epic, error)),
    }
}

async fn set_epic(
    conn: &mut PgConnection,
    task: TaskId,
    epic: Option<EpicId>,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Applied<Task>> {
    let Some(before) = tasks::get(&mut *conn, task).await? else {
        return Ok(Applied::NotFound);
    };
    let changed = sqlx::query(
        "UPDATE tasks SET epic_id = $2, last_updated_at = $3 WHERE id = $1 AND epic_id IS DISTINCT FROM $2",
    )
    .bind(task.as_uuid())
    .bind(epic.map(|id| id.as_uuid()))
    .bind(now.datetime())
    .execute(&mut *conn)
    .await;
    match changed {
        Ok(done) if done.rows_affected() == 0 => return Ok(Applied::Refused { current: before }),
        Ok(_) => {}
        Err(error) if violated_constraint(&error).as_deref() == Some("tasks_epic_id_fkey") => {
            let epic = epic.map(|id| id.to_string()).unwrap_or_default();
            return Err(StoreError::MissingReference(format!("epic {epic} does not exist")));
        }
        Err(error) => return Err(db(error)),
    }
    let old = before.epic_id.map(|id| id.to_string());
    let new = epic.map(|id| id.to_string());
    let event =
        NewEvent::change(EventType::TaskEpicChanged, actor, Some(task), old.as_deref(), new.as_deref());
    events::insert(&mut *conn, &event, now).await?;
    let after = tasks::get_known(&mut *conn, task).await?;
    Ok(Applied::Changed { before, after })
}

/// The lead's claim: active epics whose change count passed the notified one, each
/// moved up to the count it was read at under its own guard, with the tasks that
/// finished since the last notice.
pub(crate) async fn claim_progress(tx: &mut PgConnection, now: Timestamp) -> StoreResult<Option<Trigger>> {
    let candidates: Vec<(Uuid, i64, Option<DateTime<Utc>>)> = sqlx::query_as(
        "SELECT id, progress_changes, progress_notified_at FROM epics \
         WHERE progress_changes > progress_notified AND status = 'active' \
         ORDER BY priority DESC, last_updated_at DESC, id LIMIT $1 FOR UPDATE SKIP LOCKED",
    )
    .bind(EPIC_PROGRESS_TRIGGER_MAX)
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    let mut epics = Vec::with_capacity(candidates.len());
    for (id, changes, notified_at) in candidates {
        let marked = sqlx::query(
            "UPDATE epics SET progress_notified = $2, progress_notified_at = $3 \
             WHERE id = $1 AND progress_notified < $2",
        )
        .bind(id)
        .bind(changes)
        .bind(now.datetime())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        if marked.rows_affected() == 0 {
            continue;
        }
        let id = EpicId::from_uuid(id);
        let Some(epic) = get(&mut *tx, id).await? else { continue };
        let finished_tasks = sqlx::query(concat!(
            task_select!(),
            " WHERE t.epic_id = $1 AND t.status IN ('completed', 'failed') \
              AND ($2::timestamptz IS NULL OR t.finished_at >= $2) \
             ORDER BY t.finished_at DESC, t.id DESC"
        ))
        .bind(id.as_uuid())
        .bind(notified_at)
        .try_map(task_from_row)
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
        epics.push(EpicProgress { epic, finished_tasks });
    }
    if epics.is_empty() {
        return Ok(None);
    }
    Ok(Some(Trigger::EpicProgressChanged { count: epics.len(), epics }))
}

fn push_filter(query: &mut QueryBuilder<Postgres>, filter: &EpicFilter) {
    query.push(" WHERE TRUE");
    if let Some(status) = filter.status {
        query.push(" AND e.status = ").push_bind(status.as_str());
    }
    if let Some(lead) = filter.lead_agent_id {
        query.push(" AND e.lead_agent_id = ").push_bind(lead.as_uuid());
    }
    if let Some(creator) = filter.created_by_agent_id {
        query.push(" AND e.created_by_agent_id = ").push_bind(creator.as_uuid());
    }
    if let Some(name) = &filter.name {
        query.push(" AND e.name = ").push_bind(name.clone());
    }
    if let Some(search) = &filter.search {
        // strpos, not LIKE: the user's % and _ are plain characters.
        let text = search.to_lowercase();
        query
            .push(" AND (strpos(lower(e.name), ")
            .push_bind(text.clone())
            .push(") > 0 OR strpos(lower(coalesce(e.description, '')), ")
            .push_bind(text.clone())
            .push(") > 0 OR strpos(lower(e.goal), ")
            .push_bind(text)
            .push(") > 0)");
    }
    query.push(" ORDER BY e.priority DESC, e.created_at DESC, e.id DESC");
    if filter.limit > 0 {
        query.push(" LIMIT ").push_bind(filter.limit);
    }
}

#[async_trait]
impl EpicStore for PgStore {
    async fn epic_create(&self, epic: &Epic) -> StoreResult<Epic> {
        let created = async {
            let mut conn = self.pool.acquire().await.map_err(db)?;
            create(&mut conn, epic).await
        };
        self.wrote(created.await)
    }

    async fn epic_get(&self, id: EpicId) -> StoreResult<Option<EpicWithProgress>> {
        get(&self.pool, id).await
    }

    async fn epic_detail(&self, id: EpicId) -> StoreResult<Option<(EpicWithProgress, Vec<Task>)>> {
        // One snapshot: the counts describe exactly the tasks listed.
        let mut tx =
            self.pool.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY").await.map_err(db)?;
        let Some(epic) = get(&mut *tx, id).await? else {
            tx.rollback().await.map_err(db)?;
            return Ok(None);
        };
        let tasks = sqlx::query(concat!(
            task_select!(),
            " WHERE t.epic_id = $1 ORDER BY t.priority DESC, t.created_at, t.id"
        ))
        .bind(id.as_uuid())
        .try_map(task_from_row)
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(Some((epic, tasks)))
    }

    async fn epic_list(&self, filter: &EpicFilter) -> StoreResult<Vec<EpicWithProgress>> {
        let mut query = QueryBuilder::<Postgres>::new(epic_select!());
        push_filter(&mut query, filter);
        query.build().try_map(from_row).fetch_all(&self.pool).await.map_err(db)
    }

    async fn epic_update(&self, epic: &Epic, read_at: Timestamp) -> StoreResult<Applied<Epic>> {
        let updated = async {
            let mut tx = self.pool.begin().await.map_err(db)?;
            let applied = update(&mut tx, epic, read_at).await?;
            tx.commit().await.map_err(db)?;
            Ok(applied)
        };
        self.wrote(updated.await)
    }

    async fn epic_delete(&self, id: EpicId, now: Timestamp) -> StoreResult<bool> {
        self.wrote(self.delete_epic(id, now).await)
    }

    async fn task_set_epic(
        &self,
        task: TaskId,
        epic: Option<EpicId>,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>> {
        let set = async {
            let mut tx = self.pool.begin().await.map_err(db)?;
            let applied = set_epic(&mut tx, task, epic, actor, now).await?;
            tx.commit().await.map_err(db)?;
            Ok(applied)
        };
        self.wrote(set.await)
    }
}

impl PgStore {
    async fn delete_epic(&self, id: EpicId, now: Timestamp) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        // Its tasks first (task rows before the epic's, the order a finishing task takes
        // them in): they stay, without an epic, each with its history.
        let members: Vec<Uuid> =
            sqlx::query_scalar("SELECT id FROM tasks WHERE epic_id = $1 ORDER BY id FOR UPDATE")
                .bind(id.as_uuid())
                .fetch_all(&mut *tx)
                .await
                .map_err(db)?;
        for task in members {
            set_epic(&mut tx, TaskId::from_uuid(task), None, None, now).await?;
        }
        let deleted = sqlx::query("DELETE FROM epics WHERE id = $1")
            .bind(id.as_uuid())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(deleted.rows_affected() == 1)
    }
}
