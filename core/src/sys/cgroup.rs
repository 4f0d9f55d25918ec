//! Per-session cgroups (cgroup v2): where herd may make them, making one, putting a
//! job in it before its exec, listing, signalling and killing its members, and
//! removing it once empty.
//!
//! The v2 hierarchy is found in `/proc/self/mountinfo` (a pure v2 host mounts it at
//! `/sys/fs/cgroup`, a hybrid one at `/sys/fs/cgroup/unified`). A session's cgroup is
//! `<v2 mount>/<the caller's own cgroup>/herd-<uid>/<session id>`: under a daemon
//! running as root that is a herd subtree of the root; under a delegated systemd unit
//! or scope it is inside the delegation.
//!
//! Invariant: a single member is signalled only through a pidfd opened *before* its
//! membership was checked again (`/proc/<pid>/cgroup` names the session's cgroup or
//! one below it), so a pid that left the cgroup and was reused meanwhile is never
//! signalled (the cgroup analogue of pinning a pid to its start time before a signal).

use std::ffi::CString;
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::Signal;

/// The environment switch that forces the subreaper fallback (tests, and hosts where
/// a cgroup must not be used): `HERD_CONTAINMENT=subreaper`.
pub(crate) const CONTAINMENT_ENV: &str = "HERD_CONTAINMENT";

/// The value of [`CONTAINMENT_ENV`] that keeps the cgroup but kills it the way a
/// kernel without `cgroup.kill` (before 5.14) needs: freeze, SIGKILL each member,
/// thaw (tests of that fallback).
pub(crate) const FREEZE_KILL: &str = "freeze";

/// The leaf a daemon in a delegated unit moves itself into (`dispatch::delegate`):
/// sessions then go beside it.
pub(crate) const DAEMON_LEAF: &str = "herd-daemon";

/// Whether the daemon's environment forces the freeze kill.
pub(crate) fn freeze_forced() -> bool {
    std::env::var(CONTAINMENT_ENV).is_ok_and(|v| v == FREEZE_KILL)
}

/// Where this process may make session cgroups, or why it may not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Session cgroups go below `parent` (`…/herd-<uid>`), which exists and is ours.
    Cgroup {
        /// The v2 mount point.
        mount: PathBuf,
        /// `<mount>/<own cgroup>/herd-<uid>`.
        parent: PathBuf,
    },
    /// No cgroup: the shim holds the tree as child subreaper; the text says why.
    Subreaper(String),
}

/// Where session cgroups go for this process, creating `herd-<uid>` when missing.
pub(crate) fn placement() -> Placement {
    if std::env::var(CONTAINMENT_ENV).is_ok_and(|v| v == "subreaper") {
        return Placement::Subreaper(format!("forced by {CONTAINMENT_ENV}=subreaper"));
    }
    let Some(mount) = v2_mount() else {
        return Placement::Subreaper("no cgroup v2 hierarchy is mounted".to_owned());
    };
    let Some(own) = own_cgroup() else {
        return Placement::Subreaper(
            "this process's cgroup v2 path is not in /proc/self/cgroup".to_owned(),
        );
    };
    let uid = nix::unistd::getuid().as_raw();
    let base = sessions_base(&mount, &own);
    let parent = base.join(format!("herd-{uid}"));
    match fs::create_dir(&parent) {
        // Sessions get the controllers their unit has (a delegated unit whose
        // daemon sits in a leaf; elsewhere this finds none enabled).
        Ok(()) => enable_controllers(&parent),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Placement::Subreaper(format!(
                "{} cannot be created ({e}): the cgroup {} is not writable by uid {uid} (run as root, or start the daemon in a delegated cgroup)",
                parent.display(),
                base.display()
            ));
        }
    }
    if !can_move_into(&parent) {
        return Placement::Subreaper(format!("{} is not writable by uid {uid}", parent.display()));
    }
    Placement::Cgroup { mount, parent }
}

