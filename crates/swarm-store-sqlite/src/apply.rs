//! Task transitions: one guarded `UPDATE` each, its events and the agents' status in the
//! same write transaction.

use rusqlite::Connection;
use swarm_domain::{
    event::EventType,
    event::NewEvent,
    id::{AgentId, TaskId},
    task::{FieldUpdate, Task, TaskChange, TaskStatus},
    time::Timestamp,
};
use swarm_store::{Applied, StoreError, StoreResult};

use crate::{
    agents::{self, WorkMoved},
    error::{db, is_foreign_key_violation},
    events,
    sql::Sql,
    tasks::{self, get_known},
};

pub(crate) fn apply(
    tx: &Connection,
    id: TaskId,
    change: &TaskChange,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Applied<Task>> {
    let Some(before) = tasks::get(tx, id)? else {
        return Ok(Applied::NotFound);
    };

    let changed = match guarded_update(id, change, now).execute_raw(tx) {
        Ok(changed) => changed > 0,
        Err(error) if is_foreign_key_violation(&error) => {
            return Err(StoreError::MissingReference(missing_agent_message(change)));
        }
        Err(error) => return Err(db(error)),
    };
    if !changed {
        return Ok(Applied::Refused { current: before });
    }

    for event in change.events(id, actor, before.status) {
        events::insert(tx, &event, now)?;
    }

    let after = change.applied_to(&before, now);
    // Every test run checks that the row and its in-memory image agree.
    debug_assert_eq!(Some(&after), tasks::get(tx, id)?.as_ref(), "the stored task differs from its image");
    for (agent, moved) in WorkMoved::by(&before, &after) {
        agents::settle_after(tx, agent, moved, now)?;
    }
    Ok(Applied::Changed { before, after })
}

/// `UPDATE tasks SET status, last_updated_at, <updates> WHERE id AND status IN <from>
/// AND <guard>`. The shape comes from the change; every value is bound.
fn guarded_update(id: TaskId, change: &TaskChange, now: Timestamp) -> Sql {
    let updates = &change.updates;
    let mut query = Sql::new("UPDATE tasks SET status = ");
    query.bind(change.to.as_str().to_string());
    query.push(", last_updated_at = ").bind(now.unix_millis());
    push_field(&mut query, "agent_id", updates.agent_id);
    push_field(&mut query, "offered_to", updates.offered_to);
    if updates.set_accepted_at {
        query.push(", accepted_at = ").bind(now.unix_millis());
    }
    if updates.set_finished_at {
        query.push(", finished_at = ").bind(now.unix_millis());
    }
    match updates.lease_expires_at {
        FieldUpdate::Keep => {}
        FieldUpdate::Set(until) => {
            query.push(", lease_expires_at = ").bind(until.unix_millis());
        }
        FieldUpdate::Clear => {
            query.push(", lease_expires_at = NULL");
        }
    }
    if let Some(from_pool) = updates.from_pool {
        query.push(", from_pool = ").bind(from_pool);
    }
    let notes = [
        ("output", &updates.output),
        ("failure_reason", &updates.failure_reason),
        ("rejection_reason", &updates.rejection_reason),
    ];
    for (column, note) in notes {
        if let Some(note) = note {
            query.push(&format!(", {column} = ")).bind(note.clone());
        }
    }

    query.push(" WHERE id = ").bind(id.to_string());
    query.push(" AND ").bind_any_of("status", change.from.iter().map(|status| status.as_str().to_string()));

    let guard = &change.guard;
    if let Some(assignee) = guard.assignee {
        query.push(" AND agent_id = ").bind(assignee.to_string());
    }
    if let Some(offered_to) = guard.offered_to {
        query.push(" AND offered_to = ").bind(offered_to.to_string());
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
            .bind(agent.to_string())
            .push(" AND c.status = 'in_progress') < (SELECT max_tasks FROM agents WHERE id = ")
            .bind(agent.to_string())
            .push(")");
    }
    query
}

fn push_field(query: &mut Sql, column: &str, update: FieldUpdate<AgentId>) {
    match update {
        FieldUpdate::Keep => {}
        FieldUpdate::Set(agent) => {
            query.push(&format!(", {column} = ")).bind(agent.to_string());
        }
        FieldUpdate::Clear => {
            query.push(&format!(", {column} = NULL"));
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

pub(crate) fn set_progress(
    tx: &Connection,
    id: TaskId,
    progress: &str,
    assignee: Option<AgentId>,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Applied<Task>> {
    let Some(before) = tasks::get(tx, id)? else {
        return Ok(Applied::NotFound);
    };
    let mut update = Sql::new("UPDATE tasks SET progress = ");
    update.bind(progress.to_string());
    update.push(", last_updated_at = ").bind(now.unix_millis());
    update.push(" WHERE id = ").bind(id.to_string());
    update.push(" AND NOT ");
    update.bind_any_of("status", TaskStatus::FINISHED.iter().map(|status| status.as_str().to_string()));
    if let Some(assignee) = assignee {
        update.push(" AND agent_id = ").bind(assignee.to_string());
    }
    if update.execute_raw(tx).map_err(db)? == 0 {
        return Ok(Applied::Refused { current: before });
    }
    let noted = NewEvent::change(EventType::TaskProgress, actor, Some(id), None, Some(progress));
    events::insert(tx, &noted, now)?;
    let after = get_known(tx, id)?;
    Ok(Applied::Changed { before, after })
}

pub(crate) fn edit_text(
    tx: &Connection,
    id: TaskId,
    text: &str,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Applied<Task>> {
    let Some(before) = tasks::get(tx, id)? else {
        return Ok(Applied::NotFound);
    };
    let mut update = Sql::new("UPDATE tasks SET task = ");
    update.bind(text.to_string());
    update.push(", last_updated_at = ").bind(now.unix_millis());
    update.push(" WHERE id = ").bind(id.to_string());
    update.push(" AND ");
    update.bind_any_of("status", TaskStatus::EDITABLE.iter().map(|status| status.as_str().to_string()));
    if update.execute_raw(tx).map_err(db)? == 0 {
        return Ok(Applied::Refused { current: before });
    }
    let edited = NewEvent::change(EventType::TaskEdited, actor, Some(id), None, None);
    events::insert(tx, &edited, now)?;
    let after = get_known(tx, id)?;
    Ok(Applied::Changed { before, after })
}
