//! Waiting on a condition with a deadline: tests never sleep a fixed time to
//! synchronise; they poll what they wait for and fail, naming it, when a generous
//! deadline passes.

use std::time::{Duration, Instant};

/// The condition did not hold before the deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedOut;

/// Polls `cond` every 10 ms on this thread until it holds or `deadline` passes;
/// it is asked once more at the deadline.
///
/// # Errors
/// [`TimedOut`] when it still does not hold then.
pub fn poll_until(deadline: Duration, mut cond: impl FnMut() -> bool) -> Result<(), TimedOut> {
    let end = Instant::now() + deadline;
    while Instant::now() < end {
        if cond() {
            return Ok(());
        }
        std::thread::park_timeout(Duration::from_millis(10));
    }
    if cond() { Ok(()) } else { Err(TimedOut) }
}

/// Polls `cond` every 5 ms on the runtime until it holds.
///
/// # Panics
/// After `limit`, naming `what` was waited for.
pub async fn until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        // A pause between polls, not a synchronisation: the condition decides.
        let _ = tokio::time::timeout(Duration::from_millis(5), std::future::pending::<()>()).await;
    }
}
