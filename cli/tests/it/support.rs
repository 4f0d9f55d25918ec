//! Test support: a temporary home, a way to run `herd` in it, and the daemon guard.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub(crate) const HERD: &str = env!("CARGO_BIN_EXE_herd");

/// A temporary home plus the daemon that may run for it.
///
/// Dropping it runs `herd shutdown` and, should the daemon still be alive after
/// that, SIGKILLs it: no test leaves a daemon behind.
#[derive(Debug)]
pub(crate) struct Env {
    dir: tempfile::TempDir,
    home: PathBuf,
    /// Extra environment for every `herd` run.
    pub(crate) vars: Vec<(String, String)>,
}

impl Env {
    /// A fresh home.
    pub(crate) fn new() -> Env {
        let dir = tempfile::Builder::new()
            .prefix("herd-it")
            .tempdir()
            .expect("the temp dir is writable");
        let home = dir.path().join("home");
        std::fs::create_dir(&home).expect("the temp dir is writable");
        Env {
            dir,
            home,
            vars: Vec::new(),
        }
    }

    /// The home directory.
    pub(crate) fn home(&self) -> &Path {
        &self.home
    }

    /// The temp dir holding the home (scratch space for the test).
    pub(crate) fn scratch(&self) -> &Path {
        self.dir.path()
    }

    /// The socket path.
    pub(crate) fn socket(&self) -> PathBuf {
        self.home.join("run").join("herd.sock")
    }

    /// A `herd` command for this home.
    pub(crate) fn cmd(&self, args: &[&str]) -> Command {
        self.cmd_at(Path::new(HERD), args)
    }

    /// A `herd` command for this home, running the binary at `bin` (a copy the
    /// test placed where another user can execute it).
    pub(crate) fn cmd_at(&self, bin: &Path, args: &[&str]) -> Command {
        let mut cmd = raw_command(bin);
        cmd.args(args)
            .env("HERD_HOME", &self.home)
            .env_remove("HERD_OWNER")
            .env_remove("HERD_LOG")
            .stdin(Stdio::null());
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
        std::fs::read_to_string(self.home.join("run").join("herd.pid"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let pid = self.daemon_pid();
        let _ = self
            .cmd(&["shutdown"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Some(pid) = pid
            && wait_until(Duration::from_secs(5), || !alive(pid)).is_err()
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Whether a process exists (and is not a zombie).
pub(crate) fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or_default()
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

/// Polls `cond` until it holds or `deadline` passes.
pub(crate) fn wait_until(deadline: Duration, mut cond: impl FnMut() -> bool) -> Result<(), ()> {
    let end = Instant::now() + deadline;
    while Instant::now() < end {
        if cond() {
            return Ok(());
        }
        std::thread::park_timeout(Duration::from_millis(10));
    }
    if cond() { Ok(()) } else { Err(()) }
}

/// A raw command: the one place these tests start a process directly.
#[expect(clippy::disallowed_methods, reason = "test drives a raw child")]
pub(crate) fn raw_command(program: &Path) -> Command {
    Command::new(program)
}

/// stdout as text.
pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// stderr as text.
pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
