//! The answers of the methods, as clients read them.
//!
//! The daemon writes these from the registry's own answer types (herd-core's, which
//! derive `Serialize` with the same field names); a test in herd-cli checks that
//! every field the daemon writes is one named here. Clients
//! read them leniently: a field a later daemon adds is ignored, and an enum value
//! this crate does not know reads as `other`.
//!
//! A field a client may rely on is required; the rest read as their default when
//! absent, as from an older daemon (which lacks, say, a spawn's `dispatch`).
//!
//! `exit_code`, `signal` and `completion_reason` are absent from `poll` while a
//! session runs and `null` in `wait`, `kill` and `list` (protocol 1 shipped both);
//! the documented form is "absent or null means none", and both read as `None`.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Whether a session still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Waiting in a queue (capability `queue`); no process yet.
    Queued,
    /// Still running.
    Running,
    /// Finished; its completion has been published.
    Exited,
    /// A far host's job known to have ended, how not yet known (a `stale` row of
    /// `list` with `host`/`all_hosts`, kept while the host does not answer).
    Ended,
    /// A value this crate does not know (a later daemon's).
    #[serde(other)]
    Other,
}

impl SessionStatus {
    /// Its name on the wire (`other` for a value this crate does not know).
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Queued => "queued",
            SessionStatus::Running => "running",
            SessionStatus::Exited => "exited",
            SessionStatus::Ended => "ended",
            SessionStatus::Other => "other",
        }
    }
}

/// What a `wait` ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WaitStatus {
    /// The session finished.
    Exited,
    /// The wait window elapsed; the session still runs.
    Timeout,
    /// The caller's interrupt fired; the session still runs.
    Interrupted,
    /// The session became ready (`wait` with `ready`); it may still run.
    Ready,
    /// A value this crate does not know.
    #[serde(other)]
    Other,
}

impl WaitStatus {
    /// Its name on the wire (`other` for a value this crate does not know).
    pub fn as_str(self) -> &'static str {
        match self {
            WaitStatus::Exited => "exited",
            WaitStatus::Timeout => "timeout",
            WaitStatus::Interrupted => "interrupted",
            WaitStatus::Ready => "ready",
            WaitStatus::Other => "other",
        }
    }
}

/// What a kill did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KillStatus {
    /// The whole tree is gone.
    Killed,
    /// The session had already finished.
    AlreadyExited,
    /// Something survived; the session stays running.
    KillIncomplete,
    /// A value this crate does not know.
    #[serde(other)]
    Other,
}

impl KillStatus {
    /// Its name on the wire (`other` for a value this crate does not know).
    pub fn as_str(self) -> &'static str {
        match self {
            KillStatus::Killed => "killed",
            KillStatus::AlreadyExited => "already_exited",
            KillStatus::KillIncomplete => "kill_incomplete",
            KillStatus::Other => "other",
        }
    }
}

/// Why a session finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CompletionReason {
    /// The child exited by itself.
    Exited,
    /// herd killed it (`termination_source` says who asked).
    Killed,
    /// A signal herd did not send ended it.
    Signaled,
    /// Its exit status could not be collected.
    Lost,
    /// It never started.
    FailedStart,
    /// A value this crate does not know.
    #[serde(other)]
    Other,
}

impl CompletionReason {
    /// Its name on the wire (`other` for a value this crate does not know).
    pub fn as_str(self) -> &'static str {
        match self {
            CompletionReason::Exited => "exited",
            CompletionReason::Killed => "killed",
            CompletionReason::Signaled => "signaled",
            CompletionReason::Lost => "lost",
            CompletionReason::FailedStart => "failed_start",
            CompletionReason::Other => "other",
        }
    }
}

/// A process of a session's tree that outlived its main process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Leftover {
    /// Its pid.
    pub pid: i32,
    /// Its command line.
    pub command: String,
}

/// CPU and memory of a session's whole tree, from its cgroup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TreeUsage {
    /// CPU time used, in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_usec: Option<u64>,
    /// Memory in use, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
}

/// `hello`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HelloAnswer {
    /// The protocol version the daemon speaks.
    pub protocol: u32,
    /// The daemon's version.
    pub daemon: String,
    /// The daemon's pid.
    pub pid: u32,
    /// The home it serves.
    pub home: String,
    /// What it serves beyond protocol 1 ([`crate::capabilities`]); absent from the
    /// first protocol-1 daemons.
    #[serde(default)]
    pub capabilities: Vec<String>,
}

impl HelloAnswer {
    /// Whether the daemon announced `capability`.
    pub fn serves(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|c| c == capability)
    }
}

