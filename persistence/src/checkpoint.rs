//! The checkpoint of running sessions: `<home>/processes.json` (B27).
//!
//! Format (version 1), documented in ARCHITECTURE.md:
//!
//! ```json
//! {"version": 1, "sessions": [
//!   {"writer": {"pid": 4100, "start_time": 88123},
//!    "id": "proc_0123456789ab", "command": "npm run dev", "pid": 4242, "pgid": 4242,
//!    "start_time": 99001, "task_id": "t1", "owner_task_id": "t1", "session_key": "",
//!    "mode": "pipe", "notify": true, "watch_patterns": ["ready"], "heartbeat_seconds": 0,
//!    "completion_output_chars": 2000, "persist_on_release": false,
//!    "log_path": "/home/u/.herd/logs/sessions/proc_0123456789ab.log",
//!    "cwd": "/home/u/app", "started_at": 1790000000.25}
//! ]}
//! ```
//!
//! Times: `start_time` (of the session and of the writer) is field 22 of
//! `/proc/<pid>/stat`, clock ticks since boot, the exact fingerprint that tells
//! a live pid from a reused one; `started_at` is wall-clock unix seconds as a
//! float (the same unit the ledger and receipts use, and what a JSON number
//! holds without a date parser).
//!
//! Several processes may share one home (a daemon and an embedding host, or a
//! daemon restarting while its predecessor is still exiting). Each entry names
//! its writer (pid plus start time) and each writer replaces only its own
//! entries, read-merge-written under an exclusive `flock` on
//! `processes.json.lock`, so two writers never interleave and never drop each
//! other's sessions. Writing a session under a new writer removes that session
//! from any other writer (that is how a restarted daemon takes over the
//! sessions it re-adopts without listing one twice).
//!
//! Pending entries: a spawn must be findable by a restarted herd the moment it
//! is answered, but a durable write (two fsyncs) costs about a millisecond. So
//! a spawn writes its entry alone to `<home>/processes.pending/<id>.json`
//! (`{"version": 1, "entry": {...}}`, renamed into place without fsync: it
//! survives a crash of the herd process, which is what re-adoption needs; a
//! crash of the machine ends every session anyway), and the next full
//! checkpoint write, durable as above, covers it; then the writer removes the
//! pending file. [`CheckpointStore::load`] returns both, the full checkpoint's
//! entry winning for an id listed in both. A pending file that cannot be
//! understood (only a machine crash makes one) is removed with a warning.
//!
//! Invariant: a checkpoint that cannot be understood (not JSON, wrong shape,
//! unknown version) is never dropped or overwritten: it is renamed to
//! `processes.json.corrupt-<unix time>` and the rename is reported to the
//! caller, who decides how loudly to say so.
//!
//! Invariant: this module never looks at live processes; classifying a
//! checkpointed pid (alive, reused, gone) is herd-core's restore.

use std::collections::HashSet;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::atomic::{self, FileLock};
use crate::{Error, Home};

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

/// The on-disk shape of a version-1 pending entry.
#[derive(Debug, Serialize, Deserialize)]
struct PendingV1 {
    version: u64,
    entry: CheckpointEntry,
}

/// How old a pending temp file must be before a load sweeps it: pending writes
/// take no lock, so a younger one may be a write in progress.
const PENDING_TEMP_AGE: std::time::Duration = std::time::Duration::from_secs(60);

/// The on-disk shape of a version-1 checkpoint.
#[derive(Debug, Serialize, Deserialize)]
struct FileV1 {
    version: u64,
    sessions: Vec<CheckpointEntry>,
}

/// Reads and writes `<home>/processes.json`.
///
/// Every operation takes the lock, sweeps temp files left by interrupted
/// writes and works on the file as it is now; nothing is cached, so several
/// stores (in one process or many) on the same home stay consistent.
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    home: Home,
}

