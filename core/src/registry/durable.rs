//! What the registry keeps on disk: its running sessions, the
//! completion ledger and result receipts of finished sessions.
//!
//! The registry calls in at a handful of points and nowhere else: after a spawn
//! (`Inner::spawned`), inside the finish choke point (`Inner::commit_completion`,
//! [`Durable::emits_completion`]) and right after it (`Inner::finished_durably`), on
//! the first consume (`Inner::replay_once`), on drain (`Inner::mark_delivered`), and
//! as a fallback when a lookup finds nothing in memory
//! ([`Durable::receipt_lookup`], for the `*_from_receipt` answers `view::receipt`
//! builds). The parts are rooms of their own: `checkpoint`, `ledger` and
//! `receipts`; what touches one part alone is a method of [`Durable`], what also
//! needs the table or the runtime is the registry's (`Inner`).
//!
//! Running sessions are rows of `state.db`'s `sessions` table (`herd_persistence::
//! CheckpointStore`). A spawn commits its session's row on the blocking pool before
//! it answers (WAL, `synchronous=NORMAL`: a commit without an fsync of its own, which
//! survives a crash of any herd process; a crash of the machine ends the session
//! anyway), so a session whose spawn was answered is found by restore. A finish
//! deletes the row in the transaction that stores the session's receipt, so at every
//! commit a session is running or finished, never both and never neither. A kill
//! commits its intent before it begins. Refreshes of every running row (an owner
//! changed by a handoff, notify turned on, restore taking sessions over) are
//! coalesced: a request bumps a wanted generation and, when no write is in flight,
//! starts one on the blocking pool that snapshots the running set when it starts; the
//! same transaction deletes the rows of sessions that finished since the last one
//! (the receipt's commit deleted them already unless it failed), asked for 100 ms
//! after a finish. A failed write is logged at warn and the spawn still succeeds: the
//! session runs, but would not be restored after a crash.
//!
//! The ledger: a queued completion is committed to `<home>/state.db` inside the choke
//! point, before it is queued or broadcast. A failed commit is logged at error and the
//! completion is still published (a live consumer gets it; it just does not survive a
//! restart). The ledger is created on the first commit, never before: a registry that
//! never queued a completion creates no ledger. Completion ids are session ids (one
//! completion per session), so a commit of the same completion twice is one row.
//! `drain` marks what it returns delivered. Undelivered completions of earlier
//! processes are re-queued once per registry, on the first `drain` or `subscribe`, not
//! at construction; completions this registry committed itself are skipped there
//! (they are in its queues already), so none is delivered twice. A missing ledger
//! replays nothing and creates nothing.
//!
//! Receipts: every finish stores a [`ResultReceipt`] (command and the output tail
//! redacted, and privately what a restart repeats) on the blocking pool, off the choke
//! point; every receipt queued meanwhile goes into the store (`state.db`) in one
//! transaction. The store keeps them by time and size, not count (`result_ttl`,
//! `log_budget_bytes`), so memory holds only a small cache of finished sessions. When
//! a lookup (id, prefix or name) misses memory, `poll`, `log`, `log_chunk`, `wait`,
//! `kill`, `list` and `restart` answer from the store and say so in their note; an
//! evicted session answers as expired.
//! An answer never precedes the commit of what it reports: `wait`, `kill` and the
//! daemon's `poll` about a finished session wait until its receipt's transaction has
//! ended ([`Durable::receipt_attempted`]), without the table lock.
//!
//! Each part sits behind a herd-persistence trait (`RunningStore`,
//! `CompletionLedger`, `ResultStore`); the config may give one, else the home's
//! `state.db` is used, or memory without the `sqlite` feature.
//!
//! Invariant: one registry per home per process. Running rows are keyed by the
//! writing process, so two registries of one process on one home would take over
//! each other's sessions and replay each other's completions.

use crate::lock_order::{Mutex, MutexGuard, rank};
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use herd_persistence::{Home, ResultStore, RunningStore, Writer};

use crate::answers::CompletionReason;
use crate::id::SessionId;
use crate::session::Session;

mod checkpoint;
mod ledger;
mod receipts;

pub(super) use ledger::event_from_ledger;

/// Settings of a running session the `Session` record does not hold.
#[derive(Debug, Clone, Default)]
pub(super) struct Extras {
    /// The command, redacted once at spawn (the checkpoint stores it this way).
    pub(super) command_redacted: String,
    pub(super) watch_patterns: Vec<String>,
    pub(super) heartbeat_seconds: u64,
}

/// The coalescing state of one kind of background write.
#[derive(Debug, Default)]
struct Queue {
    /// Bumped by every request.
    wanted: u64,
    /// A writer is running on the blocking pool.
    in_flight: bool,
}