/// `spawn`'s and `restart`'s answer (and `spawn` with `follow`'s `spawned` note).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SpawnAnswer {
    /// The new session's id (`NAME:proc_…` for a far host's).
    pub session_id: String,
    /// Its name, if it was given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The direct child's pid (0 while queued).
    #[serde(default)]
    pub pid: i32,
    /// The command line as given (secrets masked).
    #[serde(default)]
    pub command: String,
    /// `pipe` or `pty` (a failed PTY reads `pipe`).
    #[serde(default)]
    pub mode: String,
    /// Whether the owner gets a completion event.
    #[serde(default)]
    pub notify_on_complete: bool,
    /// Active watch patterns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watch_patterns: Vec<String>,
    /// The effective heartbeat interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_seconds: Option<u64>,
    /// Whether lifecycle sweeps spare the session.
    #[serde(default)]
    pub persist_on_release: bool,
    /// Why a PTY request runs on pipes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pty_note: Option<String>,
    /// `in_process`, `scoped` or `degraded`.
    #[serde(default)]
    pub dispatch: String,
    /// Anything else the caller should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The time limit in seconds, when one was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_seconds: Option<u64>,
    /// The session this one was started in place of (a restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// The job was queued: pid 0 until it starts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub queued: bool,
    /// The far host that runs it (capability `hosts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// `poll`'s answer: a session's state and output preview.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PollAnswer {
    /// The session.
    pub session_id: String,
    /// Its command line.
    #[serde(default)]
    pub command: String,
    /// Queued, running or exited.
    pub status: SessionStatus,
    /// The direct child's pid.
    #[serde(default)]
    pub pid: i32,
    /// Seconds since the spawn.
    #[serde(default)]
    pub uptime_seconds: u64,
    /// The last 1,000 characters, ANSI-stripped.
    #[serde(default)]
    pub output_preview: String,
    /// The exit code, once exited normally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Why it finished, once finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_reason: Option<CompletionReason>,
    /// Who killed it, if herd did (`process_kill`, `time_limit`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_source: Option<String>,
    /// The preview omits earlier output (the log has it).
    #[serde(default)]
    pub output_cut: bool,
    /// The complete log.
    #[serde(default)]
    pub log_path: PathBuf,
    /// Bytes past the log cap that were counted but not kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytes_not_kept: u64,
    /// Every byte the session produced so far.
    #[serde(default)]
    pub total_ingested: u64,
    /// Where the answer comes from when that is not the live session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The time limit in seconds, when one was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_seconds: Option<u64>,
    /// The session this one was started in place of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// `cgroup`, `subreaper` or `group`.
    #[serde(default)]
    pub containment: String,
    /// Processes of its tree that outlived its main process.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leftovers: Vec<Leftover>,
    /// CPU and memory of its tree (absent without a cgroup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TreeUsage>,
    /// When it became ready, RFC 3339 UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<String>,
}

/// `wait`'s answer (and the result that ends a `logs.follow` with `result`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WaitAnswer {
    /// The session.
    pub session_id: String,
    /// Exited, timeout, interrupted or ready.
    pub status: WaitStatus,
    /// Its command line.
    #[serde(default)]
    pub command: String,
    /// The exit code, if it exited normally.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    #[serde(default)]
    pub signal: Option<i32>,
    /// Why it finished.
    #[serde(default)]
    pub completion_reason: Option<CompletionReason>,
    /// Who killed it, if herd did.
    #[serde(default)]
    pub termination_source: Option<String>,
    /// Sized output.
    #[serde(default)]
    pub output: String,
    /// Output was cut; the log has the rest.
    #[serde(default)]
    pub output_cut: bool,
    /// The complete log.
    #[serde(default)]
    pub log_path: PathBuf,
    /// Whether the session still runs.
    #[serde(default)]
    pub process_running: bool,
    /// Clamping, timeout and interrupt explanations.
    #[serde(default)]
    pub note: Option<String>,
    /// The time limit in seconds, when one was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_seconds: Option<u64>,
    /// Output bytes the log did not keep.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytes_not_kept: u64,
    /// When it became ready, RFC 3339 UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<String>,
}

impl WaitAnswer {
    /// Whether the session exited by itself with code 0.
    pub fn succeeded(&self) -> bool {
        self.status == WaitStatus::Exited && self.exit_code == Some(0)
    }
}

