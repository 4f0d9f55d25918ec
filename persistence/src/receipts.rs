//! Result receipts: one row per finished session in `<home>/state.db`.
//!
//! A receipt keeps what `poll`, `wait`, `log`, `list` and `restart` need to answer
//! for a session after it left memory or the host restarted: owners, name, command
//! (redacted by the caller), exit code, completion reason, termination source, the
//! processes left behind and the last 200,000 characters of output; and, privately,
//! a [`RestartSpec`] (the command as given and the options a restart repeats), which
//! only [`ReceiptStore::restart_spec`] returns.
//!
//! Tables (the `schema` module, version 2): `results` (the receipt's JSON without its
//! output, the output, the restart spec, and the columns lookups and retention
//! use), `tombstones` (id, name, when it was evicted: an evicted id answers
//! "expired on DATE", kept [`TOMBSTONE_RETENTION`]) and `request_keys`.
//! A batch of receipts is one transaction; the database runs in WAL mode with
//! `synchronous=NORMAL`, so a stored receipt survives a crash of any herd process.
//!
//! Retention is by time and size, never by count: a receipt and its session log
//! stay for the result TTL (default [`RECEIPT_RETENTION`]); past the log budget
//! (the finished sessions' logs and stored outputs together) the oldest finished
//! sessions go first. A running session's log is never removed here.
//! A store prunes only when something may be due: the last prune's total size and
//! oldest finish, plus what was stored since, are kept in memory, so storing a
//! receipt costs the same with 10 or 10,000 kept (a prune sums every row).
//!
//! Receipts of herd releases before the store (`<home>/results/<id>.json`) are
//! imported when the store is first opened and their files removed once committed
//! (the `receipts::legacy` module).
//!
//! Invariant: a receipt's id is a validated session id (`proc_` and word
//! characters), so the log path derived from it stays in the logs directory.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::receipt::{tail_start, validate_id};
use crate::{
    DEFAULT_LOG_BUDGET_BYTES, Error, Home, Ledger, MAX_RECEIPT_OUTPUT_CHARS, PruneReport,
    RECEIPT_RETENTION, RECEIPT_VERSION, RestartSpec, ResultReceipt, Stored, TOMBSTONE_RETENTION,
};
use rusqlite::{Connection, OptionalExtension, params};

mod forget;
mod legacy;
mod queries;

/// The open database, made on first use.
#[derive(Debug, Default)]
struct Db {
    conn: Option<(Connection, PathBuf)>,
}

/// Reads and writes the result store of a home (the `results` and `tombstones`
/// tables of `state.db`) and keeps `<home>/logs/sessions/` in step with it.
///
/// Cheap to clone (clones share one connection). Does no I/O until first used; a
/// read of a home that has neither `state.db` nor `results/` creates nothing.
#[derive(Debug, Clone)]
pub struct ReceiptStore {
    home: Home,
    log_budget_bytes: u64,
    ttl: Duration,
    db: Arc<Mutex<Db>>,
    /// What the last full prune left, kept up to date by stores: lets a store skip
    /// its prune when nothing can be due (see [`PruneHint`]).
    hint: Arc<Mutex<Option<PruneHint>>>,
}

/// The finished sessions' total size and oldest finish, as the last prune left them
/// plus what was stored since (a replaced row counts twice: the hint errs towards a
/// prune). `None` until a prune completes, and after one that left work due.
#[derive(Debug, Clone, Copy)]
struct PruneHint {
    total_bytes: i64,
    oldest_finished_at: f64,
}

impl ReceiptStore {
    /// A store for `home` with the default log budget and TTL. Does no I/O.
    pub fn new(home: &Home) -> ReceiptStore {
        ReceiptStore {
            home: home.clone(),
            log_budget_bytes: DEFAULT_LOG_BUDGET_BYTES,
            ttl: RECEIPT_RETENTION,
            db: Arc::new(Mutex::new(Db::default())),
            hint: Arc::new(Mutex::new(None)),
        }
    }

    /// The same store keeping finished sessions within `bytes`.
    #[must_use]
    pub fn with_log_budget(mut self, bytes: u64) -> ReceiptStore {
        self.log_budget_bytes = bytes;
        self
    }

    /// The same store keeping finished sessions for `ttl`.
    #[must_use]
    pub fn with_ttl(mut self, ttl: Duration) -> ReceiptStore {
        self.ttl = ttl;
        self
    }

