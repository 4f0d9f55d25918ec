//! The completion ledger: `<home>/state.db`, a SQLite database.
//!
//! A completion is committed here before it is published to any consumer, and
//! marked delivered when its consumer acknowledges it. After a crash,
//! [`Ledger::undelivered`] lists every committed completion that was not yet
//! acknowledged, so the restarted process delivers it again; an acknowledged
//! one is never listed again. Together: nothing committed is lost, nothing
//! acknowledged is delivered twice.
//!
//! Why SQLite: it gives atomic, durable single-row commits and crash recovery
//! that is decades old and tested far beyond what a hand-rolled log would be.
//! The database runs in WAL mode (readers never block the writer, and a commit
//! is one append to the WAL) with `synchronous=NORMAL`: a commit is in the WAL
//! (the OS's page cache) when it returns, so it survives a crash of any herd
//! process; the WAL is fsynced at each checkpoint. A power loss may lose the last
//! commits, but it also ends every job herd supervises, so the trade is worth it:
//! a commit costs no fsync, and "committed before published" holds
//! for every failure herd outlives.
//!
//! Format (`PRAGMA user_version`, migrations in the `schema` module): the table `completions` with
//! an insertion sequence, the unique completion id, session id, owners,
//! session key, the event as JSON text, `created_at` and `delivered_at`
//! (unix seconds, `NULL` until delivered). `tests/data/v1_ledger.sql` is the
//! schema with sample rows and must keep opening.
//!
//! Invariant: a reader never creates or migrates a ledger ([`Ledger::open`]
//! of a missing file is `None` and touches nothing); only [`Ledger::create`]
//! creates one, and only inside an existing home.
//!
//! Invariant: a damaged ledger is reported and left byte-for-byte as it was
//! (integrity is checked before anything is written), so the user can
//! recover it; herd never replaces it on its own.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, params};

use crate::atomic::{self, FILE_MODE};
use crate::{CompletionRecord, DELIVERED_RETENTION, Error, Home, LedgerCause};

/// The ledger format version this crate writes (`PRAGMA user_version`).
pub const LEDGER_VERSION: i64 = crate::schema::VERSION;

/// How long a statement waits for another process's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The first wait of [`busy_wait`]; each next one doubles, up to [`BUSY_STEP_MAX`].
const BUSY_STEP_FIRST: Duration = Duration::from_micros(20);
/// The longest single wait of [`busy_wait`].
const BUSY_STEP_MAX: Duration = Duration::from_millis(10);

/// An open completion ledger.
///
/// One SQLite connection: `Send` but not `Sync`; share it behind a mutex.
/// Several processes may open the same ledger; SQLite serialises their writes.
#[derive(Debug)]
pub struct Ledger {
    conn: Connection,
    path: PathBuf,
}

/// What the integrity check found in an existing file.
enum State {
    /// A herd ledger of a version we read.
    Ready,
    /// An empty database (a `create` that crashed before the schema landed).
    Uninitialised,
}

impl Ledger {
    /// Opens the ledger of `home` if it exists, for replay and delivery.
    ///
    /// Returns `Ok(None)`, creating nothing, when the file is missing (or is an
    /// empty database a crashed [`Ledger::create`] left behind).
    ///
    /// # Errors
    /// [`Error::LedgerCorrupt`] when the file is not a readable SQLite
    /// database or fails its integrity check (the file is left untouched),
    /// [`Error::LedgerVersion`] for a newer format, [`Error::LedgerOpen`] when
    /// the OS or SQLite refuses (a read-only home among them).
    pub fn open(home: &Home) -> Result<Option<Ledger>, Error> {
        let path = home.ledger_path();
        match std::fs::symlink_metadata(&path) {
            Ok(_) => {}
            Err(e) if atomic::is_missing(&e) => return Ok(None),
            Err(e) => return Err(open_error(&path, e.into())),
        }
        let conn = connect(&path)?;
        match check(&conn, &path)? {
            State::Uninitialised => Ok(None),
            State::Ready => Ledger::configure(conn, path).map(Some),
        }
    }

