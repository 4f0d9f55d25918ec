//! Result receipts of finished sessions (B38): queued right after the choke point,
//! redacted and written on the blocking pool (a burst newest-64 only, by a few
//! threads), and looked up when memory no longer knows a session.
//!
//! Owns [`Receipts`]. Invariant: a finished session whose receipt is not written yet
//! stays in memory, so its result is always answerable from one or the other.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use herd_hooks::RedactMode;
use herd_persistence::{Home, ReceiptStore, ResultReceipt};
use tokio::sync::watch;

use super::{Queue, lock, reason_name, unix_seconds};
use crate::KillSource;
use crate::error::LookupError;
use crate::id::{self, SessionId};
use crate::registry::Inner;
use crate::session::Session;

/// Receipts written per burst at most: the store keeps only the newest this many.
const RECEIPT_BURST: usize = herd_persistence::MAX_RECEIPTS;

/// Threads that write one burst of receipts.
const RECEIPT_WRITERS: usize = 8;

/// The result receipts of finished sessions (B38): the store, the queue of
/// receipts on their way and the ids whose receipt is not written yet.
#[derive(Debug)]
pub(super) struct Receipts {
    store: ReceiptStore,
    queue: Mutex<(Queue, Vec<ReceiptJob>)>,
    written: watch::Sender<u64>,
    /// Ids whose receipt is queued but not yet written (or given up on). Pruning
    /// keeps these sessions in memory, so a result is never in neither place (B38).
    unwritten: Mutex<HashSet<String>>,
}

impl Receipts {
    pub(super) fn new(home: &Home, log_budget_bytes: u64) -> Receipts {
        Receipts {
            store: ReceiptStore::new(home).with_log_budget(log_budget_bytes),
            queue: Mutex::new((Queue::default(), Vec::new())),
            written: watch::channel(0).0,
            unwritten: Mutex::new(HashSet::new()),
        }
    }

    pub(super) fn store(&self) -> &ReceiptStore {
        &self.store
    }
}

impl Inner {
    /// Right after the choke point released the table lock: drops the session's
    /// checkpoint settings, queues its receipt and a checkpoint write.
    pub(in crate::registry) fn finished_durably(self: &Arc<Self>, s: &Session) {
        self.durable.checkpoint.forget_extras(&s.id);
        let (output, output_cut, output_from) = s.text_final();
        let receipt = {
            let st = s.state();
            let Some(fin) = st.finished.as_ref() else {
                lock(&self.durable.receipts.unwritten).remove(s.id.as_str());
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
                leftovers: st.leftovers.clone(),
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
        lock(&self.durable.receipts.unwritten).insert(job.receipt.id.clone());
        let mut q = lock(&self.durable.receipts.queue);
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
                let mut q = lock(&self.durable.receipts.queue);
                if q.1.is_empty() {
                    q.0.in_flight = false;
                    return;
                }
                (q.0.wanted, std::mem::take(&mut q.1))
            };
            if jobs.len() > RECEIPT_BURST {
                let mut unwritten = lock(&self.durable.receipts.unwritten);
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
                .receipts
                .written
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
        let stored = self.durable.receipts.store.store(&receipt);
        lock(&self.durable.receipts.unwritten).remove(&receipt.id);
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
        let Some(s) = self.lock().get(&sid).filter(|s| s.shim.is_some()).cloned() else {
            return;
        };
        let Ok(dir) = herd_persistence::ShimDir::new(&self.home, id) else {
            return;
        };
        // A shim holding leftovers keeps its directory until it exits (issue 36).
        if self.keep_lingering_shim_dir(&s, &dir) {
            return;
        }
        if let Err(error) = dir.remove() {
            tracing::warn!(session_id = %id, %error, "supervisor directory of a finished session not removed");
        }
    }

    /// Marks `id`'s receipt as on its way, before the choke point prunes: from here
    /// until it is written the session is kept in memory.
    pub(in crate::registry) fn expect_receipt(&self, id: &SessionId) {
        lock(&self.durable.receipts.unwritten).insert(id.as_str().to_owned());
    }

    /// Whether `id`'s receipt is queued but not written yet; such a finished session
    /// must stay in memory until it is.
    pub(in crate::registry) fn receipt_pending(&self, id: &SessionId) -> bool {
        lock(&self.durable.receipts.unwritten).contains(id.as_str())
    }

    /// Waits until every receipt queued so far is written (or failed).
    pub(in crate::registry) async fn receipts_settled(&self) {
        let generation = lock(&self.durable.receipts.queue).0.wanted;
        let mut rx = self.durable.receipts.written.subscribe();
        let _ = rx.wait_for(|written| *written >= generation).await;
    }

    /// Finds a receipt for an id or unique prefix that memory did not resolve. Returns
    /// `miss` unchanged when there is none.
    pub(in crate::registry) fn receipt_lookup(
        &self,
        id_or_prefix: &str,
        miss: LookupError,
    ) -> Result<(SessionId, ResultReceipt), LookupError> {
        if !matches!(miss, LookupError::NotFound { .. }) {
            return Err(miss);
        }
        let wanted = id::normalise_prefix(id_or_prefix);
        let load = |id: &str| match self.durable.receipts.store.load(id) {
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
    pub(in crate::registry) fn other_receipts_with_prefix(
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
