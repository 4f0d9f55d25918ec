//! The retention rules as a type: what the table's cache of finished sessions
//! keeps, which sessions `clean` forgets, and the retention timer's pace. It owns
//! these decisions and holds no lock; the table room and the retention room carry
//! them out. Below the table and the store in the module order, so both may ask it.

use std::sync::Arc;
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

    /// Which of the `finished` sessions the table's cache drops at `now`: those
    /// past the TTL, then the oldest beyond the cap. A session whose receipt is
    /// not written yet (`pending`) stays until it is, so its result is always
    /// answerable from memory or from the receipt.
    pub(super) fn cache_evictions<'s>(
        &self,
        finished: impl Iterator<Item = &'s Arc<Session>>,
        now: SystemTime,
        pending: impl Fn(&SessionId) -> bool,
    ) -> Evictions {
        let finished_at = |s: &Session| s.state().finished.as_ref().map_or(now, |f| f.at);
        let mut out = Evictions::default();
        let mut kept: Vec<(SystemTime, SessionId, bool)> = Vec::new();
        for s in finished {
            let at = finished_at(s);
            let is_pending = pending(&s.id);
            if now.duration_since(at).unwrap_or_default() <= self.cache_ttl || is_pending {
                kept.push((at, s.id.clone(), is_pending));
            } else {
                out.expired.push(s.id.clone());
            }
        }
        let excess = kept.len().saturating_sub(self.cache_cap);
        if excess > 0 {
            let mut by_age: Vec<(SystemTime, SessionId)> = kept
                .into_iter()
                .filter(|(_, _, is_pending)| !is_pending)
                .map(|(at, id, _)| (at, id))
                .collect();
            by_age.sort();
            out.excess = by_age.into_iter().take(excess).map(|(_, id)| id).collect();
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
