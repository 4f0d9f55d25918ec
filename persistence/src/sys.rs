//! The platform boundary of this crate: the one Linux-only read it makes
//! (`docs/porting.md` says what it maps to elsewhere).

/// This process's `/proc/self/stat` line, or `None` where there is none.
pub(crate) fn own_stat() -> Option<String> {
    std::fs::read_to_string("/proc/self/stat").ok()
}
