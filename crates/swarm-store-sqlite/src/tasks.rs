//! Tasks: creation and reads. Transitions live in `transitions.rs`.

use sqlx::{QueryBuilder, Sqlite, SqliteConnection, SqlitePool, sqlite::SqliteRow};
use swarm_domain::{
    id::TaskId,
    task::{NewTask, Task, TaskOrigin, TaskStatus},
    time::Timestamp,
};
use swarm_store::{StoreError, StoreResult, TaskFilter};

use crate::{
    SqliteStore,
    decode::{
        column, corrupt, db, get_opt_agent_id, get_opt_timestamp, get_strings, get_task_id, get_timestamp,
        is_foreign_key_violation, task_id,
    },
    events,
};

/// Tags and dependencies come with the row, in their written order, from correlated
/// subqueries on their primary keys: one statement however many rows are listed.
macro_rules! select_task {
    () => {
        "SELECT t.id, t.agent_id, t.creator_agent_id, t.task, t.status, t.source, t.task_type,
                t.priority, t.offered_to, t.offered_at, t.accepted_at, t.rejection_reason,
                t.created_at, t.last_updated_at, t.finished_at, t.failure_reason, t.output,
                t.progress, t.notified_at, t.lease_expires_at, t.lease_losses, t.slack_channel_id, t.slack_thread_ts, t.slack_user_id,
                t.mention_message_id, t.mention_channel_id, t.github_repo, t.github_event_type,
                t.github_number, t.github_comment_id, t.github_author, t.github_url,
                (SELECT json_group_array(g.tag ORDER BY g.position)
                 FROM task_tags g WHERE g.task_id = t.id) AS tags,
                (SELECT json_group_array(d.depends_on_task_id ORDER BY d.position)
                 FROM task_dependencies d WHERE d.task_id = t.id) AS depends_on
         FROM tasks t"
    };
}

pub(crate) async fn get(conn: &mut SqliteConnection, id: TaskId) -> StoreResult<Option<Task>> {
    let row = sqlx::query(concat!(select_task!(), " WHERE t.id = ?"))
        .bind(id.to_string())
        .fetch_optional(conn)
        .await
        .map_err(db)?;
    row.as_ref().map(from_row).transpose()
}

/// Read back a row this transaction just wrote.
pub(crate) async fn get_known(conn: &mut SqliteConnection, id: TaskId) -> StoreResult<Task> {
    get(conn, id).await?.ok_or_else(|| corrupt(format!("task {id} vanished inside its own transaction")))
}

pub(crate) async fn list(pool: &SqlitePool, filter: &TaskFilter) -> StoreResult<(Vec<Task>, i64)> {
    // One read transaction, so the page and the total come from the same snapshot.
    let mut tx = pool.begin().await.map_err(db)?;
    let mut count = QueryBuilder::<Sqlite>::new("SELECT count(*) FROM tasks t");
    push_filter(&mut count, filter);
    let total: i64 = count.build_query_scalar().fetch_one(&mut *tx).await.map_err(db)?;

    let mut page = QueryBuilder::<Sqlite>::new(select_task!());
    push_filter(&mut page, filter);
    page.push(" ORDER BY t.created_at DESC, t.id DESC LIMIT ")
        .push_bind(filter.limit.max(0))
        .push(" OFFSET ")
        .push_bind(filter.offset.max(0));
    let rows = page.build().fetch_all(&mut *tx).await.map_err(db)?;
    let tasks = rows.iter().map(from_row).collect::<StoreResult<Vec<Task>>>()?;
    tx.commit().await.map_err(db)?;
    Ok((tasks, total))
}

