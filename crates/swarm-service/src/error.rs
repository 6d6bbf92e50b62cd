use swarm_domain::Invalid;
use swarm_store::StoreError;

pub type ServiceResult<T> = Result<T, ServiceError>;

/// Every way an operation can be refused. Messages are shown to the caller as they
/// are, except `Internal`, whose cause is logged and never sent.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{0}")]
    Invalid(String),
    /// A request that must prove who sent it (a webhook's signature) did not.
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    /// The request is well-formed but the current state does not allow it.
    #[error("{0}")]
    Conflict(String),
    /// The database cannot serve this now (disk full, server unreachable); retry later.
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error")]
    Internal(#[source] StoreError),
}

impl From<Invalid> for ServiceError {
    fn from(invalid: Invalid) -> Self {
        ServiceError::Invalid(invalid.0)
    }
}

impl From<StoreError> for ServiceError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict(message) => ServiceError::Conflict(message),
            StoreError::MissingReference(message) => ServiceError::Invalid(message),
            StoreError::Unavailable(message) => ServiceError::Unavailable(message),
            backend @ StoreError::Backend(_) => ServiceError::Internal(backend),
        }
    }
}
