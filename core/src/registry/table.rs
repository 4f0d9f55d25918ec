//! The session table: running and finished sessions, the owners' event queues and
//! what was folded out of them: the state behind the table lock, which only the
//! table room takes. Lookup by id, prefix or name, entering a
//! new session and pruning finished ones (as the retention rules decide).
//!
//! Invariant: nothing slow runs under the table lock (no fsync, no plugin, no
//! `/proc` scan, no file IO); a receipt lookup happens after it is released.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::SystemTime;

use super::Inner;
use super::retention_policy::{EvictionOrder, Retention};
use crate::error::{LookupError, SpawnError};
use crate::event::Event;
use crate::id::{self, SessionId};
use crate::session::Session;

impl Inner {
    pub(crate) fn lookup(&self, id_or_prefix: &str) -> Result<Arc<Session>, LookupError> {
        let wanted = id::normalise_prefix(id_or_prefix);
        let matches = match self.table.resolve(id_or_prefix, &wanted)? {
            Found::One(s) => return Ok(s),
            Found::Prefixed(matches) => matches,
        };
        match matches.as_slice() {
            // B37: the prefix must name one id across memory and the receipts.
            [one] => match self.durable.other_receipts_with_prefix(&wanted, &one.id) {
                others if others.is_empty() => Ok(Arc::clone(one)),
                mut others => {
                    others.push(one.id.clone());
                    others.sort();
                    Err(LookupError::Ambiguous {
                        prefix: id_or_prefix.to_owned(),
                        matches: others,
                    })
                }
            },
            [] => Err(LookupError::NotFound {
                id: id_or_prefix.to_owned(),
            }),
            many => {
                let mut ids: Vec<SessionId> = many.iter().map(|s| s.id.clone()).collect();
                ids.sort();
                Err(LookupError::Ambiguous {
                    prefix: id_or_prefix.to_owned(),
                    matches: ids,
                })
            }
        }
    }

    /// Enters a new session in the running table (pruning the finished ones first).
    pub(super) fn insert_running(&self, session: &Arc<Session>) {
        self.table.insert_running(session, &self.retention, |id| {
            self.durable.receipt_pending(id)
        });
    }

    /// Drops finished sessions the retention rules no longer keep in memory.
    pub(super) fn prune(&self) {
        self.table
            .prune(&self.retention, |id| self.durable.receipt_pending(id));
    }
}

/// What a lookup found in the table: one session by id or name, or every session
/// whose id starts with the prefix (the receipts are asked after the lock).
pub(super) enum Found {
    One(Arc<Session>),
    Prefixed(Vec<Arc<Session>>),
}

#[derive(Debug, Default)]
pub(crate) struct Tables {
    running: HashMap<SessionId, Arc<Session>>,
    finished: HashMap<SessionId, Arc<Session>>,
    /// The finished sessions in the order the cache lets them go.
    eviction_order: EvictionOrder,
    queues: Queues,
}

/// The owners' event queues, the part of the table a publisher sees: it can
/// queue events and nothing else.
#[derive(Debug, Default)]
pub(crate) struct Queues {
    queues: HashMap<String, VecDeque<Event>>,
    /// The most events one queue holds.
    queue_cap: usize,
    /// What was folded out of each owner's full queue since its last drain.
    folded: HashMap<String, Folded>,
}

/// Counts of events folded out of one owner's queue.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Folded {
    heartbeats: u64,
    watch_events: u64,
    completions: u64,
}

impl Folded {
    /// The event the next drain starts with.
    pub(crate) fn event(self) -> Event {
        Event::QueueFolded {
            heartbeats: self.heartbeats,
            watch_events: self.watch_events,
            completions: self.completions,
            message: format!(
                "your notification queue was full, so older ones were folded: {} heartbeats, {} watch \
                 events and {} completions. Folded completions are not lost: list your finished \
                 processes to see them",
                self.heartbeats, self.watch_events, self.completions
            ),
        }
    }
}

impl Tables {
    /// Empty tables whose queues hold at most `queue_cap` events each.
    pub(super) fn new(queue_cap: usize) -> Tables {
        Tables {
            queues: Queues {
                queue_cap,
                ..Queues::default()
            },
            ..Tables::default()
        }
    }

    /// The running sessions, in no order.
    pub(super) fn running(&self) -> impl Iterator<Item = &Arc<Session>> {
        self.running.values()
    }

    /// The finished sessions kept, in no order.
    pub(super) fn finished(&self) -> impl Iterator<Item = &Arc<Session>> {
        self.finished.values()
    }

