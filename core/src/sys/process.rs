//! Making processes where another kernel would do it differently: a child born
//! inside a cgroup (`clone3` with `CLONE_INTO_CGROUP`), and a supervisor that adopts
//! its descendants' orphans (`PR_SET_CHILD_SUBREAPER`).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use nix::fcntl::OFlag;

/// `CLONE_INTO_CGROUP` (Linux 5.7).
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` up to its `cgroup` field (`CLONE_ARGS_SIZE_VER2`).
#[repr(C)]
#[derive(Debug, Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// Makes this process the reaper of its descendants: a process whose parent exits is
/// re-parented to it instead of to init, so it can wait for it and list it.
///
/// # Errors
/// The OS error (`EINVAL` before Linux 3.4).
pub(crate) fn adopt_orphans() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)
}

/// A cgroup directory held open for [`fork_into_cgroup`] (an `O_PATH` descriptor:
/// nothing can be read or written through it).
#[derive(Debug)]
pub(crate) struct CgroupHandle(OwnedFd);

impl CgroupHandle {
    /// Opens the cgroup directory `dir`.
    ///
    /// # Errors
    /// The OS error of the open.
    pub(crate) fn open(dir: &Path) -> io::Result<CgroupHandle> {
        let fd = nix::fcntl::open(
            dir,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )?;
        Ok(CgroupHandle(fd))
    }
}

/// Forks a child that is born inside the cgroup `cgroup`: it never runs outside it,
/// and nothing is migrated. The child runs `child`, which execs or exits (one that
/// returns ends the child with status 127); the parent gets the child's pid.
///
/// # Errors
/// The OS error of the clone when the kernel refuses it (before Linux 5.7, or a
/// cgroup that takes no process): no child was made.
///
/// # Safety
/// As `fork`: only in a single-threaded process, and `child` makes only
/// async-signal-safe calls on memory prepared before this call.
pub(crate) unsafe fn fork_into_cgroup(
    cgroup: &CgroupHandle,
    child: impl FnOnce(),
) -> io::Result<i32> {
    let args = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: u64::try_from(cgroup.0.as_raw_fd()).unwrap_or(0),
        ..CloneArgs::default()
    };
    // SAFETY: clone3 without CLONE_VM is a fork; the caller vouches for `child`,
    // the only code the child runs.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            std::ptr::from_ref(&args),
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if rc == 0 {
        child();
        // SAFETY: a child that came back ends here, running nothing of the parent's.
        unsafe { libc::_exit(127) }
    }
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    i32::try_from(rc).map_err(|_| io::Error::other("child pid out of range"))
}

/// This program's file, for an exec of itself: its path while that still names the
/// running image (the new process is then named as this one is), else
/// `/proc/self/exe`, the image itself even when its file was replaced or removed
/// since: either way the same build.
pub(crate) fn own_image() -> std::ffi::CString {
    use std::os::unix::fs::MetadataExt;
    const SELF: &str = "/proc/self/exe";
    let same = |path: &std::path::Path| {
        let (Ok(named), Ok(running)) = (std::fs::metadata(path), std::fs::metadata(SELF)) else {
            return false;
        };
        named.dev() == running.dev() && named.ino() == running.ino()
    };
    std::fs::read_link(SELF)
        .ok()
        .filter(|path| same(path))
        .and_then(|path| {
            std::ffi::CString::new(std::os::unix::ffi::OsStringExt::into_vec(
                path.into_os_string(),
            ))
            .ok()
        })
        .unwrap_or_else(|| c"/proc/self/exe".to_owned())
}

/// Runs the CPU feature detection the libraries do lazily (std's cache, which
/// `memchr` and the searchers read), so the processes forked from this one inherit
/// its answer instead of each asking again: `cpuid` traps to the hypervisor on a
/// virtual machine, about 12 µs a time, and a detection asks about ten times.
pub(crate) fn detect_cpu_features_before_forks() {
    #[cfg(target_arch = "x86_64")]
    {
        let _ = std::arch::is_x86_feature_detected!("avx2");
    }
    let _ = memchr::memchr(b'\n', b"detect");
    let _ = memchr::memmem::find(b"detect", b"te");
}
