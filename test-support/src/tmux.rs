//! A private tmux server for driving a full-screen program on a real terminal of
//! a fixed size: keys go in with `send-keys`, what a person would see comes out
//! of `capture-pane`, polled with a deadline. The server runs on a socket of the
//! test's own and is killed when the driver drops, failed test or not.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::home::command;
use crate::wait::poll_until;

/// How long anything on screen may take to show (CI runs on 2 busy cores).
pub const SCREEN_DEADLINE: Duration = Duration::from_secs(30);

/// One tmux server running one shell in a window of a fixed size.
#[derive(Debug)]
pub struct Tmux {
    socket: PathBuf,
    /// The session (and so the pane) every command targets.
    target: String,
    /// Capture with `-J`: a line longer than the pane reads as one line.
    joined: bool,
}

impl Tmux {
    /// A server on `socket` whose session `target` is one `cols` x `rows` pane
    /// running `/bin/sh` with `HERD_HOME=home`, a `$ ` prompt, UTF-8, no
    /// backtraces, none of the caller's herd settings or tmux, and `extra`; it
    /// returns once the shell's prompt shows.
    ///
    /// # Panics
    /// When tmux is missing or fails.
    pub fn start(
        socket: PathBuf,
        target: &str,
        home: &Path,
        (cols, rows): (u16, u16),
        extra: &[(&str, &str)],
    ) -> Tmux {
        let tmux = Tmux {
            socket,
            target: target.to_owned(),
            joined: false,
        };
        let mut cmd = tmux.cmd();
        cmd.args(["-f", "/dev/null", "new-session", "-d", "-s", target])
            .args(["-x", &cols.to_string(), "-y", &rows.to_string()])
            .arg("/bin/sh")
            .env("HERD_HOME", home)
            .env("PS1", "$ ")
            .env("LANG", "C.UTF-8")
            .env("RUST_BACKTRACE", "0")
            .env_remove("HERD_OWNER")
            .env_remove("HERD_LOG")
            .env_remove("INVOCATION_ID")
            .env_remove("TMUX");
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let out = cmd
            .output()
            .expect("tmux runs (it is installed by .ci/run)");
        assert!(
            out.status.success(),
            "tmux new-session failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The window keeps the size asked for, whatever attaches.
        tmux.run(&["set-option", "-g", "window-size", "manual"]);
        // `$ `, or `# ` for root (dash ignores PS1 from the environment then).
        tmux.wait_for("the shell's prompt", |s| s.contains('$') || s.contains('#'));
        tmux
    }

    /// From now on the screen is captured joined (`capture-pane -J`): a line
    /// longer than the pane is one line.
    pub fn joined(mut self) -> Tmux {
        self.joined = true;
        self
    }

    /// A tmux command for this server.
    pub fn cmd(&self) -> Command {
        let mut cmd = command("tmux");
        cmd.arg("-S").arg(&self.socket).stdin(Stdio::null());
        cmd
    }

    /// Runs a tmux command and returns its stdout.
    ///
    /// # Panics
    /// When it fails.
    pub fn run(&self, args: &[&str]) -> String {
        let out = self.cmd().args(args).output().expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types `text` as is, then Enter.
    pub fn type_line(&self, text: &str) {
        self.run(&["send-keys", "-t", &self.target, "-l", text]);
        self.keys(&["Enter"]);
    }

    /// Sends keys by tmux's names (`q`, `Enter`, `C-c`, `Down`).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.target];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Sends one byte as the terminal would for a control key (`0x1c` is Ctrl-\).
    pub fn control(&self, byte: u8) {
        self.run(&[
            "send-keys",
            "-t",
            &self.target,
            "-H",
            &format!("{byte:02x}"),
        ]);
    }

    /// The screen as text.
    pub fn screen(&self) -> String {
        if self.joined {
            self.run(&["capture-pane", "-p", "-J", "-t", &self.target])
        } else {
            self.run(&["capture-pane", "-p", "-t", &self.target])
        }
    }

    /// The screen with its colours as escape sequences.
    pub fn screen_with_colours(&self) -> String {
        self.run(&["capture-pane", "-p", "-e", "-t", &self.target])
    }

    /// A tmux format of the pane (`#{alternate_on}`, `#{pane_height}`).
    pub fn format(&self, format: &str) -> String {
        self.run(&["display-message", "-p", "-t", &self.target, format])
            .trim()
            .to_owned()
    }

    /// The pid of the pane's shell.
    ///
    /// # Panics
    /// When tmux does not name it.
    pub fn shell_pid(&self) -> i32 {
        self.format("#{pane_pid}")
            .parse()
            .expect("tmux names the pane's pid")
    }

    /// Polls the screen until `cond` holds, and returns it.
    ///
    /// # Panics
    /// After [`SCREEN_DEADLINE`], naming `what` with the last screen.
    pub fn wait_for(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let mut last = String::new();
        if poll_until(SCREEN_DEADLINE, || {
            last = self.screen();
            cond(&last)
        })
        .is_err()
        {
            panic!("timed out waiting for {what}; the screen shows:\n{last}");
        }
        last
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self
            .cmd()
            .arg("kill-server")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
