//! Unix process-table reading (Linux `/proc`) and signal delivery for tree kill.
//!
//! `/proc/<pid>/stat` is parsed from the last `)`, because the command name in
//! field 2 may itself contain spaces and parentheses. Field 22 (`starttime`, clock
//! ticks since boot) is the identity of a process: a pid is reused by the kernel, a
//! (pid, start time) pair is not. A single process is signalled only through a
//! [`ProcHandle`], which opens a pidfd and *then* checks the start time recorded at
//! discovery, so the pidfd provably refers to the discovered process and
//! `pidfd_send_signal` cannot reach a stranger that got the pid later. Without pidfds
//! (Linux before 5.3) the start time is re-checked right before `kill`.
//!
//! Only Linux has the `/proc` table this reads; elsewhere the table is empty and
//! tree kill finds nothing to signal (herd supports Linux for now).
//!
//! Reads of `/proc` touch kernel memory only, never a disk, so the async caller runs
//! them inline instead of on the blocking pool.

use std::fs;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::task::{Context, Poll};

use nix::errno::Errno;
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// One row of the process table, as read from `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcInfo {
    /// Process id.
    pub(crate) pid: i32,
    /// Parent process id (field 4).
    pub(crate) ppid: i32,
    /// Process group id (field 5).
    pub(crate) pgrp: i32,
    /// Single-letter state (field 3); `Z` and `X` mean the process is dead.
    pub(crate) state: u8,
    /// Start time in clock ticks since boot (field 22).
    pub(crate) start_time: u64,
}

impl ProcInfo {
    /// Whether the process has exited (a zombie waiting for its parent, or dead).
    pub(crate) fn is_dead(&self) -> bool {
        matches!(self.state, b'Z' | b'X' | b'x')
    }

    /// Whether the process is still running (any state but dead or zombie).
    pub(crate) fn is_alive(&self) -> bool {
        !self.is_dead()
    }
}

/// Parses the contents of a `/proc/<pid>/stat` file.
///
/// Returns `None` for anything malformed. The command name (field 2) is skipped by
/// searching for the *last* `)`, so names such as `a) b (c` parse correctly.
pub(crate) fn parse_stat(pid: i32, text: &[u8]) -> Option<ProcInfo> {
    let close = text.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(text.get(close + 1..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    // After the `)`: field 3 is state, then 4 ppid, 5 pgrp, ..., 22 starttime.
    let state = *fields.next()?.as_bytes().first()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    // Fields 6..=21 are 16 fields we do not need; the 17th from here is field 22.
    let start_time = fields.nth(16)?.parse().ok()?;
    Some(ProcInfo {
        pid,
        ppid,
        pgrp,
        state,
        start_time,
    })
}

/// Reads one process's row of the table; `None` if it is gone or unreadable.
pub(crate) fn proc_info(pid: i32) -> Option<ProcInfo> {
    if pid <= 0 {
        return None;
    }
    // One open and one read into a stack buffer: a stat line is a few hundred
    // bytes, and `fs::read` would add a `statx` per process for its size hint.
    let mut file = fs::File::open(format!("/proc/{pid}/stat")).ok()?;
    let mut buf = [0u8; 2048];
    let n = file.read(&mut buf).ok()?;
    parse_stat(pid, buf.get(..n)?)
}

/// Start time of `pid` (field 22 of `/proc/<pid>/stat`), or `None` if the process
/// does not exist or its row cannot be read.
pub(crate) fn start_time(pid: i32) -> Option<u64> {
    proc_info(pid).map(|info| info.start_time)
}

/// What can be told of whether `pid` is still the process recorded with
/// `start_time` (any process holding `pid` when none was recorded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Identity {
    /// Its `/proc` row says so.
    Same,
    /// Gone, or another process holds the pid now.
    Other,
    /// Its row could not be opened for want of a descriptor (`EMFILE`, `ENFILE`).
    Unknown,
}

/// Whether `pid` is the process recorded with `start_time`; see [`Identity`].
pub(crate) fn identity(pid: i32, start_time: Option<u64>) -> Identity {
    if pid <= 0 {
        return Identity::Other;
    }
    let mut file = match fs::File::open(format!("/proc/{pid}/stat")) {
        Ok(file) => file,
        Err(error) if matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
            return Identity::Unknown;
        }
        Err(_) => return Identity::Other,
    };
    let mut buf = [0u8; 2048];
    let row = file
        .read(&mut buf)
        .ok()
        .and_then(|n| parse_stat(pid, buf.get(..n)?));
    match (row, start_time) {
        (Some(row), Some(recorded)) if row.start_time == recorded => Identity::Same,
        (Some(_), None) => Identity::Same,
        _ => Identity::Other,
    }
}

