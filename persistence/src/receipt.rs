//! The durable result of a finished session ([`ResultReceipt`]), what a restart
//! repeats ([`RestartSpec`]), and what the result stores answer, whatever store
//! keeps them.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Error, Mode, SpawnOptions};

/// Output characters a receipt keeps (the last ones).
pub const MAX_RECEIPT_OUTPUT_CHARS: usize = 200_000;

/// How long a receipt is kept by default (`result_ttl`).
pub const RECEIPT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long an evicted session's tombstone answers "expired on DATE".
pub const TOMBSTONE_RETENTION: Duration = Duration::from_secs(90 * 24 * 3600);

/// The receipt format version this crate writes (the JSON of a row's `receipt`,
/// and of the files of earlier releases).
pub const RECEIPT_VERSION: u64 = 1;

/// The durable result of one finished session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultReceipt {
    /// Session id, `proc_` + 12 hex characters.
    pub id: String,
    /// The command line, redacted by the caller.
    pub command: String,
    /// Working directory, if one was given.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// The container/session key of the caller.
    #[serde(default)]
    pub task_id: String,
    /// The turn or agent that owned the session.
    #[serde(default)]
    pub owner_task_id: String,
    /// Gateway session key.
    #[serde(default)]
    pub session_key: String,
    /// Wall-clock spawn time, unix seconds.
    pub started_at: f64,
    /// Wall-clock finish time, unix seconds.
    pub finished_at: f64,
    /// Exit code; `None` when no status was collected (a lost session).
    pub exit_code: Option<i32>,
    /// Completion reason: `exited`, `killed`, `lost`, `failed_start`, ...
    pub reason: String,
    /// Termination source (`process.kill`, `kill_all`, ...); empty when none.
    #[serde(default)]
    pub source: String,
    /// Whether the session asked for a completion notification.
    #[serde(default)]
    pub notify: bool,
    /// The last [`MAX_RECEIPT_OUTPUT_CHARS`] characters of output, redacted.
    pub output: String,
    /// Whether earlier output was cut (by the caller or by this store).
    #[serde(default)]
    pub output_cut: bool,
    /// Output bytes the session's log did not keep (a full disk, or the log's cap):
    /// the log and the output are incomplete. Zero (and absent) when none was lost.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytes_not_kept: u64,
    /// Processes of the session's tree alive when it completed (see
    /// [`crate::Leftover`]); their commands redacted by the caller.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leftovers: Vec<crate::Leftover>,
    /// The name the session was started with (`herd run --name`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The signal that ended the job, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Whether the job ran under a PTY.
    #[serde(default)]
    pub pty: bool,
    /// Whether lifecycle kill sweeps skipped the session.
    #[serde(default)]
    pub persist_on_release: bool,
    /// The time limit the session ran under, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_seconds: Option<u64>,
    /// The session this one was started in place of (`herd restart`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// When the session became ready (`herd run --ready`, `--ready-port`), unix
    /// seconds, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<f64>,
}

impl ResultReceipt {
    /// The receipt of session `id` that ran `command` and exited with `exit_code`
    /// at `finished_at` (unix seconds; started a second before), every other field
    /// empty or false: the one way tests and embedders build a receipt by hand (set
    /// the rest on the value), so a new field needs no edit of theirs.
    pub fn exited(id: &str, command: &str, exit_code: i32, finished_at: f64) -> ResultReceipt {
        ResultReceipt {
            id: id.to_owned(),
            command: command.to_owned(),
            cwd: None,
            task_id: String::new(),
            owner_task_id: String::new(),
            session_key: String::new(),
            started_at: finished_at - 1.0,
            finished_at,
            exit_code: Some(exit_code),
            reason: "exited".to_owned(),
            source: String::new(),
            notify: false,
            output: String::new(),
            output_cut: false,
            bytes_not_kept: 0,
            leftovers: Vec::new(),
            name: None,
            signal: None,
            pty: false,
            persist_on_release: false,
            time_limit_seconds: None,
            replaces: None,
            ready_at: None,
        }
    }
}

/// What `herd restart` repeats of a finished session, kept privately with its
/// receipt: the command *as given* (never shown: every answer shows the receipt's
/// redacted one) and the spawn's options. No environment value is kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestartSpec {
    /// The command line as the spawn gave it.
    pub command: String,
    /// Pipe or PTY.
    pub mode: Mode,
    /// Watch patterns.
    #[serde(default)]
    pub watch_patterns: Vec<String>,
    /// Heartbeat interval asked for, seconds.
    #[serde(default)]
    pub heartbeat_seconds: Option<u64>,
    /// Output characters a completion carries, as asked.
    #[serde(default)]
    pub completion_output_chars: Option<usize>,
    /// The rest: time limit, forwarded names, notify as asked, PTY size, `replaces`.
    #[serde(default)]
    pub options: SpawnOptions,
}

/// One receipt to store, with its private restart spec.
#[derive(Debug, Clone)]
pub struct Stored {
    /// The receipt (command and output already redacted).
    pub receipt: ResultReceipt,
    /// What a restart repeats; `None` when the session cannot be restarted.
    pub spawn: Option<RestartSpec>,
}

/// What a prune removed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PruneReport {
    /// Receipts older than the result TTL.
    pub n_expired: usize,
    /// Receipts evicted, oldest first, to keep within the log budget.
    pub n_over_budget: usize,
    /// Session logs removed with them.
    pub n_logs: usize,
    /// The ids evicted (they answer "expired on DATE" from now on), oldest first.
    pub evicted: Vec<String>,
    /// Whether more was due than the prune was allowed to evict.
    pub more: bool,
}

/// The default budget for the finished sessions of a home: 10 GiB.
pub const DEFAULT_LOG_BUDGET_BYTES: u64 = 10 << 30;

/// What is left of an evicted session: it answers "expired on DATE".
#[derive(Debug, Clone, PartialEq)]
pub struct Tombstone {
    /// The session id.
    pub id: String,
    /// Its name, if it had one.
    pub name: Option<String>,
    /// When it was evicted, unix seconds.
    pub expired_at: f64,
}

/// The finished sessions a `list` shows, and how many older ones it left out.
#[derive(Debug, Clone, Default)]
pub struct Listed {
    /// Oldest first; each output is at most the tail asked for (`output_cut` says
    /// whether more was stored).
    pub receipts: Vec<ResultReceipt>,
    /// Receipts finished before the window's start.
    pub n_older: usize,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Checks that `id` is `proc_` followed by one or more word characters.
pub(crate) fn validate_id(id: &str) -> Result<(), Error> {
    let valid = id.strip_prefix("proc_").is_some_and(|rest| {
        !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    });
    if valid {
        Ok(())
    } else {
        Err(Error::InvalidSessionId { id: id.to_owned() })
    }
}

/// The byte index where the last `max_chars` characters of `text` start, or
/// `None` when `text` has no more than that.
pub(crate) fn tail_start(text: &str, max_chars: usize) -> Option<usize> {
    if text.len() <= max_chars {
        return None;
    }
    let Some(n) = max_chars.checked_sub(1) else {
        return Some(text.len());
    };
    let (idx, _) = text.char_indices().rev().nth(n)?;
    (idx > 0).then_some(idx)
}
