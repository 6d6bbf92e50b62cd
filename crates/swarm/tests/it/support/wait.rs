//! Waiting on events, never on the clock: every test that waits for something to happen
//! asks for it with [`eventually`], which answers as soon as it holds.

use std::time::{Duration, Instant};

/// How long anything a test waits for may take before the test fails. Generous: these
/// machines are shared and slow, and a passing test never waits for the deadline.
pub const WITHIN: Duration = Duration::from_secs(30);

/// Polls `probe` every 50 ms until it answers `Some`, up to [`WITHIN`]; fails the test
/// with `what` when it never does.
pub async fn eventually<T, F, Fut>(what: &str, probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    eventually_within(WITHIN, what, probe).await
}

/// [`eventually`] with a deadline of its own, for what is slow by nature (a real agent
/// CLI starting, talking to its model and exiting).
pub async fn eventually_within<T, F, Fut>(within: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