/// Reads the whole process table. Processes that vanish while it is read are
/// simply missing from the answer.
pub(crate) fn process_table() -> Vec<ProcInfo> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| {
        let entry = entry.ok()?;
        let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
        proc_info(pid)
    })
    .collect()
}

/// Real user id owning `pid`'s `/proc` entry, or `None` if it is gone.
pub(crate) fn owner_uid(pid: i32) -> Option<u32> {
    fs::metadata(format!("/proc/{pid}")).ok().map(|m| m.uid())
}

/// The uid this process runs as.
pub(crate) fn current_uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

/// What one read of a process's initial environment says about one variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EnvRead {
    /// Set, to this value.
    Set(String),
    /// The environment was read and the variable is not in it (or not UTF-8).
    Unset,
    /// Nothing was read: another user's process, a kernel thread, a process that
    /// has exited, or one between the two halves of an exec (its new image has no
    /// environment yet, and the kernel answers with nothing). A later read may tell.
    Unreadable,
}

/// Reads the variable `name` from `pid`'s initial environment.
pub(crate) fn environ_read(pid: i32, name: &str) -> EnvRead {
    match fs::read(format!("/proc/{pid}/environ")) {
        Ok(environ) if !environ.is_empty() => environ_lookup(&environ, name)
            .and_then(|value| std::str::from_utf8(value).ok())
            .map_or(EnvRead::Unset, |value| EnvRead::Set(value.to_owned())),
        _ => EnvRead::Unreadable,
    }
}

/// Value of the variable `name` in `pid`'s initial environment.
///
/// `None` when it is not set, not UTF-8, or the environment cannot be read
/// (see [`EnvRead::Unreadable`]).
pub(crate) fn environ_value(pid: i32, name: &str) -> Option<String> {
    match environ_read(pid, name) {
        EnvRead::Set(value) => Some(value),
        EnvRead::Unset | EnvRead::Unreadable => None,
    }
}

/// Value of `name` in a NUL-separated `NAME=value` block (the first entry wins,
/// as in `getenv`).
pub(crate) fn environ_lookup<'a>(environ: &'a [u8], name: &str) -> Option<&'a [u8]> {
    environ.split(|&b| b == 0).find_map(|entry| {
        entry
            .strip_prefix(name.as_bytes())
            .and_then(|rest| rest.strip_prefix(b"="))
    })
}

/// `pid`'s command line, its arguments joined by spaces (empty for a kernel thread
/// or a process that just exited).
pub(crate) fn cmdline(pid: i32) -> String {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    raw.split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(String::from_utf8_lossy)
        .collect::<Vec<_>>()
        .join(" ")
}

/// This process's own pid, never a valid kill target.
pub(crate) fn own_pid() -> i32 {
    std::process::id().cast_signed()
}

/// This process's own process group, never a valid group kill target.
pub(crate) fn own_pgrp() -> i32 {
    nix::unistd::getpgrp().as_raw()
}

/// Sends `sig` to the single process `pid`.
///
/// # Errors
/// The OS error: `ESRCH` when no such process exists, `EPERM` when it is not ours.
pub(crate) fn signal_pid(pid: i32, sig: Signal) -> Result<(), Errno> {
    if pid <= 1 || pid == own_pid() {
        return Err(Errno::EINVAL);
    }
    signal::kill(Pid::from_raw(pid), sig)
}

/// Sends `sig` to every member of process group `pgid`.
///
/// Refuses (`EINVAL`) group 0/1 and this process's own group, so a bad record can
/// never take down the daemon.
///
/// # Errors
/// The OS error: `ESRCH` when the group is empty, `EPERM` when none of it is ours.
pub(crate) fn signal_group(pgid: i32, sig: Signal) -> Result<(), Errno> {
    if pgid <= 1 || pgid == own_pgrp() {
        return Err(Errno::EINVAL);
    }
    signal::killpg(Pid::from_raw(pgid), sig)
}

/// Whether process group `pgid` still has at least one member (zombies included).
#[allow(
    dead_code,
    reason = "tests check that a killed group is gone; the registry may too"
)]
pub(crate) fn group_exists(pgid: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    // Signal 0 checks existence and permission without delivering anything.
    !matches!(signal::killpg(Pid::from_raw(pgid), None), Err(Errno::ESRCH))
}

