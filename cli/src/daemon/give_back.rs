//! The daemon gives the heap's freed pages back to the system after a large answer.
//!
//! glibc's malloc keeps what a thread freed in that thread's arena for its next
//! allocation; a daemon whose blocking-pool threads each built one listing of
//! 10,000 sessions holds every arena's high-water mark for good (RSS 99 MB before
//! the first `herd ps`, about 200 MB after a few). `malloc_trim(0)` returns the
//! free pages inside each arena (`madvise`), not only the top of the main heap.
//! It walks every arena under its lock, so it runs on the blocking pool, off every
//! request's path: once after a burst of large answers, at most once a second
//! however many go out, and always once after the last of them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The least time between two trims.
const TRIM_SPACING: Duration = Duration::from_secs(1);

/// Hands the heap's free pages back after large answers: one trim for every burst
/// of them, at most one per [`TRIM_SPACING`], and always one after the last.
#[derive(Debug)]
pub(crate) struct GiveBack(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    /// When this was made: the clock trims are timed against.
    epoch: Instant,
    /// Milliseconds since `epoch` at the last trim's start (0: none yet).
    last_ms: AtomicU64,
    /// A trim is queued and has not started.
    queued: AtomicBool,
    /// What a trim calls (`sys::memory::trim`; a counter in tests).
    trim: fn(),
}

impl Default for GiveBack {
    fn default() -> GiveBack {
        GiveBack::with_trim(crate::sys::memory::trim)
    }
}

impl GiveBack {
    fn with_trim(trim: fn()) -> GiveBack {
        GiveBack(Arc::new(Shared {
            epoch: Instant::now(),
            last_ms: AtomicU64::new(0),
            queued: AtomicBool::new(false),
            trim,
        }))
    }

    /// A large answer went out and its buffers were freed: queues a trim of the
    /// heap on the blocking pool, unless one is queued and not started (it covers
    /// this answer too). A trim within [`TRIM_SPACING`] of the last waits out the
    /// rest of it. Needs a tokio runtime.
    pub(crate) fn after_large_answer(&self) {
        if self.0.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        let shared = Arc::clone(&self.0);
        drop(tokio::spawn(async move {
            let wait = shared.until_next();
            if !wait.is_zero() {
                debounce(wait).await;
            }
            // Unqueued before the trim starts: an answer freed from here on queues
            // the next one.
            shared.queued.store(false, Ordering::Release);
            shared
                .last_ms
                .store(shared.now_ms().max(1), Ordering::Relaxed);
            drop(tokio::task::spawn_blocking(shared.trim).await);
        }));
    }
}

impl Shared {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// How long until a trim may start.
    fn until_next(&self) -> Duration {
        let last = self.last_ms.load(Ordering::Relaxed);
        if last == 0 {
            return Duration::ZERO;
        }
        let since = Duration::from_millis(self.now_ms().saturating_sub(last));
        TRIM_SPACING.saturating_sub(since)
    }
}

/// Waits `wait` before a trim.
#[expect(
    clippy::disallowed_methods,
    reason = "a rate limit's delay in production code; it synchronises nothing"
)]
async fn debounce(wait: Duration) {
    tokio::time::sleep(wait).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static TRIMS: AtomicUsize = AtomicUsize::new(0);

    fn counted() {
        TRIMS.fetch_add(1, Ordering::SeqCst);
    }

    #[tokio::test]
    async fn a_burst_of_large_answers_costs_one_trim_and_one_after_the_spacing() {
        let give_back = GiveBack::with_trim(counted);
        for _ in 0..10 {
            give_back.after_large_answer();
        }
        herd_test_support::wait::until(Duration::from_secs(10), "the first trim", || {
            TRIMS.load(Ordering::SeqCst) >= 1
        })
        .await;
        // Within the spacing: held back, then one trim for all of them.
        for _ in 0..10 {
            give_back.after_large_answer();
        }
        herd_test_support::wait::until(Duration::from_secs(10), "the trailing trim", || {
            TRIMS.load(Ordering::SeqCst) >= 2 && !give_back.0.queued.load(Ordering::SeqCst)
        })
        .await;
        assert_eq!(TRIMS.load(Ordering::SeqCst), 2, "one trim per burst");
        assert!(
            give_back.0.last_ms.load(Ordering::SeqCst) >= 1000,
            "the second trim waited out the spacing"
        );
    }
}
