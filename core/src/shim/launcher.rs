//! The shim launcher (`herd-shim --launcher`): one small process per daemon that
//! forks a supervisor for every launch spec the daemon sends, so a session costs a
//! fork of a small process instead of the exec and start-up of a new program.
//!
//! It leaves the daemon's process tree when it starts (setsid, then a fork whose
//! parent exits), so the supervisors it forks are not in the daemon's tree either. It
//! reaps the supervisors that end while it runs, and exits when the daemon closes its
//! stdin (the daemon stopped or crashed): its supervisors are then re-parented to init
//! and run on. Specs arrive on stdin as frames (`wire::Framing::Lengths`, the framing
//! of every shim link); each supervisor writes its own ready answer, one frame tagged
//! with the spec's `request`, on the shared stdout in one write. With `--pool` it also
//! keeps supervisors forked ahead of need, which take specs from the daemon directly.

use std::io;
use std::os::fd::AsFd;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;

use super::wire::FrameReader;
use super::{PROTOCOL, Spec};
use crate::sys::cgroup::Placement;
use crate::sys::signals::SignalWatch;

mod pool;
mod reap;
mod renew;
pub(crate) use pool::MAX_CAP as MAX_POOL;
pub(crate) use renew::kept_descriptors;

/// Serves launch specs until stdin closes; returns the exit code. `args` (after
/// `--launcher`) may ask for a pool of supervisors forked ahead of need.
pub(super) fn run(args: &[String]) -> i32 {
    // A renewed image (`renew`) is already out of the daemon's tree, and its
    // supervisors are its children: it must not fork away from them.
    let renewed = renew::is_renewed(args);
    if !renewed && crate::sys::detach_from_parent().is_err() {
        return 2;
    }
    let Ok(signals) = SignalWatch::block(&[Signal::SIGCHLD]) else {
        return 2;
    };
    // Every supervisor is a fork of this process: it inherits this detection.
    crate::sys::process::detect_cpu_features_before_forks();
    // Where session cgroups go is found once, not on each spawn's path: every
    // supervisor is forked from here, in this cgroup (one the placement no longer
    // lets make a cgroup in looks again, `supervise::hold`).
    let placement = crate::sys::cgroup::placement();
    let pool = match (pool::asked(args), renewed.then(|| renew::pool_state(args))) {
        (Some((path, cap)), Some(Some(state))) => {
            match pool::Pool::renewed(path, cap, placement.clone(), &state) {
                Ok(pool) => Some(pool),
                Err(_) => return 2,
            }
        }
        (Some((path, cap)), None) => pool::Pool::new(path, cap, placement.clone()).ok(),
        _ => None,
    };
    let mut reaper = match renew::ended_pipe(args).filter(|_| renewed) {
        Some((read, write)) => {
            let adopt = crate::sys::descriptors::adopt_inherited;
            match (adopt(read), adopt(write)) {
                (Ok(read), Ok(write)) => reap::Reaper::with(read, write),
                _ => return 2,
            }
        }
        None => match reap::Reaper::new() {
            Ok(reaper) => reaper,
            Err(_) => return 2,
        },
    };
    let launcher = std::process::id();
    let code = serve(args, renewed, &signals, &placement, pool, &mut reaper);
    if std::process::id() != launcher {
        // A child (supervisor or pool member) whose session is over: its copy of
        // the reaper tells the launcher, as its last step.
        reaper.announce();
    }
    code
}

/// The launcher's loop. Returns the exit code: the launcher's, or, in a child it
/// forked, the child's once its session is over.
fn serve(
    args: &[String],
    renewed: bool,
    signals: &SignalWatch,
    placement: &Placement,
    mut pool: Option<pool::Pool>,
    reaper: &mut reap::Reaper,
) -> i32 {
    if renewed {
        // Whatever ended while the exec ran signalled an image that is gone.
        reaper.scan(pool.as_mut());
    }
    if let Some(code) = pool.as_mut().and_then(pool::Pool::fill) {
        return code;
    }
    let stdin = io::stdin();
    let mut forked: u64 = 0;
    let mut pending = super::spec_reader();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let generation = forked + pool.as_ref().map_or(0, pool::Pool::forked);
        if generation >= renew::GENERATION_FORKS && pending.pending_bytes() == 0 {
            // Returns only when the exec failed: this image then serves another
            // generation before it tries again.
            let _ = renew::exec_afresh(args, pool.as_ref().map(pool::Pool::state), reaper.pipe());
            forked = 0;
            if let Some(pool) = pool.as_mut() {
                pool.forget_forked();
            }
        }
        let [input, reaped, announced, taken] = match wait(&stdin, signals, reaper, pool.as_ref()) {
            Ok(ready) => ready,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return 2,
        };
        if announced {
            reaper.on_announced(pool.as_mut());
        }
        if reaped {
            signals.take_pending();
            reaper.on_sigchld(pool.as_mut());
        }
        reaper.scan_if_due(pool.as_mut());
        if taken && let Some(code) = pool.as_mut().and_then(pool::Pool::on_taken) {
            return code;
        }
        if !input {
            continue;
        }
        match nix::unistd::read(stdin.as_fd(), &mut buf) {
            // The daemon is gone: the supervisors run on without us.
            Ok(0) => return 0,
            Ok(n) => pending.feed(&buf[..n]),
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => continue,
            Err(_) => return 2,
        }
        loop {
            match next_spec(&mut pending) {
                Ok(Some(spec)) => {
                    forked += 1;
                    if let Some(code) = fork_supervisor(spec, placement) {
                        return code;
                    }
                    // The daemon found no idle member: the pool grows.
                    if let Some(code) = pool.as_mut().and_then(pool::Pool::missed) {
                        return code;
                    }
                }
                Ok(None) => break,
                // A stream that is not specs cannot be resynchronised.
                Err(()) => return 2,
            }
        }
    }
}

