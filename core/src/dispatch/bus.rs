//! The user bus a scoped worker talks to, derived from the spawn environment (never the
//! daemon's own), and the trust checks on the runtime dir and its socket.
//!
//! Invariant: a runtime dir is trusted only when it is ours and not group or other
//! writable, and `bus` in it is a socket we own.

use std::collections::HashMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::{BUS_ADDRESS_ENV, DEFAULT_PATH, RUNTIME_DIR_ENV};

/// The user bus derived from a spawn environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct UserBus {
    pub(super) bus_path: PathBuf,
    /// `Some` when the bus is usable: the env overrides to hand to the wrapper.
    pub(super) env: Option<Vec<(String, String)>>,
    /// Why the bus is not usable, when it is not.
    pub(super) problem: String,
}

/// Derives the user bus from a spawn environment: an explicit `DBUS_SESSION_BUS_ADDRESS`
/// is kept; otherwise `<runtime dir>/bus` is used when the runtime dir (`XDG_RUNTIME_DIR`,
/// else `/run/user/<uid>`) and the socket pass the ownership checks.
pub(super) fn derive_user_bus(spawn_env: &HashMap<String, String>, uid: u32) -> UserBus {
    let runtime_dir = spawn_env
        .get(RUNTIME_DIR_ENV)
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| PathBuf::from(format!("/run/user/{uid}")), PathBuf::from);
    let bus_path = runtime_dir.join("bus");
    if let Some(address) = spawn_env.get(BUS_ADDRESS_ENV).filter(|a| !a.is_empty()) {
        let bus_path = address
            .strip_prefix("unix:path=")
            .map(|rest| PathBuf::from(rest.split(',').next().unwrap_or(rest)))
            .unwrap_or(bus_path);
        return UserBus {
            bus_path,
            env: Some(vec![(BUS_ADDRESS_ENV.to_owned(), address.clone())]),
            problem: String::new(),
        };
    }
    match trust_problem(&runtime_dir, &bus_path, uid) {
        Some(problem) => UserBus {
            bus_path,
            env: None,
            problem,
        },
        None => UserBus {
            env: Some(vec![
                (
                    RUNTIME_DIR_ENV.to_owned(),
                    runtime_dir.to_string_lossy().into_owned(),
                ),
                (
                    BUS_ADDRESS_ENV.to_owned(),
                    format!("unix:path={}", bus_path.display()),
                ),
            ]),
            bus_path,
            problem: String::new(),
        },
    }
}

/// Why the runtime dir or its bus socket cannot be trusted, or `None` when both can.
pub(super) fn trust_problem(runtime_dir: &Path, bus_path: &Path, uid: u32) -> Option<String> {
    if !runtime_dir.is_absolute() {
        return Some(format!(
            "runtime dir {} is not an absolute path",
            runtime_dir.display()
        ));
    }
    let dir = match std::fs::metadata(runtime_dir) {
        Ok(meta) => meta,
        Err(err) => {
            return Some(format!(
                "no user bus at {}: runtime dir {} is missing ({err})",
                bus_path.display(),
                runtime_dir.display()
            ));
        }
    };
    if !dir.is_dir() || dir.uid() != uid || dir.permissions().mode() & 0o022 != 0 {
        return Some(format!(
            "runtime dir {} is not trusted: it must be a directory owned by uid {uid} and \
             not group or other writable",
            runtime_dir.display()
        ));
    }
    match std::fs::symlink_metadata(bus_path) {
        Ok(meta) if meta.file_type().is_socket() && meta.uid() == uid => None,
        Ok(_) => Some(format!(
            "{} is not a socket owned by uid {uid}",
            bus_path.display()
        )),
        Err(_) => Some(format!("no user bus at {}", bus_path.display())),
    }
}

/// Finds `name` as an executable file on the spawn environment's `PATH`.
pub(super) fn resolve_program(name: &str, spawn_env: &HashMap<String, String>) -> Option<PathBuf> {
    let path = spawn_env.get("PATH").map_or(DEFAULT_PATH, String::as_str);
    path.split(':')
        .map(Path::new)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}
