//! Waiting on events, never on the clock: every test that waits for something to happen
//! asks for it with [`eventually`], which answers as soon as it holds.

use std::{
    process::{Child, Command, ExitStatus},
    sync::mpsc,
    time::{Duration, Instant},
};

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
pub async fn eventually_within<T, F, Fut>(within: Duration, what: &str, probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    eventually_showing(within, what, String::new, probe).await
}

/// [`eventually_within`], failing with what `show` tells at that moment too (a runner's
/// output, the last state seen).
pub async fn eventually_showing<T, F, Fut>(
    within: Duration,
    what: &str,
    show: impl FnOnce() -> String,
    mut probe: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        if Instant::now() >= deadline {
            panic!("timed out waiting for {what}\n{}", show());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits, blocking, for `child` to exit, up to `within`: its exit status, or `None` when
/// it had not exited by then (it is killed with SIGKILL and reaped). For sync code (a
/// `Drop`, a fixture's `wait`), where [`eventually`] cannot run.
pub fn child_exit_within(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let pid = child.id().to_string();
    std::thread::scope(|scope| {
        let (exited_tx, exited_rx) = mpsc::channel();
        let waiter = scope.spawn(move || {
            let status = child.wait();
            let _ = exited_tx.send(());
            status
        });
        let in_time = exited_rx.recv_timeout(within).is_ok();
        if !in_time {
            // The waiting thread returns once the process is gone.
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }
        let status = waiter.join().expect("the waiting thread").ok();
        status.filter(|_| in_time)
    })
}
