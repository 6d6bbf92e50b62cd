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
use swarm_store::{
    Applied, StoreError, StoreResult,
    sql::task_update::{self, Piece},
};

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

/// The change's guarded update ([`task_update::plan`]) with SQLite's placeholders and
/// column types: ids as text, times as milliseconds.
///
/// As `UPDATE OR FAIL`. A status change fires triggers (`task_counts`, epic progress),
/// and SQLite runs a statement that has triggers and may abort on a constraint inside a
/// statement transaction of its own: it first copies every page the statement touches
/// into a statement journal, so that an abort can undo the statement alone (a sixth of
/// the writer's instructions in a claim cycle, BENCHMARKS.md). `FAIL` stops at the
/// failing constraint without that undo, and nothing here needs it: the statement
/// changes one row, whose constraints are checked before it is written, and a job that
/// meets any error fails, which takes its whole transaction back
/// (`database::commit_group`). A change of an agent column still takes the journal:
/// SQLite counts foreign-key violations over such a statement and undoes it at its end.
fn guarded_update(id: TaskId, change: &TaskChange, now: Timestamp) -> Sql {
    let mut query = Sql::default();
    for piece in task_update::plan(id, change, now) {
        match piece {
            // The plan is shared with PostgreSQL, which has no `OR FAIL`.
            Piece::Sql(text) => match text.strip_prefix("UPDATE tasks ") {
                Some(rest) => {
                    query.push("UPDATE OR FAIL tasks ").push(rest);
                }
                None => {
                    query.push(text);
                }
            },
            Piece::Bind(value) => {
                query.bind(sqlite_value(value));
            }
            Piece::StatusIn(statuses) => {
                query.bind_any_of("status", statuses.iter().map(|status| status.as_str().to_string()));
            }
        }
    }
    query
}

fn sqlite_value(value: task_update::Value) -> rusqlite::types::Value {
    match value {
        task_update::Value::Status(status) => status.as_str().to_string().into(),
        task_update::Value::Time(at) => at.unix_millis().into(),
        task_update::Value::Agent(agent) => agent.to_string().into(),
        task_update::Value::Task(task) => task.to_string().into(),
        task_update::Value::Bool(yes) => yes.into(),
        task_update::Value::Text(text) => text.into(),
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

pub(crate) fn set_priority(
    tx: &Connection,
    id: TaskId,
    priority: i32,
    actor: Option<AgentId>,
    now: Timestamp,
) -> StoreResult<Applied<Task>> {
    let Some(before) = tasks::get(tx, id)? else {
        return Ok(Applied::NotFound);
    };
    let mut update = Sql::new("UPDATE tasks SET priority = ");
    update.bind(i64::from(priority));
    update.push(", last_updated_at = ").bind(now.unix_millis());
    update.push(" WHERE id = ").bind(id.to_string());
    update.push(" AND NOT ");
    update.bind_any_of("status", TaskStatus::FINISHED.iter().map(|status| status.as_str().to_string()));
    if update.execute_raw(tx).map_err(db)? == 0 {
        return Ok(Applied::Refused { current: before });
    }
    let (old, new) = (before.priority.to_string(), priority.to_string());
    let edited = NewEvent::change(EventType::TaskEdited, actor, Some(id), Some(&old), Some(&new));
    events::insert(tx, &edited, now)?;
    let after = get_known(tx, id)?;
    Ok(Applied::Changed { before, after })
}
