//! Thin reads of `/proc` for code outside `sys` that parses what it reads itself:
//! the platform boundary (`docs/porting.md`) holds the paths, the callers keep their
//! parsing (and their tests of it).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The text of `/proc/meminfo`.
pub(crate) fn meminfo() -> Option<String> {
    std::fs::read_to_string("/proc/meminfo").ok()
}

/// The text of `/proc/<pid>/cgroup`.
pub(crate) fn cgroup_of(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()
}

/// The text of `/proc/<pid>/stat`.
pub(crate) fn stat_of(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()
}

/// This process's cgroup file and the root the cgroup hierarchies are mounted under.
pub(crate) fn own_cgroup_file_and_root() -> (&'static Path, &'static Path) {
    (Path::new("/proc/self/cgroup"), Path::new("/sys/fs/cgroup"))
}

/// What descriptor `fd` of `pid` points at (`pipe:[123]`, a path).
pub(crate) fn fd_target(pid: i32, fd: i32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()
}

/// Opens what descriptor `fd` of `pid` points at, for reading, non-blocking.
pub(crate) fn open_fd_for_reading(pid: i32, fd: i32) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(format!("/proc/{pid}/fd/{fd}"))
}
