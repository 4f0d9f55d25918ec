//! What the registry keeps on disk: the checkpoint of running sessions (B27), the
//! completion ledger (B29) and result receipts of finished sessions (B38).
//!
//! The registry calls in at a handful of points and nowhere else: after a spawn
//! ([`Inner::spawned`]), inside the finish choke point ([`Inner::commit_completion`],
//! [`Inner::emits_completion`]) and right after it ([`Inner::finished_durably`]), on
//! the first consume ([`Inner::replay_once`]), on drain ([`Inner::mark_delivered`]), and
//! as a fallback when a lookup finds nothing in memory (the `*_from_receipt` answers).
//!
//! Checkpoint writes are coalesced: a spawn or finish bumps a wanted generation and,
//! when no write is in flight, starts one on the blocking pool; the write snapshots the
//! running set at the moment it starts, so every request made before that moment is
//! covered by it and a burst of 200 spawns costs a handful of fsyncs, not 200. Before a
//! spawn answers, its session's entry is written alone as a pending entry
//! (`processes.pending/<id>.json`, renamed into place without fsync: it survives a
//! crash of the host process, which is what re-adoption needs, and a crash of the
//! machine ends the session anyway); the next full write covers it and removes it.
//! So a session whose spawn was answered is found by restore, and the answer does not
//! wait for the disk. Should the pending entry fail, the spawn waits for the full
//! write instead.
//!
//! A finish does not wait, and does not even ask at once: its removal rides on the
//! next write anyone asks for, or on a write of its own 100 ms later, so a stream of
//! short jobs costs one write per spawn instead of two (a crash before that write
//! leaves an entry whose pid is gone, which restore closes, or whose receipt exists,
//! which restore just drops). A failed write is logged at warn and the spawn still
//! succeeds: the session runs, but would not be restored after a crash.
//!
//! The ledger: a queued completion is committed to `<home>/state.db` inside the choke
//! point, before it is queued or broadcast. A failed commit is logged at error and the
//! completion is still published (a live consumer gets it; it just does not survive a
//! restart). The ledger is created on the first commit, never before: a registry that
//! never queued a completion creates no ledger. Completion ids are session ids (one
//! completion per session, B9), so a commit of the same completion twice is one row.
//! `drain` marks what it returns delivered. Undelivered completions of earlier
//! processes are re-queued once per registry, on the first `drain` or `subscribe`, not
//! at construction; completions this registry committed itself are skipped there
//! (they are in its queues already), so none is delivered twice. A missing ledger
//! replays nothing and creates nothing.
//!
//! Receipts: every finish stores a [`ResultReceipt`] (command and the output tail
//! redacted) on the blocking pool, off the choke point; receipts queued in a burst are
//! written newest-64 only, since the store keeps no more than that anyway,
//! by a few threads at once (concurrent fsyncs share the file system's commits). When a
//! lookup misses memory, `poll`, `log`, `log_chunk`, `wait` and `kill` answer from the
//! receipt and say so in their note.
//!
//! Invariant: one registry per home per process. Checkpoint entries are keyed by the
//! writing process, so two registries of one process on one home would replace each
//! other's entries and replay each other's completions.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use herd_hooks::{OutputContext, RedactMode, Route, Shown, Window};
use herd_persistence::{
    CheckpointStore, CompletionRecord, Home, Ledger, ReceiptStore, ResultReceipt, SessionRecord,
    Writer,
};
use serde::Deserialize;
use tokio::sync::watch;

use super::{Inner, LOG_DEFAULT_LINES, POLL_PREVIEW_CHARS};
use crate::answers::{
    CompletionReason, KillAnswer, KillStatus, LogAnswer, LogChunk, ModeName, PollAnswer,
    SessionStatus, WaitAnswer, WaitStatus,
};
use crate::error::{Error, LookupError};
use crate::event::Event;
use crate::id::{self, SessionId};
use crate::session::Session;
use crate::{KillSource, SpawnInfo};

/// Receipts written per burst at most: the store keeps only the newest this many.
const RECEIPT_BURST: usize = herd_persistence::MAX_RECEIPTS;

/// Threads that write one burst of receipts.
const RECEIPT_WRITERS: usize = 8;

/// How long a finish waits for another write to cover it before asking for its own.
const FINISH_CHECKPOINT_DELAY: Duration = Duration::from_millis(100);

/// The note of an answer served from a receipt.
const RECEIPT_NOTE: &str = "answered from the durable result receipt: the session finished and is no longer in memory (pruned, or herd restarted); output is the redacted tail kept with the receipt";

/// The note of a log page of a session only a receipt knows, paged from its log file.
const RECEIPT_LOG_NOTE: &str = "answered from the session's log file: the session finished and is no longer in memory (pruned, or herd restarted); its durable result receipt keeps the exit fields";

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

/// Replay state: before the first consume, the completions this registry committed.
#[derive(Debug)]
enum Replay {
    Pending { committed_here: HashSet<String> },
    Done,
}

/// One receipt waiting to be written, output not yet redacted.
#[derive(Debug)]
struct ReceiptJob {
    receipt: ResultReceipt,
    /// Where the receipt's output starts in the session's log, when earlier output
    /// was not kept in it: the log before it is the redaction context (a private
    /// key whose BEGIN was dropped, a line the tail cut).
    log_context: Option<(std::path::PathBuf, u64)>,
}