impl CheckpointStore {
    /// A store for `home`. Does no I/O.
    pub fn new(home: &Home) -> CheckpointStore {
        CheckpointStore { home: home.clone() }
    }

    /// `<home>/processes.json`.
    pub fn path(&self) -> PathBuf {
        self.home.checkpoint_path()
    }

    fn lock_path(&self) -> PathBuf {
        let mut name = self.path().into_os_string();
        name.push(".lock");
        PathBuf::from(name)
    }

    /// Loads every checkpointed session.
    ///
    /// A missing home or checkpoint loads as empty and creates nothing. A
    /// checkpoint that is not JSON, has the wrong shape or an unknown version
    /// is moved aside and reported in [`Loaded::moved_aside`]. On a read-only
    /// home the file is still read (without sweeping).
    ///
    /// # Errors
    /// [`Error::CheckpointRead`] when the file exists but cannot be read,
    /// [`Error::CheckpointLock`] when the lock cannot be taken for another
    /// reason than a read-only home, and [`Error::CheckpointMoveAside`] when an
    /// unusable file cannot be moved aside (it is then left in place).
    pub fn load(&self) -> Result<Loaded, Error> {
        let mut loaded = self.load_full()?;
        let listed: HashSet<String> = loaded
            .entries
            .iter()
            .map(|e| e.session.id.clone())
            .collect();
        loaded.entries.extend(
            self.load_pending()
                .into_iter()
                .filter(|e| !listed.contains(&e.session.id)),
        );
        Ok(loaded)
    }

    /// `processes.json` alone.
    fn load_full(&self) -> Result<Loaded, Error> {
        let path = self.path();
        if !exists(&path).map_err(|source| Error::CheckpointRead {
            path: path.clone(),
            source,
        })? {
            return Ok(Loaded::default());
        }
        let lock = self.lock_for_reading()?;
        if lock.is_some() {
            self.sweep();
        }
        match self.read_locked()? {
            Current::Missing => Ok(Loaded::default()),
            Current::Entries(entries) => Ok(Loaded {
                entries,
                moved_aside: None,
            }),
            Current::MovedAside(moved) => Ok(Loaded {
                entries: Vec::new(),
                moved_aside: Some(moved),
            }),
        }
    }

    /// `<home>/processes.pending/<id>.json`.
    ///
    /// # Errors
    /// [`Error::InvalidSessionId`] when `id` is not `proc_` followed by letters,
    /// digits or `_`.
    pub fn pending_path(&self, id: &str) -> Result<PathBuf, Error> {
        crate::receipts::validate_id(id)?;
        Ok(self
            .home
            .checkpoint_pending_dir()
            .join(format!("{id}.json")))
    }

    /// Writes one session's entry where a restarted herd finds it at once,
    /// without waiting for the disk (see the module docs); the next
    /// [`CheckpointStore::write_own`] that lists it, or
    /// [`CheckpointStore::remove_pending`] after a write that covered it,
    /// removes it.
    ///
    /// # Errors
    /// [`Error::InvalidSessionId`], [`Error::HomeMissing`] (the home is never
    /// created), [`Error::CreateDir`], [`Error::CheckpointEncode`] and
    /// [`Error::PendingWrite`].
    pub fn write_pending(&self, writer: &Writer, record: &SessionRecord) -> Result<(), Error> {
        let path = self.pending_path(&record.id)?;
        let dir = self.home.checkpoint_pending_dir();
        if !dir.is_dir() {
            self.home.ensure_dir(&dir)?;
        }
        let file = PendingV1 {
            version: CHECKPOINT_VERSION,
            entry: CheckpointEntry {
                writer: *writer,
                session: record.clone(),
            },
        };
        let bytes = serde_json::to_vec(&file).map_err(|source| Error::CheckpointEncode {
            session_id: record.id.clone(),
            source,
        })?;
        atomic::write_visible(&path, &bytes).map_err(|source| Error::PendingWrite { path, source })
    }