/// Whether this process may move processes into the cgroup `dir` (its
/// `cgroup.procs` is writable to it).
pub(crate) fn can_move_into(dir: &Path) -> bool {
    nix::unistd::access(&dir.join("cgroup.procs"), nix::unistd::AccessFlags::W_OK).is_ok()
}

/// Where `herd-<uid>` goes for a process in cgroup `own`: beside the daemon's leaf
/// in a delegated unit (`<unit>/herd-daemon` → `<unit>`), else below `own`.
fn sessions_base(mount: &Path, own: &str) -> PathBuf {
    let own = own.trim_start_matches('/');
    let leaf = DAEMON_LEAF;
    match own.rsplit_once('/') {
        Some((unit, last)) if last == leaf => mount.join(unit),
        _ => mount.join(own),
    }
}

/// Enables, for the children of the cgroup `dir`, the controllers among `cpu`,
/// `memory` and `pids` that it has (best effort: a cgroup holding processes, or
/// one whose parent did not enable them, refuses; limits then say what is missing).
pub(crate) fn enable_controllers(dir: &Path) {
    let Ok(available) = fs::read_to_string(dir.join("cgroup.controllers")) else {
        return;
    };
    let wanted: Vec<String> = available
        .split_whitespace()
        .filter(|c| matches!(*c, "cpu" | "memory" | "pids"))
        .map(|c| format!("+{c}"))
        .collect();
    if wanted.is_empty() {
        return;
    }
    if let Err(error) = write_file(
        &dir.join("cgroup.subtree_control"),
        wanted.join(" ").as_bytes(),
    ) {
        tracing::debug!(cgroup = %dir.display(), %error, "controllers not enabled for children");
    }
}

/// Which containment a session started now gets and why, in words for `herd doctor`:
/// `(true, "<parent>: …")` for a cgroup, `(false, reason)` for the subreaper.
pub(crate) fn report() -> (bool, String) {
    match placement() {
        Placement::Cgroup { parent, .. } => {
            let kill = if freeze_forced() {
                "freeze and SIGKILL (forced by HERD_CONTAINMENT=freeze)"
            } else if parent.join("cgroup.kill").exists() {
                "cgroup.kill"
            } else {
                "freeze and SIGKILL (no cgroup.kill before Linux 5.14)"
            };
            (
                true,
                format!(
                    "each session's processes are held in a cgroup of its own under {} (kill: {kill}; empty: cgroup.events populated 0)",
                    parent.display()
                ),
            )
        }
        Placement::Subreaper(why) => (false, why),
    }
}

/// The mount point of the cgroup v2 hierarchy, from `/proc/self/mountinfo`.
pub(crate) fn v2_mount() -> Option<PathBuf> {
    let text = fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        left.split_whitespace()
            .nth(4)
            .map(|p| PathBuf::from(unescape(p)))
    })
}

/// This process's cgroup v2 path (the `0::` line of `/proc/self/cgroup`).
pub(crate) fn own_cgroup() -> Option<String> {
    cgroup_of("self")
}

fn cgroup_of(pid: &str) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_owned)
}

/// Mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(field: &str) -> String {
    let mut out = Vec::with_capacity(field.len());
    let bytes = field.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Ok(v) = u8::from_str_radix(&field[i + 1..i + 4], 8)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One session's cgroup.
#[derive(Debug, Clone)]
pub(crate) struct SessionCgroup {
    path: PathBuf,
    /// The path as `/proc/<pid>/cgroup` names it (relative to the mount, with `/`).
    rel: String,
    /// `cgroup.procs` as a C string, for the forked child (no allocation there).
    procs_c: CString,
    /// Kill by freezing even where `cgroup.kill` exists (`HERD_CONTAINMENT=freeze`).
    freeze_kill: bool,
}

