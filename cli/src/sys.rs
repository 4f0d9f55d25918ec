//! The Linux-only calls of the `herd` binary, in one place (see `docs/porting.md`).

use std::os::fd::BorrowedFd;

/// Raises the buffer of the pipe `fd` to `bytes` (the kernel may cap it at
/// `/proc/sys/fs/pipe-max-size`); a refusal leaves the pipe as it was.
pub(crate) fn raise_pipe_buffer(fd: BorrowedFd<'_>, bytes: usize) {
    let size = i32::try_from(bytes).unwrap_or(i32::MAX);
    if let Err(error) = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETPIPE_SZ(size)) {
        tracing::debug!(%error, "the pipe keeps its buffer size");
    }
}
