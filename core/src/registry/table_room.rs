//! The table room: the session table behind its lock (the outermost of the
//! registry's ranked locks after the checkpoint writer's), with a narrow API.
//!
//! Only this room takes the table lock. Each operation takes it once and
//! releases it before returning; no guard leaves the room. The few critical
//! sections that must change the table and another room's state in one go (the
//! finish choke point, a notice queued only while its session runs, a replay) are
//! named operations too: their closure runs under the lock and sees the owners'
//! queues ([`Queues`]) only, never the sessions. Nothing slow runs under it: the
//! callers' closures publish, stamp and note, and leave hooks, fsyncs and file IO
//! to before or after.

use std::sync::Arc;

use super::Tables;
use super::retention_policy::Retention;
use super::table::{Found, Queues};
use crate::error::LookupError;
use crate::event::Event;
use crate::id::SessionId;
use crate::lock_order::{Mutex, Ordered, rank};
use crate::session::Session;

/// The session table and its lock.
#[derive(Debug)]
pub(crate) struct Table {
    tables: Mutex<Tables, { rank::TABLES }>,
}

/// Which sessions [`Table::select`] looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pool {
    Running,
    All,
}

impl Table {
    pub(super) fn new(queue_cap: usize) -> Table {
        Table {
            tables: Mutex::new(Tables::new(queue_cap)),
        }
    }

    /// The table lock; private to the room.
    fn lock(&self) -> Ordered<'_, Tables> {
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

    /// Session `id`, running or finished.
    pub(super) fn get(&self, id: &SessionId) -> Option<Arc<Session>> {
        self.lock().get(id).cloned()
    }

    /// The running session `id`.
    pub(super) fn running_session(&self, id: &SessionId) -> Option<Arc<Session>> {
        self.lock().running_session(id).cloned()
    }

    /// Every running session, as the table holds them now.
    pub(super) fn running(&self) -> Vec<Arc<Session>> {
        self.lock().running().cloned().collect()
    }

    /// The sessions of `pool` that `keep` picks, in no order.
    pub(super) fn select(&self, pool: Pool, keep: impl Fn(&Session) -> bool) -> Vec<Arc<Session>> {
        let tables = self.lock();
        match pool {
            Pool::Running => tables.running().filter(|s| keep(s)).cloned().collect(),
            Pool::All => tables.all().filter(|s| keep(s)).cloned().collect(),
        }
    }

    /// In one look at the table: the running sessions `running` picks and the
    /// sessions (running or finished) `any` picks.
    pub(super) fn select_both(
        &self,
        running: impl Fn(&Session) -> bool,
        any: impl Fn(&Session) -> bool,
    ) -> (Vec<Arc<Session>>, Vec<Arc<Session>>) {
        let tables = self.lock();
        (
            tables.running().filter(|s| running(s)).cloned().collect(),
            tables.all().filter(|s| any(s)).cloned().collect(),
        )
    }

    /// Whether any running session is one `pred` picks.
    pub(super) fn any_running(&self, pred: impl Fn(&Session) -> bool) -> bool {
        self.lock().running().any(|s| pred(s))
    }

    /// The id of `owner`'s running session named `name`, if any.
    pub(super) fn running_named(&self, name: &str, owner: &str) -> Option<SessionId> {
        self.lock().running_named(name, owner)
    }

    /// `id_or_prefix` (normalised to `wanted`) in the table.
    pub(super) fn resolve(&self, id_or_prefix: &str, wanted: &str) -> Result<Found, LookupError> {
        self.lock().resolve(id_or_prefix, wanted)
    }

    /// An id no session in the table has.
    pub(super) fn fresh_id(&self) -> SessionId {
        let tables = self.lock();
        loop {
            let id = SessionId::generate();
            if tables.get(&id).is_none() {
                return id;
            }
        }
    }

    /// Enters `s` among the running sessions.
    pub(super) fn add_running(&self, s: Arc<Session>) {
        self.lock().add_running(s);
    }

    /// Enters a new session among the running ones, pruning the finished ones
    /// first (see [`Table::prune`]).
    pub(super) fn insert_running(
        &self,
        s: &Arc<Session>,
        retention: &Retention,
        pending: impl Fn(&SessionId) -> bool,
    ) {
        let mut tables = self.lock();
        tables.prune(retention, pending);
        tables.add_running(Arc::clone(s));
    }

    /// Enters `s` among the finished sessions unless the table knows its id
    /// already; whether it was entered.
    pub(super) fn add_finished_if_new(&self, s: &Arc<Session>) -> bool {
        let mut tables = self.lock();
        if tables.get(&s.id).is_some() {
            return false;
        }
        tables.add_finished(Arc::clone(s));
        true
    }

    /// Drops the finished sessions `retention` no longer keeps in memory;
    /// `pending` says whose receipt is not written yet (asked again about every
    /// session still waiting for one: see [`Tables::prune_settled`]).
    pub(super) fn prune(&self, retention: &Retention, pending: impl Fn(&SessionId) -> bool) {
        self.lock().prune_settled(retention, pending);
    }

    /// Takes out the finished sessions `pick` picks, and returns them.
    pub(super) fn remove_finished_where(
        &self,
        pick: impl Fn(&Session) -> bool,
    ) -> Vec<Arc<Session>> {
        let mut tables = self.lock();
        let ids: Vec<SessionId> = tables
            .finished()
            .filter(|s| pick(s))
            .map(|s| s.id.clone())
            .collect();
        ids.iter()
            .filter_map(|id| tables.remove_finished(id))
            .collect()
    }

