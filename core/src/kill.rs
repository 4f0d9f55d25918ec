//! Tree kill: end a session's whole process tree, and never signal a stranger.
//!
//! [`kill_tree`] is the one entry point the registry calls. It sends SIGTERM to the
//! session's process group, waits up to the grace window for the tree to empty, then
//! sends SIGKILL to whatever is left and reports what survived.

// Interim: the registry (branch core) is the caller; removed once the bench uses it.
#![allow(dead_code, reason = "called by the registry on branch core")]

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::sys;

/// Name of the environment variable every session child carries, valued with the
/// session id, so that kill can find processes that left the tree.
pub(crate) const SESSION_TAG_ENV: &str = "HERD_SESSION";

/// What to kill: one session's process tree as the registry recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KillTarget {
    /// Pid of the session's direct child (the shell).
    pub pid: i32,
    /// Process group of the session (equal to `pid`: spawn starts a new group).
    pub pgid: i32,
    /// Start time of `pid` recorded at spawn (`sys::start_time`); `None` means the
    /// caller vouches for `pid` itself (for example it still holds the unreaped child).
    pub start_time: Option<u64>,
    /// Value of [`SESSION_TAG_ENV`] in the session's children (the session id).
    pub session_tag: String,
}

/// What a kill achieved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KillOutcome {
    /// The whole tree (group, descendants, tagged escapees) is gone.
    pub gone: bool,
    /// Pids still alive after SIGKILL and the re-probe; empty when `gone`.
    pub survivors: Vec<i32>,
    /// Number of signals delivered (group signals count once).
    pub signalled: usize,
    /// The recorded start time of `pid` did not match: the pid was reused by a
    /// stranger, and nothing was sent to it.
    pub identity_mismatch: bool,
}

/// Kills the process tree of `target`: SIGTERM, `grace`, SIGKILL.
pub(crate) async fn kill_tree(target: &KillTarget, grace: Duration) -> KillOutcome {
    let mut outcome = KillOutcome::default();
    if let Some(recorded) = target.start_time
        && let Some(now) = sys::start_time(target.pid)
        && now != recorded
    {
        outcome.identity_mismatch = true;
        outcome.gone = true;
        return outcome;
    }
    if sys::signal_group(target.pgid, Signal::SIGTERM).is_ok() {
        outcome.signalled += 1;
    }
    if !grace.is_zero() {
        let _ = tokio::time::timeout(grace, wait_group_gone(target.pgid)).await;
        if sys::signal_group(target.pgid, Signal::SIGKILL).is_ok() {
            outcome.signalled += 1;
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), wait_group_gone(target.pgid)).await;
    outcome.gone = !sys::group_exists(target.pgid);
    if !outcome.gone {
        outcome.survivors.push(target.pgid);
    }
    outcome
}

async fn wait_group_gone(pgid: i32) {
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    while sys::group_exists(pgid) {
        tick.tick().await;
    }
}
