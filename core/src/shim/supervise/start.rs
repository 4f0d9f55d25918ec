//! The start-up of a job: the shim leaves the daemon's tree, binds its socket (or keeps
//! the connection its spec came on as the daemon's, binding the socket only once that
//! closes), starts the job, watches SIGCHLD, writes its info record and the ready
//! answer, and lets go of the daemon's pipes.
//!
//! Invariant: every failure after the job started kills the job's group and removes the
//! shim's directory before it is reported, so no job runs without a supervisor.

use std::collections::VecDeque;
use std::io;
use std::os::unix::net::{UnixListener, UnixStream};

use herd_persistence::{Mode, SHIM_RECORD_VERSION, ShimDir, ShimInfo};
use nix::sys::signal::Signal;

use super::hold::Hold;
use super::{Job, Shim};
use crate::noise::NoiseFilter;
use crate::output::LogWriter;
use crate::shim::wire::Progress;
use crate::shim::{PROTOCOL, Ready, Spec, report_failure, write_ready};
use crate::spawn::{self, Launch, PtyFailure};
use crate::sys::cgroup::{Placement, SessionCgroup};
use crate::sys::limits::Applied;
use crate::sys::signals::SignalWatch;

/// Starts the job described by `spec`; `Err` carries the exit code once the failure
/// was reported on the ready answer.
///
/// `attached` is the connection the spec came on when the daemon asked to keep it
/// (`Spec::attach_here`): it becomes the daemon's connection, and the socket is bound
/// only when it closes.
pub(super) fn start(
    spec: &Spec,
    detach: bool,
    placement: Option<Placement>,
    attached: Option<UnixStream>,
) -> Result<(Shim, SignalWatch, ShimDir), i32> {
    let detached = if detach {
        crate::sys::detach_from_parent()
    } else {
        // Forked by the launcher, which left the daemon's tree already: a session of
        // its own is all that is missing.
        nix::unistd::setsid()
            .map(drop)
            .map_err(std::io::Error::from)
    };
    if let Err(error) = detached {
        return Err(report_failure(
            spec.request,
            &format!("the supervisor could not detach: {error}"),
        ));
    }
    if let Err(error) = crate::sys::process::adopt_orphans() {
        tracing::debug!(%error, "not a child subreaper; orphans go to init");
    }
    let dir = ShimDir::at(spec.dir.clone());
    let (listener, attached) = daemon_door(spec, &dir, attached)?;
    let mut hold = Hold::make(spec, placement);
    if let Hold::Subreaper(why) = &hold {
        tracing::info!(reason = %why, "no session cgroup; the shim holds the tree as subreaper");
    }
    let limits = match crate::sys::limits::apply(
        &spec.limits,
        hold.cgroup().map(|c| c.path()),
        &spec.session_id,
    ) {
        Ok(applied) => applied,
        Err(message) => {
            if let Some(cgroup) = hold.cgroup() {
                let _ = cgroup.remove();
            }
            let _ = dir.remove();
            return Err(report_failure(
                spec.request,
                &format!("the session's limits cannot be set: {message}"),
            ));
        }
    };
    let (job, pid) = match spawn_job(spec, &dir, &mut hold, &limits) {
        Ok(started) => started,
        Err(code) => {
            limits.remove();
            return Err(code);
        }
    };
    // SIGCHLD and SIGTERM (a kill request of an operator, or of a daemon for a
    // lingering session's leftovers) are blocked and watched only now, so the job
    // started with the usual mask; a SIGCHLD that came before is caught by the first
    // reap.
    let signals = match SignalWatch::block(&[Signal::SIGCHLD, Signal::SIGTERM]) {
        Ok(fd) => fd,
        Err(error) => {
            crate::sys::signal_group(pid, Signal::SIGKILL).ok();
            let _ = dir.remove();
            return Err(report_failure(
                spec.request,
                &format!("SIGCHLD could not be watched: {error}"),
            ));
        }
    };
    let start_time = announce(spec, &dir, pid, &hold, attached.is_some())?;
    release_stdio();
    let mut shim = new_shim(spec, job, pid, listener, start_time, hold);
    shim.limits = limits;
    if let Some(stream) = attached {
        shim.adopt(stream);
    }
    Ok((shim, signals, dir))
}

