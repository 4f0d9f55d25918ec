//! Starting a child: the command rewrite, the sanitised environment and the two
//! local backends (pipe and PTY).
//!
//! Pipe mode: one pipe carries both stdout and stderr (the write end is duplicated onto
//! fds 1 and 2), so their order is the order the child wrote them; stdin is a second
//! pipe. The child leads a new process group, so a tree kill reaches everything it
//! starts without leaving it. Every pipe end herd keeps is close-on-exec, so no child
//! inherits another session's pipes. A job starts with an empty signal mask whatever
//! the spawning thread blocks (`hygiene::with_empty_signal_mask`: std does not reset it).
//!
//! PTY mode goes through portable-pty, which makes the child a session leader with the
//! PTY as its controlling terminal. herd reads and writes the master through its own
//! non-blocking registration with the runtime, so a PTY session needs no reader thread;
//! only its exit status is collected on the blocking pool, because portable-pty hands
//! back a `std::process::Child`.

use crate::lock_order::{Mutex, rank};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

/// The environment variable that tags every child with its session id; the kill
/// engineer's escapee scan relies on it.
pub(crate) use crate::kill::SESSION_TAG_ENV;

/// Rewrites a top-level `A && B &` (or `A || B &`) to `A && { B & }`, so only the last
/// command goes to the background rather than the whole chain. Anything else is
/// returned unchanged.
pub(crate) fn rewrite_compound_background(command: &str) -> Cow<'_, str> {
    let trimmed = command.trim_end();
    let bytes = trimmed.as_bytes();
    let n = bytes.len();
    if n < 2 || bytes[n - 1] != b'&' || matches!(bytes[n - 2], b'&' | b'>' | b'|' | b'\\') {
        return Cow::Borrowed(command);
    }
    let body = &trimmed[..n - 1];
    let b = body.as_bytes();
    let mut last_and_or: Option<usize> = None;
    let mut depth = 0usize;
    let mut i = 0;
    let (mut single, mut double) = (false, false);
    while i < b.len() {
        let c = b[i];
        if single {
            single = c != b'\'';
        } else if c == b'\\' {
            i += 1;
        } else if double {
            double = c != b'"';
        } else {
            match c {
                b'\'' => single = true,
                b'"' => double = true,
                b'(' | b'{' | b'`' if c != b'`' || depth == 0 => depth += 1,
                b'`' => depth = depth.saturating_sub(1),
                b')' | b'}' => depth = depth.saturating_sub(1),
                _ if depth > 0 => {}
                b'&' | b'|' if b.get(i + 1) == Some(&c) => {
                    last_and_or = Some(i);
                    i += 1;
                }
                b';' | b'\n' => last_and_or = None,
                b'&' if i == 0 || (b[i - 1] != b'>' && b.get(i + 1) != Some(&b'>')) => {
                    last_and_or = None;
                }
                _ => {}
            }
        }
        i += 1;
    }
    if single || double || depth != 0 {
        return Cow::Borrowed(command);
    }
    match last_and_or {
        Some(pos) => {
            let tail = body[pos + 2..].trim();
            if tail.is_empty() {
                return Cow::Borrowed(command);
            }
            Cow::Owned(format!("{} {{ {tail} & }}", body[..pos + 2].trim_end()))
        }
        None => Cow::Borrowed(command),
    }
}

