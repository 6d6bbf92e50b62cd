//! Epics, their task counts, tasks joining and leaving them, and the lead's
//! `epic_progress_changed` claim. The counts come with every read of an epic, from
//! correlated subqueries on `tasks_epic`: one statement, so they always agree.

use async_trait::async_trait;
use rusqlite::{Connection, Row, params};
use swarm_domain::{
    epic::{EPIC_PROGRESS_TRIGGER_MAX, Epic, EpicProgress, EpicStatus, EpicWithProgress, TaskStats},
    event::{EventType, NewEvent},
    id::{AgentId, ChannelId, EpicId, TaskId},
    poll::Trigger,
    task::Task,
    time::Timestamp,
};
use swarm_store::{Applied, EpicFilter, EpicStore, StoreError, StoreResult};

use crate::{
    SqliteStore,
    error::{corrupt, db, is_foreign_key_violation},
    events,
    rows::Columns,
    sql::{self, Sql},
    tasks::{self, task_columns},
};

macro_rules! epic_select {
    () => {
        "SELECT e.id, e.name, e.goal, e.description, e.prd, e.plan, e.status, e.priority, e.tags,
                e.created_by_agent_id, e.lead_agent_id, e.channel_id, e.slack_channel_id, e.slack_thread_ts,
                e.github_repo, e.github_milestone, e.created_at, e.last_updated_at, e.started_at,
                e.completed_at,
                (SELECT count(*) FROM tasks t WHERE t.epic_id = e.id) AS total,
                (SELECT count(*) FROM tasks t WHERE t.epic_id = e.id AND t.status = 'completed') AS completed,
                (SELECT count(*) FROM tasks t WHERE t.epic_id = e.id AND t.status = 'failed') AS failed,
                (SELECT count(*) FROM tasks t WHERE t.epic_id = e.id AND t.status = 'in_progress') AS in_progress,
                (SELECT count(*) FROM tasks t WHERE t.epic_id = e.id AND t.status = 'pending') AS pending
         FROM epics e"
    };
}

fn from_row(row: &Row<'_>) -> StoreResult<EpicWithProgress> {
    let mut column = Columns::new(row);
    let id: String = column.take("id")?;
    let id = EpicId::parse(&id).map_err(|error| corrupt(error.0))?;
    let bad = |what: &str, error: String| corrupt(format!("epic {id}: {what}: {error}"));
    let name = column.take("name")?;
    let goal = column.take("goal")?;
    let description = column.take("description")?;
    let prd = column.take("prd")?;
    let plan = column.take("plan")?;
    let status: String = column.take("status")?;
    let status = EpicStatus::parse(&status).map_err(|error| bad("status", error.0))?;
    let priority: i64 = column.take("priority")?;
    let tags = column.strings("tags")?;
    let created_by_agent_id = column.opt_agent_id("created_by_agent_id")?;
    let lead_agent_id = column.opt_agent_id("lead_agent_id")?;
    let channel_id = column
        .take::<Option<String>>("channel_id")?
        .map(|text| ChannelId::parse(&text).map_err(|error| bad("channel_id", error.0)))
        .transpose()?;
    let epic = Epic {
        id,
        name,
        goal,
        description,
        prd,
        plan,
        status,
        priority: i32::try_from(priority).map_err(|error| bad("priority", error.to_string()))?,
        tags,
        created_by_agent_id,
        lead_agent_id,
        channel_id,
        slack_channel_id: column.take("slack_channel_id")?,
        slack_thread_ts: column.take("slack_thread_ts")?,
        github_repo: column.take("github_repo")?,
        github_milestone: column.take("github_milestone")?,
        created_at: column.timestamp("created_at")?,
        last_updated_at: column.timestamp("last_updated_at")?,
        started_at: column.opt_timestamp("started_at")?,
        completed_at: column.opt_timestamp("completed_at")?,
    };
    let stats = TaskStats {
        total: column.take("total")?,
        completed: column.take("completed")?,
        failed: column.take("failed")?,
        in_progress: column.take("in_progress")?,
        pending: column.take("pending")?,
    };
    Ok(EpicWithProgress::new(epic, stats))
}