fn push_filter(query: &mut QueryBuilder<Sqlite>, filter: &TaskFilter) {
    query.push(" WHERE 1 = 1");
    if !filter.statuses.is_empty() {
        query.push(" AND t.status IN (");
        let mut statuses = query.separated(", ");
        for status in &filter.statuses {
            statuses.push_bind(status.as_str());
        }
        query.push(")");
    }
    if let Some(agent_id) = filter.agent_id {
        query.push(" AND t.agent_id = ").push_bind(agent_id.to_string());
    }
    if let Some(creator) = filter.creator_agent_id {
        query.push(" AND t.creator_agent_id = ").push_bind(creator.to_string());
    }
    if let Some(offered_to) = filter.offered_to {
        query.push(" AND t.offered_to = ").push_bind(offered_to.to_string());
    }
    if let Some(source) = &filter.source {
        query.push(" AND t.source = ").push_bind(source.clone());
    }
    if let Some(task_type) = &filter.task_type {
        query.push(" AND t.task_type = ").push_bind(task_type.clone());
    }
    for tag in &filter.tags {
        query
            .push(" AND t.id IN (SELECT g.task_id FROM task_tags g WHERE g.tag = ")
            .push_bind(tag.clone())
            .push(")");
    }
    if let Some(search) = &filter.search {
        // instr, not LIKE: the user's % and _ are plain characters.
        query.push(" AND instr(lower(t.task), lower(").push_bind(search.clone()).push(")) > 0");
    }
    if let Some(since) = filter.finished_since {
        query.push(" AND t.finished_at >= ").push_bind(since.unix_millis());
    }
    if filter.ready_only {
        query.push(
            " AND NOT EXISTS (SELECT 1 FROM task_dependencies d JOIN tasks dt ON dt.id = d.depends_on_task_id
               WHERE d.task_id = t.id AND dt.status <> 'completed')",
        );
    }
}

pub(crate) async fn unfinished_dependencies(pool: &SqlitePool, id: TaskId) -> StoreResult<Vec<TaskId>> {
    let ids: Vec<String> = sqlx::query_scalar(
        "SELECT d.depends_on_task_id FROM task_dependencies d
         JOIN tasks dt ON dt.id = d.depends_on_task_id
         WHERE d.task_id = ? AND dt.status <> 'completed'
         ORDER BY d.position",
    )
    .bind(id.to_string())
    .fetch_all(pool)
    .await
    .map_err(db)?;
    ids.iter().map(|id| task_id(id)).collect()
}

pub(crate) async fn create(store: &SqliteStore, task: &NewTask, now: Timestamp) -> StoreResult<Task> {
    let mut tx = store.begin_write().await?;
    match insert(&mut tx, task, now).await {
        Ok(()) => {}
        Err(error) if is_foreign_key_violation(&error) => {
            return Err(missing_reference(&mut tx, task).await?);
        }
        Err(error) => return Err(db(error)),
    }

    for event in task.creation_events() {
        events::insert(&mut tx, &event, now).await?;
    }
    let created = get_known(&mut tx, task.id).await?;
    tx.commit().await.map_err(db)?;
    Ok(created)
}

