//! Start-up hygiene of herd's long-lived processes (the daemon and the shim
//! launcher, and a shim started on its own): whatever started them — a shell with
//! extra descriptors open, `nohup`, a service manager, an agent's harness — leaves no
//! trace in them, and so none in any job they start.
//!
//! [`clean_start`] closes every inherited descriptor above 2 (the platform's way is
//! `sys::descriptors::close_from`), resets every ignored signal to its default
//! disposition (also the two real-time signals glibc reserves, which a caller had
//! ignored on this very machine: `sys::signals::reset_ignored_dispositions`) and
//! empties the signal mask. SIGPIPE is the exception: it stays ignored, as Rust's
//! runtime set it before `main`, because herd's processes expect `EPIPE` from a peer
//! that left, not death; the jobs get it at its default anyway (std's spawn resets it
//! before each exec).
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
/// The OS error of the mask reset or of listing the open descriptors where the
/// kernel cannot close a range of them. Dispositions the kernel refuses to change
/// (SIGKILL, SIGSTOP, the signals the C library reserves) are skipped.
///
/// # Caveats
/// Call it first thing, while the process has one thread and has opened nothing it
/// means to keep: every descriptor above 2 is closed.
pub fn clean_start() -> io::Result<()> {
    clean_start_keeping(&[])
}

/// [`clean_start`], keeping the descriptors in `keep` open (ones a process was
/// handed across an exec on purpose, named on its command line).
///
/// # Errors
/// As [`clean_start`].
pub(crate) fn clean_start_keeping(keep: &[i32]) -> io::Result<()> {
    crate::sys::descriptors::close_from_except(FIRST_EXTRA_FD, keep)?;
    reset_signals()
}

/// Resets every ignored signal to its default disposition (SIGPIPE stays ignored)
/// and empties the signal mask. After an exec a disposition is either the default
/// or "ignore", so this is every signal back at its default; the handlers Rust's
/// runtime installed (stack-overflow guards) are kept.
fn reset_signals() -> io::Result<()> {
    crate::sys::signals::reset_ignored_dispositions(&[libc::SIGPIPE]);
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
