//! Signals as a descriptor, and the reset of inherited signal dispositions.
//!
//! The single-threaded loops (the shim, the launcher) wait for their descriptors and
//! their signals in one poll: the signals are blocked and read from a descriptor that
//! becomes readable while one is pending ([`SignalWatch`], a Linux `signalfd`). The
//! reset goes through the raw `rt_sigaction` system call, because the C library
//! refuses the real-time signals it reserves for itself.

use std::os::fd::{AsFd, BorrowedFd};

use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

/// Signals blocked for the calling thread and read through a descriptor instead of
/// being delivered. Non-blocking and close-on-exec: no job inherits it.
#[derive(Debug)]
pub(crate) struct SignalWatch {
    fd: SignalFd,
}

impl SignalWatch {
    /// Blocks `signals` for the calling thread and returns a descriptor that is
    /// readable while one of them is pending.
    ///
    /// # Errors
    /// The OS error of the mask change or of the descriptor.
    pub(crate) fn block(signals: &[Signal]) -> nix::Result<SignalWatch> {
        let mut mask = SigSet::empty();
        for signal in signals {
            mask.add(*signal);
        }
        mask.thread_block()?;
        let fd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)?;
        Ok(SignalWatch { fd })
    }

    /// Takes every pending signal off the descriptor; the set of those taken.
    pub(crate) fn take_pending(&self) -> SigSet {
        let mut taken = SigSet::empty();
        while let Ok(Some(info)) = self.fd.read_signal() {
            if let Ok(signal) = Signal::try_from(info.ssi_signo.cast_signed()) {
                taken.add(signal);
            }
        }
        taken
    }
}

impl AsFd for SignalWatch {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Resets every ignored signal of this process to its default disposition, except
/// those in `keep_ignored`; handlers stay. After an exec a disposition is either the
/// default or "ignore", so this puts every inherited one back at its default. The
/// dispositions the kernel refuses to change (SIGKILL, SIGSTOP) are skipped, and so
/// is any signal whose disposition cannot be read.
pub(crate) fn reset_ignored_dispositions(keep_ignored: &[libc::c_int]) {
    // The raw system call, not the C library's `sigaction`: glibc refuses the two
    // real-time signals it reserves (32 and 33), and a caller may have ignored them.
    // A zeroed kernel `sigaction` is SIG_DFL with no flags and an empty mask; four
    // words cover its layout on every architecture.
    const SIGSET_BYTES: libc::c_long = 8;
    for signal in 1..=libc::SIGRTMAX() {
        if matches!(signal, libc::SIGKILL | libc::SIGSTOP) || keep_ignored.contains(&signal) {
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
}