/// How the daemon reaches this shim: the connection the spec came on, kept
/// (non-blocking before the ready answer says so; one that cannot be is not kept), or
/// the socket bound now. `Err` carries the exit code once the failure was reported.
fn daemon_door(
    spec: &Spec,
    dir: &ShimDir,
    attached: Option<UnixStream>,
) -> Result<(Option<UnixListener>, Option<UnixStream>), i32> {
    let socket = dir.socket_path();
    match attached.filter(|stream| stream.set_nonblocking(true).is_ok()) {
        // The socket is bound only once the daemon's connection closes: a path it can
        // never be bound at is refused now, as the bind at the start refused it.
        Some(_) if !crate::shim::fits_a_socket_address(&socket) => Err(report_failure(
            spec.request,
            &format!(
                "the supervisor socket {} is longer than the {} bytes a Unix socket path may have; use a home with a shorter path",
                socket.display(),
                crate::shim::MAX_SOCKET_PATH_BYTES
            ),
        )),
        Some(stream) => Ok((None, Some(stream))),
        None => match bind_private(&socket) {
            Ok(listener) => Ok((Some(listener), None)),
            Err(error) => Err(report_failure(
                spec.request,
                &format!(
                    "the supervisor socket {} could not be bound: {error}",
                    socket.display()
                ),
            )),
        },
    }
}

/// Starts the job itself, under a PTY or on pipes, inside the session's cgroup when
/// there is one; returns it and its pid. A cgroup that refuses the job is given up
/// for the subreaper (the reason is kept for `doctor` and `ps`).
fn spawn_job(
    spec: &Spec,
    dir: &ShimDir,
    hold: &mut Hold,
    limits: &Applied,
) -> Result<(Job, i32), i32> {
    let env = spec.env_map();
    let launch = Launch {
        argv: spec.argv.clone(),
        env: &env,
        cwd: &spec.cwd,
    };
    match spec.pty {
        Some((rows, cols)) => match spawn_pty_in(&launch, rows, cols, hold, limits) {
            Ok((pid, master)) => Ok((
                Job::Pty {
                    master,
                    scanner: herd_pty::Scanner::new(rows, cols),
                },
                pid,
            )),
            Err(PtyFailure::Open(error)) => {
                let _ = dir.remove();
                write_ready(
                    spec.request,
                    &Ready::PtyUnavailable {
                        message: error.to_string(),
                    },
                );
                Err(2)
            }
            Err(PtyFailure::Spawn(error)) => {
                let _ = dir.remove();
                Err(report_failure(spec.request, &error.to_string()))
            }
        },
        None => match spawn_pipe_in(&launch, hold, limits) {
            Ok(child) => Ok((
                Job::Pipe {
                    output: child.output,
                    stdin: Some(child.stdin),
                },
                child.pid,
            )),
            Err(error) => {
                let _ = dir.remove();
                Err(report_failure(spec.request, &error.to_string()))
            }
        },
    }
}

/// Starts a pipe job whose child enters the cgroup before its exec; without the
/// cgroup when that fails.
fn spawn_pipe_in(
    launch: &Launch<'_>,
    hold: &mut Hold,
    limits: &Applied,
) -> std::io::Result<spawn::RawPipeChild> {
    let Some(cgroup) = hold.cgroup() else {
        return spawn::spawn_pipe_raw(launch, limits.v1_procs.clone());
    };
    // Born in the cgroup (no migration) unless v1 limit cgroups must be
    // entered by hand too, or the kernel refuses that way.
    if limits.v1_procs.is_empty() {
        match spawn::spawn_pipe_into(launch, cgroup.path()) {
            Ok(Some(child)) => return Ok(child),
            Ok(None) => {}
            // As below: the cgroup is given up and the spawn's own error stands.
            Err(error) => {
                give_up_cgroup(hold, &error);
                return spawn::spawn_pipe_raw(launch, Vec::new());
            }
        }
    }
    let mut enter = vec![cgroup.procs_c().clone()];
    enter.extend(limits.v1_procs.iter().cloned());
    match spawn::spawn_pipe_raw(launch, enter) {
        Ok(child) => Ok(child),
        // Limits are not given up with the cgroup: a job that asked for them does
        // not run without them.
        Err(error) if !limits.v1_procs.is_empty() => Err(error),
        Err(error) => {
            give_up_cgroup(hold, &error);
            spawn::spawn_pipe_raw(launch, Vec::new())
        }
    }
}

