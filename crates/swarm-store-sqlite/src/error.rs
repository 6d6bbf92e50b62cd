//! Turning database errors into the store's outcomes, and values read back that the
//! domain rejects into backend errors rather than panics.

use swarm_store::StoreError;

/// Wrap a database error for the log.
pub(crate) fn db(error: rusqlite::Error) -> StoreError {
    StoreError::Backend(Box::new(error))
}

/// A value read back that the domain rejects.
pub(crate) fn corrupt(message: String) -> StoreError {
    StoreError::Backend(message.into())
}

pub(crate) fn is_foreign_key_violation(error: &rusqlite::Error) -> bool {
    matches!(
        error,
        rusqlite::Error::SqliteFailure(failure, _)
            if failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY
    )
}
