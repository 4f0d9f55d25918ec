//! The retention rules as a type: what the table's cache of finished sessions
//! keeps, which sessions `clean` forgets, and the retention timer's pace. It owns
//! these decisions and holds no lock; the table room and the retention room carry
//! them out. Below the table and the store in the module order, so both may ask it.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, SystemTime};

use crate::config::RegistryConfig;
use crate::id::SessionId;
use crate::session::Session;

/// The longest pause between two retention rounds.
pub(super) const MAX_TICK: Duration = Duration::from_secs(60);

/// The shortest pause between two retention rounds.
const MIN_TICK: Duration = Duration::from_secs(1);

/// The pause between retention rounds for `ttl`: a quarter of it, within
/// [`MIN_TICK`]..=[`MAX_TICK`].
pub(super) fn tick_for(ttl: Duration) -> Duration {
    (ttl / 4).clamp(MIN_TICK, MAX_TICK)
}

/// The retention rules, read once from the configuration: how long and how many
/// finished sessions the table keeps in memory, which ones `clean` forgets, and the
/// timer's pace. Decisions only; it holds no state that changes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Retention {
    /// How long the table's cache keeps a finished session: never longer than
    /// the store keeps its result, so memory is only a cache of the store.
    cache_ttl: Duration,
    /// The most finished sessions the table's cache keeps.
    cache_cap: usize,
    /// How long the store keeps a result.
    result_ttl: Duration,
}

/// What the table's cache lets go of.
#[derive(Debug, Default)]
pub(super) struct Evictions {
    /// Past the cache's TTL.
    pub(super) expired: Vec<SessionId>,
    /// The oldest beyond the cache's cap; their tails are released.
    pub(super) excess: Vec<SessionId>,
}

impl Retention {
    pub(super) fn new(config: &RegistryConfig) -> Retention {
        Retention {
            cache_ttl: config.finished_ttl.min(config.result_ttl),
            cache_cap: config.finished_cap,
            result_ttl: config.result_ttl,
        }
    }

    /// The pause between two rounds of the retention timer.
    pub(super) fn tick(&self) -> Duration {
        tick_for(self.result_ttl)
    }

    /// Which finished sessions the table's cache drops at `now`, of the `n_kept`
    /// it holds, all entered in `order`: those past the TTL, then the oldest beyond
    /// the cap. A session whose receipt is not written yet (`pending`) stays until it
    /// is, so its result is always answerable from memory or from the receipt. What
    /// it returns has left `order`.
    ///
    /// Only the oldest entries whose receipt is written are looked at, and `pending`
    /// is asked only about the sessions entered since the last call (and, with
    /// `recheck`, about those still waiting for their receipt): a finish costs the
    /// same with thousands of receipts on their way as with none.
    pub(super) fn cache_evictions(
        &self,
        order: &mut EvictionOrder,
        n_kept: usize,
        now: SystemTime,
        pending: impl Fn(&SessionId) -> bool,
        recheck: bool,
    ) -> Evictions {
        order.sort(&pending, recheck);
        let mut out = Evictions::default();
        let mut n_kept = n_kept;
        while let Some((at, id)) = order.by_age.first() {
            let expired = now.duration_since(*at).unwrap_or_default() > self.cache_ttl;
            let into = if expired {
                &mut out.expired
            } else if n_kept > self.cache_cap {
                &mut out.excess
            } else {
                break;
            };
            into.push(id.clone());
            if let Some((_, id)) = order.by_age.pop_first() {
                order.at.remove(&id);
            }
            n_kept = n_kept.saturating_sub(1);
        }
        out
    }

    /// Whether `clean` forgets finished session `s`: of `owner` (any for `None`),
    /// finished at least `older_than` before `now`.
    pub(super) fn cleans(
        s: &Session,
        owner: Option<&str>,
        older_than: Duration,
        now: SystemTime,
    ) -> bool {
        let st = s.state();
        owner.is_none_or(|o| st.owner_task_id == o)
            && st
                .finished
                .as_ref()
                .is_some_and(|f| now.duration_since(f.at).unwrap_or_default() >= older_than)
    }

    /// Whether the store's eviction of `s` takes it out of the table's cache too:
    /// not while its receipt is being written again (`pending`) or its shim
    /// still holds leftovers (a kill must reach them).
    pub(super) fn follows_store(s: &Session, pending: bool) -> bool {
        !pending && s.state().leftovers.is_empty()
    }
}

/// The order in which the table's cache lets finished sessions go: those whose
/// receipt is written, by finish time (oldest first), apart from those still
/// waiting for it. The table enters every finished session it keeps and takes
/// out every one it forgets; [`Retention::cache_evictions`] takes the oldest off.
#[derive(Debug, Default)]
pub(super) struct EvictionOrder {
    /// The sessions that may go, oldest first.
    by_age: BTreeSet<(SystemTime, SessionId)>,
    /// When each entered session finished (its key in `by_age`).
    at: HashMap<SessionId, SystemTime>,
    /// Entered since the last sort; not yet in `by_age` or `waiting`.
    fresh: Vec<SessionId>,
    /// Whose receipt was not written when last asked: they stay until it is.
    waiting: HashSet<SessionId>,
}

impl EvictionOrder {
    /// Enters finished session `id`, which finished `at`.
    pub(super) fn enter(&mut self, id: &SessionId, at: SystemTime) {
        self.leave(id);
        self.at.insert(id.clone(), at);
        self.fresh.push(id.clone());
    }

    /// Takes `id` out (the table forgot it).
    pub(super) fn leave(&mut self, id: &SessionId) {
        if let Some(at) = self.at.remove(id) {
            self.by_age.remove(&(at, id.clone()));
            self.waiting.remove(id);
        }
    }

    /// How many sessions wait for their receipt, as last asked.
    #[cfg(test)]
    pub(super) fn n_waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Sorts the sessions entered since the last sort into those that may go and
    /// those waiting for their receipt; with `recheck`, moves the waiting ones whose
    /// receipt is written now to those that may go.
    fn sort(&mut self, pending: &impl Fn(&SessionId) -> bool, recheck: bool) {
        if recheck {
            let written: Vec<SessionId> = self
                .waiting
                .iter()
                .filter(|id| !pending(id))
                .cloned()
                .collect();
            for id in written {
                self.waiting.remove(&id);
                if let Some(at) = self.at.get(&id) {
                    self.by_age.insert((*at, id));
                }
            }
        }
        for id in std::mem::take(&mut self.fresh) {
            // Entered twice, or taken out since: sorted once, or not at all.
            let Some(at) = self.at.get(&id).copied() else {
                continue;
            };
            if self.waiting.contains(&id) || self.by_age.contains(&(at, id.clone())) {
                continue;
            }
            if pending(&id) {
                self.waiting.insert(id);
            } else {
                self.by_age.insert((at, id));
            }
        }
    }
}

#[cfg(test)]
mod tests;
