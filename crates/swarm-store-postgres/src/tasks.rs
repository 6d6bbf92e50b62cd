//! Tasks: creation and reads. Transitions live in `apply.rs`.

use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};
use swarm_domain::{
    id::{AgentId, TaskId},
    task::{NewTask, Task, TaskStatus},
    time::Timestamp,
};
use swarm_store::{StoreError, StoreResult, TaskFilter, TaskWaiters};
use uuid::Uuid;

use crate::{
    error::{db, vanished, violated_constraint},
    events,
    rows::{task_from_row, task_select},
};

pub(crate) async fn get<'e>(executor: impl PgExecutor<'e>, id: TaskId) -> StoreResult<Option<Task>> {
    sqlx::query(concat!(task_select!(), " WHERE t.id = $1"))
        .bind(id.as_uuid())
        .try_map(task_from_row)
        .fetch_optional(executor)
        .await
        .map_err(db)
}

/// Read back a row this transaction just wrote.
pub(crate) async fn get_known(conn: &mut PgConnection, id: TaskId) -> StoreResult<Task> {
    get(conn, id).await?.ok_or_else(|| vanished("task", id))
}

/// Who waits for the task to finish: dependent tasks, an agent awaiting its result, and
/// whether its assignee left mail pending.
pub(crate) async fn waiters<'e>(executor: impl PgExecutor<'e>, id: TaskId) -> StoreResult<TaskWaiters> {
    let waiters: Option<(bool, Option<Uuid>, bool)> = sqlx::query_as(concat!(
        "SELECT EXISTS (SELECT 1 FROM task_dependencies WHERE depends_on_task_id = $1),
                (SELECT agent_id FROM task_awaits WHERE task_id = $1), ",
        assignee_mail_pending!(),
        " FROM tasks WHERE id = $1"
    ))
    .bind(id.as_uuid())
    .fetch_optional(executor)
    .await
    .map_err(db)?;
    Ok(waiters
        .map(|(has_dependents, awaiting_agent, assignee_mail_pending)| TaskWaiters {
            has_dependents,
            awaiting_agent: awaiting_agent.map(AgentId::from_uuid),
            assignee_mail_pending,
        })
        .unwrap_or_default())
}

pub(crate) async fn list(pool: &PgPool, filter: &TaskFilter) -> StoreResult<(Vec<Task>, i64)> {
    // One snapshot for both statements, so the total always describes the page.
    let mut tx = pool.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY").await.map_err(db)?;
    let total: i64 = if filter.by_status_only() {
        // Kept by triggers (migration 0023), however many tasks there are.
        let counts = crate::counts::by_status(&mut *tx).await?;
        counts
            .iter()
            .filter(|(status, _)| {
                filter.statuses.is_empty() || filter.statuses.iter().any(|wanted| wanted.as_str() == status)
            })
            .map(|(_, n)| n)
            .sum()
    } else {
        let mut count = QueryBuilder::<Postgres>::new("SELECT count(*) FROM tasks t");
        push_filter(&mut count, filter);
        count.build_query_scalar().fetch_one(&mut *tx).await.map_err(db)?
    };

    let mut page = QueryBuilder::<Postgres>::new(task_select!());
    push_filter(&mut page, filter);
    page.push(" ORDER BY t.created_at DESC, t.id DESC LIMIT ")
        .push_bind(filter.limit.max(0))
        .push(" OFFSET ")
        .push_bind(filter.offset.max(0));
    let tasks = page.build().try_map(task_from_row).fetch_all(&mut *tx).await.map_err(db)?;
    tx.commit().await.map_err(db)?;
    Ok((tasks, total))
}

fn push_filter(query: &mut QueryBuilder<Postgres>, filter: &TaskFilter) {
    query.push(" WHERE TRUE");
    if !filter.statuses.is_empty() {
        let statuses: Vec<&str> = filter.statuses.iter().map(TaskStatus::as_str).collect();
        query.push(" AND t.status = ANY(").push_bind(statuses).push(")");
    }
    if let Some(agent_id) = filter.agent_id {
        query.push(" AND t.agent_id = ").push_bind(agent_id.as_uuid());
    }
    if let Some(creator) = filter.creator_agent_id {
        query.push(" AND t.creator_agent_id = ").push_bind(creator.as_uuid());
    }
    if let Some(offered_to) = filter.offered_to {
        query.push(" AND t.offered_to = ").push_bind(offered_to.as_uuid());
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
        // strpos, not LIKE: the user's % and _ are plain characters.
        query.push(" AND strpos(lower(t.task), lower(").push_bind(search.clone()).push(")) > 0");
    }
    if let Some(since) = filter.finished_since {
        query.push(" AND t.finished_at >= ").push_bind(since.datetime());
    }
    if filter.ready_only {
        query.push(concat!(" AND", swarm_store::sql_dependencies_completed!("t")));
    }
}