impl SessionCgroup {
    /// Makes the cgroup `<parent>/<name>` (an earlier one of that name is reused when
    /// empty).
    ///
    /// # Errors
    /// The OS error of `mkdir`.
    pub(crate) fn create(mount: &Path, parent: &Path, name: &str) -> io::Result<SessionCgroup> {
        let path = parent.join(name);
        match fs::create_dir(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        Self::at(mount, path)
    }

    /// An existing cgroup at `path` under the v2 mount `mount`.
    ///
    /// # Errors
    /// `InvalidInput` when `path` is not under `mount`.
    pub(crate) fn at(mount: &Path, path: PathBuf) -> io::Result<SessionCgroup> {
        let rel = path
            .strip_prefix(mount)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "cgroup not under mount"))?;
        let rel = format!("/{}", rel.display());
        let procs_c = CString::new(path.join("cgroup.procs").as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a cgroup path"))?;
        Ok(SessionCgroup {
            path,
            rel,
            procs_c,
            freeze_kill: freeze_forced(),
        })
    }

    /// Kills by freezing, as without `cgroup.kill` (the spawn's `force_freeze`).
    #[must_use]
    pub(crate) fn with_freeze_kill(mut self, freeze: bool) -> SessionCgroup {
        self.freeze_kill |= freeze;
        self
    }

    /// An existing cgroup, finding the v2 mount itself.
    pub(crate) fn existing(path: &Path) -> Option<SessionCgroup> {
        let mount = v2_mount()?;
        Self::at(&mount, path.to_path_buf()).ok()
    }

    /// The cgroup's directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Its `cgroup.procs` as a C string.
    pub(crate) fn procs_c(&self) -> &CString {
        &self.procs_c
    }

    /// Moves this whole process into the cgroup at `path` (its `cgroup.procs`).
    ///
    /// # Errors
    /// The OS error.
    pub(crate) fn move_self_to(path: &Path) -> io::Result<()> {
        // `Path` rather than `self`: the shim steps back to its own cgroup too.
        let c = CString::new(path.join("cgroup.procs").as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a cgroup path"))?;
        enter_c(&c)
    }

    /// Whether any process is left in the cgroup or below it (`populated` of
    /// `cgroup.events`); `None` when it cannot be read (the cgroup is gone).
    pub(crate) fn populated(&self) -> Option<bool> {
        let text = fs::read_to_string(self.path.join("cgroup.events")).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("populated "))
            .map(|v| v.trim() != "0")
    }

