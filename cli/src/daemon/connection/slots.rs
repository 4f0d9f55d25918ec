//! The connections being served, at most `max_connections` of them, and who makes
//! room when that many are open.
//!
//! Every connection is either idle (waiting for its next request, or for its first:
//! `hello` included) or busy (a request in flight: a call, a wait, a stream). When a
//! new connection finds the limit reached, the connection idle the longest is closed
//! to admit it; only when every open connection is busy is the new one refused. So
//! clients that connect, say `hello` and then stall can never lock the others out,
//! however many they are, while no request that is being served is cut.
//!
//! The table is a small mutex of its own (never held across an await, nothing slow
//! under it). A closed connection's slot is given back when its task drops it; an
//! evicted one leaves the table at once, so the newcomer is admitted immediately.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use herd_core::lock_order::{Mutex, MutexGuard, rank};
use tokio::sync::Notify;

/// The connections being served.
#[derive(Debug, Default)]
pub(crate) struct Connections {
    table: Arc<Mutex<Table, { rank::DAEMON_SLOTS }>>,
}

#[derive(Debug, Default)]
struct Table {
    next: u64,
    open: BTreeMap<u64, Entry>,
}

#[derive(Debug)]
struct Entry {
    /// Since when it waits for a request; `None` while one is in flight.
    idle_since: Option<Instant>,
    /// Told when the connection is closed to make room.
    evict: Arc<Notify>,
}

/// One served connection's place in [`Connections`], given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    id: u64,
    table: Arc<Mutex<Table, { rank::DAEMON_SLOTS }>>,
    evict: Arc<Notify>,
}

fn lock(table: &Mutex<Table, { rank::DAEMON_SLOTS }>) -> MutexGuard<'_, Table> {
    table.acquire()
}

impl Connections {
    /// A slot for a new connection: directly while fewer than `limit` are open,
    /// else by closing the one idle the longest; `None` when all `limit` are busy.
    pub(crate) fn enter(&self, limit: usize) -> Option<Slot> {
        let mut table = lock(&self.table);
        if table.open.len() >= limit {
            let oldest = table
                .open
                .iter()
                .filter_map(|(id, entry)| entry.idle_since.map(|since| (since, *id)))
                .min()?;
            if let Some(evicted) = table.open.remove(&oldest.1) {
                // A stored permit: the connection sees it at its next wait even if it
                // is not waiting this very moment.
                evicted.evict.notify_one();
                tracing::info!(
                    idle_ms = u64::try_from(oldest.0.elapsed().as_millis()).unwrap_or(u64::MAX),
                    "at max_connections: closed the connection idle the longest to admit a new one"
                );
            }
        }
        let id = table.next;
        table.next += 1;
        let evict = Arc::new(Notify::new());
        table.open.insert(
            id,
            Entry {
                idle_since: Some(Instant::now()),
                evict: Arc::clone(&evict),
            },
        );
        Some(Slot {
            id,
            table: Arc::clone(&self.table),
            evict,
        })
    }

    /// How many are open.
    pub(crate) fn open(&self) -> usize {
        lock(&self.table).open.len()
    }
}

impl Slot {
    /// The connection waits for its next request (from now). A new connection is
    /// idle from its accept: the accept loop's order, not its task's first run.
    pub(crate) fn idle(&self) {
        self.set_idle(Some(Instant::now()));
    }

    /// A request is in flight: the connection is not closed to make room. False
    /// when it was closed to make room already (its request is not served).
    pub(crate) fn busy(&self) -> bool {
        self.set_idle(None)
    }

    fn set_idle(&self, idle_since: Option<Instant>) -> bool {
        match lock(&self.table).open.get_mut(&self.id) {
            Some(entry) => {
                entry.idle_since = idle_since;
                true
            }
            None => false,
        }
    }

    /// Resolves once the connection was closed to make room for a new one.
    pub(crate) async fn evicted(&self) {
        self.evict.notified().await;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.table).open.remove(&self.id);
    }
}
