//! Result receipts: `<home>/results/<id>.json`, one per finished session (B38).
//!
//! A receipt keeps what `get`, `poll` and `log` need to answer for a session
//! after it was pruned from memory or the host restarted: owners, command,
//! exit code, completion reason, termination source and the last 200,000
//! characters of output. The caller redacts command and output before handing
//! them over; this module only stores them.
//!
//! Format (version 1): the [`ResultReceipt`] fields plus `"version": 1`, one
//! JSON object per file, written atomically (temp file, fsync, rename, fsync
//! the directory) with mode 0600 in a 0700 directory.
//!
//! Retention: receipts whose file is older than 7 days (by mtime) are deleted,
//! then only the newest 64 are kept. [`ReceiptStore::store`] prunes after each
//! write, so the directory never grows past the cap for long.
//!
//! Invariant: a receipt's file name is derived from a validated session id
//! (`proc_` and word characters), so an id can never name a path outside the
//! results directory.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::atomic;
use crate::{Error, Home};

/// Output characters a receipt keeps (the last ones).
pub const MAX_RECEIPT_OUTPUT_CHARS: usize = 200_000;

/// How long a receipt is kept.
pub const RECEIPT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// How many receipts a home keeps at most.
pub const MAX_RECEIPTS: usize = 64;

/// The receipt format version this crate writes.
pub const RECEIPT_VERSION: u64 = 1;

/// Temp files of interrupted receipt writes older than this are swept. Writers
/// take no lock, so a younger temp file may be a write in progress.
const STALE_TEMP_AGE: Duration = Duration::from_secs(3600);

/// The durable result of one finished session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultReceipt {
    /// Session id, `proc_` + 12 hex characters.
    pub id: String,
    /// The command line, redacted by the caller.
    pub command: String,
    /// Working directory, if one was given.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// The container/session key of the caller.
    #[serde(default)]
    pub task_id: String,
    /// The turn or agent that owned the session.
    #[serde(default)]
    pub owner_task_id: String,
    /// Gateway session key.
    #[serde(default)]
    pub session_key: String,
    /// Wall-clock spawn time, unix seconds.
    pub started_at: f64,
    /// Wall-clock finish time, unix seconds.
    pub finished_at: f64,
    /// Exit code; `None` when no status was collected (a lost session).
    pub exit_code: Option<i32>,
    /// Completion reason: `exited`, `killed`, `lost`, `failed_start`, ...
    pub reason: String,
    /// Termination source (`process.kill`, `kill_all`, ...); empty when none.
    #[serde(default)]
    pub source: String,
    /// Whether the session asked for a completion notification.
    #[serde(default)]
    pub notify: bool,
    /// The last [`MAX_RECEIPT_OUTPUT_CHARS`] characters of output, redacted.
    pub output: String,
    /// Whether earlier output was cut (by the caller or by this store).
    #[serde(default)]
    pub output_cut: bool,
    /// Processes of the session's tree alive when it completed (see
    /// [`crate::Leftover`]); their commands redacted by the caller.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leftovers: Vec<crate::Leftover>,
}

/// The on-disk shape: the receipt plus its format version.
#[derive(Debug, Serialize, Deserialize)]
struct FileV1 {
    version: u64,
    #[serde(flatten)]
    receipt: ResultReceipt,
}

/// What a prune removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PruneReport {
    /// Receipts older than the retention period.
    pub n_expired: usize,
    /// Receipts beyond the newest [`MAX_RECEIPTS`].
    pub n_over_cap: usize,
    /// Session logs removed: with their receipts, or, oldest first, to keep
    /// within the log budget.
    pub n_logs: usize,
}

/// The default budget for all session logs of a home: 10 GiB.
pub const DEFAULT_LOG_BUDGET_BYTES: u64 = 10 << 30;

/// Reads and writes `<home>/results/`, and keeps `<home>/logs/sessions/` in step.
///
/// Retention: a finished session's log goes with its receipt (7 days, the newest
/// 64). A log with no receipt is a running session's (or one a crash left, which
/// a restore closes with a receipt), so it is never removed here. Past the log
/// budget, the oldest logs of finished sessions (those with a receipt) go first.
#[derive(Debug, Clone)]
pub struct ReceiptStore {
    home: Home,
    log_budget_bytes: u64,
}

