//! Talking to the hub when it may be away: which failures are worth retrying, and an
//! exponential backoff with full jitter that reports itself on the terminal.

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

/// Exponential backoff with full jitter: each delay is drawn at random between 0 and a
/// ceiling of 0.5 s, 1 s, 2 s, ... capped at 30 s; reset after a success. A hub that
/// restarts under a thousand runners sees their retries spread over the ceiling, not
/// arriving together at every step (AWS's "Exponential Backoff And Jitter").
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    failures: u32,
}

impl Backoff {
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceiling();
        self.failures = self.failures.saturating_add(1);
        let ceiling_ms = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(fastrand::u64(0..=ceiling_ms))
    }

    /// The most the next delay may be.
    fn ceiling(&self) -> Duration {
        BACKOFF_FIRST.saturating_mul(1 << self.failures.min(16)).min(BACKOFF_CAP)
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
    fn backoff_ceilings_double_up_to_the_cap_and_each_delay_is_below_its_ceiling() {
        let mut backoff = Backoff::default();
        let mut ceilings = Vec::new();
        for _ in 0..9 {
            let ceiling = backoff.ceiling();
            ceilings.push(ceiling.as_millis());
            assert!(backoff.next_delay() <= ceiling);
        }
        assert_eq!(ceilings, [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
        assert_eq!(backoff.failures(), 9);
        backoff.reset();
        assert_eq!(backoff.ceiling(), BACKOFF_FIRST);
    }

    /// A thousand runners that lost the hub at the same moment do not come back together:
    /// their delays after the same number of failures spread over the whole ceiling.
    #[test]
    fn a_thousand_runners_backing_off_together_spread_their_retries() {
        let delays: Vec<u128> = (0..1_000)
            .map(|_| {
                let mut backoff = Backoff::default();
                (0..7).map(|_| backoff.next_delay()).last().unwrap().as_millis()
            })
            .collect();
        let in_each_tenth = |tenth: u128| delays.iter().filter(|ms| **ms / 3_000 == tenth).count();
        for tenth in 0..10 {
            let count = in_each_tenth(tenth);
            assert!(count > 40, "{count} of 1,000 retries in the {tenth}th tenth of 30 s");
        }
        let same_second =
            (0..30).map(|second| delays.iter().filter(|ms| **ms / 1_000 == second).count()).max();
        assert!(same_second < Some(100), "at most {same_second:?} retries in one second");
    }

    #[test]
    fn only_passing_failures_are_retried() {
        assert!(is_transient(&ClientError::Connect { url: "u".into(), reason: "refused".into() }));
        assert!(is_transient(&status(503)));
        assert!(!is_transient(&status(404)));
        assert!(!is_transient(&ClientError::Unauthorized { key_sent: true, message: String::new() }));
    }
}
