//! Running sessions in the store: the `sessions` table of `<home>/state.db` (B27).
//!
//! One row per running session (`schema.rs`, version 3): the session's id, the
//! process that wrote it (`writer_pid`, `writer_start_time`), a few columns for
//! lookups, the [`SessionRecord`] as JSON (`record`: the command redacted, and
//! privately, in `command_given`, the command as given, which only a restart
//! repeats), and the kill in progress, if any (`kill_intent`). Times: a record's
//! `start_time` (of the session and of the writer) is field 22 of `/proc/<pid>/stat`,
//! clock ticks since boot, the fingerprint that tells a live pid from a reused one;
//! `started_at` is wall-clock unix seconds as a float, as the ledger and receipts.
//!
//! Transactions: a spawn's row is one transaction ([`CheckpointStore::write_one`]),
//! committed before the spawn answers; a session's finish removes its row in the
//! transaction that stores its result receipt (`receipts.rs`), so a session is in
//! exactly one of `sessions` and `results` at every commit; a kill's intent is one
//! transaction before the kill starts ([`CheckpointStore::record_kill_intent`]);
//! [`CheckpointStore::write_own`] refreshes the rows of many running sessions (an
//! owner changed by a handoff, notify turned on) and deletes the rows of sessions
//! that finished, in one transaction. The database is WAL with `synchronous=NORMAL`:
//! a commit survives a crash of any herd process without an fsync of its own; a
//! power loss may lose the last commits, and ends every session anyway.
//!
//! Several processes may share one home (a daemon and an embedding host, or a daemon
//! restarting while its predecessor is still exiting). Each row names its writer
//! (pid plus start time); SQLite serialises the writers' transactions, and writing a
//! session under a new writer takes it over (that is how a restarted daemon takes
//! over the sessions it re-adopts without listing one twice). Restore leaves alone
//! the rows of another live writer.
//!
//! Homes of releases before the store kept this in `processes.json` and
//! `processes.pending/<id>.json`; the first open imports and removes them
//! (`checkpoint/legacy.rs`). A `processes.json` that cannot be understood is moved
//! aside (`processes.json.corrupt-<unix time>`) and reported, never dropped.
//!
//! Invariant: this module never looks at live processes; classifying a
//! checkpointed pid (alive, reused, gone) is herd-core's restore.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, params};

use crate::record::validate;
use crate::{
    CheckpointEntry, Error, Home, KillIntent, Ledger, Loaded, MovedAside, SessionRecord, Writer,
};

mod legacy;

/// The open database, made on first use.
#[derive(Debug, Default)]
struct Db {
    conn: Option<(Connection, PathBuf)>,
}

/// Reads and writes the running sessions of a home (the `sessions` table of
/// `state.db`).
///
/// Cheap to clone (clones share one connection). Does no I/O until first used; a
/// load of a home that has neither `state.db` nor checkpoint files creates nothing,
/// and no write ever creates the home.
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    home: Home,
    db: Arc<Mutex<Db>>,
}

/// What a connection-opening call found besides the connection.
type Opened = Option<MovedAside>;

impl CheckpointStore {
    /// A store for `home`. Does no I/O.
    pub fn new(home: &Home) -> CheckpointStore {
        CheckpointStore {
            home: home.clone(),
            db: Arc::new(Mutex::new(Db::default())),
        }
    }

    /// `<home>/state.db`, the database that holds the sessions.
    pub fn path(&self) -> PathBuf {
        self.home.ledger_path()
    }

    /// Runs `f` on the connection, opening (and, when `create`, creating) the
    /// database first; the first open imports an earlier release's checkpoint
    /// files. `Ok(None)` when there is nothing to read and `create` is false.
    fn with_db<T>(
        &self,
        create: bool,
        action: &'static str,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<Option<(T, Opened)>, Error> {
        let mut db = lock(&self.db);
        let mut opened = None;
        if db.conn.is_none() {
            let legacy = legacy::present(&self.home);
            if !create && !legacy && !self.home.ledger_path().exists() {
                return Ok(None);
            }
            let (conn, path) = match Ledger::create(&self.home) {
                Ok(ledger) => ledger.into_parts(),
                // A reader on a full disk (opening a WAL database creates its index
                // and prunes, which writes) still reads what the file holds.
                Err(error) if !create && !legacy => {
                    tracing::warn!(%error, "state database not opened for writing; reading the file as it is");
                    let path = self.home.ledger_path();
                    return read_only(&path)
                        .and_then(|conn| f(&conn))
                        .map(|value| Some((value, None)))
                        .map_err(|source| Error::StoreQuery {
                            path,
                            action,
                            source,
                        });
                }
                Err(error) => return Err(error),
            };
            if legacy {
                opened = legacy::import(&self.home, &conn, &path, |tx, entry| {
                    upsert(tx, &entry.writer, &entry.session, false)
                })?;
            }
            db.conn = Some((conn, path));
        }
        let Some((conn, path)) = db.conn.as_ref() else {
            return Ok(None);
        };
        f(conn)
            .map(|value| Some((value, opened)))
            .map_err(|source| Error::StoreQuery {
                path: path.clone(),
                action,
                source,
            })
    }

