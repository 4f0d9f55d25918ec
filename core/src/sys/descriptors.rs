//! Descriptor-wide operations: closing every descriptor from a number up, the
//! capacity of a pipe's kernel buffer, and moving a pipe's bytes into a file inside
//! the kernel.

use std::io;
use std::os::fd::BorrowedFd;

use nix::fcntl::{FcntlArg, fcntl};

/// Closes every descriptor of this process numbered `first` or above:
/// `close_range(first, ~0)`, or, before Linux 5.9, one `close` per entry of
/// `/proc/self/fd`.
///
/// # Errors
/// The OS error of listing `/proc/self/fd` when `close_range` is missing.
///
/// # Caveats
/// Closes descriptors the caller's libraries may hold: only for start-up, while the
/// process has one thread and has opened nothing it means to keep.
pub(crate) fn close_from(first: i32) -> io::Result<()> {
    let first_u = u32::try_from(first).unwrap_or(0);
    // SAFETY: close_range only closes descriptors; the caller opened none it keeps.
    let closed = unsafe { libc::syscall(libc::SYS_close_range, first_u, u32::MAX, 0) };
    if closed == 0 {
        return Ok(());
    }
    // List what is open, then close it. The listing's own descriptor is closed by
    // then, so closing its number again only fails (EBADF).
    let open: Vec<i32> = std::fs::read_dir("/proc/self/fd")?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd >= first)
        .collect();
    for fd in open {
        // SAFETY: as above; an fd that is no longer open gives EBADF, ignored.
        unsafe { libc::close(fd) };
    }
    Ok(())
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
