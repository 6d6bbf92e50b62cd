//! The one error type of the HTTP adapter: every error leaves as `{"error": "..."}`
//! with the status the reference gives it.

use axum::{
    Json,
    http::StatusCode,
    response::{IntoResponse, Response},
};
use swarm_service::ServiceError;

#[derive(Debug)]
pub enum ApiError {
    BadRequest(String),
    Unauthorized,
    Forbidden(String),
    NotFound(String),
    Conflict(String),
    PayloadTooLarge(String),
    Unavailable(String),
    UnsupportedMediaType(String),
    TooManyRequests(String),
    Internal,
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            ApiError::BadRequest(message)
            | ApiError::Forbidden(message)
            | ApiError::NotFound(message)
            | ApiError::Conflict(message)
            | ApiError::PayloadTooLarge(message)
            | ApiError::Unavailable(message)
            | ApiError::UnsupportedMediaType(message)
            | ApiError::TooManyRequests(message) => message,
            ApiError::Unauthorized => "Unauthorized",
            ApiError::Internal => "internal error: the hub's log has the details",
        }
    }
}

impl From<ServiceError> for ApiError {
    fn from(err: ServiceError) -> Self {
        match err {
            ServiceError::Invalid(message) => ApiError::BadRequest(message),
            ServiceError::Unauthorized(_) => ApiError::Unauthorized,
            ServiceError::Forbidden(message) => ApiError::Forbidden(message),
            ServiceError::NotFound(message) => ApiError::NotFound(message),
            ServiceError::Conflict(message) => ApiError::Conflict(message),
            ServiceError::Unavailable(message) => {
                tracing::warn!(%message, "the database refused a request");
                ApiError::Unavailable(message)
            }
            ServiceError::Internal(source) => {
                tracing::error!(error = %display_chain(&source), "request failed inside the hub");
                ApiError::Internal
            }
        }
    }
}

impl From<swarm_domain::Invalid> for ApiError {
    fn from(invalid: swarm_domain::Invalid) -> Self {
        ApiError::BadRequest(invalid.0)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        error_response(self.status(), self.message())
    }
}

/// The JSON error body, `{"error": "..."}`, as the reference sends it.
#[derive(Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: String,
}

pub fn error_response(status: StatusCode, message: &str) -> Response {
    (status, Json(ErrorBody { error: message.to_string() })).into_response()
}

fn display_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The error answers any API operation may give, for the OpenAPI document. Each carries
/// an [`ErrorBody`].
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // only described, never built: `ApiError` is what handlers return
pub enum ErrorResponses {
    /// Invalid input: malformed JSON, a wrong type, a value out of range, an unknown id
    /// in the body.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// The hub has an API key and the request did not carry it.
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// The caller may not do this (another agent's task, not the lead or the creator).
    #[response(status = 403)]
    Forbidden(ErrorBody),
    /// The task or agent in the path does not exist.
    #[response(status = 404)]
    NotFound(ErrorBody),
    /// The current state does not allow it (wrong status, name taken, capacity, dependencies).
    #[response(status = 409)]
    Conflict(ErrorBody),
    /// The request body is larger than the hub accepts.
    #[response(status = 413)]
    PayloadTooLarge(ErrorBody),
    /// A body was sent without `Content-Type: application/json`.
    #[response(status = 415)]
    UnsupportedMediaType(ErrorBody),
    /// The database cannot serve this now (its disk is full, its server unreachable):
    /// nothing was changed; retry later. Also: the hub is at its connection limit.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}