    /// Removes the pending entries of these sessions, whoever wrote them, and
    /// returns how many files were removed. A file already gone is fine; any
    /// other failure is logged (a leftover is removed by a later write that
    /// lists the session, or closed by restore like any entry).
    pub fn remove_pending(&self, session_ids: &[&str]) -> usize {
        let mut removed = 0;
        for id in session_ids {
            let Ok(path) = self.pending_path(id) else {
                continue;
            };
            match fs::remove_file(&path) {
                Ok(()) => removed += 1,
                Err(e) if atomic::is_missing(&e) => {}
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "pending checkpoint entry not removed");
                }
            }
        }
        removed
    }

    /// Removes the pending entries of sessions a durable write now lists: one
    /// directory read, and an unlink only for what is there.
    fn remove_pending_listed(&self, listed: &HashSet<&str>) {
        let Ok(listing) = fs::read_dir(self.home.checkpoint_pending_dir()) else {
            return;
        };
        let covered: Vec<String> = listing
            .flatten()
            .filter_map(|item| {
                let name = item.file_name();
                let id = name.to_str()?.strip_suffix(".json")?;
                listed.contains(id).then(|| id.to_owned())
            })
            .collect();
        let covered: Vec<&str> = covered.iter().map(String::as_str).collect();
        self.remove_pending(&covered);
    }

    /// Every readable pending entry; unreadable ones are removed with a warning.
    fn load_pending(&self) -> Vec<CheckpointEntry> {
        let dir = self.home.checkpoint_pending_dir();
        let listing = match fs::read_dir(&dir) {
            Ok(listing) => listing,
            Err(e) if atomic::is_missing(&e) => return Vec::new(),
            Err(error) => {
                tracing::warn!(dir = %dir.display(), %error, "pending checkpoint entries not readable; sessions spawned just before a crash may not be restored");
                return Vec::new();
            }
        };
        let mut entries = Vec::new();
        let mut temp_targets = Vec::new();
        for item in listing.flatten() {
            let name = item.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(target) = atomic::temp_target(name) {
                temp_targets.push(target.to_owned());
                continue;
            }
            let Some(id) = name.strip_suffix(".json") else {
                continue;
            };
            let path = item.path();
            let decoded = fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|bytes| {
                    serde_json::from_slice::<PendingV1>(&bytes).map_err(|e| e.to_string())
                })
                .and_then(|file| {
                    if file.version != CHECKPOINT_VERSION {
                        Err(format!("unknown version {}", file.version))
                    } else if file.entry.session.id != id {
                        Err(format!("the entry is for {}", file.entry.session.id))
                    } else {
                        Ok(file.entry)
                    }
                });
            match decoded {
                Ok(entry) => entries.push(entry),
                Err(problem) => {
                    tracing::warn!(path = %path.display(), %problem, "unusable pending checkpoint entry removed (only a machine crash leaves one; its session did not survive that)");
                    let _ = fs::remove_file(&path);
                }
            }
        }
        atomic::sweep_temps_of(&dir, temp_targets, Some(PENDING_TEMP_AGE));
        entries.sort_by(|a, b| a.session.id.cmp(&b.session.id));
        entries
    }

    /// Replaces `writer`'s entries with `records`, keeping every other
    /// writer's entries except sessions that `records` now lists (a session
    /// belongs to one writer at a time). An empty `records` removes the
    /// writer's entries (a clean shutdown).
    ///
    /// Returns the unusable previous checkpoint it moved aside, if any: its
    /// sessions are not carried over, so the caller should report it.
    ///
    /// # Errors
    /// [`Error::HomeMissing`] when the home does not exist (it is never
    /// created), [`Error::InvalidRecord`] for duplicate ids or a non-finite
    /// `started_at`, [`Error::CheckpointEncode`] for a non-UTF-8 path,
    /// [`Error::CheckpointLock`], [`Error::CheckpointRead`],
    /// [`Error::CheckpointMoveAside`], and [`Error::CheckpointWrite`] (the
    /// previous checkpoint is then unchanged).
    pub fn write_own(
        &self,
        writer: &Writer,
        records: &[SessionRecord],
    ) -> Result<Option<MovedAside>, Error> {
        let mut ids = HashSet::with_capacity(records.len());
        for record in records {
            if !ids.insert(record.id.as_str()) {
                return Err(Error::InvalidRecord {
                    session_id: record.id.clone(),
                    reason: "the session is listed twice",
                });
            }
            if !record.started_at.is_finite() {
                return Err(Error::InvalidRecord {
                    session_id: record.id.clone(),
                    reason: "started_at is not a finite number",
                });
            }
        }
        let _lock = self.lock_for_writing()?;
        self.sweep();
        let (current, moved_aside) = match self.read_locked()? {
            Current::Missing => (Vec::new(), None),
            Current::Entries(entries) => (entries, None),
            Current::MovedAside(moved) => (Vec::new(), Some(moved)),
        };
        let mut sessions: Vec<CheckpointEntry> = current
            .into_iter()
            .filter(|e| e.writer != *writer && !ids.contains(e.session.id.as_str()))
            .collect();
        sessions.extend(records.iter().map(|session| CheckpointEntry {
            writer: *writer,
            session: session.clone(),
        }));
        self.write_locked(sessions)?;
        tracing::debug!(
            writer_pid = writer.pid,
            n_sessions = records.len(),
            "checkpoint written"
        );
        self.remove_pending_listed(&ids);
        Ok(moved_aside)
    }

    /// Removes the sessions with these ids, whoever wrote them (restore uses
    /// it for entries it closed), pending entries included, and returns how many
    /// entries `processes.json` lost. Nothing is written when none matched.
    ///
    /// # Errors
    /// As [`CheckpointStore::write_own`]; a missing home or checkpoint removes
    /// nothing and is not an error.
    pub fn remove(&self, session_ids: &[&str]) -> Result<usize, Error> {
        self.remove_pending(session_ids);
        let path = self.path();
        if !exists(&path).map_err(|source| Error::CheckpointRead {
            path: path.clone(),
            source,
        })? {
            return Ok(0);
        }
        let _lock = self.lock_for_writing()?;
        self.sweep();
        let current = match self.read_locked()? {
            Current::Missing | Current::MovedAside(_) => return Ok(0),
            Current::Entries(entries) => entries,
        };
        let before = current.len();
        let ids: HashSet<&str> = session_ids.iter().copied().collect();
        let kept: Vec<CheckpointEntry> = current
            .into_iter()
            .filter(|e| !ids.contains(e.session.id.as_str()))
            .collect();
        let removed = before - kept.len();
        if removed > 0 {
            self.write_locked(kept)?;
        }
        Ok(removed)
    }

    fn lock_for_writing(&self) -> Result<FileLock, Error> {
        if !self.home.root().is_dir() {
            return Err(Error::HomeMissing {
                path: self.home.root().to_path_buf(),
            });
        }
        let path = self.lock_path();
        FileLock::acquire(&path).map_err(|source| Error::CheckpointLock { path, source })
    }

    /// The lock for a reader; `None` on a read-only home without a lock file,
    /// where no herd can be writing anyway.
    fn lock_for_reading(&self) -> Result<Option<FileLock>, Error> {
        let path = self.lock_path();
        match FileLock::acquire(&path) {
            Ok(lock) => Ok(Some(lock)),
            Err(e) if is_read_only(&e) => match FileLock::acquire_existing_read_only(&path) {
                Ok(lock) => Ok(Some(lock)),
                Err(e) if e.kind() == io::ErrorKind::NotFound || is_read_only(&e) => Ok(None),
                Err(source) => Err(Error::CheckpointLock { path, source }),
            },
            Err(source) => Err(Error::CheckpointLock { path, source }),
        }
    }

    fn sweep(&self) {
        atomic::sweep_temps(self.home.root(), "processes.json", None);
    }

    /// Reads the checkpoint; the caller holds the lock (or the home is
    /// read-only). Unusable files are moved aside here.
    fn read_locked(&self) -> Result<Current, Error> {
        let path = self.path();
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if atomic::is_missing(&e) => return Ok(Current::Missing),
            Err(source) => return Err(Error::CheckpointRead { path, source }),
        };
        match decode(&bytes) {
            Ok(entries) => Ok(Current::Entries(entries)),
            Err(problem) => self.move_aside(problem).map(Current::MovedAside),
        }
    }

    fn write_locked(&self, sessions: Vec<CheckpointEntry>) -> Result<(), Error> {
        let path = self.path();
        let file = FileV1 {
            version: CHECKPOINT_VERSION,
            sessions,
        };
        let bytes = serde_json::to_vec(&file).map_err(|source| Error::CheckpointEncode {
            session_id: first_unencodable(&file.sessions),
            source,
        })?;
        atomic::write_atomic(&path, &bytes)
            .map_err(|source| Error::CheckpointWrite { path, source })
    }

    fn move_aside(&self, problem: CheckpointProblem) -> Result<MovedAside, Error> {
        let from = self.path();
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut to = suffixed(&from, &format!(".corrupt-{secs}"));
        let mut n = 1;
        // We hold the lock, so no other herd races us between the check and
        // the rename.
        while exists(&to).unwrap_or(true) {
            to = suffixed(&from, &format!(".corrupt-{secs}-{n}"));
            n += 1;
        }
        let result = fs::rename(&from, &to).and_then(|()| atomic::fsync_dir(self.home.root()));
        match result {
            Ok(()) => {
                let moved = MovedAside { from, to, problem };
                tracing::error!(
                    from = %moved.from.display(),
                    to = %moved.to.display(),
                    problem = %moved.problem,
                    "unusable checkpoint moved aside"
                );
                Ok(moved)
            }
            Err(source) => Err(Error::CheckpointMoveAside {
                path: from,
                to,
                problem,
                source,
            }),
        }
    }
}

