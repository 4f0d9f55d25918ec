//! Result receipts of finished sessions: queued right after the choke point,
//! redacted and written on the blocking pool (every receipt queued meanwhile in one
//! transaction of the store in `state.db`), and looked up when memory no longer
//! knows a session: by id, prefix or name, and a tombstone for one evicted.
//!
//! Owns [`Receipts`]. Invariant: a finished session whose receipt is not written yet
//! stays in memory, so its result is always answerable from one or the other.

use crate::lock_order::{Mutex, rank};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use herd_persistence::{Home, RestartSpec, ResultReceipt, ResultStore, Stored};
use tokio::sync::watch;

use super::checkpoint::options_record;
use super::{Durable, Queue, from_unix_seconds, lock, reason_name, unix_seconds};
use crate::KillSource;
use crate::answers::ModeName;
use crate::error::LookupError;
use crate::id::{self, SessionId};
use crate::registry::Inner;
use crate::registry::table::check_name;
use crate::session::Session;

/// Receipts written in one transaction at most.
const RECEIPT_BATCH: usize = 512;

/// The longest an answer waits for its session's receipt commit.
const RECEIPT_WAIT: Duration = Duration::from_secs(30);

/// The result receipts of finished sessions: the store, the queue of
/// receipts on their way and the ids whose receipt is not written yet.
#[derive(Debug)]
pub(super) struct Receipts {
    store: Arc<dyn ResultStore>,
    queue: Mutex<(Queue, Vec<ReceiptJob>), { rank::RECEIPTS }>,
    written: watch::Sender<u64>,
    /// Ids whose receipt is queued but not yet written (or given up on). Pruning
    /// keeps these sessions in memory, so a result is never in neither place.
    unwritten: Mutex<HashSet<String>, { rank::RECEIPTS_UNWRITTEN }>,
    /// Ids whose receipt's first store attempt has not ended. An answer about such
    /// a session waits for it ([`Durable::receipt_attempted`]): an answer never
    /// precedes the commit of what it reports.
    attempting: Mutex<HashSet<String>, { rank::RECEIPTS_ATTEMPTING }>,
    /// Bumped whenever ids leave `attempting`.
    attempted: watch::Sender<u64>,
}

impl Receipts {
    pub(super) fn new(
        home: &Home,
        log_budget_bytes: u64,
        result_ttl: Duration,
        given: Option<Arc<dyn ResultStore>>,
    ) -> Receipts {
        Receipts {
            store: given.unwrap_or_else(|| default_store(home, log_budget_bytes, result_ttl)),
            queue: Mutex::new((Queue::default(), Vec::new())),
            written: watch::channel(0).0,
            unwritten: Mutex::new(HashSet::new()),
            attempting: Mutex::new(HashSet::new()),
            attempted: watch::channel(0).0,
        }
    }

    pub(super) fn store(&self) -> &Arc<dyn ResultStore> {
        &self.store
    }

    /// Marks `id`'s receipt as on its way: unwritten (its session stays in
    /// memory) and attempted (answers about it wait).
    fn expect(&self, id: &str) {
        lock(&self.unwritten).insert(id.to_owned());
        lock(&self.attempting).insert(id.to_owned());
    }

    /// Queues `job`'s receipt; whether a writer must be started (none is in
    /// flight; it is marked in flight now).
    fn queue(&self, job: ReceiptJob) -> bool {
        self.expect(&job.receipt.id);
        let mut q = lock(&self.queue);
        q.1.push(job);
        q.0.wanted += 1;
        let starts = !q.0.in_flight;
        q.0.in_flight = true;
        starts
    }

    /// A writer's round: the generation it covers and every receipt queued; `None`
    /// when the queue is empty (the writer is then no longer in flight).
    fn round(&self) -> Option<(u64, Vec<ReceiptJob>)> {
        let mut q = lock(&self.queue);
        if q.1.is_empty() {
            q.0.in_flight = false;
            return None;
        }
        Some((q.0.wanted, std::mem::take(&mut q.1)))
    }

    /// A writer's round covering `generation` ended.
    fn round_done(&self, generation: u64) {
        self.written.send_modify(|w| *w = (*w).max(generation));
    }