    /// Opens the ledger of `home`, creating it (mode 0600) when missing; for
    /// the process that commits completions. Prunes delivered completions
    /// older than [`DELIVERED_RETENTION`].
    ///
    /// # Errors
    /// [`Error::HomeMissing`] when the home does not exist (it is never
    /// created), and as [`Ledger::open`].
    pub fn create(home: &Home) -> Result<Ledger, Error> {
        if !home.root().is_dir() {
            return Err(Error::HomeMissing {
                path: home.root().to_path_buf(),
            });
        }
        let path = home.ledger_path();
        // Create the file ourselves so it is 0600 from the start; SQLite gives
        // its -wal and -shm files the database file's mode.
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .open(&path)
        {
            Ok(_) => atomic::fsync_dir(home.root()).map_err(|e| open_error(&path, e.into()))?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(open_error(&path, e.into())),
        }
        // Switching a fresh file to WAL takes an exclusive lock, and SQLite answers
        // BUSY at once (without its busy handler) when another creator holds it; such
        // a race is retried until BUSY_TIMEOUT.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        loop {
            match Ledger::open_and_initialise(path.clone()) {
                Err(e) if is_busy(&e) && std::time::Instant::now() < deadline => {
                    std::thread::yield_now();
                }
                other => return other,
            }
        }
    }

    fn open_and_initialise(path: PathBuf) -> Result<Ledger, Error> {
        let conn = connect(&path)?;
        let state = check(&conn, &path)?;
        let ledger = Ledger::configure(conn, path)?;
        let found =
            crate::schema::migrate(&ledger.conn).map_err(|e| open_error(&ledger.path, e.into()))?;
        match state {
            State::Uninitialised => {
                tracing::info!(path = %ledger.path.display(), "state database created");
            }
            State::Ready if found < LEDGER_VERSION => {
                tracing::info!(path = %ledger.path.display(), from = found, to = LEDGER_VERSION, "state database migrated");
            }
            State::Ready => {}
        }
        ledger.prune_delivered(DELIVERED_RETENTION)?;
        Ok(ledger)
    }

    /// Sets the connection's durability and concurrency settings; runs only
    /// after the integrity check, since switching to WAL writes the header.
    fn configure(conn: Connection, path: PathBuf) -> Result<Ledger, Error> {
        let setup = || -> rusqlite::Result<()> {
            let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
            if !mode.eq_ignore_ascii_case("wal") {
                tracing::warn!(path = %path.display(), mode, "ledger is not in WAL mode");
            }
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            Ok(())
        };
        setup().map_err(|e| open_error(&path, e.into()))?;
        Ok(Ledger { conn, path })
    }

    /// The connection and the file, for the other tables of the same database.
    pub(crate) fn into_parts(self) -> (Connection, PathBuf) {
        (self.conn, self.path)
    }

    /// The ledger file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Durably records `record` as undelivered. Returns `true` when it was
    /// new, `false` when a completion with that id was already committed (the
    /// stored one, delivered or not, is kept unchanged).
    ///
    /// # Errors
    /// [`Error::LedgerQuery`] when the write fails (disk full, read-only, a
    /// non-finite `created_at`); the completion is then not committed and must
    /// not be published.
    pub fn commit(&self, record: &CompletionRecord) -> Result<bool, Error> {
        let event = serde_json::to_string(&record.event)
            .expect("a serde_json::Value always serializes: its map keys are strings");
        let n = self
            .conn
            // Cached: a statement run for every job is parsed once per connection.
            .prepare_cached(
                "INSERT INTO completions
                     (completion_id, session_id, owner_task_id, task_id, session_key, event, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (completion_id) DO NOTHING",
            )
            .and_then(|mut statement| {
                statement.execute(params![
                    record.completion_id,
                    record.session_id,
                    record.owner_task_id,
                    record.task_id,
                    record.session_key,
                    event,
                    record.created_at,
                ])
            })
            .map_err(|e| self.query_error("commit a completion", e))?;
        Ok(n == 1)
    }

    /// Records `record` like [`Ledger::commit`], but when an undelivered
    /// completion with that id is already there, replaces its owner, keys and
    /// event: for a completion that changed after it was first committed (killed,
    /// adopted or handed off meanwhile). A delivered one is kept unchanged.
    /// Returns `true` when it was new or replaced.
    ///
    /// # Errors
    /// As [`Ledger::commit`].
    pub fn commit_replacing(&self, record: &CompletionRecord) -> Result<bool, Error> {
        let event = serde_json::to_string(&record.event)
            .expect("a serde_json::Value always serializes: its map keys are strings");
        let n = self
            .conn
            .execute(
                "INSERT INTO completions
                     (completion_id, session_id, owner_task_id, task_id, session_key, event, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (completion_id) DO UPDATE SET
                     owner_task_id = excluded.owner_task_id,
                     task_id = excluded.task_id,
                     session_key = excluded.session_key,
                     event = excluded.event
                 WHERE delivered_at IS NULL",
                params![
                    record.completion_id,
                    record.session_id,
                    record.owner_task_id,
                    record.task_id,
                    record.session_key,
                    event,
                    record.created_at,
                ],
            )
            .map_err(|e| self.query_error("replace a completion", e))?;
        Ok(n == 1)
    }

    /// Marks a completion delivered. Returns `true` when this call delivered
    /// it, `false` when it was already delivered; exactly one call per
    /// completion ever returns `true`.
    ///
    /// # Errors
    /// [`Error::LedgerUnknownCompletion`] when the id was never committed,
    /// [`Error::LedgerQuery`] when the write fails.
    pub fn mark_delivered(&self, completion_id: &str) -> Result<bool, Error> {
        let n = self
            .conn
            // Cached: a statement run for every job is parsed once per connection.
            .prepare_cached(
                "UPDATE completions SET delivered_at = ?2
                 WHERE completion_id = ?1 AND delivered_at IS NULL",
            )
            .and_then(|mut statement| statement.execute(params![completion_id, unix_now()]))
            .map_err(|e| self.query_error("mark a completion delivered", e))?;
        if n == 1 {
            return Ok(true);
        }
        match self.is_delivered(completion_id)? {
            Some(_) => Ok(false),
            None => Err(Error::LedgerUnknownCompletion {
                path: self.path.clone(),
                completion_id: completion_id.to_owned(),
            }),
        }
    }

    /// Marks every completion of `completion_ids` delivered in one transaction
    /// (one commit, one fsync, whatever the count): a consumer that acknowledges N
    /// events pays for one write. Ids the ledger does not hold (never committed,
    /// pruned) and ones already delivered are skipped. Returns how many this call
    /// delivered. With `owner`, only that owner's completions are marked (a consumer
    /// acknowledges its own).
    ///
    /// # Errors
    /// [`Error::LedgerQuery`] when the write fails; then none of them is marked.
    pub fn mark_delivered_many(
        &self,
        owner: Option<&str>,
        completion_ids: &[&str],
    ) -> Result<usize, Error> {
        if completion_ids.is_empty() {
            return Ok(0);
        }
        let run = || -> rusqlite::Result<usize> {
            let tx = self.conn.unchecked_transaction()?;
            let mut n = 0;
            {
                let mut stmt = tx.prepare_cached(
                    "UPDATE completions SET delivered_at = ?2
                     WHERE completion_id = ?1 AND delivered_at IS NULL
                       AND (?3 IS NULL OR owner_task_id = ?3)",
                )?;
                let now = unix_now();
                for id in completion_ids {
                    n += stmt.execute(params![id, now, owner])?;
                }
            }
            tx.commit()?;
            Ok(n)
        };
        run().map_err(|e| self.query_error("mark completions delivered", e))
    }

    /// Whether a completion was delivered; `None` when the ledger does not
    /// hold it (never committed, or delivered long ago and pruned).
    ///
    /// # Errors
    /// [`Error::LedgerQuery`] when the read fails.
    pub fn is_delivered(&self, completion_id: &str) -> Result<Option<bool>, Error> {
        self.conn
            .query_row(
                "SELECT delivered_at IS NOT NULL FROM completions WHERE completion_id = ?1",
                [completion_id],
                |row| row.get(0),
            )
            .optional()
            .map_err(|e| self.query_error("look up a completion", e))
    }

    /// Every committed, undelivered completion, oldest first.
    ///
    /// # Errors
    /// [`Error::LedgerQuery`] when the read fails, [`Error::LedgerEvent`] when
    /// a stored event is not JSON.
    pub fn undelivered(&self) -> Result<Vec<CompletionRecord>, Error> {
        let read = || -> rusqlite::Result<Vec<(CompletionRecord, String)>> {
            let mut stmt = self.conn.prepare_cached(
                "SELECT completion_id, session_id, owner_task_id, task_id, session_key,
                        event, created_at
                 FROM completions WHERE delivered_at IS NULL ORDER BY seq",
            )?;
            let rows = stmt.query_map([], |row| {
                Ok((
                    CompletionRecord {
                        completion_id: row.get(0)?,
                        session_id: row.get(1)?,
                        owner_task_id: row.get(2)?,
                        task_id: row.get(3)?,
                        session_key: row.get(4)?,
                        event: serde_json::Value::Null,
                        created_at: row.get(6)?,
                    },
                    row.get::<_, String>(5)?,
                ))
            })?;
            rows.collect()
        };
        let rows = read().map_err(|e| self.query_error("list undelivered completions", e))?;
        rows.into_iter()
            .map(|(mut record, event)| {
                record.event =
                    serde_json::from_str(&event).map_err(|source| Error::LedgerEvent {
                        path: self.path.clone(),
                        completion_id: record.completion_id.clone(),
                        source,
                    })?;
                Ok(record)
            })
            .collect()
    }

    /// Deletes delivered completions delivered more than `older_than` ago and
    /// returns how many. Undelivered ones are never pruned.
    ///
    /// # Caveats
    /// A pruned id is forgotten: committing it again would count as new.
    /// Completion ids are unique per completion, so this only matters for a
    /// caller that reuses ids.
    ///
    /// # Errors
    /// [`Error::LedgerQuery`] when the write fails.
    pub fn prune_delivered(&self, older_than: Duration) -> Result<usize, Error> {
        let cutoff = unix_now() - older_than.as_secs_f64();
        self.conn
            .execute(
                "DELETE FROM completions WHERE delivered_at IS NOT NULL AND delivered_at < ?1",
                [cutoff],
            )
            .map_err(|e| self.query_error("prune delivered completions", e))
    }

    /// Deletes undelivered completions committed more than `older_than` ago and
    /// returns how many: the completions of an owner that never came back, kept as
    /// long as result receipts are (`result_ttl`, by default [`UNCLAIMED_RETENTION`](crate::UNCLAIMED_RETENTION)).
    /// No count cap: whatever other owners do, an owner's completion stays for its
    /// whole retention.
    ///
    /// # Errors
    /// [`Error::LedgerQuery`] when the write fails.
    pub fn expire_unclaimed(&self, older_than: Duration) -> Result<usize, Error> {
        let cutoff = unix_now() - older_than.as_secs_f64();
        self.conn
            .execute(
                "DELETE FROM completions WHERE delivered_at IS NULL AND created_at < ?1",
                params![cutoff],
            )
            .map_err(|e| self.query_error("expire unclaimed completions", e))
    }

    fn query_error(&self, action: &'static str, source: rusqlite::Error) -> Error {
        if is_corruption(&source) {
            return Error::LedgerCorrupt {
                path: self.path.clone(),
                detail: source.to_string(),
            };
        }
        Error::LedgerQuery {
            path: self.path.clone(),
            action,
            source,
        }
    }
}

/// Whether `e` is SQLite's "database is locked" while opening.
fn is_busy(e: &Error) -> bool {
    matches!(
        e,
        Error::LedgerOpen {
            source: LedgerCause::Sqlite(rusqlite::Error::SqliteFailure(f, _)),
            ..
        } if f.code == rusqlite::ErrorCode::DatabaseBusy
    )
}

/// Opens an existing file read-write without creating it.
fn connect(path: &Path) -> Result<Connection, Error> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn =
        Connection::open_with_flags(path, flags).map_err(|e| open_error(path, e.into()))?;
    conn.busy_handler(Some(busy_wait))
        .map_err(|e| open_error(path, e.into()))?;
    Ok(conn)
}

