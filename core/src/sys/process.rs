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
/// On x86-64 the child is cloned as `vfork` makes one (`CLONE_VM | CLONE_VFORK`,
/// on a stack of its own): it shares this process's memory until its exec, so no
/// page table is copied for it nor torn down at the exec, it runs at once on this
/// CPU, and this process goes on only once the child has exec'd or exited. That
/// halves what the clone and the wait for the exec cost a supervisor (about
/// 400 µs to 190 µs a job on these hosts). Elsewhere, or when the kernel refuses
/// that clone, the child is forked.
///
/// # Errors
/// The OS error of the clone when the kernel refuses it (before Linux 5.7, or a
/// cgroup that takes no process): no child was made.
///
/// # Safety
/// As `fork`: only in a single-threaded process, and `child` makes only
/// async-signal-safe calls on memory prepared before this call, writing none of it
/// (the child may share this process's memory until its exec), and changes no
/// signal disposition to a handler; and this process has no signal handler a
/// signal to the child could run on the shared memory (the shim has none but the
/// runtime's stack-overflow ones for SIGSEGV and SIGBUS).
pub(crate) unsafe fn fork_into_cgroup(
    cgroup: &CgroupHandle,
    child: impl FnOnce(),
) -> io::Result<i32> {
    let mut child = std::mem::ManuallyDrop::new(child);
    #[cfg(all(target_arch = "x86_64", target_pointer_width = "64"))]
    {
        // SAFETY: the caller vouches for `child` as for a vfork child; after a
        // clone that made a child it is neither run nor dropped here again.
        match unsafe { vfork::clone_into(cgroup, &mut child) } {
            Ok(pid) => return Ok(pid),
            // No child was made: `child` is still ours, for the fork below.
            Err(error) => {
                tracing::debug!(%error, "a vfork-like clone into the cgroup was refused; forking");
            }
        }
    }
    let child = std::mem::ManuallyDrop::into_inner(child);
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

#[cfg(all(test, target_arch = "x86_64", target_pointer_width = "64"))]
pub(crate) use vfork::clone_into as vfork_into_cgroup;

/// The vfork-like clone of [`fork_into_cgroup`] (x86-64, not x32).
#[cfg(all(target_arch = "x86_64", target_pointer_width = "64"))]
mod vfork {
    use std::ffi::c_void;
    use std::io;
    use std::mem::ManuallyDrop;
    use std::os::fd::AsRawFd;

    use super::{CLONE_INTO_CGROUP, CgroupHandle, CloneArgs};

    /// `CLONE_VM`: the child shares the parent's memory.
    const CLONE_VM: u64 = 0x100;
    /// `CLONE_VFORK`: the parent sleeps until the child execs or exits.
    const CLONE_VFORK: u64 = 0x4000;
    /// The child's stack: `child_exec`'s few frames and libc's calls use under 1 KiB.
    const STACK_BYTES: usize = 64 * 1024;
    /// The inaccessible page below it: an overflow faults instead of writing the
    /// memory the child shares with this process.
    const GUARD_BYTES: usize = 4096;

    /// The child's stack: a private mapping, its lowest page a guard, unmapped
    /// when dropped (only the few pages the child touches ever get memory).
    struct Stack {
        base: *mut c_void,
    }

    impl Stack {
        fn map() -> io::Result<Stack> {
            // SAFETY: a new anonymous mapping; nothing else refers to it.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    GUARD_BYTES + STACK_BYTES,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let stack = Stack { base };
            // SAFETY: the first page of the mapping made just above.
            if unsafe { libc::mprotect(base, GUARD_BYTES, libc::PROT_NONE) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(stack)
        }

        /// Its lowest usable address (page-aligned, so the top is 16-byte aligned
        /// as the ABI wants for a call).
        fn bottom(&self) -> u64 {
            self.base as u64 + GUARD_BYTES as u64
        }
    }

    impl Drop for Stack {
        fn drop(&mut self) {
            // SAFETY: the mapping `map` made, no longer used (see `clone_into`).
            unsafe { libc::munmap(self.base, GUARD_BYTES + STACK_BYTES) };
        }
    }

    /// The child's first frame, on its own stack: runs the closure at `arg` (the
    /// parent's, read once) and ends the child if it comes back.
    extern "C" fn start<F: FnOnce()>(arg: *mut c_void) -> ! {
        // SAFETY: `arg` points at the parent's `ManuallyDrop<F>`, which the parent
        // neither runs nor drops once the clone made this child.
        let child = unsafe { std::ptr::read(arg.cast::<F>()) };
        child();
        // SAFETY: a child that came back ends here, running nothing of the parent's.
        unsafe { libc::_exit(127) }
    }

    /// Clones a child into `cgroup` that shares this process's memory and runs
    /// `child` on a stack of its own; returns once it has exec'd or exited.
    ///
    /// # Errors
    /// The OS error of the clone: then no child was made and `child` is untouched.
    ///
    /// # Safety
    /// As [`super::fork_into_cgroup`].
    pub(crate) unsafe fn clone_into<F: FnOnce()>(
        cgroup: &CgroupHandle,
        child: &mut ManuallyDrop<F>,
    ) -> io::Result<i32> {
        let stack = Stack::map()?;
        let args = CloneArgs {
            flags: CLONE_INTO_CGROUP | CLONE_VM | CLONE_VFORK,
            exit_signal: libc::SIGCHLD as u64,
            stack: stack.bottom(),
            stack_size: STACK_BYTES as u64,
            cgroup: u64::try_from(cgroup.0.as_raw_fd()).unwrap_or(0),
            ..CloneArgs::default()
        };
        let entry: extern "C" fn(*mut c_void) -> ! = start::<F>;
        let arg = std::ptr::from_mut(child).cast::<c_void>();
        let rc: i64;
        // SAFETY: clone3 returns twice. The parent goes on after the block with only
        // rax, rcx and r11 changed (the syscall's). The child starts at the same
        // point on `stack` (the kernel sets its stack pointer to the stack's top)
        // and calls `start`, which never returns; it shares this memory but writes
        // only its own stack and what the caller allowed. CLONE_VFORK keeps this
        // process from going on (and freeing `stack`) until the child has exec'd or
        // exited.
        unsafe {
            std::arch::asm!(
                "syscall",
                "test rax, rax",
                "jnz 2f",
                "xor ebp, ebp",
                "mov rdi, r13",
                "call r12",
                "ud2",
                "2:",
                inlateout("rax") libc::SYS_clone3 => rc,
                in("rdi") std::ptr::from_ref(&args),
                in("rsi") std::mem::size_of::<CloneArgs>(),
                in("r12") entry,
                in("r13") arg,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        drop(stack);
        if rc < 0 {
            let errno = i32::try_from(-rc).unwrap_or(libc::EINVAL);
            return Err(io::Error::from_raw_os_error(errno));
        }
        i32::try_from(rc).map_err(|_| io::Error::other("child pid out of range"))
    }
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