    /// Every pid in the cgroup and its descendants, ascending.
    pub(crate) fn pids(&self) -> Vec<i32> {
        let mut pids = Vec::new();
        collect_pids(&self.path, &mut pids, 0);
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Sends `sig` to every member, each through a pidfd whose process is checked to
    /// be a member after the pidfd was opened. Returns how many got it.
    pub(crate) fn signal_members(&self, sig: Signal) -> usize {
        let own = super::own_pid();
        let mut sent = 0;
        for pid in self.pids() {
            if pid <= 1 || pid == own {
                continue;
            }
            let Ok(fd) = super::pidfd_open(pid) else {
                continue;
            };
            if !self.holds(pid) {
                continue;
            }
            if super::pidfd_send_signal_fd(&fd, sig).is_ok() {
                sent += 1;
            }
        }
        sent
    }

    /// Whether `pid` is in this cgroup or below it now.
    fn holds(&self, pid: i32) -> bool {
        cgroup_of(&pid.to_string()).is_some_and(|cg| {
            cg == self.rel
                || cg
                    .strip_prefix(self.rel.as_str())
                    .is_some_and(|r| r.starts_with('/'))
        })
    }

    /// SIGKILLs every member at once: `cgroup.kill` where the kernel has it (5.14+),
    /// else freeze, SIGKILL each member, thaw.
    ///
    /// # Errors
    /// The OS error when neither way could be used.
    pub(crate) fn kill(&self) -> io::Result<()> {
        if !self.freeze_kill {
            match write_file(&self.path.join("cgroup.kill"), b"1") {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => tracing::debug!(error = %e, "cgroup.kill not written; freezing"),
            }
        }
        write_file(&self.path.join("cgroup.freeze"), b"1")?;
        let deadline = Instant::now() + Duration::from_secs(1);
        while !self.frozen() && Instant::now() < deadline {
            // A frozen cgroup cannot fork: once `frozen 1`, the list is complete.
            wait_a_little();
        }
        self.signal_members(Signal::SIGKILL);
        write_file(&self.path.join("cgroup.freeze"), b"0")
    }

    fn frozen(&self) -> bool {
        fs::read_to_string(self.path.join("cgroup.events"))
            .is_ok_and(|t| t.lines().any(|l| l.trim() == "frozen 1"))
    }

    /// Removes the cgroup (and any child cgroups a job made), deepest first.
    ///
    /// # Errors
    /// The OS error (`EBUSY` while a process is left).
    pub(crate) fn remove(&self) -> io::Result<()> {
        remove_tree(&self.path, 0)
    }
}

/// Deepest nesting of a job's own child cgroups that is walked.
const MAX_DEPTH: usize = 16;

fn collect_pids(dir: &Path, pids: &mut Vec<i32>, depth: usize) {
    if let Ok(text) = fs::read_to_string(dir.join("cgroup.procs")) {
        pids.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
    }
    if depth >= MAX_DEPTH {
        return;
    }
    for sub in subdirs(dir) {
        collect_pids(&sub, pids, depth + 1);
    }
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

fn remove_tree(dir: &Path, depth: usize) -> io::Result<()> {
    if depth < MAX_DEPTH {
        for sub in subdirs(dir) {
            remove_tree(&sub, depth + 1)?;
        }
    }
    match fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(bytes)
}

/// Writes "0" (the caller) into the `cgroup.procs` named by `procs`.
pub(crate) fn enter_c(procs: &CString) -> io::Result<()> {
    // SAFETY: open/write/close on a NUL-terminated path we own and a stack buffer;
    // all three are async-signal-safe, so this may run between fork and exec.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let rc = libc::write(fd, b"0".as_ptr().cast(), 1);
        let err = io::Error::last_os_error();
        libc::close(fd);
        if rc != 1 {
            return Err(err);
        }
    }
    Ok(())
}

/// A short pause for a state the kernel reaches asynchronously (frozen).
fn wait_a_little() {
    let _ = nix::poll::ppoll(
        &mut [],
        Some(nix::sys::time::TimeSpec::from_duration(
            Duration::from_millis(5),
        )),
        None,
    );
}

/// Whether `errno` says the cgroup has processes left (`rmdir` of a busy cgroup).
pub(crate) fn is_busy(error: &io::Error) -> bool {
    error.raw_os_error() == Some(Errno::EBUSY as i32)
}

#[cfg(test)]
mod tests {
    use super::{sessions_base, unescape};
    use std::path::Path;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape("/sys/fs/cgroup/unified"), "/sys/fs/cgroup/unified");
    }

    /// A daemon settled in its delegated unit's leaf puts sessions beside the leaf,
    /// never inside it (v2 lets only leaves hold processes once controllers are on).
    #[test]
    fn sessions_go_beside_the_daemon_leaf() {
        let mount = Path::new("/sys/fs/cgroup");
        let scope = "/user.slice/user-1000.slice/user@1000.service/app.slice/herd-1000-7.scope";
        assert_eq!(
            sessions_base(mount, &format!("{scope}/herd-daemon")),
            mount.join(scope.trim_start_matches('/'))
        );
        assert_eq!(
            sessions_base(mount, "/user.slice/session-3.scope"),
            mount.join("user.slice/session-3.scope")
        );
        assert_eq!(sessions_base(mount, "/"), mount.to_path_buf());
    }
}
