//! The answer types every registry call returns. They derive `Serialize` with
//! the pinned snake_case field names, so the daemon passes them through as JSON.

use herd_hooks::Shown;

use std::path::PathBuf;

use serde::Serialize;

use crate::{KillSource, SessionId};

/// How a session is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ModeName {
    /// Pipes.
    Pipe,
    /// A PTY.
    Pty,
}

/// Whether a session still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SessionStatus {
    /// Waiting in a queue: its group is full or a dependency has not ended (or is
    /// not ready); no process yet.
    Queued,
    /// Still running.
    Running,
    /// Finished; its completion has been published.
    Exited,
}

/// Why a session finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CompletionReason {
    /// The child exited by itself.
    Exited,
    /// herd killed it.
    Killed,
    /// A signal herd did not send ended it.
    Signaled,
    /// Its exit status could not be collected.
    Lost,
    /// It never started.
    FailedStart,
}

/// What a `wait` ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WaitStatus {
    /// The session finished.
    Exited,
    /// The wait window elapsed; the session still runs.
    Timeout,
    /// The caller's interrupt fired; the session still runs.
    Interrupted,
    /// The session became ready (`wait --ready`); it may still run.
    Ready,
}

/// What a stdin operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StdinStatus {
    /// Done.
    Ok,
    /// The session had already finished.
    AlreadyExited,
    /// It failed; `message` says why.
    Error,
}

/// What holds a session's process tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Containment {
    /// The session's own cgroup: everything the job starts stays in it.
    Cgroup,
    /// The session's shim as child subreaper: every orphan of the tree is re-parented
    /// to it (no cgroup could be had; `herd doctor` says why).
    Subreaper,
    /// The process group (and session tag) alone: an in-process session.
    #[default]
    Group,
}

/// What a kill did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum KillStatus {
    /// The whole tree is gone.
    Killed,
    /// The session had already finished.
    AlreadyExited,
    /// Something survived; the session stays running.
    KillIncomplete,
}

/// The answer to a spawn.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct SpawnInfo {
    /// The new session's id.
    pub session_id: SessionId,
    /// Its name, if it was given one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The direct child's pid (also its process group).
    pub pid: i32,
    /// The command line as given.
    pub command: Shown,
    /// How the child is attached (a failed PTY reads `pipe`).
    pub mode: ModeName,
    /// Whether the owner gets a completion event.
    pub notify_on_complete: bool,
    /// Active watch patterns.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub watch_patterns: Vec<String>,
    /// The effective heartbeat interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat_seconds: Option<u64>,
    /// Whether lifecycle sweeps spare the session.
    pub persist_on_release: bool,
    /// Why a PTY request runs on pipes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pty_note: Option<String>,
    /// How the session was started: `in_process`, `scoped` (its own systemd
    /// scope, survives a restart of the service) or `degraded` (wanted a scope, runs
    /// as a direct subprocess; `note` says why).
    pub dispatch: crate::DispatchKind,
    /// Anything else the caller should know (dropped watch, clamped heartbeat, the
    /// dispatch's scope or why it degraded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The time limit in seconds, when one was set: the tree is killed then, with
    /// source `time_limit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit_seconds: Option<u64>,
    /// The session this one was started in place of (a restart).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<SessionId>,
    /// The job was queued: pid 0 until it starts; `note` says what it
    /// waits for.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub queued: bool,
}

/// CPU and memory of a session's whole tree as its cgroup counts them:
/// every process of the tree, daemonised or not, and nothing else.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct TreeUsage {
    /// CPU time used, in microseconds (v2 `cpu.stat` `usage_usec`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_usec: Option<u64>,
    /// Memory in use, in bytes (v2 `memory.current`, else the v1 memory cgroup's
    /// `memory.usage_in_bytes` of a session with limits on a hybrid host).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
}

/// The answer to a poll.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct PollAnswer {
    /// The session.
    pub session_id: SessionId,
    /// Its command line.
    pub command: Shown,
    /// Running or exited.
    pub status: SessionStatus,
    /// The direct child's pid.
    pub pid: i32,
    /// Seconds since the spawn.
    pub uptime_seconds: u64,
    /// The last 1,000 characters, ANSI-stripped.
    pub output_preview: Shown,
    /// The exit code, once exited normally.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Why it finished, once finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_reason: Option<CompletionReason>,
    /// Who killed it, if herd did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub termination_source: Option<KillSource>,
    /// The preview omits earlier output (the log has it).
    pub output_cut: bool,
    /// The complete log.
    pub log_path: PathBuf,
    /// Bytes past the log cap that were counted but not kept.
    #[serde(skip_serializing_if = "is_zero")]
    pub bytes_not_kept: u64,
    /// Every byte the session produced so far (monotonic).
    pub total_ingested: u64,
    /// Where the answer comes from when that is not the live session: a re-adopted
    /// session after a restart (earlier output from its log file) or a result receipt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The time limit in seconds, when one was set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit_seconds: Option<u64>,
    /// The session this one was started in place of (a restart).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<SessionId>,
    /// What holds its process tree.
    pub containment: Containment,
    /// Processes of its tree that outlived its main process and are still held by
    /// the session (`herd kill` ends them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub leftovers: Vec<herd_persistence::Leftover>,
    /// CPU and memory of its whole tree, from its cgroup (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<TreeUsage>,
    /// When it became ready (`--ready`, `--ready-port`), RFC 3339 UTC; absent until
    /// it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<String>,
}