/// The checkpoint file as found under the lock.
enum Current {
    Missing,
    Entries(Vec<CheckpointEntry>),
    MovedAside(MovedAside),
}

/// Decodes a checkpoint, saying precisely what is wrong when it cannot.
fn decode(bytes: &[u8]) -> Result<Vec<CheckpointEntry>, CheckpointProblem> {
    // Fast path: a well-formed current-version file.
    if let Ok(file) = serde_json::from_slice::<FileV1>(bytes)
        && file.version == CHECKPOINT_VERSION
    {
        return Ok(file.sessions);
    }
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| CheckpointProblem::Unreadable {
            detail: e.to_string(),
        })?;
    match value.get("version") {
        Some(v) if v.as_u64() == Some(CHECKPOINT_VERSION) => {
            serde_json::from_value::<FileV1>(value)
                .map(|file| file.sessions)
                .map_err(|e| CheckpointProblem::Unreadable {
                    detail: e.to_string(),
                })
        }
        Some(v) => Err(CheckpointProblem::UnknownVersion {
            found: v.to_string(),
        }),
        None => Err(CheckpointProblem::UnknownVersion {
            found: "none".to_owned(),
        }),
    }
}

/// The id of the first session whose record cannot be encoded, for the error.
fn first_unencodable(sessions: &[CheckpointEntry]) -> String {
    sessions
        .iter()
        .find(|e| serde_json::to_vec(e).is_err())
        .map(|e| e.session.id.clone())
        .unwrap_or_default()
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn exists(path: &Path) -> io::Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if atomic::is_missing(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

fn is_read_only(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
    )
}

#[cfg(test)]
mod tests;