    /// The running session `id`, if it runs.
    pub(super) fn running_session(&self, id: &SessionId) -> Option<&Arc<Session>> {
        self.running.get(id)
    }

    pub(super) fn is_running(&self, id: &SessionId) -> bool {
        self.running.contains_key(id)
    }

    /// How many sessions run and how many finished ones are kept.
    pub(super) fn counts(&self) -> (usize, usize) {
        (self.running.len(), self.finished.len())
    }

    /// Enters a session as running.
    pub(super) fn add_running(&mut self, s: Arc<Session>) {
        self.running.insert(s.id.clone(), s);
    }

    /// Takes a session out of the running set; `None` when it is not there.
    pub(super) fn take_running(&mut self, id: &SessionId) -> Option<Arc<Session>> {
        self.running.remove(id)
    }

    /// Enters a session as finished.
    pub(super) fn add_finished(&mut self, s: Arc<Session>) {
        let at = s.state().finished.as_ref().map(|f| f.at);
        self.eviction_order
            .enter(&s.id, at.unwrap_or_else(SystemTime::now));
        self.finished.insert(s.id.clone(), s);
    }

    /// Forgets a finished session.
    pub(super) fn remove_finished(&mut self, id: &SessionId) -> Option<Arc<Session>> {
        self.eviction_order.leave(id);
        self.finished.remove(id)
    }

    /// The owners' queues.
    pub(super) fn queues(&mut self) -> &mut Queues {
        &mut self.queues
    }

    /// How many events wait for `owner` (a fold notice counts as one).
    pub(super) fn pending(&self, owner: &str) -> usize {
        self.queues.pending(owner)
    }

    pub(super) fn get(&self, id: &SessionId) -> Option<&Arc<Session>> {
        self.running.get(id).or_else(|| self.finished.get(id))
    }

    /// The id of `owner`'s running session named `name`, if any.
    pub(super) fn running_named(&self, name: &str, owner: &str) -> Option<SessionId> {
        self.running
            .values()
            .find(|s| s.name.as_deref() == Some(name) && s.state().owner_task_id == owner)
            .map(|s| s.id.clone())
    }

    pub(super) fn all(&self) -> impl Iterator<Item = &Arc<Session>> {
        self.running.values().chain(self.finished.values())
    }

    /// `id_or_prefix` (normalised to `wanted`) in the table: a whole id, a name
    /// (the running session that has it, else the newest finished one), or the
    /// sessions whose id starts with the prefix.
    pub(super) fn resolve(&self, id_or_prefix: &str, wanted: &str) -> Result<Found, LookupError> {
        // A whole id is a map lookup: with thousands of sessions, a scan per
        // lookup would make every poll, wait and kill grow with the table.
        let exact = match SessionId::parse(wanted) {
            Some(parsed) => self.get(&parsed),
            None => self.all().find(|s| s.id.as_str() == wanted),
        };
        if let Some(s) = exact {
            return Ok(Found::One(Arc::clone(s)));
        }
        if check_name(id_or_prefix).is_ok() {
            let named = |s: &&Arc<Session>| s.name.as_deref() == Some(id_or_prefix);
            let running: Vec<&Arc<Session>> = self.running.values().filter(named).collect();
            return match running.as_slice() {
                [one] => Ok(Found::One(Arc::clone(one))),
                [] => self
                    .finished
                    .values()
                    .filter(named)
                    .max_by_key(|s| s.started_at)
                    .map(|s| Found::One(Arc::clone(s)))
                    .ok_or_else(|| LookupError::NotFound {
                        id: id_or_prefix.to_owned(),
                    }),
                many => {
                    let mut matches: Vec<SessionId> = many.iter().map(|s| s.id.clone()).collect();
                    matches.sort();
                    Err(LookupError::Ambiguous {
                        prefix: id_or_prefix.to_owned(),
                        matches,
                    })
                }
            };
        }
        let suffix_len = wanted.len() - id::ID_PREFIX.len();
        if suffix_len < id::MIN_PREFIX_CHARS {
            return Err(LookupError::TooShort {
                prefix: id_or_prefix.to_owned(),
            });
        }
        Ok(Found::Prefixed(
            self.all()
                .filter(|s| s.id.as_str().starts_with(wanted))
                .cloned()
                .collect(),
        ))
    }

    /// Drops the finished sessions `retention` no longer keeps in memory;
    /// `pending` says whose receipt is not written yet (those stay). Asks only
    /// about the sessions entered since the last prune: a finish's prune costs the
    /// same however many receipts are on their way.
    pub(super) fn prune(&mut self, retention: &Retention, pending: impl Fn(&SessionId) -> bool) {
        self.prune_asking(retention, pending, false);
    }

