//! The columns every read selects and how a row becomes a domain value.
//!
//! The selects are macros, not constants, so that `concat!` can glue a `WHERE` clause to
//! them and the result stays a `&'static str` (sqlx 0.9 accepts only static SQL without
//! an explicit audit).

use chrono::{DateTime, Utc};
use sqlx::{Row, postgres::PgRow};
use swarm_domain::{
    agent::{Agent, AgentStatus, Capacity},
    event::{Event, EventType},
    id::{AgentId, EpicId, EventId, TaskId},
    session::{SessionCost, SessionLog},
    task::{Task, TaskOrigin, TaskStatus},
    time::Timestamp,
};
use uuid::Uuid;

use crate::error::corrupt;

/// Agents with their capacity: `in_progress` counts the tasks they are working on.
macro_rules! agent_select {
    () => {
        "SELECT a.id, a.name, a.is_lead, a.status, a.description, a.role, a.capabilities, \
         a.max_tasks, a.created_at, a.last_updated_at, a.status_reason, \
         (SELECT count(*) FROM tasks c WHERE c.agent_id = a.id AND c.status = 'in_progress') \
         AS in_progress \
         FROM agents a"
    };
}
pub(crate) use agent_select;

/// Tasks with their tags and dependencies in the order they were given.
macro_rules! task_select {
    () => {
        "SELECT t.id, t.agent_id, t.creator_agent_id, t.task, t.status, t.source, t.task_type, \
         t.priority, t.offered_to, t.offered_at, t.accepted_at, t.rejection_reason, t.created_at, \
         t.last_updated_at, t.finished_at, t.failure_reason, t.output, t.progress, t.notified_at, \
         t.lease_expires_at, t.lease_losses, \
         t.slack_channel_id, t.slack_thread_ts, t.slack_user_id, t.mention_message_id, \
         t.mention_channel_id, t.github_repo, t.github_event_type, t.github_number, \
         t.github_comment_id, t.github_author, t.github_url, t.trigger_name, t.session_key, t.epic_id, t.model, \
         ARRAY(SELECT g.tag FROM task_tags g WHERE g.task_id = t.id ORDER BY g.position) AS tags, \
         ARRAY(SELECT d.depends_on_task_id FROM task_dependencies d WHERE d.task_id = t.id \
               ORDER BY d.position) AS depends_on \
         FROM tasks t"
    };
}
pub(crate) use task_select;

/// What an `UPDATE tasks ... RETURNING` gives back: the row as [`task_select`] reads it.
macro_rules! task_returning {
    () => {
        "tasks.id, tasks.agent_id, tasks.creator_agent_id, tasks.task, tasks.status, tasks.source, \
         tasks.task_type, tasks.priority, tasks.offered_to, tasks.offered_at, tasks.accepted_at, \
         tasks.rejection_reason, tasks.created_at, tasks.last_updated_at, tasks.finished_at, \
         tasks.failure_reason, tasks.output, tasks.progress, tasks.notified_at, tasks.lease_expires_at, \
         tasks.lease_losses, tasks.slack_channel_id, tasks.slack_thread_ts, tasks.slack_user_id, \
         tasks.mention_message_id, tasks.mention_channel_id, tasks.github_repo, tasks.github_event_type, \
         tasks.github_number, tasks.github_comment_id, tasks.github_author, tasks.github_url, \
         tasks.trigger_name, tasks.session_key, tasks.epic_id, tasks.model, \
         ARRAY(SELECT g.tag FROM task_tags g WHERE g.task_id = tasks.id ORDER BY g.position) AS tags, \
         ARRAY(SELECT d.depends_on_task_id FROM task_dependencies d WHERE d.task_id = tasks.id \
               ORDER BY d.position) AS depends_on"
    };
}
pub(crate) use task_returning;

macro_rules! event_select {
    () => {
        "SELECT e.id, e.event_type, e.agent_id, e.task_id, e.old_value, e.new_value, e.metadata, \
         e.created_at FROM events e"
    };
}
pub(crate) use event_select;

macro_rules! session_cost_columns {
    () => {
        "id, session_id, agent_id, task_id, total_cost_usd, input_tokens, output_tokens, \
         cache_read_tokens, cache_write_tokens, duration_ms, num_turns, model, is_error, created_at"
    };
}
pub(crate) use session_cost_columns;

pub(crate) fn agent_from_row(row: PgRow) -> sqlx::Result<Agent> {
    let status: String = row.try_get("status")?;
    let max_tasks: i32 = row.try_get("max_tasks")?;
    Ok(Agent {
        id: AgentId::from_uuid(row.try_get("id")?),
        name: row.try_get("name")?,
        is_lead: row.try_get("is_lead")?,
        status: AgentStatus::parse(&status).map_err(|e| corrupt("status", e))?,
        description: row.try_get("description")?,
        role: row.try_get("role")?,
        capabilities: row.try_get("capabilities")?,
        max_tasks,
        created_at: timestamp(&row, "created_at")?,
        last_updated_at: timestamp(&row, "last_updated_at")?,
        capacity: Capacity::new(row.try_get("in_progress")?, max_tasks),
        status_reason: row.try_get("status_reason")?,
    })
}

