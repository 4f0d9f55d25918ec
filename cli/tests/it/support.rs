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
    /// Prints the end of the daemon's log, for a failed test's output (a failure on a
    /// busy CI machine is often seen once; its log is all there is to read).
    #[expect(
        clippy::print_stderr,
        reason = "a failed test's diagnostics go to its captured output"
    )]
    fn print_daemon_log(&self) {
        let path = self.home().join("logs/daemon.log");
        let Ok(text) = std::fs::read_to_string(&path) else {
            return;
        };
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(200)..];
        eprintln!(
            "--- the last {} lines of {} ---\n{}\n--- end of the daemon log ---",
            tail.len(),
            path.display(),
            tail.join("\n")
        );
    }

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

    /// Asserts that `herd doctor` reports the daemon's restore re-attached `n`
    /// sessions to their supervisors (live, not followed by their records).
    pub(crate) fn assert_reattached(&self, n: usize) {
        let status = self.json(&["doctor", "--json"]);
        assert!(
            status
                .to_string()
                .contains(&format!("{n} re-attached to their supervisor")),
            "doctor shows {n} re-attached at the restore: {status}"
        );
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
        if std::thread::panicking() {
            self.print_daemon_log();
        }
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

impl Env {
    /// SIGKILLs the home's daemon (one gone already is fine) and waits until it is
    /// gone; returns its pid.
    ///
    /// # Panics
    /// When no daemon wrote its pid file, or it outlives SIGKILL by 5 s.
    pub(crate) fn crash_daemon(&self) -> i32 {
        let pid = self.daemon_pid().expect("the daemon wrote its pid file");
        // ESRCH: it is gone already.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        wait_until(Duration::from_secs(5), || !alive(pid))
            .unwrap_or_else(|()| panic!("daemon {pid} did not die of SIGKILL"));
        pid
    }

    /// The rows of `herd ps --json ARGS…`.
    pub(crate) fn ps_rows(&self, args: &[&str]) -> Vec<serde_json::Value> {
        let mut all = vec!["ps", "--json"];
        all.extend_from_slice(args);
        let listed = self.json(&all);
        listed["processes"]
            .as_array()
            .unwrap_or_else(|| panic!("herd {all:?} printed no processes: {listed}"))
            .clone()
    }

    /// The row of session `id` in `herd ps --json ARGS…`, if it is listed.
    pub(crate) fn ps_row(&self, args: &[&str], id: &str) -> Option<serde_json::Value> {
        self.ps_rows(args)
            .into_iter()
            .find(|row| row["session_id"] == id)
    }

    /// `herd poll ID --json`, which must succeed.
    pub(crate) fn poll_json(&self, id: &str) -> serde_json::Value {
        self.json(&["poll", id, "--json"])
    }

    /// `herd run --json ARGS…`, which must succeed: the new session's id.
    pub(crate) fn start_json(&self, args: &[&str]) -> String {
        let mut all = vec!["run", "--json"];
        all.extend_from_slice(args);
        session_id(&self.json(&all))
    }
}

/// The `session_id` of an answer (a spawn's, a poll's).
pub(crate) fn session_id(answer: &serde_json::Value) -> String {
    answer["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no session_id in {answer}"))
        .to_owned()
}

/// A raw protocol connection (JSON-RPC over the daemon's socket, one line each),
/// for many calls without a process each.
#[derive(Debug)]
pub(crate) struct Conn {
    reader: std::io::BufReader<std::os::unix::net::UnixStream>,
    writer: std::os::unix::net::UnixStream,
    next_id: u64,
}

impl Conn {
    /// Connects (starting the daemon first) and says hello as `client`.
    pub(crate) fn open(env: &Env, client: &str) -> Conn {
        env.ok(&["ps"]);
        let stream = std::os::unix::net::UnixStream::connect(env.socket())
            .expect("the daemon's socket accepts");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("a timeout can be set");
        let mut conn = Conn {
            reader: std::io::BufReader::new(stream.try_clone().expect("the stream clones")),
            writer: stream,
            next_id: 0,
        };
        let hello = conn.result(
            "hello",
            serde_json::json!({"protocol": 1, "client": client}),
        );
        assert!(hello["pid"].is_u64(), "hello failed: {hello}");
        conn
    }

    /// The whole answer to one call (`result` or `error`).
    pub(crate) fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        use std::io::{BufRead, Write};
        self.next_id += 1;
        let request = serde_json::json!({
            "jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params,
        });
        self.writer
            .write_all(format!("{request}\n").as_bytes())
            .expect("the daemon reads");
        let mut line = String::new();
        self.reader
            .read_line(&mut line)
            .expect("the daemon answers within 30 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
    }

    /// The result of one call; panics on an error answer.
    pub(crate) fn result(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let answer = self.call(method, params.clone());
        assert!(
            answer["error"].is_null(),
            "{method} {params} failed: {answer}"
        );
        answer["result"].clone()
    }
}

/// Runs `owner`'s job named `name` to its end (exit 3 after one line of output,
/// `result-of-NAME`); its id.
pub(crate) fn finished_job(env: &Env, owner: &str, name: &str) -> String {
    let command = format!("echo result-of-{name}; exit 3");
    let id = env.start_json(&["--owner", owner, "--name", name, "--", &command]);
    let out = env.run(&["wait", &id, "--timeout", "20"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{name} did not end with its exit 3: {}",
        stderr(&out)
    );
    id
}
