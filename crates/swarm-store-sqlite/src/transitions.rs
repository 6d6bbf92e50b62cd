//! Task transitions: one guarded `UPDATE` each, its events and the agents' status in the
//! same write transaction.

use sqlx::{QueryBuilder, Sqlite};
use swarm_domain::{
    event::EventType,
    event::NewEvent,
    id::{AgentId, TaskId},
    task::{FieldUpdate, Task, TaskChange, TaskStatus},
    time::Timestamp,
};
use swarm_store::{Applied, StoreError, StoreResult};

use crate::{
    SqliteStore,
    agents::{self, Wake},
    decode::{db, is_foreign_key_violation},
    events,
    tasks::{self, get_known},
};

pub(crate) async fn apply(
    store: &SqliteStore,
    id: TaskId,
    change: &TaskChange,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Applied<Task>> {
    let mut tx = store.begin_write().await?;
    let Some(before) = tasks::get(&mut tx, id).await? else {
        return Ok(Applied::NotFound);
    };

    let mut update = guarded_update(id, change, now);
    let changed = match update.build().fetch_optional(&mut *tx).await {
        Ok(changed) => changed.is_some(),
        Err(error) if is_foreign_key_violation(&error) => {
            return Err(StoreError::MissingReference(missing_agent_message(change)));
        }
        Err(error) => return Err(db(error)),
    };
    if !changed {
        tx.rollback().await.map_err(db)?;
        return Ok(Applied::Refused { current: before });
    }

    for event in change.events(id, actor, before.status) {
        events::insert(&mut tx, &event, now).await?;
    }

    let after = get_known(&mut tx, id).await?;
    let mut involved: Vec<AgentId> = before.agent_id.into_iter().collect();
    if let Some(agent) = after.agent_id
        && !involved.contains(&agent)
    {
        involved.push(agent);
    }
    for agent in involved {
        agents::settle_status(&mut tx, agent, now, Wake::No).await?;
    }
    tx.commit().await.map_err(db)?;
    Ok(Applied::Changed { before, after })
}

/// `UPDATE tasks SET status, last_updated_at, <updates> WHERE id AND status IN <from>
/// AND <guard> RETURNING id`. The shape comes from the change; every value is bound.
fn guarded_update(id: TaskId, change: &TaskChange, now: Timestamp) -> QueryBuilder<Sqlite> {
    let updates = &change.updates;
    let mut query = QueryBuilder::<Sqlite>::new("UPDATE tasks SET status = ");
    query.push_bind(change.to.as_str());
    query.push(", last_updated_at = ").push_bind(now.unix_millis());
    push_field(&mut query, "agent_id", updates.agent_id);
    push_field(&mut query, "offered_to", updates.offered_to);
    if updates.set_accepted_at {
        query.push(", accepted_at = ").push_bind(now.unix_millis());
    }
    if updates.set_finished_at {
        query.push(", finished_at = ").push_bind(now.unix_millis());
    }
    match updates.lease_expires_at {
        FieldUpdate::Keep => {}
        FieldUpdate::Set(until) => {
            query.push(", lease_expires_at = ").push_bind(until.unix_millis());
        }
        FieldUpdate::Clear => {
            query.push(", lease_expires_at = NULL");
        }
    }
    if let Some(from_pool) = updates.from_pool {
        query.push(", from_pool = ").push_bind(from_pool);
    }
    let notes = [
        ("output", &updates.output),
        ("failure_reason", &updates.failure_reason),
        ("rejection_reason", &updates.rejection_reason),
    ];
    for (column, note) in notes {
        if let Some(note) = note {
            query.push(format_args!(", {column} = ")).push_bind(note.clone());
        }
    }

    query.push(" WHERE id = ").push_bind(id.to_string());
    query.push(" AND status IN (");
    let mut from = query.separated(", ");
    for status in change.from {
        from.push_bind(status.as_str());
    }
    query.push(")");

    let guard = &change.guard;
    if let Some(assignee) = guard.assignee {
        query.push(" AND agent_id = ").push_bind(assignee.to_string());
    }
    if let Some(offered_to) = guard.offered_to {
        query.push(" AND offered_to = ").push_bind(offered_to.to_string());
    }
    if guard.dependencies_completed {
        query.push(
            " AND NOT EXISTS (SELECT 1 FROM task_dependencies d
                              JOIN tasks dt ON dt.id = d.depends_on_task_id
                              WHERE d.task_id = tasks.id AND dt.status <> 'completed')",
        );
    }
    if let Some(agent) = guard.capacity_of {
        // An unknown agent has no max_tasks: the comparison is NULL and the guard fails.
        query
            .push(" AND (SELECT count(*) FROM tasks c WHERE c.agent_id = ")
            .push_bind(agent.to_string())
            .push(" AND c.status = 'in_progress') < (SELECT max_tasks FROM agents WHERE id = ")
            .push_bind(agent.to_string())
            .push(")");
    }
    query.push(" RETURNING id");
    query
}