/// The registry's durable side; one per registry, inside `Inner`.
#[derive(Debug)]
pub(super) struct Durable {
    checkpoint: CheckpointStore,
    receipts: ReceiptStore,
    /// This process, as checkpoint writer.
    writer: Writer,
    extras: Mutex<HashMap<SessionId, Extras>>,
    /// Sessions re-adopted (or closed) by restore: not our children, so no exit
    /// status is ever collected for them and no completion is emitted (B28). The value
    /// is the note their answers carry.
    detached: Mutex<HashMap<SessionId, String>>,
    /// Notes the answers of other sessions carry (a supervised session restored in
    /// a special way); unlike `detached`, these sessions still emit completions.
    notes: Mutex<HashMap<SessionId, String>>,
    checkpoint_queue: Mutex<Queue>,
    /// The generation the last finished checkpoint write covered.
    checkpoint_written: watch::Sender<u64>,
    /// Serialises checkpoint writes (the snapshot and the write happen under it).
    checkpoint_lock: Mutex<()>,
    /// A deferred write after finishes is scheduled; it is not needed once a write of
    /// this generation or later finished.
    checkpoint_deferred: Mutex<Option<u64>>,
    /// Sessions whose pending checkpoint entry no full write has covered yet.
    pending_ids: Mutex<Vec<String>>,
    receipt_queue: Mutex<(Queue, Vec<ReceiptJob>)>,
    receipts_written: watch::Sender<u64>,
    /// Ids whose receipt is queued but not yet written (or given up on). Pruning
    /// keeps these sessions in memory, so a result is never in neither place (B38).
    receipts_unwritten: Mutex<std::collections::HashSet<String>>,
    /// `None` until the first commit or delivery needs it.
    ledger: Mutex<Option<Ledger>>,
    replay: Mutex<Replay>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Durable {
    /// The durable side for `home`, keeping session logs within
    /// `log_budget_bytes`. Does no I/O.
    pub(super) fn new(home: &Home, log_budget_bytes: u64) -> Durable {
        Durable {
            checkpoint: CheckpointStore::new(home),
            receipts: ReceiptStore::new(home).with_log_budget(log_budget_bytes),
            writer: Writer::current(),
            extras: Mutex::new(HashMap::new()),
            detached: Mutex::new(HashMap::new()),
            notes: Mutex::new(HashMap::new()),
            checkpoint_queue: Mutex::new(Queue::default()),
            checkpoint_written: watch::channel(0).0,
            checkpoint_lock: Mutex::new(()),
            checkpoint_deferred: Mutex::new(None),
            pending_ids: Mutex::new(Vec::new()),
            receipt_queue: Mutex::new((Queue::default(), Vec::new())),
            receipts_written: watch::channel(0).0,
            receipts_unwritten: Mutex::new(std::collections::HashSet::new()),
            ledger: Mutex::new(None),
            replay: Mutex::new(Replay::Pending {
                committed_here: HashSet::new(),
            }),
        }
    }

    pub(super) fn checkpoint(&self) -> &CheckpointStore {
        &self.checkpoint
    }

    pub(super) fn receipts(&self) -> &ReceiptStore {
        &self.receipts
    }

    pub(super) fn writer(&self) -> Writer {
        self.writer
    }

    pub(super) fn set_extras(&self, id: SessionId, extras: Extras) {
        lock(&self.extras).insert(id, extras);
    }

    pub(super) fn mark_detached(&self, id: SessionId, note: String) {
        lock(&self.detached).insert(id, note);
    }

    /// Gives a session a note its answers carry, without changing what it emits.
    pub(super) fn mark_note(&self, id: SessionId, note: String) {
        lock(&self.notes).insert(id, note);
    }

    /// The note a detached (or otherwise noted) session's answers carry.
    pub(super) fn detached_note(&self, id: &SessionId) -> Option<String> {
        lock(&self.detached)
            .get(id)
            .cloned()
            .or_else(|| lock(&self.notes).get(id).cloned())
    }
}

impl Inner {
    /// After a spawn was answered by the table: records the checkpoint-only settings
    /// and the session's pending checkpoint entry, and asks for a full write that
    /// covers it. When the pending entry cannot be written, waits for that write
    /// instead, so an answered spawn is always findable after a crash of the host.
    pub(super) async fn spawned(self: &Arc<Self>, info: &SpawnInfo) {
        let extras = Extras {
            command_redacted: self
                .config
                .pipeline
                .redact_command(&info.command)
                .into_owned(),
            watch_patterns: info.watch_patterns.clone(),
            heartbeat_seconds: info.heartbeat_seconds.unwrap_or(0),
        };
        let running = {
            // Under the table lock: a session that already finished gets no extras
            // (the finish hook, which removes them, may have run already), and needs
            // no entry: there is nothing left to restore.
            let tables = self.lock();
            let running = tables.running.get(&info.session_id).cloned();
            if running.is_some() {
                self.durable
                    .set_extras(info.session_id.clone(), extras.clone());
            }
            running
        };
        let Some(session) = running else {
            return;
        };
        let record = self.record_of(&session, Some(&extras));
        match self
            .durable
            .checkpoint
            .write_pending(&self.durable.writer, &record)
        {
            Ok(()) => {
                lock(&self.durable.pending_ids).push(record.id);
                self.request_checkpoint();
            }
            Err(error) => {
                tracing::warn!(%error, "pending checkpoint entry not written; the spawn waits for a full checkpoint write instead");
                let generation = self.request_checkpoint();
                self.checkpoint_settled(generation).await;
            }
        }
    }

    /// Asks for a checkpoint write; returns the generation that covers this request.
    pub(crate) fn request_checkpoint(self: &Arc<Self>) -> u64 {
        let mut q = lock(&self.durable.checkpoint_queue);
        q.wanted += 1;
        let generation = q.wanted;
        if !q.in_flight {
            q.in_flight = true;
            let inner = Arc::clone(self);
            drop(self.runtime.spawn_blocking(move || inner.checkpoint_loop()));
        }
        generation
    }