/// Starts a PTY job inside the cgroup; its pid and the PTY's master. Born there by
/// clone3 unless v1 limit cgroups must be entered too or the kernel
/// refuses that way; then portable-pty forks the child itself, so the shim steps
/// into the cgroup for the spawn (the child is born there) and back out to its own
/// cgroup right after, before anything else runs.
fn spawn_pty_in(
    launch: &Launch<'_>,
    rows: u16,
    cols: u16,
    hold: &mut Hold,
    limits: &Applied,
) -> Result<(i32, spawn::MasterFd), PtyFailure> {
    #[cfg(feature = "pty")]
    if limits.v1_dirs.is_empty()
        && let Some(cgroup) = hold.cgroup()
    {
        match spawn::spawn_pty_into(launch, rows, cols, cgroup.path()) {
            Ok(Some((pid, master))) => return Ok((pid, spawn::MasterFd::owned(master))),
            Ok(None) => {}
            // As for pipes: the cgroup is given up and the spawn's own error stands.
            Err(PtyFailure::Spawn(error)) => {
                give_up_cgroup(hold, &std::io::Error::other(error.to_string()));
                return spawn_pty_moving(launch, rows, cols, hold, limits);
            }
            Err(open @ PtyFailure::Open(_)) => return Err(open),
        }
    }
    spawn_pty_moving(launch, rows, cols, hold, limits)
}

/// [`spawn_pty_in`] by portable-pty, the shim moving into the job's cgroups for
/// the spawn and back out.
fn spawn_pty_moving(
    launch: &Launch<'_>,
    rows: u16,
    cols: u16,
    hold: &mut Hold,
    limits: &Applied,
) -> Result<(i32, spawn::MasterFd), PtyFailure> {
    let child = spawn_pty_moving_raw(launch, rows, cols, hold, limits)?;
    // The std Child is not waited on: the job is reaped through waitpid.
    drop(child.child);
    Ok((child.pid, child.master))
}

fn spawn_pty_moving_raw(
    launch: &Launch<'_>,
    rows: u16,
    cols: u16,
    hold: &mut Hold,
    limits: &Applied,
) -> Result<spawn::RawPtyChild, PtyFailure> {
    // The v1 limit cgroups first, the same way: in for the spawn, back out after.
    for dir in &limits.v1_dirs {
        SessionCgroup::move_self_to(dir)
            .map_err(|e| PtyFailure::Spawn(anyhow::anyhow!("{}: {e}", dir.display())))?;
    }
    let spawned = spawn_pty_in_v2(launch, rows, cols, hold);
    for home in &limits.v1_homes {
        if let Err(error) = SessionCgroup::move_self_to(home) {
            if let Ok(child) = &spawned {
                crate::sys::signal_group(child.pid, Signal::SIGKILL).ok();
            }
            return Err(PtyFailure::Spawn(anyhow::anyhow!(
                "the supervisor could not leave its job's limit cgroup for {}: {error}",
                home.display()
            )));
        }
    }
    spawned
}

/// [`spawn_pty_in`] for the session's v2 cgroup.
fn spawn_pty_in_v2(
    launch: &Launch<'_>,
    rows: u16,
    cols: u16,
    hold: &mut Hold,
) -> Result<spawn::RawPtyChild, PtyFailure> {
    let target = hold.cgroup().map(|c| c.path().to_path_buf());
    let own = crate::sys::cgroup::own_cgroup();
    let home = match (target, own, crate::sys::cgroup::v2_mount()) {
        (Some(target), Some(own), Some(mount)) => match SessionCgroup::move_self_to(&target) {
            Ok(()) => Some(mount.join(own.trim_start_matches('/'))),
            Err(error) => {
                give_up_cgroup(hold, &error);
                None
            }
        },
        (Some(_), _, _) => {
            give_up_cgroup(
                hold,
                &std::io::Error::other("the shim's own cgroup is unknown"),
            );
            None
        }
        _ => None,
    };
    let spawned = spawn::spawn_pty_raw(launch, rows, cols, false);
    if let Some(home) = home
        && let Err(error) = SessionCgroup::move_self_to(&home)
    {
        // The shim must not stay in its job's cgroup (a kill of the cgroup would end
        // the supervisor too): the job is stopped and the start fails.
        if let Ok(child) = &spawned {
            crate::sys::signal_group(child.pid, Signal::SIGKILL).ok();
        }
        return Err(PtyFailure::Spawn(anyhow::anyhow!(
            "the supervisor could not leave its job's cgroup for {}: {error}",
            home.display()
        )));
    }
    spawned
}

