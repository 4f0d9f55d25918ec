//! One session's record: identity, ownership, output tail and lifecycle state.
//!
//! Immutable facts (id, command, pid, paths) are plain fields. Output lives in the
//! `tail` lock, written by the session's reader; lifecycle and ownership live in the
//! `state` lock. The registry's table lock is always taken before a session lock,
//! never after.

use crate::lock_order::Ordered;
use crate::lock_order::{Mutex, rank};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;
use tokio::sync::watch;

use crate::answers::{CompletionReason, ModeName, SessionStatus};
use crate::output::Tail;
use crate::spawn::MasterFd;
use crate::text;
use crate::{KillSource, SessionId};

/// `decoded` without its ANSI sequences (no copy when it has none).
fn without_ansi(decoded: String) -> String {
    if decoded.contains('\u{1b}') {
        text::strip_ansi(&decoded)
    } else {
        decoded
    }
}

/// Whether `text`'s last `n_chars` characters, the line a growing session holds
/// back, and the redaction context before them ([`herd_hooks::LINE_CONTEXT_BYTES`])
/// all begin after its start: a window of them reads nothing before `text`.
fn reaches_back(text: &str, n_chars: usize) -> bool {
    let window_idx = match n_chars.checked_sub(1) {
        None => text.len(),
        Some(back) => match text.char_indices().rev().nth(back) {
            Some((idx, _)) => idx,
            None => return false,
        },
    };
    let last_line_idx = memchr::memrchr2(b'\n', b'\r', text.as_bytes()).map_or(0, |i| i + 1);
    window_idx.min(last_line_idx) > herd_hooks::LINE_CONTEXT_BYTES
}

/// The direct child's exit as collected from the OS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExitInfo {
    pub(crate) code: Option<i32>,
    pub(crate) signal: Option<i32>,
}

/// How a finished session ended.
#[derive(Debug, Clone)]
pub(crate) struct Finished {
    pub(crate) at: SystemTime,
    pub(crate) reason: CompletionReason,
    pub(crate) source: Option<KillSource>,
    pub(crate) exit: Option<ExitInfo>,
}

/// Where writes to the session's input go.
#[derive(Debug, Clone)]
pub(crate) enum Stdin {
    Pipe(Arc<pipe::Sender>),
    Pty(Arc<AsyncFd<MasterFd>>),
    /// Through the session's supervisor process, which holds the pipe or PTY.
    Shim(Arc<dyn ShimInput>),
}

/// One request to a supervised session's input.
#[derive(Debug)]
pub(crate) enum Input {
    /// Bytes for the job's stdin or keyboard.
    Bytes(Vec<u8>),
    /// End of input: the pipe closes, or EOT on a PTY.
    Close,
    /// A new PTY window size.
    Resize { rows: u16, cols: u16 },
}

/// The input side of a session's supervisor, as the session holds it: the shim
/// link implements it (in `registry::stdin`), so a session record knows nothing of
/// the shim's protocol.
pub(crate) trait ShimInput: std::fmt::Debug + Send + Sync {
    /// Sends `input` and waits for the supervisor's answer, at most `timeout`.
    fn send_input(
        &self,
        input: Input,
        timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + '_>>;

    /// Tells the supervisor whether a real terminal is attached, without
    /// waiting: it then leaves the PTY's queries to that terminal, or answers them.
    fn set_terminal(&self, attached: bool);
}

/// Mutable ownership and lifecycle state.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) task_id: String,
    pub(crate) owner_task_id: String,
    pub(crate) session_key: Option<String>,
    pub(crate) handoff_note: Option<String>,
    /// The direct child's exit, once collected (the reader may still be draining).
    pub(crate) exit: Option<ExitInfo>,
    /// Set by the one choke point; `Some` means the completion was published.
    pub(crate) finished: Option<Finished>,
    /// A kill in progress or done; the choke point then reads "killed".
    pub(crate) kill_source: Option<KillSource>,
    /// Released (set to `None`) when the session finishes or stdin is closed.
    pub(crate) stdin: Option<Stdin>,
    /// What holds its process tree.
    pub(crate) containment: crate::answers::Containment,
    /// Processes of its tree alive when it finished, held by its shim.
    pub(crate) leftovers: Vec<herd_persistence::Leftover>,
    /// When the session became ready (`--ready`, `--ready-port`), set once by
    /// `Inner::mark_ready` after its store commit; survives a restart.
    pub(crate) ready_at: Option<SystemTime>,
    /// Runs started so far under a restart policy, from the separator lines
    /// of its output; 0 without a policy.
    pub(crate) runs: u32,
    /// Its supervisor lives but this daemon has not reached it yet (restored
    /// before the supervisor bound its socket): input waits for the attach.
    pub(crate) reaching: bool,
}

