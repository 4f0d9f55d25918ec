//! Resource limits of a session: memory, CPU and process count through the
//! session's cgroup. The v2 controllers are used where the session's v2 cgroup has
//! them (`memory.max`, `cpu.max`, `pids.max`); elsewhere, as on a hybrid host whose v2
//! root carries no controllers, the v1 hierarchy of each controller
//! (`<v1 mount>/<own v1 cgroup>/herd-<uid>/<session id>`). A limit that no hierarchy
//! can carry is refused with a message naming what is missing where.

use std::ffi::CString;
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The limits a spawn asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Memory of the whole tree, in bytes (`--memory 2G`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// CPU time of the whole tree, in thousandths of a CPU (`--cpus 1.5` is 1500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_millis: Option<u64>,
    /// Processes and threads of the whole tree (`--pids 256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
}

impl Limits {
    /// Whether no limit is asked.
    pub fn is_empty(&self) -> bool {
        self.memory_bytes.is_none() && self.cpu_millis.is_none() && self.pids.is_none()
    }

    /// Each limit of `self`, else the one of `defaults` (a config's defaults).
    #[must_use]
    pub fn or(self, defaults: Limits) -> Limits {
        Limits {
            memory_bytes: self.memory_bytes.or(defaults.memory_bytes),
            cpu_millis: self.cpu_millis.or(defaults.cpu_millis),
            pids: self.pids.or(defaults.pids),
        }
    }

    /// What is wrong with these limits, as (field, message): a value out of range,
    /// or limits asked of a registry without session supervisors (only a shim puts
    /// the job in a cgroup before it runs).
    pub(crate) fn problem(&self, supervised: bool) -> Option<(&'static str, String)> {
        if let Some(bytes) = self.memory_bytes
            && !(1 << 20..=1 << 50).contains(&bytes)
        {
            return Some((
                "memory",
                format!("must be from 1 MiB to 1 PiB (got {bytes} bytes)"),
            ));
        }
        if let Some(millis) = self.cpu_millis
            && !(10..=1_024_000).contains(&millis)
        {
            return Some((
                "cpus",
                format!(
                    "must be from 0.01 to 1024 CPUs (got {})",
                    millis as f64 / 1000.0
                ),
            ));
        }
        if let Some(pids) = self.pids
            && !(1..=4_194_304).contains(&pids)
        {
            return Some(("pids", format!("must be from 1 to 4194304 (got {pids})")));
        }
        (!self.is_empty() && !supervised).then(|| {
            (
                "limits",
                "--memory, --cpus and --pids need the session supervisor (herd-shim), which puts the job in a cgroup before it runs; install herd-shim beside herd".to_owned(),
            )
        })
    }
}

/// The CFS period the CPU limit is expressed in (100 ms).
const CPU_PERIOD_US: u64 = 100_000;

/// Where the limits were set: the v1 cgroups the job must enter too (the v2 one is
/// the session's own).
#[derive(Debug, Clone, Default)]
pub(crate) struct Applied {
    /// Each v1 cgroup's `cgroup.procs`, as a C string for the forked child.
    pub(crate) v1_procs: Vec<CString>,
    /// Each v1 cgroup's directory, removed at the end.
    pub(crate) v1_dirs: Vec<PathBuf>,
    /// For each v1 cgroup, the shim's own cgroup of that hierarchy (to step back to).
    pub(crate) v1_homes: Vec<PathBuf>,
}

impl Applied {
    /// Removes the v1 cgroups (once empty).
    pub(crate) fn remove(&self) {
        for dir in &self.v1_dirs {
            if let Err(error) = fs::remove_dir(dir)
                && error.kind() != io::ErrorKind::NotFound
            {
                tracing::warn!(%error, path = %dir.display(), "v1 limit cgroup not removed");
            }
        }
    }
}

/// Sets `limits` for session `name`, in its v2 cgroup `v2` where that has the
/// controller, else in a v1 cgroup of its own.
///
/// # Errors
/// A message naming the limit, what is missing and where.
pub(crate) fn apply(limits: &Limits, v2: Option<&Path>, name: &str) -> Result<Applied, String> {
    let mut applied = Applied::default();
    let uid = nix::unistd::getuid().as_raw();
    let mut set = |controller: &str, v2_file: &str, v2_value: String, v1: &[(&str, String)]| {
        if let Some(v2) = v2
            && v2.join(v2_file).exists()
        {
            return write(&v2.join(v2_file), &v2_value)
                .map_err(|e| format!("{v2_file} of {} could not be set: {e}", v2.display()));
        }
        let Some((mount, own)) = v1_hierarchy(controller) else {
            return Err(format!(
                "no {controller} controller: the session's cgroup v2 has no {v2_file} (enable +{controller} in cgroup.subtree_control of its parent, or run the daemon in a delegated cgroup with the {controller} controller) and no cgroup v1 {controller} hierarchy is mounted"
            ));
        };
        let base = mount.join(own.trim_start_matches('/'));
        let dir = base.join(format!("herd-{uid}")).join(name);
        fs::create_dir_all(&dir)
            .map_err(|e| format!("{} could not be created: {e}", dir.display()))?;
        for (file, value) in v1 {
            write(&dir.join(file), value)
                .map_err(|e| format!("{file} of {} could not be set: {e}", dir.display()))?;
        }
        let procs = CString::new(dir.join("cgroup.procs").as_os_str().as_bytes())
            .map_err(|_| format!("{} holds a NUL byte", dir.display()))?;
        applied.v1_procs.push(procs);
        applied.v1_dirs.push(dir);
        applied.v1_homes.push(base);
        Ok(())
    };
    if let Some(bytes) = limits.memory_bytes {
        set(
            "memory",
            "memory.max",
            bytes.to_string(),
            &[("memory.limit_in_bytes", bytes.to_string())],
        )
        .map_err(|e| format!("--memory: {e}"))?;
    }
    if let Some(millis) = limits.cpu_millis {
        let quota = millis * CPU_PERIOD_US / 1000;
        set(
            "cpu",
            "cpu.max",
            format!("{quota} {CPU_PERIOD_US}"),
            &[
                ("cpu.cfs_period_us", CPU_PERIOD_US.to_string()),
                ("cpu.cfs_quota_us", quota.to_string()),
            ],
        )
        .map_err(|e| format!("--cpus: {e}"))?;
    }
    if let Some(pids) = limits.pids {
        set(
            "pids",
            "pids.max",
            pids.to_string(),
            &[("pids.max", pids.to_string())],
        )
        .map_err(|e| format!("--pids: {e}"))?;
    }
    Ok(applied)
}

/// The v1 hierarchy mounted for `controller` and this process's cgroup in it.
pub(crate) fn v1_hierarchy(controller: &str) -> Option<(PathBuf, String)> {
    let mounts = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut fields = right.split_whitespace();
        if fields.next()? != "cgroup" {
            return None;
        }
        let options = fields.nth(1)?;
        options
            .split(',')
            .any(|o| o == controller)
            .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
    })?;
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then(|| path.to_owned())
    })?;
    Some((mount, path))
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(value.as_bytes())
}
