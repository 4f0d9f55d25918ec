//! The shim's side of the session machine (`crate::machine`): telling it what the loop
//! observed and carrying out what it answers. The kills the shim carries out itself
//! (a kill request of the daemon, the time limit, an operator's SIGTERM to the shim,
//! `--kill-leftovers` once the job's main process is done) are the machine's course:
//! SIGTERM (and SIGCONT) to the whole tree, the grace, then SIGKILL (`cgroup.kill` in a
//! cgroup), then up to the survivor probe for the tree to be empty. No runtime, no
//! blocking: the loop tells the machine the time on every turn and waits at most until
//! its next step, so the kill completes whether or not a daemon is attached.
//!
//! Then the lingering: a job whose main process is done while other processes of its
//! tree live on (leftovers) is concluded (the exit record lists them), and the shim
//! stays, holding them, until they are gone or a kill (SIGTERM to the shim, the time
//! limit) ends them; the session's cgroup is removed once empty.

use std::time::{Duration, Instant, SystemTime};

use nix::poll::{PollFd, PollFlags};
use nix::sys::signal::Signal;
use std::os::fd::AsFd;

use super::{Shim, Spec};
use crate::config::KillSource;
use crate::machine::{Action, Event, KillRules, Now, Rules};
use crate::sys::poll::wait_ready;
use crate::sys::signals::SignalWatch;

/// How often a kill looks again at the tree (new members get SIGTERM; an empty tree
/// ends the wait) in a cgroup, where a look is one small read.
const CGROUP_RECHECK: Duration = Duration::from_millis(10);
/// The same under the subreaper fallback, where a look is a process-table scan.
const TABLE_RECHECK: Duration = Duration::from_millis(50);
/// The longest a lingering shim sleeps before it looks at its leftovers again (their
/// exits wake it at once through SIGCHLD; this is the backstop).
const LINGER_RECHECK: Duration = Duration::from_secs(5);

/// The machine's rules for the session `spec` describes, its tree held in a cgroup
/// (`in_cgroup`) or by the shim as subreaper.
pub(super) fn rules(spec: &Spec, in_cgroup: bool) -> Rules {
    Rules {
        idle_drain: Duration::from_millis(spec.idle_drain_ms),
        deadline: spec
            .deadline_unix_ms
            .map(|ms| SystemTime::UNIX_EPOCH + Duration::from_millis(ms)),
        kill: Some(KillRules {
            grace: Duration::from_millis(spec.kill_grace_ms),
            recheck: if in_cgroup {
                CGROUP_RECHECK
            } else {
                TABLE_RECHECK
            },
        }),
        kill_leftovers: spec.kill_leftovers,
        linger_recheck: LINGER_RECHECK,
    }
}

impl Shim {
    /// Tells the machine what was observed since the last time, then `event`, and
    /// carries out its answers (answering its questions about the tree at once).
    pub(super) fn drive(&mut self, event: Event<nix::sys::wait::WaitStatus>) {
        let mut now = Now::read();
        let seen = std::mem::take(&mut self.seen);
        let mut queue = Vec::with_capacity(4);
        if seen.output {
            queue.push(Event::Output);
        }
        if let Some(status) = seen.exit {
            queue.push(Event::Exited(status));
        }
        if seen.eof {
            queue.push(Event::OutputEnded { eof: true });
        }
        queue.push(event);
        queue.reverse();
        while let Some(event) = queue.pop() {
            if let Event::Tree { .. } = event {
                // The time after the look (a process-table scan takes time of its own).
                now = Now::read();
            }
            for action in self.machine.handle(now, event) {
                if let Some(answer) = self.act(action) {
                    queue.push(answer);
                }
            }
        }
    }

    /// Carries out one action; returns the answer the machine asked for, if any.
    fn act(
        &mut self,
        action: Action<nix::sys::wait::WaitStatus>,
    ) -> Option<Event<nix::sys::wait::WaitStatus>> {
        let (tag, floor) = (self.session_id.clone(), self.start_time.unwrap_or(0));
        match action {
            Action::Terminate { first } => {
                if first {
                    tracing::debug!("the shim kills the tree");
                    self.term_sent.clear();
                }
                self.hold.terminate(&tag, floor, first, &mut self.term_sent);
            }
            Action::Escalate { first } => self.hold.kill(&tag, floor, first),
            Action::LookAtTree => {
                return Some(Event::Tree {
                    empty: self.hold.is_empty(&tag, floor),
                });
            }
            Action::DrainNow => self.drain_now(),
            Action::Finish {
                exit, killed_by, ..
            } => {
                if exit.is_some() {
                    self.exit = exit;
                }
                self.killed_by = killed_by;
            }
            Action::Survivors => tracing::warn!("processes of the tree survived SIGKILL"),
            Action::Release => {}
            // The shim's machine carries its kills itself (`Rules::kill` is set), so it
            // never asks someone else for one.
            Action::RequestKill { source } => {
                tracing::debug!(
                    source = source.as_str(),
                    "kill request ignored: the shim carries its kills"
                );
            }
        }
        None
    }

    /// A kill requested by the daemon (`source` is its name of the kill's source).
    pub(super) fn kill_requested(&mut self, source: Option<String>) {
        let source = source.as_deref().and_then(KillSource::from_name);
        self.drive(Event::Kill(source));
    }

    /// After the conclusion: holds the leftovers until they are gone or killed, then
    /// removes the session's cgroup.
    pub(super) fn linger(&mut self, signals: &SignalWatch) {
        loop {
            self.reap();
            // Whatever woke the loop (a leftover's exit) may have emptied the tree.
            self.drive(Event::Woken);
            if self.machine.released() {
                break;
            }
            let now = Now::read();
            let wait = self
                .machine
                .poll_timeout(now)
                .map_or(LINGER_RECHECK, |at| at.saturating_duration_since(now.at));
            let mut fds = [PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
            match wait_ready(&mut fds, Some(wait)) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(error) => {
                    tracing::error!(%error, "poll failed; the supervisor stops holding the leftovers");
                    break;
                }
            }
            if self.read_signals(signals) {
                self.drive(Event::Kill(Some(KillSource::ProcessKill)));
            }
        }
        self.release_hold();
    }

    /// Reads the pending signals; returns whether SIGTERM was among them (a kill
    /// request of the daemon, or an operator's).
    pub(super) fn read_signals(&mut self, signals: &SignalWatch) -> bool {
        let term = signals.take_pending().contains(Signal::SIGTERM);
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
                    let _ = wait_ready(&mut [], Some(Duration::from_millis(5)));
                }
                Err(error) => {
                    tracing::warn!(%error, path = %cgroup.path().display(), "session cgroup not removed");
                    return;
                }
            }
        }
    }
}