/// `kill`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KillAnswer {
    /// The session.
    pub session_id: String,
    /// Killed, already exited, or incomplete.
    pub status: KillStatus,
    /// Why it finished, if it did.
    #[serde(default)]
    pub completion_reason: Option<CompletionReason>,
    /// Who asked.
    #[serde(default)]
    pub termination_source: String,
    /// The exit code, if it exited normally.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// Sized output.
    #[serde(default)]
    pub output: String,
    /// Output was cut; the log has the rest.
    #[serde(default)]
    pub output_cut: bool,
    /// Pids still alive after the kill.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub survivors: Vec<i32>,
    /// Whether the session still runs.
    #[serde(default)]
    pub process_running: bool,
    /// What went wrong, for an incomplete kill.
    #[serde(default)]
    pub error: Option<String>,
    /// Why the session's systemd scope could not be stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_stop_failed: Option<String>,
}

/// One row of `list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ListRow {
    /// The session.
    pub session_id: String,
    /// Its name, if it was given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The first 200 characters of its command line.
    #[serde(default)]
    pub command: String,
    /// Its working directory.
    #[serde(default)]
    pub cwd: PathBuf,
    /// The direct child's pid.
    #[serde(default)]
    pub pid: i32,
    /// `pty` or `pipe`.
    #[serde(default)]
    pub mode: String,
    /// The owner.
    #[serde(default)]
    pub owner_task_id: String,
    /// The container key.
    #[serde(default)]
    pub task_id: String,
    /// The host's session key.
    #[serde(default)]
    pub session_key: Option<String>,
    /// RFC 3339 UTC.
    #[serde(default)]
    pub started_at: String,
    /// Seconds since the spawn.
    #[serde(default)]
    pub uptime_seconds: u64,
    /// Queued, running or exited.
    pub status: SessionStatus,
    /// The last 200 characters.
    #[serde(default)]
    pub output_preview: String,
    /// The exit code, if exited normally.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// How long it ran, once finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<u64>,
    /// Why it finished.
    #[serde(default)]
    pub completion_reason: Option<CompletionReason>,
    /// Who killed it, if herd did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_source: Option<String>,
    /// Whether the owner gets a completion.
    #[serde(default)]
    pub notify_on_complete: bool,
    /// Whether lifecycle sweeps spare it.
    #[serde(default)]
    pub persist_on_release: bool,
    /// The time limit in seconds, when one was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_seconds: Option<u64>,
    /// The session this one was started in place of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// `cgroup`, `subreaper` or `group`.
    #[serde(default)]
    pub containment: String,
    /// Processes of its tree that outlived its main process.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leftovers: Vec<Leftover>,
    /// CPU and memory of its tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TreeUsage>,
    /// When it became ready, RFC 3339 UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<String>,
    /// The far host of a far row (`list` with `host`/`all_hosts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// A far row kept from the host's last answer (the host does not answer now).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
    /// When a far row was last seen, RFC 3339 UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

/// `list`'s answer. The daemon writes its rows from the registry's own row type
/// (and a far host's rows as that host wrote them), whose fields are [`ListRow`]'s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "ListAnswer")]
pub struct ListAnswer<R = ListRow> {
    /// The rows, oldest first.
    pub processes: Vec<R>,
    /// Rows left out by `limit` (absent when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub more: Option<u64>,
    /// Finished rows left out by `finished_since_seconds` (absent when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub older: Option<u64>,
    /// Each far host asked and how it answered (`list` with `host`/`all_hosts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<crate::daemon::HostState>>,
}

/// `lookup`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LookupAnswer {
    /// The session's full id.
    pub session_id: String,
    /// Its owner (absent from daemons older than owner checks).
    #[serde(default)]
    pub owner_task_id: Option<String>,
}

/// `log`'s answer: a page of the output, by lines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LogAnswer {
    /// The session.
    pub session_id: String,
    /// Its command line.
    #[serde(default)]
    pub command: String,
    /// Queued, running or exited.
    pub status: SessionStatus,
    /// The lines, joined with `\n` (at most 200,000 bytes).
    pub output: String,
    /// Lines in the session's log.
    #[serde(default)]
    pub total_lines: usize,
    /// Index of the first line shown.
    #[serde(default)]
    pub offset: usize,
    /// `"<n> lines"`.
    #[serde(default)]
    pub showing: String,
    /// The complete log.
    #[serde(default)]
    pub log_path: PathBuf,
    /// The last line shown is not finished yet.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last_line_open: bool,
    /// Where the answer comes from, or why the page is cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `log_chunk`'s answer: a byte range of the log, as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LogChunk {
    /// The session.
    #[serde(default)]
    pub session_id: String,
    /// The text, through the output pipeline.
    pub output: String,
    /// Where the next chunk starts.
    pub next_byte: u64,
    /// Whether more may still arrive.
    #[serde(default)]
    pub is_running: bool,
}

