//! Talking to the hub when it may be away: which failures are worth retrying, and an
//! exponential backoff that reports itself on the terminal.

use std::{future::Future, time::Duration};

use serde_json::json;
use swarm_client::ClientError;
use tokio_util::sync::CancellationToken;

use crate::view::{View, human_duration};

const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_CAP: Duration = Duration::from_secs(30);

/// True for failures that may pass by themselves: the hub is down, slow, restarting, or
/// answered 5xx. A 4xx is an answer about the request and is not retried.
pub(crate) fn is_transient(err: &ClientError) -> bool {
    match err {
        ClientError::Connect { .. } | ClientError::Timeout { .. } | ClientError::Request { .. } => true,
        ClientError::Status { status, .. } => status.is_server_error(),
        ClientError::InvalidUrl { .. }
        | ClientError::Unauthorized { .. }
        | ClientError::BadResponse { .. } => false,
    }
}

/// Exponential backoff: 0.5 s, 1 s, 2 s, ... capped at 30 s; reset after a success.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    failures: u32,
}

impl Backoff {
    pub fn next_delay(&mut self) -> Duration {
        let delay = BACKOFF_FIRST.saturating_mul(1 << self.failures.min(16)).min(BACKOFF_CAP);
        self.failures = self.failures.saturating_add(1);
        delay
    }

    pub fn failures(&self) -> u32 {
        self.failures
    }

    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

/// Calls `call` until it succeeds or fails for a reason that will not pass, waiting
/// with [`Backoff`] between tries and saying so on the terminal. `None` when `stop` was
/// cancelled first.
pub(crate) async fn with_retry<T, F, Fut>(
    view: &View,
    what: &str,
    stop: &CancellationToken,
    mut call: F,
) -> Option<Result<T, ClientError>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ClientError>>,
{
    let mut backoff = Backoff::default();
    loop {
        let result = tokio::select! {
            _ = stop.cancelled() => return None,
            result = call() => result,
        };
        match result {
            Err(err) if is_transient(&err) => {
                let delay = backoff.next_delay();
                report_retry(view, what, &err, delay, backoff.failures());
                tokio::select! {
                    _ = stop.cancelled() => return None,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
            other => {
                if backoff.failures() > 0 {
                    view.info("hub_back", &format!("the hub answers again ({what})"), &[]);
                }
                return Some(other);
            }
        }
    }
}

pub(crate) fn report_retry(view: &View, what: &str, err: &ClientError, delay: Duration, attempt: u32) {
    view.warn(
        "hub_unreachable",
        &format!("{what} failed: {err}; retrying in {} (attempt {attempt})", human_duration(delay)),
        &[
            ("what", json!(what)),
            ("error", json!(err.to_string())),
            ("retryInMs", json!(delay.as_millis() as u64)),
            ("attempt", json!(attempt)),
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16) -> ClientError {
        ClientError::Status { status: http::StatusCode::from_u16(code).unwrap(), message: String::new() }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let mut backoff = Backoff::default();
        let delays: Vec<_> = (0..9).map(|_| backoff.next_delay().as_millis()).collect();
        assert_eq!(delays, [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), BACKOFF_FIRST);
    }

    #[test]
    fn only_passing_failures_are_retried() {
        assert!(is_transient(&ClientError::Connect { url: "u".into(), reason: "refused".into() }));
        assert!(is_transient(&status(503)));
        assert!(!is_transient(&status(404)));
        assert!(!is_transient(&ClientError::Unauthorized { key_sent: true, message: String::new() }));
    }
}
