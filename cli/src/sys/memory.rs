//! Giving the heap's freed pages back to the system (glibc's `malloc_trim`).

/// Returns the heap's free pages to the system (glibc); nothing elsewhere.
pub(crate) fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes no pointer and only walks malloc's own state
        // under its locks; it is safe to call from any thread at any time.
        let _ = unsafe { libc::malloc_trim(0) };
    }
}