    /// The receipts of `ids` were written or given up on: their sessions may leave
    /// memory.
    fn settled<'a>(&self, ids: impl IntoIterator<Item = &'a str>) {
        let mut unwritten = lock(&self.unwritten);
        for id in ids {
            unwritten.remove(id);
        }
    }

    /// Ends the wait of answers about `ids`: their receipts' store attempt is over.
    fn attempt_ended<'a>(&self, ids: impl IntoIterator<Item = &'a str>) {
        let mut any = false;
        {
            let mut attempting = lock(&self.attempting);
            for id in ids {
                any |= attempting.remove(id);
            }
        }
        if any {
            self.attempted.send_modify(|n| *n += 1);
        }
    }

    /// Waits until `id`'s store attempt ended, at most [`RECEIPT_WAIT`] (logged).
    async fn attempted(&self, id: &SessionId) {
        let pending = || lock(&self.attempting).contains(id.as_str());
        if !pending() {
            return;
        }
        let mut rx = self.attempted.subscribe();
        let waited = tokio::time::timeout(RECEIPT_WAIT, rx.wait_for(|_| !pending())).await;
        if waited.is_err() {
            tracing::warn!(session_id = %id, "answered before the receipt's commit: it took longer than {RECEIPT_WAIT:?}");
        }
    }

    /// Whether `id`'s receipt is queued but not written yet.
    fn is_unwritten(&self, id: &SessionId) -> bool {
        lock(&self.unwritten).contains(id.as_str())
    }

    /// Waits until every receipt queued so far is written (or failed).
    async fn all_written(&self) {
        let generation = lock(&self.queue).0.wanted;
        let mut rx = self.written.subscribe();
        let _ = rx.wait_for(|written| *written >= generation).await;
    }
}

/// The result store of `home`: its `state.db`.
#[cfg(feature = "sqlite")]
fn default_store(home: &Home, log_budget_bytes: u64, ttl: Duration) -> Arc<dyn ResultStore> {
    Arc::new(
        herd_persistence::ReceiptStore::new(home)
            .with_log_budget(log_budget_bytes)
            .with_ttl(ttl),
    )
}

/// Without the `sqlite` feature, results are kept in memory (their logs on disk).
#[cfg(not(feature = "sqlite"))]
fn default_store(home: &Home, log_budget_bytes: u64, ttl: Duration) -> Arc<dyn ResultStore> {
    Arc::new(
        herd_persistence::MemoryResultStore::new()
            .with_home(home)
            .with_log_budget(log_budget_bytes)
            .with_ttl(ttl),
    )
}

impl Inner {
    /// Right after the choke point released the table lock: drops the session's
    /// checkpoint settings, queues its receipt and a checkpoint write.
    pub(in crate::registry) fn finished_durably(self: &Arc<Self>, s: &Session) {
        self.durable.checkpoint.finished(&s.id);
        let (output, output_cut, output_from) = s.text_final();
        let receipt = {
            let st = s.state();
            let Some(fin) = st.finished.as_ref() else {
                self.durable.receipts.settled([s.id.as_str()]);
                self.durable.receipts.attempt_ended([s.id.as_str()]);
                return;
            };
            ResultReceipt {
                name: s.name.clone(),
                signal: fin.exit.and_then(|e| e.signal),
                pty: s.mode == ModeName::Pty,
                persist_on_release: s.persist_on_release,
                time_limit_seconds: s.time_limit.map(|t| t.limit.as_secs()),
                replaces: s.origin.replaces.as_ref().map(|id| id.as_str().to_owned()),
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
                bytes_not_kept: s.tail().bytes_not_kept(),
                leftovers: st.leftovers.clone(),
                ready_at: st.ready_at.map(unix_seconds),
                runs: (st.runs > 0).then_some(st.runs),
            }
        };
        // The key state where the context starts, asked of the session's key index
        // now (the receipt is written later, without the session): a chatty job's
        // log is then not read back to its start to learn it.
        let log_context = output_cut.then(|| {
            let open = s
                .tail()
                .key_open_at(crate::output::context_start(output_from));
            (s.log_path.clone(), output_from, open)
        });
        self.queue_receipt(ReceiptJob {
            receipt,
            spawn: restart_spec(s),
            log_context,
        });
        self.request_checkpoint_soon();
    }

    fn queue_receipt(self: &Arc<Self>, job: ReceiptJob) {
        if self.durable.receipts.queue(job) {
            let inner = Arc::clone(self);
            drop(self.runtime.spawn_blocking(move || inner.receipt_loop()));
        }
    }

    /// Runs on the blocking pool until the receipt queue is empty: each round
    /// redacts what was queued and stores it in one transaction per
    /// [`RECEIPT_BATCH`].
    fn receipt_loop(&self) {
        loop {
            let Some((generation, jobs)) = self.durable.receipts.round() else {
                return;
            };
            let mut jobs = jobs.into_iter().peekable();
            while jobs.peek().is_some() {
                let batch: Vec<Stored> = jobs
                    .by_ref()
                    .take(RECEIPT_BATCH)
                    .map(|job| self.redacted(job))
                    .collect();
                self.store_receipts(batch);
            }
            // Sessions kept in memory only until their receipts were written can go
            // now, not at some later finish.
            self.prune();
            self.durable.receipts.round_done(generation);
        }
    }