    /// Takes out of the finished sessions those of `ids` that `follow` lets go
    /// (releasing their tails), and returns how many. An id the table holds as
    /// running is left alone.
    pub(super) fn drop_evicted(
        &self,
        ids: &[SessionId],
        follow: impl Fn(&Session) -> bool,
    ) -> usize {
        let mut tables = self.lock();
        let picked: Vec<&SessionId> = ids
            .iter()
            .filter(|id| tables.get(id).is_some_and(|s| follow(s)))
            .collect();
        picked
            .into_iter()
            .filter_map(|id| tables.remove_finished(id))
            .inspect(|s| s.tail().release())
            .count()
    }

    /// Those of `candidates` (ids as text) that parse, that the table does not
    /// hold, and that `keep` keeps.
    pub(super) fn unknown_of(
        &self,
        candidates: Vec<String>,
        keep: impl Fn(&SessionId) -> bool,
    ) -> Vec<String> {
        let tables = self.lock();
        candidates
            .into_iter()
            .filter(|id| {
                SessionId::parse(id).is_some_and(|sid| tables.get(&sid).is_none() && keep(&sid))
            })
            .collect()
    }

    /// The finished-or-running sessions whose ids are among `ids`, that `pick` picks.
    pub(super) fn of_ids(
        &self,
        ids: impl Iterator<Item = SessionId>,
        pick: impl Fn(&Session) -> bool,
    ) -> Vec<Arc<Session>> {
        let tables = self.lock();
        ids.filter_map(|id| tables.get(&id).filter(|s| pick(s)).cloned())
            .collect()
    }

    /// Takes the events queued for `owner`.
    pub(super) fn take_queue(&self, owner: &str) -> Vec<Event> {
        self.lock().queues().take(owner)
    }

    /// How many events wait for `owner`.
    pub(super) fn pending(&self, owner: &str) -> usize {
        self.lock().pending(owner)
    }

    /// Queues `event` for `owner`.
    pub(super) fn enqueue(&self, owner: &str, event: Event) {
        self.lock().queues().enqueue(owner, event);
    }

    /// Puts `events` back at the front of `owner`'s queue, in their order.
    pub(super) fn requeue_front(&self, owner: String, events: Vec<Event>) {
        self.lock().queues().requeue_front(owner, events);
    }

    /// Takes out of `owner`'s queue the events `answered` picks (the rest stay
    /// in their order); returns how many.
    pub(super) fn dequeue_where(&self, owner: &str, answered: impl Fn(&Event) -> bool) -> usize {
        let mut tables = self.lock();
        let queues = tables.queues();
        let queued = queues.drop_queue(owner);
        let before = queued.len();
        let kept: Vec<Event> = queued.into_iter().filter(|e| !answered(e)).collect();
        let n = before - kept.len();
        if !kept.is_empty() {
            queues.requeue_front(owner.to_owned(), kept);
        }
        n
    }

    /// Ends owner `owner`'s presence in the table: drops its queue, and returns
    /// what it held, its running sessions that `kill` picks and its finished ones.
    pub(super) fn release_owner(
        &self,
        owner: &str,
        kill: impl Fn(&Session) -> bool,
    ) -> (Vec<Event>, Vec<Arc<Session>>, Vec<Arc<Session>>) {
        let mut tables = self.lock();
        let dropped = tables.queues().drop_queue(owner);
        let owned = |s: &&Arc<Session>| s.state().owner_task_id == owner;
        let running = tables
            .running()
            .filter(owned)
            .filter(|s| kill(s))
            .cloned()
            .collect();
        let finished = tables.finished().filter(owned).cloned().collect();
        (dropped, running, finished)
    }

    /// Runs `section` under the table lock while `id` runs (so it cannot finish
    /// meanwhile), with the session and the owners' queues; `None` when it does
    /// not run.
    pub(super) fn while_running<R>(
        &self,
        id: &SessionId,
        section: impl FnOnce(&Arc<Session>, &mut Queues) -> R,
    ) -> Option<R> {
        let mut tables = self.lock();
        let s = Arc::clone(tables.running_session(id)?);
        Some(section(&s, tables.queues()))
    }

    /// Runs `section` under the table lock, told whether `id` runs (so the answer
    /// holds until the section ends).
    pub(super) fn as_running<R>(&self, id: &SessionId, section: impl FnOnce(bool) -> R) -> R {
        let tables = self.lock();
        section(tables.is_running(id))
    }

    /// Runs `section` under the table lock with the owners' queues.
    pub(super) fn with_queues<R>(&self, section: impl FnOnce(&mut Queues) -> R) -> R {
        section(self.lock().queues())
    }

    /// The finish choke point's critical section: takes `s` out of the running
    /// sessions (`None`, and nothing else, when it is not there), runs `section`
    /// with the owners' queues, enters `s` among the finished and prunes.
    pub(super) fn conclude<R>(
        &self,
        s: &Arc<Session>,
        retention: &Retention,
        pending: impl Fn(&SessionId) -> bool,
        section: impl FnOnce(&mut Queues) -> R,
    ) -> Option<R> {
        let mut tables = self.lock();
        tables.take_running(&s.id)?;
        let out = section(tables.queues());
        tables.add_finished(Arc::clone(s));
        tables.prune(retention, pending);
        Some(out)
    }

    /// As [`Table::conclude`] for a session that never entered the running
    /// sessions (a queued job that never started).
    pub(super) fn conclude_unstarted<R>(
        &self,
        s: &Arc<Session>,
        retention: &Retention,
        pending: impl Fn(&SessionId) -> bool,
        section: impl FnOnce(&mut Queues) -> R,
    ) -> R {
        let mut tables = self.lock();
        let out = section(tables.queues());
        tables.add_finished(Arc::clone(s));
        tables.prune(retention, pending);
        out
    }
}
