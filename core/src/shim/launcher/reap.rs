//! Reaping the launcher's children without scanning all of them.
//!
//! `waitpid(-1)` walks every child of the caller under the kernel's task-list lock
//! until it finds one that ended, and a launcher holding 10,000 supervisors made two
//! such walks per ended one: a millisecond of kernel time per spawn, with every fork
//! on the machine waiting on that lock meanwhile. So each child says it is ending: in
//! its last step (`run`'s return in a process that is not the launcher) it writes its
//! pid on the launcher's `ended` pipe, and the launcher waits for that pid alone, which
//! the kernel finds without a walk. A child that ends without a word (killed by a
//! signal, or with the pipe full) is reaped by the full walk, which a SIGCHLD still
//! asks for, but at most once a second ([`SCAN_EVERY`]): no zombie lasts longer.

use std::collections::HashSet;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::pool::Pool;

/// The least time between two full walks of the children.
const SCAN_EVERY: Duration = Duration::from_secs(1);

/// The launcher's side of its children's ends.
pub(super) struct Reaper {
    ended_read: OwnedFd,
    ended_write: OwnedFd,
    /// Children that said they are ending and were not reaped yet.
    announced: HashSet<i32>,
    last_scan: Option<Instant>,
    scan_due: bool,
}

impl Reaper {
    /// A new reaper with its pipe.
    ///
    /// # Errors
    /// The pipe could not be made.
    pub(super) fn new() -> nix::Result<Reaper> {
        let (ended_read, ended_write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)?;
        Ok(Reaper::with(ended_read, ended_write))
    }

    /// The reaper of a renewed image, on the pipe the image before it made.
    pub(super) fn with(ended_read: OwnedFd, ended_write: OwnedFd) -> Reaper {
        Reaper {
            ended_read,
            ended_write,
            announced: HashSet::new(),
            last_scan: None,
            scan_due: false,
        }
    }

    /// The pipe, read end first, for the next image.
    pub(super) fn pipe(&self) -> [&OwnedFd; 2] {
        [&self.ended_read, &self.ended_write]
    }

    /// The descriptor children announce their end on, for the launcher's poll.
    pub(super) fn announcements(&self) -> &OwnedFd {
        &self.ended_read
    }

    /// In a child of the launcher, as its last step: says it is ending. A full pipe
    /// drops the word; the launcher's walk finds the child then.
    pub(super) fn announce(&self) {
        super::tell_own_pid(&self.ended_write);
    }

    /// Reads the pids children announced, then reaps those that ended.
    pub(super) fn on_announced(&mut self, pool: Option<&mut Pool>) {
        let announced = &mut self.announced;
        super::read_pids(&self.ended_read, |pid| {
            announced.insert(pid);
        });
        self.reap_announced(pool);
    }

    /// A SIGCHLD came: the announced children that ended are reaped, and the full
    /// walk runs now or once a second has passed since the last.
    pub(super) fn on_sigchld(&mut self, mut pool: Option<&mut Pool>) {
        self.reap_announced(pool.as_deref_mut());
        self.scan_due = true;
        self.scan_if_due(pool);
    }

    /// How long the launcher may wait before a walk is due; `None` for no limit.
    pub(super) fn wait_limit(&self) -> Option<Duration> {
        if !self.scan_due {
            return None;
        }
        Some(
            self.last_scan
                .map_or(Duration::ZERO, |at| SCAN_EVERY.saturating_sub(at.elapsed())),
        )
    }

    /// Runs the full walk when one is due and the last is a second old.
    pub(super) fn scan_if_due(&mut self, pool: Option<&mut Pool>) {
        if self.scan_due && self.wait_limit() == Some(Duration::ZERO) {
            self.scan(pool);
        }
    }

    /// Reaps every child that has ended (the full walk).
    pub(super) fn scan(&mut self, mut pool: Option<&mut Pool>) {
        self.last_scan = Some(Instant::now());
        self.scan_due = false;
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(_) => return,
                Ok(status) => {
                    if let Some(pid) = status.pid() {
                        self.announced.remove(&pid.as_raw());
                        if let Some(pool) = pool.as_deref_mut() {
                            pool.reaped(pid.as_raw());
                        }
                    }
                }
            }
        }
    }

    fn reap_announced(&mut self, mut pool: Option<&mut Pool>) {
        self.announced.retain(|&pid| {
            match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(Errno::EINTR) => true,
                // Reaped now, reaped by a walk before, or no child of ours.
                Ok(_) | Err(_) => {
                    if let Some(pool) = pool.as_deref_mut() {
                        pool.reaped(pid);
                    }
                    false
                }
            }
        });
    }
}
