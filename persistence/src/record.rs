//! The records of running sessions, whatever store keeps them: a session as a
//! restore needs it ([`SessionRecord`]), the process that wrote it ([`Writer`]), a
//! kill begun ([`KillIntent`]) and what a load found ([`Loaded`]).

use std::fmt;
use std::fs;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::Error;

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
    /// When the session became ready, unix seconds, if it did (never part of a
    /// checkpoint file; a column of its own in the store).
    #[serde(skip)]
    pub ready_at: Option<f64>,
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

/// What [`CheckpointStore::load`](crate::CheckpointStore::load) found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Loaded {
    /// Every checkpointed session of every writer, in file order.
    pub entries: Vec<CheckpointEntry>,
    /// Set when the file was unusable and moved aside (then `entries` is empty).
    pub moved_aside: Option<MovedAside>,
}

/// Refuses a record the store must not hold.
pub(crate) fn validate(record: &SessionRecord) -> Result<(), Error> {
    crate::receipt::validate_id(&record.id)?;
    if !record.started_at.is_finite() {
        return Err(Error::InvalidRecord {
            session_id: record.id.clone(),
            reason: "started_at is not a finite number",
        });
    }
    Ok(())
}
