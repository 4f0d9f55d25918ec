//! A job born inside its session's cgroup (`sys::process::fork_into_cgroup`: Linux's
//! `clone3` with `CLONE_INTO_CGROUP`), on pipes or on a PTY.
//!
//! Moving a live process into a cgroup (a write to `cgroup.procs`, which is how the
//! forked child used to enter it before its exec) takes the kernel's global
//! threadgroup lock for writing, and without the `favordynmods` mount option that
//! waits for an RCU grace period: 5–30 ms on these hosts, most of a spawn's cost.
//! A child forked into the cgroup starts in it instead, with no migration at all, so
//! nothing it runs ever starts outside it either.
//!
//! The child then does only what std's `Command` would for the same launch, with
//! async-signal-safe calls on memory prepared before the clone: its pipes onto fds
//! 0–2, a process group of its own, SIGPIPE back to its default, the working
//! directory, and `execve`. An exec failure comes back through a close-on-exec pipe
//! as the OS error, as std reports it.
//!
//! Invariant: this runs only in a single-threaded process (the shim), like every
//! fork there; the caller falls back to the `cgroup.procs` way when the kernel
//! refuses the clone itself (before Linux 5.7, or a cgroup that takes no process).

use std::ffi::{CString, c_char};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::fcntl::{FcntlArg, OFlag, fcntl};

use super::{Launch, RawPipeChild};
use crate::sys::process::{CgroupHandle, fork_into_cgroup};

/// What the child's exec needs, made before the clone (nothing is allocated after).
struct Exec {
    program: CString,
    /// Keeps the strings `argv` points at alive.
    _args: Vec<CString>,
    argv: Vec<*const c_char>,
    _env: Vec<CString>,
    envp: Vec<*const c_char>,
    cwd: CString,
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a NUL byte in the command, its environment or its directory",
        )
    })
}

impl Exec {
    /// `None` when the program is not a path (std then searches `PATH` itself, which
    /// the caller leaves to it).
    fn new(launch: &Launch<'_>, arg0_as_given: bool) -> io::Result<Option<Exec>> {
        let Some((program, rest)) = launch.argv.split_first() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "empty shell argv",
            ));
        };
        let program = super::resolve_program(program, launch.env);
        if !program.as_os_str().as_bytes().contains(&b'/') {
            return Ok(None);
        }
        // argv[0] is the resolved path, as std's `Command::new(path)` passes it, or
        // (a PTY job) the word as given, as portable-pty passes it.
        let program = c_string(program.as_os_str().as_bytes())?;
        let mut args = Vec::with_capacity(launch.argv.len());
        args.push(match (arg0_as_given, launch.argv.first()) {
            (true, Some(word)) => c_string(word.as_bytes())?,
            _ => program.clone(),
        });
        for arg in rest {
            args.push(c_string(arg.as_bytes())?);
        }
        let mut env = Vec::with_capacity(launch.env.len());
        for (key, value) in launch.env {
            let mut pair = key.as_bytes().to_vec();
            pair.push(b'=');
            pair.extend_from_slice(value.as_bytes());
            env.push(c_string(&pair)?);
        }
        let argv = args
            .iter()
            .map(|a| a.as_ptr())
            .chain([std::ptr::null()])
            .collect();
        let envp = env
            .iter()
            .map(|e| e.as_ptr())
            .chain([std::ptr::null()])
            .collect();
        Ok(Some(Exec {
            program,
            _args: args,
            argv,
            _env: env,
            envp,
            cwd: c_string(launch.cwd.as_os_str().as_bytes())?,
        }))
    }
}