/// Falls back to the subreaper when the cgroup refused the job.
fn give_up_cgroup(hold: &mut Hold, error: &std::io::Error) {
    let why = match hold.cgroup() {
        Some(cgroup) => {
            let _ = cgroup.remove();
            format!(
                "the job could not be put in {}: {error}",
                cgroup.path().display()
            )
        }
        None => error.to_string(),
    };
    tracing::warn!(reason = %why, "no session cgroup; the shim holds the tree as subreaper");
    *hold = Hold::Subreaper(why);
}

/// Writes the info record and then the ready answer; returns the job's start time.
fn announce(
    spec: &Spec,
    dir: &ShimDir,
    pid: i32,
    hold: &Hold,
    attached: bool,
) -> Result<Option<u64>, i32> {
    let own_pid = crate::sys::own_pid();
    let info = ShimInfo {
        version: SHIM_RECORD_VERSION,
        protocol: PROTOCOL,
        shim_pid: own_pid,
        shim_start_time: crate::sys::start_time(own_pid),
        pid,
        pgid: pid,
        start_time: crate::sys::start_time(pid),
        mode: if spec.pty.is_some() {
            Mode::Pty
        } else {
            Mode::Pipe
        },
        cgroup: hold.cgroup_path(),
    };
    if let Err(error) = dir.write_info(&info) {
        crate::sys::signal_group(pid, Signal::SIGKILL).ok();
        let _ = dir.remove();
        return Err(report_failure(spec.request, &error.to_string()));
    }
    write_ready(
        spec.request,
        &Ready::Running {
            protocol: PROTOCOL,
            shim_pid: own_pid,
            shim_start_time: info.shim_start_time,
            pid,
            pgid: pid,
            start_time: info.start_time,
            cgroup: Some(info.cgroup.is_some()),
            attached,
        },
    );
    Ok(info.start_time)
}

/// The loop's state for a job that just started.
fn new_shim(
    spec: &Spec,
    job: Job,
    pid: i32,
    listener: Option<UnixListener>,
    start_time: Option<u64>,
    hold: Hold,
) -> Shim {
    Shim {
        job,
        pid,
        pgid: pid,
        log: Some(LogWriter::new(spec.log_path.clone(), spec.log_cap_bytes)),
        noise: NoiseFilter::default(),
        progress: Progress::default(),
        marks: super::marks::Marks::new(spec.mark_lag),
        buf: Vec::new(),
        eof: false,
        exit: None,
        seen: super::Seen::default(),
        machine: crate::machine::Machine::new(
            super::ending::rules(spec, hold.cgroup().is_some()),
            crate::machine::Now::read(),
        ),
        want: None,
        input: VecDeque::new(),
        queued_input: 0,
        conn: None,
        greeted: false,
        pipe_bytes: 0,
        output_paused_until: None,
        listener,
        socket: ShimDir::at(spec.dir.clone()).socket_path(),
        bind_retry_at: None,
        uid: nix::unistd::getuid().as_raw(),
        start_time,
        session_id: spec.session_id.clone(),
        killed_by: None,
        hold,
        term_sent: std::collections::HashSet::new(),
        limits: crate::sys::limits::Applied::default(),
    }
}

/// Binds the socket 0600 from the start: under a 0177 umask, restored right after so
/// the job gets the usual one.
pub(super) fn bind_private(path: &std::path::Path) -> io::Result<UnixListener> {
    use nix::sys::stat::{Mode as FileMode, umask};
    let _ = std::fs::remove_file(path);
    let old = umask(FileMode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(path);
    umask(old);
    let listener = bound?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Points stdin, stdout and stderr at /dev/null: the daemon's pipes close, so its
/// read of the ready answer ends, and nothing the shim does later can block on them.
fn release_stdio() {
    let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    else {
        return;
    };
    let _ = nix::unistd::dup2_stdin(&null);
    let _ = nix::unistd::dup2_stdout(&null);
    let _ = nix::unistd::dup2_stderr(&null);
}
