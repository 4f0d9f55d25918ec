//! The on-disk side of a session's supervisor process (the shim): its directory
//! `<home>/run/shims/<id>/`, the info record the shim writes once its job runs, and the
//! exit record it writes before it closes the job's log.
//!
//! These two records are the frozen part of the shim contract: whatever protocol a
//! shim speaks on its socket, a daemon of any later version can read `info.json`
//! (which process to stop) and `exit.json` (how the job ended). Both are JSON with a
//! `version` field; readers accept every version up to [`SHIM_RECORD_VERSION`] and
//! ignore unknown fields.
//!
//! Writes are atomic for every process (temp file, rename) but not fsynced: the records
//! must survive a crash of any herd process, and a crash of the machine ends the job
//! anyway, so restore then closes it as lost.
//!
//! A finished session's directory can be kept as a spare ([`ShimDir::retire_as_spare`])
//! and taken by a later session ([`ShimDir::create_from_spare`]): its records stay in it
//! under spare names (`.spare-info.json`, `.spare-exit.json`) and become the temp files
//! of the next shim's records, so a session then costs the file system no new inode
//! but its socket's. On ext4 without a journal every inode allocation skips the
//! inodes freed in the last 5 to 35 seconds one by one; at hundreds of jobs a second
//! the four inodes a session used to take and free were a third of all CPU.
//!
//! Invariant: the directory is 0700 and every file in it 0600 from the moment it is
//! opened; the socket the shim binds there is reachable only through that directory.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::record::Mode;
use crate::{Error, Home, atomic};

/// The version of `info.json` and `exit.json` this crate writes.
pub const SHIM_RECORD_VERSION: u32 = 1;

/// What a shim writes once its job has started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShimInfo {
    /// Format version of this record.
    pub version: u32,
    /// The socket protocol the shim speaks.
    pub protocol: u32,
    /// The shim's own pid.
    pub shim_pid: i32,
    /// Field 22 of the shim's `/proc/<pid>/stat`.
    #[serde(default)]
    pub shim_start_time: Option<u64>,
    /// The job's pid (the leader of its process group).
    pub pid: i32,
    /// The job's process group.
    pub pgid: i32,
    /// Field 22 of the job's `/proc/<pid>/stat`.
    #[serde(default)]
    pub start_time: Option<u64>,
    /// Pipe or PTY.
    pub mode: Mode,
    /// The session's own cgroup (an absolute path under the cgroup v2 mount), when the
    /// shim could make one and put the job in it before the exec; `None` when the job is
    /// held by the shim as subreaper alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<PathBuf>,
}

/// A process of a session's tree that was still alive when the session's main process
/// ended and its output was drained (a build daemon, a dev server started with `&`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leftover {
    /// Its pid.
    pub pid: i32,
    /// Its command line as `/proc/<pid>/cmdline` gave it (arguments joined by spaces),
    /// unredacted: routes show it through the output pipeline.
    pub command: String,
}

/// How a job ended, as its shim collected it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitRecord {
    /// Format version of this record.
    pub version: u32,
    /// The exit code, when the job exited.
    #[serde(default)]
    pub code: Option<i32>,
    /// The signal, when a signal ended it.
    #[serde(default)]
    pub signal: Option<i32>,
    /// When the shim finished with the job, unix milliseconds.
    pub finished_at_ms: u64,
    /// Every byte the shim ingested (after PTY-query and noise stripping).
    #[serde(default)]
    pub total_ingested: u64,
    /// Bytes that are not in the log (its cap was reached or a write failed).
    #[serde(default)]
    pub bytes_not_kept: u64,
    /// Members of the job's process group still alive when output stopped without
    /// end-of-file.
    #[serde(default)]
    pub descendants_alive: Vec<i32>,
    /// Why the shim itself killed the job, when it did: the termination source
    /// (`time_limit` when the spawn's time limit ran out; the source of a kill request
    /// the shim carried through its grace window, such as `process.kill`), whether or
    /// not a daemon was attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub killed_by: Option<String>,
    /// Processes of the job's tree still alive when the record was written (held by
    /// the session: its cgroup, or the shim as subreaper).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leftovers: Vec<Leftover>,
}

/// One session's shim directory under `<home>/run/shims/`.
#[derive(Debug, Clone)]
pub struct ShimDir {
    dir: PathBuf,
}

