//! The checkpoint files of herd releases before the store: `<home>/processes.json`
//! (version 1, `{"version": 1, "sessions": [entry, ...]}`) and one
//! `<home>/processes.pending/<id>.json` per session spawned since its last full write
//! (`{"version": 1, "entry": {...}}`). An entry is a [`SessionRecord`] flattened
//! beside its `writer` (pid and start time).
//!
//! [`import`] reads them once, when the store is first opened on a home that has
//! them: every usable entry becomes a row of `sessions` (a row already there wins),
//! in one transaction, under the old writers' `flock` on `processes.json.lock`, and
//! the files are removed only after that commit. A crash before it leaves the files
//! for the next start; a crash after it leaves at most files whose rows exist.
//!
//! Invariant: a checkpoint that cannot be understood (not JSON, wrong shape,
//! unknown version) is never dropped: it is renamed to
//! `processes.json.corrupt-<unix time>` and the rename is reported to the caller.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::Connection;
use serde::Deserialize;

use crate::atomic::{self, FileLock};
use crate::{CHECKPOINT_VERSION, CheckpointEntry, CheckpointProblem, MovedAside};
use crate::{Error, Home};

/// How old a pending temp file must be before a load sweeps it: a release before
/// the store that still runs on this home may be writing it.
const PENDING_TEMP_AGE: std::time::Duration = std::time::Duration::from_secs(60);

/// The on-disk shape of a version-1 checkpoint.
#[derive(Debug, Deserialize)]
struct FileV1 {
    version: u64,
    sessions: Vec<CheckpointEntry>,
}

/// The on-disk shape of a version-1 pending entry.
#[derive(Debug, Deserialize)]
struct PendingV1 {
    version: u64,
    entry: CheckpointEntry,
}

/// Whether `home` holds checkpoint files of an earlier release.
pub(super) fn present(home: &Home) -> bool {
    exists(&home.checkpoint_path()).unwrap_or(true)
        || exists(&home.checkpoint_pending_dir()).unwrap_or(true)
}

/// Imports the files into `sessions` through `insert` (one transaction on `conn`)
/// and removes them once committed. Returns the unusable checkpoint it moved aside.
///
/// # Errors
/// [`Error::CheckpointLock`], [`Error::CheckpointRead`] and
/// [`Error::CheckpointMoveAside`] for the files (nothing is imported then), and
/// [`Error::StoreQuery`] when the rows cannot be committed (the files stay).
pub(super) fn import(
    home: &Home,
    conn: &Connection,
    db_path: &Path,
    insert: impl Fn(&Connection, &CheckpointEntry) -> rusqlite::Result<()>,
) -> Result<Option<MovedAside>, Error> {
    let lock_path = lock_path(home);
    let _lock = FileLock::acquire(&lock_path).map_err(|source| Error::CheckpointLock {
        path: lock_path.clone(),
        source,
    })?;
    atomic::sweep_temps(home.root(), "processes.json", None);
    let (mut entries, moved_aside) = match read_full(home)? {
        Full::Missing => (Vec::new(), None),
        Full::Entries(entries) => (entries, None),
        Full::MovedAside(moved) => (Vec::new(), Some(moved)),
    };
    let listed: HashSet<String> = entries.iter().map(|e| e.session.id.clone()).collect();
    let (pending, pending_files) = read_pending(home);
    entries.extend(
        pending
            .into_iter()
            .filter(|e| !listed.contains(&e.session.id)),
    );
    let commit = || -> rusqlite::Result<()> {
        let tx = conn.unchecked_transaction()?;
        for entry in &entries {
            insert(&tx, entry)?;
        }
        tx.commit()
    };
    commit().map_err(|source| Error::StoreQuery {
        path: db_path.to_path_buf(),
        action: "import the checkpoint of an earlier release",
        source,
    })?;
    tracing::info!(
        n_sessions = entries.len(),
        "checkpoint files of an earlier release imported into the state database"
    );
    for path in pending_files {
        remove_quietly(&path);
    }
    let _ = fs::remove_dir(home.checkpoint_pending_dir());
    remove_quietly(&home.checkpoint_path());
    remove_quietly(&lock_path);
    Ok(moved_aside)
}

fn lock_path(home: &Home) -> PathBuf {
    suffixed(&home.checkpoint_path(), ".lock")
}

fn remove_quietly(path: &Path) {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if atomic::is_missing(&e) => {}
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "imported checkpoint file not removed; it is imported again (harmlessly) at the next start");
        }
    }
}

/// `processes.json` as found under the lock.
enum Full {
    Missing,
    Entries(Vec<CheckpointEntry>),
    MovedAside(MovedAside),
}