    /// How long a finished session is kept.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Runs `f` on the open database, opening it first (creating and migrating it,
    /// and importing the receipt files of earlier releases) when `create` is true or
    /// there is anything to read. `Ok(None)` when there is nothing to read.
    fn with_db<T>(
        &self,
        create: bool,
        action: &'static str,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<Option<T>, Error> {
        let mut db = lock(&self.db);
        if db.conn.is_none() {
            let something = self.home.ledger_path().exists() || self.home.results_dir().is_dir();
            if !create && !something {
                return Ok(None);
            }
            let (conn, path) = Ledger::create(&self.home)?.into_parts();
            legacy::import(&self.home, &conn, &path);
            db.conn = Some((conn, path));
            drop(db);
            if let Err(error) = self.prune() {
                tracing::warn!(%error, "result store not pruned");
            }
            db = lock(&self.db);
        }
        let Some((conn, path)) = db.conn.as_ref() else {
            return Ok(None);
        };
        f(conn).map(Some).map_err(|source| Error::StoreQuery {
            path: path.clone(),
            action,
            source,
        })
    }

    /// Opens the store now (creating it, and importing the receipt files of earlier
    /// releases): for a process that is about to serve, so the first answer does not
    /// pay for it.
    ///
    /// # Errors
    /// As [`Ledger::create`].
    pub fn open(&self) -> Result<(), Error> {
        self.with_db(true, "open", |_| Ok(())).map(drop)
    }

    /// Stores `receipt` (replacing an earlier receipt of the same session), then
    /// prunes; a failed prune is logged, not returned.
    ///
    /// # Errors
    /// As [`ReceiptStore::store_all`].
    pub fn store(&self, receipt: &ResultReceipt) -> Result<(), Error> {
        self.store_all(&[Stored {
            receipt: receipt.clone(),
            spawn: None,
        }])
    }