/// Starts `launch` in pipe mode inside the cgroup at `cgroup_dir`, leading its own
/// process group. `Ok(None)` when this way is not open (the kernel refused the
/// clone, or the program is to be searched on `PATH` by std): the caller then
/// starts it the `cgroup.procs` way, which also says why a cgroup refuses.
///
/// # Errors
/// The OS error of the pipes or of the job's exec.
pub(crate) fn spawn_pipe_into(
    launch: &Launch<'_>,
    cgroup_dir: &Path,
) -> io::Result<Option<RawPipeChild>> {
    let Some(exec) = Exec::new(launch, false)? else {
        return Ok(None);
    };
    let (out_r, out_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let (in_r, in_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    // The parent's ends are made non-blocking before the clone (each end is its own
    // open file description, so the child's ends stay blocking): once the job runs,
    // nothing can fail and start it a second time.
    for fd in [&out_r, &in_w] {
        set_nonblocking(fd)?;
    }
    let io = ChildIo::Pipes {
        stdin: &in_r,
        out: &out_w,
    };
    let Some(pid) = clone_into(&exec, cgroup_dir, io)? else {
        return Ok(None);
    };
    Ok(Some(RawPipeChild {
        pid,
        output: out_r,
        stdin: in_w,
    }))
}

/// Starts `launch` on a new PTY of `rows` x `cols` inside the cgroup at
/// `cgroup_dir`, as portable-pty would start it (a session of its own with the
/// PTY as its controlling terminal, the same signal dispositions reset, argv[0]
/// and `SHELL` as it sets them) but born in the cgroup: the shim no longer steps
/// into the job's cgroup and out again around the spawn. Returns the
/// job's pid and the PTY's master, non-blocking; `Ok(None)` when this way is not
/// open (as [`spawn_pipe_into`]).
///
/// # Errors
/// [`PtyFailure::Open`] when no PTY opens (nothing ran), [`PtyFailure::Spawn`]
/// with the OS error of the job's exec.
#[cfg(feature = "pty")]
pub(crate) fn spawn_pty_into(
    launch: &Launch<'_>,
    rows: u16,
    cols: u16,
    cgroup_dir: &Path,
) -> Result<Option<(i32, OwnedFd)>, super::PtyFailure> {
    use super::PtyFailure;
    let mut env = launch.env.clone();
    let shell = pty_shell(&env);
    env.insert("SHELL".into(), shell.into());
    let launch = Launch {
        argv: launch.argv.clone(),
        env: &env,
        cwd: launch.cwd,
    };
    let spawn_error = |e: io::Error| PtyFailure::Spawn(e.into());
    let Some(exec) = Exec::new(&launch, true).map_err(spawn_error)? else {
        return Ok(None);
    };
    let size = nix::pty::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None)
        .map_err(|e| PtyFailure::Open(anyhow::anyhow!("failed to openpty: {e}")))?;
    let cloexec =
        |fd: &OwnedFd| fcntl(fd, FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC)).map(|_| ());
    cloexec(&pty.master)
        .and_then(|()| cloexec(&pty.slave))
        .map_err(|e| PtyFailure::Open(anyhow::anyhow!("failed to set close-on-exec: {e}")))?;
    set_nonblocking(&pty.master).map_err(spawn_error)?;
    let io = ChildIo::Pty { slave: &pty.slave };
    match clone_into(&exec, cgroup_dir, io).map_err(spawn_error)? {
        Some(pid) => Ok(Some((pid, pty.master))),
        None => Ok(None),
    }
}

/// The `SHELL` portable-pty gives a PTY job: the environment's when it names an
/// executable, else the user's login shell, else `/bin/sh`.
#[cfg(feature = "pty")]
fn pty_shell(env: &std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString>) -> String {
    use nix::unistd::{AccessFlags, access};
    let executable = |path: &str| access(Path::new(path), AccessFlags::X_OK).is_ok();
    if let Some(shell) = env
        .get(std::ffi::OsStr::new("SHELL"))
        .and_then(|s| s.to_str())
        && executable(shell)
    {
        return shell.to_owned();
    }
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .and_then(|user| user.shell.to_str().map(str::to_owned))
        .filter(|shell| executable(shell))
        .unwrap_or_else(|| "/bin/sh".to_owned())
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// The job's standard streams, as its child side puts them on 0–2.
#[derive(Clone, Copy)]
enum ChildIo<'a> {
    /// stdin from one pipe, stdout and stderr into another; a process group of
    /// its own.
    Pipes {
        stdin: &'a OwnedFd,
        out: &'a OwnedFd,
    },
    /// A PTY's slave on all three, as the controlling terminal of a session of
    /// its own.
    #[cfg_attr(
        not(feature = "pty"),
        expect(
            dead_code,
            reason = "only PTY jobs, which need the pty feature, build it"
        )
    )]
    Pty { slave: &'a OwnedFd },
}

