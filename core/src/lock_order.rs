//! The lock order, written down once and checked in debug builds.
//!
//! Every blocking mutex of this crate is this module's [`Mutex`], whose type names
//! its rank: `Mutex<T, { rank::X }>` (a mutex without a rank does not compile).
//! Locks are taken in rank order, outermost first, never against it, and none is
//! held across an `.await` (the guards are `!Send`). The order, in [`rank`]:
//!
//! 1. the checkpoint writer's serialisation (held across one write, which reads
//!    the table);
//! 2. the session table (running, finished, owners' queues), then parent and
//!    child agents, then the checkpoint's per-session extras;
//! 3. one session's lifecycle state, then the notifier (watch breaker, heartbeat
//!    schedule), then one session's output tail;
//! 4. the leaves, which take nothing under them: the queue room's state and
//!    latency figures, the durable rooms' ledger, checkpoint queue and receipt
//!    sets, their notes, the recommits, the acknowledged ids, a session's
//!    terminal count and PTY master, the spare shim directories, the shim link's
//!    pending replies, the dispatcher's cache, the usage reads' caches;
//! 5. the daemon's (herd-cli's `daemon` module): the far hosts' links, then a
//!    link's save serialisation, its book of jobs, its status, proxy environment,
//!    far capabilities and kept doors, a multiplexed door's channels, the
//!    connection slots and the spawn keys. None is held while the daemon calls the
//!    registry, and the registry calls nothing of the daemon's, so they rank after
//!    every lock of this crate; ranked in one list, a nesting across the two
//!    crates is checked all the same (one thread, one record of the ranks held).
//!
//! herd's binaries reach this module with the `internals` feature, narrowly: the
//! [`Mutex`] (`new`, `acquire`), its guard and the daemon's ranks are public; the
//! crate's own ranks, the poisoning `lock` and [`foreign`] are not.
//!
//! In debug builds each thread keeps the ranks it holds, and taking a lock while
//! holding one of the same or a later rank panics before it blocks, naming both:
//! a wrong order is refused the first time it is taken, on any thread, not only
//! once it deadlocks. Two locks of one rank are never held at once (so every
//! session's `state` is one rank, and two sessions' states never nest). The ranks
//! are distinct numbers (`rank::name` matches on them, and a duplicate is an
//! unreachable pattern, which clippy refuses). Nothing slow or foreign (output
//! plugins, fsync, SQLite, `/proc` scans) runs under the table lock.
//!
//! The async mutexes (`tokio::sync::Mutex`, held across `.await`, awaited rather than
//! blocked on) are ranked too, as [`AsyncMutex`]`<T, { rank::X }>`: each is held
//! while a connection or a child is set up or a frame is written, and nothing but
//! blocking locks of later ranks is taken under it, so they come before the blocking
//! ranks they hold (the launcher's connection and stdin, the dispatcher's probe gate)
//! or right before the daemon's (a far host's control door and mux door). Their
//! holding crosses `.await`s and threads, so it is not recorded per thread; what debug
//! builds check is the other half: awaiting one while this thread holds a blocking lock
//! of its rank or a later one panics, as for a blocking lock.
//!
//! The daemon's own log writer (herd-cli's `daemon_log`) is the last rank of all: any
//! code may emit a tracing event while it holds any lock, and the writer takes nothing
//! under it.
//!
//! Locks of the leaf crates the daemon runs (they cannot name this module: nothing of
//! herd is below them) are innermost by construction, each taken and released inside
//! one call of its crate, which calls nothing of herd-core meanwhile:
//! - herd-persistence: each store's handle (`lazy_db`, `checkpoint`, `receipts`,
//!   `running`, `queue`, `memory`: one SQLite connection or one in-memory map), the
//!   receipts' prune hint (taken under that store's handle, never around it), and the
//!   completion ledger's (`stores`, [`foreign`]);
//! - herd-hooks: a pipeline entry's state (`pipeline`: its statistics and breaker,
//!   never held while a hook runs) and a plugin's init handshake (`loader::start`: a
//!   condvar's lock, held by the loader's thread and the init thread alone).
//!
//! `cargo xtask lint` refuses `std::sync::Mutex` and `tokio::sync::Mutex` (and either
//! crate's `RwLock`) in this crate outside this module and in herd-cli's daemon
//! modules (`daemon` and everything under it, `daemon_log`), and a mutex in a module
//! of the leaf crates not listed above, so no mutex escapes the ranks ([`foreign`] makes the
//! one another crate's trait needs: always innermost, its lock is taken inside that
//! crate). Release builds only take the lock.