/// One session.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) id: SessionId,
    pub(crate) command: String,
    pub(crate) cwd: PathBuf,
    /// The direct child's pid.
    pub(crate) pid: i32,
    /// Process group of the session.
    ///
    /// Invariant: equals the pid of the shell we spawned. Spawn always starts a new
    /// group (a new session under a PTY), and tree kill signals the group, never the
    /// bare pid, so grandchildren are reached too.
    pub(crate) pgid: i32,
    pub(crate) start_time: Option<u64>,
    pub(crate) mode: ModeName,
    pub(crate) started_at: SystemTime,
    pub(crate) started: Instant,
    pub(crate) log_path: PathBuf,
    /// Whether the owner gets the completion. Turned on later when watching is
    /// disabled, a foreground run is adopted or a child hands the session
    /// to its parent; written under the table lock so the choke point, which
    /// reads it under the same lock, sees every change made while the session ran.
    pub(crate) notify: AtomicBool,
    /// Somebody read the finished session's result (wait, poll, log or kill); a
    /// child's teardown lists the unread ones.
    pub(crate) read: AtomicBool,
    pub(crate) persist_on_release: bool,
    /// The systemd scope the session was dispatched into; a kill stops it after
    /// the tree kill, to reach descendants that left the process group.
    pub(crate) scope: Option<Scope>,
    /// The supervisor process (shim) the job runs under; `None` for an in-process
    /// session.
    pub(crate) shim: Option<herd_persistence::ShimRef>,
    pub(crate) completion_chars: usize,
    /// The name it was started with, unique among its owner's running sessions;
    /// found wherever an id is.
    pub(crate) name: Option<String>,
    /// When the job is killed as `time_limit`, if the spawn set a limit.
    pub(crate) time_limit: Option<TimeLimit>,
    /// What a restart repeats that the fields above do not say.
    pub(crate) origin: Origin,
    pub(crate) tail: Mutex<Tail, { rank::TAIL }>,
    pub(crate) state: Mutex<State, { rank::SESSION }>,
    /// Flips to true once, after the completion is published.
    pub(crate) done: watch::Sender<bool>,
    /// Flips to true when a kill asks the reader to stop at the child's exit.
    pub(crate) kill_requested: watch::Sender<bool>,
    /// How many real terminals are attached (`herd attach`): while any is, the PTY's
    /// queries go to them instead of being answered. A leaf lock: taken with no
    /// other held, and nothing is done under it but telling the supervisor.
    pub(crate) terminals: Mutex<usize, { rank::TERMINALS }>,
    /// Where its tree's usage is read from, and the last sample (`list`'s rows).
    pub(crate) usage: crate::sys::usage::UsageCache,
    /// The head of the command as a list row shows it (redacted), made once: a
    /// command's redaction depends on the command alone, and a list of thousands
    /// of rows must not run the redactor over every row's command each time.
    pub(crate) command_head: std::sync::OnceLock<herd_hooks::Shown>,
}

/// A spawn's time limit: how long it was given and the wall-clock instant it ends.
///
/// The deadline is wall-clock time, not a monotonic instant, because it must mean the
/// same thing to the shim, to the checkpoint and to the next registry after a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeLimit {
    pub(crate) limit: std::time::Duration,
    pub(crate) deadline: SystemTime,
}