impl ShimDir {
    /// The directory of session `session_id`'s shim; nothing is created.
    ///
    /// # Errors
    /// [`Error::InvalidSessionId`] when the id could escape the shims directory.
    pub fn new(home: &Home, session_id: &str) -> Result<ShimDir, Error> {
        let valid = session_id.starts_with("proc_")
            && session_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(Error::InvalidSessionId {
                id: session_id.to_owned(),
            });
        }
        Ok(ShimDir {
            dir: home.shims_dir().join(session_id),
        })
    }

    /// A shim directory at an explicit path (the shim itself is told its path).
    pub fn at(dir: PathBuf) -> ShimDir {
        ShimDir { dir }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The shim's socket.
    pub fn socket_path(&self) -> PathBuf {
        self.dir.join("sock")
    }

    /// The info record.
    pub fn info_path(&self) -> PathBuf {
        self.dir.join(INFO_FILE)
    }

    /// The exit record.
    pub fn exit_path(&self) -> PathBuf {
        self.dir.join(EXIT_FILE)
    }

    /// Creates the directory (0700, parents too) under `home`, empty: a leftover of an
    /// earlier session with the same id is removed first.
    ///
    /// # Errors
    /// What [`Home::ensure_dir`] returns, or [`Error::CreateDir`] when a leftover
    /// cannot be removed.
    pub fn create(&self, home: &Home) -> Result<(), Error> {
        match fs::remove_dir_all(&self.dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(Error::CreateDir {
                    path: self.dir.clone(),
                    source,
                });
            }
        }
        home.ensure_dir(&self.dir)?;
        home.secure_dir(&home.shims_dir())?;
        Ok(())
    }

    /// Takes `spare` (a directory [`ShimDir::retire_as_spare`] left) as this session's
    /// directory; false when it cannot be (it is gone, or this directory exists), and
    /// then [`ShimDir::create`] makes one.
    pub fn create_from_spare(&self, spare: &Path) -> bool {
        if fs::symlink_metadata(&self.dir).is_ok() {
            return false;
        }
        fs::rename(spare, &self.dir).is_ok()
    }

    /// Empties the directory of a finished session and renames it to a spare
    /// (`<shims>/.spare-<random>`) for [`ShimDir::create_from_spare`], keeping its two
    /// records as the next shim's temp files; anything else in it is removed. When it
    /// cannot be kept, it is removed as by [`ShimDir::remove`] and `Ok(None)` is
    /// returned.
    ///
    /// # Errors
    /// As [`ShimDir::remove`].
    pub fn retire_as_spare(&self) -> Result<Option<PathBuf>, Error> {
        match self.empty_for_reuse() {
            Ok(spare) => Ok(Some(spare)),
            Err(_) => self.remove().map(|()| None),
        }
    }

    fn empty_for_reuse(&self) -> io::Result<PathBuf> {
        for entry in fs::read_dir(&self.dir)? {
            let name = entry?.file_name();
            let path = self.dir.join(&name);
            match name.to_str() {
                Some(INFO_FILE) => fs::rename(&path, self.dir.join(spare_name(INFO_FILE)))?,
                Some(EXIT_FILE) => fs::rename(&path, self.dir.join(spare_name(EXIT_FILE)))?,
                Some(n) if n == spare_name(INFO_FILE) || n == spare_name(EXIT_FILE) => {}
                _ => fs::remove_file(&path)?,
            }
        }
        let parent = self
            .dir
            .parent()
            .ok_or_else(|| io::Error::other("a shim directory has a parent"))?;
        let spare = parent.join(format!("{SPARE_PREFIX}{:016x}", fastrand::u64(..)));
        fs::rename(&self.dir, &spare)?;
        Ok(spare)
    }

    /// Writes the info record.
    ///
    /// # Errors
    /// [`Error::ShimRecordWrite`] naming the file.
    pub fn write_info(&self, info: &ShimInfo) -> Result<(), Error> {
        write_record(&self.dir, INFO_FILE, info)
    }

    /// Writes the exit record.
    ///
    /// # Errors
    /// [`Error::ShimRecordWrite`] naming the file.
    pub fn write_exit(&self, exit: &ExitRecord) -> Result<(), Error> {
        write_record(&self.dir, EXIT_FILE, exit)
    }

    /// The info record, `None` when there is none.
    ///
    /// # Errors
    /// [`Error::ShimRecordRead`] when it exists but cannot be read or parsed, or is of
    /// a newer format.
    pub fn read_info(&self) -> Result<Option<ShimInfo>, Error> {
        read_record(&self.info_path(), |r: &ShimInfo| r.version)
    }

    /// The exit record, `None` when the shim has not written one.
    ///
    /// # Errors
    /// As [`ShimDir::read_info`].
    pub fn read_exit(&self) -> Result<Option<ExitRecord>, Error> {
        read_record(&self.exit_path(), |r: &ExitRecord| r.version)
    }

    /// Removes the directory and everything in it; a missing one is fine.
    ///
    /// # Errors
    /// [`Error::ShimRecordWrite`] when it cannot be removed.
    pub fn remove(&self) -> Result<(), Error> {
        // The directory is held open while it is removed, so the kernel frees its
        // blocks when this handle closes, after the removal, not inside the `rmdir`
        // while it holds the lock of `run/shims`: on a filesystem that discards freed
        // blocks at once (ext4 `-o discard`), that took milliseconds, and every new
        // session's directory waited on the lock meanwhile.
        let pin = fs::File::open(&self.dir);
        let removed = fs::remove_dir_all(&self.dir);
        drop(pin);
        match removed {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(Error::ShimRecordWrite {
                path: self.dir.clone(),
                source,
            }),
        }
    }
}