use std::ops::{Deref, DerefMut};
use std::sync::{LockResult, PoisonError};

/// Every blocking mutex's rank: a mutex is `Mutex<T, { rank::X }>`, and a lock is
/// taken only while every lock this thread holds has a lower rank. Two locks of
/// one rank are never held at once. Outermost first.
pub mod rank {
    /// The shim launcher's connection (async: held while a launcher is started):
    /// `shim::link::launch`.
    pub(crate) const LAUNCHER_CONN: u8 = 1;
    /// The shim launcher's stdin (async: held while one launch spec is written):
    /// `shim::link::launch`.
    pub(crate) const LAUNCHER_STDIN: u8 = 2;
    /// The dispatcher's probe gate (async: one availability probe at a time):
    /// `dispatch`.
    pub(crate) const DISPATCH_PROBE: u8 = 3;
    /// The checkpoint writer's serialisation, held across one whole write (which
    /// reads the table): `durable::checkpoint`.
    pub(crate) const CHECKPOINT_SERIAL: u8 = 5;
    /// The session table (running, finished, owners' queues): `registry::table`.
    pub(crate) const TABLES: u8 = 10;
    /// Parent and child agents and their handoffs: `registry::agents`.
    pub(crate) const AGENTS: u8 = 20;
    /// The checkpoint's per-session extras (read with each session's state):
    /// `durable::checkpoint`.
    pub(crate) const CHECKPOINT_EXTRAS: u8 = 25;
    /// One session's lifecycle state: `session::Session::state`.
    pub(crate) const SESSION: u8 = 30;
    /// Watch breaker and heartbeat schedule: `registry::notify`.
    pub(crate) const NOTIFIER: u8 = 40;
    /// One session's output tail: `session::Session::tail`.
    pub(crate) const TAIL: u8 = 50;
    /// The queue room's state (groups, waiting jobs): `registry::queue`.
    pub(crate) const QUEUE: u8 = 60;
    /// The queue's latency figures: `registry::queue`.
    pub(crate) const QUEUE_LATENCY: u8 = 62;
    /// The checkpoint's queue of requested writes: `durable::checkpoint`.
    pub(crate) const CHECKPOINT: u8 = 71;
    /// The checkpoint's deferred write: `durable::checkpoint`.
    pub(crate) const CHECKPOINT_DEFERRED: u8 = 73;
    /// The checkpoint's finished ids: `durable::checkpoint`.
    pub(crate) const CHECKPOINT_FINISHED: u8 = 74;
    /// The receipt writer's queue: `durable::receipts`.
    pub(crate) const RECEIPTS: u8 = 75;
    /// The receipts not written yet: `durable::receipts`.
    pub(crate) const RECEIPTS_UNWRITTEN: u8 = 76;
    /// The receipts being attempted: `durable::receipts`.
    pub(crate) const RECEIPTS_ATTEMPTING: u8 = 77;
    /// The completion ledger's slot: `durable::ledger`.
    pub(crate) const LEDGER: u8 = 68;
    /// The completion ledger's replay state: `durable::ledger`.
    pub(crate) const LEDGER_REPLAY: u8 = 69;
    /// The durable room's notes of detached sessions: `registry::durable`.
    pub(crate) const DURABLE_DETACHED: u8 = 78;
    /// The durable room's notes of sessions: `registry::durable`.
    pub(crate) const DURABLE_NOTES: u8 = 79;
    /// Completions whose ledger commit failed: `registry::recommit`.
    pub(crate) const RECOMMITS: u8 = 80;
    /// Event ids acknowledged by id lately: `registry::delivery`.
    pub(crate) const ACKED: u8 = 82;
    /// A session's count of attached terminals: `session::Session::terminals`.
    pub(crate) const TERMINALS: u8 = 84;
    /// A PTY master's handle: `spawn`.
    pub(crate) const MASTER: u8 = 86;
    /// The spare shim directories kept for reuse: `registry::shims`.
    pub(crate) const SHIM_SPARES: u8 = 87;
    /// The shim link's pending replies: `shim::link`.
    pub(crate) const SHIM_PENDING: u8 = 88;
    /// The shim pool's waiting members: `shim::link::pool`.
    pub(crate) const SHIM_POOL: u8 = 89;
    /// The dispatcher's cached verdict: `dispatch`.
    pub(crate) const DISPATCH_CACHE: u8 = 90;
    /// The launches waiting for their supervisor's claim: `shim::link::pool`.
    pub(crate) const SHIM_CLAIMS: u8 = 91;
    /// The v1 memory cgroup directory found for usage reads: `sys::usage`.
    pub(crate) const USAGE_V1_BASE: u8 = 92;
    /// A session's last usage sample: `sys::usage::UsageCache`.
    pub(crate) const USAGE_SAMPLE: u8 = 94;
    /// What the last log read-outs showed: `registry::readout::memo`.
    pub(crate) const READOUT_MEMOS: u8 = 95;