/// SQLite's busy handler for every connection to `state.db`: called with how many
/// times it was called for this lock, it waits and says whether to try again.
///
/// The daemon's own connections (the receipt writer, the checkpoint writer, a
/// finish's ledger commit) meet on the database's locks for a few microseconds at
/// a time, at the end of every job. SQLite's own timeout handler sleeps 1 ms at
/// its first retry, and that millisecond was on the path of every `run --wait`
/// whose receipt and checkpoint commits met; here the first retries wait
/// [`BUSY_STEP_FIRST`], doubling up to [`BUSY_STEP_MAX`], and the handler gives up
/// once the waits add up to [`BUSY_TIMEOUT`], as the timeout handler did.
#[expect(
    clippy::disallowed_methods,
    reason = "SQLite's busy handler waits before its retry: a back-off, not a synchronisation"
)]
fn busy_wait(count: i32) -> bool {
    #[cfg(test)]
    tests::ON_BUSY.with(|hook| {
        if let Some(tell) = hook.borrow().as_ref() {
            let _ = tell.send(count);
        }
    });
    match busy_step(count) {
        Some(wait) => {
            std::thread::sleep(wait);
            true
        }
        None => false,
    }
}

/// The wait before retry `count` of [`busy_wait`] (from 0); `None` once the waits
/// before it add up to [`BUSY_TIMEOUT`].
fn busy_step(count: i32) -> Option<Duration> {
    let step = |n: u32| {
        1u32.checked_shl(n)
            .and_then(|factor| BUSY_STEP_FIRST.checked_mul(factor))
            .map_or(BUSY_STEP_MAX, |d| d.min(BUSY_STEP_MAX))
    };
    let count = u32::try_from(count).unwrap_or(0);
    let waited: Duration =
        (0..count.min(32)).map(step).sum::<Duration>() + BUSY_STEP_MAX * count.saturating_sub(32);
    (waited < BUSY_TIMEOUT).then(|| step(count))
}

