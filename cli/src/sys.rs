//! The Linux-only calls of the `herd` binary, behind one boundary: what each reads
//! of `/proc`, pipe buffer sizes, the client's own command line (`proctitle`) and
//! the heap's freed pages (`memory`). `docs/porting.md`
//! says what each maps to elsewhere (`proc_pidinfo`, `sysctl kern.proc`, `kinfo_proc`);
//! the rest of the binary calls these and names no `/proc` path itself.

use std::fmt::Display;
use std::os::fd::{BorrowedFd, RawFd};
use std::path::PathBuf;

pub(crate) mod memory;
pub(crate) mod proctitle;

/// The text of process `pid`'s `stat`; `None` when it cannot be read (gone,
/// another pid namespace).
pub(crate) fn stat(pid: impl Display) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()
}

/// Process `pid`'s argument vector, NUL-separated as the kernel keeps it.
pub(crate) fn cmdline(pid: impl Display) -> Option<Vec<u8>> {
    std::fs::read(format!("/proc/{pid}/cmdline")).ok()
}

/// Process `pid`'s environment, NUL-separated `NAME=value` entries; `None` when it
/// cannot be read (gone, another user's).
pub(crate) fn environ(pid: impl Display) -> Option<Vec<u8>> {
    std::fs::read(format!("/proc/{pid}/environ")).ok()
}

/// This boot's id (changes at every boot); empty when it cannot be read.
pub(crate) fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default()
}

/// A path that opens this process's descriptor `fd` again (and through which an
/// open executable can be executed).
pub(crate) fn own_fd_path(fd: RawFd) -> PathBuf {
    PathBuf::from(format!("/proc/{}/fd/{fd}", std::process::id()))
}

/// Raises the buffer of the pipe `fd` to `bytes` (the kernel may cap it at
/// `/proc/sys/fs/pipe-max-size`); a refusal leaves the pipe as it was.
pub(crate) fn raise_pipe_buffer(fd: BorrowedFd<'_>, bytes: usize) {
    let size = i32::try_from(bytes).unwrap_or(i32::MAX);
    if let Err(error) = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETPIPE_SZ(size)) {
        tracing::debug!(%error, "the pipe keeps its buffer size");
    }
}

/// The pids of every process this pid namespace shows; empty when none can be
/// listed.
pub(crate) fn pids() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect()
}