    /// One receipt with its command and output redacted. Blocking (it may read the
    /// log for context).
    fn redacted(&self, job: ReceiptJob) -> Stored {
        let mut receipt = job.receipt;
        let (before, key_open) = job
            .log_context
            .map(|(path, at, open)| crate::output::log_text_before(&path, at, open))
            .unwrap_or_default();
        receipt.output =
            self.hooks
                .redact_output_after(&receipt.command, &before, key_open, &receipt.output);
        receipt.command = self.hooks.redact_command(&receipt.command).into_owned();
        Stored {
            receipt,
            spawn: job.spawn,
        }
    }

    /// Stores one batch of receipts in one transaction. Blocking. A batch that fails
    /// (a full disk) is kept, its sessions in memory, and stored again later
    /// (the `recommit` module).
    pub(in crate::registry) fn store_receipts(&self, batch: Vec<Stored>) {
        let receipts = &self.durable.receipts;
        let stored = receipts.store().store_all(&batch);
        // Committed (or failed: a full disk must not hold answers back; the receipt
        // is kept and stored again, the shim's exit record holds the result).
        receipts.attempt_ended(batch.iter().map(|item| item.receipt.id.as_str()));
        let settled =
            |batch: &[Stored]| receipts.settled(batch.iter().map(|item| item.receipt.id.as_str()));
        match stored {
            Ok(()) => {
                settled(&batch);
                if self.durable.receipts_delete_rows {
                    self.durable
                        .checkpoint
                        .rows_gone(batch.iter().map(|item| item.receipt.id.as_str()));
                }
                self.forget_shims(&batch);
            }
            Err(herd_persistence::Error::HomeMissing { .. }) => {
                settled(&batch);
                tracing::debug!(n = batch.len(), "no receipts: the home is gone");
            }
            Err(error) => {
                tracing::warn!(n = batch.len(), %error, "result receipts not stored yet; kept in memory and stored again later");
                batch
                    .into_iter()
                    .for_each(|item| self.recommits.restore_receipt_later(item));
            }
        }
    }

    /// Removes the shim directories of a batch's finished supervised sessions once
    /// their receipts are stored: from then on a restore finds the receipt, so the
    /// exit record is no longer needed. The table lock is taken once for the batch.
    fn forget_shims(&self, batch: &[Stored]) {
        let supervised: Vec<Arc<Session>> = self.table.of_ids(
            batch
                .iter()
                .filter_map(|item| SessionId::parse(&item.receipt.id)),
            |s| s.shim.is_some(),
        );
        for s in supervised {
            let Ok(dir) = herd_persistence::ShimDir::new(&self.home, s.id.as_str()) else {
                continue;
            };
            // A shim holding leftovers keeps its directory until it exits.
            if self.shims.keep_dir_while_held(&s, &dir) {
                continue;
            }
            if let Err(error) = self.shims.retire_dir(&dir) {
                tracing::warn!(session_id = %s.id, %error, "supervisor directory of a finished session not removed");
            }
        }
    }
}

impl Durable {
    /// Marks `id`'s receipt as on its way, before the choke point prunes: from here
    /// until it is written the session is kept in memory.
    pub(in crate::registry) fn expect_receipt(&self, id: &SessionId) {
        self.receipts.expect(id.as_str());
    }

    /// Waits until `id`'s receipt is committed (or its commit failed), at once when
    /// none is on its way: an answer about a finished session (`wait`, `poll`,
    /// `kill`) is sent after this, so a crash right after the answer still finds the
    /// receipt. No table lock is held; the commit is the receipt batch's (one
    /// transaction for every receipt queued meanwhile, no fsync of its own).
    pub(in crate::registry) async fn receipt_attempted(&self, id: &SessionId) {
        self.receipts.attempted(id).await;
    }

    /// Whether `id`'s receipt is queued but not written yet; such a finished session
    /// must stay in memory until it is.
    pub(in crate::registry) fn receipt_pending(&self, id: &SessionId) -> bool {
        self.receipts.is_unwritten(id)
    }

    /// Waits until every receipt queued so far is written (or failed).
    pub(in crate::registry) async fn receipts_settled(&self) {
        self.receipts.all_written().await;
    }