/// The spare directories ([`ShimDir::retire_as_spare`]) under `home`'s shims
/// directory, as an earlier daemon left them.
pub fn spare_shim_dirs(home: &Home) -> Vec<PathBuf> {
    let shims = home.shims_dir();
    let Ok(entries) = fs::read_dir(&shims) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with(SPARE_PREFIX))
        .map(|name| shims.join(name))
        .collect()
}

/// The session ids that have a shim directory under `home`.
pub fn shim_session_ids(home: &Home) -> Vec<String> {
    let Ok(entries) = fs::read_dir(home.shims_dir()) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("proc_"))
        .collect();
    ids.sort();
    ids
}

/// The info record's file name.
const INFO_FILE: &str = "info.json";
/// The exit record's file name.
const EXIT_FILE: &str = "exit.json";
/// How a spare directory's name starts (never a session id's `proc_`).
const SPARE_PREFIX: &str = ".spare-";

/// The name a record keeps in a spare directory.
fn spare_name(record: &str) -> String {
    format!("{SPARE_PREFIX}{record}")
}

fn write_record<T: Serialize>(dir: &Path, name: &str, record: &T) -> Result<(), Error> {
    let path = dir.join(name);
    let failed = |source| Error::ShimRecordWrite {
        path: path.clone(),
        source,
    };
    let bytes = serde_json::to_vec(record).map_err(|e| failed(io::Error::other(e)))?;
    match reuse_spare(dir, name, &bytes) {
        Ok(true) => Ok(()),
        Ok(false) => atomic::write_visible(&path, &bytes).map_err(failed),
        Err(source) => Err(failed(source)),
    }
}

/// Writes `bytes` over the spare of record `name` and renames it into place, as
/// atomic for readers as a new temp file but without a new inode; false when the
/// directory holds no spare of it.
fn reuse_spare(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<bool> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let spare = dir.join(spare_name(name));
    let mut file = match fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&spare)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    // Written over in place, then cut to length: the blocks the old record used are
    // written again rather than freed and taken anew.
    file.write_all(bytes)?;
    file.set_len(bytes.len() as u64)?;
    drop(file);
    fs::rename(&spare, dir.join(name))?;
    Ok(true)
}

fn read_record<T: for<'de> Deserialize<'de>>(
    path: &Path,
    version: impl Fn(&T) -> u32,
) -> Result<Option<T>, Error> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(Error::ShimRecordRead {
                path: path.to_path_buf(),
                detail: source.to_string(),
            });
        }
    };
    let record: T = serde_json::from_slice(&bytes).map_err(|e| Error::ShimRecordRead {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    let v = version(&record);
    if v > SHIM_RECORD_VERSION {
        return Err(Error::ShimRecordRead {
            path: path.to_path_buf(),
            detail: format!(
                "record version {v} is newer than this herd's {SHIM_RECORD_VERSION}; upgrade herd"
            ),
        });
    }
    Ok(Some(record))
}

#[cfg(test)]
mod tests;
