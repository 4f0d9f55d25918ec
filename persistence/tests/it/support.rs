//! Shared helpers: temp homes, and children that are this test binary re-run
//! with one test selected and a role in the environment.
//!
//! A child test checks `HERD_IT_ROLE`; without it the test does nothing, so a
//! plain `cargo test` runs each child entry once as a no-op. Children write
//! their progress as `herd-child: ...` lines on stdout, which a reader thread
//! forwards to a channel the parent waits on with deadlines.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use herd_persistence::Home;

/// The environment variable that turns a child entry test into a child.
pub(crate) const ROLE: &str = "HERD_IT_ROLE";

/// The prefix of every progress line a child prints.
pub(crate) const PREFIX: &str = "herd-child: ";

/// A fresh home in its own temp dir.
pub(crate) fn temp_home() -> (tempfile::TempDir, Home) {
    let tmp = tempfile::tempdir().expect("create a temp dir");
    let home = Home::new(tmp.path());
    (tmp, home)
}

/// The role this process was started with, if it is a child.
pub(crate) fn role() -> Option<String> {
    std::env::var(ROLE).ok()
}

/// Writes one progress line to stdout, unbuffered so a SIGKILL right after
/// loses nothing that was written.
pub(crate) fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // A parent that stopped reading is about to kill us; nothing to do.
    let _ = writeln!(out, "{PREFIX}{line}");
    let _ = out.flush();
}

/// The raw command for `program`: the one place this test binary builds a
/// `Command`, for child copies of itself and for `mount`.
#[expect(clippy::disallowed_methods, reason = "test drives a raw child")]
pub(crate) fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    Command::new(program)
}

/// A running child copy of this test binary, killed when dropped.
pub(crate) struct ChildTest {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl ChildTest {
    /// Runs the test `test_name` of this binary as a child with `ROLE=role`
    /// and the extra environment `env`.
    pub(crate) fn spawn(test_name: &str, role: &str, env: &HashMap<&str, String>) -> ChildTest {
        let exe = std::env::current_exe().expect("path of this test binary");
        let mut cmd = command(exe);
        cmd.args([
            test_name,
            "--exact",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env(ROLE, role)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
        let mut child = cmd.spawn().expect("spawn a copy of the test binary");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout was piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix(PREFIX)
                    && tx.send(rest.to_owned()).is_err()
                {
                    break;
                }
            }
        });
        ChildTest {
            child,
            stdin,
            lines: rx,
            seen: Vec::new(),
        }
    }

    /// The child's pid.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one line to the child's stdin.
    pub(crate) fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{line}").expect("write to the child's stdin");
        stdin.flush().expect("flush the child's stdin");
    }

    /// The next progress line, or `None` once the child closed stdout.
    /// Fails after `deadline` saying what was awaited.
    pub(crate) fn next_line(&mut self, deadline: Duration, awaited: &str) -> Option<String> {
        match self.lines.recv_timeout(deadline) {
            Ok(line) => {
                self.seen.push(line.clone());
                Some(line)
            }
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => panic!(
                "waited {deadline:?} for {awaited} from child {}; it said so far: {:?}",
                self.child.id(),
                self.seen
            ),
        }
    }

    /// Waits for a line starting with `prefix`, failing after `deadline`.
    pub(crate) fn expect_line(&mut self, prefix: &str, deadline: Duration) -> String {
        let until = Instant::now() + deadline;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.next_line(left, prefix) {
                Some(line) if line.starts_with(prefix) => return line,
                Some(_) => {}
                None => panic!(
                    "child {} exited before saying {prefix:?}; it said: {:?}",
                    self.child.id(),
                    self.seen
                ),
            }
        }
    }

    /// SIGKILLs the child, reaps it and returns every line it managed to
    /// write, including those still in the pipe.
    pub(crate) fn kill_and_drain(mut self, deadline: Duration) -> Vec<String> {
        self.child.kill().expect("SIGKILL the child");
        self.child.wait().expect("reap the child");
        while self
            .next_line(deadline, "the rest of the child's output")
            .is_some()
        {}
        std::mem::take(&mut self.seen)
    }

    /// Waits for the child to exit on its own and asserts it succeeded;
    /// returns every line it wrote.
    pub(crate) fn finish(mut self, deadline: Duration) -> Vec<String> {
        drop(self.stdin.take());
        while self.next_line(deadline, "the child's exit").is_some() {}
        let status = self.child.wait().expect("reap the child");
        assert!(
            status.success(),
            "child failed with {status}; it said: {:?}",
            self.seen
        );
        std::mem::take(&mut self.seen)
    }
}

impl Drop for ChildTest {
    fn drop(&mut self) {
        // Kill-on-drop: a failing test never leaves a child looping.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits a random time below `max` so the SIGKILL that follows lands at a
/// random point of the child's work rather than right after its last line.
/// Nothing waits on this delay; it only moves the kill.
#[expect(
    clippy::disallowed_methods,
    reason = "a random delay places a SIGKILL at a random point; it synchronises nothing"
)]
pub(crate) fn random_delay(rng: &mut fastrand::Rng, max: Duration) {
    let micros = u64::try_from(max.as_micros()).unwrap_or(u64::MAX);
    std::thread::sleep(Duration::from_micros(rng.u64(0..micros.max(1))));
}

/// Names of the entries of `dir`, sorted.
pub(crate) fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list dir")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}