    /// Asks for a checkpoint write within [`FINISH_CHECKPOINT_DELAY`], for a change
    /// nobody waits on (a finish). Finishes in a burst share one write, and a write
    /// that starts meanwhile for another reason (a spawn) covers them, so a stream of
    /// short jobs costs one write per spawn rather than two.
    #[expect(
        clippy::disallowed_methods,
        reason = "a debounce delay in production code; it synchronises nothing"
    )]
    pub(crate) fn request_checkpoint_soon(self: &Arc<Self>) {
        let after = lock(&self.durable.checkpoint_queue).wanted + 1;
        let mut deferred = lock(&self.durable.checkpoint_deferred);
        let scheduled = deferred.is_some();
        *deferred = Some(after);
        drop(deferred);
        if scheduled {
            return;
        }
        let inner = Arc::clone(self);
        drop(self.runtime.spawn(async move {
            tokio::time::sleep(FINISH_CHECKPOINT_DELAY).await;
            let Some(after) = lock(&inner.durable.checkpoint_deferred).take() else {
                return;
            };
            // A write asked for after the last finish snapshotted after it too.
            if *inner.durable.checkpoint_written.borrow() < after {
                inner.request_checkpoint();
            }
        }));
    }

    /// Waits until a checkpoint write covering `generation` finished (well or not).
    pub(super) async fn checkpoint_settled(&self, generation: u64) {
        let mut rx = self.durable.checkpoint_written.subscribe();
        let _ = rx.wait_for(|written| *written >= generation).await;
    }

    /// Runs on the blocking pool until no request is left uncovered.
    fn checkpoint_loop(&self) {
        loop {
            let generation = lock(&self.durable.checkpoint_queue).wanted;
            if let Err(error) = self.write_checkpoint() {
                tracing::warn!(%error, "checkpoint not written; running sessions would not be restored after a crash");
            }
            self.durable
                .checkpoint_written
                .send_modify(|w| *w = (*w).max(generation));
            let mut q = lock(&self.durable.checkpoint_queue);
            if q.wanted == generation {
                q.in_flight = false;
                return;
            }
        }
    }

    /// Snapshots the running set and replaces this process's checkpoint entries with
    /// it. Blocking.
    pub(super) fn write_checkpoint(&self) -> Result<(), herd_persistence::Error> {
        let _serial = lock(&self.durable.checkpoint_lock);
        // Taken before the snapshot: every session in this list was in the running
        // table before it, so the write lists it, or it finished and needs no entry.
        let covered = std::mem::take(&mut *lock(&self.durable.pending_ids));
        let records = self.running_records();
        let written = match self
            .durable
            .checkpoint
            .write_own(&self.durable.writer, &records)
        {
            Ok(Some(moved)) => {
                tracing::warn!(%moved, "unusable checkpoint moved aside while writing");
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(herd_persistence::Error::HomeMissing { .. }) if records.is_empty() => Ok(()),
            Err(error) => Err(error),
        };
        if written.is_ok() {
            // `write_own` already removed the entries of the sessions it lists; what
            // is left are the sessions that finished meanwhile.
            let listed: HashSet<&str> = records.iter().map(|r| r.id.as_str()).collect();
            let finished: Vec<&str> = covered
                .iter()
                .map(String::as_str)
                .filter(|id| !listed.contains(id))
                .collect();
            self.durable.checkpoint.remove_pending(&finished);
        } else {
            lock(&self.durable.pending_ids).extend(covered);
        }
        written
    }

    /// The checkpoint records of every running session.
    fn running_records(&self) -> Vec<SessionRecord> {
        let running: Vec<Arc<Session>> = self.lock().running.values().cloned().collect();
        let extras = lock(&self.durable.extras);
        let mut records: Vec<SessionRecord> = running
            .iter()
            .map(|s| self.record_of(s, extras.get(&s.id)))
            .collect();
        records.sort_by(|a, b| a.id.cmp(&b.id));
        records
    }

    /// The checkpoint record of one session.
    fn record_of(&self, s: &Session, extra: Option<&Extras>) -> SessionRecord {
        let command = extra.map_or_else(
            || self.config.pipeline.redact_command(&s.command).into_owned(),
            |e| e.command_redacted.clone(),
        );
        let options = options_record(s, &command);
        let st = s.state();
        SessionRecord {
            id: s.id.as_str().to_owned(),
            command,
            pid: s.pid,
            pgid: s.pgid,
            start_time: s.start_time,
            task_id: st.task_id.clone(),
            owner_task_id: st.owner_task_id.clone(),
            session_key: st.session_key.clone().unwrap_or_default(),
            mode: match s.mode {
                ModeName::Pipe => herd_persistence::Mode::Pipe,
                ModeName::Pty => herd_persistence::Mode::Pty,
            },
            notify: s.is_notify(),
            watch_patterns: extra.map(|e| e.watch_patterns.clone()).unwrap_or_default(),
            heartbeat_seconds: extra.map_or(0, |e| e.heartbeat_seconds),
            completion_output_chars: s.completion_chars as u64,
            persist_on_release: s.persist_on_release,
            log_path: s.log_path.clone(),
            cwd: Some(s.cwd.clone()),
            started_at: unix_seconds(s.started_at),
            shim: s.shim,
            name: s.name.clone(),
            options: Some(options),
        }
    }

    /// Writes the checkpoint now and waits for pending receipts (for shutdown, restore
    /// and tests).
    pub(super) async fn sync_durable(self: &Arc<Self>) -> Result<(), Error> {
        let inner = Arc::clone(self);
        let written = tokio::task::spawn_blocking(move || inner.write_checkpoint())
            .await
            .map_err(|e| Error::Io {
                path: self.durable.checkpoint.path(),
                source: std::io::Error::other(e),
            })?;
        self.receipts_settled().await;
        written.map_err(Error::from)
    }

    /// Whether the choke point publishes a completion for `s`: not for a session
    /// restore re-adopted or closed, whose exit status is never collected (B28).
    pub(super) fn emits_completion(&self, s: &Session) -> bool {
        !lock(&self.durable.detached).contains_key(&s.id)
    }

    /// Commits a completion to the ledger before it is published (B29). Called inside
    /// the choke point's critical section for completions that are queued. A failure
    /// is logged at error; the caller publishes anyway. Returns whether the completion
    /// is to be queued: not when the ledger already holds it as delivered.
    pub(super) fn commit_completion(&self, event: &Event) -> bool {
        self.commit_completion_as(event, false)
    }

    /// [`Inner::commit_completion`] for a completion that changed after its first
    /// commit: the undelivered row is replaced, so a replay after a restart carries
    /// what was queued.
    pub(super) fn recommit_completion(&self, event: &Event) -> bool {
        self.commit_completion_as(event, true)
    }

    fn commit_completion_as(&self, event: &Event, replace: bool) -> bool {
        let Event::Completion {
            session_id,
            task_id,
            owner_task_id,
            session_key,
            command,
            ..
        } = event
        else {
            return true;
        };
        let mut value = match serde_json::to_value(event) {
            Ok(value) => value,
            Err(error) => {
                tracing::error!(session_id = %session_id, %error, "completion not committed to the ledger: not encodable");
                return true;
            }
        };
        if let Some(slot) = value.get_mut("command") {
            *slot = serde_json::Value::String(
                self.config.pipeline.redact_command(command).into_owned(),
            );
        }
        let record = CompletionRecord {
            completion_id: session_id.as_str().to_owned(),
            session_id: session_id.as_str().to_owned(),
            owner_task_id: owner_task_id.clone(),
            task_id: task_id.clone(),
            session_key: session_key.clone().unwrap_or_default(),
            event: value,
            created_at: unix_seconds(SystemTime::now()),
        };
        let mut slot = lock(&self.durable.ledger);
        if slot.is_none() {
            match Ledger::create(&self.home) {
                Ok(ledger) => *slot = Some(ledger),
                Err(error) => {
                    tracing::error!(session_id = %session_id, %error, "completion not committed to the ledger; it is published but will not survive a restart");
                    return true;
                }
            }
        }
        let ledger = slot.as_ref().expect("the ledger was just opened");
        let committed = if replace {
            ledger.commit_replacing(&record)
        } else {
            ledger.commit(&record)
        };
        match committed {
            Ok(new) => {
                let queue =
                    new || !matches!(ledger.is_delivered(&record.completion_id), Ok(Some(true)));
                if let Replay::Pending { committed_here } = &mut *lock(&self.durable.replay) {
                    committed_here.insert(record.completion_id);
                }
                queue
            }
            Err(error) => {
                tracing::error!(session_id = %session_id, %error, "completion not committed to the ledger; it is published but will not survive a restart");
                true
            }
        }
    }

    /// Commits a completion produced elsewhere (a far host's, under its qualified
    /// id) to the ledger, noting it as committed here so the replay does not queue
    /// it a second time. Returns `Some(true)` when it was new, `Some(false)` when the
    /// ledger held it already (a replay from the far side: it was queued before),
    /// `None` when the ledger cannot be written.
    pub(super) fn commit_external(&self, event: &Event) -> Option<bool> {
        let Event::Completion {
            session_id,
            task_id,
            owner_task_id,
            session_key,
            ..
        } = event
        else {
            return Some(true);
        };
        let value = serde_json::to_value(event).ok()?;
        let record = CompletionRecord {
            completion_id: session_id.as_str().to_owned(),
            session_id: session_id.as_str().to_owned(),
            owner_task_id: owner_task_id.clone(),
            task_id: task_id.clone(),
            session_key: session_key.clone().unwrap_or_default(),
            event: value,
            created_at: unix_seconds(SystemTime::now()),
        };
        let mut slot = lock(&self.durable.ledger);
        if slot.is_none() {
            match Ledger::create(&self.home) {
                Ok(ledger) => *slot = Some(ledger),
                Err(error) => {
                    tracing::error!(session_id = %session_id, %error, "a far completion not committed: the ledger cannot be opened");
                    return None;
                }
            }
        }
        let ledger = slot.as_ref().expect("the ledger was just opened");
        match ledger.commit(&record) {
            Ok(new) => {
                // Queued here now, so the replay must not queue it again; one the
                // ledger held already is left to the replay (if undelivered).
                if new && let Replay::Pending { committed_here } = &mut *lock(&self.durable.replay)
                {
                    committed_here.insert(record.completion_id);
                }
                Some(new)
            }
            Err(error) => {
                tracing::error!(session_id = %session_id, %error, "a far completion not committed to the ledger");
                None
            }
        }
    }

    /// Re-queues, once per registry, the undelivered completions earlier processes
    /// left in the home's ledger (B29). Called by the first `drain` or `subscribe`.
    pub(super) fn replay_once(&self) {
        if matches!(*lock(&self.durable.replay), Replay::Done) {
            return;
        }
        let records = {
            let mut slot = lock(&self.durable.ledger);
            if slot.is_none() {
                match Ledger::open(&self.home) {
                    Ok(opened) => *slot = opened,
                    Err(error) => {
                        tracing::error!(%error, "undelivered completions not replayed: the ledger cannot be opened");
                    }
                }
            }
            // Completions of owners that never came back go after a week, or beyond
            // the newest thousand, as result receipts do.
            if let Some(ledger) = slot.as_ref() {
                match ledger.expire_unclaimed(
                    herd_persistence::UNCLAIMED_RETENTION,
                    herd_persistence::MAX_UNCLAIMED,
                ) {
                    Ok(0) => {}
                    Ok(n_expired) => {
                        tracing::info!(n_expired, "unclaimed completions expired from the ledger");
                    }
                    Err(error) => tracing::warn!(%error, "unclaimed completions not expired"),
                }
            }
            match slot.as_ref().map(Ledger::undelivered) {
                None => Vec::new(),
                Some(Ok(records)) => records,
                Some(Err(error)) => {
                    tracing::error!(%error, "undelivered completions not replayed: the ledger cannot be read");
                    Vec::new()
                }
            }
        };
        let mut tables = self.lock();
        let committed_here = match std::mem::replace(&mut *lock(&self.durable.replay), Replay::Done)
        {
            Replay::Pending { committed_here } => committed_here,
            // Another consumer replayed meanwhile.
            Replay::Done => return,
        };
        let mut n_replayed = 0;
        for record in records {
            if committed_here.contains(&record.completion_id) {
                continue;
            }
            let Some(event) = event_from_ledger(&record.event) else {
                tracing::error!(completion_id = %record.completion_id, "undelivered completion not replayed: its stored event is not a completion");
                continue;
            };
            tables.enqueue(event.owner_task_id().unwrap_or_default(), event.clone());
            let _ = self.events.send(event);
            n_replayed += 1;
        }
        drop(tables);
        if n_replayed > 0 {
            tracing::info!(
                n_replayed,
                "undelivered completions replayed from the ledger"
            );
        }
    }

    /// Marks drained completions delivered in the ledger.
    pub(crate) fn mark_delivered(&self, events: &[Event]) {
        let ids: Vec<&SessionId> = events
            .iter()
            .filter(|e| matches!(e, Event::Completion { .. }))
            .filter_map(Event::session_id)
            .collect();
        if ids.is_empty() {
            return;
        }
        let mut slot = lock(&self.durable.ledger);
        if slot.is_none() {
            match Ledger::open(&self.home) {
                Ok(Some(ledger)) => *slot = Some(ledger),
                Ok(None) => return,
                Err(error) => {
                    tracing::error!(%error, "drained completions not marked delivered; they will be delivered again after a restart");
                    return;
                }
            }
        }
        let ledger = slot.as_ref().expect("the ledger was just opened");
        for id in ids {
            match ledger.mark_delivered(id.as_str()) {
                Ok(_) | Err(herd_persistence::Error::LedgerUnknownCompletion { .. }) => {}
                Err(error) => {
                    tracing::error!(session_id = %id, %error, "completion not marked delivered; it will be delivered again after a restart");
                }
            }
        }
    }

    /// Right after the choke point released the table lock: drops the session's
    /// checkpoint settings, queues its receipt and a checkpoint write.
    pub(super) fn finished_durably(self: &Arc<Self>, s: &Session) {
        lock(&self.durable.extras).remove(&s.id);
        let (output, output_cut, output_from) = s.text_final();
        let receipt = {
            let st = s.state();
            let Some(fin) = st.finished.as_ref() else {
                lock(&self.durable.receipts_unwritten).remove(s.id.as_str());
                return;
            };
            ResultReceipt {
                id: s.id.as_str().to_owned(),
                command: s.command.clone(),
                cwd: Some(s.cwd.clone()),
                task_id: st.task_id.clone(),
                owner_task_id: st.owner_task_id.clone(),
                session_key: st.session_key.clone().unwrap_or_default(),
                started_at: unix_seconds(s.started_at),
                finished_at: unix_seconds(fin.at),
                exit_code: fin.exit.and_then(|e| e.code),
                reason: reason_name(fin.reason).to_owned(),
                source: fin
                    .source
                    .map(KillSource::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                notify: s.is_notify(),
                output,
                output_cut,
            }
        };
        let log_context = output_cut.then(|| (s.log_path.clone(), output_from));
        self.queue_receipt(ReceiptJob {
            receipt,
            log_context,
        });
        self.request_checkpoint_soon();
    }

    fn queue_receipt(self: &Arc<Self>, job: ReceiptJob) {
        lock(&self.durable.receipts_unwritten).insert(job.receipt.id.clone());
        let mut q = lock(&self.durable.receipt_queue);
        q.1.push(job);
        q.0.wanted += 1;
        if !q.0.in_flight {
            q.0.in_flight = true;
            let inner = Arc::clone(self);
            drop(self.runtime.spawn_blocking(move || inner.receipt_loop()));
        }
    }

    /// Runs on the blocking pool until the receipt queue is empty.
    fn receipt_loop(&self) {
        loop {
            let (generation, mut jobs) = {
                let mut q = lock(&self.durable.receipt_queue);
                if q.1.is_empty() {
                    q.0.in_flight = false;
                    return;
                }
                (q.0.wanted, std::mem::take(&mut q.1))
            };
            if jobs.len() > RECEIPT_BURST {
                let mut unwritten = lock(&self.durable.receipts_unwritten);
                for dropped in jobs.drain(..jobs.len() - RECEIPT_BURST) {
                    unwritten.remove(&dropped.receipt.id);
                }
            }
            // A burst is written by a few threads at once: each receipt is its own
            // fsynced file, and the file system commits concurrent fsyncs together.
            let n_writers = jobs.len().min(RECEIPT_WRITERS);
            if n_writers <= 1 {
                jobs.into_iter().for_each(|job| self.store_receipt(job));
            } else {
                let mut shares: Vec<Vec<ReceiptJob>> = (0..n_writers).map(|_| Vec::new()).collect();
                for (idx, job) in jobs.into_iter().enumerate() {
                    shares[idx % n_writers].push(job);
                }
                std::thread::scope(|scope| {
                    for share in shares {
                        scope.spawn(move || {
                            share.into_iter().for_each(|job| self.store_receipt(job))
                        });
                    }
                });
            }
            // Sessions kept past the finished cap only until their receipts were
            // written can go now, not at some later finish.
            self.prune(&mut self.lock());
            self.durable
                .receipts_written
                .send_modify(|w| *w = (*w).max(generation));
        }
    }

    /// Redacts and stores one receipt. Blocking.
    fn store_receipt(&self, job: ReceiptJob) {
        let mut receipt = job.receipt;
        let mode = RedactMode::for_command(&receipt.command);
        let before = job
            .log_context
            .map(|(path, at)| crate::output::log_text_before(&path, at))
            .unwrap_or_default();
        receipt.output =
            self.config
                .pipeline
                .redactor()
                .redact_after(&before, &receipt.output, mode);
        receipt.command = self
            .config
            .pipeline
            .redact_command(&receipt.command)
            .into_owned();
        let stored = self.durable.receipts.store(&receipt);
        lock(&self.durable.receipts_unwritten).remove(&receipt.id);
        match stored {
            Ok(()) => self.forget_shim(&receipt.id),
            Err(herd_persistence::Error::HomeMissing { .. }) => {
                tracing::debug!(session_id = %receipt.id, "no receipt: the home is gone");
            }
            Err(error) => {
                tracing::warn!(session_id = %receipt.id, %error, "result receipt not stored; the result is answerable only while the session is in memory");
            }
        }
    }

    /// Removes a finished supervised session's shim directory once its receipt is
    /// stored: from then on a restore finds the receipt, so the exit record is no
    /// longer needed.
    fn forget_shim(&self, id: &str) {
        let Some(sid) = SessionId::parse(id) else {
            return;
        };
        let supervised = self.lock().get(&sid).is_some_and(|s| s.shim.is_some());
        if !supervised {
            return;
        }
        if let Ok(dir) = herd_persistence::ShimDir::new(&self.home, id)
            && let Err(error) = dir.remove()
        {
            tracing::warn!(session_id = %id, %error, "supervisor directory of a finished session not removed");
        }
    }

    /// Marks `id`'s receipt as on its way, before the choke point prunes: from here
    /// until it is written the session is kept in memory.
    pub(super) fn expect_receipt(&self, id: &SessionId) {
        lock(&self.durable.receipts_unwritten).insert(id.as_str().to_owned());
    }

    /// Whether `id`'s receipt is queued but not written yet; such a finished session
    /// must stay in memory until it is.
    pub(super) fn receipt_pending(&self, id: &SessionId) -> bool {
        lock(&self.durable.receipts_unwritten).contains(id.as_str())
    }

    /// Waits until every receipt queued so far is written (or failed).
    pub(super) async fn receipts_settled(&self) {
        let generation = lock(&self.durable.receipt_queue).0.wanted;
        let mut rx = self.durable.receipts_written.subscribe();
        let _ = rx.wait_for(|written| *written >= generation).await;
    }

    /// The note a live session's answers carry (a re-adopted session says where its
    /// earlier output is).
    pub(super) fn session_note(&self, s: &Session) -> Option<String> {
        self.durable.detached_note(&s.id)
    }

    /// Finds a receipt for an id or unique prefix that memory did not resolve. Returns
    /// `miss` unchanged when there is none.
    pub(super) fn receipt_lookup(
        &self,
        id_or_prefix: &str,
        miss: LookupError,
    ) -> Result<(SessionId, ResultReceipt), LookupError> {
        if !matches!(miss, LookupError::NotFound { .. }) {
            return Err(miss);
        }
        let wanted = id::normalise_prefix(id_or_prefix);
        let load = |id: &str| match self.durable.receipts.load(id) {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(session_id = id, %error, "result receipt unreadable");
                None
            }
        };
        if let Some(receipt) = SessionId::parse(&wanted).and_then(|_| load(&wanted)) {
            let id = SessionId::parse(&receipt.id).ok_or(miss)?;
            return Ok((id, receipt));
        }
        let Ok(dir) = std::fs::read_dir(self.home.results_dir()) else {
            return Err(miss);
        };
        let mut matches: Vec<String> = dir
            .filter_map(|e| e.ok()?.file_name().to_str().map(str::to_owned))
            .filter_map(|name| name.strip_suffix(".json").map(str::to_owned))
            .filter(|name| name.starts_with(&wanted) && SessionId::parse(name).is_some())
            .collect();
        matches.sort();
        match matches.as_slice() {
            [one] => {
                let receipt = load(one).ok_or(miss)?;
                let id = SessionId::parse(&receipt.id).ok_or(LookupError::NotFound {
                    id: id_or_prefix.to_owned(),
                })?;
                Ok((id, receipt))
            }
            [] => Err(miss),
            many => Err(LookupError::Ambiguous {
                prefix: id_or_prefix.to_owned(),
                matches: many.iter().filter_map(|m| SessionId::parse(m)).collect(),
            }),
        }
    }

    /// Ids of receipts that start with `prefix`, other than `except` (for B37: a
    /// prefix naming one session in memory and another only by receipt is ambiguous).
    pub(super) fn other_receipts_with_prefix(
        &self,
        prefix: &str,
        except: &SessionId,
    ) -> Vec<SessionId> {
        let Ok(dir) = std::fs::read_dir(self.home.results_dir()) else {
            return Vec::new();
        };
        dir.filter_map(|e| e.ok()?.file_name().to_str().map(str::to_owned))
            .filter_map(|name| SessionId::parse(name.strip_suffix(".json")?))
            .filter(|id| id.as_str().starts_with(prefix) && id != except)
            .collect()
    }

    /// A window of receipt output through the seam with the route of the answer (B30).
    fn show_receipt(&self, r: &ResultReceipt, route: Route, window: Window<'_>) -> Shown {
        let ctx = OutputContext {
            route,
            command: &r.command,
            return_code: r.exit_code,
            owner_task_id: &r.owner_task_id,
            session_id: &r.id,
            backend: "local",
        };
        self.config.pipeline.show(&ctx, window)
    }

    /// A poll answered from a receipt.
    pub(super) fn poll_from_receipt(
        &self,
        id: &str,
        miss: LookupError,
    ) -> Result<PollAnswer, Error> {
        let (session_id, r) = self.receipt_lookup(id, miss)?;
        let preview = Window::last_chars(&r.output, POLL_PREVIEW_CHARS);
        let cut = r.output_cut || preview.omits_start();
        let log_path = self.home.session_log_path(session_id.as_str());
        let total_ingested = std::fs::metadata(&log_path).map_or(0, |m| m.len());
        Ok(PollAnswer {
            command: self.config.pipeline.show_command(&r.command),
            status: SessionStatus::Exited,
            pid: 0,
            uptime_seconds: (r.finished_at - r.started_at).max(0.0) as u64,
            output_preview: self.show_receipt(&r, Route::Poll, preview),
            exit_code: r.exit_code,
            signal: None,
            completion_reason: Some(reason_from_name(&r.reason)),
            termination_source: source_from_name(&r.source),
            output_cut: cut,
            log_path,
            bytes_not_kept: 0,
            total_ingested,
            note: Some(RECEIPT_NOTE.to_owned()),
            time_limit_seconds: None,
            replaces: None,
            session_id,
        })
    }

    /// A log page of a session only a receipt knows: paged from its log file like a
    /// live session's (B39), or from the receipt's tail when the file cannot serve it.
    pub(super) fn log_from_receipt(
        &self,
        id: &str,
        miss: LookupError,
        offset: Option<usize>,
        limit: Option<usize>,
    ) -> Result<LogAnswer, Error> {
        use crate::output::page;
        let (session_id, r) = self.receipt_lookup(id, miss)?;
        let limit = limit.unwrap_or(LOG_DEFAULT_LINES);
        let log_path = self.home.session_log_path(session_id.as_str());
        let held = std::fs::metadata(&log_path).map_or(0, |m| m.len());
        let cap = self.config.log_cap_bytes;
        let why_not_file = if held >= cap {
            Some(format!(
                "the log file stopped at its cap of {cap} bytes and later output is not in it"
            ))
        } else {
            match page::TextPage::of_file(
                &log_path,
                offset,
                limit,
                super::LOG_PAGE_MAX_BYTES,
                false,
            ) {
                Ok(Some(page)) => {
                    let output = self.show_receipt(&r, Route::Log, page.window());
                    let (output, cut_note) = page.marked(output, super::LOG_PAGE_MAX_BYTES);
                    let note = std::iter::once(RECEIPT_LOG_NOTE.to_owned())
                        .chain(cut_note)
                        .collect::<Vec<_>>()
                        .join("; ");
                    return Ok(LogAnswer {
                        command: self.config.pipeline.show_command(&r.command),
                        status: SessionStatus::Exited,
                        output,
                        total_lines: page.n_total_lines,
                        offset: page.first_line_idx,
                        showing: format!("{} lines", page.n_lines),
                        log_path,
                        note: Some(note),
                        session_id,
                    });
                }
                // A session that printed nothing has no log; its receipt is empty too.
                Ok(None) if r.output.is_empty() => None,
                Ok(None) => Some(format!("the log file {} is missing", log_path.display())),
                Err(error) => {
                    tracing::warn!(session_id = %session_id, path = %log_path.display(), %error, "session log unreadable; paging the receipt's tail");
                    Some(format!(
                        "the log file {} cannot be read ({error})",
                        log_path.display()
                    ))
                }
            }
        };
        let page = page::TextPage::of_text(&r.output, offset, limit);
        let note = match why_not_file {
            Some(why) => format!(
                "{RECEIPT_NOTE}; {}",
                page::fallback_note(&why, "the receipt's tail", !r.output_cut)
            ),
            None => RECEIPT_NOTE.to_owned(),
        };
        let output = self.show_receipt(&r, Route::Log, page.window());
        Ok(LogAnswer {
            command: self.config.pipeline.show_command(&r.command),
            status: SessionStatus::Exited,
            output: page.marked(output, super::LOG_PAGE_MAX_BYTES).0,
            total_lines: page.n_total_lines,
            offset: page.first_line_idx,
            showing: format!("{} lines", page.n_lines),
            log_path,
            note: Some(note),
            session_id,
        })
    }

    /// A log chunk of a session only a receipt knows: read from its log file.
    pub(super) fn log_chunk_from_receipt(
        &self,
        id: &str,
        miss: LookupError,
        from_byte: u64,
        max_bytes: usize,
    ) -> Result<LogChunk, Error> {
        let (session_id, r) = self.receipt_lookup(id, miss)?;
        let path = self.home.session_log_path(session_id.as_str());
        let Some(read) = super::logs::read_chunk(&path, from_byte, max_bytes, false)? else {
            return Err(Error::Io {
                path,
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            });
        };
        Ok(LogChunk {
            output: self.show_receipt(&r, Route::Log, read.window()),
            next_byte: read.next_byte,
            is_running: false,
            session_id,
        })
    }

    /// A wait answered from a receipt: the session finished long ago.
    pub(super) fn wait_from_receipt(
        &self,
        id: &str,
        miss: LookupError,
    ) -> Result<WaitAnswer, Error> {
        let (session_id, r) = self.receipt_lookup(id, miss)?;
        let completion_chars = self.config.completion_output_chars;
        let window = Window::last_chars(&r.output, completion_chars);
        let cut = r.output_cut || window.omits_start();
        Ok(WaitAnswer {
            status: WaitStatus::Exited,
            command: self.config.pipeline.show_command(&r.command),
            exit_code: r.exit_code,
            signal: None,
            completion_reason: Some(reason_from_name(&r.reason)),
            termination_source: source_from_name(&r.source),
            output: self.show_receipt(&r, Route::Wait, window),
            output_cut: cut,
            log_path: self.home.session_log_path(session_id.as_str()),
            process_running: false,
            note: Some(RECEIPT_NOTE.to_owned()),
            time_limit_seconds: None,
            session_id,
        })
    }

    /// A kill of a session only a receipt knows: it already finished; nothing is
    /// signalled.
    pub(super) fn kill_from_receipt(
        &self,
        id: &str,
        miss: LookupError,
        source: KillSource,
    ) -> Result<KillAnswer, Error> {
        let (session_id, r) = self.receipt_lookup(id, miss)?;
        let completion_chars = self.config.completion_output_chars;
        let window = Window::last_chars(&r.output, completion_chars);
        let cut = r.output_cut || window.omits_start();
        Ok(KillAnswer {
            status: KillStatus::AlreadyExited,
            completion_reason: Some(reason_from_name(&r.reason)),
            termination_source: source_from_name(&r.source).unwrap_or(source),
            exit_code: r.exit_code,
            output: self.show_receipt(&r, Route::Kill, window),
            output_cut: cut,
            survivors: Vec::new(),
            process_running: false,
            error: None,
            scope_stop_failed: None,
            session_id,
        })
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

/// A kill source from its wire name; empty or unknown is `None`.
/// The spawn options a checkpoint keeps beyond the record's own fields (issue 17).
fn options_record(s: &Session, command_written: &str) -> herd_persistence::SpawnOptions {
    let origin = &s.origin;
    herd_persistence::SpawnOptions {
        time_limit_seconds: s.time_limit.map(|t| t.limit.as_secs()),
        deadline_unix_ms: s.time_limit.map(|t| t.deadline_unix_ms()),
        forward_env: origin.forward_env.clone(),
        env_names: origin.env_names.clone(),
        notify: origin.notify,
        pty: origin.pty,
        // The record's command is the redacted one; it is what ran only if redaction
        // left it as it was.
        command_redacted: origin.command_redacted || command_written != s.command,
        replaces: origin.replaces.as_ref().map(|id| id.as_str().to_owned()),
    }
}

pub(crate) fn source_from_name(name: &str) -> Option<KillSource> {
    [
        KillSource::ProcessKill,
        KillSource::OperatorStop,
        KillSource::KillAll,
        KillSource::TurnTimeout,
        KillSource::AgentClose,
        KillSource::HostShutdown,
        KillSource::TimeLimit,
        KillSource::Restarted,
    ]
    .into_iter()
    .find(|s| s.as_str() == name)
}

/// A completion as the ledger stores it (the JSON of [`Event::Completion`]).
#[derive(Debug, Deserialize)]
struct StoredCompletion {
    #[serde(rename = "type")]
    kind: String,
    session_id: String,
    task_id: String,
    owner_task_id: String,
    session_key: Option<String>,
    command: Shown,
    exit_code: Option<i32>,
    signal: Option<i32>,
    completion_reason: String,
    termination_source: Option<String>,
    output: Shown,
    output_cut: bool,
    log_path: PathBuf,
    started_at: String,
    finished_at: String,
    handoff_note: Option<String>,
    #[serde(default)]
    descendants_alive: Vec<i32>,
}

/// Rebuilds a completion event from its ledger JSON; `None` when it is not one.
pub(super) fn event_from_ledger(value: &serde_json::Value) -> Option<Event> {
    let stored: StoredCompletion = serde_json::from_value(value.clone()).ok()?;
    if stored.kind != "completion" {
        return None;
    }
    Some(Event::Completion {
        // A far host's completion is kept under its qualified id (issue 15).
        session_id: SessionId::parse_any(&stored.session_id)?,
        task_id: stored.task_id,
        owner_task_id: stored.owner_task_id,
        session_key: stored.session_key,
        command: stored.command,
        exit_code: stored.exit_code,
        signal: stored.signal,
        completion_reason: reason_from_name(&stored.completion_reason),
        termination_source: stored
            .termination_source
            .as_deref()
            .and_then(source_from_name),
        output: stored.output,
        output_cut: stored.output_cut,
        log_path: stored.log_path,
        started_at: stored.started_at,
        finished_at: stored.finished_at,
        handoff_note: stored.handoff_note,
        descendants_alive: stored.descendants_alive,
    })
}

#[cfg(test)]
mod tests;
