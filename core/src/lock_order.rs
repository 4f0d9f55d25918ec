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
//! Every other blocking mutex of this crate (the durable rooms' queues and maps, the
//! shim link's pending replies, the dispatch cache, a session's terminal count, …) is
//! this module's [`Mutex`] too, unranked, and checked by a lock graph instead: in
//! debug builds each mutex belongs to the class of the place that made it
//! (`Mutex::new`'s caller; every session's `state` is one class), and each time a
//! thread takes a lock while holding others, the edge "held → taken" joins one graph
//! for the whole process. Taking a lock that would close a circle in that graph (some
//! thread, some time, took them the other way round, directly or through others)
//! panics before it blocks, naming the places both locks were made and the earlier
//! path; so does taking a second lock of a class already held. A test suite is one
//! process, so two tests that each take a pair of locks in a different order fail
//! even though neither deadlocked. `cargo xtask lint` refuses `std::sync::Mutex` in
//! this crate outside this file, so no mutex escapes the graph ([`foreign`] makes the
//! one another crate's trait needs). `tokio::sync::Mutex` (held across `.await`,
//! awaited rather than blocked on) is not covered. Release builds only take the lock.
//!
//! The ranked levels stay: [`Ordered::acquire`] checks, in debug builds, that every
//! ranked lock this thread holds comes earlier in the order, and panics naming both
//! otherwise: a ranked pair is refused the first time it is taken the wrong way, not
//! only once both ways have been seen.

use std::ops::{Deref, DerefMut};
use std::sync::{LockResult, PoisonError};

/// A lock's place in the order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    Tables = 1,
    Agents = 2,
    Session = 3,
    Notifier = 4,
    Tail = 5,
}

/// A blocking mutex whose acquisitions join the lock graph in debug builds (see the
/// module docs). Same interface as `std::sync::Mutex` for what this crate uses.
#[derive(Debug)]
pub(crate) struct Mutex<T> {
    #[cfg(debug_assertions)]
    class: graph::Class,
    inner: std::sync::Mutex<T>,
}

/// A guard of a [`Mutex`].
#[derive(Debug)]
pub(crate) struct MutexGuard<'a, T> {
    guard: std::sync::MutexGuard<'a, T>,
    #[cfg(debug_assertions)]
    class: graph::Class,
}

impl<T> Mutex<T> {
    /// A mutex of the class of the caller's source location.
    #[track_caller]
    pub(crate) fn new(value: T) -> Mutex<T> {
        Mutex {
            #[cfg(debug_assertions)]
            class: graph::Class::here(),
            inner: std::sync::Mutex::new(value),
        }
    }

    /// Takes the lock; in debug builds, panics first if taking it here could
    /// deadlock against an order seen before.
    pub(crate) fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        #[cfg(debug_assertions)]
        graph::before_taking(self.class);
        let wrap = |guard| MutexGuard {
            guard,
            #[cfg(debug_assertions)]
            class: self.class,
        };
        let taken = match self.inner.lock() {
            Ok(g) => Ok(wrap(g)),
            Err(poisoned) => Err(PoisonError::new(wrap(poisoned.into_inner()))),
        };
        #[cfg(debug_assertions)]
        graph::taken(self.class);
        taken
    }
}