/// In the order asked for, so callers can name the first unknown id.
pub(crate) async fn existing(pool: &PgPool, ids: &[TaskId]) -> StoreResult<Vec<TaskId>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let uuids: Vec<Uuid> = ids.iter().map(TaskId::as_uuid).collect();
    let found: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM tasks WHERE id = ANY($1)")
        .bind(&uuids)
        .fetch_all(pool)
        .await
        .map_err(db)?;
    Ok(ids.iter().copied().filter(|id| found.contains(&id.as_uuid())).collect())
}

pub(crate) async fn unfinished_dependencies(pool: &PgPool, id: TaskId) -> StoreResult<Vec<TaskId>> {
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "SELECT d.depends_on_task_id FROM task_dependencies d \
         JOIN tasks dt ON dt.id = d.depends_on_task_id \
         WHERE d.task_id = $1 AND dt.status <> 'completed' \
         ORDER BY d.position",
    )
    .bind(id.as_uuid())
    .fetch_all(pool)
    .await
    .map_err(db)?;
    Ok(ids.into_iter().map(TaskId::from_uuid).collect())
}

pub(crate) async fn create(pool: &PgPool, task: &NewTask, now: Timestamp) -> StoreResult<Task> {
    let written = if task.tags.is_empty() && task.depends_on.is_empty() {
        insert_alone(pool, task, now).await
    } else {
        insert_in_transaction(pool, task, now).await
    };
    if let Err(err) = written {
        return Err(match violated_constraint(&err) {
            Some(constraint) if constraint.ends_with("_fkey") => {
                missing_reference(pool, task, &constraint).await?
            }
            _ => db(err),
        });
    }
    let created = task.created(now);
    #[cfg(debug_assertions)]
    {
        // Every test run checks that the row and its in-memory image agree. The insert
        // committed already, so this read cannot fail the create, and another poll may
        // have claimed the task since: only an unchanged row is compared.
        let unchanged = |stored: &Task| {
            (stored.status, stored.agent_id, stored.lease_expires_at, stored.last_updated_at)
                == (created.status, created.agent_id, created.lease_expires_at, created.last_updated_at)
        };
        if let Ok(Some(stored)) = get(pool, task.id).await
            && unchanged(&stored)
        {
            debug_assert_eq!(created, stored, "the stored task differs from its image");
        }
    }
    Ok(created)
}

/// The usual task, without tags or dependencies: its row and its events in one statement,
/// which is a transaction of its own (one round trip, no `BEGIN` and `COMMIT`).
async fn insert_alone(pool: &PgPool, task: &NewTask, now: Timestamp) -> Result<(), sqlx::Error> {
    let events = events::Columns::of(&task.creation_events());
    let query = sqlx::query(concat!(
        "WITH created AS (",
        task_insert!(),
        " RETURNING id) \
         INSERT INTO events (id, event_type, agent_id, task_id, old_value, new_value, metadata, created_at) \
         SELECT u.id, u.event_type, u.agent_id, u.task_id, u.old_value, u.new_value, u.metadata, $11 \
         FROM created, unnest($27::uuid[], $28::text[], $29::uuid[], $30::uuid[], $31::text[], $32::text[], \
                              $33::jsonb[]) AS u(id, event_type, agent_id, task_id, old_value, new_value, metadata)"
    ));
    let query = events.bind_to(bind_task(query, task, now));
    query.execute(pool).await?;
    Ok(())
}

async fn insert_in_transaction(pool: &PgPool, task: &NewTask, now: Timestamp) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    insert(&mut tx, task, now).await?;
    events::insert_all_raw(&mut tx, &task.creation_events(), now).await?;
    tx.commit().await
}