fn read_full(home: &Home) -> Result<Full, Error> {
    let path = home.checkpoint_path();
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if atomic::is_missing(&e) => return Ok(Full::Missing),
        Err(source) => return Err(Error::CheckpointRead { path, source }),
    };
    match decode(&bytes) {
        Ok(entries) => Ok(Full::Entries(entries)),
        Err(problem) => move_aside(home, problem).map(Full::MovedAside),
    }
}

/// Every readable pending entry and the files read; unreadable ones are removed
/// with a warning.
fn read_pending(home: &Home) -> (Vec<CheckpointEntry>, Vec<PathBuf>) {
    let dir = home.checkpoint_pending_dir();
    let listing = match fs::read_dir(&dir) {
        Ok(listing) => listing,
        Err(e) if atomic::is_missing(&e) => return (Vec::new(), Vec::new()),
        Err(error) => {
            tracing::warn!(dir = %dir.display(), %error, "pending checkpoint entries not readable; sessions spawned just before a crash may not be restored");
            return (Vec::new(), Vec::new());
        }
    };
    let mut entries = Vec::new();
    let mut files = Vec::new();
    let mut temp_targets = Vec::new();
    for item in listing.flatten() {
        let name = item.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(target) = atomic::temp_target(name) {
            temp_targets.push(target.to_owned());
            continue;
        }
        let Some(id) = name.strip_suffix(".json") else {
            continue;
        };
        let path = item.path();
        let decoded = fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                serde_json::from_slice::<PendingV1>(&bytes).map_err(|e| e.to_string())
            })
            .and_then(|file| {
                if file.version != CHECKPOINT_VERSION {
                    Err(format!("unknown version {}", file.version))
                } else if file.entry.session.id != id {
                    Err(format!("the entry is for {}", file.entry.session.id))
                } else {
                    Ok(file.entry)
                }
            });
        match decoded {
            Ok(entry) => {
                entries.push(entry);
                files.push(path);
            }
            Err(problem) => {
                tracing::warn!(path = %path.display(), %problem, "unusable pending checkpoint entry removed (only a machine crash leaves one; its session did not survive that)");
                let _ = fs::remove_file(&path);
            }
        }
    }
    atomic::sweep_temps_of(&dir, temp_targets, Some(PENDING_TEMP_AGE));
    entries.sort_by(|a, b| a.session.id.cmp(&b.session.id));
    (entries, files)
}

/// Decodes a checkpoint, saying precisely what is wrong when it cannot.
pub(super) fn decode(bytes: &[u8]) -> Result<Vec<CheckpointEntry>, CheckpointProblem> {
    if let Ok(file) = serde_json::from_slice::<FileV1>(bytes)
        && file.version == CHECKPOINT_VERSION
    {
        return Ok(file.sessions);
    }
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| CheckpointProblem::Unreadable {
            detail: e.to_string(),
        })?;
    match value.get("version") {
        Some(v) if v.as_u64() == Some(CHECKPOINT_VERSION) => {
            serde_json::from_value::<FileV1>(value)
                .map(|file| file.sessions)
                .map_err(|e| CheckpointProblem::Unreadable {
                    detail: e.to_string(),
                })
        }
        Some(v) => Err(CheckpointProblem::UnknownVersion {
            found: v.to_string(),
        }),
        None => Err(CheckpointProblem::UnknownVersion {
            found: "none".to_owned(),
        }),
    }
}

fn move_aside(home: &Home, problem: CheckpointProblem) -> Result<MovedAside, Error> {
    let from = home.checkpoint_path();
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut to = suffixed(&from, &format!(".corrupt-{secs}"));
    let mut n = 1;
    // We hold the lock, so no other herd races us between the check and the rename.
    while exists(&to).unwrap_or(true) {
        to = suffixed(&from, &format!(".corrupt-{secs}-{n}"));
        n += 1;
    }
    let result = fs::rename(&from, &to).and_then(|()| atomic::fsync_dir(home.root()));
    match result {
        Ok(()) => {
            let moved = MovedAside { from, to, problem };
            tracing::error!(
                from = %moved.from.display(),
                to = %moved.to.display(),
                problem = %moved.problem,
                "unusable checkpoint moved aside"
            );
            Ok(moved)
        }
        Err(source) => Err(Error::CheckpointMoveAside {
            path: from,
            to,
            problem,
            source,
        }),
    }
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn exists(path: &Path) -> io::Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if atomic::is_missing(&e) => Ok(false),
        Err(e) => Err(e),
    }
}
