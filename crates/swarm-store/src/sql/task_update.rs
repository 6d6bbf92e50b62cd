//! The guarded `UPDATE tasks` of a [`TaskChange`]:
//! `UPDATE tasks SET status, last_updated_at, <updates> WHERE id AND status IN <from>
//! AND <guard>`. Its shape follows the change; every value is bound. The plan is a list
//! of [`Piece`]s that a driver renders in order, writing its own placeholders, binding
//! each [`Value`] in its own column type, and choosing how to test a status against a
//! list (SQLite: `OR`s; PostgreSQL: `= ANY`).

use swarm_domain::{
    id::{AgentId, TaskId},
    task::{FieldUpdate, TaskChange, TaskStatus},
    time::Timestamp,
};

/// One piece of the statement, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Sql(&'static str),
    Bind(Value),
    /// `status` is one of these.
    StatusIn(&'static [TaskStatus]),
}

/// A bound value, typed so that each driver converts it to its columns' types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Status(TaskStatus),
    Time(Timestamp),
    Agent(AgentId),
    Task(TaskId),
    Bool(bool),
    Text(String),
}

/// The pieces of the guarded update of `id` by `change` at `now`.
pub fn plan(id: TaskId, change: &TaskChange, now: Timestamp) -> Vec<Piece> {
    let updates = &change.updates;
    let mut plan = Plan::default();
    plan.sql("UPDATE tasks SET status = ").bind(Value::Status(change.to));
    plan.sql(", last_updated_at = ").bind(Value::Time(now));
    plan.agent_field(", agent_id = ", ", agent_id = NULL", updates.agent_id);
    plan.agent_field(", offered_to = ", ", offered_to = NULL", updates.offered_to);
    if updates.set_accepted_at {
        plan.sql(", accepted_at = ").bind(Value::Time(now));
    }
    if updates.set_finished_at {
        plan.sql(", finished_at = ").bind(Value::Time(now));
    }
    match updates.lease_expires_at {
        FieldUpdate::Keep => {}
        FieldUpdate::Set(until) => {
            plan.sql(", lease_expires_at = ").bind(Value::Time(until));
        }
        FieldUpdate::Clear => {
            plan.sql(", lease_expires_at = NULL");
        }
    }
    if let Some(from_pool) = updates.from_pool {
        plan.sql(", from_pool = ").bind(Value::Bool(from_pool));
    }
    let notes = [
        (", output = ", &updates.output),
        (", failure_reason = ", &updates.failure_reason),
        (", rejection_reason = ", &updates.rejection_reason),
    ];
    for (column, note) in notes {
        if let Some(note) = note {
            plan.sql(column).bind(Value::Text(note.clone()));
        }
    }

    plan.sql(" WHERE id = ").bind(Value::Task(id));
    plan.sql(" AND ");
    plan.pieces.push(Piece::StatusIn(change.from));
    let guard = &change.guard;
    if let Some(assignee) = guard.assignee {
        plan.sql(" AND agent_id = ").bind(Value::Agent(assignee));
    }
    if let Some(offered_to) = guard.offered_to {
        plan.sql(" AND offered_to = ").bind(Value::Agent(offered_to));
    }
    if guard.dependencies_completed {
        plan.sql(concat!(" AND", crate::sql_dependencies_completed!("tasks")));
    }
    if let Some(agent) = guard.capacity_of {
        // An unknown agent has no max_tasks: the comparison is NULL and the guard fails.
        plan.sql(" AND (SELECT count(*) FROM tasks c WHERE c.agent_id = ").bind(Value::Agent(agent));
        plan.sql(" AND c.status = 'in_progress') < (SELECT max_tasks FROM agents WHERE id = ")
            .bind(Value::Agent(agent))
            .sql(")");
    }
    if let Some((holder, seen_before)) = guard.holder_gone {
        // The holder came back (a ping, a poll) since it was judged gone: keep its work.
        plan.sql(" AND EXISTS (SELECT 1 FROM agents g WHERE g.id = ").bind(Value::Agent(holder));
        plan.sql(" AND g.status = 'offline' AND g.last_seen_at < ").bind(Value::Time(seen_before)).sql(")");
    }
    plan.pieces
}

#[derive(Default)]
struct Plan {
    pieces: Vec<Piece>,
}

impl Plan {
    fn sql(&mut self, text: &'static str) -> &mut Plan {
        self.pieces.push(Piece::Sql(text));
        self
    }

    fn bind(&mut self, value: Value) -> &mut Plan {
        self.pieces.push(Piece::Bind(value));
        self
    }

    fn agent_field(&mut self, set: &'static str, clear: &'static str, update: FieldUpdate<AgentId>) {
        match update {
            FieldUpdate::Keep => {}
            FieldUpdate::Set(agent) => {
                self.sql(set).bind(Value::Agent(agent));
            }
            FieldUpdate::Clear => {
                self.sql(clear);
            }
        }
    }
}