/// Checks, without writing anything, that `conn` is a herd ledger we can use.
fn check(conn: &Connection, path: &Path) -> Result<State, Error> {
    let corrupt = |detail: String| Error::LedgerCorrupt {
        path: path.to_path_buf(),
        detail,
    };
    // One statement, so one snapshot: read as two, a concurrent creator's commit
    // could land between them and show its tables with the old version (0).
    let (version, n_tables): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT user_version FROM pragma_user_version), \
                    (SELECT count(*) FROM sqlite_schema WHERE type = 'table')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(|e| open_error(path, e.into()))?;
    if version == 0 {
        return if n_tables == 0 {
            Ok(State::Uninitialised)
        } else {
            Err(corrupt("a database, but not a herd ledger".to_owned()))
        };
    }
    if version > LEDGER_VERSION {
        return Err(Error::LedgerVersion {
            path: path.to_path_buf(),
            found: version,
            supported: LEDGER_VERSION,
        });
    }
    let mut stmt = conn
        .prepare("PRAGMA quick_check")
        .map_err(|e| open_error(path, e.into()))?;
    let findings: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .and_then(|rows| rows.collect())
        .map_err(|e| open_error(path, e.into()))?;
    if findings != ["ok"] {
        return Err(corrupt(findings.join("; ")));
    }
    Ok(State::Ready)
}

/// A failure to open: a damaged file is [`Error::LedgerCorrupt`], the rest
/// [`Error::LedgerOpen`].
fn open_error(path: &Path, cause: LedgerCause) -> Error {
    if let LedgerCause::Sqlite(e) = &cause
        && is_corruption(e)
    {
        return Error::LedgerCorrupt {
            path: path.to_path_buf(),
            detail: e.to_string(),
        };
    }
    Error::LedgerOpen {
        path: path.to_path_buf(),
        source: cause,
    }
}

fn is_corruption(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    )
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests;