macro_rules! task_insert {
    () => {
        "INSERT INTO tasks (id, agent_id, creator_agent_id, task, status, source, task_type, \
                            priority, offered_to, offered_at, created_at, last_updated_at, \
                            slack_channel_id, slack_thread_ts, slack_user_id, mention_message_id, \
                            mention_channel_id, github_repo, github_event_type, github_number, \
                            github_comment_id, github_author, github_url, trigger_name, session_key, \
                            epic_id, model) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12, $13, $14, $15, $16, $17, \
                 $18, $19, $20, $21, $22, $23, $24, $25, $26)"
    };
}
use task_insert;

type PgQuery<'q> = sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>;

/// Binds `$1` to `$26` of [`task_insert`].
fn bind_task<'q>(query: PgQuery<'q>, task: &'q NewTask, now: Timestamp) -> PgQuery<'q> {
    let offered_at = (task.status == TaskStatus::Offered).then_some(now.datetime());
    let origin = &task.origin;
    query
        .bind(task.id.as_uuid())
        .bind(task.agent_id.map(|id| id.as_uuid()))
        .bind(task.creator_agent_id.map(|id| id.as_uuid()))
        .bind(&task.task)
        .bind(task.status.as_str())
        .bind(&task.source)
        .bind(task.task_type.as_deref())
        .bind(task.priority)
        .bind(task.offered_to.map(|id| id.as_uuid()))
        .bind(offered_at)
        .bind(now.datetime())
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
        .bind(origin.trigger_name.as_deref())
        .bind(origin.session_key.as_deref())
        .bind(task.epic_id.map(|id| id.as_uuid()))
        .bind(origin.model.as_deref())
}

pub(crate) async fn insert(
    conn: &mut PgConnection,
    task: &NewTask,
    now: Timestamp,
) -> Result<(), sqlx::Error> {
    bind_task(sqlx::query(task_insert!()), task, now).execute(&mut *conn).await?;

    // ON CONFLICT: a repeated tag or dependency is kept once, at its first position.
    if !task.tags.is_empty() {
        sqlx::query(
            "INSERT INTO task_tags (task_id, position, tag) \
             SELECT $1, (u.ord - 1)::int, u.tag FROM unnest($2::text[]) WITH ORDINALITY AS u(tag, ord) \
             ORDER BY u.ord ON CONFLICT DO NOTHING",
        )
        .bind(task.id.as_uuid())
        .bind(&task.tags)
        .execute(&mut *conn)
        .await?;
    }
    if !task.depends_on.is_empty() {
        let depends_on: Vec<Uuid> = task.depends_on.iter().map(TaskId::as_uuid).collect();
        sqlx::query(
            "INSERT INTO task_dependencies (task_id, depends_on_task_id, position) \
             SELECT $1, u.dep, (u.ord - 1)::int FROM unnest($2::uuid[]) WITH ORDINALITY AS u(dep, ord) \
             ORDER BY u.ord ON CONFLICT DO NOTHING",
        )
        .bind(task.id.as_uuid())
        .bind(&depends_on)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// The violated constraint says which field; the message also names the missing id.
async fn missing_reference(pool: &PgPool, task: &NewTask, constraint: &str) -> StoreResult<StoreError> {
    let agent = match constraint {
        "tasks_agent_id_fkey" => Some(("agentId", task.agent_id)),
        "tasks_offered_to_fkey" => Some(("offeredTo", task.offered_to)),
        "tasks_creator_agent_id_fkey" => Some(("creatorAgentId", task.creator_agent_id)),
        _ => None,
    };
    if let Some((field, Some(agent))) = agent {
        return Ok(StoreError::MissingReference(format!("{field}: agent {agent} does not exist")));
    }
    if constraint == "tasks_epic_id_fkey"
        && let Some(epic) = task.epic_id
    {
        return Ok(StoreError::MissingReference(format!("epicId: epic {epic} does not exist")));
    }
    if constraint == "task_dependencies_depends_on_task_id_fkey" {
        let found = existing(pool, &task.depends_on).await?;
        if let Some(missing) = task.depends_on.iter().find(|id| !found.contains(id)) {
            return Ok(StoreError::MissingReference(format!("dependsOn: task {missing} does not exist")));
        }
    }
    Ok(StoreError::MissingReference("a referenced agent or task does not exist".to_string()))
}
