//! What leaves the store of finished sessions, and when: on
//! request ([`Registry::clean`]) and on schedule (the retention timer).
//!
//! `clean` forgets the finished sessions that match its filters wherever they live:
//! in the table's small cache of finished sessions and in the store alone (pruned
//! from memory, or finished before a daemon restart), with their receipts and logs.
//!
//! The retention timer evicts what is past `result_ttl` or beyond
//! `log_budget_bytes` even when nothing finishes: one task for the registry ticks
//! every minute (`MAX_TICK`; sooner for a TTL shorter than four ticks, so a short TTL is
//! kept to within a quarter of itself), prunes the table's cache under the table
//! lock (a walk over memory, nothing slow), then prunes the store on the blocking
//! pool, off the table lock, evicting at most [`EVICTIONS_PER_TICK`] sessions a
//! round (another round follows at once while more is due). A session the store
//! evicted leaves the cache too, so it answers "expired on DATE" from either. Each
//! round also forgets the ledger's completions nobody drained within `result_ttl`
//! (they are kept as long as results, not only until the next replay).
//!
//! The room holds no lock: `Retention` (in `retention_policy`) owns its
//! decisions (what the table's cache keeps, which sessions `clean` forgets, when
//! the timer ticks), and the table room and the store carry them out.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::durable::unix_seconds;
use super::retention_policy::Retention;
#[cfg(test)]
use super::retention_policy::{MAX_TICK, tick_for};
use super::{Inner, Registry};
use crate::id::SessionId;

/// Sessions one retention round evicts at most.
pub(super) const EVICTIONS_PER_TICK: usize = 1_000;

impl Registry {
    /// Forgets finished sessions: of `owner` (every owner when `None`), finished
    /// at least `older_than` ago, with their receipts and logs, whether the table
    /// still holds them or only the store does. Running sessions are never touched,
    /// nor a finished one whose receipt is still being written. Returns the ids
    /// forgotten. Blocking (the store and the logs); call it off the runtime.
    pub fn clean(&self, owner: Option<&str>, older_than: Duration) -> Vec<SessionId> {
        let now = SystemTime::now();
        // A session whose receipt is still being written stays until it is.
        let gone = self.inner.table.remove_finished_where(|s| {
            !self.inner.durable.receipt_pending(&s.id)
                && Retention::cleans(s, owner, older_than, now)
        });
        if !gone.is_empty() {
            self.inner.changed();
        }
        // Files go outside the table lock.
        let store = self.inner.durable.receipts();
        let mut forgotten: Vec<String> = Vec::with_capacity(gone.len());
        for s in &gone {
            // A forgotten session leaves nothing running.
            super::held::end_leftovers(s);
            forgotten.push(s.id.as_str().to_owned());
        }
        if let Err(error) = store.forget_all(&forgotten) {
            tracing::warn!(n = forgotten.len(), %error, "finished sessions not forgotten on disk");
        }
        let mut ids: Vec<SessionId> = gone.iter().map(|s| s.id.clone()).collect();
        ids.extend(
            self.inner
                .clean_stored(owner, unix_seconds(now) - older_than.as_secs_f64()),
        );
        ids
    }
}

impl Inner {
    /// Forgets the finished sessions of `owner` (every owner for `None`) that only
    /// the store knows and that finished by `finished_before` (unix seconds).
    /// Blocking.
    fn clean_stored(&self, owner: Option<&str>, finished_before: f64) -> Vec<SessionId> {
        let store = self.durable.receipts();
        let candidates = match store.finished_ids(owner, finished_before) {
            Ok(ids) => ids,
            Err(error) => {
                tracing::warn!(%error, "finished sessions of the store not listed for clean");
                return Vec::new();
            }
        };
        if candidates.is_empty() {
            return Vec::new();
        }
        // One the table holds (kept above: its receipt is being written, or it
        // finished after the filter's moment) is not forgotten behind its back.
        let stored_only: Vec<String> = self
            .table
            .unknown_of(candidates, |id| !self.durable.receipt_pending(id));
        match store.forget_all(&stored_only) {
            Ok(gone) => {
                if !gone.is_empty() {
                    self.changed();
                }
                gone.iter().filter_map(|id| SessionId::parse(id)).collect()
            }
            Err(error) => {
                tracing::warn!(n = stored_only.len(), %error, "finished sessions of the store not forgotten");
                Vec::new()
            }
        }
    }

    /// Starts the retention timer (see the module docs); it ends when the registry
    /// detaches or is dropped.
    pub(super) fn arm_retention(self: &Arc<Self>) {
        let inner = Arc::downgrade(self);
        let detach = self.detach.clone();
        let period = self.retention.tick();
        drop(self.runtime.spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    () = detach.cancelled() => return,
                }
                loop {
                    let Some(inner) = inner.upgrade() else {
                        return;
                    };
                    let more = tokio::task::spawn_blocking(move || inner.retention_round())
                        .await
                        .unwrap_or(false);
                    if !more || detach.is_cancelled() {
                        break;
                    }
                }
            }
        }));
    }

    /// One retention round: the table's cache, then the store (bounded); whether
    /// more is due. Blocking.
    pub(super) fn retention_round(&self) -> bool {
        self.prune();
        self.expire_unclaimed_completions();
        let report = match self.durable.receipts().prune_at_most(EVICTIONS_PER_TICK) {
            Ok(report) => report,
            Err(error) => {
                tracing::warn!(%error, "result store not pruned on schedule");
                return false;
            }
        };
        if report.evicted.is_empty() {
            return report.more;
        }
        // An evicted session leaves the cache too (one the budget evicted before
        // its TTL may still be there), unless its receipt is being written again
        // or its shim still holds leftovers (a kill must reach them).
        let evicted: Vec<SessionId> = report
            .evicted
            .iter()
            .filter_map(|id| SessionId::parse(id))
            .collect();
        let n_dropped = self.table.drop_evicted(&evicted, |s| {
            Retention::follows_store(s, self.durable.receipt_pending(&s.id))
        });
        if n_dropped > 0 {
            self.changed();
        }
        tracing::info!(
            n_expired = report.n_expired,
            n_over_budget = report.n_over_budget,
            n_logs = report.n_logs,
            "finished sessions evicted from the store on schedule"
        );
        report.more
    }
}

#[cfg(test)]
mod tests;
