//! Supervisors forked ahead of need (`herd-shim --launcher --pool PATH --pool-cap N`).
//!
//! The launcher keeps up to `target` pre-forked supervisors. Each connects to the
//! daemon's pool socket (`PATH`) and waits there for one launch spec; the daemon
//! writes a spec straight to an idle one, which then runs the session exactly as a
//! supervisor forked for that spec would (the same `supervise::run`), answering on
//! that connection instead of the launcher's shared stdout. A spawn then costs
//! neither a wake-up of the launcher nor a fork on its path. When the daemon asks
//! (`Spec::attach_here`), the connection stays the daemon's connection to the
//! session: no socket is bound or connected on the spawn's path.
//!
//! Demand sizes the pool: it starts at one, and every spec that reaches the launcher
//! itself (the daemon found no idle supervisor) raises the target by one, up to the
//! cap. A member that took a spec tells the launcher (its pid on a pipe) right after
//! its ready answer, and the launcher forks its replacement: the fork comes after the
//! spawn's answer, not beside the job's start on the same CPUs. A member waits with no descriptor of the launcher's stdio, so
//! the launcher's death is seen by the daemon at once; when the daemon closes the
//! connection (it stopped, or died) the member exits: the pool never outlives its
//! daemon.

use std::collections::HashSet;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use super::super::{PROTOCOL, Spec, report_failure, spec_reader};
use crate::sys::cgroup::Placement;

/// The largest pool a launcher accepts (`--pool-cap`).
pub(crate) const MAX_CAP: usize = 16;

/// The launcher's pool: its members and the pipe they report a taken spec on.
pub(super) struct Pool {
    path: PathBuf,
    cap: usize,
    target: usize,
    /// Members forked and not yet reported as taken.
    members: HashSet<i32>,
    taken_read: OwnedFd,
    taken_write: OwnedFd,
    /// Where session cgroups go, as the launcher found it.
    placement: Placement,
    /// Members forked by this launcher image.
    forked: u64,
}

/// What `--pool PATH --pool-cap N` asked for, from the launcher's arguments;
/// `None` without them, or with a cap outside `1..=MAX_CAP`.
pub(super) fn asked(args: &[String]) -> Option<(PathBuf, usize)> {
    let mut path = None;
    let mut cap = 1;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--pool" => path = rest.next().map(PathBuf::from),
            "--pool-cap" => cap = rest.next()?.parse().ok()?,
            _ => {}
        }
    }
    (1..=MAX_CAP).contains(&cap).then_some(())?;
    Some((path?, cap))
}

impl Pool {
    /// A pool of at most `cap` members on the daemon's socket at `path`, whose
    /// sessions' cgroups go where `placement` says.
    ///
    /// # Errors
    /// The pipe could not be made.
    pub(super) fn new(path: PathBuf, cap: usize, placement: Placement) -> io::Result<Pool> {
        let (taken_read, taken_write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)?;
        Ok(Pool {
            path,
            cap,
            target: 1,
            members: HashSet::new(),
            taken_read,
            taken_write,
            placement,
            forked: 0,
        })
    }

    /// The pool a renewed launcher image was handed (`renew`): its target, members
    /// and report pipe as the image before it left them.
    ///
    /// # Errors
    /// A pipe descriptor named in `state` is not open.
    pub(super) fn renewed(
        path: PathBuf,
        cap: usize,
        placement: Placement,
        state: &super::renew::PoolState,
    ) -> io::Result<Pool> {
        let taken_read = crate::sys::descriptors::adopt_inherited(state.taken_read)?;
        let taken_write = crate::sys::descriptors::adopt_inherited(state.taken_write)?;
        Ok(Pool {
            path,
            cap,
            target: state.target.clamp(1, cap),
            members: state.members.iter().copied().collect(),
            taken_read,
            taken_write,
            placement,
            forked: 0,
        })
    }

    /// What the next launcher image needs of this pool, and the pipe's descriptors
    /// that must cross the exec.
    pub(super) fn state(&self) -> (super::renew::PoolState, [&OwnedFd; 2]) {
        let mut members: Vec<i32> = self.members.iter().copied().collect();
        members.sort_unstable();
        (
            super::renew::PoolState {
                target: self.target,
                taken_read: self.taken_read.as_raw_fd(),
                taken_write: self.taken_write.as_raw_fd(),
                members,
            },
            [&self.taken_read, &self.taken_write],
        )
    }

    /// Members forked by this launcher image.
    pub(super) fn forked(&self) -> u64 {
        self.forked
    }

    /// Counts members forked afresh from now on.
    pub(super) fn forget_forked(&mut self) {
        self.forked = 0;
    }

    /// The pipe members report a taken spec on, for the launcher's poll.
    pub(super) fn taken(&self) -> &OwnedFd {
        &self.taken_read
    }

