//! Turning database errors into the store's outcomes.
//!
//! Constraint names come from `migrations/`; a violation the caller can cause gets a
//! message fit for a user, anything else stays a backend error for the log.

use sqlx::error::ErrorKind;
use swarm_store::StoreError;

/// Maps a sqlx error: unique violations become `Conflict`, foreign key violations
/// `MissingReference`, everything else `Backend`.
pub(crate) fn db(err: sqlx::Error) -> StoreError {
    let Some(database_error) = err.as_database_error() else {
        if matches!(err, sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed) {
            return StoreError::Unavailable(format!(
                "the PostgreSQL server cannot be reached ({err}): nothing was changed; retry when it is back"
            ));
        }
        return StoreError::Backend(Box::new(err));
    };
    // Class 08 (connection exception) and 57P0x (the server shutting down or restarting).
    let code = database_error.code().unwrap_or_default();
    if code.starts_with("08") || code.starts_with("57P0") {
        return StoreError::Unavailable(format!(
            "the PostgreSQL server went away ({}): nothing was changed; retry when it is back",
            database_error.message()
        ));
    }
    let constraint = database_error.constraint().unwrap_or_default();
    match database_error.kind() {
        ErrorKind::UniqueViolation => StoreError::Conflict(unique_message(constraint).to_string()),
        ErrorKind::ForeignKeyViolation => {
            StoreError::MissingReference(foreign_key_message(constraint).to_string())
        }
        _ => StoreError::Backend(Box::new(err)),
    }
}

/// The constraint a database error names, if it is a database error at all.
pub(crate) fn violated_constraint(err: &sqlx::Error) -> Option<String> {
    err.as_database_error().and_then(|e| e.constraint()).map(str::to_string)
}

/// A value read back that the domain does not know (a status written by a newer version,
/// a hand-edited row): reported as a decode error, never a panic.
pub(crate) fn corrupt(column: &str, err: impl std::error::Error + Send + Sync + 'static) -> sqlx::Error {
    sqlx::Error::ColumnDecode { index: column.to_string(), source: Box::new(err) }
}

/// A row this transaction just wrote is gone: a broken invariant, not a user's mistake.
pub(crate) fn vanished(what: &str, id: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("{what} {id} vanished inside its own transaction").into())
}

fn unique_message(constraint: &str) -> &'static str {
    match constraint {
        "agents_name_key" => "that agent name is taken",
        "agents_pkey" => "an agent with that id already exists",
        "tasks_pkey" => "a task with that id already exists",
        _ => "that value is already taken",
    }
}

fn foreign_key_message(constraint: &str) -> &'static str {
    match constraint {
        "tasks_agent_id_fkey" => "the agent (agentId) does not exist",
        "tasks_offered_to_fkey" => "the agent (offeredTo) does not exist",
        "task_dependencies_depends_on_task_id_fkey" => "a task named in dependsOn does not exist",
        "task_tags_task_id_fkey" | "task_dependencies_task_id_fkey" => "the task does not exist",
        _ => "a referenced row does not exist",
    }
}
