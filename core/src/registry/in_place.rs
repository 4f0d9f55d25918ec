//! Blocking store calls that an answer waits on, run where the waiting task runs.
//!
//! A spawn answers only after its running row is committed, and a finish publishes
//! only after its completion is. Handed to the blocking pool, such a commit costs two
//! thread wake-ups on the answer's path: the pool's thread woken to run it, then the
//! runtime's worker woken to go on. On a machine whose idle cores halt (a VM's
//! cores most of all) each is tens of microseconds, as long as the commit itself.
//! On a multi-thread runtime the commit runs instead on the worker that polls the
//! waiting task ([`tokio::task::block_in_place`]): the runtime hands that worker's
//! other tasks to another thread meanwhile, so nothing else waits on the commit, and
//! the task goes on the moment it returns. Elsewhere (a current-thread runtime, as
//! an embedding host or a test may use) it goes to the blocking pool as before.

use std::any::Any;
use std::panic::AssertUnwindSafe;

use tokio::runtime::{Handle, RuntimeFlavor};

/// How a call made by [`run`] ended without its value.
pub(super) enum Unfinished {
    /// It panicked: the panic's payload.
    Panicked(Box<dyn Any + Send + 'static>),
    /// The blocking pool did not run it to its end (the runtime is shutting down).
    Cancelled(String),
}

/// Runs `work`, a blocking call whose result the calling task waits for: in place
/// on a multi-thread runtime's worker, on the blocking pool otherwise (see the
/// module). Like a blocking-pool task, it runs to its end once started even if the
/// caller is dropped meanwhile: in place it runs within one poll.
pub(super) async fn run<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Unfinished> {
    let multi_thread = Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread);
    if multi_thread {
        return tokio::task::block_in_place(|| std::panic::catch_unwind(AssertUnwindSafe(work)))
            .map_err(Unfinished::Panicked);
    }
    tokio::task::spawn_blocking(work)
        .await
        .map_err(Unfinished::from)
}

impl From<tokio::task::JoinError> for Unfinished {
    fn from(error: tokio::task::JoinError) -> Unfinished {
        if error.is_panic() {
            Unfinished::Panicked(error.into_panic())
        } else {
            Unfinished::Cancelled(error.to_string())
        }
    }
}

impl std::fmt::Display for Unfinished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unfinished::Panicked(payload) => {
                let text = payload
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("a panic");
                write!(f, "panicked: {text}")
            }
            Unfinished::Cancelled(why) => f.write_str(why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_on_a_multi_thread_runtime_runs_on_the_waiting_tasks_thread() {
        // From a task on a worker, as the daemon's spawns and finishes call it (the
        // test's own body runs in `block_on`, not on a worker).
        let (caller, ran_on) = tokio::spawn(async {
            let caller = std::thread::current().id();
            (caller, run(|| std::thread::current().id()).await)
        })
        .await
        .expect("the task ends");
        assert!(matches!(ran_on, Ok(id) if id == caller));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_call_on_a_current_thread_runtime_goes_to_the_blocking_pool() {
        let caller = std::thread::current().id();
        let ran_on = run(|| std::thread::current().id()).await;
        assert!(matches!(ran_on, Ok(id) if id != caller));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_in_place_is_the_callers_to_see_and_the_runtime_goes_on() {
        let outcome = run(|| -> u32 { panic!("the store is gone") }).await;
        let Err(unfinished) = outcome else {
            panic!("a panicking call has no value");
        };
        assert_eq!(unfinished.to_string(), "panicked: the store is gone");
        assert!(matches!(run(|| 7).await, Ok(7)));
    }
}