    /// Stores `batch` in one transaction, keeping only the last
    /// [`MAX_RECEIPT_OUTPUT_CHARS`] characters of each output, then prunes (a failed
    /// prune is logged, not returned).
    ///
    /// # Errors
    /// [`Error::InvalidSessionId`], [`Error::HomeMissing`] (the home is never
    /// created), the ledger's open errors, and [`Error::StoreQuery`] (nothing of the
    /// batch is stored then).
    pub fn store_all(&self, batch: &[Stored]) -> Result<(), Error> {
        for item in batch {
            validate_id(&item.receipt.id)?;
        }
        let rows: Vec<Row> = batch.iter().map(|item| self.row_of(item)).collect();
        self.with_db(true, "store result receipts", |conn| {
            let tx = conn.unchecked_transaction()?;
            {
                let mut insert = tx.prepare_cached(
                    "INSERT INTO results (session_id, name, owner_task_id, session_key, started_at,
                         finished_at, size_bytes, receipt, output, spawn)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                     ON CONFLICT (session_id) DO UPDATE SET name = excluded.name,
                         owner_task_id = excluded.owner_task_id, session_key = excluded.session_key,
                         started_at = excluded.started_at, finished_at = excluded.finished_at,
                         size_bytes = excluded.size_bytes, receipt = excluded.receipt,
                         output = excluded.output, spawn = coalesce(excluded.spawn, results.spawn)",
                )?;
                let mut unbury =
                    tx.prepare_cached("DELETE FROM tombstones WHERE session_id = ?1")?;
                // The session stops running in the commit that makes it finished.
                let mut finished =
                    tx.prepare_cached("DELETE FROM sessions WHERE session_id = ?1")?;
                for row in &rows {
                    let r = &row.receipt;
                    insert.execute(params![
                        r.id,
                        r.name,
                        r.owner_task_id,
                        r.session_key,
                        r.started_at,
                        r.finished_at,
                        row.size_bytes,
                        row.json,
                        row.output,
                        row.spawn,
                    ])?;
                    unbury.execute([&r.id])?;
                    finished.execute([&r.id])?;
                }
            }
            tx.commit()
        })?;
        tracing::debug!(n = batch.len(), "result receipts stored");
        if self.prune_due(&rows)
            && let Err(error) = self.prune()
        {
            tracing::warn!(%error, "result store not pruned");
        }
        Ok(())
    }

    /// Whether a prune is due after storing `rows`: when the hint says the store may
    /// be past its budget or hold a receipt past the TTL, or there is no hint. Keeps
    /// the store's cost per receipt independent of how many it holds (a prune sums
    /// every row's size).
    fn prune_due(&self, rows: &[Row]) -> bool {
        let mut hint = lock(&self.hint);
        let Some(h) = hint.as_mut() else {
            return true;
        };
        for row in rows {
            h.total_bytes = h.total_bytes.saturating_add(row.size_bytes);
            h.oldest_finished_at = h.oldest_finished_at.min(row.receipt.finished_at);
        }
        let budget = i64::try_from(self.log_budget_bytes).unwrap_or(i64::MAX);
        h.total_bytes > budget || h.oldest_finished_at < unix_now() - self.ttl.as_secs_f64()
    }

    /// The row `item` is stored as: JSON without the output, the output cut to what
    /// a receipt keeps, and its size (the output plus the session's log).
    fn row_of(&self, item: &Stored) -> Row {
        let mut receipt = item.receipt.clone();
        let mut output = std::mem::take(&mut receipt.output);
        if let Some(start) = tail_start(&output, MAX_RECEIPT_OUTPUT_CHARS) {
            output.drain(..start);
            receipt.output_cut = true;
        }
        let log_bytes =
            std::fs::metadata(self.home.session_log_path(&receipt.id)).map_or(0, |m| m.len());
        let size = log_bytes.saturating_add(output.len() as u64);
        let json = serde_json::to_string(&receipt)
            .unwrap_or_else(|_| format!("{{\"id\":{:?}}}", receipt.id));
        let spawn = item
            .spawn
            .as_ref()
            .and_then(|s| serde_json::to_string(s).ok());
        Row {
            receipt,
            json,
            output,
            spawn,
            size_bytes: i64::try_from(size).unwrap_or(i64::MAX),
        }
    }

    /// Evicts the receipts past the TTL, then the oldest beyond the log budget,
    /// leaving a tombstone for each and removing their logs; drops tombstones older
    /// than [`TOMBSTONE_RETENTION`].
    ///
    /// # Errors
    /// As [`ReceiptStore::prune_at_most`].
    pub fn prune(&self) -> Result<PruneReport, Error> {
        self.prune_at_most(usize::MAX)
    }

    /// [`ReceiptStore::prune`], evicting at most `max` sessions (the oldest first):
    /// a caller on a schedule bounds each round's work, and the report says whether
    /// more is due ([`PruneReport::more`]).
    ///
    /// # Errors
    /// [`Error::StoreQuery`] when the database refuses; a log that cannot be removed
    /// is logged and skipped.
    pub fn prune_at_most(&self, max: usize) -> Result<PruneReport, Error> {
        let now = unix_now();
        let ttl_cutoff = now - self.ttl.as_secs_f64();
        let budget = i64::try_from(self.log_budget_bytes).unwrap_or(i64::MAX);
        // One more than asked for tells whether more is due.
        let limit = i64::try_from(max.saturating_add(1)).unwrap_or(i64::MAX);
        let evicted = self.with_db(false, "prune result receipts", |conn| {
            let tx = conn.unchecked_transaction()?;
            let mut expired: Vec<(String, i64)> = {
                let mut stmt = tx.prepare_cached(
                    "SELECT session_id, size_bytes FROM results WHERE finished_at < ?1
                     ORDER BY finished_at, session_id LIMIT ?2",
                )?;
                stmt.query_map(params![ttl_cutoff, limit], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<rusqlite::Result<_>>()?
            };
            let mut more = expired.len() > max;
            expired.truncate(max);
            let mut over_budget: Vec<String> = Vec::new();
            if !more {
                let total: i64 = tx.query_row(
                    "SELECT coalesce(sum(size_bytes), 0) FROM results",
                    [],
                    |r| r.get(0),
                )?;
                let mut over = total - expired.iter().map(|(_, n)| n).sum::<i64>() - budget;
                if over > 0 {
                    let mut stmt = tx.prepare_cached(
                        "SELECT session_id, size_bytes FROM results WHERE finished_at >= ?1
                         ORDER BY finished_at, session_id",
                    )?;
                    let mut rows = stmt.query([ttl_cutoff])?;
                    while over > 0
                        && let Some(row) = rows.next()?
                    {
                        if expired.len() + over_budget.len() >= max {
                            more = true;
                            break;
                        }
                        over -= row.get::<_, i64>(1)?;
                        over_budget.push(row.get(0)?);
                    }
                }
            }
            bury(
                &tx,
                expired.iter().map(|(id, _)| id).chain(&over_budget),
                now,
            )?;
            // What is left, for the stores that follow (the oldest by its index).
            let left = if more { None } else { Some(hint(&tx)?) };
            tx.commit()?;
            *lock(&self.hint) = left;
            Ok((
                expired.into_iter().map(|(id, _)| id).collect::<Vec<_>>(),
                over_budget,
                more,
            ))
        })?;
        let Some((expired, over_budget, more)) = evicted else {
            return Ok(PruneReport::default());
        };
        let mut report = PruneReport {
            n_expired: expired.len(),
            n_over_budget: over_budget.len(),
            n_logs: 0,
            evicted: Vec::with_capacity(expired.len() + over_budget.len()),
            more,
        };
        for id in expired.into_iter().chain(over_budget) {
            report.n_logs += self.remove_log(&id);
            report.evicted.push(id);
        }
        if !report.evicted.is_empty() {
            tracing::debug!(
                n_expired = report.n_expired,
                n_over_budget = report.n_over_budget,
                n_logs = report.n_logs,
                more,
                "result receipts pruned"
            );
        }
        Ok(report)
    }

    /// Forgets a finished session: its receipt, its log, any tombstone (no
    /// "expired" answer follows: it was asked for).
    ///
    /// # Errors
    /// [`Error::InvalidSessionId`] for an id that is not one, [`Error::StoreQuery`].
    pub fn forget(&self, id: &str) -> Result<(), Error> {
        validate_id(id)?;
        self.with_db(false, "forget a result receipt", |conn| {
            conn.execute("DELETE FROM results WHERE session_id = ?1", [id])?;
            conn.execute("DELETE FROM tombstones WHERE session_id = ?1", [id])
        })?;
        self.remove_log(id);
        Ok(())
    }

    /// Removes the session log of `id`, if any: 1 when one was removed.
    fn remove_log(&self, id: &str) -> usize {
        let path = self.home.session_log_path(id);
        match std::fs::remove_file(&path) {
            Ok(()) => 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "session log not removed");
                0
            }
        }
    }

    /// The receipt for `id`, or `None` when there is none (never stored, evicted,
    /// or the home has no store).
    ///
    /// # Errors
    /// [`Error::InvalidSessionId`], [`Error::StoreQuery`], and
    /// [`Error::ReceiptCorrupt`] when the stored JSON is not a receipt.
    pub fn load(&self, id: &str) -> Result<Option<ResultReceipt>, Error> {
        validate_id(id)?;
        let found = self.with_db(false, "load a result receipt", |conn| {
            conn.query_row(
                "SELECT receipt, output FROM results WHERE session_id = ?1",
                [id],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
            )
            .optional()
        })?;
        match found.flatten() {
            Some((json, output)) => self.parse(&json, output).map(Some),
            None => Ok(None),
        }
    }

    /// A receipt from a row's JSON and output.
    fn parse(&self, json: &str, output: String) -> Result<ResultReceipt, Error> {
        let mut receipt: ResultReceipt =
            serde_json::from_str(json).map_err(|source| Error::ReceiptCorrupt {
                path: self.home.ledger_path(),
                source,
            })?;
        receipt.output = output;
        Ok(receipt)
    }

    /// What a restart of `id` repeats, when its receipt kept it.
    ///
    /// # Errors
    /// As [`ReceiptStore::load`].
    pub fn restart_spec(&self, id: &str) -> Result<Option<RestartSpec>, Error> {
        validate_id(id)?;
        let found = self.with_db(false, "load a restart spec", |conn| {
            conn.query_row(
                "SELECT spawn FROM results WHERE session_id = ?1",
                [id],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()
        })?;
        let Some(json) = found.flatten().flatten() else {
            return Ok(None);
        };
        serde_json::from_str(&json)
            .map(Some)
            .map_err(|source| Error::ReceiptCorrupt {
                path: self.home.ledger_path(),
                source,
            })
    }
}