/// Whether `name` matches a deny pattern (`*` matches any run; ASCII case ignored).
/// Allocation-free: it runs for every host variable against every pattern per spawn.
pub(crate) fn glob_matches(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            backtrack = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi].eq_ignore_ascii_case(&n[ni]) {
            pi += 1;
            ni += 1;
        } else if let Some((star, at)) = backtrack {
            pi = star + 1;
            ni = at + 1;
            backtrack = Some((star, at + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == b'*')
}

/// The deny patterns, sorted once by shape so that judging a name costs a length
/// check or a suffix compare per pattern, not a backtracking walk: every host variable
/// of every spawn is judged against every pattern (about 1,600 walks a spawn with the
/// built-in list, a twentieth of the daemon's work for a short job). It denies exactly
/// the names [`glob_matches`] matches.
#[derive(Debug, Clone, Default)]
pub(crate) struct DenyList {
    /// Patterns without `*`: the whole name, ASCII case ignored.
    exact: Vec<Box<[u8]>>,
    /// `*` then a literal: the name's end.
    suffix: Vec<Box<[u8]>>,
    /// A literal then `*`: the name's start.
    prefix: Vec<Box<[u8]>>,
    /// Any other shape, walked by [`glob_matches`].
    glob: Vec<String>,
}

impl DenyList {
    pub(crate) fn new(patterns: &[String]) -> DenyList {
        let mut list = DenyList::default();
        for pattern in patterns {
            let bytes = pattern.as_bytes();
            let stars = bytes.iter().filter(|b| **b == b'*').count();
            let literal = |from: usize, to: usize| bytes[from..to].to_vec().into_boxed_slice();
            match (stars, bytes.first(), bytes.last()) {
                (0, _, _) => list.exact.push(literal(0, bytes.len())),
                (1, Some(b'*'), _) if bytes.len() > 1 => {
                    list.suffix.push(literal(1, bytes.len()));
                }
                (1, _, Some(b'*')) if bytes.len() > 1 => {
                    list.prefix.push(literal(0, bytes.len() - 1));
                }
                _ => list.glob.push(pattern.clone()),
            }
        }
        list
    }

    /// Whether a pattern matches `name` (ASCII case ignored).
    pub(crate) fn denies(&self, name: &str) -> bool {
        let n = name.as_bytes();
        let at_end =
            |lit: &[u8]| n.len() >= lit.len() && n[n.len() - lit.len()..].eq_ignore_ascii_case(lit);
        let at_start =
            |lit: &[u8]| n.len() >= lit.len() && n[..lit.len()].eq_ignore_ascii_case(lit);
        self.exact.iter().any(|lit| n.eq_ignore_ascii_case(lit))
            || self.suffix.iter().any(|lit| at_end(lit))
            || self.prefix.iter().any(|lit| at_start(lit))
            || self.glob.iter().any(|p| glob_matches(p, name))
    }
}

/// What a child's environment is built from.
#[derive(Debug)]
pub(crate) struct EnvPlan<'a> {
    pub(crate) deny: &'a DenyList,
    pub(crate) forward: &'a [String],
    pub(crate) overrides: &'a [(String, String)],
    pub(crate) scratch: &'a Path,
    pub(crate) session_id: &'a str,
    pub(crate) pty: bool,
}

/// This process's environment as text: variables whose name or value is not UTF-8
/// are left out (`std::env::vars` would panic on them).
pub fn utf8_environment() -> std::collections::HashMap<String, String> {
    std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .collect()
}

/// The child's environment: the host's own minus denied credential names
/// (unless forwarded), then the caller's overrides, then herd's fixed entries.
///
/// A host name that is not valid UTF-8 is dropped whatever the lists say: the deny
/// patterns cannot be judged against it, and a forward list (UTF-8 names) cannot name
/// it, so keeping it would be the one way a credential could pass unjudged. A forward
/// is an exact, case-sensitive name, the way the OS compares names; it lets through
/// only the host's value of that name. Values are never judged, so a UTF-8 name with a
/// non-UTF-8 value passes like any other.
pub(crate) fn child_env(
    plan: &EnvPlan<'_>,
    host: impl Iterator<Item = (OsString, OsString)>,
) -> BTreeMap<OsString, OsString> {
    let mut env: BTreeMap<OsString, OsString> = host
        .filter(|(name, _)| name.to_str().is_some_and(|name| is_passed(plan, name)))
        .collect();
    for (k, v) in plan.overrides {
        env.insert(k.into(), v.into());
    }
    env.insert("TMPDIR".into(), plan.scratch.as_os_str().to_owned());
    env.insert("PYTHONUNBUFFERED".into(), "1".into());
    env.insert(herd_guards::SUPERVISED_CHILD_ENV.into(), "1".into());
    env.insert(SESSION_TAG_ENV.into(), plan.session_id.into());
    if plan.pty {
        for name in ["PAGER", "GIT_PAGER"] {
            env.entry(name.into()).or_insert_with(|| "cat".into());
        }
        env.entry("TERM".into())
            .or_insert_with(|| "xterm-256color".into());
    }
    env
}