    /// A far host link's control door (async: held while the door is opened):
    /// herd-cli `daemon::hosts`.
    pub const DAEMON_HOST_CONTROL: u8 = 96;
    /// A far host link's mux door (async: held while the door is opened and a
    /// channel greeted): herd-cli `daemon::hosts`.
    pub const DAEMON_HOST_MUX: u8 = 97;
    /// The daemon's far hosts' links (held across reading a link's saved map):
    /// herd-cli `daemon::hosts`.
    pub const DAEMON_HOST_LINKS: u8 = 100;
    /// A far host link's save serialisation (held across the write, which reads
    /// the book): herd-cli `daemon::hosts`.
    pub const DAEMON_HOST_SAVING: u8 = 102;
    /// A far host link's book of jobs: herd-cli `daemon::hosts`.
    pub const DAEMON_HOST_BOOK: u8 = 104;
    /// A far host link's status: herd-cli `daemon::hosts`.
    pub const DAEMON_HOST_STATUS: u8 = 106;
    /// A far host link's proxy environment: herd-cli `daemon::hosts`.
    pub const DAEMON_HOST_PROXY_ENV: u8 = 108;
    /// A far host link's capabilities: herd-cli `daemon::hosts`.
    pub const DAEMON_HOST_CAPABILITIES: u8 = 110;
    /// A far host link's doors kept for reuse: herd-cli `daemon::hosts`.
    pub const DAEMON_HOST_KEPT_DOORS: u8 = 112;
    /// A multiplexed door's channels: herd-cli `daemon::hosts::mux`.
    pub const DAEMON_MUX_CHANNELS: u8 = 114;
    /// The connections being served: herd-cli `daemon::connection::slots`.
    pub const DAEMON_SLOTS: u8 = 116;
    /// The spawn keys of recent spawns: herd-cli `daemon::methods::keys`.
    pub const DAEMON_SPAWN_KEYS: u8 = 118;
    /// The daemon's log writer, last of all: a tracing event may be emitted under any
    /// lock, and the writer takes none: herd-cli `daemon_log`.
    pub const DAEMON_LOG: u8 = 250;