    /// Finds a receipt for an id, unique prefix or name that memory did not
    /// resolve. A session evicted from the store answers [`LookupError::Expired`];
    /// otherwise `miss` comes back unchanged.
    pub(in crate::registry) fn receipt_lookup(
        &self,
        id_or_prefix: &str,
        miss: LookupError,
    ) -> Result<(SessionId, ResultReceipt), LookupError> {
        if !matches!(miss, LookupError::NotFound { .. }) {
            return Err(miss);
        }
        let store = self.receipts.store();
        let unreadable = |error: herd_persistence::Error| {
            tracing::warn!(id = id_or_prefix, %error, "result store unreadable");
        };
        let found = |r: ResultReceipt| match SessionId::parse(&r.id) {
            Some(id) => Ok((id, r)),
            None => Err(LookupError::NotFound {
                id: id_or_prefix.to_owned(),
            }),
        };
        let is_name = check_name(id_or_prefix).is_ok();
        let wanted = if is_name {
            id_or_prefix.to_owned()
        } else {
            id::normalise_prefix(id_or_prefix)
        };
        if is_name {
            match store.newest_named(&wanted) {
                Ok(Some(r)) => return found(r),
                Ok(None) => {}
                Err(error) => unreadable(error),
            }
        } else {
            match store.ids_with_prefix(&wanted) {
                Ok(ids) => match ids.as_slice() {
                    [] => {}
                    [one] => match store.load(one) {
                        Ok(Some(r)) => return found(r),
                        Ok(None) => {}
                        Err(error) => unreadable(error),
                    },
                    many => {
                        return Err(LookupError::Ambiguous {
                            prefix: id_or_prefix.to_owned(),
                            matches: many.iter().filter_map(|m| SessionId::parse(m)).collect(),
                        });
                    }
                },
                Err(error) => unreadable(error),
            }
        }
        match store.tombstone(&wanted) {
            Ok(Some(stone)) => Err(LookupError::Expired {
                id: stone.id,
                on: crate::text::rfc3339(from_unix_seconds(stone.expired_at)),
            }),
            Ok(None) => Err(miss),
            Err(error) => {
                unreadable(error);
                Err(miss)
            }
        }
    }

    /// Ids of receipts that start with `prefix`, other than `except` (for lookup by prefix: a
    /// prefix naming one session in memory and another only by receipt is ambiguous).
    pub(in crate::registry) fn other_receipts_with_prefix(
        &self,
        prefix: &str,
        except: &SessionId,
    ) -> Vec<SessionId> {
        match self.receipts.store().ids_with_prefix(prefix) {
            Ok(ids) => ids
                .iter()
                .filter_map(|id| SessionId::parse(id))
                .filter(|id| id != except)
                .collect(),
            Err(error) => {
                tracing::warn!(prefix, %error, "result store unreadable");
                Vec::new()
            }
        }
    }

    /// What a restart of `id` repeats, from its receipt.
    pub(in crate::registry) fn stored_restart_spec(&self, id: &SessionId) -> Option<RestartSpec> {
        match self.receipts.store().restart_spec(id.as_str()) {
            Ok(spec) => spec,
            Err(error) => {
                tracing::warn!(session_id = %id, %error, "restart spec unreadable");
                None
            }
        }
    }
}

/// What a restart of `s` repeats: its command as given and its options; `None` when
/// the command herd holds is already the redacted text.
fn restart_spec(s: &Session) -> Option<RestartSpec> {
    if s.origin.command_redacted {
        return None;
    }
    let origin = &s.origin;
    Some(RestartSpec {
        command: s.command.clone(),
        mode: match s.mode {
            ModeName::Pipe => herd_persistence::Mode::Pipe,
            ModeName::Pty => herd_persistence::Mode::Pty,
        },
        watch_patterns: origin.watch.clone(),
        heartbeat_seconds: origin.heartbeat_seconds,
        completion_output_chars: origin.completion_output_chars,
        options: options_record(s, &s.command),
    })
}

/// One receipt waiting to be written, output not yet redacted.
#[derive(Debug)]
struct ReceiptJob {
    receipt: ResultReceipt,
    /// What a restart repeats, kept privately with the receipt.
    spawn: Option<RestartSpec>,
    /// Where the receipt's output starts in the session's log, when earlier output
    /// was not kept in it: the log before it is the redaction context (a private
    /// key whose BEGIN was dropped, a line the tail cut), and whether the session's
    /// key index knew a block open where that context starts.
    log_context: Option<(std::path::PathBuf, u64, Option<bool>)>,
}