fn get(connection: &Connection, id: EpicId) -> StoreResult<Option<EpicWithProgress>> {
    sql::optional(connection, concat!(epic_select!(), " WHERE e.id = ?"), [id.to_string()], from_row)
}

fn epic_tasks(connection: &Connection, id: EpicId) -> StoreResult<Vec<Task>> {
    sql::all(
        connection,
        concat!(
            "SELECT ",
            task_columns!("t"),
            " FROM tasks t WHERE t.epic_id = ? ORDER BY t.priority DESC, t.created_at, t.id"
        ),
        [id.to_string()],
        tasks::from_row,
    )
}

fn json(tags: &[String]) -> StoreResult<String> {
    serde_json::to_string(tags).map_err(|error| corrupt(error.to_string()))
}

fn create(tx: &Connection, epic: &Epic) -> StoreResult<Epic> {
    let inserted = tx
        .prepare_cached(
            "INSERT INTO epics (id, name, goal, description, prd, plan, status, priority, tags,
                                created_by_agent_id, lead_agent_id, channel_id, slack_channel_id,
                                slack_thread_ts, github_repo, github_milestone, created_at, last_updated_at,
                                started_at, completed_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)
             ON CONFLICT (name) DO NOTHING",
        )
        .map_err(db)?
        .execute(params![
            epic.id.to_string(),
            epic.name,
            epic.goal,
            epic.description,
            epic.prd,
            epic.plan,
            epic.status.as_str(),
            epic.priority,
            json(&epic.tags)?,
            epic.created_by_agent_id.map(|id| id.to_string()),
            epic.lead_agent_id.map(|id| id.to_string()),
            epic.channel_id.map(|id| id.to_string()),
            epic.slack_channel_id,
            epic.slack_thread_ts,
            epic.github_repo,
            epic.github_milestone,
            epic.created_at.unix_millis(),
            epic.last_updated_at.unix_millis(),
            epic.started_at.map(|at| at.unix_millis()),
            epic.completed_at.map(|at| at.unix_millis()),
        ]);
    match inserted {
        Ok(0) => Err(StoreError::Conflict(format!("an epic named {:?} exists", epic.name))),
        Ok(_) => Ok(epic.clone()),
        Err(error) if is_foreign_key_violation(&error) => Err(missing_agent(epic)),
        Err(error) => Err(db(error)),
    }
}

fn missing_agent(epic: &Epic) -> StoreError {
    let named = epic.lead_agent_id.map(|id| format!("leadAgentId: agent {id} does not exist"));
    StoreError::MissingReference(named.unwrap_or_else(|| "the creating agent does not exist".into()))
}

fn update(tx: &Connection, epic: &Epic, read_at: Timestamp) -> StoreResult<Applied<Epic>> {
    let Some(before) = get(tx, epic.id)? else {
        return Ok(Applied::NotFound);
    };
    let changed = tx
        .prepare_cached(
            "UPDATE epics SET name = ?2, goal = ?3, description = ?4, prd = ?5, plan = ?6, status = ?7,
                              priority = ?8, tags = ?9, lead_agent_id = ?10, slack_channel_id = ?11,
                              slack_thread_ts = ?12, github_repo = ?13, github_milestone = ?14,
                              last_updated_at = ?15, started_at = ?16, completed_at = ?17
             WHERE id = ?1 AND last_updated_at = ?18",
        )
        .map_err(db)?
        .execute(params![
            epic.id.to_string(),
            epic.name,
            epic.goal,
            epic.description,
            epic.prd,
            epic.plan,
            epic.status.as_str(),
            epic.priority,
            json(&epic.tags)?,
            epic.lead_agent_id.map(|id| id.to_string()),
            epic.slack_channel_id,
            epic.slack_thread_ts,
            epic.github_repo,
            epic.github_milestone,
            epic.last_updated_at.unix_millis(),
            epic.started_at.map(|at| at.unix_millis()),
            epic.completed_at.map(|at| at.unix_millis()),
            read_at.unix_millis(),
        ]);
    match changed {
        Ok(0) => Ok(Applied::Refused { current: before.epic }),
        Ok(_) => {
            let after = get(tx, epic.id)?.ok_or_else(|| corrupt(format!("epic {} vanished", epic.id)))?;
            Ok(Applied::Changed { before: before.epic, after: after.epic })
        }
        Err(error) if error.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) => {
            if is_foreign_key_violation(&error) {
                Err(missing_agent(epic))
            } else {
                Err(StoreError::Conflict(format!("an epic named {:?} exists", epic.name)))
            }
        }
        Err(error) => Err(db(error)),
    }
}