    /// Loads every running session of every writer, oldest first.
    ///
    /// A home without `state.db` and without checkpoint files loads as empty and
    /// creates nothing. An earlier release's checkpoint files are imported first; an
    /// unusable `processes.json` is moved aside and reported in
    /// [`Loaded::moved_aside`].
    ///
    /// # Errors
    /// As [`Ledger::open`] for the database, [`Error::StoreQuery`] for the read, and
    /// [`Error::CheckpointLock`], [`Error::CheckpointRead`],
    /// [`Error::CheckpointMoveAside`] for an earlier release's files.
    pub fn load(&self) -> Result<Loaded, Error> {
        let found = self.with_db(false, "load the running sessions", |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT writer_pid, writer_start_time, record, kill_intent, ready_at FROM sessions
                 ORDER BY started_at, session_id",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok((
                    r.get::<_, i32>(0)?,
                    r.get::<_, Option<i64>>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, Option<f64>>(4)?,
                ))
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        let Some((rows, moved_aside)) = found else {
            return Ok(Loaded::default());
        };
        let mut entries = Vec::with_capacity(rows.len());
        for (pid, start, record, intent, ready_at) in rows {
            match serde_json::from_str::<SessionRecord>(&record) {
                Ok(session) => entries.push(CheckpointEntry {
                    writer: Writer::new(pid, start.and_then(|t| u64::try_from(t).ok())),
                    session,
                    kill_intent: intent.and_then(|json| serde_json::from_str(&json).ok()),
                    ready_at,
                }),
                Err(error) => {
                    tracing::warn!(%error, "a running session's row cannot be read; it is left in the store");
                }
            }
        }
        Ok(Loaded {
            entries,
            moved_aside,
        })
    }

    /// Writes one session's row (a spawn), in one transaction: a restarted herd
    /// finds it once this returns.
    ///
    /// # Errors
    /// [`Error::InvalidSessionId`], [`Error::InvalidRecord`], [`Error::HomeMissing`]
    /// (the home is never created), and as [`Ledger::create`] and
    /// [`Error::StoreQuery`].
    pub fn write_one(&self, writer: &Writer, record: &SessionRecord) -> Result<(), Error> {
        validate(record)?;
        self.with_db(true, "store a running session", |conn| {
            upsert(conn, writer, record, true)
        })?;
        Ok(())
    }

    /// Writes `records` as `writer`'s (taking over a session another writer had)
    /// and deletes the rows of `finished`, in one transaction. A record whose
    /// session already has a result receipt is not written back (it finished after
    /// the caller's snapshot). A finished id also listed in `records` is deleted.
    ///
    /// # Errors
    /// [`Error::InvalidRecord`] for duplicate ids or a non-finite `started_at`
    /// (nothing is written), [`Error::HomeMissing`] when the home does not exist,
    /// and [`Error::StoreQuery`] (nothing is written).
    pub fn write_own(
        &self,
        writer: &Writer,
        records: &[SessionRecord],
        finished: &[&str],
    ) -> Result<(), Error> {
        let mut ids = HashSet::with_capacity(records.len());
        for record in records {
            if !ids.insert(record.id.as_str()) {
                return Err(Error::InvalidRecord {
                    session_id: record.id.clone(),
                    reason: "the session is listed twice",
                });
            }
            validate(record)?;
        }
        if records.is_empty() && finished.is_empty() {
            return Ok(());
        }
        self.with_db(true, "store the running sessions", |conn| {
            let tx = conn.unchecked_transaction()?;
            for record in records {
                upsert(&tx, writer, record, true)?;
            }
            delete(&tx, finished)?;
            tx.commit()
        })?;
        tracing::debug!(
            writer_pid = writer.pid,
            n_sessions = records.len(),
            n_finished = finished.len(),
            "running sessions stored"
        );
        Ok(())
    }

    /// Removes the sessions with these ids, whoever wrote them (restore uses it for
    /// entries it closed), in one transaction; returns how many rows went.
    ///
    /// # Errors
    /// As [`CheckpointStore::load`]; a home without a database removes nothing.
    pub fn remove(&self, session_ids: &[&str]) -> Result<usize, Error> {
        if session_ids.is_empty() {
            return Ok(0);
        }
        let removed = self.with_db(false, "remove running sessions", |conn| {
            let tx = conn.unchecked_transaction()?;
            let n = delete(&tx, session_ids)?;
            tx.commit()?;
            Ok(n)
        })?;
        Ok(removed.map_or(0, |(n, _)| n))
    }

    /// Records that a kill of these sessions began (one transaction), so a daemon
    /// that dies during its grace window leaves it for the next to report. Returns
    /// how many running sessions it was recorded for.
    ///
    /// # Errors
    /// As [`CheckpointStore::remove`].
    pub fn record_kill_intent(
        &self,
        session_ids: &[&str],
        intent: &KillIntent,
    ) -> Result<usize, Error> {
        if session_ids.is_empty() {
            return Ok(0);
        }
        let json = serde_json::to_string(intent).unwrap_or_default();
        let recorded = self.with_db(false, "record a kill", |conn| {
            let tx = conn.unchecked_transaction()?;
            let mut n = 0;
            {
                let mut stmt = tx
                    .prepare_cached("UPDATE sessions SET kill_intent = ?2 WHERE session_id = ?1")?;
                for id in session_ids {
                    n += stmt.execute(params![id, json])?;
                }
            }
            tx.commit()?;
            Ok(n)
        })?;
        Ok(recorded.map_or(0, |(n, _)| n))
    }
}

