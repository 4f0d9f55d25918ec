//! The kills the shim carries out itself, as states of its poll loop: a
//! kill request of the daemon, the time limit, an operator's SIGTERM to the shim, and
//! `--kill-leftovers` once the job's main process is done. Each is SIGTERM (and
//! SIGCONT) to the whole tree, the grace, then SIGKILL (`cgroup.kill` in a cgroup),
//! then up to [`SURVIVOR_PROBE`] for the tree to be empty. No runtime, no blocking:
//! the loop calls [`Shim::step_kill`] on every turn and waits at most until its next
//! step, so the kill completes whether or not a daemon is attached.
//!
//! Then the lingering: a job whose main process is done while other processes of its
//! tree live on (leftovers) is concluded (the exit record lists them), and the shim
//! stays, holding them, until they are gone or a kill (SIGTERM to the shim, the time
//! limit) ends them; the session's cgroup is removed once empty.

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime};

use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::signal::Signal;
use nix::sys::signalfd::SignalFd;
use std::os::fd::AsFd;

use super::{Shim, timespec};

/// How long after SIGKILL the tree may take to be empty before what is left counts
/// as survivors.
const SURVIVOR_PROBE: Duration = Duration::from_secs(1);
/// How often a kill looks again at the tree (new members get SIGTERM; an empty tree
/// ends the wait) in a cgroup, where a look is one small read.
const CGROUP_RECHECK: Duration = Duration::from_millis(10);
/// The same under the subreaper fallback, where a look is a process-table scan.
const TABLE_RECHECK: Duration = Duration::from_millis(50);
/// The longest a lingering shim sleeps before it looks at its leftovers again (their
/// exits wake it at once through SIGCHLD; this is the backstop).
const LINGER_RECHECK: Duration = Duration::from_secs(5);

/// A kill under way.
#[derive(Debug)]
pub(super) struct Killing {
    /// Members that had SIGTERM.
    term_sent: HashSet<(i32, u64)>,
    phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// SIGTERM sent; SIGKILL at `until` unless the tree is empty before.
    Grace { until: Instant },
    /// SIGKILL sent; what is alive at `until` survived.
    Probe { until: Instant },
    /// The tree is empty, or the probe ran out.
    Done,
}

impl Shim {
    /// Starts a kill of the whole tree; `source` goes to the exit record as
    /// `killed_by` (`None` for leftovers after an exit of its own). A kill already
    /// under way keeps its course and its source.
    pub(super) fn begin_kill(&mut self, source: Option<String>) {
        self.kill_requested = true;
        if self.killing.is_some() {
            return;
        }
        if self.killed_by.is_none() {
            self.killed_by = source;
        }
        let mut term_sent = HashSet::new();
        let (tag, floor) = (self.session_id.clone(), self.start_time.unwrap_or(0));
        self.hold.terminate(&tag, floor, true, &mut term_sent);
        let phase = if self.kill_grace.is_zero() {
            self.hold.kill(&tag, floor, true);
            Phase::Probe {
                until: Instant::now() + SURVIVOR_PROBE,
            }
        } else {
            Phase::Grace {
                until: Instant::now() + self.kill_grace,
            }
        };
        tracing::debug!(source = ?self.killed_by, "the shim kills the tree");
        self.killing = Some(Killing { term_sent, phase });
    }

    /// Takes the kill's next step when it is due; returns how long until the one
    /// after, `None` when no kill is under way or it is done.
    pub(super) fn step_kill(&mut self) -> Option<Duration> {
        let tag = self.session_id.clone();
        let floor = self.start_time.unwrap_or(0);
        let killing = self.killing.as_mut()?;
        if killing.phase == Phase::Done {
            return None;
        }
        if self.hold.is_empty(&tag, floor) {
            killing.phase = Phase::Done;
            return None;
        }
        let now = Instant::now();
        killing.phase = match killing.phase {
            Phase::Grace { until } if now >= until => {
                self.hold.kill(&tag, floor, true);
                Phase::Probe {
                    until: now + SURVIVOR_PROBE,
                }
            }
            Phase::Grace { until } => {
                self.hold
                    .terminate(&tag, floor, false, &mut killing.term_sent);
                Phase::Grace { until }
            }
            Phase::Probe { until } if now >= until => {
                tracing::warn!("processes of the tree survived SIGKILL");
                Phase::Done
            }
            Phase::Probe { until } => {
                // Idempotent, and reaches what was forked meanwhile.
                self.hold.kill(&tag, floor, false);
                Phase::Probe { until }
            }
            Phase::Done => Phase::Done,
        };
        let recheck = if self.hold.cgroup().is_some() {
            CGROUP_RECHECK
        } else {
            TABLE_RECHECK
        };
        match killing.phase {
            Phase::Grace { until } | Phase::Probe { until } => {
                Some(until.saturating_duration_since(now).min(recheck))
            }
            Phase::Done => None,
        }
    }

    /// After the conclusion: holds the leftovers until they are gone or killed, then
    /// removes the session's cgroup.
    pub(super) fn linger(&mut self, signals: &SignalFd) {
        let tag = self.session_id.clone();
        let floor = self.start_time.unwrap_or(0);
        loop {
            self.reap();
            let kill_wait = self.step_kill();
            if kill_wait.is_none() && (self.hold.is_empty(&tag, floor) || self.killing.is_some()) {
                break;
            }
            let mut wait = kill_wait.unwrap_or(LINGER_RECHECK);
            if let Some(deadline) = self.deadline {
                match deadline.duration_since(SystemTime::now()) {
                    Ok(left) if !left.is_zero() => wait = wait.min(left),
                    _ => {
                        self.deadline = None;
                        self.begin_kill(Some("time_limit".to_owned()));
                        continue;
                    }
                }
            }
            let mut fds = [PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
            match ppoll(&mut fds, Some(timespec(wait)), None) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(error) => {
                    tracing::error!(%error, "poll failed; the supervisor stops holding the leftovers");
                    break;
                }
            }
            if self.read_signals(signals) {
                self.begin_kill(Some("process_kill".to_owned()));
            }
        }
        self.release_hold();
    }

    /// Reads the pending signals; returns whether SIGTERM was among them (a kill
    /// request of the daemon, or an operator's).
    pub(super) fn read_signals(&mut self, signals: &SignalFd) -> bool {
        let mut term = false;
        while let Ok(Some(info)) = signals.read_signal() {
            if info.ssi_signo == Signal::SIGTERM as u32 {
                term = true;
            }
        }
        self.reap();
        term
    }

    /// Removes the session's cgroup; a cgroup whose last process is still on its way
    /// out is retried for a moment.
    pub(super) fn release_hold(&mut self) {
        self.release_cgroup();
        self.limits.remove();
    }

    fn release_cgroup(&mut self) {
        let Some(cgroup) = self.hold.cgroup().cloned() else {
            return;
        };
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            match cgroup.remove() {
                Ok(()) => return,
                Err(error) if crate::sys::cgroup::is_busy(&error) && Instant::now() < deadline => {
                    self.reap();
                    let _ = ppoll(&mut [], Some(timespec(Duration::from_millis(5))), None);
                }
                Err(error) => {
                    tracing::warn!(%error, path = %cgroup.path().display(), "session cgroup not removed");
                    return;
                }
            }
        }
    }
}