fn delete(tx: &Connection, id: EpicId, now: Timestamp) -> StoreResult<bool> {
    // Its tasks first: they stay, without an epic, each with its history.
    let members = sql::all(tx, "SELECT id FROM tasks WHERE epic_id = ?", [id.to_string()], |row| {
        crate::rows::get_task_id(row, "id")
    })?;
    for task in members {
        set_epic(tx, task, None, None, now)?;
    }
    Ok(sql::execute(tx, "DELETE FROM epics WHERE id = ?", [id.to_string()])? == 1)
}

fn set_epic(
    tx: &Connection,
    task: TaskId,
    epic: Option<EpicId>,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Applied<Task>> {
    let Some(before) = tasks::get(tx, task)? else {
        return Ok(Applied::NotFound);
    };
    let changed = tx
        .prepare_cached(
            "UPDATE tasks SET epic_id = ?2, last_updated_at = ?3 WHERE id = ?1 AND epic_id IS NOT ?2",
        )
        .map_err(db)?
        .execute(params![task.to_string(), epic.map(|id| id.to_string()), now.unix_millis()]);
    match changed {
        Ok(0) => return Ok(Applied::Refused { current: before }),
        Ok(_) => {}
        Err(error) if is_foreign_key_violation(&error) => {
            let epic = epic.map(|id| id.to_string()).unwrap_or_default();
            return Err(StoreError::MissingReference(format!("epic {epic} does not exist")));
        }
        Err(error) => return Err(db(error)),
    }
    let old = before.epic_id.map(|id| id.to_string());
    let new = epic.map(|id| id.to_string());
    let event =
        NewEvent::change(EventType::TaskEpicChanged, actor, Some(task), old.as_deref(), new.as_deref());
    events::insert(tx, &event, now)?;
    let after = tasks::get_known(tx, task)?;
    Ok(Applied::Changed { before, after })
}

/// The lead's claim: active epics whose change count passed the notified one, each
/// moved up to the count it was read at under its own guard, with the tasks that
/// finished since the last notice.
pub(crate) fn claim_progress(tx: &Connection, now: Timestamp) -> StoreResult<Option<Trigger>> {
    let candidates: Vec<(EpicId, i64, Option<i64>)> = sql::all(
        tx,
        "SELECT id, progress_changes, progress_notified_at FROM epics
         WHERE progress_changes > progress_notified AND status = 'active'
         ORDER BY priority DESC, last_updated_at DESC, id LIMIT ?",
        [EPIC_PROGRESS_TRIGGER_MAX],
        |row| {
            let mut column = Columns::new(row);
            let id: String = column.take("id")?;
            Ok((
                EpicId::parse(&id).map_err(|error| corrupt(error.0))?,
                column.take("progress_changes")?,
                column.take("progress_notified_at")?,
            ))
        },
    )?;
    let mut epics = Vec::with_capacity(candidates.len());
    for (id, changes, notified_at) in candidates {
        let marked = sql::execute(
            tx,
            "UPDATE epics SET progress_notified = ?2, progress_notified_at = ?3
             WHERE id = ?1 AND progress_notified < ?2",
            params![id.to_string(), changes, now.unix_millis()],
        )?;
        if marked == 0 {
            continue;
        }
        let Some(epic) = get(tx, id)? else { continue };
        let finished_tasks = sql::all(
            tx,
            concat!(
                "SELECT ",
                task_columns!("t"),
                " FROM tasks t WHERE t.epic_id = ?1 AND t.status IN ('completed', 'failed')
                   AND t.finished_at >= coalesce(?2, 0)
                 ORDER BY t.finished_at DESC, t.id DESC"
            ),
            params![id.to_string(), notified_at],
            tasks::from_row,
        )?;
        epics.push(EpicProgress { epic, finished_tasks });
    }
    if epics.is_empty() {
        return Ok(None);
    }
    Ok(Some(Trigger::EpicProgressChanged { count: epics.len(), epics }))
}

fn list(connection: &Connection, filter: &EpicFilter) -> StoreResult<Vec<EpicWithProgress>> {
    let mut query = Sql::new(concat!(epic_select!(), " WHERE 1 = 1"));
    if let Some(status) = filter.status {
        query.push(" AND e.status = ").bind(status.as_str().to_string());
    }
    if let Some(lead) = filter.lead_agent_id {
        query.push(" AND e.lead_agent_id = ").bind(lead.to_string());
    }
    if let Some(creator) = filter.created_by_agent_id {
        query.push(" AND e.created_by_agent_id = ").bind(creator.to_string());
    }
    if let Some(name) = &filter.name {
        query.push(" AND e.name = ").bind(name.clone());
    }
    if let Some(search) = &filter.search {
        // instr, not LIKE: the user's % and _ are plain characters.
        let text = search.to_lowercase();
        query
            .push(" AND (instr(lower(e.name), ")
            .bind(text.clone())
            .push(") > 0 OR instr(lower(coalesce(e.description, '')), ")
            .bind(text.clone())
            .push(") > 0 OR instr(lower(e.goal), ")
            .bind(text)
            .push(") > 0)");
    }
    query.push(" ORDER BY e.priority DESC, e.created_at DESC, e.id DESC");
    if filter.limit > 0 {
        query.push(" LIMIT ").bind(filter.limit);
    }
    query.all(connection, from_row)
}

#[async_trait]
impl EpicStore for SqliteStore {
    async fn epic_create(&self, epic: &Epic) -> StoreResult<Epic> {
        let epic = epic.clone();
        self.database.write(move |tx| create(tx, &epic)).await
    }

    async fn epic_get(&self, id: EpicId) -> StoreResult<Option<EpicWithProgress>> {
        self.database.read(|connection| get(connection, id))
    }

    async fn epic_detail(&self, id: EpicId) -> StoreResult<Option<(EpicWithProgress, Vec<Task>)>> {
        self.database
            .read_snapshot(move |snapshot| {
                let Some(epic) = get(snapshot, id)? else { return Ok(None) };
                Ok(Some((epic, epic_tasks(snapshot, id)?)))
            })
            .await
    }

    async fn epic_list(&self, filter: &EpicFilter) -> StoreResult<Vec<EpicWithProgress>> {
        let filter = filter.clone();
        self.database.read_snapshot(move |snapshot| list(snapshot, &filter)).await
    }

    async fn epic_update(&self, epic: &Epic, read_at: Timestamp) -> StoreResult<Applied<Epic>> {
        let epic = epic.clone();
        self.database.write(move |tx| update(tx, &epic, read_at)).await
    }

    async fn epic_delete(&self, id: EpicId, now: Timestamp) -> StoreResult<bool> {
        self.database.write(move |tx| delete(tx, id, now)).await
    }

    async fn task_set_epic(
        &self,
        task: TaskId,
        epic: Option<EpicId>,
        actor: Option<AgentId>,
        now: Timestamp,
    ) -> StoreResult<Applied<Task>> {
        self.database.write(move |tx| set_epic(tx, task, epic, actor, now)).await
    }
}