    /// A spec reached the launcher itself: the daemon had no idle member, so the pool
    /// grows by one (up to its cap) and is filled again.
    pub(super) fn missed(&mut self) -> Option<i32> {
        self.target = (self.target + 1).min(self.cap);
        self.fill()
    }

    /// Reads the members' reports of taken specs, then forks their replacements.
    /// `Some(code)` in a member, once its session is over.
    pub(super) fn on_taken(&mut self) -> Option<i32> {
        let members = &mut self.members;
        super::read_pids(&self.taken_read, |pid| {
            members.remove(&pid);
        });
        self.fill()
    }

    /// A child of the launcher ended: a member that ended before it took a spec (its
    /// daemon is gone, or it was killed) leaves the pool, not replaced until the next
    /// take or miss.
    pub(super) fn reaped(&mut self, pid: i32) {
        self.members.remove(&pid);
    }

    /// Forks members until the pool holds its target. `Some(code)` in a member.
    pub(super) fn fill(&mut self) -> Option<i32> {
        while self.members.len() < self.target {
            match crate::sys::fork_single_threaded() {
                Ok(None) => return Some(self.member()),
                Ok(Some(pid)) => {
                    self.members.insert(pid);
                    self.forked += 1;
                }
                Err(error) => {
                    tracing::debug!(%error, "no supervisor forked ahead of need");
                    return None;
                }
            }
        }
        None
    }

    /// The member's life: wait on the daemon's pool socket for one spec, then run its
    /// session as any supervisor does. Returns the exit code.
    fn member(&self) -> i32 {
        // Nothing of the launcher's stdio: its death must close its pipes at once.
        if let Ok(null) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
        {
            let _ = nix::unistd::dup2_stdin(&null);
            let _ = nix::unistd::dup2_stdout(&null);
        }
        let Ok(mut stream) = UnixStream::connect(&self.path) else {
            return 0;
        };
        let mut frames = spec_reader();
        // A small read buffer on the stack: a member's heap pages are its own once
        // written (the launcher's are shared until then), and this one lives on
        // through the session; a spec longer than it arrives in several reads.
        let mut buf = [0u8; 4096];
        let frame = loop {
            match frames.next() {
                Ok(Some(frame)) => break frame,
                Ok(None) => {}
                Err(_) => return 2,
            }
            match stream.read(&mut buf) {
                // The daemon closed the connection: it stopped, or died.
                Ok(0) => return 0,
                Ok(n) => frames.feed(&buf[..n]),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return 0,
            }
        };
        // The launcher hears of the take after the ready answer (`write_ready`): its
        // fork of the replacement then does not compete with this spawn's start.
        let reported = self
            .taken_write
            .try_clone()
            .map_err(|_| ())
            .and_then(|taken| super::super::report_taken_after_ready(taken).map_err(|_| ()));
        if reported.is_err() {
            super::tell_own_pid(&self.taken_write);
        }
        // The ready answer goes back on this connection (`write_ready` writes stdout),
        // which closes when the supervisor lets go of its stdio.
        if nix::unistd::dup2_stdout(&stream).is_err() {
            return 2;
        }
        let spec = serde_json::from_slice::<Spec>(&frame.header);
        // The spec's bytes are done with: their memory goes back to the allocator
        // for the session's own use instead of growing the heap beside it.
        drop((frame, frames));
        // A daemon that asks keeps this connection as its own to the session
        // (`Spec::attach_here`); otherwise it closes with the stdout it was given.
        let attached = match &spec {
            Ok(spec) if spec.attach_here && spec.protocol == PROTOCOL => Some(stream),
            _ => {
                drop(stream);
                None
            }
        };
        match spec {
            Ok(spec) if spec.protocol == PROTOCOL => {
                super::super::supervise::run(spec, false, Some(self.placement.clone()), attached)
            }
            Ok(spec) => report_failure(
                spec.request,
                &format!(
                    "the daemon speaks shim protocol {} and this herd-shim launcher speaks {PROTOCOL}; install matching herd and herd-shim binaries",
                    spec.protocol
                ),
            ),
            Err(error) => report_failure(0, &format!("the launch spec is not valid: {error}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_pool_is_asked_for_with_a_path_and_a_cap_in_range() {
        assert_eq!(
            asked(&args(&["--pool", "/h/run/pool.sock", "--pool-cap", "4"])),
            Some((PathBuf::from("/h/run/pool.sock"), 4))
        );
        assert_eq!(
            asked(&args(&["--pool", "/p"])),
            Some((PathBuf::from("/p"), 1))
        );
        assert_eq!(asked(&args(&[])), None);
        assert_eq!(asked(&args(&["--pool", "/p", "--pool-cap", "0"])), None);
        assert_eq!(asked(&args(&["--pool", "/p", "--pool-cap", "17"])), None);
        assert_eq!(asked(&args(&["--pool", "/p", "--pool-cap", "x"])), None);
    }
}
