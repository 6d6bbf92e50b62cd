//! Turning database errors into the store's outcomes, and values read back that the
//! domain rejects into backend errors rather than panics.

use swarm_store::StoreError;

/// Wrap a database error: a full disk is the operator's to fix and the client's to
/// retry (the transaction rolled back whole); anything else is for the log.
pub(crate) fn db(error: rusqlite::Error) -> StoreError {
    if let rusqlite::Error::SqliteFailure(failure, _) = &error
        && failure.code == rusqlite::ErrorCode::DiskFull
    {
        return StoreError::Unavailable(DISK_FULL.to_string());
    }
    StoreError::Backend(Box::new(error))
}

pub(crate) const DISK_FULL: &str = "the hub's disk is full: nothing was written. Free space where the \
     SQLite database lives, then retry; reads keep working meanwhile";

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