fn push_field(query: &mut QueryBuilder<Sqlite>, column: &str, update: FieldUpdate<AgentId>) {
    match update {
        FieldUpdate::Keep => {}
        FieldUpdate::Set(agent) => {
            query.push(format_args!(", {column} = ")).push_bind(agent.to_string());
        }
        FieldUpdate::Clear => {
            query.push(format_args!(", {column} = NULL"));
        }
    }
}

fn missing_agent_message(change: &TaskChange) -> String {
    let named =
        [change.updates.agent_id, change.updates.offered_to].into_iter().find_map(|update| match update {
            FieldUpdate::Set(agent) => Some(agent),
            _ => None,
        });
    match named {
        Some(agent) => format!("agent {agent} does not exist"),
        None => "a referenced agent does not exist".to_string(),
    }
}

pub(crate) async fn set_progress(
    store: &SqliteStore,
    id: TaskId,
    progress: &str,
    assignee: Option<AgentId>,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Applied<Task>> {
    let mut tx = store.begin_write().await?;
    let Some(before) = tasks::get(&mut tx, id).await? else {
        return Ok(Applied::NotFound);
    };
    let mut update = QueryBuilder::<Sqlite>::new("UPDATE tasks SET progress = ");
    update.push_bind(progress.to_string());
    update.push(", last_updated_at = ").push_bind(now.unix_millis());
    update.push(" WHERE id = ").push_bind(id.to_string());
    update.push(" AND status NOT IN (");
    let mut finished = update.separated(", ");
    for status in TaskStatus::FINISHED {
        finished.push_bind(status.as_str());
    }
    update.push(")");
    if let Some(assignee) = assignee {
        update.push(" AND agent_id = ").push_bind(assignee.to_string());
    }
    update.push(" RETURNING id");
    if update.build().fetch_optional(&mut *tx).await.map_err(db)?.is_none() {
        tx.rollback().await.map_err(db)?;
        return Ok(Applied::Refused { current: before });
    }
    let noted = NewEvent::change(EventType::TaskProgress, actor, Some(id), None, Some(progress));
    events::insert(&mut tx, &noted, now).await?;
    let after = get_known(&mut tx, id).await?;
    tx.commit().await.map_err(db)?;
    Ok(Applied::Changed { before, after })
}

pub(crate) async fn edit_text(
    store: &SqliteStore,
    id: TaskId,
    text: &str,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Applied<Task>> {
    let mut tx = store.begin_write().await?;
    let Some(before) = tasks::get(&mut tx, id).await? else {
        return Ok(Applied::NotFound);
    };
    let mut update = QueryBuilder::<Sqlite>::new("UPDATE tasks SET task = ");
    update.push_bind(text.to_string());
    update.push(", last_updated_at = ").push_bind(now.unix_millis());
    update.push(" WHERE id = ").push_bind(id.to_string());
    update.push(" AND status IN (");
    let mut editable = update.separated(", ");
    for status in TaskStatus::EDITABLE {
        editable.push_bind(status.as_str());
    }
    update.push(") RETURNING id");
    if update.build().fetch_optional(&mut *tx).await.map_err(db)?.is_none() {
        tx.rollback().await.map_err(db)?;
        return Ok(Applied::Refused { current: before });
    }
    let edited = NewEvent::change(EventType::TaskEdited, actor, Some(id), None, None);
    events::insert(&mut tx, &edited, now).await?;
    let after = get_known(&mut tx, id).await?;
    tx.commit().await.map_err(db)?;
    Ok(Applied::Changed { before, after })
}