/// Whether the host's `name` reaches the child: forwarded, or matching no deny pattern.
fn is_passed(plan: &EnvPlan<'_>, name: &str) -> bool {
    plan.forward.iter().any(|f| f == name) || !plan.deny.denies(name)
}

/// What the OS is asked to run.
#[derive(Debug)]
pub(crate) struct Launch<'a> {
    pub(crate) argv: Vec<String>,
    pub(crate) env: &'a BTreeMap<OsString, OsString>,
    pub(crate) cwd: &'a Path,
}

/// A child started through pipes.
#[derive(Debug)]
pub(crate) struct PipeChild {
    pub(crate) child: tokio::process::Child,
    pub(crate) pid: i32,
    pub(crate) output: pipe::Receiver,
    pub(crate) stdin: pipe::Sender,
}

/// Starts `launch` in pipe mode, leading its own process group.
///
/// # Errors
/// The OS error of pipe creation or spawn; when it fails after the child started, the
/// child's group is killed and the child reaped first.
pub(crate) fn spawn_pipe(launch: &Launch<'_>) -> io::Result<PipeChild> {
    let (out_r, out_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let (in_r, in_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let err_w = out_w.try_clone()?;
    let mut child = {
        let mut cmd = base_command(launch)?;
        cmd.stdin(Stdio::from(in_r))
            .stdout(Stdio::from(out_w))
            .stderr(Stdio::from(err_w))
            .process_group(0);
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.kill_on_drop(false);
        crate::hygiene::with_empty_signal_mask(|| cmd.spawn())?
        // `cmd` drops here, closing herd's copies of the child's ends, so EOF arrives
        // when the last writer in the child's tree closes its end.
    };
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| io::Error::other("spawned child has no pid"))?;
    let handles = pipe::Receiver::from_owned_fd(out_r)
        .and_then(|rx| Ok((rx, pipe::Sender::from_owned_fd(in_w)?)));
    match handles {
        Ok((output, stdin)) => Ok(PipeChild {
            child,
            pid,
            output,
            stdin,
        }),
        Err(error) => {
            reap_group(pid);
            let _ = child.start_kill();
            drop(tokio::spawn(async move { child.wait().await }));
            Err(error)
        }
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "herd-core's spawning code is the one place allowed to build a Command"
)]
fn base_command(launch: &Launch<'_>) -> io::Result<std::process::Command> {
    let (program, args) = launch
        .argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty shell argv"))?;
    // A program resolved to a path up front lets std use posix_spawn (vfork-like)
    // instead of fork: with an explicit environment containing PATH, std must fork to
    // search the child's PATH itself, and fork copies the daemon's page tables.
    let program = resolve_program(program, launch.env);
    let mut cmd = std::process::Command::new(&program);
    cmd.args(args)
        .env_clear()
        .envs(launch.env)
        .current_dir(launch.cwd);
    Ok(cmd)
}

/// `program` as an absolute path found on the child's `PATH` the way the shell finds
/// it, or unchanged when it already names a path or is not found that way (std then
/// searches itself, and the OS reports a missing program).
fn resolve_program(program: &str, env: &BTreeMap<OsString, OsString>) -> std::path::PathBuf {
    if program.contains('/') {
        return program.into();
    }
    direct::find_on_path(program, env).unwrap_or_else(|| program.into())
}

/// Raises a pipe's kernel buffer to 1 MiB once a session proves chatty; idle sessions
/// keep the default so thousands of them do not eat the per-user pipe quota. Returns
/// the buffer's size afterwards (0 when unknown).
pub(crate) fn raise_pipe_buffer(fd: BorrowedFd<'_>) -> usize {
    match crate::sys::descriptors::set_pipe_capacity(fd, 1 << 20) {
        Ok(size) => size,
        Err(error) => {
            tracing::debug!(%error, "could not raise the pipe buffer; reading at the default size");
            crate::sys::descriptors::pipe_capacity(fd).unwrap_or(0)
        }
    }
}

/// The master side of a session's PTY, registered with the runtime.
///
/// Invariant: `raw` is the master fd owned by `master`, which lives as long as `self`.
pub(crate) struct MasterFd {
    raw: RawFd,
    /// Owns the master fd; dropping it closes the PTY.
    _master: Mutex<MasterHandle, { rank::MASTER }>,
}

/// What owns a PTY master: portable-pty's, or the descriptor of one opened here
/// for a job born in its cgroup (`into_cgroup::spawn_pty_into`).
#[cfg(feature = "pty")]
enum MasterHandle {
    Portable(Box<dyn portable_pty::MasterPty + Send>),
    Own(std::os::fd::OwnedFd),
}
/// Built without the `pty` feature no PTY is ever opened.
#[cfg(not(feature = "pty"))]
type MasterHandle = std::convert::Infallible;

impl std::fmt::Debug for MasterFd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterFd").field("raw", &self.raw).finish()
    }
}

