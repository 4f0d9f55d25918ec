//! Atomic file replacement and the checkpoint's cross-process lock.
//!
//! A file is replaced by writing a temp file next to it (same directory, so the
//! rename cannot cross a file system), fsyncing the temp file, renaming it over
//! the target and fsyncing the directory so the rename itself is durable. A
//! reader therefore sees the old bytes or the new bytes, never a mix, and after
//! a crash at any point the target holds one complete version.
//!
//! Temp files are named `<target name>.tmp-<pid>-<n>`; a crash between create
//! and rename leaves one behind, which [`sweep_temps`] removes.
//!
//! Invariant: every file created here is mode 0600, set at `open` time (never
//! chmod afterwards, so there is no window where it is readable by others).

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// Mode of every file herd creates under a home.
pub(crate) const FILE_MODE: u32 = 0o600;

/// Distinguishes temp files of concurrent writes inside one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The marker between a target's name and a temp file's suffix.
const TEMP_MARKER: &str = ".tmp-";

/// Replaces `path` with `bytes` atomically for every process, without waiting
/// for the disk: the temp file is renamed over `path` unsynced. A crash of the
/// writing process at any point leaves the old or the new bytes (the kernel
/// keeps both); only a crash of the machine may leave an empty or torn file.
///
/// The parent directory must exist. On error the temp file is removed.
pub(crate) fn write_visible(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = temp_path(path)?;
    let result = write_then_rename_with(&tmp, path, bytes, false);
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn write_then_rename_with(tmp: &Path, path: &Path, bytes: &[u8], sync: bool) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(tmp)?;
    file.write_all(bytes)?;
    if sync {
        file.sync_all()?;
    }
    drop(file);
    fs::rename(tmp, path)
}

/// Makes the directory entry changes in `dir` (creates, renames) durable.
pub(crate) fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn temp_path(path: &Path) -> io::Result<PathBuf> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "an atomic write needs a path with a file name",
        )
    })?;
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut tmp_name = OsString::from(name);
    tmp_name.push(format!("{TEMP_MARKER}{}-{n}", std::process::id()));
    Ok(path.with_file_name(tmp_name))
}

/// Whether an error says the path does not exist: not found, or a path
/// component is a regular file (a home that is not there either).
pub(crate) fn is_missing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// The target a temp file belongs to (`<target>.tmp-<pid>-<n>`), or `None` when
/// `file_name` is not a temp file.
pub(crate) fn temp_target(file_name: &str) -> Option<&str> {
    file_name.split_once(TEMP_MARKER).map(|(target, _)| target)
}

/// [`sweep_temps`] for each of `targets` (duplicates allowed).
pub(crate) fn sweep_temps_of(dir: &Path, mut targets: Vec<String>, min_age: Option<Duration>) {
    targets.sort();
    targets.dedup();
    for target in &targets {
        sweep_temps(dir, target, min_age);
    }
}

/// Removes temp files left by interrupted writes of `target` (a file name in
/// `dir`), and returns how many were removed.
///
/// With `min_age` set, only temp files whose mtime is at least that old are
/// removed: callers that do not hold a lock against concurrent writers use it
/// so a write in progress keeps its temp file. Errors are logged, not returned:
/// a leftover temp file wastes space but never changes what is loaded.
pub(crate) fn sweep_temps(dir: &Path, target: &str, min_age: Option<Duration>) -> usize {
    let prefix = format!("{target}{TEMP_MARKER}");
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            tracing::debug!(dir = %dir.display(), %error, "temp sweep skipped");
            return 0;
        }
    };
    let now = SystemTime::now();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(&prefix) {
            continue;
        }
        if let Some(min_age) = min_age {
            let old_enough = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|mtime| now.duration_since(mtime).ok())
                .is_some_and(|age| age >= min_age);
            if !old_enough {
                continue;
            }
        }
        match fs::remove_file(entry.path()) {
            Ok(()) => removed += 1,
            Err(error) => {
                tracing::warn!(path = %entry.path().display(), %error, "stale temp file not removed");
            }
        }
    }
    if removed > 0 {
        tracing::info!(dir = %dir.display(), target, removed, "stale temp files swept");
    }
    removed
}

/// An exclusive `flock` on a lock file, released when dropped.
#[derive(Debug)]
pub(crate) struct FileLock {
    /// Held open for the lock's lifetime; closing the descriptor releases it.
    _file: File,
}

impl FileLock {
    /// Opens (creating with mode 0600 if needed) and exclusively locks `path`,
    /// blocking until other holders release it.
    pub(crate) fn acquire(path: &Path) -> io::Result<FileLock> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(FILE_MODE)
            .open(path)?;
        file.lock()?;
        Ok(FileLock { _file: file })
    }
}