impl ReceiptStore {
    /// A store for `home` with the default log budget. Does no I/O.
    pub fn new(home: &Home) -> ReceiptStore {
        ReceiptStore {
            home: home.clone(),
            log_budget_bytes: DEFAULT_LOG_BUDGET_BYTES,
        }
    }

    /// The same store with all session logs kept within `bytes`.
    #[must_use]
    pub fn with_log_budget(mut self, bytes: u64) -> ReceiptStore {
        self.log_budget_bytes = bytes;
        self
    }

    /// The file of the receipt for `id`.
    ///
    /// # Errors
    /// [`Error::InvalidSessionId`] when `id` is not `proc_` followed by
    /// letters, digits or `_`.
    pub fn path(&self, id: &str) -> Result<PathBuf, Error> {
        validate_id(id)?;
        Ok(self.home.results_dir().join(format!("{id}.json")))
    }

    /// Writes `receipt` atomically (replacing an earlier receipt of the same
    /// session), keeping only the last [`MAX_RECEIPT_OUTPUT_CHARS`] characters
    /// of output, then prunes old receipts. A failed prune is logged, not
    /// returned: the receipt itself is stored.
    ///
    /// # Errors
    /// [`Error::InvalidSessionId`], [`Error::HomeMissing`] (the home is never
    /// created), [`Error::CreateDir`] for the results directory, and
    /// [`Error::ReceiptWrite`].
    pub fn store(&self, receipt: &ResultReceipt) -> Result<(), Error> {
        let path = self.path(&receipt.id)?;
        self.home.ensure_dir(&self.home.results_dir())?;
        let mut file = FileV1 {
            version: RECEIPT_VERSION,
            receipt: receipt.clone(),
        };
        if let Some(start) = tail_start(&receipt.output, MAX_RECEIPT_OUTPUT_CHARS) {
            file.receipt.output.drain(..start);
            file.receipt.output_cut = true;
        }
        let bytes = serde_json::to_vec(&file).map_err(|e| Error::ReceiptWrite {
            path: path.clone(),
            source: io::Error::new(io::ErrorKind::InvalidData, e),
        })?;
        atomic::write_atomic(&path, &bytes).map_err(|source| Error::ReceiptWrite {
            path: path.clone(),
            source,
        })?;
        tracing::debug!(session_id = %receipt.id, "result receipt stored");
        if let Err(error) = self.prune() {
            tracing::warn!(%error, "result receipts not pruned");
        }
        Ok(())
    }