/// Waits for the launcher's next event, or until the reaper's walk is due: which of
/// stdin, the SIGCHLD descriptor, the ended pipe and the pool's taken pipe are ready.
fn wait(
    stdin: &io::Stdin,
    signals: &SignalWatch,
    reaper: &reap::Reaper,
    pool: Option<&pool::Pool>,
) -> nix::Result<[bool; 4]> {
    let mut fds = vec![
        PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
        PollFd::new(signals.as_fd(), PollFlags::POLLIN),
        PollFd::new(reaper.announcements().as_fd(), PollFlags::POLLIN),
    ];
    if let Some(pool) = pool {
        fds.push(PollFd::new(pool.taken().as_fd(), PollFlags::POLLIN));
    }
    let timeout = reaper.wait_limit().map_or(PollTimeout::NONE, |limit| {
        PollTimeout::try_from(limit.as_millis().saturating_add(1)).unwrap_or(PollTimeout::MAX)
    });
    poll(&mut fds, timeout)?;
    let ready = |at: usize| {
        fds.get(at)
            .is_some_and(|fd| fd.revents().is_some_and(|r| !r.is_empty()))
    };
    Ok([ready(0), ready(1), ready(2), ready(3)])
}

/// Writes this process's pid on `fd` (a launcher's report pipe) in one write, which a
/// pipe never interleaves with another child's; a full pipe drops it.
pub(super) fn tell_own_pid(fd: impl AsFd) {
    let pid = std::process::id().cast_signed();
    let _ = nix::unistd::write(fd.as_fd(), &pid.to_ne_bytes());
}

/// Reads every pid [`tell_own_pid`] wrote on `fd` (non-blocking) until none is left.
fn read_pids(fd: impl AsFd, mut each: impl FnMut(i32)) {
    let mut buf = [0u8; 4 * 256];
    loop {
        match nix::unistd::read(fd.as_fd(), &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                for pid in buf[..n].chunks_exact(4) {
                    each(i32::from_ne_bytes([pid[0], pid[1], pid[2], pid[3]]));
                }
            }
        }
    }
}

/// Takes one whole spec frame off `pending`.
fn next_spec(pending: &mut FrameReader) -> Result<Option<Spec>, ()> {
    let frame = match pending.next() {
        Ok(Some(frame)) => frame,
        Ok(None) => return Ok(None),
        Err(_) => return Err(()),
    };
    match serde_json::from_slice::<Spec>(&frame.header) {
        Ok(spec) if spec.protocol == PROTOCOL => Ok(Some(spec)),
        Ok(spec) => {
            super::report_failure(
                spec.request,
                &format!(
                    "the daemon speaks shim protocol {} and this herd-shim launcher speaks {PROTOCOL}; install matching herd and herd-shim binaries",
                    spec.protocol
                ),
            );
            Ok(None)
        }
        Err(_) => Err(()),
    }
}

/// Connects to the daemon's claim socket at `at` and sends `token`: the connection
/// then is the daemon's connection to this supervisor (`Spec::claim`). `None` when
/// that fails; the supervisor binds its socket then, as for an older daemon.
fn claim(at: &std::path::Path, token: u64) -> Option<std::os::unix::net::UnixStream> {
    use std::io::Write;
    let mut frame = Vec::new();
    super::wire::Framing::Lengths
        .encode(&super::Claim { token }, b"", &mut frame)
        .ok()?;
    let mut stream = std::os::unix::net::UnixStream::connect(at).ok()?;
    stream.write_all(&frame).ok()?;
    Some(stream)
}

/// Forks the supervisor of `spec`. Returns `Some(exit code)` in the child, once its
/// session is over (the caller returns it from `main`), `None` in the launcher.
fn fork_supervisor(spec: Spec, placement: &Placement) -> Option<i32> {
    match crate::sys::fork_single_threaded() {
        // The launcher's signal descriptor stays open in the child, unread
        // (close-on-exec, so no job inherits it); the supervisor reads its own, and
        // releases the shared stdio after its ready answer.
        Ok(None) => {
            let attached = spec
                .claim
                .as_ref()
                .and_then(|(at, token)| claim(at, *token));
            Some(super::supervise::run(
                spec,
                false,
                Some(placement.clone()),
                attached,
            ))
        }
        Ok(Some(_)) => None,
        Err(error) => {
            super::report_failure(
                spec.request,
                &format!("the launcher could not fork a supervisor: {error}"),
            );
            None
        }
    }
}