impl CheckpointStore {
    /// Records that a running session became ready at `ready_at` (unix seconds), once:
    /// a row already marked keeps its first time. Returns whether this call marked
    /// it (false for a row already marked, or no row).
    ///
    /// # Errors
    /// As [`CheckpointStore::remove`].
    pub fn record_ready(&self, session_id: &str, ready_at: f64) -> Result<bool, Error> {
        let marked = self.with_db(false, "record a session's readiness", |conn| {
            conn.prepare_cached(
                "UPDATE sessions SET ready_at = ?2 WHERE session_id = ?1 AND ready_at IS NULL",
            )?
            .execute(params![session_id, ready_at])
        })?;
        Ok(marked.is_some_and(|(n, _)| n > 0))
    }
}

/// `path` opened read-only as an immutable file: no lock, no WAL index, nothing
/// written (what a full disk still allows). A clean close of the last connection
/// leaves every commit in the file itself; after a crash the WAL's files exist and
/// the ordinary open works.
pub(crate) fn read_only(path: &std::path::Path) -> rusqlite::Result<Connection> {
    let escaped = path
        .to_string_lossy()
        .replace('%', "%25")
        .replace('?', "%3f")
        .replace('#', "%23");
    let uri = format!("file:{escaped}?immutable=1");
    Connection::open_with_flags(
        uri,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
            | rusqlite::OpenFlags::SQLITE_OPEN_URI
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
}

/// Inserts or replaces one session's row as `writer`'s, keeping its kill intent;
/// with `unless_finished`, not for a session whose result receipt exists.
fn upsert(
    conn: &Connection,
    writer: &Writer,
    record: &SessionRecord,
    unless_finished: bool,
) -> rusqlite::Result<()> {
    let json = serde_json::to_string(record)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    let sql = if unless_finished {
        "INSERT INTO sessions (session_id, writer_pid, writer_start_time, name,
             owner_task_id, started_at, record, updated_at)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8
         WHERE NOT EXISTS (SELECT 1 FROM results WHERE session_id = ?1)
         ON CONFLICT (session_id) DO UPDATE SET writer_pid = excluded.writer_pid,
             writer_start_time = excluded.writer_start_time, name = excluded.name,
             owner_task_id = excluded.owner_task_id, started_at = excluded.started_at,
             record = excluded.record, updated_at = excluded.updated_at"
    } else {
        "INSERT INTO sessions (session_id, writer_pid, writer_start_time, name,
             owner_task_id, started_at, record, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (session_id) DO NOTHING"
    };
    conn.prepare_cached(sql)?.execute(params![
        record.id,
        writer.pid,
        writer.start_time.and_then(|t| i64::try_from(t).ok()),
        record.name,
        record.owner_task_id,
        record.started_at,
        json,
        unix_now(),
    ])?;
    Ok(())
}

/// Deletes the rows of `ids`; returns how many went.
fn delete(conn: &Connection, ids: &[&str]) -> rusqlite::Result<usize> {
    let mut stmt = conn.prepare_cached("DELETE FROM sessions WHERE session_id = ?1")?;
    let mut n = 0;
    for id in ids {
        n += stmt.execute([id])?;
    }
    Ok(n)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests;
