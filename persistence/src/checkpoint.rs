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
use std::fmt;
use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

use crate::{Error, Home, Ledger};

mod legacy;

/// The record format version this crate writes (the JSON of a row's `record`, and
/// of the checkpoint files of earlier releases).
/// The checkpoint format version this crate writes.
pub const CHECKPOINT_VERSION: u64 = 1;

/// How the session's child talks to herd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// stdout/stderr through pipes.
    Pipe,
    /// A pseudo-terminal.
    Pty,
}

/// One running session as the checkpoint stores it.
///
/// Ids are plain strings here because this is the on-disk shape; herd-core maps
/// its own types to and from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Session id, `proc_` + 12 hex characters.
    pub id: String,
    /// The command line, already redacted by the caller.
    pub command: String,
    /// Pid of the session's shell.
    pub pid: i32,
    /// Process group of the session.
    pub pgid: i32,
    /// Field 22 of `/proc/<pid>/stat` captured at spawn; `None` when unreadable.
    #[serde(default)]
    pub start_time: Option<u64>,
    /// The container/session key of the caller.
    #[serde(default)]
    pub task_id: String,
    /// The turn or agent that owns the session.
    #[serde(default)]
    pub owner_task_id: String,
    /// Gateway session key used for routing notifications.
    #[serde(default)]
    pub session_key: String,
    /// Pipe or PTY.
    pub mode: Mode,
    /// Whether a completion is queued on exit.
    #[serde(default)]
    pub notify: bool,
    /// Watch patterns (substrings).
    #[serde(default)]
    pub watch_patterns: Vec<String>,
    /// Heartbeat interval; 0 = off.
    #[serde(default)]
    pub heartbeat_seconds: u64,
    /// Output characters a completion carries; 0 = the default.
    #[serde(default)]
    pub completion_output_chars: u64,
    /// Whether lifecycle kill sweeps skip this session.
    #[serde(default)]
    pub persist_on_release: bool,
    /// The session's complete log file.
    pub log_path: PathBuf,
    /// Working directory, if one was given.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Wall-clock spawn time, unix seconds.
    pub started_at: f64,
    /// The supervisor process that owns the job, when one does (absent in checkpoints
    /// of daemons that held jobs themselves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shim: Option<ShimRef>,
    /// The name the session was started with (`herd run --name`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The rest of what the spawn asked for: its time limit and what a restart
    /// repeats (absent in checkpoints written before they existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<SpawnOptions>,
    /// The command line as the spawn gave it, when it differs from `command` (which
    /// redaction masked): kept privately so a restart repeats it exactly; no answer
    /// shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_given: Option<String>,
}

/// What a spawn asked for beyond the fields of [`SessionRecord`]: the time limit a
/// restored session is still held to, and what `herd restart` repeats.
///
/// Invariant: no environment value is stored, only names: a restart takes the values
/// from the environment of whoever asks for it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnOptions {
    /// The time limit in seconds, as asked (1 s to 10 years).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_seconds: Option<u64>,
    /// When the time limit ends the job: a wall-clock instant, unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_unix_ms: Option<u64>,
    /// Names passed through the credential deny-list (`--forward-env`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forward_env: Vec<String>,
    /// Names the spawn set explicitly (`--env NAME=VALUE`); their values are not kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_names: Vec<String>,
    /// Whether the spawn asked for a completion (the record's `notify` may have been
    /// turned on later).
    #[serde(default)]
    pub notify: bool,
    /// The terminal size asked for, when the spawn asked for a PTY (even one that
    /// fell back to pipes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pty: Option<(u16, u16)>,
    /// The record's `command` differs from what was run: redaction masked part of it.
    #[serde(default)]
    pub command_redacted: bool,
    /// The session this one was started in place of (`herd restart`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// `--kill-leftovers` as the spawn gave it (`None`: the config's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_leftovers: Option<bool>,
    /// `--memory` as the spawn gave it, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// `--cpus` as the spawn gave it, thousandths of a CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_millis: Option<u64>,
    /// `--pids` as the spawn gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
}

/// The supervisor process (shim) a checkpointed session runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShimRef {
    /// The shim's pid.
    pub pid: i32,
    /// Field 22 of the shim's `/proc/<pid>/stat`.
    #[serde(default)]
    pub start_time: Option<u64>,
    /// The socket protocol it speaks.
    pub protocol: u32,
}

/// The process that wrote a checkpoint entry.
///
/// Two writers are the same only when both the pid and the start time are
/// equal (a missing start time equals only a missing one), so a pid reused by
/// a later process is a different writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Writer {
    /// Pid of the writing process.
    pub pid: i32,
    /// Field 22 of its `/proc/<pid>/stat`; `None` when unreadable.
    pub start_time: Option<u64>,
}