impl AsRawFd for MasterFd {
    fn as_raw_fd(&self) -> RawFd {
        self.raw
    }
}

impl AsFd for MasterFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: `raw` is the open master fd owned by `self.master`, which is only
        // dropped together with `self`, so the fd outlives the returned borrow.
        unsafe { BorrowedFd::borrow_raw(self.raw) }
    }
}

/// A child started on a PTY.
#[derive(Debug)]
pub(crate) struct PtyChild {
    pub(crate) child: Box<std::process::Child>,
    pub(crate) pid: i32,
    pub(crate) master: AsyncFd<MasterFd>,
}

/// Why a PTY spawn failed.
#[derive(Debug)]
pub(crate) enum PtyFailure {
    /// No PTY could be opened; nothing ran, so a pipe fallback is safe.
    Open(anyhow::Error),
    /// The PTY opened but the child could not start.
    Spawn(anyhow::Error),
}

/// A child started on a PTY, before its master is registered with a runtime (the
/// shim drives it with poll(2) itself).
pub(crate) struct RawPtyChild {
    pub(crate) child: Box<std::process::Child>,
    pub(crate) pid: i32,
    pub(crate) master: MasterFd,
}

impl std::fmt::Debug for RawPtyChild {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawPtyChild")
            .field("pid", &self.pid)
            .finish()
    }
}

/// Built without the `pty` feature: no PTY opens, so nothing runs and the caller
/// falls back to pipes.
#[cfg(not(feature = "pty"))]
pub(crate) fn spawn_pty_raw(
    _launch: &Launch<'_>,
    _rows: u16,
    _cols: u16,
    _force_open_failure: bool,
) -> Result<RawPtyChild, PtyFailure> {
    Err(PtyFailure::Open(anyhow::anyhow!(
        "this herd-core was built without its `pty` feature"
    )))
}

