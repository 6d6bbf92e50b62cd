//! Tasks: creation and reads. Transitions live in `apply.rs`.

use rusqlite::{Connection, Row, params};
use swarm_domain::{
    id::{EpicId, TaskId},
    task::{NewTask, Task, TaskOrigin, TaskStatus},
    time::Timestamp,
};
use swarm_store::{StoreError, StoreResult, TaskFilter, TaskWaiters};

use crate::{
    error::{corrupt, db, is_foreign_key_violation},
    events,
    rows::{Columns, get_task_id, task_id},
    sql::{self, Sql},
};

/// Every column of a task, as `tasks::from_row` decodes them; `$row` names the row for
/// the correlated subqueries (`t` in a `SELECT`, `tasks` in a `RETURNING`). Tags and
/// dependencies come with the row, in their written order, from correlated subqueries
/// on their primary keys: one statement however many rows are listed. An aggregate with
/// `ORDER BY` sorts in a temporary b-tree even when it has no rows to sort, so each runs
/// only for a task that has any (most have none).
macro_rules! task_columns {
    ($row:literal) => {
        concat!(
            "id, agent_id, creator_agent_id, task, status, source, task_type,
             priority, offered_to, offered_at, accepted_at, rejection_reason,
             created_at, last_updated_at, finished_at, failure_reason, output,
             progress, notified_at, lease_expires_at, lease_losses, slack_channel_id, slack_thread_ts,
             slack_user_id, mention_message_id, mention_channel_id, github_repo, github_event_type,
             github_number, github_comment_id, github_author, github_url,
             trigger_name, session_key, model, epic_id,
             CASE WHEN EXISTS (SELECT 1 FROM task_tags g WHERE g.task_id = ",
            $row,
            ".id)
                  THEN (SELECT json_group_array(g.tag ORDER BY g.position)
                        FROM task_tags g WHERE g.task_id = ",
            $row,
            ".id) END AS tags,
             CASE WHEN EXISTS (SELECT 1 FROM task_dependencies d WHERE d.task_id = ",
            $row,
            ".id)
                  THEN (SELECT json_group_array(d.depends_on_task_id ORDER BY d.position)
                        FROM task_dependencies d WHERE d.task_id = ",
            $row,
            ".id) END AS depends_on"
        )
    };
}
pub(crate) use task_columns;

macro_rules! select_task {
    () => {
        concat!("SELECT ", task_columns!("t"), " FROM tasks t")
    };
}

pub(crate) fn get(connection: &Connection, id: TaskId) -> StoreResult<Option<Task>> {
    sql::optional(connection, concat!(select_task!(), " WHERE t.id = ?"), [id.to_string()], from_row)
}

/// Read back a row this transaction just wrote.
pub(crate) fn get_known(tx: &Connection, id: TaskId) -> StoreResult<Task> {
    get(tx, id)?.ok_or_else(|| corrupt(format!("task {id} vanished inside its own transaction")))
}

/// Finished Slack tasks whose outcome was not posted yet (`SlackMark::TaskOutcome`).
pub(crate) fn slack_outcomes_unannounced(
    connection: &Connection,
    since: Timestamp,
    limit: i64,
) -> StoreResult<Vec<Task>> {
    sql::all(
        connection,
        concat!(
            select_task!(),
            " WHERE t.slack_channel_id IS NOT NULL AND t.status IN ('completed', 'failed')
                AND t.finished_at >= ?1
                AND NOT EXISTS (SELECT 1 FROM slack_marks m WHERE m.kind = 'task_outcome' AND m.key = t.id)
              ORDER BY t.finished_at, t.id LIMIT ?2"
        ),
        params![since.unix_millis(), limit],
        from_row,
    )
}

/// A page and the total; the caller runs both in one snapshot.
pub(crate) fn list(snapshot: &Connection, filter: &TaskFilter) -> StoreResult<(Vec<Task>, i64)> {
    let total: i64 = if filter.by_status_only() {
        // Kept by triggers (migration 0017): ten rows, however many tasks there are.
        let mut count = Sql::new("SELECT coalesce(sum(n), 0) FROM task_counts");
        if !filter.statuses.is_empty() {
            count.push(" WHERE status IN (");
            count.bind_list(filter.statuses.iter().map(|status| status.as_str().to_string()));
            count.push(")");
        }
        count.scalar(snapshot)?
    } else {
        let mut count = Sql::new("SELECT count(*) FROM tasks t");
        push_filter(&mut count, filter);
        count.scalar(snapshot)?
    };

    let mut page = Sql::new(select_task!());
    push_filter(&mut page, filter);
    page.push(" ORDER BY t.created_at DESC, t.id DESC LIMIT ")
        .bind(filter.limit.max(0))
        .push(" OFFSET ")
        .bind(filter.offset.max(0));
    Ok((page.all(snapshot, from_row)?, total))
}

fn push_filter(query: &mut Sql, filter: &TaskFilter) {
    query.push(" WHERE 1 = 1");
    if !filter.statuses.is_empty() {
        query.push(" AND t.status IN (");
        query.bind_list(filter.statuses.iter().map(|status| status.as_str().to_string()));
        query.push(")");
    }
    if let Some(agent_id) = filter.agent_id {
        query.push(" AND t.agent_id = ").bind(agent_id.to_string());
    }
    if let Some(creator) = filter.creator_agent_id {
        query.push(" AND t.creator_agent_id = ").bind(creator.to_string());
    }
    if let Some(offered_to) = filter.offered_to {
        query.push(" AND t.offered_to = ").bind(offered_to.to_string());
    }
    if let Some(source) = &filter.source {
        query.push(" AND t.source = ").bind(source.clone());
    }
    if let Some(task_type) = &filter.task_type {
        query.push(" AND t.task_type = ").bind(task_type.clone());
    }
    for tag in &filter.tags {
        query
            .push(" AND t.id IN (SELECT g.task_id FROM task_tags g WHERE g.tag = ")
            .bind(tag.clone())
            .push(")");
    }
    if let Some(search) = &filter.search {
        // instr, not LIKE: the user's % and _ are plain characters.
        query.push(" AND instr(lower(t.task), lower(").bind(search.clone()).push(")) > 0");
    }
    if let Some(since) = filter.finished_since {
        query.push(" AND t.finished_at >= ").bind(since.unix_millis());
    }
    if filter.ready_only {
        query.push(concat!(" AND", swarm_store::sql_dependencies_completed!("t")));
    }
}

pub(crate) fn unfinished_dependencies(connection: &Connection, id: TaskId) -> StoreResult<Vec<TaskId>> {
    sql::all(
        connection,
        "SELECT d.depends_on_task_id FROM task_dependencies d
         JOIN tasks dt ON dt.id = d.depends_on_task_id
         WHERE d.task_id = ? AND dt.status <> 'completed'
         ORDER BY d.position",
        [id.to_string()],
        |row| get_task_id(row, "depends_on_task_id"),
    )
}

pub(crate) fn waiters(connection: &Connection, id: TaskId) -> StoreResult<TaskWaiters> {
    let waiters = sql::optional(
        connection,
        "SELECT EXISTS (SELECT 1 FROM task_dependencies WHERE depends_on_task_id = ?1) AS has_dependents,
                (SELECT agent_id FROM task_awaits WHERE task_id = ?1) AS awaiting_agent,
                EXISTS (SELECT 1 FROM mail WHERE to_agent_id = tasks.agent_id AND status <> 'read')
                OR EXISTS (SELECT 1 FROM mail WHERE from_agent_id = tasks.agent_id
                                                AND awaiting_response = 1 AND answered_at IS NULL)
                    AS assignee_mail_pending
         FROM tasks WHERE id = ?1",
        [id.to_string()],
        |row| {
            let mut columns = Columns::new(row);
            Ok(TaskWaiters {
                has_dependents: columns.bool("has_dependents")?,
                awaiting_agent: columns.opt_agent_id("awaiting_agent")?,
                assignee_mail_pending: columns.bool("assignee_mail_pending")?,
            })
        },
    )?;
    Ok(waiters.unwrap_or_default())
}

pub(crate) fn create(tx: &Connection, task: &NewTask, now: Timestamp) -> StoreResult<Task> {
    match insert(tx, task, now) {
        Ok(()) => {}
        Err(error) if is_foreign_key_violation(&error) => return Err(missing_reference(tx, task)?),
        Err(error) => return Err(db(error)),
    }
    for event in task.creation_events() {
        events::insert(tx, &event, now)?;
    }
    let created = task.created(now);
    // Every test run checks that the row and its in-memory image agree.
    debug_assert_eq!(Some(&created), get(tx, task.id)?.as_ref(), "the stored task differs from its image");
    Ok(created)
}

fn insert(tx: &Connection, task: &NewTask, now: Timestamp) -> rusqlite::Result<()> {
    let offered_at = (task.status == TaskStatus::Offered).then_some(now.unix_millis());
    let origin = &task.origin;
    tx.prepare_cached(
        "INSERT INTO tasks (id, agent_id, creator_agent_id, task, status, source, task_type,
                            priority, offered_to, offered_at, created_at, last_updated_at,
                            slack_channel_id, slack_thread_ts, slack_user_id, mention_message_id,
                            mention_channel_id, github_repo, github_event_type, github_number,
                            github_comment_id, github_author, github_url, trigger_name, session_key,
                            epic_id, model)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
                 ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26)",
    )?
    .execute(params![
        task.id.to_string(),
        task.agent_id.map(|id| id.to_string()),
        task.creator_agent_id.map(|id| id.to_string()),
        task.task,
        task.status.as_str(),
        task.source,
        task.task_type,
        task.priority,
        task.offered_to.map(|id| id.to_string()),
        offered_at,
        now.unix_millis(),
        origin.slack_channel_id,
        origin.slack_thread_ts,
        origin.slack_user_id,
        origin.mention_message_id,
        origin.mention_channel_id,
        origin.github_repo,
        origin.github_event_type,
        origin.github_number,
        origin.github_comment_id,
        origin.github_author,
        origin.github_url,
        origin.trigger_name,
        origin.session_key,
        task.epic_id.map(|id| id.to_string()),
        origin.model,
    ])?;

    // OR IGNORE: a repeated tag or dependency is kept once, at its first position.
    let mut insert_tag =
        tx.prepare_cached("INSERT OR IGNORE INTO task_tags (task_id, position, tag) VALUES (?, ?, ?)")?;
    for (position, tag) in task.tags.iter().enumerate() {
        insert_tag.execute(params![task.id.to_string(), position as i64, tag])?;
    }
    let mut insert_dependency = tx.prepare_cached(
        "INSERT OR IGNORE INTO task_dependencies (task_id, depends_on_task_id, position) VALUES (?, ?, ?)",
    )?;
    for (position, dependency) in task.depends_on.iter().enumerate() {
        insert_dependency.execute(params![task.id.to_string(), dependency.to_string(), position as i64])?;
    }
    Ok(())
}

/// SQLite does not say which foreign key failed; look each reference up so the message
/// names the culprit.
fn missing_reference(tx: &Connection, task: &NewTask) -> StoreResult<StoreError> {
    let agents = [
        ("agentId", task.agent_id),
        ("offeredTo", task.offered_to),
        ("creatorAgentId", task.creator_agent_id),
    ];
    for (field, agent) in agents {
        let Some(agent) = agent else { continue };
        if !row_exists(tx, "SELECT EXISTS (SELECT 1 FROM agents WHERE id = ?)", &agent.to_string())? {
            return Ok(StoreError::MissingReference(format!("{field}: agent {agent} does not exist")));
        }
    }
    for dependency in &task.depends_on {
        if !row_exists(tx, "SELECT EXISTS (SELECT 1 FROM tasks WHERE id = ?)", &dependency.to_string())? {
            return Ok(StoreError::MissingReference(format!("dependsOn: task {dependency} does not exist")));
        }
    }
    if let Some(epic) = task.epic_id
        && !row_exists(tx, "SELECT EXISTS (SELECT 1 FROM epics WHERE id = ?)", &epic.to_string())?
    {
        return Ok(StoreError::MissingReference(format!("epicId: epic {epic} does not exist")));
    }
    Ok(StoreError::MissingReference("a referenced agent or task does not exist".to_string()))
}

fn row_exists(tx: &Connection, exists: &'static str, id: &str) -> StoreResult<bool> {
    sql::scalar(tx, exists, [id])
}

pub(crate) fn from_row(row: &Row<'_>) -> StoreResult<Task> {
    let mut column = Columns::new(row);
    let id = column.task_id("id")?;
    let agent_id = column.opt_agent_id("agent_id")?;
    let creator_agent_id = column.opt_agent_id("creator_agent_id")?;
    let task = column.take("task")?;
    let status: String = column.take("status")?;
    let status = TaskStatus::parse(&status).map_err(|error| corrupt(format!("task {id}: {error}")))?;
    let source = column.take("source")?;
    let task_type = column.take("task_type")?;
    let priority: i64 = column.take("priority")?;
    let priority = i32::try_from(priority)
        .map_err(|_| corrupt(format!("task {id}: priority out of range: {priority}")))?;
    let offered_to = column.opt_agent_id("offered_to")?;
    let offered_at = column.opt_timestamp("offered_at")?;
    let accepted_at = column.opt_timestamp("accepted_at")?;
    let rejection_reason = column.take("rejection_reason")?;
    let created_at = column.timestamp("created_at")?;
    let last_updated_at = column.timestamp("last_updated_at")?;
    let finished_at = column.opt_timestamp("finished_at")?;
    let failure_reason = column.take("failure_reason")?;
    let output = column.take("output")?;
    let progress = column.take("progress")?;
    let notified_at = column.opt_timestamp("notified_at")?;
    let lease_expires_at = column.opt_timestamp("lease_expires_at")?;
    let lease_losses = column.take("lease_losses")?;
    let origin = TaskOrigin {
        slack_channel_id: column.take("slack_channel_id")?,
        slack_thread_ts: column.take("slack_thread_ts")?,
        slack_user_id: column.take("slack_user_id")?,
        mention_message_id: column.take("mention_message_id")?,
        mention_channel_id: column.take("mention_channel_id")?,
        github_repo: column.take("github_repo")?,
        github_event_type: column.take("github_event_type")?,
        github_number: column.take("github_number")?,
        github_comment_id: column.take("github_comment_id")?,
        github_author: column.take("github_author")?,
        github_url: column.take("github_url")?,
        trigger_name: column.take("trigger_name")?,
        session_key: column.take("session_key")?,
        model: column.take("model")?,
    };
    let epic_id = column
        .take::<Option<String>>("epic_id")?
        .map(|id| EpicId::parse(&id).map_err(|error| corrupt(format!("task {id}: {error}"))))
        .transpose()?;
    let tags = column.strings("tags")?;
    let depends_on = column
        .strings("depends_on")?
        .iter()
        .map(|dependency| task_id(dependency))
        .collect::<StoreResult<Vec<TaskId>>>()?;
    Ok(Task {
        id,
        agent_id,
        creator_agent_id,
        task,
        status,
        source,
        task_type,
        tags,
        priority,
        depends_on,
        offered_to,
        offered_at,
        accepted_at,
        rejection_reason,
        created_at,
        last_updated_at,
        finished_at,
        failure_reason,
        output,
        progress,
        notified_at,
        lease_expires_at,
        lease_losses,
        epic_id,
        origin,
    })
}