    /// The name of a rank, for messages (only debug builds check the order).
    #[cfg_attr(not(debug_assertions), allow(dead_code))]
    pub(crate) fn name(rank: u8) -> &'static str {
        match rank {
            LAUNCHER_CONN => "launcher connection",
            LAUNCHER_STDIN => "launcher stdin",
            DISPATCH_PROBE => "dispatch probe gate",
            CHECKPOINT_SERIAL => "checkpoint serial",
            TABLES => "tables",
            AGENTS => "agents",
            SESSION => "session",
            NOTIFIER => "notifier",
            TAIL => "tail",
            QUEUE => "queue",
            QUEUE_LATENCY => "queue latency",
            CHECKPOINT => "checkpoint",
            CHECKPOINT_EXTRAS => "checkpoint extras",
            CHECKPOINT_DEFERRED => "checkpoint deferred",
            CHECKPOINT_FINISHED => "checkpoint finished ids",
            RECEIPTS => "receipts",
            RECEIPTS_UNWRITTEN => "receipts unwritten",
            RECEIPTS_ATTEMPTING => "receipts attempting",
            LEDGER_REPLAY => "ledger replay",
            LEDGER => "ledger",
            DURABLE_DETACHED => "durable detached notes",
            DURABLE_NOTES => "durable notes",
            RECOMMITS => "recommits",
            ACKED => "acked",
            TERMINALS => "terminals",
            MASTER => "pty master",
            SHIM_PENDING => "shim pending",
            SHIM_SPARES => "spare shim directories",
            SHIM_POOL => "shim pool",
            DISPATCH_CACHE => "dispatch cache",
            SHIM_CLAIMS => "shim claims",
            USAGE_V1_BASE => "usage v1 base",
            USAGE_SAMPLE => "usage sample",
            READOUT_MEMOS => "readout memos",
            DAEMON_HOST_CONTROL => "daemon host control door",
            DAEMON_HOST_MUX => "daemon host mux door",
            DAEMON_HOST_LINKS => "daemon host links",
            DAEMON_HOST_SAVING => "daemon host saving",
            DAEMON_HOST_BOOK => "daemon host book",
            DAEMON_HOST_STATUS => "daemon host status",
            DAEMON_HOST_PROXY_ENV => "daemon host proxy env",
            DAEMON_HOST_CAPABILITIES => "daemon host capabilities",
            DAEMON_HOST_KEPT_DOORS => "daemon host kept doors",
            DAEMON_MUX_CHANNELS => "daemon mux channels",
            DAEMON_SLOTS => "daemon connection slots",
            DAEMON_SPAWN_KEYS => "daemon spawn keys",
            DAEMON_LOG => "daemon log",
            _ => "unnamed",
        }
    }
}

/// A blocking mutex of rank `RANK` (see [`rank`]) whose acquisitions are checked
/// against the ranks this thread holds and join the lock graph, in debug builds.
/// Same interface as `std::sync::Mutex` for what this crate uses.
#[derive(Debug)]
pub struct Mutex<T, const RANK: u8> {
    inner: std::sync::Mutex<T>,
}

/// A guard of a [`Mutex`].
#[derive(Debug)]
pub struct MutexGuard<'a, T> {
    guard: std::sync::MutexGuard<'a, T>,
    #[cfg(debug_assertions)]
    rank: u8,
}

/// A guard taken with [`Mutex::acquire`] (poisoning ignored); the same type.
pub(crate) type Ordered<'a, T> = MutexGuard<'a, T>;

impl<T, const RANK: u8> Mutex<T, RANK> {
    /// A mutex of rank `RANK`.
    pub fn new(value: T) -> Mutex<T, RANK> {
        Mutex {
            inner: std::sync::Mutex::new(value),
        }
    }