/// The registry's durable side; one per registry, inside `Inner`. Each part owns
/// its state: the checkpoint (coalesced writes), the ledger (commits and the
/// replay), the receipts (queued writes and lookups).
#[derive(Debug)]
pub(super) struct Durable {
    checkpoint: checkpoint::Checkpoints,
    ledger: ledger::Completions,
    receipts: receipts::Receipts,
    /// Sessions re-adopted (or closed) by restore: not our children, so no exit
    /// status is ever collected for them and no completion is emitted. The value
    /// is the note their answers carry.
    detached: Mutex<HashMap<SessionId, String>, { rank::DURABLE_DETACHED }>,
    /// Notes the answers of other sessions carry (a supervised session restored in
    /// a special way); unlike `detached`, these sessions still emit completions.
    notes: Mutex<HashMap<SessionId, String>, { rank::DURABLE_NOTES }>,
    /// The receipts and the running rows are the one `state.db`: storing a
    /// receipt deletes its session's running row in the same transaction, so no
    /// refresh has that row to delete.
    receipts_delete_rows: bool,
}

fn lock<T, const R: u8>(m: &Mutex<T, R>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Durable {
    /// The durable side for `home`, keeping finished sessions for `result_ttl`
    /// within `log_budget_bytes`, each part in the store `config` gives, else in
    /// `state.db` (in memory without the `sqlite` feature). Does no I/O.
    pub(super) fn new(home: &Home, config: &crate::config::RegistryConfig) -> Durable {
        Durable {
            checkpoint: checkpoint::Checkpoints::new(home, config.running_store.clone()),
            ledger: ledger::Completions::new(home, config.ledger.clone()),
            receipts: receipts::Receipts::new(
                home,
                config.log_budget_bytes,
                config.result_ttl,
                config.result_store.clone(),
            ),
            detached: Mutex::new(HashMap::new()),
            notes: Mutex::new(HashMap::new()),
            receipts_delete_rows: cfg!(feature = "sqlite")
                && config.running_store.is_none()
                && config.result_store.is_none(),
        }
    }

    pub(super) fn checkpoint(&self) -> &std::sync::Arc<dyn RunningStore> {
        self.checkpoint.store()
    }

    pub(super) fn receipts(&self) -> &std::sync::Arc<dyn ResultStore> {
        self.receipts.store()
    }

    pub(super) fn writer(&self) -> Writer {
        self.checkpoint.writer()
    }

    pub(super) fn set_extras(&self, id: SessionId, extras: Extras) {
        self.checkpoint.set_extras(id, extras);
    }

    pub(super) fn mark_detached(&self, id: SessionId, note: String) {
        lock(&self.detached).insert(id, note);
    }

    /// Gives a session a note its answers carry, without changing what it emits.
    pub(super) fn mark_note(&self, id: SessionId, note: String) {
        lock(&self.notes).insert(id, note);
    }

    /// Whether the choke point publishes a completion for `s`: not for a session
    /// restore re-adopted or closed, whose exit status is never collected.
    pub(super) fn emits_completion(&self, s: &Session) -> bool {
        !self.is_detached(&s.id)
    }

    /// The note a live session's answers carry (a re-adopted session says where its
    /// earlier output is).
    pub(super) fn session_note(&self, s: &Session) -> Option<String> {
        self.detached_note(&s.id)
    }

    /// Whether restore re-adopted or closed `id` (no exit status is collected).
    fn is_detached(&self, id: &SessionId) -> bool {
        lock(&self.detached).contains_key(id)
    }

    /// The note a detached (or otherwise noted) session's answers carry.
    pub(super) fn detached_note(&self, id: &SessionId) -> Option<String> {
        lock(&self.detached)
            .get(id)
            .cloned()
            .or_else(|| lock(&self.notes).get(id).cloned())
    }
}

/// Wall-clock time as unix seconds.
pub(super) fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Unix seconds as wall-clock time (non-finite or negative reads as the epoch).
pub(super) fn from_unix_seconds(secs: f64) -> SystemTime {
    if secs.is_finite() && secs > 0.0 {
        UNIX_EPOCH + Duration::from_secs_f64(secs)
    } else {
        UNIX_EPOCH
    }
}

/// The wire name of a completion reason.
pub(super) fn reason_name(reason: CompletionReason) -> &'static str {
    match reason {
        CompletionReason::Exited => "exited",
        CompletionReason::Killed => "killed",
        CompletionReason::Signaled => "signaled",
        CompletionReason::Lost => "lost",
        CompletionReason::FailedStart => "failed_start",
    }
}

/// A completion reason from its wire name; unknown names read as `lost`.
pub(super) fn reason_from_name(name: &str) -> CompletionReason {
    match name {
        "exited" => CompletionReason::Exited,
        "killed" => CompletionReason::Killed,
        "signaled" => CompletionReason::Signaled,
        "failed_start" => CompletionReason::FailedStart,
        _ => CompletionReason::Lost,
    }
}

#[cfg(test)]
mod tests;
