//! The platform boundary of this crate: the Linux-only reads [`crate::Host::current`]
//! makes about its own process (`docs/porting.md` says what they map to elsewhere).
//! Each is `None` where there is no `/proc`.

/// This process's short name (`/proc/self/comm`).
pub(crate) fn own_comm() -> Option<String> {
    std::fs::read_to_string("/proc/self/comm").ok()
}

/// This process's command line, NUL-separated (`/proc/self/cmdline`).
pub(crate) fn own_cmdline() -> Option<Vec<u8>> {
    std::fs::read("/proc/self/cmdline").ok()
}

/// This process's cgroup lines (`/proc/self/cgroup`).
pub(crate) fn own_cgroup() -> Option<String> {
    std::fs::read_to_string("/proc/self/cgroup").ok()
}
