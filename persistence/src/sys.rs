//! The platform boundary of this crate: the Linux-only things it uses
//! (`docs/porting.md` says what each maps to elsewhere).

/// This process's `/proc/self/stat` line, or `None` where there is none.
pub(crate) fn own_stat() -> Option<String> {
    std::fs::read_to_string("/proc/self/stat").ok()
}

/// `openat` flags for a directory handle used only to walk from (`O_PATH`: no read
/// permission needed, nothing can be read through it). macOS and FreeBSD have
/// `O_SEARCH` for this; elsewhere a plain `O_RDONLY | O_DIRECTORY`.
pub(crate) const DIR_HANDLE: libc::c_int = libc::O_PATH | libc::O_DIRECTORY;