impl Writer {
    /// A writer identity from its parts.
    pub fn new(pid: i32, start_time: Option<u64>) -> Writer {
        Writer { pid, start_time }
    }

    /// The current process: its pid and, on Linux, its start time from
    /// `/proc/self/stat` (`None` where that cannot be read).
    pub fn current() -> Writer {
        let pid = i32::try_from(std::process::id()).expect("pids fit in pid_t");
        let start_time = fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|stat| parse_stat_start_time(&stat));
        Writer { pid, start_time }
    }
}

/// Extracts field 22 (start time in clock ticks) from a `/proc/<pid>/stat` line.
///
/// The command name (field 2) is parenthesised and may itself contain spaces
/// and parentheses, so fields are counted from the last `)`.
pub fn parse_stat_start_time(stat: &str) -> Option<u64> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    // After the name comes field 3 (state); field 22 is 19 fields later.
    after_comm.split_whitespace().nth(19)?.parse().ok()
}

/// A checkpointed session together with the process that wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointEntry {
    /// Who wrote the entry.
    pub writer: Writer,
    /// The session.
    #[serde(flatten)]
    pub session: SessionRecord,
    /// The kill in progress when the entry was read, if one was (never part of a
    /// checkpoint file; a column of its own in the store).
    #[serde(skip)]
    pub kill_intent: Option<KillIntent>,
}

/// A kill that was begun and not yet concluded: recorded before the kill starts, so
/// a daemon that dies in the kill's grace window leaves it for the next to report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KillIntent {
    /// The kill's source, as on the wire (`process_kill`, `kill_all`, ...).
    pub source: String,
    /// When the kill was asked for, unix seconds.
    pub requested_at: f64,
}

/// Why a checkpoint file was not usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointProblem {
    /// Not JSON, or JSON of the wrong shape.
    Unreadable {
        /// The parser's description.
        detail: String,
    },
    /// A `version` this herd does not know (or none at all).
    UnknownVersion {
        /// The version as found in the file, rendered as JSON.
        found: String,
    },
}

impl fmt::Display for CheckpointProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckpointProblem::Unreadable { detail } => write!(f, "not a checkpoint: {detail}"),
            CheckpointProblem::UnknownVersion { found } => write!(
                f,
                "unknown checkpoint version {found}, this herd reads version {CHECKPOINT_VERSION}"
            ),
        }
    }
}

/// A checkpoint that was moved aside instead of loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MovedAside {
    /// Where the checkpoint was (`<home>/processes.json`).
    pub from: PathBuf,
    /// Where it is now (`<home>/processes.json.corrupt-<unix time>[-n]`).
    pub to: PathBuf,
    /// What was wrong with it.
    pub problem: CheckpointProblem,
}

impl fmt::Display for MovedAside {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "checkpoint {} was unusable ({}) and was moved to {}; sessions it listed were not restored",
            self.from.display(),
            self.problem,
            self.to.display()
        )
    }
}

/// What [`CheckpointStore::load`] found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Loaded {
    /// Every checkpointed session of every writer, in file order.
    pub entries: Vec<CheckpointEntry>,
    /// Set when the file was unusable and moved aside (then `entries` is empty).
    pub moved_aside: Option<MovedAside>,
}

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
                "SELECT writer_pid, writer_start_time, record, kill_intent FROM sessions
                 ORDER BY started_at, session_id",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok((
                    r.get::<_, i32>(0)?,
                    r.get::<_, Option<i64>>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<String>>(3)?,
                ))
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        let Some((rows, moved_aside)) = found else {
            return Ok(Loaded::default());
        };
        let mut entries = Vec::with_capacity(rows.len());
        for (pid, start, record, intent) in rows {
            match serde_json::from_str::<SessionRecord>(&record) {
                Ok(session) => entries.push(CheckpointEntry {
                    writer: Writer::new(pid, start.and_then(|t| u64::try_from(t).ok())),
                    session,
                    kill_intent: intent.and_then(|json| serde_json::from_str(&json).ok()),
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

/// `path` opened read-only as an immutable file: no lock, no WAL index, nothing
/// written (what a full disk still allows). A clean close of the last connection
/// leaves every commit in the file itself; after a crash the WAL's files exist and
/// the ordinary open works.
fn read_only(path: &std::path::Path) -> rusqlite::Result<Connection> {
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

/// Refuses a record the store must not hold.
pub(crate) fn validate(record: &SessionRecord) -> Result<(), Error> {
    crate::receipts::validate_id(&record.id)?;
    if !record.started_at.is_finite() {
        return Err(Error::InvalidRecord {
            session_id: record.id.clone(),
            reason: "started_at is not a finite number",
        });
    }
    Ok(())
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