/// Clones a child into the cgroup at `cgroup_dir` that puts `io` on 0–2 and
/// execs `exec`; its pid, or `None` when the kernel refused the clone.
///
/// # Errors
/// The OS error of the cgroup's open, the error pipe or the job's exec.
fn clone_into(exec: &Exec, cgroup_dir: &Path, io: ChildIo<'_>) -> io::Result<Option<i32>> {
    let cgroup = CgroupHandle::open(cgroup_dir)?;
    let (err_r, err_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let pid = crate::hygiene::with_empty_signal_mask(|| {
        // SAFETY: the shim is single-threaded; the child runs only `child_exec`,
        // which makes async-signal-safe calls on memory prepared above and never
        // returns.
        unsafe { fork_into_cgroup(&cgroup, || child_exec(exec, io, &err_w)) }
    });
    let pid = match pid {
        Ok(pid) => pid,
        Err(error) => {
            tracing::debug!(%error, "clone3 into the session cgroup refused; entering it by cgroup.procs");
            return Ok(None);
        }
    };
    drop((err_w, cgroup));
    if let Some(errno) = exec_failure(&err_r) {
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
        return Err(io::Error::from_raw_os_error(errno));
    }
    Ok(Some(pid))
}

/// The child's errno when its exec failed; `None` when the pipe closed empty (the
/// exec happened).
fn exec_failure(err_r: &OwnedFd) -> Option<i32> {
    let mut buf = [0u8; 4];
    let mut got = 0;
    while got < buf.len() {
        match nix::unistd::read(err_r, &mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => break,
        }
    }
    (got == buf.len()).then(|| i32::from_ne_bytes(buf))
}

/// The child's side: never returns.
///
/// # Safety
/// Called only in the child of a fork-like clone of a single-threaded process.
unsafe fn child_exec(exec: &Exec, io: ChildIo<'_>, err_pipe: &OwnedFd) -> ! {
    // SAFETY: only async-signal-safe libc calls on prepared memory; `_exit` ends it.
    unsafe {
        let fail = |errno: i32| -> ! {
            let bytes = errno.to_ne_bytes();
            libc::write(err_pipe.as_raw_fd(), bytes.as_ptr().cast(), bytes.len());
            libc::_exit(127)
        };
        let errno = nix::errno::Errno::last_raw;
        let (stdin, out) = match io {
            ChildIo::Pipes { stdin, out } => (stdin, out),
            ChildIo::Pty { slave } => (slave, slave),
        };
        if let ChildIo::Pty { slave } = io {
            // As portable-pty's child: dispositions it may have inherited reset, a
            // session of its own, the PTY its controlling terminal (SIGWINCH).
            for signo in [
                libc::SIGCHLD,
                libc::SIGHUP,
                libc::SIGINT,
                libc::SIGQUIT,
                libc::SIGTERM,
                libc::SIGALRM,
            ] {
                libc::signal(signo, libc::SIG_DFL);
            }
            if libc::setsid() < 0 {
                fail(errno());
            }
            if libc::ioctl(slave.as_raw_fd(), libc::TIOCSCTTY, 0) < 0 {
                fail(errno());
            }
        }
        for (from, to) in [(stdin, 0), (out, 1), (out, 2)] {
            // dup2 onto the same number would keep close-on-exec; the pipes are
            // never 0-2 here (the shim's stdio is open), but be exact anyway.
            let rc = if from.as_raw_fd() == to {
                libc::fcntl(to, libc::F_SETFD, 0)
            } else {
                libc::dup2(from.as_raw_fd(), to)
            };
            if rc < 0 {
                fail(errno());
            }
        }
        if matches!(io, ChildIo::Pipes { .. }) && libc::setpgid(0, 0) < 0 {
            fail(errno());
        }
        // std's children start with SIGPIPE at its default, whatever Rust set.
        if libc::signal(libc::SIGPIPE, libc::SIG_DFL) == libc::SIG_ERR {
            fail(errno());
        }
        if libc::chdir(exec.cwd.as_ptr()) < 0 {
            fail(errno());
        }
        libc::execve(
            exec.program.as_ptr(),
            exec.argv.as_ptr(),
            exec.envp.as_ptr(),
        );
        fail(errno())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::cgroup::{own_cgroup, v2_mount};
    use std::collections::BTreeMap;
    use std::os::fd::AsFd;

    /// The cgroup a test may make children in: beside this process's own, or none
    /// (fails instead under `HERD_REQUIRE_CGROUP=1`, as CI sets it).
    fn test_parent() -> Option<std::path::PathBuf> {
        let found = v2_mount().and_then(|mount| {
            let own = own_cgroup()?;
            let parent = mount.join(own.trim_start_matches('/'));
            // One per test: tests run at once in this process.
            static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let probe = parent.join(format!("herd-clone3-probe-{}-{n}", std::process::id()));
            std::fs::create_dir(&probe).ok()?;
            Some(probe)
        });
        if found.is_none() {
            assert_ne!(
                std::env::var("HERD_REQUIRE_CGROUP").as_deref(),
                Ok("1"),
                "HERD_REQUIRE_CGROUP=1 but no writable cgroup v2 directory beside this test's own"
            );
        }
        found
    }

    #[test]
    fn b15_a_pipe_child_is_born_in_the_cgroup_by_clone3() {
        let Some(dir) = test_parent() else {
            return;
        };
        let env: BTreeMap<std::ffi::OsString, std::ffi::OsString> =
            [("PATH".into(), "/usr/bin:/bin".into())].into();
        let launch = Launch {
            argv: vec!["/bin/cat".into(), "/proc/self/cgroup".into()],
            env: &env,
            cwd: Path::new("/"),
        };
        let started = spawn_pipe_into(&launch, &dir);
        let child = started
            .expect("the spawn works")
            .expect("clone3 into the cgroup is taken, not the cgroup.procs way");
        // Read to the end, blocking (the parent's end came non-blocking).
        fcntl(&child.output, FcntlArg::F_SETFL(OFlag::empty())).expect("fcntl");
        let mut shown = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match nix::unistd::read(child.output.as_fd(), &mut buf) {
                Ok(0) => break,
                Ok(n) => shown.extend_from_slice(&buf[..n]),
                Err(nix::errno::Errno::EINTR) => {}
                Err(error) => panic!("reading the child's output: {error}"),
            }
        }
        let status = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(child.pid), None);
        let _ = std::fs::remove_dir(&dir);
        assert!(
            matches!(status, Ok(nix::sys::wait::WaitStatus::Exited(_, 0))),
            "{status:?}"
        );
        let shown = String::from_utf8_lossy(&shown);
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        assert!(
            shown
                .lines()
                .any(|l| l.starts_with("0::") && l.ends_with(&format!("/{name}"))),
            "the child's first cgroup is not the one asked for: {shown}"
        );
    }

    #[cfg(all(target_arch = "x86_64", target_pointer_width = "64"))]
    #[test]
    fn b15_the_job_is_cloned_into_the_cgroup_sharing_the_supervisors_memory_until_it_execs_or_exits()
     {
        let Some(dir) = test_parent() else {
            return;
        };
        let cgroup = CgroupHandle::open(&dir).expect("open the cgroup");
        let shared = std::sync::atomic::AtomicBool::new(false);
        // The child writes the parent's memory (only a test's child may) and exits:
        // seen here, once the clone returned, only if the child shared this memory
        // and the clone waited for it.
        let mut child = std::mem::ManuallyDrop::new(|| {
            shared.store(true, std::sync::atomic::Ordering::SeqCst);
            // SAFETY: ends the child.
            unsafe { libc::_exit(7) }
        });
        // SAFETY: the child makes one store and one async-signal-safe call.
        let pid = unsafe { crate::sys::process::vfork_into_cgroup(&cgroup, &mut child) };
        let seen = shared.load(std::sync::atomic::Ordering::SeqCst);
        let status = match &pid {
            Ok(pid) => Ok(nix::sys::wait::waitpid(
                nix::unistd::Pid::from_raw(*pid),
                None,
            )),
            Err(error) => Err(error.to_string()),
        };
        drop(cgroup);
        let _ = std::fs::remove_dir(&dir);
        let pid = pid.expect("the kernel takes CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP");
        assert!(
            seen,
            "the child's store is seen as soon as the clone returns"
        );
        assert!(
            matches!(status, Ok(Ok(nix::sys::wait::WaitStatus::Exited(p, 7))) if p.as_raw() == pid),
            "the child {pid} ended: {status:?}"
        );
    }

    #[test]
    fn b15_an_exec_or_chdir_failing_in_the_cgroup_child_is_the_spawns_error_and_leaves_no_child() {
        let Some(dir) = test_parent() else {
            return;
        };
        let scratch = tempfile::tempdir().expect("tempdir");
        let not_executable = scratch.path().join("not-executable");
        std::fs::write(&not_executable, "#!/bin/sh\necho ran\n").expect("write the script");
        let env: BTreeMap<std::ffi::OsString, std::ffi::OsString> =
            [("PATH".into(), "/usr/bin:/bin".into())].into();
        // A file without an execute bit: the exec's EACCES, root or not.
        let launch = Launch {
            argv: vec![not_executable.to_string_lossy().into_owned()],
            env: &env,
            cwd: Path::new("/"),
        };
        let exec_error = spawn_pipe_into(&launch, &dir).map(|c| c.map(|c| c.pid));
        // A working directory that is gone: the chdir's ENOENT, before the exec.
        let gone = scratch.path().join("gone");
        let launch = Launch {
            argv: vec!["/bin/true".into()],
            env: &env,
            cwd: &gone,
        };
        let chdir_error = spawn_pipe_into(&launch, &dir).map(|c| c.map(|c| c.pid));
        let left = std::fs::read_to_string(dir.join("cgroup.procs")).expect("cgroup.procs");
        let _ = std::fs::remove_dir(&dir);
        assert_eq!(
            exec_error.as_ref().map_err(io::Error::raw_os_error),
            Err(Some(libc::EACCES)),
            "{exec_error:?}"
        );
        assert_eq!(
            chdir_error.as_ref().map_err(io::Error::raw_os_error),
            Err(Some(libc::ENOENT)),
            "{chdir_error:?}"
        );
        assert_eq!(
            left, "",
            "a failed child was reaped, none is left in the cgroup"
        );
    }

    #[cfg(feature = "pty")]
    #[test]
    fn b15_a_pty_child_is_born_in_the_cgroup_by_clone3_with_its_terminal() {
        let Some(dir) = test_parent() else {
            return;
        };
        let env: BTreeMap<std::ffi::OsString, std::ffi::OsString> =
            [("PATH".into(), "/usr/bin:/bin".into())].into();
        let launch = Launch {
            argv: vec![
                "/bin/sh".into(),
                "-c".into(),
                "cat /proc/self/cgroup; echo x > /dev/tty && echo has-ctty; echo \"shell=$SHELL\""
                    .into(),
            ],
            env: &env,
            cwd: Path::new("/"),
        };
        let started = spawn_pty_into(&launch, 24, 80, &dir);
        let Ok(Some((pid, master))) = started else {
            panic!("clone3 into the cgroup is taken for a PTY job");
        };
        // Read to the end, blocking: a PTY master ends with EIO once the job and
        // its terminal are gone.
        fcntl(&master, FcntlArg::F_SETFL(OFlag::empty())).expect("fcntl");
        let mut shown = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match nix::unistd::read(master.as_fd(), &mut buf) {
                Ok(0) | Err(nix::errno::Errno::EIO) => break,
                Ok(n) => shown.extend_from_slice(&buf[..n]),
                Err(nix::errno::Errno::EINTR) => {}
                Err(error) => panic!("reading the job's terminal: {error}"),
            }
        }
        let status = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
        let _ = std::fs::remove_dir(&dir);
        assert!(
            matches!(status, Ok(nix::sys::wait::WaitStatus::Exited(_, 0))),
            "{status:?}"
        );
        let shown = String::from_utf8_lossy(&shown);
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        assert!(
            shown
                .lines()
                .any(|l| l.starts_with("0::") && l.trim_end().ends_with(&format!("/{name}"))),
            "the job's first cgroup is not the one asked for: {shown}"
        );
        assert!(
            shown.contains("has-ctty"),
            "the PTY is not the job's controlling terminal: {shown}"
        );
        assert!(
            shown.contains("shell=/"),
            "SHELL is set as portable-pty sets it: {shown}"
        );
    }
}