/// A process pinned by identity: its pid, the start time it was discovered with, and
/// (on Linux 5.3+) a pidfd that keeps referring to that very process even if the pid
/// is reused. The pidfd can also be registered with the tokio reactor to learn of
/// the process's exit; one descriptor serves both.
///
/// Invariant: `start_time` was read *after* the pidfd was opened and matched the
/// start time recorded at discovery, so the pidfd refers to the discovered process
/// and never to a stranger that later received the same pid.
#[derive(Debug)]
pub(crate) struct ProcHandle {
    pid: i32,
    start_time: u64,
    pidfd: PidFd,
}

/// The pidfd of a [`ProcHandle`], if any, and whether the reactor watches it.
#[derive(Debug)]
enum PidFd {
    None,
    Open(OwnedFd),
    Watched(AsyncFd<OwnedFd>),
}

impl PidFd {
    fn as_fd(&self) -> Option<BorrowedFd<'_>> {
        match self {
            PidFd::None => None,
            PidFd::Open(fd) => Some(fd.as_fd()),
            PidFd::Watched(fd) => Some(fd.get_ref().as_fd()),
        }
    }
}

/// Why a [`ProcHandle`] could not be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenError {
    /// No process has this pid any more.
    Gone,
    /// A process with a different start time holds the pid now: a stranger.
    Reused,
}

impl ProcHandle {
    /// Pins `pid`, provided it still has `expected_start` as its start time.
    ///
    /// With `use_pidfd` false (the caller's descriptor budget is spent) no pidfd is
    /// opened: signals then re-check the start time right before `kill`.
    ///
    /// # Errors
    /// [`OpenError::Gone`] when the pid is free, [`OpenError::Reused`] when a
    /// different process holds it now.
    pub(crate) fn open(
        pid: i32,
        expected_start: u64,
        use_pidfd: bool,
    ) -> Result<ProcHandle, OpenError> {
        if pid <= 1 || pid == own_pid() {
            return Err(OpenError::Reused);
        }
        // Open first, verify second: if the start time still matches after the
        // pidfd exists, the pidfd refers to the process we discovered.
        let pidfd = match use_pidfd.then(|| pidfd_open(pid)) {
            Some(Ok(fd)) => PidFd::Open(fd),
            Some(Err(_)) | None => PidFd::None,
        };
        match start_time(pid) {
            None => Err(OpenError::Gone),
            Some(now) if now != expected_start => Err(OpenError::Reused),
            Some(_) => Ok(ProcHandle {
                pid,
                start_time: expected_start,
                pidfd,
            }),
        }
    }

    /// The pinned pid.
    pub(crate) fn pid(&self) -> i32 {
        self.pid
    }

    /// Whether the handle holds a pidfd (and so a file descriptor).
    pub(crate) fn has_pidfd(&self) -> bool {
        !matches!(self.pidfd, PidFd::None)
    }

    /// Whether [`ProcHandle::poll_exit`] can report the exit.
    pub(crate) fn is_watched(&self) -> bool {
        matches!(self.pidfd, PidFd::Watched(_))
    }

    /// Registers the pidfd with the tokio reactor, so [`ProcHandle::poll_exit`]
    /// reports the exit. Returns whether it is watched now: not without a pidfd or
    /// outside a tokio runtime.
    pub(crate) fn watch_exit(&mut self) -> bool {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.is_watched();
        }
        if let PidFd::Open(fd) = std::mem::replace(&mut self.pidfd, PidFd::None) {
            // SAFETY: `fd` is an open pidfd that the AsyncFd owns from here on; an
            // OwnedFd keeps returning the same descriptor until it is dropped with it.
            self.pidfd = match unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) } {
                Ok(watched) => PidFd::Watched(watched),
                Err(error) => PidFd::Open(error.into_parts().0),
            };
        }
        self.is_watched()
    }

    /// Polls for the process's exit (it became a zombie or was reaped).
    ///
    /// Once this returns `Ready` the handle stops watching (the pidfd stays open
    /// for signals), so a caller that keeps polling cannot spin on it. Without a
    /// watched pidfd it never returns `Ready`.
    pub(crate) fn poll_exit(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let PidFd::Watched(fd) = &self.pidfd else {
            return Poll::Pending;
        };
        let Poll::Ready(ready) = fd.poll_read_ready(cx) else {
            return Poll::Pending;
        };
        // Readable (exited) or broken: stop watching either way.
        drop(ready);
        if let PidFd::Watched(fd) = std::mem::replace(&mut self.pidfd, PidFd::None) {
            self.pidfd = PidFd::Open(fd.into_inner());
        }
        Poll::Ready(())
    }

    /// Sends `sig` to the pinned process and to nothing else.
    ///
    /// With a pidfd the signal goes through `pidfd_send_signal`, which cannot reach
    /// a process that reused the pid. Without one, the start time is checked again
    /// right before `kill`.
    ///
    /// # Errors
    /// `ESRCH` when the process has exited (or the pid was reused), other OS errors
    /// as returned.
    pub(crate) fn signal(&self, sig: Signal) -> Result<(), Errno> {
        if let Some(fd) = self.pidfd.as_fd() {
            return pidfd_send_signal(fd, sig);
        }
        // No pidfd: check the identity right before the signal.
        if start_time(self.pid) != Some(self.start_time) {
            return Err(Errno::ESRCH);
        }
        signal_pid(self.pid, sig)
    }
}