/// `write`'s, `submit`'s and `close`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StdinAnswer {
    /// `ok`, `already_exited` or `error`.
    pub status: String,
    /// Bytes written.
    #[serde(default)]
    pub bytes_written: Option<usize>,
    /// Detail.
    #[serde(default)]
    pub message: Option<String>,
}

/// `clean`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CleanAnswer {
    /// How many sessions were forgotten.
    pub forgotten: u64,
    /// Their ids.
    #[serde(default)]
    pub session_ids: Vec<String>,
}

/// `adopt`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AdoptAnswer {
    /// The session.
    pub session_id: String,
    /// `notified`, `child_not_notified` or `finished`.
    pub adoption: String,
}

/// `handoff`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HandoffAnswer {
    /// Always `handed_off`.
    #[serde(default)]
    pub status: String,
    /// The session.
    pub session_id: String,
    /// Its command line.
    #[serde(default)]
    pub command: String,
    /// What the new owner should know.
    #[serde(default)]
    pub note: String,
}

/// `status`'s answer: the daemon's pid, version, counts, supervisor and restore.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatusAnswer {
    /// The daemon's pid.
    pub pid: u32,
    /// Its herd version.
    #[serde(default)]
    pub version: String,
    /// The home it serves.
    #[serde(default)]
    pub home: String,
    /// Sessions running (and queued).
    pub running: u64,
    /// Finished sessions it still answers for.
    #[serde(default)]
    pub finished: u64,
    /// `shim` (jobs outlive the daemon) or `in_process`.
    #[serde(default)]
    pub supervisor: String,
    /// What holds the jobs' trees, and why (`herd doctor` explains it).
    #[serde(default)]
    pub containment: crate::daemon::ContainmentReport,
    /// Connections being served.
    #[serde(default)]
    pub connections: u64,
    /// What the start-up restore did: counts, or `{"error"}`.
    #[serde(default)]
    pub restore: crate::daemon::RestoreSummary,
    /// The daemon's own log: where, and its recent warnings.
    #[serde(default)]
    pub log: crate::daemon::DaemonLogReport,
}

/// `shutdown`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ShutdownAnswer {
    /// Always `stopping`.
    pub status: String,
    /// The daemon's pid.
    #[serde(default)]
    pub pid: u32,
    /// `killed` or `kept`.
    #[serde(default)]
    pub jobs: String,
}

/// `drain.ack`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LeaseAckAnswer {
    /// Events acknowledged.
    pub acknowledged: u64,
}

/// `drain.release`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReleaseAnswer {
    /// Events put back.
    pub released: u64,
}

/// `events.ack`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AckAnswer {
    /// Events acknowledged.
    pub acknowledged: u64,
    /// Completions among them marked delivered.
    pub completions: u64,
    /// Whether the marks were written (false on a full disk: held, written later).
    pub written: bool,
}

/// A job group (capability `queue`): `group.add`'s and `group.set`'s answer, and
/// a row of `group.list`'s.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GroupRow {
    /// Its name.
    pub name: String,
    /// Its limit of jobs at once; `null` for `default` (no limit).
    #[serde(default)]
    pub parallel: Option<u32>,
    /// Its jobs started from the queue and running.
    #[serde(default)]
    pub running: u64,
    /// Its jobs waiting.
    #[serde(default)]
    pub queued: u64,
}

/// `group.list`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GroupList {
    /// The groups, `default` first.
    pub groups: Vec<GroupRow>,
}

/// `group.rm`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GroupRemoved {
    /// The group removed.
    pub removed: String,
}

/// The answer that ends a `logs.follow` or `logs.dump`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StreamEnd {
    /// The byte to follow from next.
    pub next_byte: u64,
    /// How the session ended (`logs.follow` with `result`): `wait`'s answer, or
    /// `{"error"}` when that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
}

/// An answer this version of the protocol leaves open: an object whose fields are
/// described in the method's documentation (the streams' opening answers).
pub type Open = Value;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The first answer of a `logs.dump` or `logs.follow` stream asked with `frames`
/// (capability `logs.frames`): binary frames follow it (a 4-byte little-endian
/// length, then that many bytes of output; a zero length ends them), then a second
/// answer with the same id carries the stream's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FramesOpened {
    /// The frames' version: 1.
    pub frames: u32,
}
