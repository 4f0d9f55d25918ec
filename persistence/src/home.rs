//! The home directory and every path derived from it.
//!
//! Invariant: all paths are computed from `root` at call time; `Home` holds no
//! other state, so two homes in one process never share a path.
//!
//! Layout (documented in ARCHITECTURE.md):
//! `processes.json` (checkpoint), `state.db` (ledger), `logs/sessions/<id>.log`,
//! `logs/daemon.log`, `results/` (receipts), `cache/scratch/` (children's TMPDIR),
//! `plugins/`, `run/herd.sock`, `config.toml`.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::Error;

/// Mode of every directory herd creates under a home.
const DIR_MODE: u32 = 0o700;

/// A herd home: the root directory every herd path derives from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// Wraps `root`. Does no I/O; the directory may not exist yet.
    pub fn new(root: impl Into<PathBuf>) -> Home {
        Home { root: root.into() }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<home>/processes.json`: the checkpoint of running sessions.
    pub fn checkpoint_path(&self) -> PathBuf {
        self.root.join("processes.json")
    }

    /// `<home>/processes.pending`: one file per session spawned since the last
    /// checkpoint write, until a checkpoint write covers it.
    pub fn checkpoint_pending_dir(&self) -> PathBuf {
        self.root.join("processes.pending")
    }

    /// `<home>/state.db`: the completion ledger.
    pub fn ledger_path(&self) -> PathBuf {
        self.root.join("state.db")
    }

    /// `<home>/logs/sessions`: one complete log file per session.
    pub fn session_logs_dir(&self) -> PathBuf {
        self.root.join("logs").join("sessions")
    }

    /// `<home>/logs/sessions/<id>.log`.
    pub fn session_log_path(&self, session_id: &str) -> PathBuf {
        self.session_logs_dir().join(format!("{session_id}.log"))
    }

    /// `<home>/logs/daemon.log`: where an autostarted daemon writes its own log.
    pub fn daemon_log_path(&self) -> PathBuf {
        self.root.join("logs").join("daemon.log")
    }

    /// `<home>/results`: durable result receipts of finished sessions.
    pub fn results_dir(&self) -> PathBuf {
        self.root.join("results")
    }

    /// `<home>/cache/scratch`: the children's TMPDIR.
    pub fn scratch_dir(&self) -> PathBuf {
        self.root.join("cache").join("scratch")
    }

    /// `<home>/plugins`: one directory per installed plugin.
    pub fn plugins_dir(&self) -> PathBuf {
        self.root.join("plugins")
    }

    /// `<home>/run`: the daemon's runtime directory (socket, pid file).
    pub fn run_dir(&self) -> PathBuf {
        self.root.join("run")
    }

    /// `<home>/run/shims`: one directory per session supervisor (socket and records).
    pub fn shims_dir(&self) -> PathBuf {
        self.run_dir().join("shims")
    }

    /// `<home>/run/herd.sock`: the daemon's socket.
    pub fn socket_path(&self) -> PathBuf {
        self.run_dir().join("herd.sock")
    }

    /// `<home>/config.toml`.
    pub fn config_path(&self) -> PathBuf {
        self.root.join("config.toml")
    }

    /// Creates `dir` and any missing parents below the home, each with mode 0700,
    /// and returns it.
    ///
    /// # Errors
    /// [`Error::HomeMissing`] when the home itself does not exist (it is never
    /// recreated), [`Error::OutsideHome`] when `dir` is not under the home, and
    /// [`Error::CreateDir`] when the OS refuses.
    pub fn ensure_dir(&self, dir: &Path) -> Result<PathBuf, Error> {
        let rel = dir
            .strip_prefix(&self.root)
            .map_err(|_| Error::OutsideHome {
                path: dir.to_path_buf(),
                home: self.root.clone(),
            })?;
        if !self.root.is_dir() {
            return Err(Error::HomeMissing {
                path: self.root.clone(),
            });
        }
        let mut current = self.root.clone();
        for part in rel.components() {
            current.push(part);
            match fs::DirBuilder::new().mode(DIR_MODE).create(&current) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && current.is_dir() => {}
                Err(source) => {
                    return Err(Error::CreateDir {
                        path: current,
                        source,
                    });
                }
            }
        }
        Ok(dir.to_path_buf())
    }

    /// Tightens an existing directory under the home to mode 0700.
    ///
    /// # Errors
    /// [`Error::CreateDir`] when the permissions cannot be changed.
    pub fn secure_dir(&self, dir: &Path) -> Result<(), Error> {
        fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE)).map_err(|source| {
            Error::CreateDir {
                path: dir.to_path_buf(),
                source,
            }
        })
    }
}

#[cfg(test)]
mod tests;
