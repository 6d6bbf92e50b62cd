//! JSON answers.

use axum::{
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;

use crate::error::error_response;

/// Room for a task's JSON (about 1.5 kB) from the start.
const INITIAL_CAPACITY: usize = 2048;

/// A JSON answer, as `axum::Json` writes it, into a buffer that holds a task from the
/// start: axum's starts at 128 bytes and copies a task's JSON four times as it grows.
pub struct Json<T>(pub T);

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        let mut body = Vec::with_capacity(INITIAL_CAPACITY);
        match serde_json::to_writer(&mut body, &self.0) {
            Ok(()) => {
                ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
            }
            Err(error) => error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("the answer could not be written as JSON: {error}"),
            ),
        }
    }
}