/// Starts `launch` on a new PTY of `rows` x `cols`; the master is non-blocking.
#[cfg(feature = "pty")]
pub(crate) fn spawn_pty_raw(
    launch: &Launch<'_>,
    rows: u16,
    cols: u16,
    force_open_failure: bool,
) -> Result<RawPtyChild, PtyFailure> {
    if force_open_failure {
        return Err(PtyFailure::Open(anyhow::anyhow!(
            "PTY support disabled by configuration"
        )));
    }
    let pair = portable_pty::native_pty_system()
        .openpty(portable_pty::PtySize {
            rows,
            cols,
            pixel_width: 0,
            pixel_height: 0,
        })
        .map_err(PtyFailure::Open)?;
    let mut builder = portable_pty::CommandBuilder::new(&launch.argv[0]);
    builder.args(&launch.argv[1..]);
    builder.env_clear();
    for (k, v) in launch.env {
        builder.env(k, v);
    }
    builder.cwd(launch.cwd);
    let child = crate::hygiene::with_empty_signal_mask(|| pair.slave.spawn_command(builder))
        .map_err(PtyFailure::Spawn)?;
    // The slave must not stay open here, or the master never sees end-of-file.
    drop(pair.slave);
    let child: Box<dyn portable_pty::Child> = child;
    let child = child
        .downcast::<std::process::Child>()
        .map_err(|_| PtyFailure::Spawn(anyhow::anyhow!("unexpected portable-pty child type")))?;
    let pid = i32::try_from(child.id()).map_err(|e| PtyFailure::Spawn(e.into()))?;
    let master = pair
        .master
        .as_raw_fd()
        .ok_or_else(|| anyhow::anyhow!("pty master has no fd"))
        .and_then(|raw| {
            let fd = MasterFd {
                raw,
                _master: Mutex::new(MasterHandle::Portable(pair.master)),
            };
            let flags = OFlag::from_bits_retain(fcntl(fd.as_fd(), FcntlArg::F_GETFL)?);
            fcntl(fd.as_fd(), FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
            Ok(fd)
        });
    match master {
        Ok(master) => Ok(RawPtyChild { child, pid, master }),
        Err(error) => {
            reap_group(pid);
            let mut child = child;
            // Reaped where the caller can wait: on a runtime's blocking pool, or
            // right here in a process without one (the shim).
            if tokio::runtime::Handle::try_current().is_ok() {
                drop(tokio::task::spawn_blocking(move || child.wait()));
            } else {
                let _ = child.wait();
            }
            Err(PtyFailure::Spawn(error))
        }
    }
}

/// Starts `launch` on a new PTY of `rows` x `cols`, its master registered with the
/// runtime.
pub(crate) fn spawn_pty(
    launch: &Launch<'_>,
    rows: u16,
    cols: u16,
    force_open_failure: bool,
) -> Result<PtyChild, PtyFailure> {
    let RawPtyChild { child, pid, master } = spawn_pty_raw(launch, rows, cols, force_open_failure)?;
    // SAFETY: `master.raw` is the open master fd owned by `master`; the AsyncFd owns
    // `master`, so the descriptor stays open and unchanged for its lifetime.
    match unsafe { AsyncFd::register(master) } {
        Ok(master) => Ok(PtyChild { child, pid, master }),
        Err(error) => {
            reap_group(pid);
            let mut child = child;
            drop(tokio::task::spawn_blocking(move || child.wait()));
            Err(PtyFailure::Spawn(error.into_parts().1.into()))
        }
    }
}

/// A child started through pipes whose exit the caller collects itself (the shim
/// reaps with waitpid).
#[derive(Debug)]
pub(crate) struct RawPipeChild {
    pub(crate) pid: i32,
    /// The read end of the child's stdout and stderr, non-blocking.
    pub(crate) output: std::os::fd::OwnedFd,
    /// The write end of the child's stdin, non-blocking.
    pub(crate) stdin: std::os::fd::OwnedFd,
}

/// Starts `launch` in pipe mode, leading its own process group, without a runtime;
/// the child moves itself into each cgroup whose `cgroup.procs` is in `enter` before
/// its exec (so nothing it runs ever starts outside them).
///
/// # Errors
/// The OS error of pipe creation or spawn (a cgroup that refused the child included).
pub(crate) fn spawn_pipe_raw(
    launch: &Launch<'_>,
    enter: Vec<std::ffi::CString>,
) -> io::Result<RawPipeChild> {
    let (out_r, out_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let (in_r, in_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let err_w = out_w.try_clone()?;
    let child = {
        let mut cmd = base_command(launch)?;
        cmd.stdin(Stdio::from(in_r))
            .stdout(Stdio::from(out_w))
            .stderr(Stdio::from(err_w))
            .process_group(0);
        if !enter.is_empty() {
            // SAFETY: the closure runs in the forked child before exec and calls only
            // open/write/close on paths prepared before the fork (no allocation).
            unsafe {
                cmd.pre_exec(move || {
                    for procs in &enter {
                        crate::sys::cgroup::enter_c(procs)?;
                    }
                    Ok(())
                });
            }
        }
        crate::hygiene::with_empty_signal_mask(|| cmd.spawn())?
        // `cmd` drops here, closing our copies of the child's ends.
    };
    let pid = i32::try_from(child.id()).map_err(|_| io::Error::other("child pid out of range"))?;
    // Dropping a std Child neither kills nor waits: the caller reaps it.
    drop(child);
    for fd in [&out_r, &in_w] {
        let flags = OFlag::from_bits_retain(fcntl(fd.as_fd(), FcntlArg::F_GETFL)?);
        fcntl(fd.as_fd(), FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    }
    Ok(RawPipeChild {
        pid,
        output: out_r,
        stdin: in_w,
    })
}

/// Starts a session supervisor (the shim): `argv` with `env`, its stdin and stdout
/// piped to the caller, stderr discarded. The shim leaves the caller's process tree
/// itself (setsid, then a fork whose parent exits at once).
///
/// # Errors
/// The OS error of the spawn.
pub(crate) fn spawn_shim(
    argv: &[String],
    env: &BTreeMap<OsString, OsString>,
) -> io::Result<tokio::process::Child> {
    let launch = Launch {
        argv: argv.to_vec(),
        env,
        cwd: Path::new("/"),
    };
    let mut cmd = base_command(&launch)?;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.kill_on_drop(false);
    cmd.spawn()
}

impl MasterFd {
    /// Sets the terminal's window size (the program gets SIGWINCH).
    ///
    /// # Errors
    /// The PTY layer's error.
    #[cfg(not(feature = "pty"))]
    pub(crate) fn resize(&self, _rows: u16, _cols: u16) -> Result<(), String> {
        let master = self
            ._master
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match *master {}
    }

    /// Sets the terminal's window size (the program gets SIGWINCH).
    ///
    /// # Errors
    /// The PTY layer's error.
    #[cfg(feature = "pty")]
    pub(crate) fn resize(&self, rows: u16, cols: u16) -> Result<(), String> {
        let master = self
            ._master
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let size = portable_pty::PtySize {
            rows,
            cols,
            pixel_width: 0,
            pixel_height: 0,
        };
        match &*master {
            MasterHandle::Portable(master) => master.resize(size).map_err(|e| e.to_string()),
            MasterHandle::Own(fd) => {
                let size = libc::winsize {
                    ws_row: rows,
                    ws_col: cols,
                    ws_xpixel: 0,
                    ws_ypixel: 0,
                };
                // SAFETY: TIOCSWINSZ reads one `winsize` from the pointer, which
                // outlives the call; `fd` is the open master.
                let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, &size) };
                if rc == 0 {
                    Ok(())
                } else {
                    Err(format!(
                        "failed to ioctl(TIOCSWINSZ): {}",
                        io::Error::last_os_error()
                    ))
                }
            }
        }
    }

    /// The master `fd` of a PTY opened here, owned from now on.
    #[cfg(feature = "pty")]
    pub(crate) fn owned(fd: std::os::fd::OwnedFd) -> MasterFd {
        MasterFd {
            raw: fd.as_raw_fd(),
            _master: Mutex::new(MasterHandle::Own(fd)),
        }
    }
}

mod direct;
mod into_cgroup;
mod judge;
pub(crate) mod restart_loop;

pub(crate) use direct::direct_argv;
pub(crate) use into_cgroup::spawn_pipe_into;
#[cfg(feature = "pty")]
pub(crate) use into_cgroup::spawn_pty_into;
pub(crate) use judge::judge;

#[cfg(test)]
mod tests;

/// SIGKILLs the group of a child whose setup failed after it started; the caller then
/// reaps the child itself.
fn reap_group(pgid: i32) {
    if let Err(error) = crate::sys::signal_group(pgid, nix::sys::signal::Signal::SIGKILL) {
        tracing::debug!(%error, pgid, "group of a failed spawn already gone");
    }
}