async fn insert(conn: &mut SqliteConnection, task: &NewTask, now: Timestamp) -> Result<(), sqlx::Error> {
    let offered_at = (task.status == TaskStatus::Offered).then_some(now.unix_millis());
    let origin = &task.origin;
    sqlx::query(
        "INSERT INTO tasks (id, agent_id, creator_agent_id, task, status, source, task_type,
                            priority, offered_to, offered_at, created_at, last_updated_at,
                            slack_channel_id, slack_thread_ts, slack_user_id, mention_message_id,
                            mention_channel_id, github_repo, github_event_type, github_number,
                            github_comment_id, github_author, github_url)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(task.id.to_string())
    .bind(task.agent_id.map(|id| id.to_string()))
    .bind(task.creator_agent_id.map(|id| id.to_string()))
    .bind(&task.task)
    .bind(task.status.as_str())
    .bind(&task.source)
    .bind(task.task_type.as_deref())
    .bind(task.priority)
    .bind(task.offered_to.map(|id| id.to_string()))
    .bind(offered_at)
    .bind(now.unix_millis())
    .bind(now.unix_millis())
    .bind(origin.slack_channel_id.as_deref())
    .bind(origin.slack_thread_ts.as_deref())
    .bind(origin.slack_user_id.as_deref())
    .bind(origin.mention_message_id.as_deref())
    .bind(origin.mention_channel_id.as_deref())
    .bind(origin.github_repo.as_deref())
    .bind(origin.github_event_type.as_deref())
    .bind(origin.github_number)
    .bind(origin.github_comment_id)
    .bind(origin.github_author.as_deref())
    .bind(origin.github_url.as_deref())
    .execute(&mut *conn)
    .await?;

    // OR IGNORE: a repeated tag or dependency is kept once, at its first position.
    for (position, tag) in task.tags.iter().enumerate() {
        sqlx::query("INSERT OR IGNORE INTO task_tags (task_id, position, tag) VALUES (?, ?, ?)")
            .bind(task.id.to_string())
            .bind(position as i64)
            .bind(tag)
            .execute(&mut *conn)
            .await?;
    }
    for (position, dependency) in task.depends_on.iter().enumerate() {
        sqlx::query(
            "INSERT OR IGNORE INTO task_dependencies (task_id, depends_on_task_id, position)
             VALUES (?, ?, ?)",
        )
        .bind(task.id.to_string())
        .bind(dependency.to_string())
        .bind(position as i64)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// SQLite does not say which foreign key failed; look each reference up so the message
/// names the culprit.
async fn missing_reference(conn: &mut SqliteConnection, task: &NewTask) -> StoreResult<StoreError> {
    let agents = [
        ("agentId", task.agent_id),
        ("offeredTo", task.offered_to),
        ("creatorAgentId", task.creator_agent_id),
    ];
    for (field, agent) in agents {
        let Some(agent) = agent else { continue };
        if !row_exists(conn, "SELECT 1 FROM agents WHERE id = ?", &agent.to_string()).await? {
            return Ok(StoreError::MissingReference(format!("{field}: agent {agent} does not exist")));
        }
    }
    for dependency in &task.depends_on {
        if !row_exists(conn, "SELECT 1 FROM tasks WHERE id = ?", &dependency.to_string()).await? {
            return Ok(StoreError::MissingReference(format!("dependsOn: task {dependency} does not exist")));
        }
    }
    Ok(StoreError::MissingReference("a referenced agent or task does not exist".to_string()))
}

async fn row_exists(conn: &mut SqliteConnection, sql: &'static str, id: &str) -> StoreResult<bool> {
    let found: Option<i64> = sqlx::query_scalar(sql).bind(id).fetch_optional(conn).await.map_err(db)?;
    Ok(found.is_some())
}

fn from_row(row: &SqliteRow) -> StoreResult<Task> {
    let id = get_task_id(row, "id")?;
    let status: String = column(row, "status")?;
    let priority: i64 = column(row, "priority")?;
    let depends_on = get_strings(row, "depends_on")?
        .iter()
        .map(|dependency| task_id(dependency))
        .collect::<StoreResult<Vec<TaskId>>>()?;
    Ok(Task {
        id,
        agent_id: get_opt_agent_id(row, "agent_id")?,
        creator_agent_id: get_opt_agent_id(row, "creator_agent_id")?,
        task: column(row, "task")?,
        status: TaskStatus::parse(&status).map_err(|error| corrupt(format!("task {id}: {error}")))?,
        source: column(row, "source")?,
        task_type: column(row, "task_type")?,
        tags: get_strings(row, "tags")?,
        priority: i32::try_from(priority)
            .map_err(|_| corrupt(format!("task {id}: priority out of range: {priority}")))?,
        depends_on,
        offered_to: get_opt_agent_id(row, "offered_to")?,
        offered_at: get_opt_timestamp(row, "offered_at")?,
        accepted_at: get_opt_timestamp(row, "accepted_at")?,
        rejection_reason: column(row, "rejection_reason")?,
        created_at: get_timestamp(row, "created_at")?,
        last_updated_at: get_timestamp(row, "last_updated_at")?,
        finished_at: get_opt_timestamp(row, "finished_at")?,
        failure_reason: column(row, "failure_reason")?,
        output: column(row, "output")?,
        progress: column(row, "progress")?,
        notified_at: get_opt_timestamp(row, "notified_at")?,
        lease_expires_at: get_opt_timestamp(row, "lease_expires_at")?,
        lease_losses: column(row, "lease_losses")?,
        origin: TaskOrigin {
            slack_channel_id: column(row, "slack_channel_id")?,
            slack_thread_ts: column(row, "slack_thread_ts")?,
            slack_user_id: column(row, "slack_user_id")?,
            mention_message_id: column(row, "mention_message_id")?,
            mention_channel_id: column(row, "mention_channel_id")?,
            github_repo: column(row, "github_repo")?,
            github_event_type: column(row, "github_event_type")?,
            github_number: column(row, "github_number")?,
            github_comment_id: column(row, "github_comment_id")?,
            github_author: column(row, "github_author")?,
            github_url: column(row, "github_url")?,
        },
    })
}