/// A page of the output, by lines.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct LogAnswer {
    /// The session.
    pub session_id: SessionId,
    /// Its command line.
    pub command: Shown,
    /// Running or exited.
    pub status: SessionStatus,
    /// The lines, joined with `\n`; at most 200,000 bytes of the log, a longer line
    /// cut where it says `[… line cut to fit the page …]` (the note says so).
    pub output: Shown,
    /// Lines in the session's log file: all of its output. When the note says the log
    /// cannot serve the page, lines in the in-memory tail (or receipt) instead.
    pub total_lines: usize,
    /// Index of the first line shown (0 is the first line of the output).
    pub offset: usize,
    /// `"<n> lines"`.
    pub showing: String,
    /// The complete log.
    pub log_path: PathBuf,
    /// The page ends with the last line of a running session, and that line is not
    /// finished yet (a prompt, or a line still being written; part of it may be held
    /// back as it may be the start of a secret): it is counted in `total_lines` and will grow. Absent when false.
    #[serde(skip_serializing_if = "is_false")]
    pub last_line_open: bool,
    /// Where the answer comes from when that is not the live session (a re-adopted
    /// session after a restart, or a result receipt), a line cut to fit the page, or
    /// why the page covers only the tail of the output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A byte range of the log file, as text.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct LogChunk {
    /// The session.
    pub session_id: SessionId,
    /// The text, through the output pipeline.
    pub output: Shown,
    /// Where the next chunk starts.
    pub next_byte: u64,
    /// Whether more may still arrive.
    pub is_running: bool,
}

/// The answer to a wait.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct WaitAnswer {
    /// The session.
    pub session_id: SessionId,
    /// Exited, timeout or interrupted.
    pub status: WaitStatus,
    /// Its command line.
    pub command: Shown,
    /// The exit code, if it exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// Why it finished.
    pub completion_reason: Option<CompletionReason>,
    /// Who killed it, if herd did.
    pub termination_source: Option<KillSource>,
    /// Sized output.
    pub output: Shown,
    /// Output was cut; the log has the rest.
    pub output_cut: bool,
    /// The complete log.
    pub log_path: PathBuf,
    /// Whether the session still runs.
    pub process_running: bool,
    /// Clamping, timeout and interrupt explanations.
    pub note: Option<String>,
    /// The time limit in seconds, when one was set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit_seconds: Option<u64>,
    /// Output bytes the log did not keep (a full disk, or `log_cap_bytes`): the
    /// output shown is incomplete. Absent when nothing was lost.
    #[serde(skip_serializing_if = "is_zero")]
    pub bytes_not_kept: u64,
    /// When it became ready (`--ready`, `--ready-port`), RFC 3339 UTC; absent until
    /// it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<String>,
}

/// The answer to write, submit or close.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct StdinAnswer {
    /// What happened.
    pub status: StdinStatus,
    /// Bytes written.
    pub bytes_written: Option<usize>,
    /// Detail.
    pub message: Option<String>,
}

/// The answer to a kill.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct KillAnswer {
    /// The session.
    pub session_id: SessionId,
    /// Killed, already exited, or incomplete.
    pub status: KillStatus,
    /// Why it finished, if it did.
    pub completion_reason: Option<CompletionReason>,
    /// Who asked.
    pub termination_source: KillSource,
    /// The exit code, if it exited normally.
    pub exit_code: Option<i32>,
    /// Sized output.
    pub output: Shown,
    /// Output was cut; the log has the rest.
    pub output_cut: bool,
    /// Pids still alive after the kill.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub survivors: Vec<i32>,
    /// Whether the session still runs.
    pub process_running: bool,
    /// What went wrong, for an incomplete kill.
    pub error: Option<String>,
    /// Why the session's systemd scope could not be stopped after its tree was killed;
    /// the status is then `kill_incomplete`, as processes that left the
    /// process group may still run in the scope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope_stop_failed: Option<String>,
}

/// One row of a list.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ListRow {
    /// The session.
    pub session_id: SessionId,
    /// Its name, if it was given one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The first 200 characters of its command line.
    pub command: Shown,
    /// Its working directory.
    pub cwd: PathBuf,
    /// The direct child's pid.
    pub pid: i32,
    /// How the child is attached (`pty` or `pipe`).
    pub mode: ModeName,
    /// The owner.
    pub owner_task_id: String,
    /// The container key.
    pub task_id: String,
    /// The host's session key.
    pub session_key: Option<String>,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// Seconds since the spawn.
    pub uptime_seconds: u64,
    /// Running or exited.
    pub status: SessionStatus,
    /// The last 200 characters.
    pub output_preview: Shown,
    /// The exit code, if exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// How long it ran, once finished (its age stops counting).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<u64>,
    /// Why it finished.
    pub completion_reason: Option<CompletionReason>,
    /// Who killed it, if herd did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub termination_source: Option<KillSource>,
    /// Whether the owner gets a completion.
    pub notify_on_complete: bool,
    /// Whether lifecycle sweeps spare it.
    pub persist_on_release: bool,
    /// The time limit in seconds, when one was set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit_seconds: Option<u64>,
    /// The session this one was started in place of (a restart).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<SessionId>,
    /// What holds its process tree.
    pub containment: Containment,
    /// Processes of its tree that outlived its main process and are still held by
    /// the session (`herd kill` ends them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub leftovers: Vec<herd_persistence::Leftover>,
    /// CPU and memory of its whole tree, from its cgroup (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<TreeUsage>,
    /// When it became ready (`--ready`, `--ready-port`), RFC 3339 UTC; absent until
    /// it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}
