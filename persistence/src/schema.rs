//! The schema of `<home>/state.db` and its migrations (`PRAGMA user_version`).
//!
//! One database holds the completion ledger (version 1: `completions`) and, from
//! version 2, the result store (`results`, `tombstones`) and spawn request keys
//! (`request_keys`), and from version 3 the running sessions (`sessions`) and host links
//! (`host_links`), and from version 4 facts about the home itself (`home`: its
//! stable id), and from version 5 the readiness mark of a running session
//! (`sessions.ready_at`), and from version 6 the job queue (`queued`,
//! `queue_groups`). Each migration runs in one `BEGIN IMMEDIATE` transaction that
//! reads the version again under the write lock, so two processes migrating at once
//! both succeed and a crash mid-migration leaves the previous version whole.
//! `tests/data/v1_ledger.sql` is a version-1 database and must keep opening.

use rusqlite::Connection;

/// The format version this crate writes.
pub(crate) const VERSION: i64 = 6;

/// Version 1: the completion ledger.
const V1: &str = "
CREATE TABLE IF NOT EXISTS completions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    completion_id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    owner_task_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    event TEXT NOT NULL,
    created_at REAL NOT NULL,
    delivered_at REAL
);
CREATE INDEX IF NOT EXISTS completions_undelivered ON completions (seq) WHERE delivered_at IS NULL;
";

/// Version 2: result receipts (one row per finished session; `receipt` is the
/// receipt's JSON without its output, `output` the redacted tail, `spawn` the
/// private restart spec: the command as given), tombstones of evicted ones, and
/// spawn request keys.
const V2: &str = "
CREATE TABLE IF NOT EXISTS results (
    session_id TEXT PRIMARY KEY NOT NULL,
    name TEXT,
    owner_task_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL NOT NULL,
    size_bytes INTEGER NOT NULL,
    receipt TEXT NOT NULL,
    output TEXT NOT NULL,
    spawn TEXT
);
CREATE INDEX IF NOT EXISTS results_finished ON results (finished_at);
CREATE INDEX IF NOT EXISTS results_name ON results (name, finished_at) WHERE name IS NOT NULL;
CREATE TABLE IF NOT EXISTS tombstones (
    session_id TEXT PRIMARY KEY NOT NULL,
    name TEXT,
    expired_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS tombstones_name ON tombstones (name, expired_at) WHERE name IS NOT NULL;
CREATE INDEX IF NOT EXISTS tombstones_expired ON tombstones (expired_at);
CREATE TABLE IF NOT EXISTS request_keys (
    request_key TEXT PRIMARY KEY NOT NULL,
    answer TEXT NOT NULL,
    created_at REAL NOT NULL
);
";

/// Version 3: running sessions (the `checkpoint` module), one row each from spawn to the
/// transaction that stores the session's receipt: who wrote it, the lookup columns,
/// the record as JSON (redacted command, and privately the command as given and the
/// spawn's options) and the kill in progress, if any; and the host links
/// (the `host_links` module), one row per configured host whose link keeps a map.
const V3: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY NOT NULL,
    writer_pid INTEGER NOT NULL,
    writer_start_time INTEGER,
    name TEXT,
    owner_task_id TEXT NOT NULL,
    started_at REAL NOT NULL,
    record TEXT NOT NULL,
    kill_intent TEXT,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS host_links (
    host TEXT PRIMARY KEY NOT NULL,
    book TEXT NOT NULL,
    updated_at REAL NOT NULL
);
";

/// Version 4: facts about the home (`key`, `value`): its stable id (`home_id`),
/// which far hosts know this home by (the `host_links` module).
const V4: &str = "
CREATE TABLE IF NOT EXISTS home (
    key TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
";

/// Version 5: when a running session became ready (`herd run --ready`,
/// `--ready-port`), unix seconds; set once (`CheckpointStore::record_ready`) and
/// kept by every later write of the row.
const V5: &str = "
ALTER TABLE sessions ADD COLUMN ready_at REAL;
";

/// Version 6: the job queue (the `queue_db` module): one row per queued job
/// (`session_id`, `seq` its submission order, `record` the spawn request, group and
/// dependencies as JSON) until it starts or ends without running, and one row per
/// job group with its parallel limit.
const V6: &str = "
CREATE TABLE IF NOT EXISTS queued (
    session_id TEXT PRIMARY KEY NOT NULL,
    seq INTEGER NOT NULL,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS queue_groups (
    name TEXT PRIMARY KEY NOT NULL,
    parallel INTEGER NOT NULL
);
";

/// The migrations, in order: index `i` takes a database from version `i` to `i + 1`.
const MIGRATIONS: [&str; 6] = [V1, V2, V3, V4, V5, V6];

/// Brings `conn`'s database to [`VERSION`]; returns the version it found.
pub(crate) fn migrate(conn: &Connection) -> rusqlite::Result<i64> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let run = || -> rusqlite::Result<i64> {
        let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        for (from, sql) in MIGRATIONS.iter().enumerate() {
            let from = i64::try_from(from).unwrap_or(i64::MAX);
            if found <= from {
                conn.execute_batch(sql)?;
            }
        }
        if found < VERSION {
            conn.pragma_update(None, "user_version", VERSION)?;
        }
        Ok(found)
    };
    match run() {
        Ok(found) => {
            conn.execute_batch("COMMIT")?;
            Ok(found)
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}