/// Sends `sig` through an owned pidfd (see [`ProcHandle::signal`]).
///
/// # Errors
/// The OS error (`ESRCH` once the process has exited).
pub(crate) fn pidfd_send_signal_fd(fd: &OwnedFd, sig: Signal) -> Result<(), Errno> {
    pidfd_send_signal(fd.as_fd(), sig)
}

#[cfg(target_os = "linux")]
fn pidfd_send_signal(fd: BorrowedFd<'_>, sig: Signal) -> Result<(), Errno> {
    use std::os::fd::AsRawFd;
    let null_info: *const libc::siginfo_t = std::ptr::null();
    // SAFETY: pidfd_send_signal(fd, sig, NULL, 0) reads no memory of ours (a NULL
    // siginfo means "as kill(2) would"); `fd` is a live pidfd we own.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig as libc::c_int,
            null_info,
            0u32,
        )
    };
    if rc < 0 { Err(Errno::last()) } else { Ok(()) }
}

#[cfg(not(target_os = "linux"))]
fn pidfd_send_signal(_fd: BorrowedFd<'_>, _sig: Signal) -> Result<(), Errno> {
    Err(Errno::ENOSYS)
}

/// Opens a pidfd for `pid`: a file descriptor that becomes readable when the
/// process exits (zombie or reaped), for any process, not only our children.
///
/// # Errors
/// The OS error: `ESRCH` when the process is gone, `ENOSYS` before Linux 5.3.
#[cfg(target_os = "linux")]
pub(crate) fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and a flags word and returns a new fd or -1;
    // it does not touch memory we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    // SAFETY: the kernel just returned this fd to us and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens a pidfd for `pid`; unsupported on this platform.
///
/// # Errors
/// Always `Unsupported`.
#[cfg(not(target_os = "linux"))]
pub(crate) fn pidfd_open(_pid: i32) -> io::Result<OwnedFd> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Leaves the caller's session and process tree: `setsid`, then a fork whose parent
/// exits at once. Returns in the child only, which is then nobody's child but init's
/// (or the nearest subreaper's) and leads no session, so it can never regain a
/// controlling terminal.
///
/// # Errors
/// The OS error of `setsid` or `fork`.
///
/// # Caveats
/// Only for a process with one thread: the shim calls it first thing in `main`.
pub(crate) fn detach_from_parent() -> io::Result<()> {
    nix::unistd::setsid()?;
    // SAFETY: the shim calls this before it starts any thread, so the child is a
    // complete copy of a single-threaded program and may run on as usual.
    match unsafe { nix::unistd::fork() }? {
        // SAFETY: `_exit` ends the intermediate process without running destructors
        // or flushing buffers the child still owns.
        nix::unistd::ForkResult::Parent { .. } => unsafe { libc::_exit(0) },
        nix::unistd::ForkResult::Child => Ok(()),
    }
}

/// Forks this single-threaded process: `Ok(None)` in the child, `Ok(Some(pid))` in
/// the parent.
///
/// # Errors
/// The OS error of `fork`.
///
/// # Caveats
/// Only for a process with one thread (the shim launcher).
pub(crate) fn fork_single_threaded() -> io::Result<Option<i32>> {
    // SAFETY: the launcher runs one thread, so the child is a complete copy of the
    // program and may run on as usual.
    match unsafe { nix::unistd::fork() }? {
        nix::unistd::ForkResult::Parent { child } => Ok(Some(child.as_raw())),
        nix::unistd::ForkResult::Child => Ok(None),
    }
}
