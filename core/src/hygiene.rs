//! Start-up hygiene of herd's long-lived processes (the daemon and the shim
//! launcher, and a shim started on its own): whatever started them — a shell with
//! extra descriptors open, `nohup`, a service manager, an agent's harness — leaves no
//! trace in them, and so none in any job they start.
//!
//! [`clean_start`] closes every inherited descriptor above 2 (`close_range(3, ~0)`,
//! or one `close` per entry of `/proc/self/fd` where the kernel lacks it), resets
//! every ignored signal to its default disposition (also the two real-time signals
//! glibc reserves, which a caller had ignored on this very machine) and empties the
//! signal mask. SIGPIPE is
//! the exception: it stays ignored, as Rust's runtime set it before `main`, because
//! herd's processes expect `EPIPE` from a peer that left, not death; the jobs get it
//! at its default anyway (std's spawn resets it before each exec).
//!
//! `with_empty_signal_mask` is the job side: std's spawn does not reset the signal
//! mask, so a job started by a thread that blocks signals (a shim blocks SIGCHLD for
//! its signalfd) would start with them blocked.
//!
//! Why: a descriptor inherited by the daemon is inherited by the launcher, every shim
//! and every job, whoever starts them later. A pipe's write end kept open that way
//! holds its reader forever: `( herd ps 7>&1 >/dev/null ) | cat` never ended, because
//! the daemon `herd ps` autostarted kept fd 7. An ignored SIGHUP or SIGINT (`nohup`,
//! a shell's background job) would be ignored by every job too.

use std::io;

/// The lowest descriptor [`clean_start`] closes: 0, 1 and 2 stay.
const FIRST_EXTRA_FD: i32 = 3;

/// Closes inherited descriptors above 2 and resets signal state (see the module
/// documentation).
///
/// # Errors
/// The OS error of the mask reset or of listing `/proc/self/fd` when `close_range`
/// is missing. Dispositions the kernel refuses to change (SIGKILL, SIGSTOP, the
/// signals the C library reserves) are skipped.
///
/// # Caveats
/// Call it first thing, while the process has one thread and has opened nothing it
/// means to keep: every descriptor above 2 is closed.
pub fn clean_start() -> io::Result<()> {
    close_extra_descriptors()?;
    reset_signals()
}

/// Closes every descriptor above 2.
fn close_extra_descriptors() -> io::Result<()> {
    // SAFETY: close_range only closes descriptors; the caller opened none it keeps.
    let closed = unsafe { libc::syscall(libc::SYS_close_range, FIRST_EXTRA_FD, u32::MAX, 0) };
    if closed == 0 {
        return Ok(());
    }
    // Before Linux 5.9: list what is open, then close it. The listing's own
    // descriptor is closed by then, so closing its number again only fails (EBADF).
    let open: Vec<i32> = std::fs::read_dir("/proc/self/fd")?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd >= FIRST_EXTRA_FD)
        .collect();
    for fd in open {
        // SAFETY: as above; an fd that is no longer open gives EBADF, ignored.
        unsafe { libc::close(fd) };
    }
    Ok(())
}

/// Resets every ignored signal to its default disposition (SIGPIPE stays ignored)
/// and empties the signal mask. After an exec a disposition is either the default
/// or "ignore", so this is every signal back at its default; the handlers Rust's
/// runtime installed (stack-overflow guards) are kept.
fn reset_signals() -> io::Result<()> {
    // The raw system call, not the C library's `sigaction`: glibc refuses the two
    // real-time signals it reserves (32 and 33), and a caller may have ignored them.
    // A zeroed kernel `sigaction` is SIG_DFL with no flags and an empty mask; four
    // words cover its layout on every architecture.
    const SIGSET_BYTES: libc::c_long = 8;
    for signal in 1..=libc::SIGRTMAX() {
        if matches!(signal, libc::SIGKILL | libc::SIGSTOP | libc::SIGPIPE) {
            continue;
        }
        let mut old = [0u64; 4];
        let default = [0u64; 4];
        // SAFETY: `old` is large enough for the kernel's sigaction; a null new
        // action only reads the current one.
        let read = unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                libc::c_long::from(signal),
                std::ptr::null::<u64>(),
                old.as_mut_ptr(),
                SIGSET_BYTES,
            )
        };
        if read != 0 || old[0] != libc::SIG_IGN as u64 {
            continue;
        }
        // SAFETY: as above; the zeroed action is SIG_DFL.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                libc::c_long::from(signal),
                default.as_ptr(),
                std::ptr::null_mut::<u64>(),
                SIGSET_BYTES,
            );
        }
    }
    nix::sys::signal::SigSet::empty()
        .thread_set_mask()
        .map_err(io::Error::from)
}

/// Runs `spawn` with the calling thread's signal mask emptied, and restores the mask
/// afterwards: the child std starts (posix_spawn or fork) inherits the caller's mask.
///
/// # Caveats
/// A signal blocked by the caller and pending meanwhile is delivered while the mask
/// is empty: call it only where such a signal has its default disposition and that
/// is harmless (a shim's SIGCHLD before its job exists: it has no other child).
pub(crate) fn with_empty_signal_mask<T>(spawn: impl FnOnce() -> T) -> T {
    use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};
    let mut saved = SigSet::empty();
    let cleared = pthread_sigmask(
        SigmaskHow::SIG_SETMASK,
        Some(&SigSet::empty()),
        Some(&mut saved),
    );
    let result = spawn();
    if cleared.is_ok() && saved != SigSet::empty() {
        let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&saved), None);
    }
    result
}