impl TimeLimit {
    /// The deadline in unix milliseconds, as the checkpoint and the shim carry it.
    pub(crate) fn deadline_unix_ms(&self) -> u64 {
        self.deadline
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    /// A deadline read back from unix milliseconds.
    pub(crate) fn from_record(limit_seconds: u64, deadline_unix_ms: u64) -> TimeLimit {
        TimeLimit {
            limit: std::time::Duration::from_secs(limit_seconds),
            deadline: std::time::UNIX_EPOCH + std::time::Duration::from_millis(deadline_unix_ms),
        }
    }
}

/// What `herd restart` repeats beyond the session's own fields: the options as the
/// spawn asked for them (notify may have been turned on since, a PTY may have fallen
/// back to pipes).
///
/// Invariant: holds environment names only, never values; a restart takes the values
/// from its own caller's environment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Origin {
    pub(crate) notify: bool,
    pub(crate) watch: Vec<String>,
    pub(crate) heartbeat_seconds: Option<u64>,
    pub(crate) completion_output_chars: Option<usize>,
    pub(crate) forward_env: Vec<String>,
    /// Names the spawn set with explicit values; a restart does not repeat them.
    pub(crate) env_names: Vec<String>,
    pub(crate) pty: Option<(u16, u16)>,
    /// `command` is the redacted text (a restored session whose command held a
    /// secret), not what ran: a restart cannot repeat it.
    pub(crate) command_redacted: bool,
    pub(crate) replaces: Option<SessionId>,
    /// `--kill-leftovers` as the spawn gave it.
    pub(crate) kill_leftovers: Option<bool>,
    /// `--memory`, `--cpus`, `--pids` as the spawn gave them.
    pub(crate) limits: crate::Limits,
    /// `--ready` as the spawn gave it.
    pub(crate) ready: Option<String>,
    /// `--ready-port` as the spawn gave it.
    pub(crate) ready_port: Option<u16>,
    /// `--restart` as the spawn gave it.
    pub(crate) restart: Option<crate::config::RestartPolicy>,
}

/// A worker scope a session runs in.
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    /// `herd-worker-<id>.scope`.
    pub(crate) unit: String,
    /// The spawn environment with the bus overrides: what `systemctl --user stop` needs.
    pub(crate) env: std::collections::HashMap<String, String>,
}