    /// [`Tables::prune`] that also asks again about every session still waiting for
    /// its receipt (after receipts were written, and on the retention timer).
    pub(super) fn prune_settled(
        &mut self,
        retention: &Retention,
        pending: impl Fn(&SessionId) -> bool,
    ) {
        self.prune_asking(retention, pending, true);
    }

    fn prune_asking(
        &mut self,
        retention: &Retention,
        pending: impl Fn(&SessionId) -> bool,
        recheck: bool,
    ) {
        let out = retention.cache_evictions(
            &mut self.eviction_order,
            self.finished.len(),
            SystemTime::now(),
            pending,
            recheck,
        );
        for id in &out.expired {
            self.finished.remove(id);
        }
        for id in &out.excess {
            if let Some(s) = self.finished.remove(id) {
                s.tail().release();
            }
        }
    }
}

impl Queues {
    /// Takes `owner`'s queue, the notice of what it folded first.
    pub(super) fn take(&mut self, owner: &str) -> Vec<Event> {
        let folded = self.folded.remove(owner);
        let queued = self.drop_queue(owner);
        folded
            .map(Folded::event)
            .into_iter()
            .chain(queued)
            .collect()
    }

    /// Drops `owner`'s queue (not its fold counts) and returns what it held.
    pub(super) fn drop_queue(&mut self, owner: &str) -> Vec<Event> {
        self.queues.remove(owner).map(Vec::from).unwrap_or_default()
    }

    /// Puts `events` back at the front of `owner`'s queue, in their order.
    pub(super) fn requeue_front(&mut self, owner: String, events: Vec<Event>) {
        let queue = self.queues.entry(owner).or_default();
        for event in events.into_iter().rev() {
            queue.push_front(event);
        }
    }

    /// How many events wait for `owner` (a fold notice counts as one).
    pub(super) fn pending(&self, owner: &str) -> usize {
        self.queues.get(owner).map_or(0, VecDeque::len)
            + usize::from(self.folded.contains_key(owner))
    }

    /// Queues `event` for `owner`'s next drain. A full queue folds its oldest
    /// heartbeat, else its oldest watch event, else its oldest completion (which
    /// stays undelivered in the ledger), and counts it for the next drain.
    pub(crate) fn enqueue(&mut self, owner: &str, event: Event) {
        let queue = self.queues.entry(owner.to_owned()).or_default();
        queue.push_back(event);
        while queue.len() > self.queue_cap.max(1) {
            let first = |pred: fn(&Event) -> bool| queue.iter().position(pred);
            let pick = first(|e| matches!(e, Event::Heartbeat { .. }))
                .or_else(|| {
                    first(|e| {
                        matches!(
                            e,
                            Event::WatchMatch { .. }
                                | Event::WatchDisabled { .. }
                                | Event::Ready { .. }
                                | Event::Retry { .. }
                        )
                    })
                })
                .or_else(|| first(|e| matches!(e, Event::Completion { .. })));
            let Some(dropped) = pick.and_then(|at| queue.remove(at)) else {
                break;
            };
            let folded = self.folded.entry(owner.to_owned()).or_default();
            match dropped {
                Event::Heartbeat { .. } => folded.heartbeats += 1,
                Event::Completion { .. } => folded.completions += 1,
                _ => folded.watch_events += 1,
            }
        }
    }
}

/// Refuses a session name that could be read as an id or a prefix of one, or
/// that a person could not type (see [`SpawnRequest::name`]).
pub(super) fn check_name(name: &str) -> Result<(), SpawnError> {
    let refuse = |why: &str| {
        Err(SpawnError::InvalidRequest {
            field: "name",
            message: format!("{name:?} {why}"),
        })
    };
    if name.is_empty() || name.chars().count() > 64 {
        return refuse("must be 1 to 64 characters");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return refuse("may hold only letters, digits, `.`, `_` and `-` (no `:` or spaces)");
    }
    // Hex digits alone read as an id prefix from MIN_PREFIX_CHARS on (`db`,
    // `ed` or `123` are too short to be one, so they are names).
    let is_hex = name.chars().all(|c| c.is_ascii_hexdigit());
    if name.starts_with(id::ID_PREFIX) || (is_hex && name.len() >= id::MIN_PREFIX_CHARS) {
        return refuse(
            "looks like a session id or a prefix of one; give it a letter beyond a-f (or keep it \
             to 3 characters)",
        );
    }
    Ok(())
}
