//! The lock order, written down once and checked in debug builds.
//!
//! Locks are taken in this order, never against it, and none is held across an
//! `.await` (the guards are `!Send`):
//!
//! 1. [`Level::Tables`]: the session table (running, finished, owners' queues);
//! 2. [`Level::Agents`]: parent and child agents (`registry::agents`);
//! 3. [`Level::Session`]: one session's lifecycle state;
//! 4. [`Level::Notifier`]: watch breaker and heartbeat schedule (`registry::notify`);
//! 5. [`Level::Tail`]: one session's output tail.
//!
//! Two locks of one level are never held at once. Nothing slow or foreign (output
//! plugins, fsync, SQLite, `/proc` scans) runs under [`Level::Tables`].
//!
//! In debug builds every acquisition through [`Ordered::acquire`] checks, before it
//! blocks, that every lock this thread holds comes earlier in the order, and
//! panics naming both otherwise, so a test that takes locks the wrong way fails at
//! once instead of deadlocking one day under load. Release builds only take the
//! lock.

use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A lock's place in the order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    Tables = 1,
    Agents = 2,
    Session = 3,
    Notifier = 4,
    Tail = 5,
}

#[cfg(debug_assertions)]
thread_local! {
    /// The levels this thread holds, in the order taken.
    static HELD: std::cell::RefCell<Vec<Level>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A guard of a lock taken in order.
#[derive(Debug)]
pub(crate) struct Ordered<'a, T> {
    guard: MutexGuard<'a, T>,
    #[cfg(debug_assertions)]
    level: Level,
}

impl<'a, T> Ordered<'a, T> {
    /// Takes `mutex`, a lock at `level`. A poisoned lock still holds consistent
    /// data (every critical section only assigns fields), so poisoning is ignored.
    pub(crate) fn acquire(level: Level, mutex: &'a Mutex<T>) -> Ordered<'a, T> {
        // Only debug builds check (and record) the level.
        #[cfg(not(debug_assertions))]
        let _ = level;
        #[cfg(debug_assertions)]
        HELD.with(|held| {
            if let Some(&later) = held.borrow().iter().find(|&&h| h >= level) {
                panic!(
                    "lock order violated: taking {level:?} while holding {later:?} \
                     (the order is tables, agents, session, notifier, tail; see lock_order.rs)"
                );
            }
        });
        let guard = mutex.lock().unwrap_or_else(PoisonError::into_inner);
        #[cfg(debug_assertions)]
        HELD.with(|held| held.borrow_mut().push(level));
        Ordered {
            guard,
            #[cfg(debug_assertions)]
            level,
        }
    }
}

impl<T> Drop for Ordered<'_, T> {
    fn drop(&mut self) {
        #[cfg(debug_assertions)]
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(at) = held.iter().rposition(|&h| h == self.level) {
                held.remove(at);
            }
        });
    }
}

impl<T> Deref for Ordered<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for Ordered<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    #[test]
    fn locks_taken_in_order_pass_and_against_it_panic() {
        let tables = Mutex::new(1);
        let session = Mutex::new(2);
        {
            let _t = Ordered::acquire(Level::Tables, &tables);
            let _s = Ordered::acquire(Level::Session, &session);
        }
        // Released: taking them again in order is fine.
        let s = Ordered::acquire(Level::Session, &session);
        let against = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _t = Ordered::acquire(Level::Tables, &tables);
        }));
        let message = against
            .expect_err("tables after session must panic")
            .downcast::<String>()
            .map(|m| *m)
            .unwrap_or_default();
        assert!(
            message.contains("taking Tables while holding Session"),
            "{message}"
        );
        drop(s);
        let _t = Ordered::acquire(Level::Tables, &tables);
    }
}
