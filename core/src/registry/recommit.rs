//! Completions whose ledger commit failed (a full disk, a read-only home), committed
//! again later.
//!
//! The finish choke point publishes a completion even when its commit fails, so a
//! live consumer gets it; the completion is kept here and committed again: by a
//! task that retries with back-off (1 s doubling to 30 s) while any is pending, and
//! once more when the registry detaches or shuts down. One delivered meanwhile is
//! marked delivered right after its commit, so a restart does not replay it. Should
//! the process die first, a supervised session's exit record (which its shim writes
//! until it can) gives the next daemon the real ending at restore.

use crate::lock_order::{Mutex, MutexGuard, rank};
use std::collections::HashSet;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use crate::event::Event;
use crate::registry::Inner;

/// The first pause before a retry; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_secs(1);

/// The longest pause between two retries.
const MAX_PAUSE: Duration = Duration::from_secs(30);

/// Completions waiting for their commit.
#[derive(Debug, Default)]
pub(super) struct Recommits {
    state: Mutex<Pending, { rank::RECOMMITS }>,
    /// Wakes the retry task when something is kept.
    kept: Arc<tokio::sync::Notify>,
}

#[derive(Debug, Default)]
struct Pending {
    /// Each completion with whether its commit replaces an undelivered row.
    events: Vec<(Event, bool)>,
    /// Completion ids acknowledged before their commit landed.
    delivered: HashSet<String>,
    /// Completion ids acknowledged whose delivered mark could not be written.
    acks: HashSet<String>,
    /// Result receipts (redacted) that could not be stored.
    receipts: Vec<herd_persistence::Stored>,
    /// Whether the retry task was started.
    started: bool,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.events.is_empty() && self.acks.is_empty() && self.receipts.is_empty()
    }
}

impl Recommits {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many completions wait for their commit or their delivered mark.
    pub(super) fn n_pending(&self) -> usize {
        let pending = self.lock();
        pending.events.len() + pending.acks.len() + pending.receipts.len()
    }

    /// Keeps `event`, whose commit failed, for a later commit.
    pub(in crate::registry) fn recommit_later(&self, event: Event, replace: bool) {
        let mut pending = self.lock();
        let id = completion_id(&event);
        // A newer version of the same completion replaces the one kept.
        pending.events.retain(|(e, _)| completion_id(e) != id);
        pending.events.push((event, replace));
        self.kept.notify_one();
    }

    /// Keeps a (redacted) receipt that could not be stored, for a later write.
    pub(in crate::registry) fn restore_receipt_later(&self, stored: herd_persistence::Stored) {
        let mut pending = self.lock();
        pending
            .receipts
            .retain(|r| r.receipt.id != stored.receipt.id);
        pending.receipts.push(stored);
        self.kept.notify_one();
    }

    /// Keeps acknowledged completion ids whose delivered mark failed, for a later
    /// write: until it lands (or should the process die first) they count as
    /// undelivered in the ledger.
    pub(in crate::registry) fn recommit_acks_later(&self, completion_ids: &[&str]) {
        let mut pending = self.lock();
        pending
            .acks
            .extend(completion_ids.iter().map(|id| (*id).to_owned()));
        self.kept.notify_one();
    }

    /// Notes ids acknowledged while their completion waits for its commit.
    pub(in crate::registry) fn note_delivered_before_commit(&self, completion_ids: &[&str]) {
        let mut pending = self.lock();
        if pending.events.is_empty() {
            return;
        }
        let waiting: Vec<String> = pending
            .events
            .iter()
            .filter_map(|(e, _)| completion_id(e))
            .filter(|id| completion_ids.contains(&id.as_str()))
            .collect();
        pending.delivered.extend(waiting);
    }
}

/// The ledger's id of a completion event.
fn completion_id(event: &Event) -> Option<String> {
    matches!(event, Event::Completion { .. })
        .then(|| event.session_id().map(|id| id.as_str().to_owned()))
        .flatten()
}

impl Inner {
    /// Starts the retry task once: it sleeps until something is kept, then retries
    /// with back-off until nothing waits, and ends when the registry detaches or is
    /// dropped.
    pub(in crate::registry) fn arm_recommits(self: &Arc<Self>) {
        {
            let mut pending = self.recommits.lock();
            if pending.started {
                return;
            }
            pending.started = true;
        }
        let inner = Arc::downgrade(self);
        let kept = Arc::clone(&self.recommits.kept);
        let detach = self.detach.clone();
        drop(self.runtime.spawn(async move {
            loop {
                tokio::select! {
                    () = kept.notified() => {}
                    () = detach.cancelled() => return,
                }
                let mut pause = FIRST_PAUSE;
                loop {
                    wait_before_retry(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                    let Some(inner) = inner.upgrade() else {
                        return;
                    };
                    let left = tokio::task::spawn_blocking(move || inner.flush_recommits())
                        .await
                        .unwrap_or(usize::MAX);
                    if left == 0 {
                        break;
                    }
                }
            }
        }));
    }

    /// Commits what waits, oldest first; returns how many still wait. Blocking.
    pub(in crate::registry) fn flush_recommits(&self) -> usize {
        let (events, delivered, acks, receipts) = {
            let mut pending = self.recommits.lock();
            if pending.is_empty() {
                return 0;
            }
            (
                std::mem::take(&mut pending.events),
                std::mem::take(&mut pending.delivered),
                std::mem::take(&mut pending.acks),
                std::mem::take(&mut pending.receipts),
            )
        };
        // Receipts that fail again are kept again (by store_receipts).
        if !receipts.is_empty() {
            self.store_receipts(receipts);
        }
        let mut failed = Vec::new();
        let mut landed = Vec::new();
        for (event, replace) in events {
            match self.try_commit_completion(&event, replace) {
                Ok(_) => landed.extend(completion_id(&event)),
                Err(()) => failed.push((event, replace)),
            }
        }
        let acknowledged: Vec<&str> = landed
            .iter()
            .filter(|id| delivered.contains(*id))
            .chain(acks.iter())
            .map(String::as_str)
            .collect();
        // A failure keeps them (mark_completions_delivered puts them back).
        if !acknowledged.is_empty() && self.mark_completions_delivered(None, &acknowledged) {
            tracing::info!(
                n_marked = acknowledged.len(),
                "acknowledgements written to the ledger after a failed first try"
            );
        }
        if !landed.is_empty() {
            tracing::info!(
                n_committed = landed.len(),
                "completions committed to the ledger after a failed first try"
            );
        }
        let mut pending = self.recommits.lock();
        let n_left =
            failed.len() + pending.events.len() + pending.acks.len() + pending.receipts.len();
        // Kept meanwhile wins over the older copy.
        for (event, replace) in failed {
            let id = completion_id(&event);
            if !pending.events.iter().any(|(e, _)| completion_id(e) == id) {
                pending.events.insert(0, (event, replace));
            }
        }
        for id in delivered {
            if !landed.contains(&id) {
                pending.delivered.insert(id);
            }
        }
        n_left
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "a back-off between commits of a full disk, not a synchronisation"
)]
async fn wait_before_retry(pause: Duration) {
    tokio::time::sleep(pause).await;
}
