//! Test support: a temporary home, a way to run `herd` in it, and the daemon guard.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use herd_test_support::home::{TempHome, daemon_pid, herd, stop_daemon};
pub(crate) use herd_test_support::procs::alive;

/// The binary under test.
pub(crate) const HERD: &str = env!("CARGO_BIN_EXE_herd");

/// A temporary home plus the daemon that may run for it.
///
/// Dropping it runs `herd shutdown` and, should the daemon still be alive after
/// that, SIGKILLs it: no test leaves a daemon behind.
#[derive(Debug)]
pub(crate) struct Env {
    dir: TempHome,
    /// Extra environment for every `herd` run.
    pub(crate) vars: Vec<(String, String)>,
}

impl Env {
    /// A fresh home.
    pub(crate) fn new() -> Env {
        Env {
            dir: TempHome::new("herd-it", "home"),
            vars: Vec::new(),
        }
    }

    /// The home directory.
    pub(crate) fn home(&self) -> &Path {
        self.dir.home()
    }

    /// The temp dir holding the home (scratch space for the test).
    pub(crate) fn scratch(&self) -> &Path {
        self.dir.scratch()
    }

    /// The socket path.
    pub(crate) fn socket(&self) -> PathBuf {
        self.home().join("run").join("herd.sock")
    }

    /// A `herd` command for this home.
    pub(crate) fn cmd(&self, args: &[&str]) -> Command {
        self.cmd_at(Path::new(HERD), args)
    }

    /// A `herd` command for this home, running the binary at `bin` (a copy the
    /// test placed where another user can execute it).
    pub(crate) fn cmd_at(&self, bin: &Path, args: &[&str]) -> Command {
        let mut cmd = herd(bin, self.home());
        cmd.args(args);
        for (k, v) in &self.vars {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs `herd args…` and returns its output.
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("the herd binary runs")
    }

    /// Runs `herd args…`, asserts exit 0, and returns stdout.
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "herd {args:?} failed with {:?}\nstdout: {}\nstderr: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("herd prints UTF-8")
    }

    /// Runs `herd args…` and parses stdout as JSON.
    pub(crate) fn json(&self, args: &[&str]) -> serde_json::Value {
        let text = self.ok(args);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("herd {args:?} printed invalid JSON ({e}): {text}"))
    }

    /// The pid in the daemon's pid file, if any.
    pub(crate) fn daemon_pid(&self) -> Option<i32> {
        daemon_pid(self.home())
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        stop_daemon(
            self.home(),
            Duration::from_secs(5),
            &mut self.cmd(&["shutdown", "--yes"]),
        );
    }
}

/// Polls `cond` until it holds or `deadline` passes.
pub(crate) fn wait_until(deadline: Duration, cond: impl FnMut() -> bool) -> Result<(), ()> {
    herd_test_support::wait::poll_until(deadline, cond).map_err(|_| ())
}

/// A raw command: the one place these tests start a process directly.
pub(crate) fn raw_command(program: &Path) -> Command {
    herd_test_support::home::command(program)
}

/// stdout as text.
pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// stderr as text.
pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