    /// Takes the lock; in debug builds, panics first if this thread holds a lock
    /// of this rank or a later one.
    pub(crate) fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        #[cfg(debug_assertions)]
        ranks::before_taking(RANK);
        let wrap = |guard| MutexGuard {
            guard,
            #[cfg(debug_assertions)]
            rank: RANK,
        };
        let taken = match self.inner.lock() {
            Ok(g) => Ok(wrap(g)),
            Err(poisoned) => Err(PoisonError::new(wrap(poisoned.into_inner()))),
        };
        #[cfg(debug_assertions)]
        ranks::taken(RANK);
        taken
    }

    /// Takes the lock, ignoring poisoning: every critical section of this crate
    /// only assigns fields, so a poisoned lock still holds consistent data.
    pub fn acquire(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: Default, const RANK: u8> Default for Mutex<T, RANK> {
    fn default() -> Mutex<T, RANK> {
        Mutex::new(T::default())
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        #[cfg(debug_assertions)]
        ranks::released(self.rank);
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

/// An async mutex of rank `RANK` (see [`rank`]): a `tokio::sync::Mutex` whose
/// acquisitions are checked, in debug builds, against the blocking locks this thread
/// holds (its own holding crosses `.await`s and is not recorded).
#[derive(Debug)]
pub struct AsyncMutex<T, const RANK: u8> {
    inner: tokio::sync::Mutex<T>,
}

impl<T, const RANK: u8> AsyncMutex<T, RANK> {
    /// An async mutex of rank `RANK`.
    pub fn new(value: T) -> AsyncMutex<T, RANK> {
        AsyncMutex {
            inner: tokio::sync::Mutex::new(value),
        }
    }

    /// Waits for the lock; in debug builds, panics first if this thread holds a
    /// blocking lock of this rank or a later one.
    pub async fn lock(&self) -> tokio::sync::MutexGuard<'_, T> {
        #[cfg(debug_assertions)]
        ranks::before_taking(RANK);
        self.inner.lock().await
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

/// The ranks each thread holds, in debug builds.
#[cfg(debug_assertions)]
mod ranks {
    use std::cell::RefCell;

    thread_local! {
        /// The ranks this thread holds, in the order taken.
        static HELD: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }

    /// Panics when this thread holds a lock of rank `rank` or a later one.
    pub(super) fn before_taking(rank: u8) {
        // `try_with`: a tracing event from a thread-local's destructor still reaches
        // the daemon's log writer, unchecked, after this thread's record is gone.
        let _ = HELD.try_with(|held| {
            if let Some(&later) = held.borrow().iter().find(|&&h| h >= rank) {
                panic!(
                    "lock order violated: taking {} (rank {rank}) while holding {} (rank {later}) \
                     (locks are taken in rank order; see core/src/lock_order.rs)",
                    super::rank::name(rank),
                    super::rank::name(later),
                );
            }
        });
    }

    pub(super) fn taken(rank: u8) {
        let _ = HELD.try_with(|held| held.borrow_mut().push(rank));
    }

    pub(super) fn released(rank: u8) {
        let _ = HELD.try_with(|held| {
            let mut held = held.borrow_mut();
            if let Some(at) = held.iter().rposition(|&h| h == rank) {
                held.remove(at);
            }
        });
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    fn panic_message(f: impl FnOnce()) -> String {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .expect_err("the acquisition must panic")
            .downcast::<String>()
            .map(|m| *m)
            .unwrap_or_default()
    }

    #[test]
    fn locks_taken_in_rank_order_pass_and_against_it_panic_naming_both() {
        let tables: Mutex<u8, { rank::TABLES }> = Mutex::new(1);
        let session: Mutex<u8, { rank::SESSION }> = Mutex::new(2);
        {
            let _t = tables.acquire();
            let _s = session.acquire();
        }
        // Released: taking them again in order is fine.
        let s = session.acquire();
        let message = panic_message(|| {
            let _t = tables.acquire();
        });
        assert!(
            message.contains("taking tables (rank 10) while holding session (rank 30)"),
            "{message}"
        );
        drop(s);
        let _t = tables.acquire();
    }

    #[test]
    fn two_locks_of_one_rank_are_never_held_at_once() {
        let made: Vec<Mutex<u8, { rank::SESSION }>> = (0..2).map(Mutex::new).collect();
        let _first = made[0].acquire();
        let message = panic_message(|| {
            let _second = made[1].acquire();
        });
        assert!(
            message.contains("taking session (rank 30) while holding session (rank 30)"),
            "{message}"
        );
    }

    #[test]
    fn the_durable_rooms_locks_are_ranked_after_the_table_lock() {
        // The durable rooms' locks are taken under the table lock, never around it.
        let tables: Mutex<(), { rank::TABLES }> = Mutex::new(());
        let checkpoint: Mutex<(), { rank::CHECKPOINT }> = Mutex::new(());
        {
            let _t = tables.acquire();
            let _d = checkpoint.acquire();
        }
        let message = panic_message(|| {
            let _d = checkpoint.acquire();
            let _t = tables.acquire();
        });
        assert!(message.contains("taking tables"), "{message}");
    }

    #[test]
    fn an_async_lock_awaited_under_a_later_blocking_lock_panics() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime builds");
        let conn: AsyncMutex<(), { rank::LAUNCHER_CONN }> = AsyncMutex::new(());
        let tables: Mutex<(), { rank::TABLES }> = Mutex::new(());
        rt.block_on(async { drop(conn.lock().await) });
        let held = tables.acquire();
        let message = panic_message(|| rt.block_on(async { drop(conn.lock().await) }));
        assert!(
            message.contains("taking launcher connection (rank 1) while holding tables (rank 10)"),
            "{message}"
        );
        drop(held);
    }

    #[test]
    fn a_lock_taken_on_another_thread_does_not_count_here() {
        let tables: Mutex<(), { rank::TABLES }> = Mutex::new(());
        let tail: Mutex<(), { rank::TAIL }> = Mutex::new(());
        let _tail = tail.acquire();
        std::thread::scope(|s| {
            s.spawn(|| drop(tables.acquire()));
        });
    }
}