pub(crate) fn task_from_row(row: PgRow) -> sqlx::Result<Task> {
    let status: String = row.try_get("status")?;
    let depends_on: Vec<Uuid> = row.try_get("depends_on")?;
    Ok(Task {
        id: TaskId::from_uuid(row.try_get("id")?),
        agent_id: agent_id(&row, "agent_id")?,
        creator_agent_id: agent_id(&row, "creator_agent_id")?,
        task: row.try_get("task")?,
        status: TaskStatus::parse(&status).map_err(|e| corrupt("status", e))?,
        source: row.try_get("source")?,
        task_type: row.try_get("task_type")?,
        tags: row.try_get("tags")?,
        priority: row.try_get("priority")?,
        depends_on: depends_on.into_iter().map(TaskId::from_uuid).collect(),
        offered_to: agent_id(&row, "offered_to")?,
        offered_at: optional_timestamp(&row, "offered_at")?,
        accepted_at: optional_timestamp(&row, "accepted_at")?,
        rejection_reason: row.try_get("rejection_reason")?,
        created_at: timestamp(&row, "created_at")?,
        last_updated_at: timestamp(&row, "last_updated_at")?,
        finished_at: optional_timestamp(&row, "finished_at")?,
        failure_reason: row.try_get("failure_reason")?,
        output: row.try_get("output")?,
        progress: row.try_get("progress")?,
        notified_at: optional_timestamp(&row, "notified_at")?,
        lease_expires_at: optional_timestamp(&row, "lease_expires_at")?,
        lease_losses: row.try_get("lease_losses")?,
        epic_id: row.try_get::<Option<Uuid>, _>("epic_id")?.map(EpicId::from_uuid),
        origin: TaskOrigin {
            slack_channel_id: row.try_get("slack_channel_id")?,
            slack_thread_ts: row.try_get("slack_thread_ts")?,
            slack_user_id: row.try_get("slack_user_id")?,
            mention_message_id: row.try_get("mention_message_id")?,
            mention_channel_id: row.try_get("mention_channel_id")?,
            github_repo: row.try_get("github_repo")?,
            github_event_type: row.try_get("github_event_type")?,
            github_number: row.try_get("github_number")?,
            github_comment_id: row.try_get("github_comment_id")?,
            github_author: row.try_get("github_author")?,
            github_url: row.try_get("github_url")?,
            trigger_name: row.try_get("trigger_name")?,
            session_key: row.try_get("session_key")?,
            model: row.try_get("model")?,
        },
    })
}

pub(crate) fn event_from_row(row: PgRow) -> sqlx::Result<Event> {
    let event_type: String = row.try_get("event_type")?;
    let event_type = EventType::parse(&event_type).ok_or_else(|| {
        corrupt("event_type", swarm_domain::Invalid(format!("unknown event type {event_type:?}")))
    })?;
    let task_id: Option<Uuid> = row.try_get("task_id")?;
    Ok(Event {
        id: EventId::from_uuid(row.try_get("id")?),
        event_type,
        agent_id: agent_id(&row, "agent_id")?,
        task_id: task_id.map(TaskId::from_uuid),
        old_value: row.try_get("old_value")?,
        new_value: row.try_get("new_value")?,
        metadata: row.try_get("metadata")?,
        created_at: timestamp(&row, "created_at")?,
    })
}

pub(crate) fn session_log_from_row(row: PgRow) -> sqlx::Result<SessionLog> {
    let task_id: Option<Uuid> = row.try_get("task_id")?;
    Ok(SessionLog {
        id: row.try_get("id")?,
        session_id: row.try_get("session_id")?,
        iteration: row.try_get("iteration")?,
        task_id: task_id.map(TaskId::from_uuid),
        cli: row.try_get("cli")?,
        line_number: row.try_get("line_number")?,
        content: row.try_get("content")?,
        created_at: timestamp(&row, "created_at")?,
    })
}

pub(crate) fn session_cost_from_row(row: PgRow) -> sqlx::Result<SessionCost> {
    let task_id: Option<Uuid> = row.try_get("task_id")?;
    Ok(SessionCost {
        id: row.try_get("id")?,
        session_id: row.try_get("session_id")?,
        agent_id: AgentId::from_uuid(row.try_get("agent_id")?),
        task_id: task_id.map(TaskId::from_uuid),
        total_cost_usd: row.try_get("total_cost_usd")?,
        input_tokens: row.try_get("input_tokens")?,
        output_tokens: row.try_get("output_tokens")?,
        cache_read_tokens: row.try_get("cache_read_tokens")?,
        cache_write_tokens: row.try_get("cache_write_tokens")?,
        duration_ms: row.try_get("duration_ms")?,
        num_turns: row.try_get("num_turns")?,
        model: row.try_get("model")?,
        is_error: row.try_get("is_error")?,
        created_at: timestamp(&row, "created_at")?,
    })
}

fn agent_id(row: &PgRow, column: &str) -> sqlx::Result<Option<AgentId>> {
    let id: Option<Uuid> = row.try_get(column)?;
    Ok(id.map(AgentId::from_uuid))
}

fn timestamp(row: &PgRow, column: &str) -> sqlx::Result<Timestamp> {
    let at: DateTime<Utc> = row.try_get(column)?;
    Ok(Timestamp::from_datetime(at))
}

fn optional_timestamp(row: &PgRow, column: &str) -> sqlx::Result<Option<Timestamp>> {
    let at: Option<DateTime<Utc>> = row.try_get(column)?;
    Ok(at.map(Timestamp::from_datetime))
}