    /// The receipt for `id`, or `None` when there is none (never written,
    /// pruned, or the home is gone).
    ///
    /// # Errors
    /// [`Error::InvalidSessionId`], [`Error::ReceiptRead`] when the file
    /// cannot be read, [`Error::ReceiptCorrupt`] when it is not a receipt of a
    /// known version for this id.
    pub fn load(&self, id: &str) -> Result<Option<ResultReceipt>, Error> {
        let path = self.path(id)?;
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if atomic::is_missing(&e) => return Ok(None),
            Err(source) => return Err(Error::ReceiptRead { path, source }),
        };
        let corrupt = |source| Error::ReceiptCorrupt {
            path: path.clone(),
            source,
        };
        let file: FileV1 = serde_json::from_slice(&bytes).map_err(corrupt)?;
        if file.version != RECEIPT_VERSION {
            return Err(corrupt(serde::de::Error::custom(format_args!(
                "unknown receipt version {}, this herd reads version {RECEIPT_VERSION}",
                file.version
            ))));
        }
        if file.receipt.id != id {
            return Err(corrupt(serde::de::Error::custom(format_args!(
                "the receipt is for {}, not {id}",
                file.receipt.id
            ))));
        }
        Ok(Some(file.receipt))
    }

    /// Deletes receipts older than [`RECEIPT_RETENTION`], then all but the
    /// newest [`MAX_RECEIPTS`], and sweeps stale temp files.
    ///
    /// # Errors
    /// [`Error::ReceiptPrune`] when the directory cannot be listed or a
    /// receipt cannot be deleted. A missing directory prunes nothing.
    pub fn prune(&self) -> Result<PruneReport, Error> {
        let dir = self.home.results_dir();
        let prune_error = |source| Error::ReceiptPrune {
            dir: dir.clone(),
            source,
        };
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if atomic::is_missing(&e) => return Ok(PruneReport::default()),
            Err(e) => return Err(prune_error(e)),
        };
        let now = SystemTime::now();
        let mut report = PruneReport::default();
        let mut kept: Vec<(SystemTime, PathBuf)> = Vec::new();
        let mut temp_targets: Vec<String> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(prune_error)?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(target) = atomic::temp_target(name) {
                temp_targets.push(target.to_owned());
                continue;
            }
            let Some(id) = name.strip_suffix(".json") else {
                continue;
            };
            if validate_id(id).is_err() {
                continue;
            }
            let mtime = match entry.metadata().and_then(|m| m.modified()) {
                Ok(mtime) => mtime,
                // Deleted by a concurrent prune.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(prune_error(e)),
            };
            let age = now.duration_since(mtime).unwrap_or(Duration::ZERO);
            if age > RECEIPT_RETENTION {
                remove(&entry.path()).map_err(prune_error)?;
                report.n_logs += self.remove_log(id);
                report.n_expired += 1;
            } else {
                kept.push((mtime, entry.path()));
            }
        }
        kept.sort_by_key(|&(mtime, _)| std::cmp::Reverse(mtime));
        for (_, path) in kept.iter().skip(MAX_RECEIPTS) {
            remove(path).map_err(prune_error)?;
            if let Some(id) = path.file_stem().and_then(|s| s.to_str()) {
                report.n_logs += self.remove_log(id);
            }
            report.n_over_cap += 1;
        }
        atomic::sweep_temps_of(&dir, temp_targets, Some(STALE_TEMP_AGE));
        report.n_logs += self.prune_logs(now);
        if report != PruneReport::default() {
            tracing::debug!(
                n_expired = report.n_expired,
                n_over_cap = report.n_over_cap,
                n_logs = report.n_logs,
                "result receipts pruned"
            );
        }
        Ok(report)
    }

    /// Forgets a finished session: its receipt and its log.
    ///
    /// # Errors
    /// [`Error::InvalidSessionId`] for an id that is not one; a file that cannot be
    /// removed is logged and skipped.
    pub fn forget(&self, id: &str) -> Result<(), Error> {
        let path = self.path(id)?;
        if let Err(error) = remove(&path) {
            tracing::warn!(path = %path.display(), %error, "result receipt not removed");
        }
        self.remove_log(id);
        Ok(())
    }

    /// Removes the session log of `id`, if any: 1 when one was removed.
    fn remove_log(&self, id: &str) -> usize {
        let path = self.home.session_log_path(id);
        match fs::remove_file(&path) {
            Ok(()) => 1,
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "session log not removed");
                0
            }
        }
    }

    /// The oldest finished sessions' logs beyond the budget (see the type's docs):
    /// how many were removed.
    fn prune_logs(&self, now: SystemTime) -> usize {
        let Ok(entries) = fs::read_dir(self.home.session_logs_dir()) else {
            return 0;
        };
        let mut n_removed = 0;
        let mut total: u64 = 0;
        let mut finished: Vec<(SystemTime, String, u64)> = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".log")) else {
                continue;
            };
            if validate_id(id).is_err() {
                continue;
            }
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            let mtime = meta.modified().unwrap_or(now);
            // A log without a receipt may be a running session's, however long
            // it has been quiet: never removed here.
            let has_receipt = self.path(id).is_ok_and(|p| p.exists());
            total = total.saturating_add(meta.len());
            if has_receipt {
                finished.push((mtime, id.to_owned(), meta.len()));
            }
        }
        finished.sort();
        for (_, id, len) in finished {
            if total <= self.log_budget_bytes {
                break;
            }
            n_removed += self.remove_log(&id);
            total = total.saturating_sub(len);
        }
        n_removed
    }
}

/// Removes a file; one already gone (a concurrent prune) is fine.
fn remove(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Checks that `id` is `proc_` followed by one or more word characters.
pub(crate) fn validate_id(id: &str) -> Result<(), Error> {
    let valid = id.strip_prefix("proc_").is_some_and(|rest| {
        !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    });
    if valid {
        Ok(())
    } else {
        Err(Error::InvalidSessionId { id: id.to_owned() })
    }
}

/// The byte index where the last `max_chars` characters of `text` start, or
/// `None` when `text` has no more than that.
fn tail_start(text: &str, max_chars: usize) -> Option<usize> {
    if text.len() <= max_chars {
        return None;
    }
    let Some(n) = max_chars.checked_sub(1) else {
        return Some(text.len());
    };
    let (idx, _) = text.char_indices().rev().nth(n)?;
    (idx > 0).then_some(idx)
}

#[cfg(test)]
mod tests;
