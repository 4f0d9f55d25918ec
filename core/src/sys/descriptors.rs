//! Descriptor-wide operations: closing every descriptor from a number up, the
//! capacity of a pipe's kernel buffer, and moving a pipe's bytes into a file inside
//! the kernel.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use nix::fcntl::{FcntlArg, fcntl};

/// Closes every descriptor of this process numbered `first` or above but those in
/// `keep`: `close_range` over the gaps, or, before Linux 5.9, one `close` per entry
/// of `/proc/self/fd`.
///
/// # Errors
/// The OS error of listing `/proc/self/fd` when `close_range` is missing.
///
/// # Caveats
/// Closes descriptors the caller's libraries may hold: only for start-up, while the
/// process has one thread and has opened nothing it means to keep but `keep`.
pub(crate) fn close_from_except(first: i32, keep: &[i32]) -> io::Result<()> {
    let mut kept: Vec<i32> = keep.iter().copied().filter(|&fd| fd >= first).collect();
    kept.sort_unstable();
    kept.dedup();
    let mut from = first;
    let mut ranged = true;
    for next in kept.iter().copied().chain([i32::MAX]) {
        if next > from {
            let low = u32::try_from(from).unwrap_or(0);
            let high = u32::try_from(next - 1).unwrap_or(u32::MAX);
            let high = if next == i32::MAX { u32::MAX } else { high };
            // SAFETY: close_range only closes descriptors; the caller keeps none in
            // this gap.
            ranged &= unsafe { libc::syscall(libc::SYS_close_range, low, high, 0) } == 0;
        }
        from = next.saturating_add(1);
    }
    if ranged {
        return Ok(());
    }
    // List what is open, then close it. The listing's own descriptor is closed by
    // then, so closing its number again only fails (EBADF).
    let open: Vec<i32> = std::fs::read_dir("/proc/self/fd")?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd >= first && kept.binary_search(&fd).is_err())
        .collect();
    for fd in open {
        // SAFETY: as above; an fd that is no longer open gives EBADF, ignored.
        unsafe { libc::close(fd) };
    }
    Ok(())
}

/// Takes ownership of the descriptor `fd` this process was handed across an exec
/// (its number on the command line), and marks it close-on-exec again.
///
/// # Errors
/// `EBADF` when no descriptor `fd` is open.
pub(crate) fn adopt_inherited(fd: i32) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    if fd <= 2 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: F_GETFD only reads the descriptor's flags; an unopened number fails.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the number is open, and the exec that handed it over left it to this
    // process alone: nothing else in it owns or closes it.
    let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    set_close_on_exec(owned.as_fd(), true)?;
    Ok(owned)
}

/// Sets or clears `fd`'s close-on-exec flag.
///
/// # Errors
/// The OS error of the change.
pub(crate) fn set_close_on_exec(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    let flags = if on {
        nix::fcntl::FdFlag::FD_CLOEXEC
    } else {
        nix::fcntl::FdFlag::empty()
    };
    fcntl(fd, FcntlArg::F_SETFD(flags))
        .map(drop)
        .map_err(io::Error::from)
}

/// Asks for the pipe `fd`'s kernel buffer to hold `bytes` (the kernel may round it
/// up, or refuse above `/proc/sys/fs/pipe-max-size`); the capacity it has now.
///
/// # Errors
/// The OS error of the change (`EPERM` over the per-user pipe quota).
pub(crate) fn set_pipe_capacity(fd: BorrowedFd<'_>, bytes: usize) -> nix::Result<usize> {
    let size = i32::try_from(bytes).unwrap_or(i32::MAX);
    fcntl(fd, FcntlArg::F_SETPIPE_SZ(size)).map(|now| usize::try_from(now).unwrap_or(0))
}

/// The capacity of the pipe `fd`'s kernel buffer.
///
/// # Errors
/// The OS error (`EBADF` for a descriptor that is not a pipe).
pub(crate) fn pipe_capacity(fd: BorrowedFd<'_>) -> nix::Result<usize> {
    fcntl(fd, FcntlArg::F_GETPIPE_SZ).map(|now| usize::try_from(now).unwrap_or(0))
}

/// Moves up to `len` bytes from the pipe `pipe` into `file` at its offset inside the
/// kernel (`splice`), without waiting for an empty pipe: the count moved, 0 at the
/// pipe's end-of-file.
///
/// # Errors
/// `EAGAIN` when the pipe is empty but still open for writing; the OS error of the
/// move otherwise (`EINVAL` where the file's filesystem cannot take a splice). Bytes
/// the file did not take stay in the pipe.
pub(crate) fn splice_to_file(
    pipe: BorrowedFd<'_>,
    file: BorrowedFd<'_>,
    len: usize,
) -> nix::Result<usize> {
    use nix::fcntl::{SpliceFFlags, splice};
    splice(
        pipe,
        None,
        file,
        None,
        len,
        SpliceFFlags::SPLICE_F_NONBLOCK | SpliceFFlags::SPLICE_F_MOVE,
    )
}