impl<T: Default> Default for Mutex<T> {
    #[track_caller]
    fn default() -> Mutex<T> {
        Mutex::new(T::default())
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        #[cfg(debug_assertions)]
        graph::released(self.class);
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

/// A plain `std::sync::Mutex`, for the one place another crate's trait is
/// implemented on it (`herd_persistence::CompletionLedger for Mutex<Ledger>`): its
/// lock is taken inside that crate, which calls nothing of this one while holding it,
/// so it is always the innermost lock and cannot close a circle.
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
pub(crate) fn foreign<T>(value: T) -> std::sync::Mutex<T> {
    std::sync::Mutex::new(value)
}

#[cfg(debug_assertions)]
thread_local! {
    /// The ranked levels this thread holds, in the order taken.
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

/// The process-wide lock graph of debug builds.
#[cfg(debug_assertions)]
mod graph {
    use std::cell::RefCell;
    use std::collections::{HashMap, HashSet};
    use std::panic::Location;
    use std::sync::{Mutex, PoisonError};

    /// A lock class: where its mutex was made.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub(super) struct Class(&'static Location<'static>);

    impl Class {
        #[track_caller]
        pub(super) fn here() -> Class {
            Class(Location::caller())
        }
    }

    impl std::fmt::Display for Class {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}:{}", self.0.file(), self.0.line())
        }
    }

    /// Every edge "held → taken" any thread has made.
    static EDGES: Mutex<Option<HashMap<Class, HashSet<Class>>>> = Mutex::new(None);

    thread_local! {
        /// The classes this thread holds, in the order taken.
        static HOLDING: RefCell<Vec<Class>> = const { RefCell::new(Vec::new()) };
        /// The edges this thread has already put in the graph (skips the global lock).
        static KNOWN: RefCell<HashSet<(Class, Class)>> = RefCell::new(HashSet::new());
    }

    /// Checks taking a lock of `class` against what this thread holds and the graph;
    /// panics on a circle or a second lock of one class.
    pub(super) fn before_taking(class: Class) {
        let holding: Vec<Class> = HOLDING.with(|h| h.borrow().clone());
        if holding.contains(&class) {
            panic!(
                "lock order violated: taking a second lock made at {class} while holding one \
                 (two locks of one class are never held at once; see core/src/lock_order.rs)"
            );
        }
        for held in holding {
            if KNOWN.with(|k| k.borrow().contains(&(held, class))) {
                continue;
            }
            let circle = {
                let mut edges = EDGES.lock().unwrap_or_else(PoisonError::into_inner);
                let edges = edges.get_or_insert_with(HashMap::new);
                let circle = path(edges, class, held);
                if circle.is_none() {
                    edges.entry(held).or_default().insert(class);
                }
                circle
            };
            if let Some(circle) = circle {
                let earlier: Vec<String> = circle.iter().map(ToString::to_string).collect();
                panic!(
                    "lock order violated: taking the lock made at {class} while holding the \
                     lock made at {held}, but locks were taken the other way before: {} \
                     (a deadlock waiting to happen; see core/src/lock_order.rs)",
                    earlier.join(" -> ")
                );
            }
            KNOWN.with(|k| k.borrow_mut().insert((held, class)));
        }
    }

    /// A path of edges from `from` to `to`, if the graph has one.
    fn path(edges: &HashMap<Class, HashSet<Class>>, from: Class, to: Class) -> Option<Vec<Class>> {
        let mut came_from: HashMap<Class, Class> = HashMap::new();
        let mut stack = vec![from];
        while let Some(at) = stack.pop() {
            for &next in edges.get(&at).into_iter().flatten() {
                if next == from || came_from.contains_key(&next) {
                    continue;
                }
                came_from.insert(next, at);
                if next == to {
                    let mut out = vec![to];
                    let mut at = to;
                    while at != from {
                        at = came_from[&at];
                        out.push(at);
                    }
                    out.reverse();
                    return Some(out);
                }
                stack.push(next);
            }
        }
        None
    }

    pub(super) fn taken(class: Class) {
        HOLDING.with(|h| h.borrow_mut().push(class));
    }

    pub(super) fn released(class: Class) {
        HOLDING.with(|h| {
            let mut h = h.borrow_mut();
            if let Some(at) = h.iter().rposition(|&c| c == class) {
                h.remove(at);
            }
        });
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

    fn panic_message(f: impl FnOnce()) -> String {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .expect_err("the acquisition must panic")
            .downcast::<String>()
            .map(|m| *m)
            .unwrap_or_default()
    }

    #[test]
    fn unranked_locks_taken_both_ways_round_panic_naming_both() {
        let a = Mutex::new(());
        let b = Mutex::new(());
        let c = Mutex::new(());
        {
            // One thread: a then b, b then c.
            let _a = a.lock();
            let _b = b.lock();
        }
        std::thread::scope(|s| {
            s.spawn(|| {
                let _b = b.lock();
                let _c = c.lock();
            });
        });
        // Another order on another thread, later, closing a -> b -> c -> a: refused
        // although nothing ever deadlocked.
        let message = std::thread::scope(|s| {
            s.spawn(|| {
                panic_message(|| {
                    let _c = c.lock();
                    let _a = a.lock();
                })
            })
            .join()
            .expect("the thread returns the message")
        });
        assert!(
            message
                .contains("lock order violated: taking the lock made at core/src/lock_order.rs:"),
            "{message}"
        );
        assert!(
            message.matches(" -> ").count() == 2,
            "the path a -> b -> c: {message}"
        );
        // The same pair in the known order still passes.
        let _a = a.lock();
        let _b = b.lock();
    }

    #[test]
    fn a_second_lock_of_one_class_panics() {
        let made: Vec<Mutex<u8>> = (0..2).map(Mutex::new).collect();
        let _first = made[0].lock();
        let message = panic_message(|| {
            let _second = made[1].lock();
        });
        assert!(
            message.contains("taking a second lock made at"),
            "{message}"
        );
    }

    #[test]
    fn the_durable_rooms_locks_are_in_the_graph() {
        // A lock of the crate's own kind taken under the table lock joins the graph
        // (before this module, those durable locks were plain, unchecked mutexes).
        let tables = Mutex::new(());
        let durable = Mutex::new(());
        {
            let _t = Ordered::acquire(Level::Tables, &tables);
            let _d = durable.lock();
        }
        let message = panic_message(|| {
            let _d = durable.lock();
            let _t = Ordered::acquire(Level::Tables, &tables);
        });
        assert!(
            message.contains("locks were taken the other way before"),
            "{message}"
        );
    }
}
