//! A temporary home for the `herd` binary, the binary run against it with none of
//! the caller's herd settings, and its daemon stopped afterwards.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::procs::alive;
use crate::wait::poll_until;

/// A temporary directory holding a home directory; both go when it drops (stop
/// the daemon first: [`stop_daemon`]).
#[derive(Debug)]
pub struct TempHome {
    dir: tempfile::TempDir,
    home: PathBuf,
}

impl TempHome {
    /// `<tmp>/<prefix>XXXX/<name>`, created.
    ///
    /// # Panics
    /// When the temp dir is not writable.
    pub fn new(prefix: &str, name: &str) -> TempHome {
        TempHome::new_in(None, prefix, name)
    }

    /// As [`TempHome::new`], under `parent` (the system's temp dir when `None`).
    ///
    /// # Panics
    /// When the directory is not writable.
    pub fn new_in(parent: Option<&Path>, prefix: &str, name: &str) -> TempHome {
        let mut builder = tempfile::Builder::new();
        builder.prefix(prefix);
        let dir = match parent {
            Some(p) => builder.tempdir_in(p),
            None => builder.tempdir(),
        }
        .expect("the temp dir is writable");
        let home = dir.path().join(name);
        std::fs::create_dir(&home).expect("the temp dir is writable");
        TempHome { dir, home }
    }

    /// The home directory.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The temporary directory holding the home: scratch space for the test.
    pub fn scratch(&self) -> &Path {
        self.dir.path()
    }
}

/// A command for `program`: a test driver or a baseline, never a job (jobs start
/// only through herd).
#[expect(
    clippy::disallowed_methods,
    reason = "tests and benches drive real programs: the herd binary, tmux, baselines"
)]
pub fn command(program: impl AsRef<OsStr>) -> Command {
    Command::new(program)
}

/// The herd binary `bin` for `home`: `HERD_HOME` set, stdin closed, and none of
/// the caller's `HERD_OWNER` and `HERD_LOG`, nor `INVOCATION_ID` (a runner that
/// is itself a systemd unit must not send every `--persist` job through the
/// real systemd-run, B34).
pub fn herd(bin: &Path, home: &Path) -> Command {
    let mut cmd = command(bin);
    cmd.env("HERD_HOME", home)
        .env_remove("HERD_OWNER")
        .env_remove("HERD_LOG")
        .env_remove("INVOCATION_ID")
        .stdin(Stdio::null());
    cmd
}

/// The pid in the home's daemon pid file, if there is one.
pub fn daemon_pid(home: &Path) -> Option<i32> {
    std::fs::read_to_string(home.join("run").join("herd.pid"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
}

/// Stops the daemon serving `home`, if one runs, with `shutdown` (a prepared
/// `herd … shutdown`, run quiet), then SIGKILL should it still live after
/// `grace`, so no test leaves a daemon behind.
pub fn stop_daemon(home: &Path, grace: Duration, shutdown: &mut Command) {
    let pid = daemon_pid(home);
    let _ = shutdown
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if let Some(pid) = pid
        && poll_until(grace, || !alive(pid)).is_err()
    {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}
