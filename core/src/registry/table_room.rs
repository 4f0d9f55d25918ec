//! The table room: the session table behind its lock (the outermost of the
//! registry's ranked locks after the checkpoint writer's), with a narrow API.
//!
//! One-step operations take and release the lock themselves, so a room that only
//! needs one answer from the table never holds its guard; [`Table::lock`] is for
//! the critical sections that must see and change the table in one go (the finish
//! choke point, pruning, handoffs, notices). Nothing slow runs under it.

use std::sync::Arc;

use super::Tables;
use crate::event::Event;
use crate::id::SessionId;
use crate::lock_order::{Mutex, Ordered, rank};
use crate::session::Session;

/// The session table and its lock.
#[derive(Debug)]
pub(crate) struct Table {
    tables: Mutex<Tables, { rank::TABLES }>,
}

impl Table {
    pub(super) fn new(queue_cap: usize) -> Table {
        Table {
            tables: Mutex::new(Tables::new(queue_cap)),
        }
    }

    /// The table lock, for a critical section of several steps.
    pub(crate) fn lock(&self) -> Ordered<'_, Tables> {
        self.tables.acquire()
    }

    /// How many sessions run and how many finished ones are kept.
    pub(super) fn counts(&self) -> (usize, usize) {
        self.lock().counts()
    }

    /// Whether `id` is in the table, running or finished.
    pub(super) fn contains(&self, id: &SessionId) -> bool {
        self.lock().get(id).is_some()
    }

    /// The running session `id`.
    pub(super) fn running_session(&self, id: &SessionId) -> Option<Arc<Session>> {
        self.lock().running_session(id).cloned()
    }

    /// Every running session, as the table holds them now.
    pub(super) fn running(&self) -> Vec<Arc<Session>> {
        self.lock().running().cloned().collect()
    }

    /// Enters `s` among the running sessions.
    pub(super) fn add_running(&self, s: Arc<Session>) {
        self.lock().add_running(s);
    }

    /// Takes the events queued for `owner`.
    pub(super) fn take_queue(&self, owner: &str) -> Vec<Event> {
        self.lock().take_queue(owner)
    }

    /// How many events wait for `owner`.
    pub(super) fn pending(&self, owner: &str) -> usize {
        self.lock().pending(owner)
    }
}
