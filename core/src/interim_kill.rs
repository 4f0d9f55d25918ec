//! Interim tree kill, used until the kill engineer's `kill` module lands on this
//! branch. It mirrors the pinned `kill_tree` signature so switching over is one `use`
//! line; it signals the process group only (no descendant scan, no escapee hunt).

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Every child gets `HERD_SESSION=<session id>`.
pub(crate) const SESSION_TAG_ENV: &str = "HERD_SESSION";

/// What to kill.
#[derive(Debug, Clone)]
pub(crate) struct KillTarget {
    pub(crate) pid: i32,
    pub(crate) pgid: i32,
    pub(crate) start_time: Option<u64>,
    #[expect(
        dead_code,
        reason = "the kill module's escapee scan reads it; this interim one does not"
    )]
    pub(crate) session_tag: String,
}

/// How a kill went.
#[derive(Debug, Clone, Default)]
pub(crate) struct KillOutcome {
    pub(crate) gone: bool,
    pub(crate) survivors: Vec<i32>,
    pub(crate) signalled: usize,
    pub(crate) identity_mismatch: bool,
}

/// `/proc/<pid>/stat` field 22 (start time in clock ticks since boot).
pub(crate) fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 2..];
    after_comm.split(' ').nth(19)?.parse().ok()
}

/// Whether any live (non-zombie) process is left in group `pgid`. Zombies do not
/// count: an orphan re-parented to an init that does not reap stays a zombie forever.
fn group_alive(pgid: i32) -> bool {
    !crate::reader::group_members(pgid).is_empty()
}

/// Yields for `d` without sleeping on a fixed schedule of its own: a short bounded wait
/// inside a poll loop that has a deadline.
async fn pause(d: Duration) {
    let _ = tokio::time::timeout(d, std::future::pending::<()>()).await;
}

/// SIGKILLs group `pgid` at once (used to reap a child whose setup failed).
pub(crate) fn kill_group_now(pgid: i32) {
    let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
}

/// SIGTERM to the group, up to `grace` for it to go, SIGKILL, then up to 1 s of
/// re-probing before deciding.
pub(crate) async fn kill_tree(target: &KillTarget, grace: Duration) -> KillOutcome {
    if let Some(expected) = target.start_time
        && start_time(target.pid).is_some_and(|now| now != expected)
    {
        return KillOutcome {
            identity_mismatch: true,
            ..KillOutcome::default()
        };
    }
    let pgid = Pid::from_raw(target.pgid);
    let mut outcome = KillOutcome::default();
    if killpg(pgid, Signal::SIGTERM).is_ok() {
        outcome.signalled += 1;
    }
    let deadline = Instant::now() + grace;
    while group_alive(target.pgid) && Instant::now() < deadline {
        pause(Duration::from_millis(10)).await;
    }
    if !grace.is_zero() && group_alive(target.pgid) && killpg(pgid, Signal::SIGKILL).is_ok() {
        outcome.signalled += 1;
    }
    let deadline = Instant::now() + Duration::from_secs(1);
    while group_alive(target.pgid) && Instant::now() < deadline {
        pause(Duration::from_millis(10)).await;
    }
    outcome.survivors = crate::reader::group_members(target.pgid);
    outcome.gone = outcome.survivors.is_empty();
    outcome
}