impl Session {
    /// The lifecycle state. A poisoned lock still holds consistent data (every
    /// critical section only assigns fields), so poisoning is ignored.
    pub(crate) fn state(&self) -> Ordered<'_, State> {
        self.state.acquire()
    }

    /// The output tail; poisoning is ignored as for `state`.
    pub(crate) fn tail(&self) -> Ordered<'_, Tail> {
        self.tail.acquire()
    }

    /// Running until the choke point published the completion.
    pub(crate) fn status(&self) -> SessionStatus {
        if self.state().finished.is_some() {
            SessionStatus::Exited
        } else {
            SessionStatus::Running
        }
    }

    /// The tail as text, ANSI-stripped, whether earlier output is not in it, and
    /// whether a private-key block is open where it starts.
    pub(crate) fn text(&self) -> (String, bool, bool) {
        let running = self.state().finished.is_none();
        let (text, cut, from) = self.tail_text(running);
        let key_open = self.key_open_at(&text, cut, from);
        (text, cut, key_open)
    }

    /// Whether a private-key block is open where `text` (the tail from byte `from`
    /// of the output, `cut` when earlier output exists) starts, by the one rule
    /// every route asks ([`herd_hooks::key_open_in_log`]): the log, which holds what
    /// came before, is asked only when the tail's first line could be key body, and
    /// a log cut by its cap says what it can.
    pub(crate) fn key_open_at(&self, text: &str, cut: bool, from: u64) -> bool {
        if !cut || from == 0 || !herd_hooks::key_state_matters(text) {
            return false;
        }
        // The index kept at ingest answers by a lookup; the log only for output
        // it did not see decided (from before a restart).
        if let Some(open) = self.tail().key_open_at(from) {
            return open;
        }
        let log = std::fs::File::open(&self.log_path).ok();
        herd_hooks::key_open_in_log(log.as_ref(), from, text)
    }

    /// The session's key index as routes that read the log ask it.
    pub(crate) fn key_lookup(&self) -> impl Fn(u64) -> Option<bool> + '_ {
        |at| self.tail().key_open_at(at)
    }

    /// The tail as text at end of stream: an incomplete trailing character becomes
    /// U+FFFD instead of being held; and the offset of its first byte in the
    /// session's output (where the log holds what came before it).
    pub(crate) fn text_final(&self) -> (String, bool, u64) {
        self.tail_text(false)
    }

    /// The tail as text. A tail that lost its start begins at its first whole line
    /// (when one starts within [`herd_hooks::LINE_CONTEXT_BYTES`]): the cut line's
    /// remains could be the end of a secret whose start is gone, which no redactor
    /// can recognise.
    fn tail_text(&self, hold_incomplete: bool) -> (String, bool, u64) {
        let tail = self.tail();
        let (bytes, cut) = tail.view();
        let held_from = tail.total_ingested() - bytes.len() as u64;
        let start = if cut {
            let reach = bytes.len().min(herd_hooks::LINE_CONTEXT_BYTES);
            memchr::memchr(b'\n', &bytes[..reach]).map_or(0, |idx| idx + 1)
        } else {
            0
        };
        let decoded = text::decode_tail(&bytes[start..], cut && start == 0, hold_incomplete);
        (without_ansi(decoded), cut, held_from + start as u64)
    }

    /// [`Session::text`] for a window of the last `n_chars` characters only (a list
    /// row's preview): the text and whether a private-key block is open where it
    /// starts. It starts at a line start far enough back that the window, the line
    /// a growing session's output holds back, and the context the window's
    /// redaction reads before them ([`herd_hooks::LINE_CONTEXT_BYTES`]) all lie in
    /// it, so the window shows exactly as over the whole tail; only the tail's end
    /// is copied and decoded. The whole tail when no such start is found.
    pub(crate) fn text_for_last(&self, n_chars: usize) -> (String, bool) {
        let running = self.state().finished.is_none();
        // Room for escape sequences the text loses: a tail dense with them is
        // read again from further back.
        let mut reach = 2 * herd_hooks::LINE_CONTEXT_BYTES + 8 * n_chars;
        loop {
            let tail = self.tail();
            let (bytes, _) = tail.view();
            let Some(at) = bytes.len().checked_sub(reach) else {
                break;
            };
            let Some(line_idx) = memchr::memchr(b'\n', &bytes[at..]) else {
                break;
            };
            let start = at + line_idx + 1;
            let from = tail.total_ingested() - (bytes.len() - start) as u64;
            let text = without_ansi(text::decode_tail(&bytes[start..], false, running));
            drop(tail);
            if reaches_back(&text, n_chars) {
                let key_open = self.key_open_at(&text, true, from);
                return (text, key_open);
            }
            reach = reach.saturating_mul(2);
        }
        let (text, _, key_open) = self.text();
        (text, key_open)
    }

    /// Whether the owner gets the completion.
    pub(crate) fn is_notify(&self) -> bool {
        self.notify.load(Ordering::SeqCst)
    }

    /// Turns notify-on-complete on or off.
    pub(crate) fn set_notify(&self, on: bool) {
        self.notify.store(on, Ordering::SeqCst);
    }

    /// Records that the finished result was read.
    pub(crate) fn mark_read(&self) {
        if self.state().finished.is_some() {
            self.read.store(true, Ordering::SeqCst);
        }
    }

    /// Whether the finished result was read.
    pub(crate) fn is_read(&self) -> bool {
        self.read.load(Ordering::SeqCst)
    }

    /// Whole seconds since the spawn.
    pub(crate) fn uptime_seconds(&self) -> u64 {
        self.started.elapsed().as_secs()
    }
}

#[cfg(test)]
mod tests;