/// A receipt as it is stored.
struct Row {
    receipt: ResultReceipt,
    json: String,
    output: String,
    spawn: Option<String>,
    size_bytes: i64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Whether `path` is a receipt file of an earlier release.
fn is_legacy_file(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "json")
}

/// Turns the given results into tombstones (one each, stamped `now`) and forgets the
/// tombstones older than [`TOMBSTONE_RETENTION`], inside the caller's transaction.
fn bury<'a>(
    tx: &rusqlite::Transaction<'_>,
    ids: impl Iterator<Item = &'a String>,
    now: f64,
) -> rusqlite::Result<()> {
    let mut bury = tx.prepare_cached(
        "INSERT OR REPLACE INTO tombstones (session_id, name, expired_at)
         SELECT session_id, name, ?2 FROM results WHERE session_id = ?1",
    )?;
    let mut delete = tx.prepare_cached("DELETE FROM results WHERE session_id = ?1")?;
    for id in ids {
        bury.execute(params![id, now])?;
        delete.execute([id])?;
    }
    tx.execute(
        "DELETE FROM tombstones WHERE expired_at < ?1",
        [now - TOMBSTONE_RETENTION.as_secs_f64()],
    )?;
    Ok(())
}

/// The total size and oldest finish of the results left, read inside the caller's
/// transaction (the oldest by its index).
fn hint(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<PruneHint> {
    tx.query_row(
        "SELECT coalesce(sum(size_bytes), 0), coalesce(min(finished_at), ?1) FROM results",
        [f64::MAX],
        |r| {
            Ok(PruneHint {
                total_bytes: r.get(0)?,
                oldest_finished_at: r.get(1)?,
            })
        },
    )
}

#[cfg(test)]
mod tests;
